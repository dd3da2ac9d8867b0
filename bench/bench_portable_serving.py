"""Serving latency on CPU: TensorFlow Lite and ONNX Runtime (float32, int8)
against the TensorFlow float32 SavedModel they are made from.

A 2-label classifier with random weights (BERT-Base shape by default, or the
shape of `--bert_config_file`) is exported with
`export_utils.export_saved_model` and converted by `portable.convert` (the
code behind `predict_saved_model.py --convert_to`) to every format whose
runtime is installed. Each engine is then timed on the same batches
(`--batch_sizes`, default 1 and 8), the engines taking turns batch by batch
(interleaved, so that all see the same load of a shared machine). ONNX
Runtime is timed twice: with its default threading and with its worker
threads not spinning (`session.intra_op.allow_spinning=0`, the setting
`portable.DEFAULT_THREADS` records). The CPU model, its SIMD flags, the
thread settings, each engine's median milliseconds per batch (and min -
max), its ratio to the SavedModel and its largest difference from the
SavedModel's probabilities are printed as one table.

Run from the repo root (the onnx extra for the ONNX rows: ./setup.sh --onnx):
  python bench/bench_portable_serving.py             # BERT-Base, seq 128
  python bench/bench_portable_serving.py --repeats=3 \
    --bert_config_file=tests/data/conformance/modeling/bert_config.json
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
_BENCH = os.path.dirname(os.path.abspath(__file__))
if _BENCH not in sys.path:
  sys.path.insert(0, _BENCH)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

# pylint: disable=g-import-not-at-top,wrong-import-position
from absl import logging
import tensorflow.compat.v1 as tf

from bench_serving import cpu_description
from bench_serving import random_inputs
from bench_serving import write_random_checkpoint
from bert_tf.cli import entry
from bert_tf.cli import startup
from bert_tf.export import portable
from bert_tf.export import saved_model as export_utils
from bert_tf.export import serving
import modeling
import run_classifier
# pylint: enable=g-import-not-at-top,wrong-import-position

__all__ = ["define_flags", "main"]

FLAGS = flags.FLAGS


def define_flags():
  flags.DEFINE_string("bert_config_file", None,
                      "Model shape (random weights); default BERT-Base.")
  flags.DEFINE_integer("seq_length", 128, "max_seq_length of the export.")
  flags.DEFINE_list("batch_sizes", ["1", "8"], "Batch sizes timed.")
  flags.DEFINE_integer("repeats", 10,
                       "Timed batches per engine and batch size.")
  flags.DEFINE_integer("warmup", 2, "Untimed batches per engine first.")


def _onnx_installed():
  try:
    __import__("onnxruntime")
    __import__("tf2onnx")
    return True
  except ImportError:
    return False


def _export(config, work):
  """The random classifier, exported; returns its version folder."""
  checkpoint = write_random_checkpoint(config, os.path.join(work, "model"))
  config_file = os.path.join(work, "bert_config.json")
  with open(config_file, "w", encoding="utf-8") as f:
    f.write(config.to_json_string())
  vocab_file = os.path.join(work, "vocab.txt")
  with open(vocab_file, "w", encoding="utf-8") as f:
    f.write("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]"]) + "\n")
  return export_utils.export_saved_model(
      run_classifier.model_fn_builder(config, 2, None, 0.0, None, None,
                                      False, False),
      checkpoint, os.path.join(work, "export"), FLAGS.seq_length,
      kind=export_utils.CLASSIFIER, output_keys=["probabilities"],
      vocab_file=vocab_file, bert_config_file=config_file,
      do_lower_case=True, label_list=["0", "1"],
      extra_features=export_utils.CLASSIFIER_FEATURES)


def _engines(version, work):
  """[(name, threads, model)] of every engine that runs here."""
  formats = ["tflite", "tflite_int8"]
  if _onnx_installed():
    formats += ["onnx", "onnx_int8"]
  config, _, _ = serving.read_assets(version)
  start = time.perf_counter()
  folders = portable.convert(version, os.path.join(work, "portable"),
                             formats, config)
  logging.warning("Converted to %s in %.0f s", ", ".join(formats),
                  time.perf_counter() - start)
  engines = [("TF SavedModel fp32", "TensorFlow's defaults",
              serving.BertServingModel(version))]
  for name in formats:
    model = serving.BertServingModel(folders[name])
    if name.startswith("onnx"):
      # The same model with ONNX Runtime's default threading (spinning).
      default = dict(model.config,
                     portable=dict(model.config["portable"], threads={}))
      engines.append(("%s, default threads" % name, "spinning on",
                      _with_runner(model, portable.OnnxRunner(folders[name],
                                                              default))))
    threads = model.config["portable"]["threads"]
    engines.append((name, ", ".join(
        "%s=%s" % (key, "per core" if value is None else value)
        for key, value in sorted(threads.items())), model))
  return engines


def _with_runner(model, runner):
  """A copy of `model` that runs through `runner`."""
  copy = object.__new__(type(model))
  copy.__dict__.update(model.__dict__, _runner=runner)
  return copy


def main(_):
  logging.set_verbosity(logging.WARNING)
  tf.get_logger().setLevel("ERROR")
  if FLAGS.bert_config_file:
    config = modeling.BertConfig.from_json_file(FLAGS.bert_config_file)
  else:
    config = modeling.BertConfig(vocab_size=30522)  # BERT-Base shape.
  startup.check_max_seq_length(FLAGS.seq_length, config, "seq_length")
  batch_sizes = [int(size) for size in FLAGS.batch_sizes]
  work = tempfile.mkdtemp(prefix="bench_portable_")
  rows = []
  try:
    engines = _engines(_export(config, work), work)
    rng = np.random.RandomState(12345)
    for batch_size in batch_sizes:
      batches = [random_inputs(rng, config, batch_size, FLAGS.seq_length)
                 for _ in range(FLAGS.warmup + FLAGS.repeats)]
      times = {name: [] for name, _, _ in engines}
      diffs = {name: 0.0 for name, _, _ in engines}
      for i, batch in enumerate(batches):
        want = None
        for name, _, model in engines:  # Interleaved, batch by batch.
          args = (batch["input_ids"], batch["input_mask"],
                  batch["segment_ids"])
          start = time.perf_counter()
          got = model.run(*args)["probabilities"]
          seconds = time.perf_counter() - start
          want = got if want is None else want
          diffs[name] = max(diffs[name], float(np.max(np.abs(got - want))))
          if i >= FLAGS.warmup:
            times[name].append(seconds)
      base = float(np.median(times[engines[0][0]]))
      for name, threads, _ in engines:
        median = float(np.median(times[name]))
        rows.append((batch_size, name, threads, median * 1e3,
                     min(times[name]) * 1e3, max(times[name]) * 1e3,
                     base / median, diffs[name]))
  finally:
    shutil.rmtree(work, ignore_errors=True)
  print("\nPortable serving: BERT L=%d H=%d A=%d I=%d, 2-label classifier, "
        "seq %d, TF %s, %d timed batches per cell (median)" % (
            config.num_hidden_layers, config.hidden_size,
            config.num_attention_heads, config.intermediate_size,
            FLAGS.seq_length, tf.__version__, FLAGS.repeats))
  print("CPU: %s; threads: one per core in every engine (%d)\n" %
        (cpu_description(), os.cpu_count()))
  print("| batch | engine | thread settings | ms / batch (median) | min - "
        "max | speed-up vs TF fp32 | max abs diff vs TF fp32 |")
  print("|---|---|---|---:|---:|---:|---:|")
  for row in rows:
    print("| %d | %s | %s | %.1f | %.1f - %.1f | %.2fx | %.1e |" % row)


if __name__ == "__main__":
  define_flags()
  entry.run_main(main)
