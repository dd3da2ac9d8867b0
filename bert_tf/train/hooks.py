"""The hooks of every run, whichever runner runs it, to lose little.

`runner/loop.py` (how every script trains) puts them together, with
`checkpoints.TimedCheckpointHook` (checkpoints by time as well as by
steps). During training: `ProgressHook` (the step, examples/sec and the
time left), `PreemptionHook` (SIGTERM or Ctrl-C saves a checkpoint at the
current step) and `SummaryFlushHook` (summaries at the final step and at a
bounded interval). After: `exit_if_preempted`, which ends a
run that a signal stopped with `PREEMPTED_EXIT_STATUS` (or
`INTERRUPTED_EXIT_STATUS`). `write_eval_summaries` adds the scores computed
after an evaluation to its TensorBoard folder.
"""

import os
import signal
import time
import uuid

from absl import logging
import numpy as np
import tensorflow.compat.v1 as tf

from bert_tf.train import checkpoints
from bert_tf.train import distribute as distribute_utils

__all__ = ["PREEMPTED_EXIT_STATUS", "INTERRUPTED_EXIT_STATUS",
           "ProgressHook", "PreemptionHook", "SummaryFlushHook",
           "write_eval_summaries", "exit_if_preempted"]

# Exit status of a run stopped by SIGTERM after saving its checkpoint: the
# shell's 128 + 15, so a wrapper sees that the run did not finish.
PREEMPTED_EXIT_STATUS = 143
# The same after Ctrl-C (SIGINT): 128 + 2.
INTERRUPTED_EXIT_STATUS = 130


class ProgressHook(tf.train.SessionRunHook):
  """Logs the global step, examples/sec and the estimated time left.

  A line at the first step of a run (a fresh start or a resume), every
  `every_n_steps` steps or `every_n_secs` seconds, whichever comes first,
  and at `total_steps`. In prediction (`training=False`) it counts
  batches. With gradient accumulation (or fp16 loss scaling) a step is an
  update, not a run (`conditional=True`): the line, the rate and the ETA
  follow the global step, read after each run.

  Args:
    batch_size: int, examples per step (per update) or per batch.
    total_steps: int or None, the step (or batch) at which the run ends,
      for the ETA.
    every_n_steps: int, how often to log, in steps.
    every_n_secs: float, how often to log at least, in seconds.
    training: bool, whether the session trains (counts global steps) or
      predicts (counts batches).
    conditional: bool, training only: whether a run may leave the global
      step as it is (`OptimizerOptions.conditional_update`).

  Attributes:
    last_step: int or None, the step (or batch) the latest run reached.
    running: bool, whether a run began whose end this hook has not seen (a
      hook before it stopped the session there: the NaN check).
  """

  def __init__(self, batch_size, total_steps=None, every_n_steps=100,
               every_n_secs=60.0, training=True, conditional=False):
    self._batch_size = batch_size
    self._total_steps = total_steps
    self._every_n_steps = max(1, int(every_n_steps))
    self._every_n_secs = every_n_secs
    self._unit = "step" if training else "batch"
    self._conditional = training and conditional
    self._global_step = None
    self._last_time = None
    self._last_step = None  # None until the first line.
    self._calls = 0
    self._seen = None  # Conditional: the global step after the latest run.
    self.last_step = None
    self.running = False

  def begin(self):
    if self._unit == "step":
      self._global_step = tf.train.get_global_step()

  def before_run(self, run_context):
    del run_context
    self.running = True
    if self._global_step is None:
      return None
    return tf.train.SessionRunArgs(self._global_step)

  def _reached(self, run_context, run_values):
    """The step (or batch) the run just reached; None when a conditional
    run made no update."""
    if self._unit == "batch":
      return self._calls
    raw = run_values.results
    if not self._conditional:
      return raw + 1  # The step read with the train op is the one before.
    step = int(run_context.session.run(self._global_step))
    if self._seen is None:
      self._seen = raw  # Before the first run.
    if step == self._seen:
      return None  # A micro-batch accumulated (or an fp16 run skipped).
    self._seen = step
    return step

  def after_run(self, run_context, run_values):
    self.running = False
    self._calls += 1
    now = time.time()
    step = self._reached(run_context, run_values)
    if step is None:
      return
    self.last_step = step
    if self._last_step is None:
      logging.info("%s %d: first %s of this run%s", self._unit, step,
                   self._unit,
                   " (resumed)" if self._unit == "step" and step > 1 else "")
      self._last_time, self._last_step = now, step
      return
    self._log(step, now)

  def _log(self, step, now):
    """Logs `step` when it is due: every n steps or seconds, the final."""
    final = self._total_steps is not None and step >= self._total_steps
    if (step - self._last_step < self._every_n_steps and not final
        and now - self._last_time < self._every_n_secs):
      return
    if step == self._last_step:
      return
    elapsed = max(now - self._last_time, 1e-9)
    steps_per_sec = (step - self._last_step) / elapsed
    message = "%s %d: %.2f examples/sec" % (
        self._unit, step, steps_per_sec * self._batch_size)
    if self._total_steps and steps_per_sec > 0:
      left = max(self._total_steps - step, 0) / steps_per_sec
      message += ", ETA %s" % _format_seconds(left)
    logging.info(message)
    self._last_time, self._last_step = now, step


def _format_seconds(seconds):
  seconds = int(round(seconds))
  hours, rest = divmod(seconds, 3600)
  minutes, secs = divmod(rest, 60)
  return "%d:%02d:%02d" % (hours, minutes, secs)


_SIGNAL_NAMES = {signal.SIGTERM: "SIGTERM", signal.SIGINT: "Ctrl-C (SIGINT)"}


class PreemptionHook(tf.train.SessionRunHook):
  """Turns SIGTERM or Ctrl-C into a checkpoint at the current step and a stop.

  The handler only sets a flag; after the running step the hook asks the
  session to stop, and the runner's checkpoint hook saves the current
  step as the session ends. `exit_if_preempted` then exits (143 after
  SIGTERM, 130 after Ctrl-C, the shell's 128 + signal number). A second
  Ctrl-C stops the process at once (the default SIGINT action, no
  checkpoint), as Ctrl-C does in any program.

  Attributes:
    stopped_at_step: int, the global step at which a signal stopped the
      run; None while none has.
    stopped_by: the signal number that stopped it (None while none has).
  """

  def __init__(self):
    self.stopped_at_step = None
    self.stopped_by = None
    self._signal = None
    self._previous = {}
    self._global_step = None

  def _on_signal(self, signum, frame):
    del frame
    if self._signal is None:
      self._signal = signum
    if signum == signal.SIGINT:
      # The next Ctrl-C ends the process without waiting for the step.
      signal.signal(signal.SIGINT, signal.SIG_DFL)

  def begin(self):
    self._global_step = tf.train.get_global_step()
    self._previous = {}
    for signum in (signal.SIGTERM, signal.SIGINT):
      try:
        self._previous[signum] = signal.signal(signum, self._on_signal)
      except ValueError:  # Not the main thread.
        pass

  def after_run(self, run_context, run_values):
    del run_values
    if self._signal is not None and self.stopped_at_step is None:
      step = int(run_context.session.run(self._global_step))
      self.stopped_at_step = step
      self.stopped_by = self._signal
      logging.warning("%s received: saving a checkpoint at step %d, then "
                      "stopping%s", _SIGNAL_NAMES[self._signal], step,
                      " (Ctrl-C again stops at once, without it)"
                      if self._signal == signal.SIGINT else "")
      run_context.request_stop()

  def end(self, session):
    del session
    for signum, previous in self._previous.items():
      if previous is not None:
        signal.signal(signum, previous)
    self._previous = {}


class SummaryFlushHook(tf.train.SessionRunHook):
  """Summaries at the final step and at least every `every_secs`, flushed.

  The runners write summaries every `runner_summary_steps` runs (the
  summary hook of `MonitoredTrainingSession`, which the Estimator uses
  too), and its event file is flushed every 2 minutes: a 200-step run never
  showed its last step, and a killed run's events could be lost. This hook
  also writes them at the last step and after `every_secs`, and flushes the
  event file each time.

  With gradient accumulation a run is a micro-batch, and the runners' hook
  wrote at the first run, before any update (step 0), and twice at some
  steps. Such runs give the runner no summary interval
  (`runner/config.summary_steps`), and this hook writes the summaries per
  update: at the first, every `summary_steps`-th and the final update,
  once each, at the step the update reached (read after the run).

  Args:
    output_dir: str, the model directory (the runner's event file).
    total_steps: int, the step the run ends at.
    every_secs: float, seconds between writes at least.
    summary_steps: int, the interval of the per-update summaries.
    runner_summary_steps: int or None, the runner's own summary interval in
      runs (`runner/config.summary_steps`); None or with
      `runs_per_update` > 1, this hook writes the per-update summaries.
    runs_per_update: int, session runs per update
      (`OptimizerOptions.runs_per_update`).
    conditional: bool, whether a run may leave the global step as it is
      (`OptimizerOptions.conditional_update`).
  """

  def __init__(self, output_dir, total_steps, every_secs=60.0,
               summary_steps=100, runner_summary_steps=100, runs_per_update=1,
               conditional=False):
    self._output_dir = output_dir
    self._total_steps = total_steps
    self._every_secs = every_secs
    self._summary_steps = summary_steps
    # Whether the runner writes no per-update summaries: this hook does.
    self._writes_all = runs_per_update > 1 or not runner_summary_steps
    self._runner_summary_steps = runner_summary_steps
    self._conditional = conditional
    self._summary_op = None
    self._global_step = None
    self._step = None  # The global step now (before the coming run).
    self._last_time = None
    self._requested = False
    self._written = None  # The last step this hook wrote.

  def begin(self):
    self._global_step = tf.train.get_global_step()
    self._summary_op = tf.summary.merge_all()

  def after_create_session(self, session, coord):
    del coord
    self._step = int(session.run(self._global_step))
    self._last_time = time.time()

  def _runner_writes(self, step):
    return (not self._writes_all and
            (step - 1) % self._runner_summary_steps == 0)

  def _due(self, step):
    """Whether an update reaching `step` gets summaries from this hook."""
    if self._runner_writes(step):
      return False
    if self._writes_all and (self._written is None or (
        self._summary_steps and (step - 1) % self._summary_steps == 0)):
      return True
    return (step == self._total_steps or
            time.time() - self._last_time >= self._every_secs)

  def before_run(self, run_context):
    del run_context
    self._requested = bool(self._summary_op is not None and
                           self._due(self._step + 1))
    fetches = {"step": self._global_step}
    if self._requested:
      fetches["summary"] = self._summary_op
    return tf.train.SessionRunArgs(fetches)

  def after_run(self, run_context, run_values):
    if self._conditional:
      step = int(run_context.session.run(self._global_step))
    else:  # The step read with the train op is the value before it.
      step = int(run_values.results["step"]) + 1
    updated = step != self._step and step != self._written
    writer = tf.summary.FileWriterCache.get(self._output_dir)
    if self._requested and updated:
      writer.add_summary(run_values.results["summary"], step)
      self._written = step
    if (self._requested and updated) or (
        updated and self._runner_writes(step)):
      writer.flush()
      self._last_time = time.time()
    self._step = step

  def end(self, session):
    del session
    tf.summary.FileWriterCache.get(self._output_dir).flush()


def write_eval_summaries(output_dir, values, global_step, name=None):
  """Adds scalars computed after an evaluation to its TensorBoard folder.

  Both runners write the in-graph metrics of an evaluation to
  `<output_dir>/eval[_<name>]/`; scores computed from the predictions
  afterwards (NER's entity precision, recall and F1) go to the same folder
  at the same step, so they show beside `eval_loss` (as the classifier's
  accuracy and F1 do). Only the chief writes.

  Args:
    output_dir: str, the model directory (None: nothing is written).
    values: dict name -> number (non-numbers are left out).
    global_step: int, the evaluated checkpoint's step.
    name: str or None, the evaluation's name.
  """
  if not output_dir or not distribute_utils.is_chief():
    return
  summary = tf.Summary()
  for key, value in sorted(values.items()):
    array = np.asarray(value)
    if (key != "global_step" and array.shape == () and
        array.dtype.kind in "iuf"):
      summary.value.add(tag=key, simple_value=float(array))
  folder = os.path.join(output_dir, "eval" if not name else "eval_" + name)
  with tf.Graph().as_default():  # FileWriter needs graph mode.
    # Event files are named by the second and the host: a suffix of their
    # own keeps two writes of one second from overwriting each other.
    writer = tf.summary.FileWriter(folder,
                                   filename_suffix="." + uuid.uuid4().hex)
    writer.add_summary(summary, int(global_step))
    writer.close()


def exit_if_preempted(output_dir, hooks):
  """Exits (143; 130 after Ctrl-C) after a signal stopped training: one line.

  Call right after the runner's `train`: a preempted run must not go on to
  evaluate or predict with a half-trained model.

  Args:
    output_dir: str, the model directory (its latest checkpoint is named).
    hooks: the hooks `train` ran; their `PreemptionHook` knows whether a
      signal stopped it.

  Raises:
    SystemExit: with `PREEMPTED_EXIT_STATUS` (`INTERRUPTED_EXIT_STATUS`
      after Ctrl-C), when it did.
  """
  stopped = [hook for hook in hooks if isinstance(hook, PreemptionHook)
             and hook.stopped_at_step is not None]
  if not stopped:
    return
  hook = stopped[0]
  latest = checkpoints.latest(output_dir)
  interrupted = hook.stopped_by == signal.SIGINT
  logging.warning("Stopped by %s at step %d; checkpoint %s saved; rerun "
                  "the same command to resume",
                  "Ctrl-C" if interrupted else "SIGTERM",
                  hook.stopped_at_step, latest)
  raise SystemExit(INTERRUPTED_EXIT_STATUS if interrupted
                   else PREEMPTED_EXIT_STATUS)
