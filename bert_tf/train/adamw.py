"""AdamW as the reference release trains: Adam without bias correction.

Loshchilov and Hutter 2017, "Decoupled Weight Decay Regularization"; Devlin
et al. 2018, appendix A.2. The optimizer of every script by default
(`--optimizer=adamw`); re-exported by the root `optimization.py`.
"""

import tensorflow.compat.v1 as tf

from bert_tf.train import optimizer_base

__all__ = ["AdamWeightDecayOptimizer"]


class AdamWeightDecayOptimizer(optimizer_base.PerVariableOptimizer):
  """Adam with decoupled weight decay and no bias correction.

  Per variable, with gradient g:
    m = beta_1 * m + (1 - beta_1) * g
    v = beta_2 * v + (1 - beta_2) * g^2
    update = m / (sqrt(v) + epsilon) [+ weight_decay_rate * param]
    param = param - learning_rate * update
  Kept for parity: no bias correction (the released models were trained
  so). Slots `<var>/adam_m`, `<var>/adam_v` (the released checkpoints'
  names), root scope.
  """

  _SLOT_NAMES = ("adam_m", "adam_v")

  def _apply_one(self, grad, param, param_name, adam_m, adam_v):
    """The three assignments (param, m, v) of one variable's update."""
    if isinstance(grad, tf.IndexedSlices):  # From gathers: update is dense.
      grad = tf.convert_to_tensor(grad)
    # Standard Adam update, without bias correction.
    next_m = self.beta_1 * adam_m + (1.0 - self.beta_1) * grad
    next_v = self.beta_2 * adam_v + (1.0 - self.beta_2) * tf.square(grad)
    update = next_m / (tf.sqrt(next_v) + self.epsilon)
    # Decoupled weight decay: added to the update, not to the loss, so that
    # it does not interact with the moments.
    if self._do_use_weight_decay(param_name):
      update += self.weight_decay_rate * param
    next_param = param - self.learning_rate * update
    return [param.assign(next_param), adam_m.assign(next_m),
            adam_v.assign(next_v)]
