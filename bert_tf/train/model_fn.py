"""The pieces every script's `model_fn` shares.

The reference release repeats these in each `run_*.py`; here they live
once: the steps of a number of epochs, the checkpoint initialization (with
the reference's `*INIT_FROM_CKPT*` log), a weighted mean loss that holds
under a strategy, and the training step's spec. Runner-neutral: the specs
are `spec.model_spec`s, which both runners (`bert_tf/runner/`) read.
"""

from absl import logging
import tensorflow.compat.v1 as tf

from bert_tf.checks import checkpoint as checkpoint_checks
from bert_tf.train import spec as spec_lib
from bert_tf.train import update
import modeling

__all__ = ["fine_tuning_steps", "init_from_checkpoint", "weighted_mean_loss",
           "train_spec", "cast_weights_once"]


def fine_tuning_steps(num_examples, train_batch_size, num_train_epochs,
                      warmup_proportion):
  """Training and warmup steps for a number of epochs, as the reference.

  Args:
    num_examples: int, training examples (one epoch).
    train_batch_size: int, examples per step.
    num_train_epochs: float, epochs.
    warmup_proportion: float, fraction of the steps spent warming up.

  Returns:
    (num_train_steps, num_warmup_steps); at least one training step, where
    the reference failed on a training set smaller than a batch.
  """
  num_train_steps = int(num_examples / train_batch_size * num_train_epochs)
  if num_train_steps < 1:
    logging.warning("%d examples / batch size %d * %s epochs is under one "
                    "step; training 1 step", num_examples, train_batch_size,
                    num_train_epochs)
    num_train_steps = 1
  return num_train_steps, int(num_train_steps * warmup_proportion)


def cast_weights_once(mode, use_tpu):
  """`BertModel(cast_weights_once=...)` for a `model_fn`'s graph.

  True for PREDICT and EVAL graphs off TPU: they never update the weights,
  so a low-precision model reads copies cast once after the restore
  (`modeling.dense_layer`). Never in TRAIN; not on TPU, where this project
  cannot test it (the per-step casts stay there, as in the reference).
  """
  return mode != spec_lib.ModeKeys.TRAIN and not use_tpu


def init_from_checkpoint(init_checkpoint, use_tpu):
  """Initializes the graph's trainable variables from `init_checkpoint`.

  Call inside a `model_fn`, after the model is built. Variables whose names
  (and shapes) appear in the checkpoint are mapped through
  `modeling.get_assignment_map_from_checkpoint`; every trainable variable is
  logged with its shape, the initialized ones marked `*INIT_FROM_CKPT*`, as
  the reference does.

  Args:
    init_checkpoint: str or None, a checkpoint prefix (`.../bert_model.ckpt`).
    use_tpu: bool; on TPU the initialization runs inside a `Scaffold`.

  Returns:
    A `scaffold_fn` for `TPUEstimatorSpec` on TPU, else None.
  """
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

  On one device (or TPU, per core) this is the plain weighted mean of the
  batch. In the replica context of a `tf.distribute` strategy, each replica
  sees only its share of the batch, and the optimizer averages the replicas'
  gradients (`update.build_train_step`): a per-replica weighted mean
  would weigh every replica's share alike, whatever its total weight (with
  token weights: its number of labelled tokens). So the denominator is the
  sum of the weights over all replicas (one scalar all-reduce, no gradient)
  and the numerator is scaled by the number of replicas: the mean of the
  replicas' losses and gradients is that of the global batch's weighted
  mean, as on one device.

  With gradient accumulation the mean is over the whole update: each
  micro-batch divides by `update_share`, the update's total weight over its
  micro-batches (`accumulation.with_update_shares`), so the accumulated mean
  of the N micro-batches' gradients is that of one batch N times larger,
  however the labelled tokens fall among them (dividing each micro-batch by
  its own count weighs a token of a sparse micro-batch more). The loss
  value of one micro-batch is then its part of the update's mean, times N.

  Args:
    values: float32 Tensor, e.g. per-token losses [batch_size, seq_length].
    weights: float32 Tensor of the same shape (0 leaves a value out).
    update_share: (optional) float32 Tensor [batch_size], the feature
      `accumulation.UPDATE_SHARE_KEY` (every entry the same); None: the
      batch is its own update.

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
  """The `TPUEstimatorSpec` of a training step, as every script builds it.

  Args:
    total_loss: float32 scalar Tensor to minimize.
    learning_rate: float, peak learning rate.
    num_train_steps: int, steps (updates) of the learning-rate decay.
    num_warmup_steps: int, steps (updates) of linear warmup.
    use_tpu: bool; on TPU gradients are averaged across shards.
    scaffold_fn: from `init_from_checkpoint`, or None.
    options: (optional) `OptimizerOptions` (optimizer, accumulation, fp16
      loss scaling); default the reference's training.

  Returns:
    A `spec.model_spec` in TRAIN mode whose train op is
    `update.build_train_step`'s (the update and the global-step increment,
    as `optimization.create_optimizer`). With fp16 loss scaling off TPU, a
    hook logs the loss scale and the skipped updates every 100 steps.
  """
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
