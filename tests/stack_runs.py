"""The runs that tests/test_stacks.py compares across TensorFlow stacks.

Each stack's results live in tests/data/stacks/tf<major.minor>/:
`pretraining/` (a `--deterministic` run of `run_pretraining.py`: 3 steps from
the conformance checkpoint, its final checkpoint and `eval_results.txt`) and
`export/` (a SavedModel of a classifier, exported here, with `outputs.npz`:
its probabilities for `SERVING_INPUTS`). Regenerate one stack's with

  <that stack's python> tests/stack_runs.py

which rewrites tests/data/stacks/tf<its version>/.
"""

import glob
import os
import shutil
import sys
import tempfile

import numpy as np
import tensorflow.compat.v1 as tf

from helpers import data_path
from helpers import run_script
from helpers import tiny_model_flags
from test_run_pretraining import _write_records

__all__ = ["STACKS_DIR", "stack_name", "SERVING_INPUTS", "pretraining_args",
           "run_pretraining", "serve", "make_export", "main"]

STACKS_DIR = data_path("stacks")
# Two rows of token ids of the conformance vocabulary, padded to 32.
SERVING_INPUTS = np.array([[2, 20, 31, 3] + [0] * 28,
                           [2, 77, 45, 61, 3] + [0] * 27], np.int32)


def stack_name(version=None):
  """tf<major>.<minor> of a TensorFlow version (this one by default)."""
  major, minor = (version or tf.__version__).split(".")[:2]
  return "tf%s.%s" % (major, minor)


def pretraining_args(data, output_dir, num_train_steps=3):
  model = data_path("conformance", "modeling")
  return ["--input_file=%s" % data, "--output_dir=%s" % output_dir,
          "--bert_config_file=%s" % os.path.join(model, "bert_config.json"),
          "--init_checkpoint=%s" % os.path.join(model, "bert_model.ckpt"),
          "--do_train", "--do_eval", "--train_batch_size=4",
          "--eval_batch_size=4", "--max_seq_length=16",
          "--max_predictions_per_seq=4",
          "--num_train_steps=%d" % num_train_steps, "--num_warmup_steps=1",
          "--learning_rate=1e-3", "--save_checkpoints_steps=100",
          "--max_eval_steps=2", "--deterministic"]


def run_pretraining(work_dir, output_dir, num_train_steps=3):
  """The compared run (records of varying masked counts, seed 3)."""
  data = _write_records(os.path.join(work_dir, "data.tfrecord"), 24,
                        seq_length=16, preds=4, seed=3, uneven=True)
  result = run_script("run_pretraining.py",
                      pretraining_args(data, output_dir, num_train_steps),
                      env={"TF_CPP_MIN_LOG_LEVEL": "2",
                           "CUDA_VISIBLE_DEVICES": ""})
  if result.returncode:
    raise AssertionError(result.stderr[-3000:])
  return data


def serve(export):
  """The export's probabilities for `SERVING_INPUTS` [2, 2] float32."""
  with tf.Graph().as_default(), tf.Session() as session:
    meta = tf.saved_model.loader.load(session, ["serve"], export)
    signature = meta.signature_def["serving_default"]
    feeds = {signature.inputs["input_ids"].name: SERVING_INPUTS,
             signature.inputs["input_mask"].name:
                 (SERVING_INPUTS > 0).astype(np.int32),
             signature.inputs["segment_ids"].name:
                 np.zeros_like(SERVING_INPUTS)}
    return session.run(signature.outputs["probabilities"].name, feeds)


def make_export(work_dir, export_dir):
  """A 1-step MRPC-style classifier exported by run_classifier.py."""
  data_dir = os.path.join(work_dir, "data")
  os.makedirs(data_dir)
  rows = ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
  rows += ["%d\t%d\t%d\tthe %s\ta %s" % (i % 2, i, i + 100, w, w)
           for i, w in enumerate(["cat", "dog", "man", "day"])]
  for split in ("train", "dev"):
    with open(os.path.join(data_dir, split + ".tsv"), "w") as f:
      f.write("\n".join(rows) + "\n")
  result = run_script("run_classifier.py", tiny_model_flags() + [
      "--task_name=MRPC", "--do_train", "--data_dir=%s" % data_dir,
      "--output_dir=%s" % os.path.join(work_dir, "out"),
      "--max_seq_length=32", "--train_batch_size=4", "--num_train_epochs=1",
      "--deterministic", "--export_dir=%s" % export_dir],
                      env={"TF_CPP_MIN_LOG_LEVEL": "2",
                           "CUDA_VISIBLE_DEVICES": ""})
  if result.returncode:
    raise AssertionError(result.stderr[-3000:])
  [version] = os.listdir(export_dir)
  return os.path.join(export_dir, version)


def main():
  target = os.path.join(STACKS_DIR, stack_name())
  work = tempfile.mkdtemp(prefix="stack_runs_")
  try:
    shutil.rmtree(target, ignore_errors=True)
    out = os.path.join(work, "pretraining")
    run_pretraining(work, out)
    kept = os.path.join(target, "pretraining")
    os.makedirs(kept)
    for path in (glob.glob(os.path.join(out, "model.ckpt-3.*")) +
                 [os.path.join(out, "eval_results.txt")]):
      if not path.endswith(".meta"):
        shutil.copy(path, kept)
    with open(os.path.join(kept, "checkpoint"), "w") as f:
      f.write('model_checkpoint_path: "model.ckpt-3"\n'
              'all_model_checkpoint_paths: "model.ckpt-3"\n')
    export = make_export(work, os.path.join(work, "export"))
    shutil.copytree(export, os.path.join(target, "export"))
    np.savez(os.path.join(target, "export", "outputs.npz"),
             probabilities=serve(export))
  finally:
    shutil.rmtree(work, ignore_errors=True)
  print("wrote", target)


if __name__ == "__main__":
  sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
  main()
