"""Non-trainable state of the optimizers, created in the root variable scope.

The optimizers' slots (`<var>/adam_m`, `<var>/lamb_v`, ...), the gradient
accumulators and the loss-scale variables are named from the root, whatever
variable scope `create_optimizer` is called in: these are the names in the
reference's pre-training checkpoints (`bert/.../kernel/adam_m`), which
checkpoint conversion and warm starts rely on.
"""

import tensorflow.compat.v1 as tf

__all__ = ["root_variable"]


def root_variable(name, shape, dtype, initializer, **kwargs):
  """A non-trainable variable named `name` in the root scope.

  A global (checkpointed) variable unless `kwargs` (passed on to
  `tf.get_variable`) say otherwise. The current scope's reuse setting is
  kept: under a strategy, replicas after the first reuse the first one's
  variables.

  Args:
    name: str, the full variable name (no scope is prepended).
    shape: list of ints.
    dtype: `tf.DType`.
    initializer: a `tf.get_variable` initializer.
    **kwargs: more `tf.get_variable` arguments (collections,
      synchronization, aggregation).

  Returns:
    The variable (a `MirroredVariable` or per-replica variable under a
    strategy).
  """
  reuse = tf.get_variable_scope().reuse
  with tf.variable_scope(tf.VariableScope(reuse=reuse, name=""),
                         auxiliary_name_scope=False):
    return tf.get_variable(name, shape=shape, dtype=dtype, trainable=False,
                           initializer=initializer, **kwargs)
