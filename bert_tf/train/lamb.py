"""LAMB (You et al. 2019, algorithm 2), `--optimizer=lamb`."""

import tensorflow.compat.v1 as tf

from bert_tf.train import optimizer_base
from bert_tf.train import variables as variables_lib

__all__ = ["LAMBOptimizer"]


class LAMBOptimizer(optimizer_base.PerVariableOptimizer):
  """LAMB: Adam moments with bias correction, scaled per layer by a trust ratio.

  Per variable w, at update t (1, 2, ...), with gradient g:
    m = beta_1 * m + (1 - beta_1) * g
    v = beta_2 * v + (1 - beta_2) * g^2
    m_hat = m / (1 - beta_1^t),  v_hat = v / (1 - beta_2^t)
    update = m_hat / (sqrt(v_hat) + epsilon) [+ weight_decay_rate * w]
    ratio = ||w|| / ||update||, or 1.0 where either norm is 0
    w = w - learning_rate * ratio * update
  Decay skips `exclude_from_weight_decay`; the ratio applies to all. Slots
  `<var>/lamb_m`, `<var>/lamb_v`; `lamb/update_count` (int64) is t.
  """

  _SLOT_NAMES = ("lamb_m", "lamb_v")

  _update_count = None  # `lamb/update_count`, made by the first update.

  def _shared_variables(self):
    if self._update_count is None:
      self._update_count = variables_lib.root_variable(
          "lamb/update_count", [], tf.int64, tf.zeros_initializer())
    return (self._update_count,)

  def _finish(self, update_op, strategy):
    """Counts the update, after every variable's update has read t."""
    with tf.control_dependencies([update_op]):
      if strategy is None:
        increment = self._update_count.assign_add(1, read_value=False)
      else:
        increment = strategy.extended.update(
            self._update_count,
            lambda count: count.assign_add(1, read_value=False), group=True)
    return tf.group(update_op, increment)

  def _apply_one(self, grad, param, param_name, lamb_m, lamb_v,
                 update_count):
    """The three assignments (param, m, v) of one variable's LAMB update."""
    if isinstance(grad, tf.IndexedSlices):
      grad = tf.convert_to_tensor(grad)
    step = tf.cast(update_count.read_value() + 1, tf.float32)  # t
    next_m = self.beta_1 * lamb_m + (1.0 - self.beta_1) * grad
    next_v = self.beta_2 * lamb_v + (1.0 - self.beta_2) * tf.square(grad)
    m_hat = next_m / (1.0 - tf.pow(self.beta_1, step))
    v_hat = next_v / (1.0 - tf.pow(self.beta_2, step))
    update = m_hat / (tf.sqrt(v_hat) + self.epsilon)
    if self._do_use_weight_decay(param_name):
      update += self.weight_decay_rate * param
    param_norm = tf.norm(param)
    update_norm = tf.norm(update)
    ratio = tf.where(
        tf.logical_and(param_norm > 0.0, update_norm > 0.0),
        param_norm / tf.maximum(update_norm, 1e-30), tf.ones_like(param_norm))
    next_param = param - self.learning_rate * ratio * update
    return [param.assign(next_param), lamb_m.assign(next_m),
            lamb_v.assign(next_v)]
