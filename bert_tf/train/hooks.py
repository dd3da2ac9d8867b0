"""The hooks of every run, whichever runner runs it (`runner/loop.py` puts
them together): `ProgressHook` (step, examples/sec, time left),
`PreemptionHook` (SIGTERM or Ctrl-C: a checkpoint at the current step and
a stop), `SummaryFlushHook` (summaries at the final step and at a bounded
interval), then `exit_if_preempted`; `write_eval_summaries` adds
after-evaluation scores to TensorBoard."""

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

  At a run's first step, every `every_n_steps` steps or `every_n_secs`
  seconds, and at `total_steps` (None: no ETA). `batch_size` counts
  examples per step (update) or per batch; `training=False` counts
  prediction batches; the global step is read after each run
  (`conditional`, `OptimizerOptions.conditional_update`: a run may leave
  it where it was).

  Attributes:
    last_step: int or None, the step (or batch) the latest run reached.
    running: bool, a run began whose end this hook has not seen.
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
    # Read after the run: a read fetched with the train op may come before
    # or after its increment (no order between them).
    step = int(run_context.session.run(self._global_step))
    if not self._conditional:
      return step
    raw = run_values.results
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
  """Turns SIGTERM or Ctrl-C into a checkpoint at the current step and a
  stop (`exit_if_preempted`: 143 or 130, 128 + the signal); a second
  Ctrl-C stops at once, without a checkpoint.

  Attributes:
    stopped_at_step: int or None, the global step a signal stopped at.
    stopped_by: the signal number, or None.
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
  """Summaries at the final step and at least every `every_secs`, each time
  flushed (the runners' hook misses the last step and flushes every 2 min).

  With `runs_per_update` > 1 (accumulation) or no `runner_summary_steps`,
  this hook writes the per-update summaries: at the first, every
  `summary_steps`-th and the final update, at the step it reached
  (`conditional`: `OptimizerOptions.conditional_update`). `output_dir`: the
  runner's event file; `total_steps`: the step the run ends at.
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
  """Adds `values` (name -> number; others left out) computed after an
  evaluation to its TensorBoard folder `<output_dir>/eval[_<name>]/` at
  `global_step`, beside `eval_loss`. Chief only; `output_dir` None: no-op."""
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
  """Exits after a signal stopped training (one line naming the latest
  checkpoint in `output_dir`); call right after the runner's `train`.

  Raises:
    SystemExit: `PREEMPTED_EXIT_STATUS` (`INTERRUPTED_EXIT_STATUS` after
      Ctrl-C), when a `PreemptionHook` of `hooks` was stopped.
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
