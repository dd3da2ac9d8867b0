"""Dynamic loss scaling for float16 training (Micikevicius et al. 2018,
section 3.2): the loss times a scale, the gradients divided by it; an inf or
NaN skips the micro-batch and halves the scale (not below 1); a run of
finite gradients doubles it."""

import tensorflow.compat.v1 as tf

from bert_tf.train import variables as variables_lib
from bert_tf.train import xla

__all__ = ["DynamicLossScale", "all_finite"]


def all_finite(grads):
  """bool scalar Tensor: no inf or NaN in any of `grads` (list of Tensors)."""
  return tf.reduce_all([tf.reduce_all(tf.is_finite(g)) for g in grads])


class DynamicLossScale(object):
  """fp16 dynamic loss scale: halve on non-finite gradients, grow when stable.

  Non-trainable, checkpointed root-scope variables `loss_scale` (float32),
  `loss_scale/good_steps` and `loss_scale/skipped_updates` (int64), also
  summaries off TPU; mirrored under a strategy (`update` in cross-replica
  context).

  Attributes:
    scale, good_steps, skipped: the three variables above.
    value: float32 scalar Tensor, the scale read once for this step.
  """

  def __init__(self, initial_scale, growth_steps):
    """The variables: the scale starts at `initial_scale` (>= 1) and doubles
    after `growth_steps` finite gradients in a row."""
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
    """The op (a `tf.cond`, kept out of XLA under a strategy) adjusting the
    scale after a gradient; `finite`: bool scalar, over all replicas."""

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
