"""Exact resume: a run stopped at step K and rerun ends as the run that
never stopped, every tensor of its final checkpoint bit for bit.

In process, through `loop.run` on each runner: a small model whose update
depends on which examples each step reads (a shuffled, repeated input) and
on its dropout masks, under `--deterministic`; the stop is a first run that
ends at step K with its checkpoint. Old checkpoints, without the input's position,
still resume (the input restarts, with one warning line). Slow tests: two
mirrored replicas (a fresh process), and `run_pretraining.py` (dropout
on) killed with SIGKILL mid-run and rerun.
"""

import dataclasses
import functools
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import tensorflow as tf_v2
import tensorflow.compat.v1 as tf

import fault_helpers as fh
from helpers import REPO_ROOT
from helpers import RUNNERS

from bert_tf.cli import fine_tuning
from bert_tf.cli import startup
from bert_tf.runner import loop
from bert_tf.runner import select as runner_lib
from bert_tf.train import checkpoints
from bert_tf.train import model_fn as model_fn_utils
from bert_tf.train import optimizer_options
from bert_tf.train import options as training_options
from bert_tf.train import spec as spec_lib
import modeling

_STEPS = 6
_DROPOUT = 0.3


@pytest.fixture(scope="module", autouse=True)
def _op_determinism_left_off():
  """`--deterministic` here fixes the seeds alone: its op determinism is
  process-wide (later tests' unseeded random ops would fail), and the
  tiny model's ops give the same results without it."""
  with pytest.MonkeyPatch.context() as patch:
    patch.setattr(tf_v2.config.experimental, "enable_op_determinism",
                  lambda: None)
    yield


def _model_fn(features, labels, mode, params, options=None, seed=None):
  del labels, params
  x = features["x"]
  init = tf.truncated_normal_initializer(stddev=0.5)  # As modeling.py's.
  hidden = tf.matmul(x, tf.get_variable("hidden", [4, 8], initializer=init))
  hidden = modeling.dropout(
      hidden, _DROPOUT, model_fn_utils.dropout_seed(seed, mode, options))
  y = tf.matmul(hidden, tf.get_variable("out", [8, 1], initializer=init))
  loss = tf.reduce_mean(tf.square(y[:, 0] - tf.reduce_sum(x, axis=1)))
  return model_fn_utils.train_spec(loss, 0.01, _STEPS, 0, use_tpu=False,
                                   options=options)


def _input_fn(params, config=None):
  x = np.arange(40, dtype=np.float32).reshape(10, 4) / 10.0
  data = tf.data.Dataset.from_tensor_slices({"x": x}).repeat()
  data = data.shuffle(7, seed=getattr(config, "tf_random_seed", None))
  return data.batch(params["batch_size"], drop_remainder=True)


def _run_options(runner, accumulation=1, replicas=1):
  update = optimizer_options.OptimizerOptions(
      gradient_accumulation_steps=accumulation)
  distribute = training_options.DistributeOptions()
  if replicas > 1:
    distribute = training_options.DistributeOptions(
        distribution_strategy="mirrored", num_gpus=0,
        num_cpu_devices=replicas)
  return training_options.RunOptions(
      tpu=training_options.TpuOptions(runner=runner), distribute=distribute,
      train_batch_size=4,
      save_checkpoints_steps=100, save_checkpoints_secs=0, do_train=True,
      training=training_options.TrainingOptions(
          deterministic=True, optimizer_options=update))


def _train(out, runner, accumulation=1, replicas=1, steps=_STEPS):
  run = _run_options(runner, accumulation, replicas)
  model_fn = functools.partial(
      _model_fn, options=run.training.optimizer_options,
      seed=run.training.dropout_seed)
  with loop.output_dir(out, run):
    loop.run(model_fn, run, out,
             training=loop.Training(_input_fn, num_train_steps=steps))
  return checkpoints.latest(out)


def _tensors(prefix):
  reader = tf.train.load_checkpoint(prefix)
  return {name: reader.get_tensor(name)
          for name in reader.get_variable_to_shape_map()}


def _assert_identical(prefix, expected_prefix, position=True):
  got, expected = _tensors(prefix), _tensors(expected_prefix)
  assert sorted(got) == sorted(expected)
  if not position:
    expected = {k: v for k, v in expected.items()
                if not k.startswith(checkpoints.POSITION_SCOPE)}
  for name in expected:
    assert np.array_equal(got[name], expected[name]), name


# (runner, micro-batches per update, mirrored replicas); two replicas need
# a fresh process (`test_mirrored_replicas_stopped_and_resumed_...`).
_CASES = [(runner, 1, 1) for runner in RUNNERS] + [("session", 2, 1)]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
  """The final checkpoint of the run that never stopped, by case."""
  return {case: _train(str(tmp_path_factory.mktemp("whole")), *case,
                       steps=_STEPS) for case in _CASES}


@pytest.mark.parametrize("case", _CASES, ids=lambda c: "%s-%d-%d" % c)
def test_a_run_stopped_and_resumed_ends_bit_identical(
    tmp_path, case, uninterrupted):
  out = str(tmp_path)
  stopped = _train(out, *case, steps=2)
  assert any(name.startswith(checkpoints.POSITION_SCOPE + "/")
             for name in _tensors(stopped))
  final = _train(out, *case)
  assert final.endswith("-%d" % _STEPS)
  _assert_identical(final, uninterrupted[case])


# argv: output folder, runners. Two logical CPUs; each replica draws its
# own masks; then each mirrored case (each runner; the session runner with
# accumulation too): the uninterrupted run, and one stopped at step 2 and
# resumed.
_MIRRORED = textwrap.dedent("""
    import os
    import sys
    import numpy as np
    import tensorflow as tf2
    cpu = tf2.config.list_physical_devices("CPU")[0]
    tf2.config.set_logical_device_configuration(
        cpu, [tf2.config.LogicalDeviceConfiguration()] * 2)
    import tensorflow.compat.v1 as tf
    import modeling
    import test_resume as t
    from bert_tf.train import model_fn
    with tf.Graph().as_default():
      strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
      with strategy.scope():
        tf.train.get_or_create_global_step()
        masks = strategy.extended.call_for_each_replica(
            lambda: modeling.dropout(tf.ones([64]), 0.5, model_fn.dropout_seed(
                1, "train")))
        with tf.Session(config=tf.ConfigProto(device_count={"CPU": 2})) as s:
          s.run(tf.global_variables_initializer())
          first, second = s.run(strategy.experimental_local_results(masks))
    assert not np.array_equal(first, second)
    for runner, accumulation in [(r, 1) for r in sys.argv[2:]] + [
        ("session", 2)]:
      out = os.path.join(sys.argv[1], runner + str(accumulation))
      whole = t._train(out + "whole", runner, accumulation, 2)
      t._train(out, runner, accumulation, 2, steps=2)
      t._assert_identical(t._train(out, runner, accumulation, 2), whole)
    print("identical")
""")


@pytest.mark.slow
def test_mirrored_replicas_stopped_and_resumed_end_bit_identical(tmp_path):
  paths = [REPO_ROOT, os.path.join(REPO_ROOT, "tests")]
  result = subprocess.run(
      [sys.executable, "-c", _MIRRORED, str(tmp_path)] + list(RUNNERS),
      cwd=REPO_ROOT,
      env=fh.env(PYTHONPATH=os.pathsep.join(paths)), capture_output=True,
      text=True, timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout.split()[-1] == "identical"
  assert "restarts from its beginning" not in result.stderr


def test_an_old_checkpoint_without_the_position_resumes_with_a_warning(
    tmp_path, caplog):
  out = str(tmp_path)
  # The runner alone, as older versions trained: no position saved.
  runner_lib.make_runner(_model_fn, _run_options("session"), out).train(_input_fn, max_steps=2)
  assert not any(name.startswith(checkpoints.POSITION_SCOPE)
                 for name in _tensors(checkpoints.latest(out)))
  final = _train(out, "session", steps=3)
  assert final.endswith("-3")
  assert any(name.startswith(checkpoints.POSITION_SCOPE)
             for name in _tensors(final))
  [warning] = [r.getMessage() for r in caplog.records
               if "holds no input position" in r.getMessage()]
  assert warning.endswith("the input pipeline restarts from its beginning")


def _counting_model_fn(features, labels, mode, params, options=None):
  """_model_fn, also counting in a variable how often each example id
  was read by a training step."""
  seen = tf.get_variable("seen", [10], tf.int32, trainable=False,
                         initializer=tf.zeros_initializer())
  count = tf.scatter_add(seen, features.pop("id"),
                         tf.ones_like(features["x"][:, 0], tf.int32))
  with tf.control_dependencies([count]):
    features["x"] = tf.identity(features["x"])
  return _model_fn(features, labels, mode, params, options)


def _epochs_input_fn(params, config=None):
  """10 examples with their ids, each epoch in a new shuffled order (no
  seed: a new one in each process)."""
  del config
  x = np.arange(40, dtype=np.float32).reshape(10, 4) / 10.0
  data = tf.data.Dataset.from_tensor_slices({"x": x, "id": np.arange(10)})
  data = data.shuffle(10).repeat()
  return data.batch(params["batch_size"], drop_remainder=True)


@pytest.mark.parametrize("runner", RUNNERS)
def test_without_deterministic_a_resumed_run_reads_each_example_as_often(
    tmp_path, runner):
  run = dataclasses.replace(_run_options(runner), train_batch_size=2,
                            training=training_options.TrainingOptions())
  model_fn = functools.partial(_counting_model_fn,
                               options=run.training.optimizer_options)

  def train(steps):
    with loop.output_dir(str(tmp_path), run):
      loop.run(model_fn, run, str(tmp_path), training=loop.Training(
          _epochs_input_fn, num_train_steps=steps))
    return _tensors(checkpoints.latest(str(tmp_path)))["seen"]

  # Stopped mid-epoch (6 of 10 read), resumed to 2 epochs: 2 reads each,
  # as without the stop (a restarted input would give 3 to some).
  assert sorted(train(3)) == [0] * 4 + [1] * 6
  assert train(10).tolist() == [2] * 10


@pytest.mark.slow
def test_run_pretraining_killed_mid_run_and_rerun_ends_bit_identical(
    tmp_path):
  with open(fh.tiny("bert_config.json")) as f:  # Dropout on.
    assert json.load(f)["hidden_dropout_prob"] > 0
  data = fh.write_records(str(tmp_path / "train.tfrecord"), 40)

  def command(out):
    return fh.pretraining_flags(
        data, out, num_train_steps=8, save_checkpoints_steps=1,
        deterministic=True)

  whole, killed = str(tmp_path / "whole"), str(tmp_path / "killed")
  assert fh.run("run_pretraining.py", command(whole)).returncode == 0
  proc = fh.start("run_pretraining.py", command(killed))
  state = os.path.join(killed, "checkpoint")
  deadline = time.time() + 120
  while time.time() < deadline and proc.poll() is None:
    if os.path.exists(state) and "model.ckpt-3" in open(state).read():
      break
    time.sleep(0.005)
  proc.send_signal(signal.SIGKILL)
  proc.communicate()
  assert proc.returncode == -signal.SIGKILL  # Killed before its end.
  stopped_at = checkpoints.latest(killed)
  assert not stopped_at.endswith("-8"), stopped_at
  rerun = fh.run("run_pretraining.py", command(killed))
  assert rerun.returncode == 0, fh.last_line(rerun.stderr)
  # The variables alike; the positions' bytes hold what the prefetch
  # buffers held at the save, which varies with thread timing.
  _assert_identical(checkpoints.latest(killed), checkpoints.latest(whole),
                    position=False)


@pytest.mark.parametrize("deterministic", [False, True])
def test_dropout_draws_stateless_masks_only_in_deterministic_runs(
    deterministic):
  seed = training_options.TrainingOptions(
      deterministic=deterministic).dropout_seed
  with tf.Graph().as_default() as graph:
    tf.train.get_or_create_global_step()
    _model_fn({"x": tf.zeros([3, 4])}, None, spec_lib.ModeKeys.TRAIN, {},
              seed=seed)
  types = {op.type for op in graph.get_operations()}
  assert ("RandomUniform" in types) != deterministic  # tf.nn.dropout's.
  assert any(t.startswith("StatelessRandomUniform")
             for t in types) == deterministic


@pytest.mark.parametrize("runner,strategy,use_tpu,saved", [
    ("session", "none", False, True),
    ("estimator", "none", False, True),
    ("session", "mirrored", False, True),
    ("estimator", "mirrored", False, True),
    ("session", "multi_worker_mirrored", False, False),
    ("estimator", "none", True, False),
])
def test_where_the_input_position_is_saved(runner, strategy, use_tpu, saved):
  run = training_options.RunOptions(
      tpu=training_options.TpuOptions(runner=runner, use_tpu=use_tpu),
      distribute=training_options.DistributeOptions(
          distribution_strategy=strategy))
  assert loop._saves_position(run) == saved  # pylint: disable=protected-access


class _LossHead(model_fn_utils.Head):
  """The pooled output's mean as the loss: enough to train."""

  def build(self, model, features, mode, update_share=None):
    del features, mode, update_share
    return model_fn_utils.HeadOutput(
        loss=tf.reduce_mean(model.get_pooled_output()))


@pytest.mark.parametrize("deterministic", [False, True])
def test_a_scripts_deterministic_run_hands_its_seed_to_the_encoder(
    deterministic):
  # run_ner.py and run_squad.py build their model_fn here; the other
  # training scripts pass the same option (checked below by name).
  run = training_options.RunOptions(
      training=training_options.TrainingOptions(deterministic=deterministic))
  model = startup.Model(modeling.BertConfig(
      vocab_size=20, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
      intermediate_size=8, max_position_embeddings=8), None, None)
  with tf.Graph().as_default() as graph:
    tf.train.get_or_create_global_step()
    features = {name: tf.ones([2, 4], tf.int32)
                for name in ("input_ids", "input_mask", "segment_ids")}
    fine_tuning.model_fn(_LossHead(), model, run, 1e-3, loop.Training(
        None, num_train_steps=2, num_warmup_steps=0))(
        features, None, spec_lib.ModeKeys.TRAIN, {})
  types = {op.type for op in graph.get_operations()}
  assert any(t.startswith("StatelessRandomUniform")
             for t in types) == deterministic
  for script in ("run_classifier.py", "run_pretraining.py",
                 "run_multiple_choice.py"):
    with open(os.path.join(REPO_ROOT, script)) as f:
      assert "dropout_seed=run.training.dropout_seed" in f.read(), script
