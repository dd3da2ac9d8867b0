"""One training step's update: the learning-rate schedule, the optimizer and
the train op, returned with what the rest of a run needs to know of it.

`build_train_step` is what the root `optimization.create_optimizer` (the
reference's public name) and every script's `model_fn` call. It returns a
`TrainStep`: the train op, the learning rate of the step and the fp16 loss
scale (or None). Whoever needs those values gets them from this value,
passed on as parameters; nothing is left in graph collections for others
to find. How many session runs make an update, and whether a run may leave
the global step as it is, are properties of the `OptimizerOptions` the op
is built from (`runs_per_update`, `conditional_update`), which the hooks
are given too.
"""

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
  """A built train op and the facts about it that hooks and logs need.

  Attributes:
    train_op: the Operation one session run executes (one micro-batch).
    learning_rate: float32 scalar Tensor, the rate of the current update.
    loss_scale: `loss_scale.DynamicLossScale` of an fp16 run, else None.
  """

  train_op: Any
  learning_rate: Any
  loss_scale: Optional[Any] = None


def build_train_step(loss, init_lr, num_train_steps, num_warmup_steps,
                     use_tpu, options=None):
  """The train op of `optimization.create_optimizer`, as a `TrainStep`.

  See `optimization.create_optimizer` for the schedule, the update rules,
  accumulation and loss scaling (the reference's behaviour and this
  project's additions).

  Args:
    loss: float32 scalar Tensor to minimize (the micro-batch's mean).
    init_lr: float, peak learning rate.
    num_train_steps: int, updates over which the rate decays to 0.
    num_warmup_steps: int, updates of linear warmup (0: none).
    use_tpu: bool; `CrossShardOptimizer` and no summaries on TPU.
    options: `OptimizerOptions` or None (the reference's training).

  Returns:
    A `TrainStep`.

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
  """The learning rate at a given global step, as a float32 scalar Tensor.

  `schedule.learning_rate` on a Tensor (see there for the formula): linear
  warmup from 0 over `num_warmup_steps`, else polynomial decay from
  `init_lr` to 0.0 at `num_train_steps` (and 0.0 afterwards; power 1.0 is
  the reference's linear decay), in the reference's float32 ops.

  Args:
    global_step: integer scalar Tensor or Variable, the step *before* this
      step's increment (with gradient accumulation: the update count).
    init_lr: float, peak learning rate.
    num_train_steps: int, steps over which the rate decays to 0.
    num_warmup_steps: int, warmup steps (0 for none).
    power: (optional) float, power of the polynomial decay.

  Returns:
    float32 scalar Tensor.
  """
  return schedule.learning_rate(tf.convert_to_tensor(global_step), init_lr,
                                num_train_steps, num_warmup_steps,
                                power=power)


def make_optimizer(learning_rate, options=None):
  """The optimizer that `options.optimizer` names (`optimizers.REGISTRY`).

  Args:
    learning_rate: float or float32 scalar Tensor.
    options: (optional) `OptimizerOptions`; default the reference's.

  Returns:
    The optimizer, its hyperparameters from `options`.
  """
  return optimizers.build(learning_rate,
                          options or options_lib.OptimizerOptions())
