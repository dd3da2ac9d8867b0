"""--pack_sequences against fixed padding and --bucket_by_length.

A spread subset of a data set (--num_examples, every n-th example) is
converted with the task's own code at --max_seq_length: MRPC test (or
train) pairs and SST-2 dev (or train) sentences with the classifier's
features and uncased vocabulary, CoNLL-2003 test (or train) sentences with
the NER features (`--doc_stride` windows) and cased vocabulary, all from
the shared data. Each variant runs the scripts' own `model_fn`
(`classifier.model.head_for` or `ner.model.TokenHead` on a
BERT-Base-shaped encoder, random weights) in its own graph:
  * fixed: batches of --batch_size inputs padded to the length;
  * bucket: prediction: the same batches in input order, each cut to its
    longest input rounded up to a bucket (`lengths.bucket_lengths`);
    training: batches of one bucket each, as the bucketed input_fn makes;
  * packed: rows of whole examples (`packing.pack`), block-diagonal
    attention, each example's own [CLS] (NER: its own tokens);
    prediction: --batch_size rows a batch; training:
    max(1, round(batch_size / examples per row)) rows, as the scripts.
--phase=predict fetches the predictions; --phase=train runs one epoch of
the subset (forward, backward and the project's AdamW update, dropout on);
--phase=fill only prints rows and fill, also for SQuAD windows
(`run_squad.py`'s code) and for records with `input_mask` (--records, e.g.
`create_pretraining_data.py`'s instances).
--data=pretrain builds `create_pretraining_data.py`'s instances of --corpus
(default flags, uncased vocabulary, --max_predictions_per_seq) and times
one epoch of `run_pretraining.py`'s training step (`pretraining_head`:
masked LM and next sentence) on them fixed (--batch_size instances a
batch) against packed (`records.PackedSerializer`'s rows,
max(1, round(batch_size / instances per row)) rows a batch).
Each line gives the best of --repetitions (seconds from the first batch to
the last output, after one untimed run of each batch shape), the speed-up
over fixed, rows, examples per row and the real tokens' share of the
computed ones. The variants alternate within each repetition. The CPU's
vector flags and the load average (before and after) are printed.

Run from the repo root:
  python bench/bench_packing.py --data=mrpc --num_examples=256
  python bench/bench_packing.py --data=sst2 --phase=train --num_examples=128
  python bench/bench_packing.py --data=squad --phase=fill --max_seq_length=384
  python bench/bench_packing.py --data=pretrain --phase=train \
      --max_seq_length=512 --max_predictions_per_seq=80 --num_hidden_layers=2
"""

import random

import os
import sys
import time

from absl import app
from absl import flags
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# pylint: disable=g-import-not-at-top,wrong-import-position
import tensorflow.compat.v1 as tf

from bert_tf.tasks.classifier import data
from bert_tf.tasks.classifier import features as features_lib
from bert_tf.tasks.classifier import model as classifier_model
from bert_tf.tasks.ner import features as ner_features
from bert_tf.tasks.ner import model as ner_model
from bert_tf.tasks.ner import reader as ner_reader
from bert_tf.tasks.pretraining import heads as pretraining_heads
from bert_tf.tasks.pretraining import instances as pretraining_instances
from bert_tf.tasks.pretraining import records as pretraining_records
from bert_tf.tasks.squad import data as squad_data
from bert_tf.train import lengths as lengths_lib
from bert_tf.train import model_fn as model_fn_utils
from bert_tf.train import packing
from bert_tf.train import spec as spec_lib
import modeling
import tokenization
# pylint: enable=g-import-not-at-top,wrong-import-position

FLAGS = flags.FLAGS
flags.DEFINE_enum("data", "mrpc", ["mrpc", "sst2", "conll", "squad",
                                   "records", "pretrain"],
                  "MRPC, SST-2, CoNLL-2003; --phase=fill only: SQuAD v1.1 "
                  "dev (XQuAD's English questions) or --records; "
                  "--phase=train or fill: pre-training instances of "
                  "--corpus.")
flags.DEFINE_string("corpus", None,
                    "--data=pretrain: the text (default the shared "
                    "pretrain/sample_text.txt).")
flags.DEFINE_integer("max_predictions_per_seq", 20,
                     "--data=pretrain: as create_pretraining_data.py's.")
flags.DEFINE_string("records", None,
                    "--data=records: TFRecord files (a glob) of "
                    "`input_mask` features, e.g. create_pretraining_data.py's "
                    "output; --max_seq_length must be theirs.")
flags.DEFINE_enum("phase", "predict", ["predict", "train", "fill"],
                  "predict: MRPC test, SST-2 dev, CoNLL-2003 test; train: "
                  "one epoch of the train split; fill: the predict split's "
                  "rows and fill, nothing run.")
flags.DEFINE_integer("num_examples", 256, "Examples taken, spread evenly.")
flags.DEFINE_integer("max_seq_length", 128, "As the scripts' flag.")
flags.DEFINE_integer("batch_size", None,
                     "Examples a batch (default: the scripts' "
                     "--predict_batch_size 8, --train_batch_size 32).")
flags.DEFINE_integer("max_examples_per_row", 16, "As the scripts' flag.")
flags.DEFINE_integer("doc_stride", None,
                     "run_ner.py's default 64, run_squad.py's 128.")
flags.DEFINE_integer("max_query_length", 64, "run_squad.py's flag.")
flags.DEFINE_integer("repetitions", 2, "Timed repetitions.")
flags.DEFINE_integer("num_hidden_layers", 12, "Encoder layers (Base: 12).")

_NER_LABELS = ["B-LOC", "B-MISC", "B-ORG", "B-PER", "I-LOC", "I-MISC",
               "I-ORG", "I-PER", "O"]
_NER_FILES = {False: "eng.testb", True: "eng.train"}


def _shared(*parts):
  return os.path.join(os.environ.get("BERT_SHARED_DIR", os.path.join(
      os.path.dirname(__file__), "..", "..", "shared")), *parts)


def _cpu_flags():
  try:
    with open("/proc/cpuinfo") as f:
      lines = f.readlines()
    words = next(line for line in lines if line.startswith("flags")).split()
  except (OSError, StopIteration):
    return "unknown"
  model = next((line.split(":", 1)[1].strip() for line in lines
                if line.startswith("model name")), "")
  return "%s, %d cores: %s" % (model, os.cpu_count(), " ".join(
      w for w in words if w.startswith(("avx", "amx", "fma"))))


def _load():
  return " ".join("%.2f" % x for x in os.getloadavg())


def _spread(items):
  """About --num_examples of `items`, every n-th (all when fewer)."""
  step = max(1, len(items) // FLAGS.num_examples)
  return items[::step][:FLAGS.num_examples]


def _tokenizer(vocab, lower):
  return tokenization.FullTokenizer(
      _shared("data", "vocab", vocab, "vocab.txt"), do_lower_case=lower)


def _inputs():
  """(each input's unpadded int lists, the task's `model_fn.Head`)."""
  if FLAGS.data == "records":
    masks = tf.data.TFRecordDataset(tf.io.gfile.glob(FLAGS.records)).map(
        lambda record: tf.io.parse_single_example(record, {
            "input_mask": tf.io.FixedLenFeature([FLAGS.max_seq_length],
                                                tf.int64)})["input_mask"])
    return [{"input_ids": [1] * int(mask.sum()), "label_ids": 0}
            for mask in masks.as_numpy_iterator()], None
  if FLAGS.data == "squad":
    windows = []
    squad_data.convert_examples_to_features(
        _spread(squad_data.read_squad_examples(_shared(
            "data", "squad", "xquad_en_dev_v1.1", "xquad.en.json"), False)),
        _tokenizer("uncased_L-12_H-768_A-12", True), FLAGS.max_seq_length,
        FLAGS.doc_stride or 128, FLAGS.max_query_length, False,
        windows.append)
    return [{"input_ids": f.input_ids[:sum(f.input_mask)], "label_ids": 0}
            for f in windows], None
  if FLAGS.data == "conll":
    sentences = _spread(ner_reader.read_conll_file(_shared(
        "data", "ner", "conll2003", _NER_FILES[FLAGS.phase == "train"])))
    features, _ = ner_features.convert_sentences_to_features(
        sentences, _NER_LABELS, _tokenizer("cased_L-12_H-768_A-12", False),
        FLAGS.max_seq_length, FLAGS.doc_stride or 64)
    keys = ("input_ids", "segment_ids", "label_ids", "label_weights")
    return ([{k: getattr(f, k)[:sum(f.input_mask)] for k in keys}
             for f in features], ner_model.TokenHead(len(_NER_LABELS)))
  name, folder = {"mrpc": ("mrpc", "MRPC"), "sst2": ("sst-2", "SST-2")}[
      FLAGS.data]
  processor = data.get_processor(name)
  split = processor.get_train_examples if FLAGS.phase == "train" else {
      "mrpc": processor.get_test_examples,
      "sst2": processor.get_dev_examples}[FLAGS.data]
  examples = _spread(split(_shared("data", "glue", folder)))
  labels = processor.get_labels()
  inputs = []
  for feature in features_lib.convert_examples_to_features(
      examples, labels, FLAGS.max_seq_length,
      _tokenizer("uncased_L-12_H-768_A-12", True)):
    length = sum(feature.input_mask)
    inputs.append({"input_ids": feature.input_ids[:length],
                   "segment_ids": feature.segment_ids[:length],
                   "label_ids": feature.label_id})
  return inputs, classifier_model.head_for(processor, labels)


def _pretrain_feeds(batch_size):
  """--data=pretrain: (name -> (batches, rows), number of instances)."""
  tokenizer = _tokenizer("uncased_L-12_H-768_A-12", True)
  length, preds = FLAGS.max_seq_length, FLAGS.max_predictions_per_seq
  instances = pretraining_instances.create_training_instances(
      [FLAGS.corpus or _shared("data", "pretrain", "sample_text.txt")],
      tokenizer, length, 10, 0.1, 0.15, preds, random.Random(12345))
  rows = pretraining_records.PackedSerializer(
      tokenizer, length, preds, FLAGS.max_examples_per_row).pack(instances)
  rows = [{name: np.array(values, np.float32 if name == "masked_lm_weights"
                          else np.int32) for name, values in row.items()}
          for row in rows]
  fixed = [dict(zip(pretraining_records.FEATURE_ORDER, (
      np.array(v, np.float32 if isinstance(v[0], float) else np.int32)
      for v in pretraining_records.instance_features(
          i, tokenizer.vocab, length, preds)))) for i in instances]
  row_batch = max(1, int(round(batch_size * len(rows) / len(instances))))

  def batches(items, size):
    return [_stack(items[i:i + size]) for i in range(0, len(items), size)]

  return {"fixed": (batches(fixed, batch_size), len(instances)),
          "packed": (batches(rows, row_batch), len(rows))}, len(instances)


def _padded(batch, length):
  """Unpacked features of `batch`, padded to `length`."""
  out = {name: np.zeros([len(batch), length], np.int32) for name in (
      "input_ids", "segment_ids", "input_mask")}
  for i, item in enumerate(batch):
    real = len(item["input_ids"])
    out["input_mask"][i, :real] = 1
    for name, values in item.items():
      if isinstance(values, list):
        out.setdefault(name, np.zeros([len(batch), length], np.int32))
        out[name][i, :real] = values
  if not isinstance(batch[0]["label_ids"], list):
    out["label_ids"] = np.array([item["label_ids"] for item in batch],
                                np.int32)
  out["is_real_example"] = np.ones([len(batch)], np.int32)
  out["unique_ids"] = np.arange(len(batch), dtype=np.int32)
  return out


def _packed(inputs):
  """Packed rows as numpy arrays (`packing.pack`'s, NER's or the
  classifier's labels per slot as the scripts write them; training's in
  the inputs' order, as the scripts pack it)."""
  tokens = isinstance(inputs[0]["label_ids"], list)
  rows = packing.pack(
      [{k: v for k, v in item.items() if tokens or k != "label_ids"}
       for item in inputs], FLAGS.max_seq_length, FLAGS.max_examples_per_row,
      window=packing.TRAINING_SPAN if FLAGS.phase == "train" else None)
  if not tokens:
    packing.add_slot_values(rows, "label_ids",
                            [[item["label_ids"]] for item in inputs], [0])
  return [{name: np.array(row[name], np.int32) for name in row}
          for row in rows]


def _stack(rows):
  return {name: np.stack([row[name] for row in rows]) for name in rows[0]}


def _feeds(inputs, batch_size):
  """name -> (list of feature dicts of numpy arrays, rows)."""
  length = FLAGS.max_seq_length
  buckets = lengths_lib.bucket_lengths(length)

  def bucket(item):
    return lengths_lib.python_bucket_length(buckets, len(item["input_ids"]))

  def chunks(items, size):
    return [items[i:i + size] for i in range(0, len(items), size)]

  batches = chunks(inputs, batch_size)
  if FLAGS.phase == "predict":  # Input order, each cut to its longest.
    cut = [_padded(b, max(bucket(item) for item in b)) for b in batches]
  else:  # Batches of one bucket each.
    cut = [_padded(b, bucket(b[0])) for size in sorted(set(map(
        bucket, inputs))) for b in chunks(
            [item for item in inputs if bucket(item) == size], batch_size)]
  rows = _packed(inputs)
  row_batch = batch_size
  if FLAGS.phase == "train":
    row_batch = max(1, int(round(batch_size * len(rows) / len(inputs))))
  return {"fixed": ([_padded(b, length) for b in batches], len(inputs)),
          "bucket": (cut, len(inputs)),
          "packed": ([_stack(b) for b in chunks(rows, row_batch)],
                     len(rows))}


def _graph(head, config, batch, num_steps, static_length):
  """(session, fetch) of the task's `model_fn` on placeholders shaped as
  `batch` (batch and, unless `static_length`, length unknown)."""
  graph = tf.Graph()
  with graph.as_default():
    tf.set_random_seed(1)
    features = {name: tf.placeholder(tf.as_dtype(value.dtype), [None] + (
        list(value.shape[1:]) if static_length or name.endswith(
            ("positions", "index", "real_example")) else
        [None] * (value.ndim - 1)), name) for name, value in batch.items()}
    train = FLAGS.phase == "train"
    mode = spec_lib.ModeKeys.TRAIN if train else spec_lib.ModeKeys.PREDICT
    model_fn = model_fn_utils.build_model_fn(
        head, config, None, use_tpu=False, use_one_hot_embeddings=False,
        log_features=False, schedule=model_fn_utils.TrainingSchedule(
            learning_rate=2e-5, num_train_steps=num_steps,
            num_warmup_steps=max(1, num_steps // 10)))
    spec = model_fn(features, None, mode, {})
    fetch = spec.train_op if train else spec.predictions
    session = tf.Session()
    session.run([tf.global_variables_initializer(),
                 tf.local_variables_initializer()])
  return session, fetch, features


def _real_share(batches):
  """Real tokens / computed tokens over `batches`."""
  real = sum(int(np.count_nonzero(b["input_mask"])) for b in batches)
  return real / sum(b["input_ids"].size for b in batches)


def main(_):
  print("cpu flags: %s" % _cpu_flags())
  print("load average before: %s" % _load())
  print("TensorFlow %s" % tf.__version__)
  if FLAGS.data in ("squad", "records") and FLAGS.phase != "fill":
    raise app.UsageError("--data=%s: only --phase=fill" % FLAGS.data)
  if FLAGS.data == "pretrain" and FLAGS.phase == "predict":
    raise app.UsageError("--data=pretrain: --phase=train or fill")
  batch_size = FLAGS.batch_size or (32 if FLAGS.phase == "train" else 8)
  if FLAGS.data == "pretrain":
    feeds, num_inputs = _pretrain_feeds(batch_size)
    inputs = [None] * num_inputs
  else:
    inputs, head = _inputs()
    feeds = _feeds(inputs, batch_size)
  if FLAGS.phase == "fill":
    print("%s, %d inputs, length %d, batch %d:" % (
        FLAGS.data, len(inputs), FLAGS.max_seq_length, batch_size))
    for name, (batches, count) in feeds.items():
      print("  %-6s rows %5d  examples/row %5.2f  fill %4.0f%%" % (
          name, count, len(inputs) / count, 100 * _real_share(batches)))
    return
  config = modeling.BertConfig(
      30522 if FLAGS.data != "conll" else 28996, hidden_size=768,
      num_hidden_layers=FLAGS.num_hidden_layers, num_attention_heads=12,
      intermediate_size=3072)
  if FLAGS.data == "pretrain":
    head = pretraining_heads.pretraining_head(config)
  graphs = {name: _graph(head, config, batches[0], len(batches) * (
      FLAGS.repetitions + 2), static_length=name != "bucket")
            for name, (batches, _) in feeds.items()}

  def run(name):
    session, fetch, holders = graphs[name]
    batches = feeds[name][0]
    warm = {}
    for batch in batches:  # One untimed run of each shape.
      warm.setdefault(batch["input_ids"].shape, batch)
    for batch in warm.values():
      session.run(fetch, {holders[k]: batch[k] for k in holders})
    start = time.perf_counter()
    for batch in batches:
      session.run(fetch, {holders[k]: batch[k] for k in holders})
    return time.perf_counter() - start

  best = {name: float("inf") for name in feeds}
  for repetition in range(FLAGS.repetitions):
    for name in feeds:
      seconds = run(name)
      best[name] = min(best[name], seconds)
      print("  repetition %d: %s %.2f s (load %s)" % (
          repetition, name, seconds, _load()), flush=True)
  print("load average after: %s" % _load())
  print("%s %s, %d examples, length %d, batch %d, %d layers:" % (
      FLAGS.data, FLAGS.phase, len(inputs), FLAGS.max_seq_length,
      batch_size, FLAGS.num_hidden_layers))
  for name, (batches, count) in feeds.items():
    print("  %-6s %7.2f s  %5.2fx  rows %4d  examples/row %5.2f  fill %4.0f%%"
          % (name, best[name], best["fixed"] / best[name], count,
             len(inputs) / count, 100 * _real_share(batches)))


if __name__ == "__main__":
  app.run(main)
