"""--pack_sequences against fixed padding and --bucket_by_length: prediction.

MRPC test pairs (the first --num_examples) are converted with the
classifier's own code at --max_seq_length (BERT-Base uncased vocabulary
from the shared data), then predicted by a BERT-Base-shaped encoder with
random weights and the pooler, three ways, in one process, alternating by
repetition:
  * fixed: batches of --predict_batch_size inputs padded to the length;
  * bucket: the same batches in input order, each cut to its longest input
    rounded up to a bucket (`lengths.bucket_lengths`);
  * packed: rows of whole examples (`packing.pack`), --predict_batch_size
    rows a batch, block-diagonal attention, pooled at each [CLS].
Each line gives the best of --repetitions (seconds from the first batch to
the last output, one warm-up batch of each shape first), the speed-up over
fixed, rows, examples per row and the real tokens' share of the computed
ones. The CPU's vector flags and the load average come first.

Run from the repo root:
  python bench/bench_packing.py --num_examples=256
"""

import os
import sys
import time

from absl import app
from absl import flags
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# pylint: disable=g-import-not-at-top,wrong-import-position
import tensorflow.compat.v1 as tf

from bert_tf.tasks.classifier import data
from bert_tf.tasks.classifier import features as features_lib
from bert_tf.train import lengths as lengths_lib
from bert_tf.train import packing
import modeling
import tokenization
# pylint: enable=g-import-not-at-top,wrong-import-position

FLAGS = flags.FLAGS
flags.DEFINE_integer("num_examples", 256, "MRPC test pairs predicted.")
flags.DEFINE_integer("max_seq_length", 128, "As the scripts' flag.")
flags.DEFINE_integer("predict_batch_size", 8, "The scripts' default.")
flags.DEFINE_integer("max_examples_per_row", 16, "As the scripts' flag.")
flags.DEFINE_integer("repetitions", 2, "Timed repetitions.")
flags.DEFINE_integer("num_hidden_layers", 12, "Encoder layers (Base: 12).")


def _shared(*parts):
  return os.path.join(os.environ.get("BERT_SHARED_DIR", os.path.join(
      os.path.dirname(__file__), "..", "..", "shared")), *parts)


def _cpu_flags():
  try:
    with open("/proc/cpuinfo") as f:
      words = next(line for line in f if line.startswith("flags")).split()
  except (OSError, StopIteration):
    return "unknown"
  return " ".join(w for w in words if w.startswith(("avx", "amx", "fma")))


def _inputs():
  """Each example's unpadded (input_ids, segment_ids)."""
  tokenizer = tokenization.FullTokenizer(_shared(
      "data", "vocab", "uncased_L-12_H-768_A-12", "vocab.txt"))
  processor = data.get_processor("mrpc")
  examples = processor.get_test_examples(_shared("data", "glue", "MRPC"))
  examples = examples[:FLAGS.num_examples]
  inputs = []
  for feature in features_lib.convert_examples_to_features(
      examples, processor.get_labels(), FLAGS.max_seq_length, tokenizer):
    length = sum(feature.input_mask)
    inputs.append({"input_ids": feature.input_ids[:length],
                   "segment_ids": feature.segment_ids[:length]})
  return inputs


def _padded(batch, length):
  ids = np.zeros([len(batch), length], np.int32)
  types, mask = np.zeros_like(ids), np.zeros_like(ids)
  for i, item in enumerate(batch):
    length = len(item["input_ids"])
    ids[i, :length] = item["input_ids"]
    types[i, :length] = item["segment_ids"]
    mask[i, :length] = 1
  return {"input_ids": ids, "token_type_ids": types, "input_mask": mask}


def _feeds(inputs):
  """name -> (list of feed dicts, rows, real tokens / computed tokens)."""
  size, length = FLAGS.predict_batch_size, FLAGS.max_seq_length
  batches = [inputs[i:i + size] for i in range(0, len(inputs), size)]
  real = sum(len(item["input_ids"]) for item in inputs)
  buckets = lengths_lib.bucket_lengths(length)
  cut = [_padded(b, lengths_lib.python_bucket_length(
      buckets, max(len(item["input_ids"]) for item in b))) for b in batches]
  rows = packing.pack(inputs, length, FLAGS.max_examples_per_row)
  packed = [{name: np.array([row[name] for row in rows[i:i + size]],
                            np.int32)
             for name in ("input_ids", "segment_ids", "input_mask",
                          "position_ids", "cls_positions")}
            for i in range(0, len(rows), size)]
  return {
      "fixed": ([_padded(b, length) for b in batches], len(inputs),
                real / (len(inputs) * length)),
      "bucket": (cut, len(inputs),
                 real / sum(f["input_ids"].size for f in cut)),
      "packed": (packed, len(rows), real / (len(rows) * length))}


def main(_):
  print("cpu flags: %s" % _cpu_flags())
  print("load average: %s" % " ".join("%.2f" % x for x in os.getloadavg()))
  print("TensorFlow %s" % tf.__version__)
  inputs = _inputs()
  feeds = _feeds(inputs)
  config = modeling.BertConfig(
      30522, hidden_size=768, num_hidden_layers=FLAGS.num_hidden_layers,
      num_attention_heads=12, intermediate_size=3072)
  graph = tf.Graph()
  with graph.as_default():
    holders = {name: tf.placeholder(tf.int32, [None, None], name) for name in
               ("input_ids", "token_type_ids", "input_mask", "segment_ids",
                "position_ids", "cls_positions")}
    plain = modeling.BertModel(
        config, False, holders["input_ids"], holders["input_mask"],
        holders["token_type_ids"], scope="bert").get_pooled_output()
    with tf.variable_scope(tf.get_variable_scope(), reuse=True):
      rows = modeling.BertModel(
          config, False, holders["input_ids"], holders["input_mask"],
          holders["segment_ids"], scope="bert",
          position_ids=holders["position_ids"], block_diagonal=True,
          pool_positions=holders["cls_positions"]).get_pooled_output()
    session = tf.Session()
    session.run(tf.global_variables_initializer())

  def run(name):
    output = rows if name == "packed" else plain
    batches = feeds[name][0]
    warm = {}
    for feed in batches:  # One warm-up run of each shape.
      warm.setdefault(feed["input_ids"].shape, feed)
    for feed in warm.values():
      session.run(output, {holders[k]: v for k, v in feed.items()})
    start = time.perf_counter()
    for feed in batches:
      session.run(output, {holders[k]: v for k, v in feed.items()})
    return time.perf_counter() - start

  best = {name: float("inf") for name in feeds}
  for repetition in range(FLAGS.repetitions):
    for name in feeds:
      seconds = run(name)
      best[name] = min(best[name], seconds)
      print("  repetition %d: %s %.2f s" % (repetition, name, seconds),
            flush=True)
  print("MRPC test, %d examples, length %d, batch %d, %d layers:" % (
      len(inputs), FLAGS.max_seq_length, FLAGS.predict_batch_size,
      FLAGS.num_hidden_layers))
  for name, (_, count, fill) in feeds.items():
    print("  %-6s %7.2f s  %5.2fx  rows %4d  examples/row %5.2f  fill %4.0f%%"
          % (name, best[name], best["fixed"] / best[name], count,
             len(inputs) / count, 100 * fill))


if __name__ == "__main__":
  app.run(main)
