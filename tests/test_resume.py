"""Exact resume: a run stopped at step K and rerun ends as the run that
never stopped, every tensor of its final checkpoint bit for bit.

In process, through `loop.run` on each runner: a small model whose update
depends on which examples each step reads (a shuffled, repeated input) and
on dropout, under `--deterministic`; the stop is a first run that ends at
step K with its checkpoint. Old checkpoints, without the input's position,
still resume (the input restarts, with one warning line).
"""

import os

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from helpers import RUNNERS

from bert_tf.runner import loop
from bert_tf.runner import select as runner_lib
from bert_tf.train import checkpoints
from bert_tf.train import model_fn as model_fn_utils
from bert_tf.train import options as training_options
from bert_tf.train import spec as spec_lib

_STEPS = 6


def _model_fn(features, labels, mode, params):
  del labels, params
  x = features["x"]
  init = tf.truncated_normal_initializer(stddev=0.5)  # As modeling.py's.
  hidden = tf.matmul(x, tf.get_variable("hidden", [4, 8], initializer=init))
  # The reference's dropout op (modeling.dropout): masks drawn each step.
  hidden = tf.nn.dropout(hidden, rate=0.0)
  y = tf.matmul(hidden, tf.get_variable("out", [8, 1], initializer=init))
  loss = tf.reduce_mean(tf.square(y[:, 0] - tf.reduce_sum(x, axis=1)))
  return model_fn_utils.train_spec(loss, 0.01, _STEPS, 0, use_tpu=False)


def _input_fn(params, config=None):
  x = np.arange(40, dtype=np.float32).reshape(10, 4) / 10.0
  data = tf.data.Dataset.from_tensor_slices({"x": x}).repeat()
  data = data.shuffle(7, seed=getattr(config, "tf_random_seed", None))
  return data.batch(params["batch_size"], drop_remainder=True)


def _train(out, runner, steps, accumulation=1):
  run = training_options.RunOptions(
      tpu=training_options.TpuOptions(runner=runner), train_batch_size=3,
      save_checkpoints_steps=100, save_checkpoints_secs=0, do_train=True,
      training=training_options.TrainingOptions(deterministic=True))
  with loop.output_dir(out, run):
    loop.run(_model_fn, run, out,
             training=loop.Training(_input_fn, num_train_steps=steps))
  return checkpoints.latest(out)


def _tensors(prefix):
  reader = tf.train.load_checkpoint(prefix)
  return {name: reader.get_tensor(name)
          for name in reader.get_variable_to_shape_map()}


def _assert_identical(prefix, expected_prefix, position=True):
  got, expected = _tensors(prefix), _tensors(expected_prefix)
  if not position:
    got = {k: v for k, v in got.items()
           if not k.startswith(checkpoints.POSITION_SCOPE)}
    expected = {k: v for k, v in expected.items()
                if not k.startswith(checkpoints.POSITION_SCOPE)}
  assert sorted(got) == sorted(expected)
  for name in expected:
    assert np.array_equal(got[name], expected[name]), name


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
  """The final checkpoint of each runner's run that never stopped."""
  return {runner: _train(str(tmp_path_factory.mktemp(runner)), runner,
                         _STEPS)
          for runner in RUNNERS}


@pytest.mark.parametrize("runner", RUNNERS)
def test_a_run_stopped_and_resumed_ends_bit_identical(
    tmp_path, runner, uninterrupted):
  out = str(tmp_path)
  stopped = _train(out, runner, 2)
  assert any(name.startswith(checkpoints.POSITION_SCOPE + "/")
             for name in _tensors(stopped))
  final = _train(out, runner, _STEPS)
  assert final.endswith("-%d" % _STEPS)
  _assert_identical(final, uninterrupted[runner])


def test_an_old_checkpoint_without_the_position_resumes_with_a_warning(
    tmp_path, caplog):
  out = str(tmp_path)
  run = training_options.RunOptions(
      tpu=training_options.TpuOptions(runner="session"), train_batch_size=3,
      save_checkpoints_steps=100, save_checkpoints_secs=0)
  # The runner alone, as older versions trained: no position saved.
  runner_lib.make_runner(_model_fn, run, out).train(_input_fn, max_steps=2)
  assert not any(name.startswith(checkpoints.POSITION_SCOPE)
                 for name in _tensors(checkpoints.latest(out)))
  final = _train(out, "session", 3)
  assert final.endswith("-3")
  assert any(name.startswith(checkpoints.POSITION_SCOPE)
             for name in _tensors(final))
  [warning] = [r.getMessage() for r in caplog.records
               if "holds no input position" in r.getMessage()]
  assert warning.endswith("the input pipeline restarts from its beginning")
