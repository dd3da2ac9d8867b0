"""`make_runner`: the runner a run's options ask for (`--runner`).

Both runners take the same `model_fn` and input functions and offer
`train(input_fn, hooks, max_steps)`, `evaluate(input_fn, steps)`,
`predict(input_fn, hooks, yield_single_examples)` and `model_dir`, with the
Estimator's meanings; batch sizes are global.
"""

from absl import logging

from bert_tf.runner import config as config_lib
from bert_tf.runner import estimator as estimator_runner
from bert_tf.runner import session as session_runner

__all__ = ["make_runner"]


def make_runner(model_fn, run, output_dir, eval_batch_size=None,
                predict_batch_size=None, saving=None):
  """The Estimator runner or the session runner, for `run.tpu.runner_name`.

  Args:
    model_fn: the script's `model_fn(features, labels, mode, params)`.
    run: checked `options.RunOptions`: the runner, the TPU, the global
      training batch, the strategy and its worker timeout, the training
      options.
    output_dir: str or None (a temporary directory), the model directory.
    eval_batch_size, predict_batch_size: int or None, global batch sizes.
    saving: the run's `checkpoints.Saving` (the saver every save of the
      run uses), or None for one of the runner's own.

  Returns:
    An object with the runner interface (module docstring).
  """
  name = run.tpu.runner_name
  logging.info("Runner: %s", name)
  if name == "estimator":
    return estimator_runner.estimator_from_options(
        model_fn, run, output_dir, eval_batch_size=eval_batch_size,
        predict_batch_size=predict_batch_size, saving=saving)
  return session_runner.SessionRunner(
      model_fn, config_lib.runner_config_from_options(run, output_dir),
      train_batch_size=run.train_batch_size, eval_batch_size=eval_batch_size,
      predict_batch_size=predict_batch_size,
      worker_timeout_secs=run.distribute.worker_timeout_secs, saving=saving)

