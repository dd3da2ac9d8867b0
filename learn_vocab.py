# coding=utf-8
"""Learns a WordPiece vocabulary, or adds domain words to an existing one.

Learn (Hugging Face `tokenizers`' WordPiece trainer on words pre-tokenized
exactly as `FullTokenizer` splits them; needs `pip install .[beam]`):

  python learn_vocab.py --input_file=corpus/wiki.txt-* \
      --output_file=my_vocab.txt --vocab_size=30522 --do_lower_case=true \
      --eval_file=held_out.txt \
      --compare_vocab_file=uncased_L-12_H-768_A-12/vocab.txt

The vocabulary has the released layout: `[PAD]`, `--num_unused` slots
`[unused0]`... (99 by default, so `[UNK]`, `[CLS]`, `[SEP]`, `[MASK]` get
the released ids 100-103), then the learned pieces. With `--eval_file`, the
pieces per word and the `[UNK]` rate on that held-out text are reported,
beside `--compare_vocab_file`'s.

Add domain words (one a line) to the `[unused*]` slots of an existing
vocabulary, keeping every other id (the reference FAQ's advice):

  python learn_vocab.py --vocab_file=uncased_L-12_H-768_A-12/vocab.txt \
      --extra_tokens=domain_words.txt --output_file=vocab_with_domain.txt
"""

from bert_tf.cli import quiet  # First: TensorFlow's start-up lines off.
quiet.when_run_as_command(__name__)

from absl import flags
from bert_tf.cli import flags as cli_flags
from bert_tf.cli import flags_first

__all__ = ["define_flags", "main", "cli"]

FLAGS = flags.FLAGS


def define_flags():
  """Defines the script's flags."""
  flags.DEFINE_string(
      "input_file", None,
      "Text to learn from: comma-separated files or globs (for example "
      "prepare_corpus.py's shards).")
  flags.DEFINE_string("output_file", None, "The vocab.txt to write.")
  flags.DEFINE_integer("vocab_size", 30522,
                       "Tokens in the learned vocabulary, special ones "
                       "included (the released English models: 30522).")
  cli_flags.define_flags("vocab_file", "do_lower_case")
  flags.DEFINE_integer("num_unused", 99,
                       "[unused*] slots after [PAD] (99: the special tokens "
                       "get the released ids).")
  flags.DEFINE_integer("min_frequency", 2,
                       "How often a merge must occur to become a piece.")
  flags.DEFINE_string(
      "extra_tokens", None,
      "File of domain words, one a line: put them into --vocab_file's "
      "[unused*] slots, keeping every other id, and write --output_file.")
  flags.DEFINE_string("eval_file", None,
                      "Held-out text (files or globs): report pieces per "
                      "word and the [UNK] rate on it.")
  flags.DEFINE_string("compare_vocab_file", None,
                      "A vocabulary to report beside the written one on "
                      "--eval_file (e.g. the released uncased vocab.txt).")


# Run as a command: --help and flag errors answer here, before the
# imports below load TensorFlow.
flags_first.parse_when_run_as_command(__name__, define_flags)

from absl import logging

from bert_tf import io as io_utils
from bert_tf.checks import numbers as number_checks
from bert_tf.cli import entry
from bert_tf.corpus import vocab as vocab_utils


def _read_extra_tokens(path):
  """(line number, word) of each non-blank line of `path`."""
  return [(number, line.strip())
          for number, line in io_utils.read_lines(path, strict=True)
          if line.strip()]


def _report(paths, eval_files):
  """Logs and prints pieces per word and [UNK] rate of each vocabulary."""
  print("| vocabulary | words | pieces/word | [UNK] rate |")
  print("| --- | ---: | ---: | ---: |")
  for path in paths:
    stats = vocab_utils.measure(path, FLAGS.do_lower_case, eval_files)
    line = "| %s | %d | %.3f | %.2f%% |" % (
        path, stats["words"], stats["pieces_per_word"],
        100 * stats["unk_rate"])
    print(line)
    logging.info("%s", line)


def main(_):
  if not FLAGS.output_file:
    raise ValueError("--output_file is required")
  number_checks.check_flags(FLAGS)
  io_utils.check_output_file(FLAGS.output_file)
  eval_files = (io_utils.expand_file_patterns(FLAGS.eval_file, "eval_file")
                if FLAGS.eval_file else [])
  if FLAGS.compare_vocab_file and not eval_files:
    raise ValueError("--compare_vocab_file: needs --eval_file (the held-out "
                     "text to compare on)")
  if FLAGS.extra_tokens:
    if not FLAGS.vocab_file:
      raise ValueError("--extra_tokens: needs --vocab_file, the vocabulary "
                       "whose [unused*] slots take the words")
    if FLAGS.input_file:
      raise ValueError("--extra_tokens: give --vocab_file, not --input_file "
                       "(words are added, nothing is learned)")
    # Every line, duplicates included: each keeps its id.
    vocab = [line.strip() for _, line in io_utils.read_lines(FLAGS.vocab_file)]
    vocab, added, skipped = vocab_utils.add_extra_tokens(
        vocab, _read_extra_tokens(FLAGS.extra_tokens), FLAGS.do_lower_case)
    logging.info("Added %d words to [unused*] slots; %d already in the "
                 "vocabulary: %s", len(added), len(skipped),
                 " ".join(skipped[:20]))
  else:
    if not FLAGS.input_file:
      raise ValueError("--input_file is required (or --extra_tokens with "
                       "--vocab_file)")
    input_files = io_utils.expand_file_patterns(FLAGS.input_file)
    vocab = vocab_utils.learn(input_files, FLAGS.vocab_size,
                              FLAGS.do_lower_case, FLAGS.num_unused,
                              FLAGS.min_frequency)
  vocab_utils.write_vocab(FLAGS.output_file, vocab)
  logging.info("Wrote %s (%d tokens)", FLAGS.output_file, len(vocab))
  if eval_files:
    _report([FLAGS.output_file] + ([FLAGS.compare_vocab_file]
                                   if FLAGS.compare_vocab_file else []),
            eval_files)


def cli():
  """Command-line entry point: `main`, with the flags defined here or, run
  as a command, above."""
  entry.run_main(main, define_flags)


if __name__ == "__main__":
  cli()
