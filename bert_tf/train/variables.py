"""Non-trainable optimizer state (slots, accumulators, loss scale) in the
root variable scope, whatever scope `create_optimizer` runs in: the names
of the reference's checkpoints (`bert/.../kernel/adam_m`)."""

import tensorflow.compat.v1 as tf

__all__ = ["root_variable"]


def root_variable(name, shape, dtype, initializer, reuse=None, **kwargs):
  """A non-trainable variable `name` (no scope prepended), global unless
  `kwargs` (more `tf.get_variable` arguments) say otherwise; the scope's
  reuse is kept (replicas share the first one's) unless `reuse` is given
  (`tf.AUTO_REUSE`: made once, the same variable after)."""
  reuse = reuse or tf.get_variable_scope().reuse
  with tf.variable_scope(tf.VariableScope(reuse=reuse, name=""),
                         auxiliary_name_scope=False):
    return tf.get_variable(name, shape=shape, dtype=dtype, trainable=False,
                           initializer=initializer, **kwargs)
