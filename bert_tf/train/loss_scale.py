"""Dynamic loss scaling for float16 training.

Micikevicius et al. 2018, "Mixed Precision Training", section 3.2: the loss
is multiplied by a scale before the backward pass, so that small float16
gradients do not flush to zero, and the gradients are divided by it after.
A gradient with an inf or NaN skips its micro-batch (no accumulation, no
update, no global-step increment) and halves the scale (not below 1); after
a run of finite gradients the scale doubles. `train_op` decides what a skip
means for the update; this module holds the scale and its rule.
"""

import tensorflow.compat.v1 as tf

from bert_tf.train import variables as variables_lib
from bert_tf.train import xla

__all__ = ["DynamicLossScale", "all_finite"]


def all_finite(grads):
  """bool scalar Tensor: no inf or NaN in any of `grads` (list of Tensors)."""
  return tf.reduce_all([tf.reduce_all(tf.is_finite(g)) for g in grads])


class DynamicLossScale(object):
  """fp16 dynamic loss scale: halve on non-finite gradients, grow when stable.

  Variables (root scope, non-trainable, saved in checkpoints): `loss_scale`
  (float32), `loss_scale/good_steps` (int64, finite gradients in a row) and
  `loss_scale/skipped_updates` (int64, gradients skipped for being
  non-finite). The scale and the skip count are written as summaries
  (`loss_scale`, `skipped_updates`) off TPU; the train step that made the
  scale hands it on (`update.TrainStep.loss_scale`) for logging.
  Under a strategy the variables are mirrored and `update` runs in
  cross-replica context, so every replica keeps the same scale.

  Attributes:
    scale, good_steps, skipped: the three variables above.
    value: float32 scalar Tensor, the scale read once for this step.
  """

  def __init__(self, initial_scale, growth_steps):
    """Creates the variables.

    Args:
      initial_scale: float >= 1, the scale at the start.
      growth_steps: int >= 1, finite gradients in a row that double it.
    """
    self._growth_steps = growth_steps
    self.scale = variables_lib.root_variable(
        "loss_scale", [], tf.float32, tf.constant_initializer(initial_scale))
    self.good_steps = variables_lib.root_variable(
        "loss_scale/good_steps", [], tf.int64, tf.zeros_initializer())
    self.skipped = variables_lib.root_variable(
        "loss_scale/skipped_updates", [], tf.int64, tf.zeros_initializer())
    self.value = self.scale.read_value()

  def scale_loss(self, loss):
    """The loss times the scale (float32 scalar Tensor)."""
    return loss * self.value

  def unscale(self, grads):
    """Gradients of the scaled loss divided by the scale (list of Tensors)."""
    return [tf.convert_to_tensor(g) / self.value for g in grads]

  def add_summaries(self):
    """TensorBoard scalars `loss_scale` and `skipped_updates` (once a graph)."""
    # Raw summary ops: tf.summary.scalar would derive the tag from a name
    # scope, which the variable `loss_scale` already holds ("loss_scale_1").
    for tag, value in (("loss_scale", self.value),
                       ("skipped_updates", self.skipped.read_value())):
      tf.add_to_collection(tf.GraphKeys.SUMMARIES, tf.raw_ops.ScalarSummary(
          tags=tag, values=tf.cast(value, tf.float32)))

  def update(self, finite):
    """The op that adjusts the scale after a gradient.

    Args:
      finite: bool scalar Tensor, whether this step's gradient (over all
        replicas) was finite.

    Returns:
      The output of a `tf.cond` (kept out of XLA under a strategy).
    """

    def on_finite():
      good = self.good_steps.read_value() + 1
      grow = good >= self._growth_steps
      new_scale = tf.where(grow, self.value * 2.0, self.value)
      return tf.group(
          self.scale.assign(new_scale, read_value=False),
          self.good_steps.assign(tf.where(grow, tf.zeros_like(good), good),
                                 read_value=False))

    def on_overflow():
      return tf.group(
          self.scale.assign(tf.maximum(self.value * 0.5, 1.0),
                            read_value=False),
          self.good_steps.assign(tf.zeros([], tf.int64), read_value=False),
          self.skipped.assign_add(tf.ones([], tf.int64), read_value=False))

    return xla.cond(finite, on_finite, on_overflow)
