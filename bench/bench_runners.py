"""Training steps/s of the two runners, and of TensorFlow 2.21 against 2.15.

Times `run_pretraining.py`'s model_fn (the encoder, both heads and the
optimizer) trained through each runner on random pre-training records:
`--runner=estimator` (TensorFlow 2.15 only) and `--runner=session`, in fp32
and bf16. With `--other_python` (the Python of the other stack's venv, e.g.
`.venv-tf2.21/bin/python`) every row is also timed under that stack.

Every measurement is a fresh process (`--measure`), so that each gets the
same start; the rows are interleaved, repetition by repetition, so that a
change in the machine's load hits them alike. A measurement times the steps
after `--warmup_steps` (graph building, the first session runs and the
checkpoint at step 0 are left out) until `--steps`, by a hook reading the
clock before and after the runs. The table gives steps/s (median, min-max)
and CPU seconds per step (the process's, all threads: less sensitive to
other jobs on a shared machine than wall time), and the ratios that matter: session / Estimator on TF 2.15 (the same graph:
target >= 0.98x), and TF 2.21 / TF 2.15 per precision (the session runner
on both, and against the Estimator). It also prints the CPU flags that
decide the bf16 kernels.

Run from the repo root:
  python bench/bench_runners.py --quick
  python bench/bench_runners.py --other_python=.venv-tf2.21/bin/python
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _REPO not in sys.path:
  sys.path.insert(0, _REPO)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

# pylint: disable=g-import-not-at-top,wrong-import-position
from absl import app
from absl import flags
from absl import logging
import numpy as np
import tensorflow.compat.v1 as tf

from bert_tf import io as io_utils
from bert_tf.runner import select as runner_lib
from bert_tf.train import options as training_options
from bert_tf.train import spec as spec_lib
import modeling
import run_pretraining
# pylint: enable=g-import-not-at-top,wrong-import-position

FLAGS = flags.FLAGS
flags.DEFINE_bool("quick", False, "A smaller model and fewer repetitions.")
flags.DEFINE_integer("repetitions", 3, "Measurements per row.")
flags.DEFINE_integer("steps", 40, "Training steps of a measurement.")
flags.DEFINE_integer("warmup_steps", 10, "Steps left out of the timing.")
flags.DEFINE_integer("batch_size", 8, "Sequences per step.")
flags.DEFINE_integer("seq_length", 128, "Tokens per sequence.")
flags.DEFINE_string("other_python", None,
                    "The Python of the other stack's venv; its rows too.")
flags.DEFINE_bool("measure", False, "Internal: one measurement, as JSON.")
flags.DEFINE_string("runner", "session", "Internal (--measure).")
flags.DEFINE_string("precision", "fp32", "Internal (--measure).")

_PREDS = 20


def _config():
  """BERT-Small-like (4 layers, 256 wide; 2 x 128 with --quick)."""
  hidden, layers = (128, 2) if FLAGS.quick else (256, 4)
  return modeling.BertConfig(
      vocab_size=30522, hidden_size=hidden, num_hidden_layers=layers,
      num_attention_heads=hidden // 64, intermediate_size=4 * hidden)


def _write_records(path, count, seq_length):
  rng = np.random.RandomState(0)
  with tf.io.TFRecordWriter(path) as writer:
    for _ in range(count):
      ids = list(rng.randint(1000, 30000, size=seq_length))
      positions = sorted(rng.choice(range(1, seq_length), size=_PREDS,
                                    replace=False))
      features = {
          "input_ids": io_utils.int64_feature(ids),
          "input_mask": io_utils.int64_feature([1] * seq_length),
          "segment_ids": io_utils.int64_feature(
              [0] * (seq_length // 2) + [1] * (seq_length - seq_length // 2)),
          "masked_lm_positions": io_utils.int64_feature(positions),
          "masked_lm_ids": io_utils.int64_feature(
              [ids[p] for p in positions]),
          "masked_lm_weights": io_utils.float_feature([1.0] * _PREDS),
          "next_sentence_labels": io_utils.int64_feature([rng.randint(2)]),
      }
      writer.write(tf.train.Example(features=tf.train.Features(
          feature=features)).SerializeToString())


class _Clock(tf.train.SessionRunHook):
  """Wall and CPU time (this process, all threads) of the runs after the
  first `warmup` ones."""

  def __init__(self, warmup):
    self._warmup = warmup
    self.calls = 0
    self.start = None
    self.stop_time = None

  def after_run(self, run_context, run_values):
    del run_context, run_values
    self.calls += 1
    now = (time.perf_counter(), time.process_time())
    if self.calls == self._warmup:
      self.start = now
    self.stop_time = now


def _measure():
  """Steps/s of one runner and precision, in this process."""
  work = tempfile.mkdtemp(prefix="bench_runners_")
  data = os.path.join(work, "data.tfrecord")
  _write_records(data, 64, FLAGS.seq_length)
  run = training_options.RunOptions(
      training=training_options.TrainingOptions(precision=FLAGS.precision),
      tpu=training_options.TpuOptions(runner=FLAGS.runner),
      train_batch_size=FLAGS.batch_size, save_checkpoints_steps=100000)
  model_fn = run_pretraining.model_fn_builder(
      _config(), None, 1e-4, FLAGS.steps, 0, False, False,
      options=run.training.optimizer_options,
      compute_dtype=run.training.compute_dtype)
  runner = runner_lib.make_runner(model_fn, run, os.path.join(work, "model"))
  clock = _Clock(FLAGS.warmup_steps)
  runner.train(run_pretraining.input_fn_builder(
      [data], FLAGS.seq_length, _PREDS, is_training=True), hooks=[clock],
               max_steps=FLAGS.steps)
  timed = clock.calls - FLAGS.warmup_steps
  tf.io.gfile.rmtree(work)
  return {"steps_per_sec": timed / (clock.stop_time[0] - clock.start[0]),
          "cpu_sec_per_step": (clock.stop_time[1] - clock.start[1]) / timed,
          "tensorflow": tf.__version__}


def _cpu_flags():
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      words = set(next(line for line in f if line.startswith("flags"))
                  .split(":", 1)[1].split())
  except (OSError, StopIteration):
    return "unknown"
  wanted = ("amx_bf16", "avx512_bf16", "avx512f", "avx2")
  return " ".join(w for w in wanted if w in words) or "none of " + str(wanted)


def _rows():
  """(label, python, runner, precision) of every row to time."""
  stacks = [(sys.executable, spec_lib.estimator_available())]
  if FLAGS.other_python:
    probe = subprocess.run(
        [FLAGS.other_python, "-c",
         "import sys; sys.path.insert(0, %r); from bert_tf.train import spec;"
         " import tensorflow as tf; print(tf.__version__, "
         "spec.estimator_available())" % _REPO],
        capture_output=True, text=True, check=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    stacks.append((FLAGS.other_python,
                   probe.stdout.split()[-1] == "True"))
  rows = []
  for python, has_estimator in stacks:
    for precision in ("fp32", "bf16"):
      for runner in (("estimator", "session") if has_estimator
                     else ("session",)):
        rows.append((python, runner, precision))
  return rows


def _run_one(python, runner, precision):
  args = [python, os.path.abspath(__file__), "--measure",
          "--runner=%s" % runner, "--precision=%s" % precision,
          "--steps=%d" % FLAGS.steps, "--warmup_steps=%d" % FLAGS.warmup_steps,
          "--batch_size=%d" % FLAGS.batch_size,
          "--seq_length=%d" % FLAGS.seq_length]
  if FLAGS.quick:
    args.append("--quick")
  result = subprocess.run(args, capture_output=True, text=True,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3",
                                   CUDA_VISIBLE_DEVICES=""))
  if result.returncode:
    raise RuntimeError("%s %s %s failed:\n%s" % (python, runner, precision,
                                                 result.stderr[-2000:]))
  return json.loads(result.stdout.strip().splitlines()[-1])


def _report(times, cpu, versions):
  """The table, then the ratios of the medians: steps/s (wall), and CPU
  seconds per step inverted (less sensitive to other jobs on the machine)."""
  medians = {row: statistics.median(values) for row, values in times.items()}
  cpu_medians = {row: statistics.median(values) for row, values in cpu.items()}
  print("%-8s %-10s %-10s %24s %14s" % ("TF", "runner", "precision",
                                        "steps/s median (range)",
                                        "CPU s/step"))
  for row, values in times.items():
    python, runner, precision = row
    print("%-8s %-10s %-10s %9.2f (%.2f-%.2f) %14.3f" % (
        versions[python], runner, precision, medians[row], min(values),
        max(values), cpu_medians[row]))
  print()
  speed = {}
  for row in medians:
    python, runner, precision = row
    speed[(versions[python], runner, precision)] = (medians[row],
                                                    1.0 / cpu_medians[row])

  def ratio(a, b):
    return "%.3fx wall, %.3fx CPU" % (a[0] / b[0], a[1] / b[1])

  version_list = sorted(set(versions.values()))
  for precision in ("fp32", "bf16"):
    for version in version_list:
      estimator = speed.get((version, "estimator", precision))
      session = speed.get((version, "session", precision))
      if estimator and session:
        print("TF %s %s: session / Estimator = %s (target >= 0.98x)" % (
            version, precision, ratio(session, estimator)))
    for version in [v for v in version_list if not v.startswith("2.15")]:
      for base in [v for v in version_list if v.startswith("2.15")]:
        for runner in ("session", "estimator"):
          reference = speed.get((base, runner, precision))
          value = speed.get((version, "session", precision))
          if reference and value:
            print("%s: TF %s session / TF %s %s = %s" % (
                precision, version, base, runner, ratio(value, reference)))


def main(_):
  logging.set_verbosity(logging.WARNING)
  if FLAGS.measure:
    print(json.dumps(_measure()))
    return
  if FLAGS.quick:
    FLAGS.steps, FLAGS.warmup_steps = 30, 10
  rows = _rows()
  print("CPU: %d cores, flags: %s" % (os.cpu_count(), _cpu_flags()))
  print("BERT %s, batch %d x %d tokens, %d timed steps after %d, %d "
        "repetitions, rows interleaved\n" % (
            "2x128" if FLAGS.quick else "4x256", FLAGS.batch_size,
            FLAGS.seq_length, FLAGS.steps - FLAGS.warmup_steps,
            FLAGS.warmup_steps, FLAGS.repetitions))
  times = {row: [] for row in rows}
  cpu = {row: [] for row in rows}
  versions = {}
  for _ in range(FLAGS.repetitions):
    for row in rows:
      result = _run_one(*row)
      times[row].append(result["steps_per_sec"])
      cpu[row].append(result["cpu_sec_per_step"])
      versions[row[0]] = result["tensorflow"]
  _report(times, cpu, versions)


if __name__ == "__main__":
  app.run(main)
