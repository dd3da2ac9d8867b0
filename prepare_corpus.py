# coding=utf-8
"""Turns a MediaWiki XML dump or plain text into a pre-training corpus.

Output: text shards in the format `create_pretraining_data.py` reads, one
sentence per line and a blank line after each document, written by an
Apache Beam pipeline (needs `pip install .[beam]`):

  python prepare_corpus.py \
      --input_file=enwiki-latest-pages-articles1.xml-p1p41242.bz2 \
      --output_file=corpus/wiki.txt --num_shards=4
  # -> corpus/wiki.txt-00000-of-00004 ... -00003-of-00004

`--input_file` takes comma-separated files or globs: MediaWiki exports
(`.xml`, `.xml.bz2`: Wikipedia's `pages-articles` files) and plain-text files
(any other name: a blank line between documents, each other line a
paragraph). From a dump, redirects and pages outside the article namespace
are skipped, and templates, tables, references, lists, headings and the
closing link sections are removed (`bert_tf.corpus.wiki`: mwxml,
mwparserfromhell); every paragraph is split into sentences with sentencex.
The shards are the same for the same input, whatever the runner.
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
      "Comma-separated files or globs: MediaWiki XML dumps (.xml, .xml.bz2) "
      "and plain-text files (blank lines between documents).")
  flags.DEFINE_string(
      "output_file", None,
      "Output text: one path (with --num_shards N > 1, shard k is "
      "<path>-0000k-of-0000N) or N comma-separated paths.")
  cli_flags.define_flags("num_shards", "pipeline_options", num_shards=1)
  flags.DEFINE_string(
      "language", "en",
      "Language code of the text, for the sentence splitter (sentencex: "
      "ISO 639 codes such as en, de, zh; others fall back to related "
      "languages or English rules).")


# Run as a command: --help and flag errors answer here, before the
# imports below load TensorFlow.
flags_first.parse_when_run_as_command(__name__, define_flags)

import time

from absl import logging

from bert_tf import io as io_utils
from bert_tf.checks import numbers as number_checks
from bert_tf.cli import entry
from bert_tf.corpus import prepare


def main(_):
  start = time.time()
  for name in ("input_file", "output_file"):
    if not FLAGS[name].value:
      raise ValueError("--%s is required" % name)
  if FLAGS.num_shards < 1:
    raise ValueError("--num_shards is %d; expected at least 1" %
                     FLAGS.num_shards)
  number_checks.check_flags(FLAGS)
  input_files = io_utils.expand_file_patterns(FLAGS.input_file, "input_file")
  output_files = [p.strip() for p in FLAGS.output_file.split(",")
                  if p.strip()]
  for path in output_files:
    io_utils.check_output_file(path, "output_file")
  counts = prepare.run(input_files, output_files, FLAGS.num_shards,
                       FLAGS.pipeline_options, FLAGS.language)
  logging.info("Done: %d documents, %d sentences (%d articles read, %d pages "
               "skipped) in %.1f s", counts.get("documents", 0),
               counts.get("sentences", 0), counts.get("pages", 0),
               counts.get("skipped", 0), time.time() - start)


def cli():
  """Command-line entry point: `main`, with the flags defined here or, run
  as a command, above."""
  entry.run_main(main, define_flags)


if __name__ == "__main__":
  cli()
