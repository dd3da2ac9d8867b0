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

import tensorflow.compat.v1 as tf

from bert_tf.train import adamw

__all__ = ["FusedAdamWeightDecayOptimizer"]


class FusedAdamWeightDecayOptimizer(adamw.AdamWeightDecayOptimizer):
  """`AdamWeightDecayOptimizer`'s update through `ResourceApplyAdam`.

  TensorFlow's `ResourceApplyAdam` computes, with t the update count,
    lr_t = lr * sqrt(1 - beta_2^t) / (1 - beta_1^t)
    m = beta_1 * m + (1 - beta_1) * g,  v = beta_2 * v + (1 - beta_2) * g^2
    param = param - lr_t * m / (sqrt(v) + epsilon)
  (epsilon after the square root, as in the reference). Given beta_1^t =
  beta_2^t = 0 its lr_t is lr: Adam without bias correction, the
  reference's rule. The decoupled weight decay, which the reference adds
  to the update before the learning rate multiplies it,
    param = param - lr * (m / (sqrt(v) + epsilon) + weight_decay_rate * param),
  is applied first, as its own assignment
    param = param - lr * (weight_decay_rate * param),
  to the same variables (`exclude_from_weight_decay`); the fused op then
  reads the decayed variable. The two orders are equal in exact arithmetic
  and differ by float32 rounding only (the kernel also writes
  m + (g - m) * (1 - beta_1) for the first moment): over the 20 steps of
  the reference's conformance trajectory, 2.4e-7 at most (1e-6 tolerated,
  tests/test_optimizers.py).

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
    decays = []
    if self._do_use_weight_decay(param_name):
      decays.append(param.assign_sub(
          learning_rate * (self.weight_decay_rate * param), read_value=False))
    with tf.control_dependencies(decays):
      zero = tf.constant(0.0, tf.float32)  # beta powers: no bias correction.
      apply = tf.raw_ops.ResourceApplyAdam(
          var=param.handle, m=adam_m.handle, v=adam_v.handle,
          beta1_power=zero, beta2_power=zero, lr=learning_rate,
          beta1=tf.constant(self.beta_1, tf.float32),
          beta2=tf.constant(self.beta_2, tf.float32),
          epsilon=tf.constant(self.epsilon, tf.float32), grad=grad)
    return decays + [apply]
