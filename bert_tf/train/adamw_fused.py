"""The reference's AdamW through TensorFlow's fused Adam kernel.

`--optimizer=adamw_fused` (off by default): the update rule of
`adamw.AdamWeightDecayOptimizer` (Adam without bias correction, epsilon
added to sqrt(v), decoupled weight decay), computed per variable by one
`ResourceApplyAdam` op (TensorFlow's fused kernel: it reads the gradient
and writes the variable and both moments in one pass) after one
weight-decay assignment, instead of about a dozen elementwise ops. Same
slots (`<var>/adam_m`, `<var>/adam_v`), so checkpoints interchange with
`--optimizer=adamw`; the numbers agree to float32 rounding (see
`FusedAdamWeightDecayOptimizer`).
"""

import math

import numpy as np
import tensorflow.compat.v1 as tf

from bert_tf.train import adamw

__all__ = ["FusedAdamWeightDecayOptimizer"]


class FusedAdamWeightDecayOptimizer(adamw.AdamWeightDecayOptimizer):
  """`AdamWeightDecayOptimizer`'s update through `ResourceApplyAdam`.

  TensorFlow's `ResourceApplyAdam` computes, with t the update count,
    lr_t = lr * sqrt(1 - beta_2^t) / (1 - beta_1^t)
    m = m + (g - m) * (1 - beta_1),  v = v + (g^2 - v) * (1 - beta_2)
    param = param - lr_t * m / (sqrt(v) + epsilon)
  (epsilon after the square root, as in the reference). Given beta_1^t =
  beta_2^t = 0 its lr_t is lr: Adam without bias correction, the
  reference's rule. Its (1 - beta) is computed in float32 from float32
  beta, the reference's in double (for beta_2 = 0.999, 1.3e-5 apart), so
  its moments are constant multiples of the reference's (`_moment_scales`);
  the rate and epsilon it is given are scaled to cancel that, exactly in
  exact arithmetic. The stored `adam_v` stays that multiple (1.3e-5
  larger, relatively, for beta_2 = 0.999; `adam_m` 2.3e-7): resuming
  either optimizer from the other's checkpoint moves the next updates by
  about 6e-6 of their size, fading as v renews.

  The decoupled weight decay, which the reference adds to the update
  before the learning rate multiplies it,
    param = param - lr * (m / (sqrt(v) + epsilon) + weight_decay_rate * param),
  is applied first, as its own assignment
    param = param - lr * (weight_decay_rate * param),
  to the same variables (`exclude_from_weight_decay`); the fused op then
  reads the decayed variable. The two orders are equal in exact arithmetic.
  Over the 20 steps of the reference's conformance trajectories
  (tests/data/conformance/optimization), the variables stay within 7.2e-7
  of the reference's (`adamw`: 6.0e-7), the moments within 7e-7
  (tests/test_optimizers.py).

  Variables that are not resource variables (TF1 reference variables,
  `use_resource=False`) get `AdamWeightDecayOptimizer`'s unfused ops: the
  fused op reads resource handles.
  """

  def __init__(self,
               learning_rate,
               weight_decay_rate=0.0,
               beta_1=0.9,
               beta_2=0.999,
               epsilon=1e-6,
               exclude_from_weight_decay=None,
               name="FusedAdamWeightDecayOptimizer"):
    """Constructs the optimizer; the arguments are
    `AdamWeightDecayOptimizer`'s."""
    super(FusedAdamWeightDecayOptimizer, self).__init__(
        learning_rate, weight_decay_rate=weight_decay_rate, beta_1=beta_1,
        beta_2=beta_2, epsilon=epsilon,
        exclude_from_weight_decay=exclude_from_weight_decay, name=name)

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
  """How much larger the fused kernel's moments are than the reference's.

  The kernel weighs the new gradient by (1 - beta) computed in float32 from
  float32 beta; the reference by float32(1 - beta) computed in double
  (beta_2 = 0.999: 0.00099998713 against 0.001, 1.3e-5 apart). Both decay
  the old moment by float32(beta), so each moment of the kernel is the
  reference's times a constant, at every step: this ratio (m's, v's).
  """
  scales = []
  for beta in (beta_1, beta_2):
    kernel = float(np.float32(1.0) - np.float32(beta))  # Exact (Sterbenz).
    scales.append(kernel / float(np.float32(1.0 - beta)))
  return tuple(scales)
