"""The plumbing that the per-variable optimizers share: each variable's
slots, its update (`_apply_one`) once on every replica's copy under a
`tf.distribute` strategy, and weight-decay exclusion by name."""

import re

import tensorflow.compat.v1 as tf

import modeling
from bert_tf.train import variables as variables_lib

__all__ = ["PerVariableOptimizer"]


class PerVariableOptimizer(tf.train.Optimizer):
  """Base class: an update computed variable by variable.

  Subclasses set `_SLOT_NAMES` (slots `<var>/<suffix>`, root scope) and
  implement `_apply_one(grad, param, param_name, *slots, *shared)`
  returning one variable's assignments; `_shared_variables` and `_finish`
  add variables every update reads and ops after all. Under a strategy the
  update runs in cross-replica context, the same on every copy.

  Attributes:
    learning_rate: float or float32 scalar Tensor.
    weight_decay_rate, beta_1, beta_2, epsilon: floats.
    exclude_from_weight_decay: list of regular expressions, or None.
  """

  _SLOT_NAMES = ()

  def __init__(self, learning_rate, weight_decay_rate=0.0, beta_1=0.9,
               beta_2=0.999, epsilon=1e-6, exclude_from_weight_decay=None,
               name=None):
    """Stores the hyperparameters (the reference's defaults);
    `exclude_from_weight_decay`: regular expressions (`re.search`) of
    variables without decay; `name` (of the update op) defaults to the
    class's."""
    super(PerVariableOptimizer, self).__init__(
        False, name or type(self).__name__.lstrip("_"))
    self.learning_rate = learning_rate
    self.weight_decay_rate = weight_decay_rate
    self.beta_1 = beta_1
    self.beta_2 = beta_2
    self.epsilon = epsilon
    self.exclude_from_weight_decay = exclude_from_weight_decay
    self._moments = {}  # variable name -> (first moment, second moment)

  def apply_gradients(self, grads_and_vars, global_step=None, name=None,
                      aggregate_gradients=True):
    """The update Operation of every (gradient, variable) pair whose
    gradient is not None. `global_step` is not incremented (as the
    reference); `aggregate_gradients` averages over replicas first (False
    when already all-reduced)."""
    del global_step  # Incremented by create_optimizer.
    pairs = [(g, p) for g, p in grads_and_vars
             if g is not None and p is not None]
    name = name or self.get_name()
    if tf.distribute.has_strategy():
      if tf.distribute.in_cross_replica_context():
        return self._apply_cross_replica(tf.distribute.get_strategy(), pairs,
                                         aggregate_gradients, name)
      return tf.distribute.get_replica_context().merge_call(
          self._apply_cross_replica, args=(pairs, aggregate_gradients, name))
    assignments = []
    shared = self._shared_variables()
    for grad, param in pairs:
      param_name = modeling.variable_name(param.name)
      slots = self._create_moments(param, param_name)
      assignments.extend(self._apply_one(grad, param, param_name,
                                         *(slots + shared)))
    return self._finish(tf.group(*assignments, name=name), None)

  def _apply_one(self, grad, param, param_name, *slots_and_shared):
    """The assignments of one variable's update (list of Operations)."""
    raise NotImplementedError

  def _shared_variables(self):
    """Variables besides the slots that every variable's update reads."""
    return ()

  def _finish(self, update_op, strategy):
    """Runs after all the updates (`strategy`: None, or the strategy)."""
    del strategy
    return update_op

  def _apply_cross_replica(self, strategy, pairs, aggregate, name):
    """The update in cross-replica context: the same on every replica."""
    if aggregate and pairs:
      reduced = strategy.extended.batch_reduce_to(
          tf.distribute.ReduceOp.MEAN, pairs)
      pairs = list(zip(reduced, [p for _, p in pairs]))
    updates = []
    shared = self._shared_variables()
    for grad, param in pairs:
      param_name = modeling.variable_name(param.name)
      slots = self._create_moments(param, param_name)

      # Runs once per replica on its copies (MirroredVariable components).
      def update_fn(local_param, local_grad, *local_vars,
                    param_name=param_name):
        return tf.group(*self._apply_one(local_grad, local_param, param_name,
                                         *local_vars))

      updates.append(strategy.extended.update(
          param, update_fn, args=(grad,) + slots + shared, group=True))
    return self._finish(tf.group(*updates, name=name), strategy)

  def _create_moments(self, param, param_name):
    """Zero-initialized, non-trainable `<param>/<slot>` moments, root scope."""
    if param_name in self._moments:
      return self._moments[param_name]
    moments = tuple(
        variables_lib.root_variable(param_name + "/" + suffix,
                                    param.shape.as_list(), tf.float32,
                                    tf.zeros_initializer())
        for suffix in self._SLOT_NAMES)
    self._moments[param_name] = moments
    return moments

  def _do_use_weight_decay(self, param_name):
    """Whether `param_name` gets weight decay."""
    if not self.weight_decay_rate:
      return False
    for pattern in self.exclude_from_weight_decay or []:
      if re.search(pattern, param_name) is not None:
        return False
    return True

  def get_slot(self, var, name):
    """The first or second moment of `var` (a `_SLOT_NAMES` name), or None."""
    moments = self._moments.get(modeling.variable_name(var.name))
    if moments is None or name not in self._SLOT_NAMES:
      return None
    return moments[self._SLOT_NAMES.index(name)]

  def get_slot_names(self):
    """The two slot names, e.g. ["adam_m", "adam_v"]."""
    return list(self._SLOT_NAMES)
