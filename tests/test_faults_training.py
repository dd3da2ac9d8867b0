"""Training under faults: preemption (SIGTERM), two runs in one folder, and
losing little (timed checkpoints, progress and summaries at the first,
last and every-so-often step).
"""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
import tensorflow.compat.v1 as tf

from tensorflow.python.data.ops import multi_device_iterator_ops

import extract_features
import fault_helpers as fh
from helpers import RUNNERS
from helpers import runner_pairs
from helpers import sgd_train_spec
import predict_masked_lm
import run_pretraining
from bert_tf.checks import lock as lock_checks
from bert_tf.runner import loop
from bert_tf.runner import select as runner_lib
from bert_tf.tasks.classifier import features as classifier_features
from bert_tf.tasks.squad import model as squad_model
from bert_tf.train import checkpoints
from bert_tf.train import hooks as train_hooks
from bert_tf.train import input_fn as input_utils
from bert_tf.train import options as training_options
from bert_tf.train import spec as spec_lib


def _steps_of(output_dir):
  state = tf.train.get_checkpoint_state(output_dir)
  return [int(p.rsplit("-", 1)[1]) for p in state.all_model_checkpoint_paths]


def _scalar_steps(output_dir, tag):
  steps = set()
  for path in tf.io.gfile.glob(os.path.join(output_dir, "events.out.*")):
    for event in tf.train.summary_iterator(path):
      if any(value.tag == tag for value in event.summary.value):
        steps.add(event.step)
  return steps


@pytest.fixture
def data(tmp_path):
  return fh.write_records(str(tmp_path / "data.tfrecord"), 16)


@pytest.mark.both_stacks
@pytest.mark.slow
@pytest.mark.parametrize("runner", RUNNERS)
def test_sigterm_saves_the_current_step_and_rerun_resumes(tmp_path, data,
                                                          runner):
  output_dir = str(tmp_path / "out")
  proc = fh.start("run_pretraining.py", fh.pretraining_flags(
      data, output_dir, num_train_steps=1000000, do_eval=True,
      runner=runner))
  lines = fh.Lines(proc)
  lines.wait_for(r"step 1: first step of this run")
  time.sleep(2.0)
  proc.send_signal(signal.SIGTERM)
  # (A bound against a hang, not a timing: what held the exit up is checked
  # by test_training_sessions_have_no_autotuning_iterator.)
  assert proc.wait(timeout=60) == train_hooks.PREEMPTED_EXIT_STATUS
  text = lines.text()
  received = re.search(r"SIGTERM received: saving a checkpoint at step (\d+), "
                       "then stopping", text)
  assert received, text[-3000:]
  step = int(received.group(1))
  assert step > 1
  latest = tf.train.latest_checkpoint(output_dir)
  assert latest.endswith("model.ckpt-%d" % step)
  assert tf.train.load_variable(latest, "global_step") == step
  assert re.search(r"Stopped by SIGTERM at step %d; checkpoint \S+"
                   r"model\.ckpt-%d saved; rerun the same command" %
                   (step, step), text)
  assert "Running evaluation" not in text  # Stopped, not evaluated.

  again = fh.run("run_pretraining.py", fh.pretraining_flags(
      data, output_dir, num_train_steps=step + 3, runner=runner))
  assert again.returncode == 0, again.stderr[-3000:]
  assert "step %d: first step of this run (resumed)" % (step + 1) in (
      again.stderr)
  assert tf.train.latest_checkpoint(output_dir).endswith(
      "model.ckpt-%d" % (step + 3))


@pytest.mark.both_stacks
@pytest.mark.slow
def test_ctrl_c_saves_the_current_step_like_sigterm(tmp_path, data):
  output_dir = str(tmp_path / "out")
  proc = fh.start("run_pretraining.py", fh.pretraining_flags(
      data, output_dir, num_train_steps=1000000, do_eval=True))
  lines = fh.Lines(proc)
  lines.wait_for(r"step 1: first step of this run")
  time.sleep(2.0)
  proc.send_signal(signal.SIGINT)
  assert proc.wait(timeout=60) == train_hooks.INTERRUPTED_EXIT_STATUS
  text = lines.text()
  assert "Traceback" not in text and "KeyboardInterrupt" not in text
  received = re.search(r"Ctrl-C \(SIGINT\) received: saving a checkpoint at "
                       r"step (\d+), then stopping", text)
  assert received, text[-3000:]
  step = int(received.group(1))
  latest = tf.train.latest_checkpoint(output_dir)
  assert latest.endswith("model.ckpt-%d" % step)
  assert re.search(r"Stopped by Ctrl-C at step %d; checkpoint \S+"
                   r"model\.ckpt-%d saved" % (step, step), text)
  assert "Running evaluation" not in text


def test_second_ctrl_c_restores_the_default_action():
  # The handler the process had: Python's default_int_handler, or SIG_IGN
  # where the shell started it in the background (nohup, `&`).
  before = signal.getsignal(signal.SIGINT)
  hook = train_hooks.PreemptionHook()
  with tf.Graph().as_default():
    tf.train.get_or_create_global_step()
    hook.begin()
    try:
      assert signal.getsignal(signal.SIGINT) == hook._on_signal  # pylint: disable=protected-access
      hook._on_signal(signal.SIGINT, None)  # pylint: disable=protected-access
      # The next Ctrl-C kills the process at once.
      assert signal.getsignal(signal.SIGINT) == signal.SIG_DFL
    finally:
      hook.end(None)
  assert signal.getsignal(signal.SIGINT) == before


@pytest.mark.slow
def test_second_run_in_a_live_runs_folder_is_refused(tmp_path, data):
  output_dir = str(tmp_path / "out")
  first = fh.start("run_pretraining.py", fh.pretraining_flags(
      data, output_dir, num_train_steps=1000000))
  lines = fh.Lines(first)
  try:
    lines.wait_for(r"step 1: first step of this run")
    second = fh.run("run_pretraining.py", fh.pretraining_flags(
        data, output_dir, num_train_steps=3))
    assert second.returncode == 1
    assert fh.last_line(second.stderr) == (
        "error: --output_dir: %s is in use by another training run (pid %d); "
        "wait for it to finish or use another folder" % (output_dir,
                                                         first.pid))
    # Evaluation only is not a training run: allowed beside it.
  finally:
    first.kill()  # SIGKILL: the lock must not outlive the process.
    first.wait()
  third = fh.run("run_pretraining.py", fh.pretraining_flags(
      data, output_dir, num_train_steps=3))
  assert third.returncode == 0, third.stderr[-3000:]


def test_lock_is_released_when_its_process_dies(tmp_path):
  folder = str(tmp_path / "out")
  code = ("import sys; sys.path.insert(0, %r); "
          "from bert_tf.checks import lock; "
          "held = lock.lock_output_dir(%r); print('locked', flush=True); "
          "import time; time.sleep(60)" % (fh.script(""), folder))
  holder = subprocess.Popen([fh.sys.executable, "-c", code],
                            stdout=subprocess.PIPE, text=True)
  try:
    assert holder.stdout.readline().strip() == "locked"
    with pytest.raises(ValueError, match=r"in use by another training run "
                       r"\(pid %d\)" % holder.pid):
      lock_checks.lock_output_dir(folder)
  finally:
    holder.kill()
    holder.wait()
  with lock_checks.lock_output_dir(folder):  # Free again.
    with pytest.raises(ValueError, match=r"\(pid %d\)" % os.getpid()):
      lock_checks.lock_output_dir(folder)  # Held, by this process now.
  lock_checks.lock_output_dir(folder).release()  # Released: free again.


@pytest.mark.both_stacks
@pytest.mark.slow
def test_timed_checkpoints_progress_and_summaries(tmp_path, data):
  output_dir = str(tmp_path / "out")
  result = fh.run("run_pretraining.py", fh.pretraining_flags(
      data, output_dir, num_train_steps=600, save_checkpoints_steps=1000,
      save_checkpoints_secs=1))
  assert result.returncode == 0, result.stderr[-3000:]
  err = result.stderr
  assert ("--num_train_steps=600 is below --save_checkpoints_steps=1000: "
          "checkpoints are written every --save_checkpoints_secs=1 seconds "
          "and at the end only") in err
  steps = _steps_of(output_dir)
  # By steps alone: 0 and 600. By time (600 steps take over a second even
  # on a fast machine): some in between too.
  assert steps[-1] == 600 and any(0 < s < 600 for s in steps), steps
  assert "timed checkpoint" in err
  assert "step 1: first step of this run" in err
  assert re.search(r"step 600: [\d.]+ examples/sec", err), err[-3000:]
  # Summaries at the first step, every 100 steps (101 on an idle machine;
  # 100 where a timed checkpoint's save fell on the summary's step) and the
  # last.
  summary_steps = _scalar_steps(output_dir, "loss")
  assert {1, 600} <= summary_steps and summary_steps & {100, 101}, (
      sorted(summary_steps))

  again = fh.run("run_pretraining.py", fh.pretraining_flags(
      data, output_dir, num_train_steps=605, save_checkpoints_steps=1000,
      save_checkpoints_secs=0))
  assert again.returncode == 0, again.stderr[-3000:]
  assert "step 601: first step of this run (resumed)" in again.stderr
  assert re.search(r"step 605: [\d.]+ examples/sec", again.stderr)
  assert {601, 605} <= _scalar_steps(output_dir, "loss")
  assert "timed checkpoint" not in again.stderr


def _scalar_events(output_dir, tag):
  """[(step, value)] of every `tag` scalar in the folder's event files."""
  found = []
  for path in sorted(tf.io.gfile.glob(os.path.join(output_dir,
                                                   "events.out.*"))):
    for event in tf.train.summary_iterator(path):
      found += [(event.step, value.simple_value)
                for value in event.summary.value if value.tag == tag]
  return sorted(found)


@pytest.mark.slow
@pytest.mark.parametrize("runner", RUNNERS)
def test_accumulation_logs_and_summaries_count_updates(tmp_path, data,
                                                       runner):
  output_dir = str(tmp_path / "out")
  result = fh.run("run_pretraining.py", fh.pretraining_flags(
      data, output_dir, num_train_steps=20, gradient_accumulation_steps=2,
      runner=runner))
  assert result.returncode == 0, result.stderr[-3000:]
  progress = re.findall(r"\] ((?:step|batch) \d+): ", result.stderr)
  assert not [p for p in progress if p.startswith("batch")], progress
  steps = [int(p.split()[1]) for p in progress]
  # The first, the periodic (every 2 = 20 // 10) and the final update, once
  # each, never past the run's 20 steps.
  assert steps == sorted(set(steps)) and steps[0] == 1 and steps[-1] == 20, (
      steps)
  rates = re.findall(r"step \d+: ([\d.]+) examples/sec", result.stderr)
  assert rates
  for tag in ("loss", "learning_rate"):
    events = _scalar_events(output_dir, tag)
    assert [step for step, _ in events] == [1, 20], (tag, events)


class _Values(object):

  def __init__(self, results):
    self.results = results


class _Session(object):

  def __init__(self, value):
    self.value = value

  def run(self, fetches):
    del fetches
    return self.value


class _Context(object):

  def __init__(self, session):
    self.session = session


def _progress_lines(monkeypatch, global_steps, total_steps, end_value=None,
                    training=True, read_after_increment=False):
  """ProgressHook's log lines for a run whose step reads `global_steps`."""
  lines = []
  monkeypatch.setattr(train_hooks.logging, "info",
                      lambda message, *args: lines.append(message % args))
  with tf.Graph().as_default():
    tf.train.get_or_create_global_step()
    hook = train_hooks.ProgressHook(4, total_steps=total_steps,
                                    every_n_steps=100, every_n_secs=1e9,
                                    training=training)
    hook.begin()
    for value in global_steps:  # The run's read, then the one after it.
      hook.after_run(_Context(_Session(value + 1)),
                     _Values(value + read_after_increment))
    hook.end(_Session(end_value if end_value is not None
                      else global_steps[-1] + 1))
  return [line.split(":")[0] for line in lines]


def test_progress_at_the_first_and_final_step(monkeypatch):
  assert _progress_lines(monkeypatch, list(range(10)), 10) == [
      "step 1", "step 10"]
  # The step fetched with the train op may be read after its increment (no
  # order between them, seen under load); the step read after the run is
  # the one reported (a diverged run's message names it).
  assert _progress_lines(monkeypatch, list(range(10)), 10,
                         read_after_increment=True) == ["step 1", "step 10"]
  # A resumed run says so at its first step.
  lines = _progress_lines(monkeypatch, list(range(5, 10)), 10)
  assert lines == ["step 6", "step 10"]
  # A run of one step (the last one left).
  assert _progress_lines(monkeypatch, [9], 10) == ["step 10"]
  # Prediction (said so, not guessed): batches are counted.
  assert _progress_lines(monkeypatch, [7] * 6, 6, end_value=7,
                         training=False) == ["batch 1", "batch 6"]


_RUN = training_options.RunOptions(train_batch_size=4,
                                   save_checkpoints_steps=5,
                                   save_checkpoints_secs=0)
_TRAINING = loop.Training(input_fn=None, num_train_steps=10)


def test_exit_if_preempted_reads_its_own_hooks(tmp_path):
  stopped, running = train_hooks.PreemptionHook(), train_hooks.PreemptionHook()
  stopped.stopped_at_step = 7
  train_hooks.exit_if_preempted(str(tmp_path), [running])  # Not stopped.
  train_hooks.exit_if_preempted(str(tmp_path), [])
  with pytest.raises(SystemExit) as info:
    train_hooks.exit_if_preempted(str(tmp_path), [running, stopped])
  assert info.value.code == train_hooks.PREEMPTED_EXIT_STATUS
  # Each run's hooks start unstopped.
  fresh = [h for h in loop.training_hooks(_RUN, str(tmp_path), _TRAINING,
                                          checkpoints.Saving())
           if isinstance(h, train_hooks.PreemptionHook)]
  assert len(fresh) == 1 and fresh[0].stopped_at_step is None


def test_only_the_chief_gets_the_summary_writer(monkeypatch, tmp_path):
  cluster = {"worker": ["localhost:1", "localhost:2"]}
  for index, writes in ((0, True), (1, False)):
    monkeypatch.setenv("TF_CONFIG", json.dumps(
        {"cluster": cluster, "task": {"type": "worker", "index": index}}))
    hooks = loop.training_hooks(_RUN, str(tmp_path), _TRAINING,
                                checkpoints.Saving())
    assert any(isinstance(h, train_hooks.SummaryFlushHook)
               for h in hooks) == writes, index
  # A non-chief's eval scores are not written either.
  train_hooks.write_eval_summaries(str(tmp_path), {"eval_f1": 0.5}, 3)
  assert not os.path.exists(tmp_path / "eval")


# ----------------------------------------------------------------------------
# A prompt exit: no tf.data autotuning thread to wait for at Session.close.
# ----------------------------------------------------------------------------
# Each tf.data iterator with autotuning on runs a thread that sleeps between
# tuning rounds, for periods that double as it lives; destroying the
# iterator (Session.close) often fails to wake it, and the close then waits
# out the period: 8-14 s after 20 steps, on both runners and stacks. The
# tests check the mechanism (no iterator of the sessions autotunes), not
# the time.

# Graph ops that start an iterator over a dataset (their input 0).
_ITERATOR_OPS = ("MakeIterator", "MultiDeviceIteratorInit")

# run_pretraining.py whose ProgressHook also writes, at the end of training,
# which of the graph's iterators autotune ({op name: bool}) to AUTOTUNE_PATH.
_AUTOTUNE_DUMPING_MAIN = """
import json, os, sys
import tensorflow.compat.v1 as tf
sys.path.insert(0, os.path.join(os.getcwd(), "tests"))
import fault_helpers as fh
from bert_tf.cli import entry
from bert_tf.train import checkpoints
from bert_tf.train import hooks as train_hooks
import run_pretraining as script

class Hook(train_hooks.ProgressHook):
  def end(self, session):
    super().end(session)
    ops = [op for op in tf.get_default_graph().get_operations()
           if op.type in %r]
    with open(os.environ["AUTOTUNE_PATH"], "w") as f:
      json.dump({op.name: fh.autotune_enabled(op.inputs[0].op)
                 for op in ops}, f)

train_hooks.ProgressHook = Hook
script.define_flags()
entry.run_main(script.main)
""" % (_ITERATOR_OPS,)


def _iterators_autotune(graph):
  """{iterator op name: whether its dataset autotunes} of `graph`."""
  return {op.name: fh.autotune_enabled(op.inputs[0].op)
          for op in graph.get_operations() if op.type in _ITERATOR_OPS}


def test_autotune_enabled_reads_the_nearest_options():
  with tf.Graph().as_default():
    plain = tf.data.Dataset.range(4).map(lambda x: x + 1).batch(2)
    assert fh.autotune_enabled(plain._variant_tensor.op)  # pylint: disable=protected-access
    off = input_utils.without_autotune(plain).prefetch(1)
    assert not fh.autotune_enabled(off._variant_tensor.op)  # pylint: disable=protected-access
    on = tf.data.Options()
    on.autotune.enabled = True
    again = off.with_options(on)
    assert fh.autotune_enabled(again._variant_tensor.op)  # pylint: disable=protected-access
    # Options that leave autotuning unset keep the earlier setting.
    other = tf.data.Options()
    other.deterministic = True
    assert not fh.autotune_enabled(
        off.with_options(other)._variant_tensor.op)  # pylint: disable=protected-access


def test_every_scripts_input_pipeline_runs_without_autotune(tmp_path):
  records = fh.write_records(str(tmp_path / "data.tfrecord"), 4)
  params = {"batch_size": 2}
  ids = [1] * fh.SEQ
  builders = {
      "pretraining %s" % training: run_pretraining.input_fn_builder(
          [records], fh.SEQ, fh.PREDS, is_training=training)
      for training in (True, False)}
  for training in (True, False):
    builders["classifier file %s" % training] = (
        classifier_features.file_based_input_fn_builder(
            records, fh.SEQ, is_training=training, drop_remainder=training))
    builders["squad %s" % training] = squad_model.input_fn_builder(
        records, fh.SEQ, is_training=training, drop_remainder=training)
    builders["classifier memory %s" % training] = (
        classifier_features.input_fn_builder(
            [classifier_features.InputFeatures(ids, ids, ids, 0, True)],
            fh.SEQ, is_training=training, drop_remainder=training))
  features = [extract_features.InputFeatures(0, ["a"], ids, ids, ids)]
  builders["extract_features"] = extract_features.input_fn_builder(
      features, fh.SEQ)
  builders["extract_features streaming"] = (
      extract_features.streaming_input_fn_builder(lambda: iter(features),
                                                  fh.SEQ))
  builders["predict_masked_lm"] = predict_masked_lm._input_fn_builder(  # pylint: disable=protected-access
      [predict_masked_lm.MaskedLine(1, "a", ["a"], ids, ids, ids, [1])],
      fh.SEQ, fh.PREDS)
  for name, input_fn in builders.items():
    with tf.Graph().as_default():
      dataset = input_fn(params=params)
      assert not fh.autotune_enabled(dataset._variant_tensor.op), (  # pylint: disable=protected-access
          name)


def test_session_runner_iterators_run_without_autotune(tmp_path):
  """Whatever the input_fn sets: its training, evaluation and prediction
  sessions have no iterator that autotunes."""

  def model_fn(features, labels, mode, params):
    del labels, params
    w = tf.get_variable("w", [], initializer=tf.zeros_initializer())
    loss = tf.reduce_mean(tf.square(w * features["x"] - 1.0))
    if mode == spec_lib.ModeKeys.TRAIN:
      return sgd_train_spec(loss)
    if mode == spec_lib.ModeKeys.EVAL:
      return spec_lib.model_spec(mode=mode, loss=loss)
    return spec_lib.model_spec(mode=mode, predictions={"p": w * features["x"]})

  def input_fn(params):  # Autotuning left on, as tf.data has it.
    return tf.data.Dataset.from_tensor_slices(
        {"x": [1.0, 2.0, 3.0, 4.0]}).batch(params["batch_size"])

  graphs = []

  class Capture(tf.train.SessionRunHook):

    def begin(self):
      graphs.append(tf.get_default_graph())

  run = training_options.RunOptions(
      tpu=training_options.TpuOptions(runner="session"), train_batch_size=2,
      save_checkpoints_steps=5)
  runner = runner_lib.make_runner(model_fn, run, str(tmp_path),
                                  eval_batch_size=2, predict_batch_size=2)
  runner.train(lambda params: input_fn(params).repeat(), max_steps=3,
               hooks=[Capture()])
  runner.evaluate(input_fn, hooks=[Capture()])
  list(runner.predict(input_fn, hooks=[Capture()]))
  assert len(graphs) == 3
  for graph in graphs:
    found = _iterators_autotune(graph)
    assert found and not any(found.values()), found


def test_per_replica_input_without_autotune_wraps_once():
  input_utils.per_replica_input_without_autotune()
  wrapped = multi_device_iterator_ops._create_device_dataset  # pylint: disable=protected-access
  input_utils.per_replica_input_without_autotune()
  assert multi_device_iterator_ops._create_device_dataset is wrapped  # pylint: disable=protected-access
  assert wrapped.without_autotune


@pytest.mark.slow
@pytest.mark.parametrize("runner,replicas", runner_pairs([1, 2]),
                         ids=["one_device", "two_replicas"])
def test_training_sessions_have_no_autotuning_iterator(tmp_path, data, runner,
                                                       replicas):
  """run_pretraining.py, one device or two CPU replicas (whose batches
  come in turn from the one iterator whose position the checkpoints save),
  either runner: no iterator of the training session autotunes, so none
  keeps Session.close waiting (also after SIGTERM, which closes the same
  session)."""
  output_dir = str(tmp_path / "out")
  dump = str(tmp_path / "autotune.json")
  extra = {}
  if replicas == 2:
    extra = dict(distribution_strategy="mirrored", num_cpu_devices=2)
  proc = subprocess.run(
      [sys.executable, "-c", _AUTOTUNE_DUMPING_MAIN] + fh.pretraining_flags(
          data, output_dir, num_train_steps=2, runner=runner, **extra),
      cwd=fh.REPO_ROOT, env=fh.env(AUTOTUNE_PATH=dump, PYTHONPATH=fh.REPO_ROOT),
      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
      timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  with open(dump) as f:
    found = json.load(f)
  # One iterator, on one device as under two replicas.
  assert len(found) == 1, found
  assert not any(found.values()), found
