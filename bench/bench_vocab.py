# coding=utf-8
"""Measures learn_vocab.py's vocabularies against the released uncased one.

Learns uncased WordPiece vocabularies of `--sizes` tokens from the English
text of bench/bench_pretraining_data.py (SQuAD/XQuAD paragraphs, GLUE RTE
and SST-2 sentences, the BERT sample text), holding out every
`--hold_out`-th document, and prints a markdown table of pieces per word
and `[UNK]` rate on the held-out documents for each learned vocabulary and
for the released `uncased_L-12_H-768_A-12/vocab.txt` (the reference, in the
same run), with learning times and the CPU flags.

  .venv/bin/python bench/bench_vocab.py  (after ./setup.sh --beam)
"""

import os
import shutil
import sys
import tempfile
import time

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
import bench_pretraining_data as base  # pylint: disable=g-import-not-at-top  # The same text.
from bert_tf.corpus import vocab as vocab_utils  # pylint: disable=g-import-not-at-top  # After the path.

FLAGS = flags.FLAGS


def define_flags():
  flags.DEFINE_string("sizes", "8000,30522", "Vocabulary sizes to learn.")
  flags.DEFINE_integer("hold_out", 10, "Every N-th document is held out.")


def main(_):
  work_dir = tempfile.mkdtemp(prefix="bench_vocab_")
  try:
    documents = base._english_documents()  # pylint: disable=protected-access
    train = [d for k, d in enumerate(documents) if k % FLAGS.hold_out]
    held = [d for k, d in enumerate(documents) if not k % FLAGS.hold_out]
    paths = {}
    for name, docs in (("train", train), ("held_out", held)):
      paths[name] = os.path.join(work_dir, name + ".txt")
      with open(paths[name], "w", encoding="utf-8") as f:
        f.write("\n\n".join(docs) + "\n")
    released = base._shared("data", "vocab", "uncased_L-12_H-768_A-12",  # pylint: disable=protected-access
                            "vocab.txt")
    print("Train: %d documents, %.1f MB; held out: %d documents, %.2f MB. "
          "CPU: %s\n" % (len(train), os.path.getsize(paths["train"]) / 1e6,
                         len(held), os.path.getsize(paths["held_out"]) / 1e6,
                         base._cpu_flags()))  # pylint: disable=protected-access
    rows = []
    for size in [int(s) for s in FLAGS.sizes.split(",")]:
      start = time.process_time()
      vocab = vocab_utils.learn([paths["train"]], size, True)
      seconds = time.process_time() - start
      path = os.path.join(work_dir, "vocab_%d.txt" % size)
      vocab_utils.write_vocab(path, vocab)
      rows.append(("learned, %d tokens (%.1f CPU s)" % (len(vocab), seconds),
                   path))
    rows.append(("released uncased (30522)", released))
    print("| vocabulary | held-out words | pieces/word | [UNK] rate |")
    print("|---|---|---|---|")
    for name, path in rows:
      stats = vocab_utils.measure(path, True, [paths["held_out"]])
      print("| %s | %d | %.3f | %.2f%% |" % (
          name, stats["words"], stats["pieces_per_word"],
          100 * stats["unk_rate"]))
  finally:
    shutil.rmtree(work_dir, ignore_errors=True)


if __name__ == "__main__":
  define_flags()
  app.run(main)
