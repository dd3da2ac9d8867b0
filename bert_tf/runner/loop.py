"""How every training script trains, evaluates, predicts and exports.

One sequence, for `run_pretraining.py`, `run_classifier.py`,
`run_squad.py` and `run_ner.py` alike:

  problems = Problems()
  run = options.from_flags(FLAGS, problems)   # and the other checks
  problems.raise_if_any()
  loop.setup_devices(run)
  with loop.output_dir(FLAGS.output_dir, run):   # locked while it trains
    ...                                          # training records, model_fn
    loop.run(model_fn, run, FLAGS.output_dir, training=loop.Training(...),
             evaluate=..., predict=..., export=...)

`run` makes the runner (`select.make_runner`), then:

1. trains (`Training`): the hooks (progress, SIGTERM/Ctrl-C, timed
   checkpoints, summaries: `training_hooks`), each update's token mean
   under gradient accumulation (`Training.token_weights`), evaluation
   every `--eval_every_steps` with the best checkpoint and early stopping
   (`train/best.py`); a run stopped by a signal exits there, with its
   checkpoint saved (`hooks.exit_if_preempted`), and a diverged one with
   one line (`DivergedError`);
2. evaluates (`evaluate(steps)`, unless the last evaluation during
   training was of the final checkpoint) and writes `eval_results.txt`;
3. predicts (`predict(steps, checkpoint)`, the kept best checkpoint when
   there is one);
4. exports (`export(checkpoint)`, the same checkpoint).

The script's callbacks reach the runner through `Steps`, which names the
TFRecord files read in any `DataLossError` and logs progress. A new hook,
exit condition or step is one edit, here.
"""

import contextlib
import dataclasses
import logging as std_logging
import os
import shutil
from typing import Any, Callable, Optional, Sequence

from absl import logging
import tensorflow.compat.v1 as tf

from bert_tf import io as io_utils
from bert_tf.checks import records as record_checks
from bert_tf.runner import config as config_lib
from bert_tf.runner import select as runner_lib
from bert_tf.train import accumulation
from bert_tf.train import best as best_lib
from bert_tf.train import checkpoints
from bert_tf.train import distribute as distribute_utils
from bert_tf.train import hooks as train_hooks
from bert_tf.train import input_fn as input_utils
from bert_tf.train import schedule

__all__ = ["Training", "Steps", "DivergedError", "setup_devices",
           "output_dir", "training_hooks", "run"]

EVAL_RESULTS_FILE = "eval_results.txt"


@dataclasses.dataclass(frozen=True)
class Training:
  """What a script trains on, and how long.

  Attributes:
    input_fn: the training `input_fn` (repeated, fixed-size batches).
    num_train_steps: int, the last step (steps count updates).
    num_warmup_steps: int, warmup steps (for the divergence message).
    learning_rate: float, the peak learning rate (the same).
    records: TFRecord files the input reads (named on a `DataLossError`).
    token_weights: None, or function(micro-batch features) -> the loss
      weights of a token-level loss (`accumulation.with_update_shares`):
      with gradient accumulation off TPU, each update's loss is then the
      mean over the labelled tokens of all its micro-batches, as one big
      batch gives it. The `model_fn` reads the share
      (`accumulation.UPDATE_SHARE_KEY`), which it requires when built with
      more than one micro-batch per update.
    progress_every: int, steps between progress lines at most.
  """

  input_fn: Callable[..., Any]
  num_train_steps: int
  num_warmup_steps: int = 0
  learning_rate: float = 0.0
  records: Sequence[str] = ()
  token_weights: Optional[Callable[..., Any]] = None
  progress_every: int = 100


class DivergedError(ValueError):
  """The training loss became NaN: one line, with what to do."""


class Steps(object):
  """The runner as the script's callbacks use it: evaluation and prediction
  over TFRecord files, with the files named in a `DataLossError` and
  progress logged.

  Attributes:
    runner: the runner (`select.make_runner`).
  """

  def __init__(self, runner):
    self.runner = runner

  def evaluate(self, input_fn, records=(), steps=None, checkpoint_path=None,
               name=None):
    """`runner.evaluate`: dict name -> value of the checkpoint (default the
    latest) over `input_fn` (`steps` batches, or until it ends)."""
    model_dir = self.runner.model_dir
    checkpoint_path = checkpoint_path or checkpoints.latest(model_dir)
    logging.info("Evaluating the checkpoint %s",
                 checkpoint_path or
                 "of none: %s holds no checkpoint, the model's initial "
                 "weights are evaluated" % model_dir)
    with record_checks.reading(list(records)):
      return self.runner.evaluate(input_fn=input_fn, steps=steps,
                                  checkpoint_path=checkpoint_path, name=name)

  def predict(self, input_fn, records=(), num_batches=None,
              checkpoint_path=None, batch_size=1):
    """Yields `runner.predict`'s dicts, one per example, logging progress.

    Args:
      input_fn: the prediction `input_fn`.
      records: TFRecord files it reads.
      num_batches: int or None, the batches to come (for the ETA).
      checkpoint_path: str or None (the latest checkpoint).
      batch_size: int, examples per batch (for examples/sec).
    """
    with record_checks.reading(list(records)):  # predict() is lazy.
      yield from self.runner.predict(
          input_fn=input_fn, yield_single_examples=True,
          checkpoint_path=(checkpoint_path or
                           checkpoints.latest(self.runner.model_dir)),
          hooks=[train_hooks.ProgressHook(batch_size, total_steps=num_batches,
                                          training=False)])


def setup_devices(run):
  """Prepares the process for `run`'s devices, before TensorFlow makes any.

  `distribute.setup` (logical CPU devices, graph mode for multi-worker);
  under a strategy also `input_fn.per_replica_input_without_autotune`
  (process-wide: the per-replica pipelines close promptly).

  Args:
    run: checked `options.RunOptions`.
  """
  distribute_utils.setup(run.distribute)
  if run.distribute.distribution_strategy != "none":
    input_utils.per_replica_input_without_autotune()


@contextlib.contextmanager
def output_dir(path, run, init_checkpoint=None):
  """Makes `path`; while the block runs, holds it for a run that trains.
  A block that raises leaves no folder it made that holds no file.

  With `run.do_train`: `checkpoints.start_training` (the folder's lock,
  taken by the chief; the removal of a killed run's unfinished saves; a
  check of the checkpoint training would resume from), released when the
  block ends; `init_checkpoint` is recorded there
  (`checkpoints.INIT_RECORD`).

  Args:
    path: str, `--output_dir`.
    run: `options.RunOptions`.
    init_checkpoint: str or None, `--init_checkpoint`.

  Raises:
    ValueError: another live run trains there, its checkpoint state file is
      damaged, or its latest checkpoint is truncated or damaged.
  """
  made = None  # The top folder this call makes (local folders only).
  parent = os.path.abspath(path)
  while "://" not in path and not os.path.exists(parent):
    made, parent = parent, os.path.dirname(parent)
  tf.io.gfile.makedirs(path)
  held = None
  try:
    held = (checkpoints.start_training(path, init_checkpoint)
            if run.do_train else None)
    yield path
  except BaseException:
    if held is not None:
      held.release()
    if made and not any(set(files) - {".lock"}
                        for _, _, files in os.walk(made)):
      shutil.rmtree(made, ignore_errors=True)
    raise
  finally:
    if held is not None:
      held.release()


def training_hooks(run, output_dir_path, training, saving):
  """The hooks of one `runner.train` call, fresh each time.

  `ProgressHook` (examples/sec, ETA), `PreemptionHook` (SIGTERM or Ctrl-C
  saves the current step), `checkpoints.TimedCheckpointHook` (every
  `--save_checkpoints_secs`, with the run's saver `saving`), and on the
  chief off TPU `SummaryFlushHook`
  (summaries at the final step and at a bounded interval; per update under
  gradient accumulation, where the runner writes none:
  `config.summary_steps`).

  Args:
    run: `options.RunOptions`.
    output_dir_path: str, the model directory.
    training: `Training`.
    saving: the run's `checkpoints.Saving`.

  Returns:
    list of `tf.train.SessionRunHook`.
  """
  update = run.training.optimizer_options
  hooks = [
      train_hooks.ProgressHook(
          run.examples_per_update, total_steps=training.num_train_steps,
          every_n_steps=training.progress_every,
          conditional=update.conditional_update),
      train_hooks.PreemptionHook(),
  ]
  if run.save_checkpoints_secs and run.save_checkpoints_secs > 0:
    hooks.append(checkpoints.TimedCheckpointHook(
        output_dir_path, run.save_checkpoints_secs, saving))
  if not run.tpu.use_tpu and distribute_utils.is_chief():
    # Only the chief writes summaries (a writer makes an events file).
    hooks.append(train_hooks.SummaryFlushHook(
        output_dir_path, training.num_train_steps,
        runner_summary_steps=config_lib.summary_steps(run),
        runs_per_update=update.runs_per_update,
        conditional=update.conditional_update))
  return hooks


def run(model_fn, run_options, output_dir_path, training=None, evaluate=None,
        predict=None, export=None, eval_batch_size=None,
        predict_batch_size=None):
  """Trains, evaluates, predicts and exports, as `run_options` asks.

  Args:
    model_fn: the script's `model_fn(features, labels, mode, params)`.
    run_options: checked `options.RunOptions` (`do_train`, `do_eval`,
      `do_predict`, the evaluation options, ...).
    output_dir_path: str, the model directory.
    training: `Training`, needed with `do_train`.
    evaluate: None, or function(steps: `Steps`) -> dict of results of the
      latest checkpoint, with `global_step` (run with `do_eval`, and every
      `--eval_every_steps` while training); written to
      `<output_dir>/eval_results.txt`.
    predict: None, or function(steps, checkpoint_path) writing the
      predictions (run with `do_predict`; `checkpoint_path` is the kept
      best checkpoint, else None: the latest).
    export: None, or function(checkpoint_path) writing the SavedModel (the
      same checkpoint).
    eval_batch_size, predict_batch_size: int or None, global batch sizes.

  Returns:
    dict, the results written to eval_results.txt (None when none).

  Raises:
    SystemExit: a signal stopped training (143 SIGTERM, 130 Ctrl-C), after
      its checkpoint was saved.
    DivergedError: the training loss became NaN.
  """
  saving = checkpoints.Saving()
  runner = runner_lib.make_runner(model_fn, run_options, output_dir_path,
                                  eval_batch_size=eval_batch_size,
                                  predict_batch_size=predict_batch_size,
                                  saving=saving)
  steps = Steps(runner)
  best_checkpoint, results = None, None
  if run_options.do_train:
    best_checkpoint, results = _train(
        runner, run_options, output_dir_path, training,
        (lambda: evaluate(steps)) if evaluate else None, saving)
  if run_options.do_eval and evaluate is not None:
    logging.info("***** Running evaluation *****")
    latest = checkpoints.latest(output_dir_path)
    if not (results and latest and
            latest.endswith("-%d" % int(results["global_step"]))):
      results = evaluate(steps)
    io_utils.write_eval_results(
        os.path.join(output_dir_path, EVAL_RESULTS_FILE), results)
  else:
    results = None
  if run_options.do_predict and predict is not None:
    logging.info("***** Running prediction *****")
    if best_checkpoint:
      logging.info("Predicting with the best checkpoint, %s",
                   best_checkpoint)
    predict(steps, best_checkpoint)
  if export is not None:
    export(best_checkpoint)
  return results


def _saves_position(run_options):
  """Whether the run's checkpoints hold its input's position: on one device
  off TPU, and under `mirrored` (one worker's replicas read one saved
  iterator); not on TPU or under `multi_worker_mirrored`, where each worker
  reads its own input and the chief alone saves."""
  strategy = run_options.distribute.distribution_strategy
  return not run_options.tpu.use_tpu and strategy in ("none", "mirrored")


def _train(runner, run_options, output_dir_path, training, evaluate, saving):
  """Trains (evaluating as `run_options.evaluation` asks).

  Returns:
    (best checkpoint prefix or None, the last evaluation's results or None).
  """
  logging.info("***** Running training *****")
  logging.info("  Batch size = %d (%d per update), steps = %d",
               run_options.train_batch_size, run_options.examples_per_update,
               training.num_train_steps)
  update = run_options.training.optimizer_options
  input_fn = training.input_fn
  if training.token_weights is not None and not run_options.tpu.use_tpu:
    input_fn = accumulation.update_shares_input_fn(
        input_fn, update.runs_per_update, training.token_weights)
  strategy = run_options.distribute.distribution_strategy
  if _saves_position(run_options):
    # Each checkpoint holds the input's position: a resumed run reads on.
    input_fn = input_utils.positioned(input_fn, saving)
  elif checkpoints.latest(output_dir_path) is not None:
    logging.warning(
        "Resuming %s: the input's position is saved on one device and "
        "under mirrored only, so the input pipeline restarts from its "
        "beginning", "on TPU" if run_options.tpu.use_tpu else
        "--distribution_strategy=" + strategy)
  every = run_options.evaluation.eval_every_steps
  save_steps = run_options.save_checkpoints_steps
  if save_steps and training.num_train_steps < save_steps and not every:
    secs = run_options.save_checkpoints_secs
    logging.warning(
        "--num_train_steps=%d is below --save_checkpoints_steps=%d: "
        "checkpoints are written %sat the end only", training.num_train_steps,
        save_steps, ("every --save_checkpoints_secs=%d seconds and " % secs)
        if secs else "")

  def train_to(max_steps):
    # The Estimator's own check globs the folder's name: in `run[1]` it saw
    # no checkpoint and trained one step past max_steps.
    if checkpoints.latest_step(output_dir_path) >= max_steps:
      logging.info("Skipping training: the checkpoint in %s is at step "
                   "%d or later", output_dir_path, max_steps)
      return
    hooks = training_hooks(run_options, output_dir_path, training, saving)
    with record_checks.reading(list(training.records)), \
        _without_stalled_step_warning(update.conditional_update):
      try:
        runner.train(input_fn=input_fn, max_steps=max_steps, hooks=hooks)
      except tf.train.NanLossDuringTrainingError:
        raise _diverged(output_dir_path, training, update.poly_power,
                        hooks[0]) from None
    train_hooks.exit_if_preempted(output_dir_path, hooks)

  keeper, results = best_lib.train(
      runner, train_to, evaluate, training.num_train_steps,
      run_options.evaluation,
      evaluates=run_options.do_eval and evaluate is not None)
  return (keeper.best_checkpoint() if keeper else None), results


class _StalledStepFilter(std_logging.Filter):
  """Drops TensorFlow's step counter's warning that the global step has not
  moved: with gradient accumulation (or an fp16 skip) that is expected."""

  def filter(self, record):
    return not str(record.msg).startswith("It seems that global step")


@contextlib.contextmanager
def _without_stalled_step_warning(conditional):
  """While training a `conditional` update, TensorFlow's "global step has
  not been increased" warning (five times a run) is left out."""
  if not conditional:
    yield
    return
  logger = std_logging.getLogger("tensorflow")
  stalled = _StalledStepFilter()
  logger.addFilter(stalled)
  try:
    yield
  finally:
    logger.removeFilter(stalled)




def _diverged(model_dir, training, power, progress):
  """The `DivergedError` of a run whose loss became NaN, with the step that
  `progress` (the run's `ProgressHook`) saw last, after
  `checkpoints.prune_after_divergence`: the checkpoint it names is one a
  lower learning rate can recover from."""
  kept, removed = checkpoints.prune_after_divergence(model_dir)
  step = progress.last_step
  if step is None:  # NaN at this session's first run: after the resume point.
    step = int(kept.rsplit("-", 1)[-1]) if kept else 0
  if progress.running or progress.last_step is None:
    step += 1  # The NaN check stopped the session before the hook saw it.
  # The update to `step` ran with the rate of the step before.
  rate = schedule.learning_rate(step - 1, training.learning_rate,
                                training.num_train_steps,
                                training.num_warmup_steps, power)
  where = ("removed %s; " % ", ".join(removed)) if removed else ""
  if kept:
    where += "the last checkpoint with sane weights is %s" % kept
    then = "rerun the same command to resume from it"
  else:
    where += "no checkpoint with sane weights is left"
    then = "rerun the same command to start over"
  return DivergedError(
      "the loss became NaN at step %d (learning rate %.3g); %s; lower "
      "--learning_rate (or warm up longer), then %s" %
      (step, rate, where, then))
