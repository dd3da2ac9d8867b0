"""Non-trainable optimizer state (slots, accumulators, loss scale) in the
root variable scope, whatever scope `create_optimizer` runs in: the names
of the reference's checkpoints (`bert/.../kernel/adam_m`); which entries
of a checkpoint are such training state (`is_training_state`)."""

import tensorflow.compat.v1 as tf

__all__ = ["root_variable", "is_training_state", "INPUT_POSITION_SCOPE"]

# The scope of the checkpoint entries holding the training input's position
# (`checkpoints.POSITION_SCOPE`).
INPUT_POSITION_SCOPE = "input_position"
# What a checkpoint holds beside the model's weights: the optimizers' slots
# `<var>/<slot>` (adamw and adamw_fused: adam_m, adam_v; lamb: lamb_m,
# lamb_v), the gradient sums of accumulation, and root-scope state: the
# step, LAMB's update count, the fp16 loss scale, the accumulation counter
# and the input's position.
_STATE_SUFFIXES = ("/adam_m", "/adam_v", "/lamb_m", "/lamb_v",
                   "/gradient_accumulator")
_STATE_NAMES = ("global_step", "loss_scale")
_STATE_SCOPES = ("lamb/", "loss_scale/", "gradient_accumulation/",
                 INPUT_POSITION_SCOPE + "/")


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


def is_training_state(name):
  """Whether checkpoint entry `name` (no ":0") is training state (optimizer
  slots, accumulators, step, loss scale, input position) rather than a
  weight of the model: what a conversion leaves out."""
  return (name in _STATE_NAMES or name.endswith(_STATE_SUFFIXES) or
          name.startswith(_STATE_SCOPES))
