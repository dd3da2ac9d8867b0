"""The Estimator runner: the reference's TPUEstimator, on TensorFlow 2.15.

The `TPUEstimator` runs on TPU, CPU and GPU; under a tf.distribute strategy
a plain `tf.estimator.Estimator` with `RunConfig(train_distribute=...)`
(`DistributedEstimator`, which keeps the TPUEstimator's global batch
sizes). Both already have the runner interface (`train`, `evaluate`,
`predict`, `model_dir`). Needs `tf.estimator`, which TensorFlow removed in
2.16; this module touches it only when called.
"""

import tensorflow.compat.v1 as tf

from bert_tf import tf_private
from bert_tf.runner import config as config_lib
from bert_tf.train import checkpoints
from bert_tf.train import distribute as distribute_utils
from bert_tf.train import input_fn as input_utils

__all__ = ["make_run_config", "run_config_from_options", "make_estimator",
           "estimator_from_options", "DistributedEstimator"]


def make_run_config(output_dir, save_checkpoints_steps, iterations_per_loop,
                    use_tpu=False, tpu_name=None, tpu_zone=None,
                    gcp_project=None, master=None, num_tpu_cores=8,
                    keep_checkpoint_max=5, tf_random_seed=None,
                    session_config=None, save_summary_steps=100):
  """Builds the `tf.estimator.tpu.RunConfig` every script uses.

  With `use_tpu` and `tpu_name`, the TPU is resolved through
  `TPUClusterResolver` (this replaces the reference's `tf.contrib` resolver).
  Without a TPU the same config runs the TPUEstimator on CPU or GPU.

  Args:
    output_dir: str, where checkpoints and summaries go.
    save_checkpoints_steps: int, steps between checkpoints.
    iterations_per_loop: int, steps per TPU loop (not used off TPU).
    use_tpu, tpu_name, tpu_zone, gcp_project, master, num_tpu_cores: the TPU
      flags.
    keep_checkpoint_max: int, how many recent checkpoints to keep.
    tf_random_seed: int or None, the graph seed (and the training input's
      shuffle seed in `tfrecord_input_fn_builder`).
    session_config: `tf.ConfigProto` or None (the Estimator's default).
    save_summary_steps: int, or None for no summaries (with gradient
      accumulation, where `hooks.SummaryFlushHook` writes them per update).

  Returns:
    A `tf.estimator.tpu.RunConfig`.
  """
  cluster = None
  if use_tpu and tpu_name:
    cluster = tf.distribute.cluster_resolver.TPUClusterResolver(
        tpu_name, zone=tpu_zone, project=gcp_project)
  # Off TPU, iterations_per_loop only scales TPUEstimator's step-counting
  # hook, which then logs examples/sec on every step; 1 makes it log every
  # `log_step_count_steps` (100) steps instead.
  tpu_config = tf.estimator.tpu.TPUConfig(
      iterations_per_loop=iterations_per_loop if use_tpu else 1,
      num_shards=num_tpu_cores,
      per_host_input_for_training=(
          tf.estimator.tpu.InputPipelineConfig.PER_HOST_V2))
  return tf.estimator.tpu.RunConfig(
      cluster=cluster,
      master=master,
      model_dir=output_dir,
      save_checkpoints_steps=save_checkpoints_steps,
      keep_checkpoint_max=keep_checkpoint_max,
      tf_random_seed=tf_random_seed,
      session_config=session_config,
      save_summary_steps=save_summary_steps,
      tpu_config=tpu_config)


def run_config_from_options(run, output_dir):
  """The `RunConfig` of a run's options (`options.RunOptions`).

  From `config.runner_config_from_options` (the session config, seed and
  strategy both runners share): with a strategy, a `tf.estimator.RunConfig`
  whose `train_distribute` is the strategy (evaluation and prediction then
  run on one device); else `make_run_config` with the TPU options.

  Args:
    run: `options.RunOptions`.
    output_dir: str or None (a temporary directory), the model directory.
  """
  shared = config_lib.runner_config_from_options(run, output_dir)
  tpu = run.tpu
  if shared.strategy is not None:
    # Runs a plain Estimator (`make_estimator`); TF_CONFIG is read here.
    return tf.estimator.RunConfig(
        model_dir=output_dir,
        save_checkpoints_steps=shared.save_checkpoints_steps,
        keep_checkpoint_max=shared.keep_checkpoint_max,
        tf_random_seed=shared.tf_random_seed,
        train_distribute=shared.strategy,
        session_config=shared.session_config,
        save_summary_steps=shared.save_summary_steps)
  return make_run_config(
      output_dir, save_checkpoints_steps=shared.save_checkpoints_steps,
      iterations_per_loop=run.iterations_per_loop, use_tpu=tpu.use_tpu,
      tpu_name=tpu.tpu_name, tpu_zone=tpu.tpu_zone,
      gcp_project=tpu.gcp_project, master=tpu.master,
      num_tpu_cores=tpu.num_tpu_cores,
      keep_checkpoint_max=shared.keep_checkpoint_max,
      tf_random_seed=shared.tf_random_seed,
      session_config=shared.session_config,
      # On TPU no summary hook is added: the TPU writes them.
      save_summary_steps=100 if tpu.use_tpu else shared.save_summary_steps)


def _with_saver(model_fn, saving):
  """`model_fn`, its specs' scaffold carrying the run's saver
  (`saving.saver()`): the Estimator saves and restores with it rather than
  with a saver of its own, and `checkpoints.TimedCheckpointHook` saves
  with the same one; without a checkpoint to restore, its `init_fn` starts
  the input iterators the saver tracks."""

  def scaffold(inner):
    inner_init = inner.init_fn if inner else None

    def init_fn(scaffold_, session):  # No checkpoint restored.
      if inner_init:
        inner_init(session)
      saving.start_input(scaffold_, session)
    return tf.train.Scaffold(saver=saving.saver(), init_fn=init_fn,
                             copy_from_scaffold=inner)

  def model_fn_with_saver(features, labels, mode, params):
    spec = model_fn(features=features, labels=labels, mode=mode,
                    params=params)
    if hasattr(spec, "scaffold_fn"):  # A TPUEstimatorSpec.
      inner = spec.scaffold_fn
      return spec._replace(
          scaffold_fn=lambda: scaffold(inner() if inner else None))
    return spec._replace(scaffold=scaffold(spec.scaffold))

  return model_fn_with_saver


def make_estimator(model_fn, run_config, use_tpu, train_batch_size=None,
                   eval_batch_size=None, predict_batch_size=None,
                   worker_timeout_secs=300, saving=None):
  """Wraps `model_fn` in a `TPUEstimator` (CPU/GPU when `use_tpu` is False).

  When `run_config.train_distribute` holds a strategy, a
  `distribute_utils.DistributedEstimator` instead (same model_fn and
  input_fns, global batch sizes; `worker_timeout_secs` for multi-worker).
  Either saves with `saving` (a `checkpoints.Saving`; None: one keeping
  `run_config.keep_checkpoint_max`).

  Raises:
    ValueError: under a strategy, a `train_batch_size` that is not a
      multiple of the replica count.
  """
  model_fn = _with_saver(model_fn, saving or checkpoints.Saving(
      run_config.keep_checkpoint_max))
  if getattr(run_config, "train_distribute", None) is not None:
    return DistributedEstimator(
        model_fn, run_config, train_batch_size=train_batch_size,
        eval_batch_size=eval_batch_size,
        predict_batch_size=predict_batch_size,
        worker_timeout_secs=worker_timeout_secs)
  return tf.estimator.tpu.TPUEstimator(
      use_tpu=use_tpu,
      model_fn=model_fn,
      config=run_config,
      train_batch_size=train_batch_size,
      eval_batch_size=eval_batch_size,
      predict_batch_size=predict_batch_size)


def estimator_from_options(model_fn, run, output_dir, eval_batch_size=None,
                           predict_batch_size=None, saving=None):
  """`make_estimator` under `run_config_from_options(run, output_dir)`.

  Args:
    model_fn: the script's `model_fn`.
    run: `options.RunOptions`: the TPU, the global training batch, the
      strategy and its worker timeout, the training options.
    output_dir: str or None, the model directory.
    eval_batch_size, predict_batch_size: int or None, global batch sizes.
    saving: the run's `checkpoints.Saving`, or None.
  """
  return make_estimator(
      model_fn, run_config_from_options(run, output_dir), run.tpu.use_tpu,
      train_batch_size=run.train_batch_size, eval_batch_size=eval_batch_size,
      predict_batch_size=predict_batch_size,
      worker_timeout_secs=run.distribute.worker_timeout_secs, saving=saving)


class DistributedEstimator(object):
  """Runs a TPUEstimator-style model_fn in a `tf.estimator.Estimator`.

  The `model_fn` may return a `TPUEstimatorSpec` (converted with
  `as_estimator_spec()`). Every input_fn gets `params["batch_size"]`, as
  TPUEstimator gives it: for training the global `train_batch_size` divided
  by the replica count (each replica reads its own batch); for evaluation
  and prediction, which run on one device, the global sizes. The training
  loss that the Estimator logs and summarizes is the mean over replicas (as
  on one device; the Estimator alone would sum them). Multi-worker
  training goes through `tf.estimator.train_and_evaluate` (TensorFlow
  refuses a plain `train` there), with `start_peer_watchdog` running.

  `train`, `evaluate` and `predict` take the `tf.estimator.Estimator`
  arguments; `estimator` is the wrapped `Estimator`.

  Args:
    model_fn: the script's `model_fn(features, labels, mode, params)`.
    config: a `tf.estimator.RunConfig` with `train_distribute` set.
    train_batch_size, eval_batch_size, predict_batch_size: int or None,
      global batch sizes.
    worker_timeout_secs: int, multi-worker: seconds to wait for the other
      tasks (`start_peer_watchdog`).

  Raises:
    ValueError: a global batch that is not a multiple of the replica count.
  """

  def __init__(self, model_fn, config, train_batch_size=None,
               eval_batch_size=None, predict_batch_size=None,
               worker_timeout_secs=300):
    self._worker_timeout_secs = worker_timeout_secs
    keys = tf.estimator.ModeKeys
    self._batch_sizes = distribute_utils.batch_sizes(
        config.train_distribute, train_batch_size, eval_batch_size,
        predict_batch_size)
    batch_sizes = self._batch_sizes

    def estimator_model_fn(features, labels, mode, params):
      spec = model_fn(features=features, labels=labels, mode=mode,
                      params=dict(params, batch_size=batch_sizes[mode]))
      if hasattr(spec, "as_estimator_spec"):
        spec = spec.as_estimator_spec()
      if mode == keys.TRAIN:
        # The Estimator logs and summarizes the sum of the replicas' losses;
        # a share of each makes that the mean, the single-device loss. (The
        # train op is built already: the gradients are unchanged.)
        replicas_now = tf.distribute.get_replica_context().num_replicas_in_sync
        spec = spec._replace(loss=spec.loss / replicas_now)
      return spec

    self.estimator = tf_private.estimator_taking_inputs(
        model_fn=estimator_model_fn, config=config, params={})

  @property
  def config(self):
    return self.estimator.config

  @property
  def model_dir(self):
    return self.estimator.model_dir

  def train(self, input_fn, hooks=None, steps=None, max_steps=None,
            saving_listeners=None):
    """`Estimator.train`; multi-worker: through `train_and_evaluate`."""
    input_fn = input_utils.with_batch_size(input_fn,
                                self._batch_sizes[tf.estimator.ModeKeys.TRAIN])
    if not tf_private.estimator_in_coordinator_mode(self.config):
      self.estimator.train(input_fn, hooks=hooks, steps=steps,
                           max_steps=max_steps,
                           saving_listeners=saving_listeners)
      return self
    if steps is not None or saving_listeners:
      raise ValueError("multi-worker training takes max_steps only")
    watch = distribute_utils.start_peer_watchdog(self._worker_timeout_secs)
    try:
      tf.estimator.train_and_evaluate(
          self.estimator,
          tf.estimator.TrainSpec(input_fn, max_steps=max_steps, hooks=hooks),
          # There is no evaluator task: the workers only train.
          tf.estimator.EvalSpec(input_fn, steps=1))
    except tf.errors.UnknownError as e:
      explained = distribute_utils.explain_server_error(e)
      if explained is None:
        raise
      raise explained from None
    finally:
      if watch is not None:  # Training is over: a peer may now go.
        watch.set()
    return self

  def evaluate(self, input_fn, **kwargs):
    """`Estimator.evaluate` on one device, global `eval_batch_size`."""
    return self.estimator.evaluate(input_utils.with_batch_size(
        input_fn, self._batch_sizes[tf.estimator.ModeKeys.EVAL]), **kwargs)

  def predict(self, input_fn, **kwargs):
    """`Estimator.predict` on one device, global `predict_batch_size`."""
    return self.estimator.predict(input_utils.with_batch_size(
        input_fn, self._batch_sizes[tf.estimator.ModeKeys.PREDICT]),
                                  **kwargs)
