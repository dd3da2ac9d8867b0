"""TensorFlow 2.21 against 2.15: the same run ends in the same place, and
each stack reads what the other wrote.

tests/data/stacks/tf2.15/ and tf2.21/ hold the results of the same runs on
each stack (tests/stack_runs.py made them): a `--deterministic`
pre-training run of 3 steps from the conformance checkpoint, and a
classifier exported as a SavedModel with its outputs. Here, on whichever
stack runs the tests:

* the run, repeated, ends within float32 rounding of both stacks' results
  (measured between 2.15 and 2.21: at most 6e-8 over all 139 variables,
  Adam slots included; `eval_results.txt` identical);
* the other stack's checkpoint resumes training here;
* the other stack's SavedModel loads and serves the same probabilities.
"""

import os
import shutil

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from helpers import run_script
import stack_runs

from bert_tf.train import checkpoints

pytestmark = pytest.mark.slow

_STACKS = ("tf2.15", "tf2.21")
# Float32 rounding after 3 Adam steps; a CPU of another instruction set
# (other oneDNN kernels) rounds differently too.
_ATOL = 1e-6


def _other():
  here = stack_runs.stack_name()
  return [name for name in _STACKS if name != here][0]


def _kept(name, *parts):
  return os.path.join(stack_runs.STACKS_DIR, name, *parts)


def _values(checkpoint):
  """The checkpoint's variables (the input's position, which the kept
  checkpoints predate, left out)."""
  reader = tf.train.load_checkpoint(checkpoint)
  return {name: reader.get_tensor(name)
          for name in reader.get_variable_to_shape_map()
          if not name.startswith(checkpoints.POSITION_SCOPE + "/")}


def _eval_results(path):
  with open(path, encoding="utf-8") as f:
    return {k: float(v) for k, v in
            (line.strip().split(" = ") for line in f if line.strip())}


@pytest.fixture(scope="module")
def run_here(tmp_path_factory):
  work = str(tmp_path_factory.mktemp("stack_run"))
  out = os.path.join(work, "out")
  stack_runs.run_pretraining(work, out)
  return work, out


@pytest.mark.both_stacks
@pytest.mark.parametrize("stack", _STACKS)
def test_the_same_run_ends_where_each_stack_ended(run_here, stack):
  _, out = run_here
  here = _values(tf.train.latest_checkpoint(out))
  there = _values(_kept(stack, "pretraining", "model.ckpt-3"))
  assert sorted(here) == sorted(there)
  assert len(here) > 100
  worst = max(float(np.max(np.abs(here[n] - there[n]))) for n in here
              if here[n].dtype.kind == "f")
  assert worst <= _ATOL, worst
  assert here["global_step"] == there["global_step"] == 3
  got = _eval_results(os.path.join(out, "eval_results.txt"))
  want = _eval_results(_kept(stack, "pretraining", "eval_results.txt"))
  assert sorted(got) == sorted(want)
  for key, value in want.items():
    assert got[key] == pytest.approx(value, rel=1e-5, abs=1e-6), key


@pytest.mark.both_stacks
def test_the_other_stacks_checkpoint_resumes_here(run_here, tmp_path):
  work, _ = run_here
  out = str(tmp_path / "resumed")
  shutil.copytree(_kept(_other(), "pretraining"), out)
  data = os.path.join(work, "data.tfrecord")
  result = run_script(
      "run_pretraining.py", stack_runs.pretraining_args(data, out, 5),
      env={"TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""})
  assert result.returncode == 0, result.stderr[-3000:]
  assert "Restoring parameters from %s" % os.path.join(out, "model.ckpt-3") \
      in result.stderr
  latest = tf.train.latest_checkpoint(out)
  assert latest.endswith("model.ckpt-5")
  name = "bert/encoder/layer_0/attention/self/query/kernel"
  before = tf.train.load_variable(_kept(_other(), "pretraining",
                                        "model.ckpt-3"), name)
  assert not np.array_equal(tf.train.load_variable(latest, name), before)


@pytest.mark.both_stacks
@pytest.mark.parametrize("stack", _STACKS)
def test_each_stacks_saved_model_serves_the_same_here(stack):
  export = _kept(stack, "export")
  want = np.load(os.path.join(export, "outputs.npz"))["probabilities"]
  np.testing.assert_allclose(stack_runs.serve(export), want, atol=_ATOL)
  [other] = [name for name in _STACKS if name != stack]
  np.testing.assert_allclose(
      want, np.load(_kept(other, "export", "outputs.npz"))["probabilities"],
      atol=_ATOL)
