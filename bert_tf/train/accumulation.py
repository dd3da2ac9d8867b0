"""Gradient accumulation: float32 sums of micro-batch gradients, and a counter.

With N micro-batches per update, each run of the train op adds its gradient
to the sums and advances the counter; `train_op` applies the mean of the N
gradients every N-th run and zeroes the sums. On one device the state is
checkpointed with the model. Under a strategy each replica keeps its own
sums (no communication while accumulating; one all-reduce per update).
"""

import tensorflow.compat.v1 as tf

import modeling
from bert_tf.train import variables as variables_lib

__all__ = ["Accumulators"]


class Accumulators(object):
  """Float32 gradient sums, one per variable, and a micro-batch counter.

  Variables: `<var>/gradient_accumulator` (the variable's shape) and
  `gradient_accumulation/micro_steps` (int64). On one device they are global
  variables, saved with every checkpoint, so a run restarted from any
  checkpoint finishes the update it was in exactly. Under a strategy the
  sums are per-replica local variables (`tf.VariableSynchronization.ON_READ`)
  and the counter is a mirrored local variable; none is checkpointed (a
  checkpoint of replica-local values would need every worker to save): step
  checkpoints fall between updates anyway, and a run restarted from a
  checkpoint taken inside an update (a preemption) begins that update again.

  Attributes:
    micro_steps: the int64 counter variable (micro-batches accumulated).
  """

  def __init__(self, variables, strategy):
    """Creates the sums and the counter.

    Args:
      variables: list of the trainable variables that have a gradient.
      strategy: None on one device; otherwise the `tf.distribute` strategy
        (called in cross-replica context).
    """
    self._strategy = strategy
    local = ({} if strategy is None else
             dict(collections=[tf.GraphKeys.LOCAL_VARIABLES]))
    per_replica = ({} if strategy is None else
                   dict(synchronization=tf.VariableSynchronization.ON_READ,
                        aggregation=tf.VariableAggregation.SUM))
    self.micro_steps = variables_lib.root_variable(
        "gradient_accumulation/micro_steps", [], tf.int64,
        tf.zeros_initializer(), **local)
    self._sums = [
        variables_lib.root_variable(
            modeling.variable_name(v.name) + "/gradient_accumulator",
            v.shape.as_list(), tf.float32, tf.zeros_initializer(),
            **local, **per_replica)
        for v in variables]

  def _copies(self, values):
    """[(sum variable, value)], one pair per variable and local replica."""
    if self._strategy is None:
      return list(zip(self._sums, values))
    local = self._strategy.experimental_local_results
    return [pair for total, value in zip(self._sums, values)
            for pair in zip(local(total), local(value))]

  def add(self, grads):
    """Ops adding `grads` (one per variable; per replica) to the sums."""
    ops = []
    for total, grad in self._copies(grads):
      with tf.device(total.device):
        ops.append(total.assign_add(tf.convert_to_tensor(grad),
                                    read_value=False))
    return ops

  def sums(self):
    """The sums: Tensors on one device, per-replica variables otherwise."""
    if self._strategy is None:
      return [total.read_value() for total in self._sums]
    return list(self._sums)

  def zero(self):
    """Ops zeroing every sum."""
    ops = []
    for total, _ in self._copies(self._sums):
      with tf.device(total.device):
        ops.append(total.assign(tf.zeros_like(total), read_value=False))
    return ops
