"""One training step's update (`build_train_step`: the schedule, the
optimizer, the train op), returned as a `TrainStep` value passed on as a
parameter (nothing in graph collections); `optimization.create_optimizer`
and every `model_fn` call it."""

import dataclasses
from typing import Any, Optional

import tensorflow.compat.v1 as tf

from bert_tf.train import optimizer_options as options_lib
from bert_tf.train import optimizers
from bert_tf.train import schedule
from bert_tf.train import train_op as train_op_lib
from bert_tf.train import xla

__all__ = ["TrainStep", "build_train_step", "learning_rate_schedule",
           "make_optimizer"]


@dataclasses.dataclass(frozen=True)
class TrainStep:
  """A built train op (one session run: one micro-batch), the float32 rate
  of the current update, and the fp16 `DynamicLossScale` (else None)."""

  train_op: Any
  learning_rate: Any
  loss_scale: Optional[Any] = None


def build_train_step(loss, init_lr, num_train_steps, num_warmup_steps,
                     use_tpu, options=None):
  """The train op of `optimization.create_optimizer` (see there), as a
  `TrainStep`. `options`: `OptimizerOptions`, None for the reference's.

  Raises:
    ValueError: if `loss` depends on no trainable variable.
  """
  options = options or options_lib.OptimizerOptions()
  global_step = tf.train.get_or_create_global_step()
  step_before = global_step.read_value()
  learning_rate = learning_rate_schedule(step_before, init_lr,
                                         num_train_steps, num_warmup_steps,
                                         power=options.poly_power)
  if not use_tpu:
    tf.summary.scalar("learning_rate", learning_rate)

  optimizer = make_optimizer(learning_rate, options)
  if use_tpu:
    # The reference's tf.contrib.tpu.CrossShardOptimizer: gradients come
    # from tf.gradients and are clipped per shard; its apply_gradients then
    # sums them across shards.
    optimizer = tf.tpu.CrossShardOptimizer(optimizer)

  tvars = tf.trainable_variables()
  if options.conditional_update:
    # The update does not run on every step: see train_op.
    train_op, loss_scale = train_op_lib.conditional_train_op(
        loss, tvars, optimizer, global_step, learning_rate, options, use_tpu)
    return TrainStep(train_op=train_op, learning_rate=learning_rate,
                     loss_scale=loss_scale)

  grads, tvars = train_op_lib.gradients(loss, tvars)
  # Under a tf.distribute strategy: the mean over the replicas.
  grads = train_op_lib.all_reduce_mean(grads, tvars)
  with xla.kept_out_of_xla():
    (grads, _) = tf.clip_by_global_norm(grads, clip_norm=options.clip_norm)
    apply_op = train_op_lib.apply_gradients(optimizer,
                                            list(zip(grads, tvars)),
                                            global_step)
    # Kept for parity: the optimizers leave the global step alone and the
    # train op increments it explicitly, after the updates.
    with tf.control_dependencies([apply_op, learning_rate]):
      increment = tf.assign_add(global_step, 1)
  return TrainStep(train_op=tf.group(apply_op, increment, name="train_op"),
                   learning_rate=learning_rate)


def learning_rate_schedule(global_step, init_lr, num_train_steps,
                           num_warmup_steps, power=1.0):
  """The float32 learning rate at `global_step` (before this step's
  increment; the update count), `schedule.learning_rate` in the
  reference's float32 ops: linear warmup, then polynomial decay (`power`)
  to 0 at `num_train_steps`."""
  return schedule.learning_rate(tf.convert_to_tensor(global_step), init_lr,
                                num_train_steps, num_warmup_steps,
                                power=power)


def make_optimizer(learning_rate, options=None):
  """The optimizer `options.optimizer` names (`optimizers.REGISTRY`; None:
  the reference's), its hyperparameters from `options`."""
  return optimizers.build(learning_rate,
                          options or options_lib.OptimizerOptions())
