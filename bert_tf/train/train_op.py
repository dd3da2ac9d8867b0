"""The pieces of the train op: gradients, all-reduce, the conditional
update (`conditional_train_op`: accumulation or fp16 loss scaling, with
every collective where all replicas run it together);
`update.build_train_step` builds the reference's op from them."""

import tensorflow.compat.v1 as tf

from bert_tf.train import accumulation
from bert_tf.train import loss_scale as loss_scale_lib
from bert_tf.train import xla

__all__ = ["gradients", "all_reduce_mean", "clip", "apply_gradients",
           "conditional_train_op"]

def gradients(loss, tvars):
  """(gradients, variables) of `loss` over `tvars`, None gradients left out.

  Under several replicas, a sparse gradient without a static row count
  (--bucket_by_length) is made dense: TensorFlow all-reduces such slices in
  a `cond` pruned on one device only ("Shape mismatch in the collective
  instance", TF 2.15 and 2.21).

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
  """Averages this replica's `grads` over the replicas under a strategy
  (each on its variable's devices); unchanged otherwise. Not
  `ReplicaContext.all_reduce`: its graph-mode gradient wrapper looks up
  names that do not exist."""
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
  """`optimizer.apply_gradients(grads_and_vars, global_step)`, with
  `aggregate_gradients=False` under a strategy (already all-reduced to
  clip the global norm). Returns the update Operation."""
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

  Under a strategy each replica takes its gradient, and the rest runs once
  in cross-replica context (`merge_call`): fp16's inf/NaN check is summed
  over replicas (all skip the same micro-batches); each replica accumulates
  its own gradients and every N-th micro-batch the sums are all-reduced,
  divided by N, clipped and applied. `learning_rate`: this step's float32
  scalar; `options`: `OptimizerOptions`; no loss-scale summaries on TPU.

  Returns:
    (train_op, loss_scale): one micro-batch per run, and the
    `loss_scale.DynamicLossScale` (None without loss scaling).

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
  """Skips non-finite gradients, accumulates, updates every `num_micro`-th
  (`update(mean_grads)` returns the step increment; `strategy` None: one
  device). Under a strategy the update waits for every device's
  all-reduce: an unused one is pruned and the others hang."""

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
