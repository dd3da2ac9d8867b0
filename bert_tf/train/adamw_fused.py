"""The reference's AdamW through TensorFlow's fused Adam kernel
(`--optimizer=adamw_fused`, off by default): one weight-decay assignment
and one `ResourceApplyAdam` per variable instead of about a dozen ops; the
same slots (`<var>/adam_m`, `<var>/adam_v`, checkpoints interchange) and
the same numbers to float32 rounding."""

import math

import numpy as np
import tensorflow.compat.v1 as tf

from bert_tf.train import adamw

__all__ = ["FusedAdamWeightDecayOptimizer"]


class FusedAdamWeightDecayOptimizer(adamw.AdamWeightDecayOptimizer):
  """`AdamWeightDecayOptimizer`'s update through `ResourceApplyAdam`.

  The kernel computes lr_t = lr * sqrt(1 - beta_2^t) / (1 - beta_1^t),
  m += (g - m)(1 - beta_1), v += (g^2 - v)(1 - beta_2), param -= lr_t * m /
  (sqrt(v) + epsilon); given beta^t = 0, lr_t = lr: no bias correction, as
  the reference. Its float32 (1 - beta) makes its moments constant
  multiples of the reference's (`_moment_scales`; 1.3e-5 for beta_2 =
  0.999), cancelled by scaling the rate and epsilon; resuming from the
  other optimizer's checkpoint moves the next updates by about 6e-6 of
  their size. The decoupled decay, param -= lr * weight_decay_rate * param,
  is applied first as its own assignment (equal in exact arithmetic). Over
  the 20 conformance steps the variables stay within 7.2e-7 of the
  reference's (`adamw`: 6.0e-7), the moments within 7e-7. Non-resource
  variables get the unfused ops.
  """

  def _apply_one(self, grad, param, param_name, adam_m, adam_v):
    """The weight decay (where it applies) and the fused Adam op."""
    if not all(hasattr(v, "handle") for v in (param, adam_m, adam_v)):
      return super(FusedAdamWeightDecayOptimizer, self)._apply_one(
          grad, param, param_name, adam_m, adam_v)
    if isinstance(grad, tf.IndexedSlices):  # As the reference: dense update.
      grad = tf.convert_to_tensor(grad)
    learning_rate = tf.convert_to_tensor(self.learning_rate, tf.float32)
    first_scale, second_scale = _moment_scales(self.beta_1, self.beta_2)
    decays = []
    if self._do_use_weight_decay(param_name):
      # After the gradient: else the decay could run before the forward or
      # backward pass reads the variable (the gradients, clipped by their
      # global norm, are computed only once the whole backward pass is).
      with tf.control_dependencies([grad]):
        decays.append(param.assign_sub(
            learning_rate * (self.weight_decay_rate * param),
            read_value=False))
    with tf.control_dependencies(decays):
      zero = tf.constant(0.0, tf.float32)  # beta powers: no bias correction.
      # The kernel's moments are first_scale * m and second_scale * v of
      # the reference's: a rate and epsilon scaled to match give its update.
      root = math.sqrt(second_scale)
      apply = tf.raw_ops.ResourceApplyAdam(
          var=param.handle, m=adam_m.handle, v=adam_v.handle,
          beta1_power=zero, beta2_power=zero,
          lr=learning_rate * (root / first_scale),
          beta1=tf.constant(self.beta_1, tf.float32),
          beta2=tf.constant(self.beta_2, tf.float32),
          epsilon=tf.constant(self.epsilon * root, tf.float32), grad=grad)
    return decays + [apply]


def _moment_scales(beta_1, beta_2):
  """(m's, v's) ratio of the fused kernel's moments to the reference's:
  (1 - beta) computed in float32 against float32(1 - beta) computed in
  double (beta_2 = 0.999: 0.00099998713 against 0.001)."""
  scales = []
  for beta in (beta_1, beta_2):
    kernel = float(np.float32(1.0) - np.float32(beta))  # Exact (Sterbenz).
    scales.append(kernel / float(np.float32(1.0 - beta)))
  return tuple(scales)
