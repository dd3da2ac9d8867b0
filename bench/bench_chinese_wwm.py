# coding=utf-8
"""Benchmarks `create_pretraining_data.py --do_chinese_whole_word_mask`.

On the shared Chinese Wikipedia text (CMRC 2018 contexts, 848 documents) and
the Chinese BERT vocabulary, in one process, makes the instances three ways
in the same run: the reference's masking (flag off), the reference's
`--do_whole_word_mask` (which groups by `##` only, so Chinese characters are
masked one by one) and `--do_chinese_whole_word_mask`. For each it prints:
masked positions and masked words per instance (a word: a group masked
whole; Chinese words of two or more characters counted apart), the masked
fraction of the tokens, and the CPU seconds to read and to make the
instances, with the ratio to the flag-off run; then one decoded instance
with the flag (its masked words in brackets). Prints the CPU flags and the
load average (the machine may be shared).

  python bench/bench_chinese_wwm.py              # dupe_factor 1, seed 12345
  python bench/bench_chinese_wwm.py --dupe_factor=5 --max_seq_length=512

The shared folder is `$BERT_SHARED_DIR` (default `../shared`).
"""

import os
import random
import statistics
import sys
import time

from absl import app
from absl import flags

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, _REPO)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The CPU flags line and the shared folder of the other pre-training bench.
import bench_pretraining_data as base  # pylint: disable=g-import-not-at-top
import create_pretraining_data as cpd  # pylint: disable=g-import-not-at-top
from bert_tf.tasks.pretraining import whole_words  # pylint: disable=g-import-not-at-top
import tokenization  # pylint: disable=g-import-not-at-top

FLAGS = flags.FLAGS


def define_flags():
  flags.DEFINE_integer("dupe_factor", 1, "--dupe_factor of each run.")
  flags.DEFINE_integer("max_seq_length", 128, "--max_seq_length.")
  flags.DEFINE_integer("max_predictions_per_seq", 20,
                       "--max_predictions_per_seq.")
  flags.DEFINE_integer("random_seed", 12345, "--random_seed.")
  flags.DEFINE_integer("reps", 3, "Rounds; each runs the three ways in "
                       "turn (fresh tokenizer caches); medians reported.")


def _text(instance, group):
  """The unmasked text of a group of positions (`##` removed)."""
  tokens = whole_words.unmasked_tokens(instance)
  return "".join(tokens[p] for p in group).replace("##", "")


def _masked_words(instance):
  """Groups (lists of positions) masked whole: `##` words, and segmenter
  words where the tokens carry their marks (flag on)."""
  masked = set(instance.masked_lm_positions)
  tokens = whole_words.unmasked_tokens(instance)
  return [group for group in whole_words.word_groups(tokens)
          if all(p in masked for p in group)]


def _run(name, documents_source, vocab, wwm, chinese):
  # A fresh tokenizer: its word caches would favour later runs.
  tokenizer = tokenization.FullTokenizer(vocab, do_lower_case=True)
  start = time.process_time()
  # pylint: disable-next=protected-access
  documents = cpd._read_documents(documents_source, tokenizer,
                                  chinese_words_too=chinese)
  read_s = time.process_time() - start
  start = time.process_time()
  instances = cpd._instances_from_documents(  # pylint: disable=protected-access
      documents, tokenizer, FLAGS.max_seq_length, FLAGS.dupe_factor, 0.1,
      0.15, FLAGS.max_predictions_per_seq, random.Random(FLAGS.random_seed),
      wwm or chinese)
  make_s = time.process_time() - start
  num_tokens = sum(len(i.tokens) for i in instances)
  num_masked = sum(len(i.masked_lm_positions) for i in instances)
  # Each run's own unit: a position, a ## word, or a ## or segmenter word.
  words = [_masked_words(i) if wwm or chinese else
           [[p] for p in i.masked_lm_positions] for i in instances]
  long_chinese = sum(
      1 for instance, groups in zip(instances, words) for g in groups
      if len(g) > 1 and whole_words.is_chinese(_text(instance, g)))
  return {"name": name, "instances": instances, "read_s": read_s,
          "make_s": make_s, "masked_per_instance": num_masked / len(instances),
          "words_per_instance": sum(map(len, words)) / len(instances),
          "long_chinese_per_instance": long_chinese / len(instances),
          "fraction": num_masked / num_tokens}


def _decoded(instance):
  """The instance's text with each masked word in brackets."""
  tokens = whole_words.unmasked_tokens(instance)
  masked = set(instance.masked_lm_positions)
  starts = {g[0]: g for g in whole_words.word_groups(tokens)
            if all(p in masked for p in g)}
  out = []
  index = 0
  while index < len(tokens):
    group = starts.get(index)
    if group:
      out.append("[" + "".join(tokens[p].replace("##", "") for p in group) +
                 "]")
      index = group[-1] + 1
    else:
      out.append(tokens[index])
      index += 1
  text = "".join(out).replace("##", "")
  return text.replace("[SEP]", " [SEP] ").replace("[CLS]", "[CLS] ")


def main(_):
  shared = base._shared  # pylint: disable=protected-access
  corpus = shared("data", "pretrain", "zh_cmrc2018_dev_wiki.txt")
  vocab = shared("data", "vocab", "chinese_L-12_H-768_A-12", "vocab.txt")
  start = time.process_time()
  whole_words.load_segmenter()
  load_s = time.process_time() - start
  sources = [(corpus, 0, None)]
  ways = [("reference masking (flag off)", False, False),
          ("--do_whole_word_mask (## only)", True, False),
          ("--do_chinese_whole_word_mask", False, True)]
  rounds = [[_run(name, sources, vocab, wwm, chinese)
             for name, wwm, chinese in ways] for _ in range(FLAGS.reps)]
  runs = [dict(rounds[0][k], **{
      key: statistics.median(r[k][key] for r in rounds)
      for key in ("read_s", "make_s")}) for k in range(len(ways))]
  print("corpus %s (%d bytes), vocab %s; dupe_factor %d, max_seq_length %d, "
        "max_predictions_per_seq %d, seed %d" % (
            corpus, os.path.getsize(corpus), vocab, FLAGS.dupe_factor,
            FLAGS.max_seq_length, FLAGS.max_predictions_per_seq,
            FLAGS.random_seed))
  print("CPU: %s; load average %s" % (
      base._cpu_flags(),  # pylint: disable=protected-access
      " ".join("%.2f" % x for x in os.getloadavg())))
  print("jieba dictionary load: %.2f s CPU (once per process); CPU "
        "seconds are medians of %d rounds" % (load_s, FLAGS.reps))
  print()
  print("| run | instances | masked positions / instance | masked words / "
        "instance | of which Chinese words of 2+ characters | masked fraction "
        "| read CPU s | make CPU s | read ratio | make ratio |")
  print("|---|---|---|---|---|---|---|---|---|---|")
  ref = runs[0]
  for run in runs:
    print("| %s | %d | %.2f | %.2f | %.2f | %.4f | %.2f | %.2f | %.2f | %.2f |"
          % (run["name"], len(run["instances"]), run["masked_per_instance"],
             run["words_per_instance"], run["long_chinese_per_instance"],
             run["fraction"], run["read_s"], run["make_s"],
             run["read_s"] / ref["read_s"], run["make_s"] / ref["make_s"]))
  instance = runs[2]["instances"][0]
  print()
  print("Decoded instance 0 with --do_chinese_whole_word_mask (masked words "
        "in brackets; %d positions):" % len(instance.masked_lm_positions))
  print(_decoded(instance))
  print("masked words:", " ".join(
      _text(instance, g) for g in _masked_words(instance)))


if __name__ == "__main__":
  define_flags()
  app.run(main)
