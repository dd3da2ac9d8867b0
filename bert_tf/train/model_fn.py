"""The one `model_fn` of every task (`build_model_fn`: the encoder, the
task's `Head`, the checkpoint initialization with the reference's
`*INIT_FROM_CKPT*` log, the mode's `spec.model_spec`), the steps of a
number of epochs, and a weighted mean loss that holds under a strategy."""

import abc
import dataclasses
from typing import Any, Callable, Optional

from absl import logging
import tensorflow.compat.v1 as tf

from bert_tf.checks import checkpoint as checkpoint_checks
from bert_tf.train import accumulation
from bert_tf.train import packing
from bert_tf.train import spec as spec_lib
from bert_tf.train import update
import modeling

__all__ = ["Head", "HeadOutput", "TrainingSchedule", "build_model_fn",
           "dropout_seed", "fine_tuning_steps",
           "init_from_checkpoint", "weighted_mean_loss", "train_spec",
           "cast_weights_once"]


@dataclasses.dataclass(frozen=True)
class HeadOutput:
  """What a head gives the `model_fn` in one mode.

  Attributes:
    loss: float32 scalar Tensor (TRAIN and EVAL), or None (PREDICT).
    eval_metrics: (EVAL) `(metric_fn, tensors)` as `TPUEstimatorSpec` takes
      them, or None.
    predictions: (PREDICT) dict name -> Tensor [batch_size, ...], or None.
  """

  loss: Optional[Any] = None
  eval_metrics: Optional[tuple] = None
  predictions: Optional[dict] = None


class Head(abc.ABC):
  """A task's output layer on the encoder, chosen once and passed as a
  value: `build_model_fn` calls `build`; whatever needs the task's outputs
  (eval keys, exports, prediction files) asks the head."""

  #: The modes the head supports (the reference's scripts refuse others).
  modes = (spec_lib.ModeKeys.TRAIN, spec_lib.ModeKeys.EVAL,
           spec_lib.ModeKeys.PREDICT)

  def prepare(self, features, mode):
    """(Optional) ops the head needs before the encoder is built, so that
    a graph seed's per-op seeds keep their order. Returns the feature dict
    the encoder and `build` read (default: `features`)."""
    del mode  # Unused by default.
    return features

  @abc.abstractmethod
  def build(self, model, features, mode, update_share=None):
    """Builds the head's variables and outputs on `model` (a `BertModel`
    over `features`) for `mode`; `update_share` is None or float32
    [batch_size] (`accumulation.update_share`); dropout draws from
    `model.dropout_seed`. Returns a `HeadOutput`."""


@dataclasses.dataclass(frozen=True)
class TrainingSchedule:
  """How a `model_fn` trains: peak `learning_rate`, `num_train_steps` and
  `num_warmup_steps` (updates; None: no training), `options`
  (`OptimizerOptions`; None: the reference's) and `dropout_seed` (int: a
  --deterministic run's stateless dropout, `dropout_seed`; None: stateful,
  the reference's)."""

  learning_rate: float = 0.0
  num_train_steps: Optional[int] = None
  num_warmup_steps: Optional[int] = None
  options: Any = None
  dropout_seed: Optional[int] = None


def build_model_fn(head, bert_config, init_checkpoint, use_tpu,
                   use_one_hot_embeddings, schedule=None,
                   compute_dtype=tf.float32,
                   log_features: bool = True,
                   encoder: Optional[Callable] = None):
  """The `model_fn(features, labels, mode, params)` of a task.

  `modeling.BertModel` over `input_ids`, `input_mask`, `segment_ids`
  (and packed rows' `position_ids` and `cls_positions`:
  `packing.encoder_inputs`; dropout in TRAIN only), `head` on it, initialization from
  `init_checkpoint`, then the mode's `spec.model_spec`: TRAIN with
  `update.build_train_step`'s op, EVAL with the head's loss and metrics,
  PREDICT with its predictions. `schedule` (`TrainingSchedule`) is None
  where the model never trains; `compute_dtype` is the encoder's (weights
  stay float32); `log_features` logs the reference's "*** Features ***";
  `encoder(features, mode) -> BertModel` replaces the standard encoder
  (with `dropout_seed=` too in a --deterministic run: `dropout_seed`).

  Raises:
    ValueError: (when called) for a mode the head does not support.
  """
  schedule = schedule or TrainingSchedule()

  def model_fn(features, labels, mode, params):
    del labels  # Labels come in `features`.
    if mode not in head.modes:
      raise ValueError("%s supports the modes %s, got %s" %
                       (type(head).__name__, ", ".join(head.modes), mode))
    if log_features:
      logging.info("*** Features ***")
      for name in sorted(features):
        logging.info("  name = %s, shape = %s", name, features[name].shape)
    features = head.prepare(features, mode)
    del params  # Batch sizes are the input_fn's; the model reads none.
    seed = dropout_seed(schedule.dropout_seed, mode, schedule.options)
    if encoder is not None:
      model = encoder(features, mode, **(
          {} if seed is None else {"dropout_seed": seed}))
    else:
      model = modeling.BertModel(
          config=bert_config, is_training=mode == spec_lib.ModeKeys.TRAIN,
          input_ids=features["input_ids"], input_mask=features["input_mask"],
          token_type_ids=features["segment_ids"],
          use_one_hot_embeddings=use_one_hot_embeddings,
          compute_dtype=compute_dtype,
          cast_weights_once=cast_weights_once(mode, use_tpu),
          dropout_seed=seed, **packing.encoder_inputs(features))
    output = head.build(
        model, features, mode,
        update_share=accumulation.update_share(features, schedule.options,
                                               mode, use_tpu))
    scaffold_fn = init_from_checkpoint(init_checkpoint, use_tpu)
    if mode == spec_lib.ModeKeys.TRAIN:
      return train_spec(output.loss, schedule.learning_rate,
                        schedule.num_train_steps, schedule.num_warmup_steps,
                        use_tpu, scaffold_fn, options=schedule.options)
    if mode == spec_lib.ModeKeys.EVAL:
      return spec_lib.model_spec(mode=mode, loss=output.loss,
                                 eval_metrics=output.eval_metrics,
                                 scaffold_fn=scaffold_fn)
    return spec_lib.model_spec(mode=mode, predictions=output.predictions,
                               scaffold_fn=scaffold_fn)

  return model_fn


def dropout_seed(seed, mode, options=None):
  """The `modeling.DropoutSeed` of a --deterministic run's TRAIN graph
  (`seed`, an int), else None (`seed` None, or not TRAIN: stateful dropout).

  Its key folds in the global step, the micro-batch's number in its
  update (`options`, `OptimizerOptions`, with gradient accumulation) and
  the replica, so a step's masks are the same whether or not the run was
  restarted before it, and each replica draws its own.
  """
  if seed is None or mode != spec_lib.ModeKeys.TRAIN:
    return None

  def make_key():
    parts = [tf.train.get_or_create_global_step()]
    if options is not None and options.runs_per_update > 1:
      # The micro-batch's number in its update (a strategy's counter is
      # not saved: it restarts at 0, at an update's start).
      parts.append(tf.math.floormod(accumulation.micro_step_counter(
          tf.distribute.has_strategy()), options.runs_per_update))
    parts.append(tf.distribute.get_replica_context().replica_id_in_sync_group)
    key = tf.constant([seed, 0], tf.int64)
    for part in parts:
      key = tf.random.experimental.stateless_fold_in(
          key, tf.cast(part, tf.int64))
    return key

  return modeling.DropoutSeed(make_key)


def fine_tuning_steps(num_examples, train_batch_size, num_train_epochs,
                      warmup_proportion):
  """(num_train_steps, num_warmup_steps) of `num_train_epochs` over
  `num_examples`, as the reference; at least one training step (the
  reference failed on a training set smaller than a batch)."""
  num_train_steps = int(num_examples / train_batch_size * num_train_epochs)
  if num_train_steps < 1:
    logging.warning("%d examples / batch size %d * %s epochs is under one "
                    "step; training 1 step", num_examples, train_batch_size,
                    num_train_epochs)
    num_train_steps = 1
  return num_train_steps, int(num_train_steps * warmup_proportion)


def cast_weights_once(mode, use_tpu):
  """`BertModel(cast_weights_once=...)`: True for PREDICT and EVAL graphs
  off TPU (they never update the weights, so low-precision copies are cast
  once after the restore); never in TRAIN or on TPU."""
  return mode != spec_lib.ModeKeys.TRAIN and not use_tpu


def init_from_checkpoint(init_checkpoint, use_tpu):
  """Initializes the trainable variables found (name and shape) in
  `init_checkpoint` (`modeling.get_assignment_map_from_checkpoint`),
  logging each, marked `*INIT_FROM_CKPT*`, as the reference. Call after
  building the model. Returns the `scaffold_fn` on TPU, else None."""
  tvars = tf.trainable_variables()
  initialized = {}
  scaffold_fn = None
  if init_checkpoint:
    # The same files, under a name TensorFlow's readers do not take for a
    # pattern (a folder named `pre[2]`).
    readable = checkpoint_checks.readable_prefix(init_checkpoint)
    assignment_map, initialized = modeling.get_assignment_map_from_checkpoint(
        tvars, readable)
    if not assignment_map:
      raise ValueError(
          "--init_checkpoint: none of the model's %d variables is in %s; "
          "expected a BERT checkpoint (variables named bert/...)" %
          (len(tvars), init_checkpoint))
    if use_tpu:

      def tpu_scaffold():
        tf.train.init_from_checkpoint(readable, assignment_map)
        return tf.train.Scaffold()

      scaffold_fn = tpu_scaffold
    else:
      tf.train.init_from_checkpoint(readable, assignment_map)
  logging.info("**** Trainable Variables ****")
  for var in tvars:
    note = ", *INIT_FROM_CKPT*" if var.name in initialized else ""
    logging.info("  name = %s, shape = %s%s", var.name, var.shape, note)
  if init_checkpoint:
    # Only a fresh training run keeps these values: a run that resumes,
    # evaluates or predicts restores its model directory's checkpoint.
    logging.info("%d of %d trainable variables initialized from %s (where "
                 "the model directory holds a checkpoint, it is restored "
                 "over them)", sum(1 for v in tvars if v.name in initialized),
                 len(tvars), init_checkpoint)
  return scaffold_fn


def weighted_mean_loss(values, weights, update_share=None):
  """sum(weights * values) / (sum(weights) + 1e-5), over the global batch.

  Under a `tf.distribute` strategy the denominator is summed over all
  replicas (one all-reduce, no gradient) and the numerator scaled by their
  number, so the averaged gradients are the global batch's weighted mean,
  as on one device. With accumulation each micro-batch divides by
  `update_share` (float32 [batch_size], the update's total weight,
  `accumulation.with_update_shares`; None: the batch is its own update),
  so N micro-batches give the gradient of one batch N times larger.

  Args:
    values: float32 Tensor, e.g. per-token losses [batch_size, seq_length].
    weights: float32 Tensor of the same shape (0 leaves a value out).

  Returns:
    A float32 scalar Tensor; 0 when every weight is 0.
  """
  numerator = tf.reduce_sum(values * weights)
  if update_share is None:
    denominator = tf.reduce_sum(weights)
  else:
    denominator = tf.reshape(tf.cast(update_share, tf.float32), [-1])[0]
  if (tf.distribute.has_strategy() and
      not tf.distribute.in_cross_replica_context()):
    context = tf.distribute.get_replica_context()
    total = context.merge_call(
        lambda strategy, value: strategy.reduce(
            tf.distribute.ReduceOp.SUM, value, axis=None),
        args=(tf.stop_gradient(denominator),))
    return numerator * float(context.num_replicas_in_sync) / (total + 1e-5)
  return numerator / (denominator + 1e-5)


def train_spec(total_loss, learning_rate, num_train_steps, num_warmup_steps,
               use_tpu, scaffold_fn=None, options=None):
  """The TRAIN `spec.model_spec` of `total_loss`, with
  `update.build_train_step`'s train op (the update and the global-step
  increment, as `optimization.create_optimizer`; `options`, an
  `OptimizerOptions`, default the reference's). With fp16 loss scaling off
  TPU, a hook logs the loss scale and skipped updates every 100 steps."""
  step = update.build_train_step(total_loss, learning_rate, num_train_steps,
                                 num_warmup_steps, use_tpu, options=options)
  hooks = []
  if step.loss_scale is not None and not use_tpu:
    hooks.append(tf.train.LoggingTensorHook(
        {"loss_scale": step.loss_scale.scale,
         "skipped_updates": step.loss_scale.skipped}, every_n_iter=100))
  return spec_lib.model_spec(
      mode=spec_lib.ModeKeys.TRAIN, loss=total_loss, train_op=step.train_op,
      scaffold_fn=scaffold_fn, training_hooks=hooks or None)
