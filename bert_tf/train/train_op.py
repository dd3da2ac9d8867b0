"""The pieces of the train op: gradients, all-reduce, the conditional update.

`update.build_train_step` (behind `optimization.create_optimizer`) builds the
reference's train op (gradients, clip, apply, global-step increment) from
`gradients`, `all_reduce_mean` and `apply_gradients`. With gradient accumulation or fp16 loss scaling the update
does not run on every step; `conditional_train_op` builds that op, on one
device and under a `tf.distribute` strategy, with every collective operation
placed where all replicas run it together.
"""

import tensorflow.compat.v1 as tf

from bert_tf.train import accumulation
from bert_tf.train import loss_scale as loss_scale_lib
from bert_tf.train import xla

__all__ = ["gradients", "all_reduce_mean", "clip", "apply_gradients",
           "conditional_train_op"]

def gradients(loss, tvars):
  """The gradients of `loss` with respect to the variables that have one.

  Args:
    loss: float32 scalar Tensor.
    tvars: list of trainable variables.

  Under a strategy of several replicas, a sparse gradient (`IndexedSlices`,
  the embedding's) whose row count has no static size (--bucket_by_length)
  is made dense: TensorFlow all-reduces such slices in a `cond` whose
  collectives the session prunes on one device and not the other, and the
  next step's all-reduce then pairs with the previous one's ("Shape
  mismatch in the collective instance", TF 2.15 and 2.21).

  Returns:
    (gradients, variables): two lists of the same length, None gradients
    (variables the loss does not depend on) left out.

  Raises:
    ValueError: if `loss` depends on none of `tvars`.
  """
  grads = tf.gradients(loss, tvars)
  context = tf.distribute.get_replica_context()
  if (tf.distribute.has_strategy() and context is not None and
      context.num_replicas_in_sync > 1):
    grads = [tf.convert_to_tensor(g)
             if isinstance(g, tf.IndexedSlices) and
             tf.compat.dimension_value(g.indices.shape[0]) is None else g
             for g in grads]
  pairs = [(g, v) for g, v in zip(grads, tvars) if g is not None]
  if not pairs:
    raise ValueError("loss %s depends on none of the %d trainable variables" %
                     (loss.name, len(tvars)))
  return [g for g, _ in pairs], [v for _, v in pairs]


def all_reduce_mean(grads, variables):
  """Averages per-replica gradients under a strategy; unchanged otherwise.

  Each replica's loss is the mean over its (equal) share of the global
  batch's examples, or for token-level means a share scaled to the global
  batch (`model_fn_utils.weighted_mean_loss`), so the mean over replicas is
  the gradient of the global batch's mean loss. The
  reduced gradient of each variable lands on that variable's devices.
  (`ReplicaContext.all_reduce` is not used: in graph mode its gradient
  wrapper looks the replicas' variables up by names that do not exist.)

  Args:
    grads: list of gradient Tensors (this replica's, in replica context).
    variables: list of the variables they belong to.

  Returns:
    list of gradients (mirrored values under a strategy).
  """
  if (not tf.distribute.has_strategy() or
      tf.distribute.in_cross_replica_context()):
    return grads

  def reduce_fn(strategy, *per_replica_grads):
    return strategy.extended.batch_reduce_to(
        tf.distribute.ReduceOp.MEAN, list(zip(per_replica_grads, variables)))

  return list(tf.distribute.get_replica_context().merge_call(
      reduce_fn, args=tuple(grads)))


def clip(grads, variables, clip_norm):
  """(gradient, variable) pairs, gradients clipped to a global norm."""
  clipped, _ = tf.clip_by_global_norm(grads, clip_norm=clip_norm)
  return list(zip(clipped, variables))


def apply_gradients(optimizer, grads_and_vars, global_step):
  """`optimizer.apply_gradients`, saying when gradients are already averaged.

  Under a strategy the gradients reaching here have been all-reduced (to
  clip the global gradient), so our optimizers are told not to average them
  again (`aggregate_gradients=False`).

  Args:
    optimizer: a `optimizer_base.PerVariableOptimizer` (or, without a
      strategy, any `tf.train.Optimizer`, e.g. `CrossShardOptimizer`).
    grads_and_vars: list of (gradient, variable).
    global_step: the global step (passed on; our optimizers leave it alone).

  Returns:
    The update Operation.
  """
  if tf.distribute.has_strategy():
    return optimizer.apply_gradients(grads_and_vars, global_step=global_step,
                                     aggregate_gradients=False)
  return optimizer.apply_gradients(grads_and_vars, global_step=global_step)


def _make_loss_scale(options):
  """The dynamic loss scale of an fp16 run, or None."""
  if not options.loss_scaling:
    return None
  return loss_scale_lib.DynamicLossScale(options.initial_loss_scale,
                                         options.loss_scale_growth_steps)


def _scaled_gradients(loss, tvars, loss_scale):
  """(gradients, variables), through the loss scale when there is one."""
  if loss_scale is None:
    return gradients(loss, tvars)
  grads, variables = gradients(loss_scale.scale_loss(loss), tvars)
  return loss_scale.unscale(grads), variables


def conditional_train_op(loss, tvars, optimizer, global_step, learning_rate,
                         options, use_tpu):
  """The train op with gradient accumulation and/or fp16 loss scaling.

  On one device (or TPU) everything below runs in the replica's own graph.
  Under a `tf.distribute` strategy (called in replica context, once per
  replica) each replica takes the gradient of its share of the batch, and
  the rest runs once, in cross-replica context (`merge_call`), so that
  every collective operation sits in a branch that all replicas take
  together:

  * fp16: whether a replica's gradient has an inf or NaN is summed over all
    replicas (one scalar all-reduce per micro-batch), so every replica skips
    or takes the same micro-batches and keeps the same loss scale.
  * Accumulation: each replica adds its own gradient to its own accumulators
    (see `accumulation.Accumulators`), with no communication; every N-th
    micro-batch the sums are all-reduced once (mean over replicas), divided
    by N, clipped, and applied to every replica's copy of every variable.

  Args:
    loss: float32 scalar Tensor, the micro-batch's mean loss.
    tvars: list of trainable variables.
    optimizer: the optimizer (wrapped in `CrossShardOptimizer` on TPU).
    global_step: the global step variable, incremented after each update.
    learning_rate: float32 scalar Tensor of this step (the increment waits
      for it).
    options: `OptimizerOptions` (clip_norm, gradient_accumulation_steps,
      loss_scaling and its settings).
    use_tpu: bool; no loss-scale summaries on TPU.

  Returns:
    (train_op, loss_scale): the train Operation, one micro-batch per run,
    and the `loss_scale.DynamicLossScale` (None without loss scaling).

  Raises:
    ValueError: if `loss` depends on none of `tvars`.
  """
  loss_scale = _make_loss_scale(options)
  grads, variables = _scaled_gradients(loss, tvars, loss_scale)

  def update(mean_grads):
    apply_op = apply_gradients(optimizer, clip(mean_grads, variables,
                                               options.clip_norm), global_step)
    with tf.control_dependencies([apply_op, learning_rate]):
      return tf.assign_add(global_step, 1)

  if not tf.distribute.has_strategy():
    if loss_scale is not None and not use_tpu:
      loss_scale.add_summaries()
    finite = (loss_scale_lib.all_finite(grads) if loss_scale
              else tf.constant(True))
    return _gated_train_op(None, grads, variables, finite, update,
                           options.gradient_accumulation_steps,
                           loss_scale), loss_scale

  overflow = (tf.cast(tf.logical_not(loss_scale_lib.all_finite(grads)),
                      tf.float32)
              if loss_scale else tf.zeros([]))

  def cross_replica_step(strategy, grads, overflow):
    with xla.kept_out_of_xla():
      if loss_scale is None:
        finite = tf.constant(True)
      else:
        loss_scale.add_summaries()
        finite = tf.equal(
            strategy.reduce(tf.distribute.ReduceOp.SUM, overflow, axis=None),
            0.0)
      return _gated_train_op(strategy, grads, variables, finite, update,
                             options.gradient_accumulation_steps, loss_scale)

  return tf.distribute.get_replica_context().merge_call(
      cross_replica_step, args=(grads, overflow)), loss_scale


def _gated_train_op(strategy, grads, variables, finite, update, num_micro,
                    loss_scale):
  """Skips non-finite gradients, accumulates, updates every `num_micro`-th.

  `strategy` is None on one device; otherwise this runs in cross-replica
  context and `grads` are per-replica values. `update(mean_grads)` applies
  one update and returns the global-step increment.

  Under a strategy the update starts from the all-reduced gradient of the
  first device (a mirrored value converted to a Tensor), which every copy
  then uses, but only once every device's all-reduce has finished: an
  all-reduce whose result nothing uses is pruned from the step, and the
  other devices wait for it forever (measured: two CPU replicas under the
  Estimator hung at the first update with accumulation).
  """

  def mean_over_replicas(values):
    if strategy is None:
      return list(values)
    reduced = strategy.extended.batch_reduce_to(
        tf.distribute.ReduceOp.MEAN, list(zip(values, variables)))
    every_copy = [copy for value in reduced
                  for copy in strategy.experimental_local_results(value)]
    with tf.control_dependencies(every_copy):
      return [tf.identity(tf.convert_to_tensor(value)) for value in reduced]

  if num_micro == 1:
    def apply_now():
      with tf.control_dependencies([update(mean_over_replicas(grads))]):
        return tf.constant(True)

    train_op = xla.cond(finite, apply_now, lambda: tf.constant(False))
  else:
    accumulators = accumulation.Accumulators(variables, strategy)

    def accumulate():
      with tf.control_dependencies(accumulators.add(grads)):
        return tf.identity(accumulators.micro_steps.assign_add(1))

    count = xla.cond(finite, accumulate, accumulators.micro_steps.read_value)
    is_update = tf.logical_and(finite, tf.equal(count % num_micro, 0))

    def apply_accumulated():
      mean = mean_over_replicas(accumulators.sums())
      increment = update([g / float(num_micro) for g in mean])
      with tf.control_dependencies([increment]):
        zeroed = accumulators.zero()
      with tf.control_dependencies(zeroed):
        return tf.constant(True)

    train_op = xla.cond(is_update, apply_accumulated,
                        lambda: tf.constant(False))
  ops = [train_op]
  if loss_scale is not None:
    with tf.control_dependencies([train_op]):
      ops.append(loss_scale.update(finite))
  return tf.group(*ops, name="train_op")
