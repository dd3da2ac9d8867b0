"""The session runner: a script's `model_fn` on core TensorFlow.

For TensorFlow 2.16 on, which has no `tf.estimator`, and on 2.15 with
`--runner=session`. It runs what the scripts use and nothing more:

* `train`: the TRAIN graph in a `tf.train.MonitoredTrainingSession` with a
  `Scaffold` (the run's saver, `checkpoints.Saving`),
  the checkpoint, summary and step-counter hooks, a stop at `max_steps`, a
  NaN check and a `loss = ..., step = ...` line every 100 steps; under a
  strategy each replica builds its own copy of the model
  (`call_for_each_replica`) on its own share of the global batch, as the
  Estimator's distributed training does.
* `evaluate`: the EVAL graph restored from the latest checkpoint, the
  `eval_metrics` and the mean loss accumulated over the input (or `steps`
  batches), written to `<model_dir>/eval` for TensorBoard.
* `predict`: the PREDICT graph restored from the latest checkpoint,
  yielding one dict per example.

Checkpoints, variable names, summaries and the order in which random ops
are made are the Estimator's, so a `--deterministic` run gives the same
checkpoint through either runner (tests/test_runners.py).
"""

import contextlib

from absl import logging
import tensorflow.compat.v1 as tf

from bert_tf import tf_private
from bert_tf.train import checkpoints
from bert_tf.train import distribute as distribute_utils
from bert_tf.train import hooks as train_hooks
from bert_tf.train import input_fn as input_utils
from bert_tf.train import spec as spec_lib

__all__ = ["SessionRunner"]

_KEYS = spec_lib.ModeKeys


class SessionRunner(object):
  """Trains, evaluates and predicts with a TPUEstimator-style `model_fn`.

  Every input_fn gets `params["batch_size"]`: for training the global
  `train_batch_size` divided by the replica count, for evaluation and
  prediction (on one device) the global sizes, as the Estimator runner.

  Args:
    model_fn: `model_fn(features, labels, mode, params)` returning a
      `spec.model_spec` (a `TPUEstimatorSpec` or `ModelSpec`).
    config: `config.RunnerConfig`.
    train_batch_size, eval_batch_size, predict_batch_size: int or None,
      global batch sizes.
    worker_timeout_secs: int, multi-worker: seconds to wait for the other
      tasks.
    saving: the run's `checkpoints.Saving` (None: one keeping
      `config.keep_checkpoint_max`).

  Raises:
    ValueError: a global batch that is not a multiple of the replica count.
  """

  def __init__(self, model_fn, config, train_batch_size=None,
               eval_batch_size=None, predict_batch_size=None,
               worker_timeout_secs=300, saving=None):
    self._model_fn = model_fn
    self._config = config
    self._saving = saving or checkpoints.Saving(config.keep_checkpoint_max)
    self._worker_timeout_secs = worker_timeout_secs
    self._batch_sizes = distribute_utils.batch_sizes(
        config.strategy, train_batch_size, eval_batch_size,
        predict_batch_size)

  @property
  def config(self):
    return self._config

  @property
  def model_dir(self):
    return self._config.model_dir

  # --------------------------------------------------------------------------
  # Graph pieces
  # --------------------------------------------------------------------------

  def _new_graph(self):
    graph = tf.Graph()
    if self._config.tf_random_seed is not None:
      graph.seed = self._config.tf_random_seed
    return graph

  def _dataset(self, input_fn, mode, input_context=None):
    """The input_fn's dataset, without tf.data's autotuning whatever the
    input_fn sets (`input_utils.without_autotune`: prompt `Session.close`);
    or the (features, labels) of an input_fn that makes its own iterator
    (`input_utils.positioned`)."""
    call = input_utils.with_batch_size(input_fn, self._batch_sizes[mode])
    result = call(params={}, config=self._config, input_context=input_context)
    if isinstance(result, tuple):
      return result
    return input_utils.without_autotune(result)

  def _batch(self, input_fn, mode):
    """(features, labels, iterator initializer) of a one-device input."""
    dataset = self._dataset(input_fn, mode)
    if isinstance(dataset, tuple):  # Its iterator starts with the session.
      return dataset + (tf.no_op(),)
    iterator = tf.data.make_initializable_iterator(dataset)
    features, labels = input_utils.features_and_labels(iterator.get_next())
    return features, labels, iterator.initializer

  def _call_model_fn(self, features, labels, mode):
    return self._model_fn(
        features=features, labels=labels, mode=mode,
        params={"batch_size": self._batch_sizes[mode], "use_tpu": False})

  def _scaffold(self, local_init):
    """A `Scaffold` with the run's saver (`checkpoints.Saving`) whose local
    init also starts the input iterator (a tracked one starts in `init_fn`
    or at the restore)."""
    return tf.train.Scaffold(
        saver=self._saving.saver(), init_fn=self._saving.start_input,
        local_init_op=tf.group(tf.train.Scaffold.default_local_init_op(),
                               local_init))

  def _checkpoint(self, checkpoint_path, what):
    """The checkpoint to restore, or None (the variables' initializers)."""
    path = checkpoint_path or checkpoints.latest(self.model_dir)
    if path is None:
      logging.info("No checkpoint in %s: %s from the initial variables",
                   self.model_dir, what)
    return path

  # --------------------------------------------------------------------------
  # Train
  # --------------------------------------------------------------------------

  def _train_graph(self, input_fn, strategy):
    """(loss, train_op, the model_fn's training hooks, iterator init)."""
    if strategy is None:
      tf.train.get_or_create_global_step()
      features, labels, init = self._batch(input_fn, _KEYS.TRAIN)
      spec = self._call_model_fn(features, labels, _KEYS.TRAIN)
      return (spec.loss, spec.train_op, list(spec.training_hooks or ()),
              init)
    # As the Estimator's distributed training: the input first, then the
    # global step (a mirrored variable), then one model per replica.
    if getattr(input_fn, "makes_iterator", False):  # One worker's replicas.
      features, labels = self._dataset(input_fn, _KEYS.TRAIN,
                                       tf.distribute.InputContext(
                                           num_replicas_in_sync=strategy
                                           .num_replicas_in_sync))
      init = tf.no_op()  # The saver's to start or restore.
    else:
      iterator = strategy.make_input_fn_iterator(
          lambda context: self._dataset(input_fn, _KEYS.TRAIN, context))
      features, labels = input_utils.features_and_labels(iterator.get_next())
      init = iterator.initializer
    tf.train.get_or_create_global_step()
    hooks = []

    def replica_fn(features, labels):
      spec = self._call_model_fn(features, labels, _KEYS.TRAIN)
      if not hooks:
        hooks.extend(spec.training_hooks or ())
      context = tf.distribute.get_replica_context()
      # The mean of the replicas' losses: the one-device loss.
      return spec.loss / context.num_replicas_in_sync, spec.train_op

    losses, train_ops = strategy.extended.call_for_each_replica(
        replica_fn, args=(features, labels))
    loss = strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)
    train_op = tf.group(*strategy.experimental_local_results(train_ops))
    return loss, train_op, hooks, init

  def train(self, input_fn, hooks=None, steps=None, max_steps=None,
            saving_listeners=None):
    """Trains until the global step reaches `max_steps`.

    Args:
      input_fn: `input_fn(params[, config][, input_context])` returning a
        `tf.data.Dataset` of features (or (features, labels)).
      hooks: list of `tf.train.SessionRunHook`, run with the runner's own.
      steps: not supported (None): runs stop at a global step.
      max_steps: int, the global step to stop at; a model_dir already
        there trains no further.
      saving_listeners: not supported (None).

    Returns:
      self.

    Raises:
      ValueError: `steps` or `saving_listeners` given, or no `max_steps`.
    """
    if steps is not None or saving_listeners or max_steps is None:
      raise ValueError("the session runner trains to max_steps only")
    start = checkpoints.latest_step(self.model_dir)
    if start >= max_steps:
      logging.info("Skipping training: the checkpoint in %s is at step %d, "
                   "max_steps is %d", self.model_dir, start, max_steps)
      return self
    strategy = self._config.strategy
    if strategy is None or not tf_private.in_multi_worker_mode(strategy):
      self._train_here(input_fn, hooks, max_steps, strategy)
      return self
    # Several workers: as the Estimator, through TensorFlow's distribute
    # coordinator, which starts this task's server and calls worker_fn with
    # the strategy configured for the cluster; MonitoredTrainingSession then
    # reads the worker context (the chief alone checkpoints and summarizes).
    watch = distribute_utils.start_peer_watchdog(self._worker_timeout_secs)
    try:
      tf_private.run_distribute_coordinator(
          lambda worker_strategy: self._train_here(
              input_fn, hooks, max_steps, worker_strategy),
          strategy, self._config.session_config)
    except tf.errors.UnknownError as e:
      explained = distribute_utils.explain_server_error(e)
      if explained is None:
        raise
      raise explained from None
    finally:
      if watch is not None:  # Training is over: a peer may now go.
        watch.set()
    return self

  def _train_here(self, input_fn, hooks, max_steps, strategy):
    """Builds the TRAIN graph and runs it to `max_steps` in this process."""
    with self._new_graph().as_default():
      scope = strategy.scope() if strategy else contextlib.nullcontext()
      with scope:
        loss, train_op, model_hooks, init = self._train_graph(input_fn,
                                                              strategy)
        global_step = tf.train.get_global_step()
        tf.summary.scalar("loss", loss)
        scaffold = self._scaffold(init)
        all_hooks = [
            tf.train.StopAtStepHook(last_step=max_steps),
            tf.train.NanTensorHook(loss),
            tf.train.LoggingTensorHook(
                {"loss": loss, "step": global_step},
                every_n_iter=self._config.log_step_count_steps),
        ] + model_hooks + list(hooks or ())
        with tf.train.MonitoredTrainingSession(
            checkpoint_dir=self.model_dir, scaffold=scaffold,
            hooks=all_hooks,
            save_checkpoint_steps=self._config.save_checkpoints_steps,
            # The Estimator's default when no step interval is given.
            save_checkpoint_secs=(
                None if self._config.save_checkpoints_steps else 600),
            save_summaries_steps=self._config.save_summary_steps,
            log_step_count_steps=self._config.log_step_count_steps,
            config=self._config.session_config) as session:
          loss_value = None
          while not session.should_stop():
            _, loss_value = session.run([train_op, loss])
        # The Estimator's last line of training, which log readers look for.
        logging.info("Loss for final step: %s.", loss_value)

  # --------------------------------------------------------------------------
  # Evaluate
  # --------------------------------------------------------------------------

  def evaluate(self, input_fn, steps=None, checkpoint_path=None, name=None,
               hooks=None):
    """Evaluates the latest checkpoint (or `checkpoint_path`).

    Args:
      input_fn: as for `train`; read until exhausted, or `steps` batches.
      steps: int or None.
      checkpoint_path: str or None, a checkpoint prefix.
      name: str or None; results go to `<model_dir>/eval[_<name>]`.
      hooks: list of `tf.train.SessionRunHook`, or None.

    Returns:
      dict name -> numpy value: the `eval_metrics`, `loss` (the mean of the
      batches' losses) and `global_step`, as `Estimator.evaluate`.
    """
    path = self._checkpoint(checkpoint_path, "evaluating")
    with self._new_graph().as_default():
      global_step = tf.train.get_or_create_global_step()
      features, labels, init = self._batch(input_fn, _KEYS.EVAL)
      spec = self._call_model_fn(features, labels, _KEYS.EVAL)
      metrics = {}
      if spec.eval_metrics is not None:
        metric_fn, tensors = spec.eval_metrics
        metrics = dict(metric_fn(**tensors) if isinstance(tensors, dict)
                       else metric_fn(*tensors))
      metrics["loss"] = tf.metrics.mean(spec.loss)
      update_op = tf.group(*[update for _, update in metrics.values()])
      values = {name_: value for name_, (value, _) in metrics.items()}
      values["global_step"] = global_step
      final = tf.train.FinalOpsHook(values)
      batches = [0]

      class _StopAfter(tf.train.SessionRunHook):

        def after_run(self, run_context, run_values):
          del run_values
          batches[0] += 1
          if steps is not None and batches[0] >= steps:
            run_context.request_stop()

      creator = tf.train.ChiefSessionCreator(
          scaffold=self._scaffold(init), checkpoint_filename_with_path=path,
          config=self._config.session_config)
      with tf.train.MonitoredSession(
          session_creator=creator,
          hooks=[_StopAfter()] + list(hooks or ()) + [final]) as session:
        while not session.should_stop():
          session.run(update_op)
    results = dict(final.final_ops_values)
    logging.info("Evaluated %s over %d batches, for global step %d: %s",
                 path, batches[0], results["global_step"],
                 ", ".join("%s = %s" % item for item in sorted(results.items())))
    train_hooks.write_eval_summaries(self.model_dir, results,
                                     results["global_step"], name)
    return results

  # --------------------------------------------------------------------------
  # Predict
  # --------------------------------------------------------------------------

  def predict(self, input_fn, predict_keys=None, hooks=None,
              checkpoint_path=None, yield_single_examples=True):
    """Yields the predictions of the latest checkpoint (or
    `checkpoint_path`), one dict name -> numpy value per example (or per
    batch without `yield_single_examples`), as `Estimator.predict`.

    Args:
      input_fn: as for `train`; read until exhausted.
      predict_keys: list of str or None (all), the predictions to fetch.
      hooks: list of `tf.train.SessionRunHook`, or None.
      checkpoint_path: str or None, a checkpoint prefix.
      yield_single_examples: bool.
    """
    path = self._checkpoint(checkpoint_path, "predicting")
    with self._new_graph().as_default():
      tf.train.get_or_create_global_step()
      features, labels, init = self._batch(input_fn, _KEYS.PREDICT)
      spec = self._call_model_fn(features, labels, _KEYS.PREDICT)
      predictions = spec.predictions
      if not isinstance(predictions, dict):
        predictions = {"predictions": predictions}
      if predict_keys is not None:
        predictions = {k: predictions[k] for k in predict_keys}
      creator = tf.train.ChiefSessionCreator(
          scaffold=self._scaffold(init), checkpoint_filename_with_path=path,
          config=self._config.session_config)
      with tf.train.MonitoredSession(session_creator=creator,
                                     hooks=list(hooks or ())) as session:
        while not session.should_stop():
          batch = session.run(predictions)
          if not yield_single_examples:
            yield batch
            continue
          size = len(next(iter(batch.values())))
          for i in range(size):
            yield {key: value[i] for key, value in batch.items()}
