"""Serving latency: an exported SavedModel vs `Estimator.predict` per request.

A classifier with random weights (BERT-Base shape by default, or the shape
of `--bert_config_file`) is saved as a checkpoint, exported with
`export_utils.export_saved_model`, and timed in the same process:

  * single-example requests: the SavedModel's `serving_default` signature
    (`tf.saved_model.load`, one call per request, outputs fetched to numpy)
    against one `TPUEstimator.predict` call per request, as
    `run_classifier.py --do_predict` runs it off TPU (each call builds the
    graph and restores the checkpoint); p50 and p99 latency;
  * batch throughput: `--batch_size` examples per signature call against one
    `Estimator.predict` over the same examples (its graph building and
    checkpoint restore included, as in a `--do_predict` run), in
    examples/sec.

The two sides alternate request by request so that both see the same load
of a shared machine. The CPU model, its SIMD flags and the thread count are
printed with the table.

Run from the repo root:
  python bench/bench_serving.py   # BERT-Base shape, seq 128
  python bench/bench_serving.py \
    --bert_config_file=tests/data/conformance/modeling/bert_config.json \
    --seq_length=64
"""

import os
import shutil
import sys
import tempfile
import time

from absl import flags
import numpy as np

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _REPO not in sys.path:
  sys.path.insert(0, _REPO)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

# pylint: disable=g-import-not-at-top,wrong-import-position
from absl import logging
import tensorflow.compat.v1 as tf

from bert_tf.runner import estimator as estimator_runner
from bert_tf.export import saved_model as export_utils
import modeling
import run_classifier
from bert_tf.export import serving
from bert_tf.cli import entry
from bert_tf.cli import startup
# pylint: enable=g-import-not-at-top,wrong-import-position

FLAGS = flags.FLAGS

_SIMD_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw",
               "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8")


def define_flags():
  flags.DEFINE_string("bert_config_file", None,
                      "Model shape (random weights); default BERT-Base.")
  flags.DEFINE_integer("seq_length", 128, "max_seq_length of the export.")
  flags.DEFINE_integer("requests", 200,
                       "Single-example SavedModel requests timed.")
  flags.DEFINE_integer("estimator_requests", 10,
                       "Single-example Estimator.predict requests timed.")
  flags.DEFINE_integer("batch_size", 32, "Examples per batch (throughput).")
  flags.DEFINE_integer("batches", 8, "Batches timed (throughput).")
  flags.DEFINE_integer("warmup", 3, "Untimed requests per side first.")


def cpu_description():
  """'<model name>, N cores, SIMD: <flags>' from /proc/cpuinfo (Linux)."""
  model, cpu_flags = "unknown CPU", set()
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      for line in f:
        key, _, value = line.partition(":")
        if key.strip() == "model name" and model == "unknown CPU":
          model = value.strip()
        elif key.strip() == "flags" and not cpu_flags:
          cpu_flags = set(value.split())
  except OSError:
    pass
  simd = [name for name in _SIMD_FLAGS if name in cpu_flags]
  return "%s, %d cores, SIMD: %s" % (model, os.cpu_count(),
                                     " ".join(simd) or "unknown")


def write_random_checkpoint(config, model_dir):
  """A 2-label classifier with random weights: model_dir/model.ckpt-0."""
  with tf.Graph().as_default():
    zeros = tf.zeros([1, 8], tf.int32)
    run_classifier.create_model(config, False, zeros, zeros, zeros,
                                tf.zeros([1], tf.int32), 2, False)
    tf.train.get_or_create_global_step()
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      return tf.train.Saver().save(
          session, os.path.join(model_dir, "model.ckpt"), global_step=0)


def random_inputs(rng, config, num, seq_length):
  """int32 [num, seq_length] inputs: random ids, full mask, two segments."""
  ids = rng.randint(1000 if config.vocab_size > 2000 else 5,
                    config.vocab_size, size=[num, seq_length])
  segments = np.zeros([num, seq_length], np.int32)
  segments[:, seq_length // 2:] = 1
  return {"input_ids": ids.astype(np.int32),
          "input_mask": np.ones([num, seq_length], np.int32),
          "segment_ids": segments}


def estimator_runner(model_fn, model_dir, batch_size):
  """predict(inputs) -> probabilities, one `TPUEstimator.predict` call."""
  estimator = estimator_runner.make_estimator(
      model_fn, estimator_runner.make_run_config(model_dir, 1000, 1), False,
      predict_batch_size=batch_size)

  def predict(inputs):
    num = len(inputs["input_ids"])
    features = dict(inputs, label_ids=np.zeros([num], np.int32),
                    is_real_example=np.ones([num], np.int32))

    def input_fn(params):
      return tf.data.Dataset.from_tensor_slices(features).batch(
          params["batch_size"])

    return np.stack([p["probabilities"] for p in
                     estimator.predict(input_fn)])

  return predict


def _timed(fn, *args):
  start = time.perf_counter()
  out = fn(*args)
  return time.perf_counter() - start, out


def _percentile(values, q):
  return float(np.percentile(np.asarray(values), q))


def main(_):
  logging.set_verbosity(logging.ERROR)
  tf.get_logger().setLevel("ERROR")
  if FLAGS.bert_config_file:
    config = modeling.BertConfig.from_json_file(FLAGS.bert_config_file)
  else:
    config = modeling.BertConfig(vocab_size=30522)  # BERT-Base shape.
  startup.check_max_seq_length(FLAGS.seq_length, config,
                                       "seq_length")
  work = tempfile.mkdtemp(prefix="bench_serving_")
  try:
    model_dir = os.path.join(work, "model")
    checkpoint = write_random_checkpoint(config, model_dir)
    config_file = os.path.join(work, "bert_config.json")
    with open(config_file, "w", encoding="utf-8") as f:
      f.write(config.to_json_string())
    vocab_file = os.path.join(work, "vocab.txt")
    with open(vocab_file, "w", encoding="utf-8") as f:
      f.write("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]"]) + "\n")
    model_fn = run_classifier.model_fn_builder(
        config, 2, None, 0.0, None, None, False, False)
    start = time.perf_counter()
    version = export_utils.export_saved_model(
        model_fn, checkpoint, os.path.join(work, "export"), FLAGS.seq_length,
        kind=export_utils.CLASSIFIER, output_keys=["probabilities"],
        vocab_file=vocab_file, bert_config_file=config_file,
        do_lower_case=True, label_list=["0", "1"],
        extra_features=export_utils.CLASSIFIER_FEATURES)
    export_seconds = time.perf_counter() - start
    start = time.perf_counter()
    served = serving.BertServingModel(version)
    load_seconds = time.perf_counter() - start
    saved_model = lambda x: served.run(x["input_ids"], x["input_mask"],  # pylint: disable=g-long-lambda
                                       x["segment_ids"])["probabilities"]
    single_estimator = estimator_runner(model_fn, model_dir, 1)
    batch_estimator = estimator_runner(model_fn, model_dir, FLAGS.batch_size)

    rng = np.random.RandomState(12345)
    one = [random_inputs(rng, config, 1, FLAGS.seq_length)
           for _ in range(max(FLAGS.requests, FLAGS.estimator_requests))]
    for i in range(FLAGS.warmup):
      saved_model(one[i])
    single_estimator(one[0])
    sm_times, est_times, max_diff = [], [], 0.0
    for i in range(FLAGS.requests):
      seconds, sm_out = _timed(saved_model, one[i])
      sm_times.append(seconds)
      if i < FLAGS.estimator_requests:  # Interleaved with the first ones.
        seconds, est_out = _timed(single_estimator, one[i])
        est_times.append(seconds)
        max_diff = max(max_diff, float(np.max(np.abs(sm_out - est_out))))

    batch = random_inputs(rng, config, FLAGS.batch_size * FLAGS.batches,
                          FLAGS.seq_length)
    batches = [{k: v[i * FLAGS.batch_size:(i + 1) * FLAGS.batch_size]
                for k, v in batch.items()} for i in range(FLAGS.batches)]
    saved_model(batches[0])
    start = time.perf_counter()
    for b in batches:
      saved_model(b)
    sm_rate = len(batch["input_ids"]) / (time.perf_counter() - start)
    est_seconds, _ = _timed(batch_estimator, batch)
    est_rate = len(batch["input_ids"]) / est_seconds
  finally:
    shutil.rmtree(work, ignore_errors=True)

  print("\nServing benchmark: BERT L=%d H=%d A=%d I=%d, 2-label classifier, "
        "seq %d, TF %s" % (config.num_hidden_layers, config.hidden_size,
                           config.num_attention_heads,
                           config.intermediate_size, FLAGS.seq_length,
                           tf.__version__))
  print("CPU: %s" % cpu_description())
  print("Export %.1f s, SavedModel load %.1f s; max |SavedModel - Estimator| "
        "= %.2g\n" % (export_seconds, load_seconds, max_diff))
  sm50, sm99 = _percentile(sm_times, 50), _percentile(sm_times, 99)
  est50, est99 = _percentile(est_times, 50), _percentile(est_times, 99)
  print("| path | requests | p50 ms | p99 ms | batch %d examples/sec |" %
        FLAGS.batch_size)
  print("|---|---|---|---|---|")
  print("| SavedModel signature (tf.saved_model.load) | %d | %.2f | %.2f | "
        "%.1f |" % (len(sm_times), sm50 * 1e3, sm99 * 1e3, sm_rate))
  print("| Estimator.predict per request | %d | %.1f | %.1f | %.1f |" %
        (len(est_times), est50 * 1e3, est99 * 1e3, est_rate))
  print("\nRatios (Estimator / SavedModel): p50 latency %.1fx, p99 latency "
        "%.1fx, batch throughput %.2fx (SavedModel / Estimator)." %
        (est50 / sm50, est99 / sm99, sm_rate / est_rate))
  print("Target p50 >= 20x lower: %s" %
        ("met" if est50 / sm50 >= 20 else "NOT met"))


if __name__ == "__main__":
  define_flags()
  entry.run_main(main)
