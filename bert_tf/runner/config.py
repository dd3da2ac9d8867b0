"""The settings both runners share, from a run's `options.RunOptions`.

One place decides the session config (the Estimator's default, the
strategy's threads, XLA), the graph seed (`--random_seed`,
`--deterministic`), the strategy and the checkpoint cadence, so that the
Estimator and the session runner build the same graph under the same
session: the same numbers.
"""

import dataclasses
from typing import Any, Optional

from bert_tf.train import checkpoints
from bert_tf.train import distribute as distribute_utils
from bert_tf.train import options as training_options

__all__ = ["RunnerConfig", "summary_steps", "runner_config_from_options"]


@dataclasses.dataclass(frozen=True)
class RunnerConfig:
  """How a runner runs a `model_fn`.

  Attributes:
    model_dir: str, checkpoints and summaries.
    save_checkpoints_steps: int or None, steps between checkpoints.
    keep_checkpoint_max: int, recent checkpoints kept.
    tf_random_seed: int or None, the graph seed (and the training input's
      shuffle seed, through the input_fn's `config`).
    session_config: `tf.ConfigProto` of every session.
    strategy: a `tf.distribute` strategy for training, or None.
    save_summary_steps, log_step_count_steps: int, the Estimator's 100
      (save_summary_steps None: the runner writes no summaries).
  """

  model_dir: Optional[str]
  save_checkpoints_steps: Optional[int] = None
  keep_checkpoint_max: int = checkpoints.KEEP_CHECKPOINT_MAX
  tf_random_seed: Optional[int] = None
  session_config: Any = None
  strategy: Any = None
  save_summary_steps: Optional[int] = 100
  log_step_count_steps: int = 100


def summary_steps(run):
  """The runner's summary interval in session runs, or None for none.

  The Estimator's 100; with gradient accumulation a run is a micro-batch,
  so the runner writes none and `hooks.SummaryFlushHook` (given this same
  value by `loop`) writes them per update. Under `multi_worker_mirrored`
  MonitoredTrainingSession adds its checkpoint hook only when it also
  writes summaries (TensorFlow 2.15 and 2.21 alike): an interval no run
  reaches keeps the checkpoints, with one summary at the first run.

  Args:
    run: `options.RunOptions`.
  """
  if run.training.optimizer_options.runs_per_update == 1:
    return 100
  if run.distribute.distribution_strategy == "multi_worker_mirrored":
    return 10**9
  return None


def runner_config_from_options(run, output_dir):
  """The `RunnerConfig` of a run's options.

  Under a strategy (`distribute_utils.make_strategy`) the session has the
  strategy's threads and devices (`distribute_utils.session_config`); else
  `training_options.default_session_config`.
  Then `training_options.session_settings` applies --use_xla and
  --deterministic; `summary_steps` gives the summary interval.

  Args:
    run: `options.RunOptions`.
    output_dir: str or None (a temporary directory), the model directory.
  """
  strategy = distribute_utils.make_strategy(run.distribute, run.tpu.use_tpu)
  base = None
  if strategy is not None:
    base = distribute_utils.session_config(run.distribute.num_cpu_devices)
  session_config, seed = training_options.session_settings(
      run.training, base, run.distribute.random_seed)
  if session_config is None:
    session_config = training_options.default_session_config()
  return RunnerConfig(
      model_dir=output_dir,
      save_checkpoints_steps=run.save_checkpoints_steps,
      tf_random_seed=seed, session_config=session_config, strategy=strategy,
      save_summary_steps=summary_steps(run))
