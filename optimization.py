"""BERT's optimizers: warmup and decay, AdamW or LAMB, accumulation, loss scale.

`create_optimizer` builds the training op used by every fine-tuning and
pre-training script. With its defaults it is the reference's: learning rate
from the global step (linear warmup, then linear decay to zero), gradients
clipped to global norm 1.0, and `AdamWeightDecayOptimizer` (Adam without bias
correction plus decoupled weight decay, Loshchilov and Hutter 2017,
"Decoupled Weight Decay Regularization"; Devlin et al. 2018, appendix A.2).

`OptimizerOptions` turns on the additions, each off by default:

* `optimizer="lamb"`: `LAMBOptimizer` (You et al. 2019, "Large Batch
  Optimization for Deep Learning: Training BERT in 76 minutes", algorithm 2);
* `poly_power`: the power of the polynomial decay (1.0 = linear);
* `gradient_accumulation_steps=N`: N micro-batches (N session runs) make one
  update of the mean gradient; the global step counts updates;
* `precision="fp16"`: dynamic loss scaling (Micikevicius et al. 2018, "Mixed
  Precision Training", section 3.2): non-finite gradients skip the update.

Both optimizers update mirrored variables correctly under a `tf.distribute`
strategy: `create_optimizer` averages the gradients across replicas before
clipping, and every replica applies the same update to its copy. Gradient
accumulation and loss scaling work there too (accumulation is local to each
replica, with one all-reduce per update). Under a strategy the update is
kept out of XLA's auto-clustering, so that `--use_xla` cannot make the
copies differ.

Public names: `create_optimizer`, `learning_rate_schedule`,
`OptimizerOptions`, `make_optimizer`, `AdamWeightDecayOptimizer`,
`LAMBOptimizer`, and the graph collections `LEARNING_RATE_COLLECTION`,
`LOSS_SCALE_COLLECTION`, `SKIPPED_UPDATES_COLLECTION`.
"""

import contextlib
import dataclasses
import re

import tensorflow.compat.v1 as tf
from tensorflow.core.framework import attr_value_pb2

import modeling

# Graph collection holding the learning-rate tensor that `create_optimizer`
# builds (one float32 scalar per call), for logging and tests.
LEARNING_RATE_COLLECTION = "learning_rate"
# Graph collections holding the loss-scale variables of an fp16 train op
# (float32 scale; int64 count of updates skipped for non-finite gradients).
LOSS_SCALE_COLLECTION = "loss_scale"
SKIPPED_UPDATES_COLLECTION = "skipped_updates"

_EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")
_OPTIMIZERS = ("adamw", "lamb")
_PRECISIONS = ("fp32", "bf16", "fp16")


@dataclasses.dataclass(frozen=True)
class OptimizerOptions:
  """Everything about the update beyond the learning rate, as one value.

  The defaults are the reference release's training.

  Attributes:
    optimizer: "adamw" (`AdamWeightDecayOptimizer`, the reference's) or
      "lamb" (`LAMBOptimizer`).
    weight_decay_rate: float, decoupled weight decay per unit of learning
      rate.
    beta_1, beta_2: floats, decay rates of the first and second moments.
    epsilon: float, added to the square root of the second moment.
    clip_norm: float, gradients are clipped to this global norm (of the mean
      gradient of an update).
    poly_power: float, power of the polynomial learning-rate decay
      (1.0 = linear, the reference's).
    gradient_accumulation_steps: int >= 1, micro-batches per update.
    precision: "fp32", "bf16" or "fp16": the model's compute dtype. Only
      "fp16" changes the optimizer: dynamic loss scaling.
    initial_loss_scale: float, the fp16 loss scale at the start.
    loss_scale_growth_steps: int, consecutive finite gradients after which
      the fp16 loss scale doubles.
    exclude_from_weight_decay: tuple of regular expressions; variables whose
      name matches one get no weight decay.
  """

  optimizer: str = "adamw"
  weight_decay_rate: float = 0.01
  beta_1: float = 0.9
  beta_2: float = 0.999
  epsilon: float = 1e-6
  clip_norm: float = 1.0
  poly_power: float = 1.0
  gradient_accumulation_steps: int = 1
  precision: str = "fp32"
  initial_loss_scale: float = 2.0**15
  loss_scale_growth_steps: int = 2000
  exclude_from_weight_decay: tuple = _EXCLUDE_FROM_WEIGHT_DECAY

  def __post_init__(self):
    if self.optimizer not in _OPTIMIZERS:
      raise ValueError("optimizer must be one of %s, got %r" %
                       (", ".join(_OPTIMIZERS), self.optimizer))
    if self.precision not in _PRECISIONS:
      raise ValueError("precision must be one of %s, got %r" %
                       (", ".join(_PRECISIONS), self.precision))
    if (not isinstance(self.gradient_accumulation_steps, int) or
        self.gradient_accumulation_steps < 1):
      raise ValueError("gradient_accumulation_steps must be an integer >= 1, "
                       "got %r" % (self.gradient_accumulation_steps,))
    if not self.poly_power > 0:
      raise ValueError("poly_power must be > 0, got %r" % (self.poly_power,))
    if not self.clip_norm > 0:
      raise ValueError("clip_norm must be > 0, got %r" % (self.clip_norm,))
    if not self.initial_loss_scale >= 1:
      raise ValueError("initial_loss_scale must be >= 1, got %r" %
                       (self.initial_loss_scale,))
    if self.loss_scale_growth_steps < 1:
      raise ValueError("loss_scale_growth_steps must be >= 1, got %r" %
                       (self.loss_scale_growth_steps,))

  @property
  def compute_dtype(self):
    """The `tf.DType` for `modeling.BertModel(compute_dtype=...)`."""
    return {"fp32": tf.float32, "bf16": tf.bfloat16,
            "fp16": tf.float16}[self.precision]

  @property
  def uses_loss_scaling(self):
    """True for fp16 (bfloat16 has float32's range and needs none)."""
    return self.precision == "fp16"


def learning_rate_schedule(global_step, init_lr, num_train_steps,
                           num_warmup_steps, power=1.0):
  """The learning rate at a given global step, as a float32 scalar Tensor.

  Polynomial decay `init_lr * (1 - step / num_train_steps) ** power` from
  step 0 to 0.0 at `num_train_steps` (and 0.0 afterwards; power 1.0 is the
  reference's linear decay); when `num_warmup_steps > 0`, steps below it use
  the warmup rate `init_lr * step / num_warmup_steps` instead. So step 0 has
  rate 0.0 (kept for parity: the released models were trained with that
  schedule), and the rate drops from warmup straight onto the decay curve,
  never reaching `init_lr`.

  Args:
    global_step: integer scalar Tensor or Variable, the step *before* this
      step's increment (with gradient accumulation: the update count).
    init_lr: float, peak learning rate.
    num_train_steps: int, steps over which the rate decays to 0.
    num_warmup_steps: int, warmup steps (0 for none).
    power: (optional) float, power of the polynomial decay.

  Returns:
    float32 scalar Tensor.
  """
  learning_rate = tf.constant(value=init_lr, shape=[], dtype=tf.float32)
  # The reference's op: float32 results are bit-identical to the releases.
  learning_rate = tf.train.polynomial_decay(
      learning_rate, global_step, num_train_steps, end_learning_rate=0.0,
      power=power, cycle=False)
  if not num_warmup_steps:
    return learning_rate

  step_int = tf.cast(global_step, tf.int32)
  warmup_int = tf.constant(num_warmup_steps, dtype=tf.int32)
  fraction_done = (tf.cast(step_int, tf.float32) /
                   tf.cast(warmup_int, tf.float32))
  warmup_learning_rate = init_lr * fraction_done
  # Blend with a 0/1 weight (no tf.cond: cheap on TPU, same values).
  is_warmup = tf.cast(step_int < warmup_int, tf.float32)
  return ((1.0 - is_warmup) * learning_rate +
          is_warmup * warmup_learning_rate)


def make_optimizer(learning_rate, options=None):
  """The `AdamWeightDecayOptimizer` or `LAMBOptimizer` that `options` names.

  Args:
    learning_rate: float or float32 scalar Tensor.
    options: (optional) `OptimizerOptions`; default the reference's.
  """
  options = options or OptimizerOptions()
  cls = LAMBOptimizer if options.optimizer == "lamb" else (
      AdamWeightDecayOptimizer)
  return cls(learning_rate=learning_rate,
             weight_decay_rate=options.weight_decay_rate,
             beta_1=options.beta_1, beta_2=options.beta_2,
             epsilon=options.epsilon,
             exclude_from_weight_decay=list(options.exclude_from_weight_decay))


def create_optimizer(loss, init_lr, num_train_steps, num_warmup_steps,
                     use_tpu, options=None):
  """Builds the training op: an optimizer update plus the global-step increment.

  The learning rate is computed from the global step read *before* this
  step's increment, and the increment runs after every variable update
  (control dependencies), so step t always applies lr(t). The reference left
  the read and the increment unordered (a race); this is the intended
  schedule, which the reference's golden vectors show.

  With `options.gradient_accumulation_steps = N > 1`, each run of the op is
  one micro-batch: its gradient is added to float32 accumulators
  (`<var>/gradient_accumulator`) and a micro-step counter
  (`gradient_accumulation/micro_steps`) advances; every N-th run applies the
  mean of the N gradients (clipped, with the learning rate of the current
  global step), zeroes the accumulators and increments the global step. So
  the global step, the learning-rate schedule, `num_train_steps` and an
  estimator's `max_steps` count updates; step-based checkpoints (taken when
  the global step changes) fall right after an update, with zeroed
  accumulators, and any checkpoint holds the counter and the accumulators
  together, so a restart resumes the interrupted update exactly.

  With `options.precision == "fp16"` the gradients come from the loss times a
  dynamic loss scale (variable `loss_scale`) and are divided by it. A
  non-finite gradient skips the micro-batch: no accumulation, no update, no
  global-step increment; the scale halves (not below 1) and
  `loss_scale/skipped_updates` counts it. After
  `options.loss_scale_growth_steps` finite gradients in a row the scale
  doubles.

  Args:
    loss: float32 scalar Tensor to minimize (the mean over the micro-batch).
    init_lr: float, peak learning rate.
    num_train_steps: int, total training updates (decay reaches 0 there).
    num_warmup_steps: int, linear warmup updates (0 for none).
    use_tpu: bool; wrap the optimizer in `CrossShardOptimizer` and skip the
      TensorBoard summaries (summaries do not run inside a TPU loop).
    options: (optional) `OptimizerOptions`; default the reference's training.

  Returns:
    An Operation that runs one (micro-)step.

  Under a `tf.distribute` strategy (called in replica context) the same
  rules hold for the global batch, with every replica's copy of every
  variable given the same update; see `_conditional_train_op` for how
  accumulation and loss scaling run there.

  Raises:
    ValueError: if `loss` depends on no trainable variable.
  """
  options = options or OptimizerOptions()
  global_step = tf.train.get_or_create_global_step()
  step_before = global_step.read_value()
  learning_rate = learning_rate_schedule(step_before, init_lr,
                                         num_train_steps, num_warmup_steps,
                                         power=options.poly_power)
  tf.add_to_collection(LEARNING_RATE_COLLECTION, learning_rate)
  if not use_tpu:
    tf.summary.scalar("learning_rate", learning_rate)

  optimizer = make_optimizer(learning_rate, options)
  if use_tpu:
    # tf.contrib.tpu.CrossShardOptimizer in TF 1.x. Kept for parity: gradients
    # come from tf.gradients and are clipped per shard; its apply_gradients
    # then sums them across shards.
    optimizer = tf.tpu.CrossShardOptimizer(optimizer)

  tvars = tf.trainable_variables()
  if options.gradient_accumulation_steps > 1 or options.uses_loss_scaling:
    return _conditional_train_op(loss, tvars, optimizer, global_step,
                                 learning_rate, options, use_tpu)

  grads, variables = _gradients(loss, tvars)
  grads = _all_reduce_mean(grads, variables)
  with _kept_out_of_xla():
    grads_and_vars = _clip(grads, variables, options.clip_norm)
    apply_op = _apply(optimizer, grads_and_vars, global_step)
    # Kept for parity: the optimizers leave the global step alone and the
    # train op increments it explicitly, after the updates.
    with tf.control_dependencies([apply_op, learning_rate]):
      increment = tf.assign_add(global_step, 1)
  return tf.group(apply_op, increment, name="train_op")


@contextlib.contextmanager
def _kept_out_of_xla():
  """Under a strategy, keeps the ops built inside out of XLA's auto-clustering.

  With `--use_xla` every replica's ops are clustered and compiled on their
  own, and the clusters differ from one replica to the next (the devices
  differ), so the same update computed on two copies from the same
  all-reduced gradient came out different in the last bit (3e-8 after two
  steps, on two CPU replicas): the copies drifted apart. XLA never clusters
  an op whose `_XlaCompile` attribute is false, so the update runs as
  TensorFlow kernels, the same on every copy, which stay bit-identical; the
  forward and backward passes are still compiled. No effect without a
  strategy.

  The ops are marked when the block ends, not through `jit_scope`: the
  attribute scope is graph state shared by the replicas' threads, and a
  scope left open across a `merge_call` would mark the forward pass of the
  replicas that run meanwhile. Enter the block after the gradients are
  all-reduced: every op created from then on (by any replica) belongs to the
  update, and a few ops another replica's model function builds after its
  update may be marked too, which only keeps them out of XLA.
  """
  if not tf.distribute.has_strategy():
    yield
    return
  graph = tf.get_default_graph()
  first = len(graph.get_operations())
  yield
  not_compiled = attr_value_pb2.AttrValue(b=False)
  for op in graph.get_operations()[first:]:
    op._set_attr("_XlaCompile", not_compiled)  # pylint: disable=protected-access


def _cond(pred, true_fn, false_fn):
  """`tf.cond` whose branches are kept out of XLA too (`_kept_out_of_xla`).

  Each branch is a function graph of its own, which the marking of the
  graph around it does not reach; so each is marked while it is built.
  Plain `tf.cond` without a strategy.
  """

  def kept_out(fn):
    def branch():
      with _kept_out_of_xla():
        return fn()
    return branch

  return tf.cond(pred, kept_out(true_fn), kept_out(false_fn))


def _gradients(loss, tvars):
  """(gradients, variables) of the variables that have a gradient."""
  grads = tf.gradients(loss, tvars)
  pairs = [(g, v) for g, v in zip(grads, tvars) if g is not None]
  if not pairs:
    raise ValueError("loss %s depends on none of the %d trainable variables" %
                     (loss.name, len(tvars)))
  return [g for g, _ in pairs], [v for _, v in pairs]


def _all_reduce_mean(grads, variables):
  """Averages per-replica gradients under a strategy; unchanged otherwise.

  Each replica's loss is the mean over its (equal) share of the global
  batch's examples, or for token-level means a share scaled to the global
  batch (`estimator_utils.weighted_mean_loss`), so the mean over replicas is
  the gradient of the global batch's mean loss. The
  reduced gradient of each variable lands on that variable's devices.
  (`ReplicaContext.all_reduce` is not used: in graph mode its gradient
  wrapper looks the replicas' variables up by names that do not exist.)
  """
  if (not tf.distribute.has_strategy() or
      tf.distribute.in_cross_replica_context()):
    return grads

  def reduce_fn(strategy, *per_replica_grads):
    return strategy.extended.batch_reduce_to(
        tf.distribute.ReduceOp.MEAN, list(zip(per_replica_grads, variables)))

  return list(tf.distribute.get_replica_context().merge_call(
      reduce_fn, args=tuple(grads)))


def _clip(grads, variables, clip_norm):
  """(gradient, variable) pairs, gradients clipped to a global norm."""
  clipped, _ = tf.clip_by_global_norm(grads, clip_norm=clip_norm)
  return list(zip(clipped, variables))


def _apply(optimizer, grads_and_vars, global_step):
  """`apply_gradients`, telling our optimizers when gradients are averaged."""
  if tf.distribute.has_strategy():
    return optimizer.apply_gradients(grads_and_vars, global_step=global_step,
                                     aggregate_gradients=False)
  return optimizer.apply_gradients(grads_and_vars, global_step=global_step)


def _root_variable(name, shape, dtype, initializer, **kwargs):
  """A non-trainable variable named `name` in the root scope.

  A global (checkpointed) variable unless `kwargs` (passed on to
  `tf.get_variable`) say otherwise. The current scope's reuse setting is
  kept: under a strategy, replicas after the first reuse the first one's
  variables.
  """
  reuse = tf.get_variable_scope().reuse
  with tf.variable_scope(tf.VariableScope(reuse=reuse, name=""),
                         auxiliary_name_scope=False):
    return tf.get_variable(name, shape=shape, dtype=dtype, trainable=False,
                           initializer=initializer, **kwargs)


def _make_loss_scale(options):
  """The dynamic loss scale of an fp16 run, or None."""
  if not options.uses_loss_scaling:
    return None
  return _DynamicLossScale(options.initial_loss_scale,
                           options.loss_scale_growth_steps)


def _scaled_gradients(loss, tvars, loss_scale):
  """(gradients, variables), through the loss scale when there is one."""
  if loss_scale is None:
    return _gradients(loss, tvars)
  grads, variables = _gradients(loss * loss_scale.value, tvars)
  return [tf.convert_to_tensor(g) / loss_scale.value for g in grads], variables


def _all_finite(grads):
  """bool scalar Tensor: no inf or NaN in any of `grads`."""
  return tf.reduce_all([tf.reduce_all(tf.is_finite(g)) for g in grads])


def _conditional_train_op(loss, tvars, optimizer, global_step, learning_rate,
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
    (see `_Accumulators`), with no communication; every N-th micro-batch
    the sums are all-reduced once (mean over replicas), divided by N,
    clipped, and applied to every replica's copy of every variable.
  """
  loss_scale = _make_loss_scale(options)
  grads, variables = _scaled_gradients(loss, tvars, loss_scale)

  def update(mean_grads):
    apply_op = _apply(optimizer, _clip(mean_grads, variables,
                                       options.clip_norm), global_step)
    with tf.control_dependencies([apply_op, learning_rate]):
      return tf.assign_add(global_step, 1)

  if not tf.distribute.has_strategy():
    if loss_scale is not None and not use_tpu:
      loss_scale.add_summaries()
    finite = _all_finite(grads) if loss_scale else tf.constant(True)
    return _gated_train_op(None, grads, variables, finite, update,
                           options.gradient_accumulation_steps, loss_scale)

  overflow = (tf.cast(tf.logical_not(_all_finite(grads)), tf.float32)
              if loss_scale else tf.zeros([]))

  def cross_replica_step(strategy, grads, overflow):
    with _kept_out_of_xla():
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
      cross_replica_step, args=(grads, overflow))


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

    train_op = _cond(finite, apply_now, lambda: tf.constant(False))
  else:
    accumulators = _Accumulators(variables, strategy)

    def accumulate():
      with tf.control_dependencies(accumulators.add(grads)):
        return tf.identity(accumulators.micro_steps.assign_add(1))

    count = _cond(finite, accumulate, accumulators.micro_steps.read_value)
    is_update = tf.logical_and(finite, tf.equal(count % num_micro, 0))

    def apply_accumulated():
      mean = mean_over_replicas(accumulators.sums())
      increment = update([g / float(num_micro) for g in mean])
      with tf.control_dependencies([increment]):
        zeroed = accumulators.zero()
      with tf.control_dependencies(zeroed):
        return tf.constant(True)

    train_op = _cond(is_update, apply_accumulated,
                       lambda: tf.constant(False))
  ops = [train_op]
  if loss_scale is not None:
    with tf.control_dependencies([train_op]):
      ops.append(loss_scale.update(finite))
  return tf.group(*ops, name="train_op")


class _Accumulators(object):
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
  """

  def __init__(self, variables, strategy):
    self._strategy = strategy
    local = ({} if strategy is None else
             dict(collections=[tf.GraphKeys.LOCAL_VARIABLES]))
    per_replica = ({} if strategy is None else
                   dict(synchronization=tf.VariableSynchronization.ON_READ,
                        aggregation=tf.VariableAggregation.SUM))
    self.micro_steps = _root_variable("gradient_accumulation/micro_steps", [],
                                      tf.int64, tf.zeros_initializer(),
                                      **local)
    self._sums = [
        _root_variable(modeling.variable_name(v.name) + "/gradient_accumulator",
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


class _DynamicLossScale(object):
  """fp16 dynamic loss scale: halve on non-finite gradients, grow when stable.

  Variables (root scope, non-trainable, saved in checkpoints): `loss_scale`
  (float32), `loss_scale/good_steps` (int64, finite gradients in a row) and
  `loss_scale/skipped_updates` (int64, gradients skipped for being
  non-finite). The scale and the skip count are written as summaries
  (`loss_scale`, `skipped_updates`) off TPU and put in the graph collections
  `LOSS_SCALE_COLLECTION` and `SKIPPED_UPDATES_COLLECTION` (for logging).
  Under a strategy the variables are mirrored and `update` runs in
  cross-replica context, so every replica keeps the same scale.
  """

  def __init__(self, initial_scale, growth_steps):
    self._growth_steps = growth_steps
    self.scale = _root_variable("loss_scale", [], tf.float32,
                                tf.constant_initializer(initial_scale))
    self.good_steps = _root_variable("loss_scale/good_steps", [], tf.int64,
                                     tf.zeros_initializer())
    self.skipped = _root_variable("loss_scale/skipped_updates", [], tf.int64,
                                  tf.zeros_initializer())
    self.value = self.scale.read_value()
    tf.add_to_collection(LOSS_SCALE_COLLECTION, self.scale)
    tf.add_to_collection(SKIPPED_UPDATES_COLLECTION, self.skipped)

  def add_summaries(self):
    """TensorBoard scalars `loss_scale` and `skipped_updates` (once a graph)."""
    # Raw summary ops: tf.summary.scalar would derive the tag from a name
    # scope, which the variable `loss_scale` already holds ("loss_scale_1").
    for tag, value in (("loss_scale", self.value),
                       ("skipped_updates", self.skipped.read_value())):
      tf.add_to_collection(tf.GraphKeys.SUMMARIES, tf.raw_ops.ScalarSummary(
          tags=tag, values=tf.cast(value, tf.float32)))

  def update(self, finite):
    """The op that adjusts the scale after a gradient; `finite`: bool Tensor."""

    def on_finite():
      good = self.good_steps.read_value() + 1
      grow = good >= self._growth_steps
      new_scale = tf.where(grow, self.value * 2.0, self.value)
      return tf.group(
          self.scale.assign(new_scale, read_value=False),
          self.good_steps.assign(tf.where(grow, tf.zeros_like(good), good),
                                 read_value=False))

    def on_overflow():
      return tf.group(
          self.scale.assign(tf.maximum(self.value * 0.5, 1.0),
                            read_value=False),
          self.good_steps.assign(tf.zeros([], tf.int64), read_value=False),
          self.skipped.assign_add(tf.ones([], tf.int64), read_value=False))

    return _cond(finite, on_finite, on_overflow)


# ----------------------------------------------------------------------------
# Optimizers
# ----------------------------------------------------------------------------


class AdamWeightDecayOptimizer(tf.train.Optimizer):
  """Adam with decoupled weight decay and no bias correction.

  Per variable, with gradient g:
    m = beta_1 * m + (1 - beta_1) * g
    v = beta_2 * v + (1 - beta_2) * g^2
    update = m / (sqrt(v) + epsilon) [+ weight_decay_rate * param]
    param = param - learning_rate * update
  Kept for parity: no bias correction of m and v (the released models were
  trained this way). Weight decay is added to the update rather than to the
  loss, so it does not interact with m and v.

  Slot variables are named `<var>/adam_m` and `<var>/adam_v` (the names in
  the released pre-training checkpoints), in the root variable scope.

  Under a `tf.distribute` strategy, `apply_gradients` runs the update in
  cross-replica context (through `merge_call` when called in replica
  context): gradients are averaged across replicas (unless the caller
  already did) and every replica's copy of each variable and slot gets the
  same update.
  """

  _SLOT_NAMES = ("adam_m", "adam_v")

  def __init__(self,
               learning_rate,
               weight_decay_rate=0.0,
               beta_1=0.9,
               beta_2=0.999,
               epsilon=1e-6,
               exclude_from_weight_decay=None,
               name="AdamWeightDecayOptimizer"):
    """Constructs the optimizer.

    Args:
      learning_rate: float or float32 scalar Tensor.
      weight_decay_rate: float, decoupled weight decay per unit of learning
        rate (0.0 disables it).
      beta_1: float, decay of the first-moment estimate.
      beta_2: float, decay of the second-moment estimate.
      epsilon: float, added to sqrt(v).
      exclude_from_weight_decay: (optional) list of regular expressions;
        variables whose name matches any (`re.search`) get no weight decay.
      name: str, name of the update op.
    """
    super(AdamWeightDecayOptimizer, self).__init__(False, name)
    self.learning_rate = learning_rate
    self.weight_decay_rate = weight_decay_rate
    self.beta_1 = beta_1
    self.beta_2 = beta_2
    self.epsilon = epsilon
    self.exclude_from_weight_decay = exclude_from_weight_decay
    self._moments = {}  # variable name -> (first moment, second moment)

  def apply_gradients(self, grads_and_vars, global_step=None, name=None,
                      aggregate_gradients=True):
    """Returns an op applying one step to every (gradient, variable).

    Pairs whose gradient is None are skipped. `global_step` is accepted for
    the `tf.train.Optimizer` interface but not incremented (kept for parity;
    `create_optimizer` increments it).

    Args:
      grads_and_vars: list of (gradient Tensor or IndexedSlices, Variable).
      global_step: ignored.
      name: (optional) str, name of the returned op.
      aggregate_gradients: bool; under a `tf.distribute` strategy, average
        the gradients across replicas first. False when the caller has
        already all-reduced them (as `create_optimizer` does, to clip the
        global gradient). No effect without a strategy.
    """
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

  def _apply_one(self, grad, param, param_name, adam_m, adam_v):
    """The three assignments (param, m, v) of one variable's update."""
    if isinstance(grad, tf.IndexedSlices):  # From gathers: update is dense.
      grad = tf.convert_to_tensor(grad)
    next_m = self.beta_1 * adam_m + (1.0 - self.beta_1) * grad
    next_v = self.beta_2 * adam_v + (1.0 - self.beta_2) * tf.square(grad)
    update = next_m / (tf.sqrt(next_v) + self.epsilon)
    if self._do_use_weight_decay(param_name):
      update += self.weight_decay_rate * param
    next_param = param - self.learning_rate * update
    return [param.assign(next_param), adam_m.assign(next_m),
            adam_v.assign(next_v)]

  def _create_moments(self, param, param_name):
    """Zero-initialized, non-trainable `<param>/<slot>` moments, root scope."""
    if param_name in self._moments:
      return self._moments[param_name]
    moments = tuple(
        _root_variable(param_name + "/" + suffix, param.shape.as_list(),
                       tf.float32, tf.zeros_initializer())
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
    """The first (`adam_m`) or second (`adam_v`) moment of `var`, or None."""
    moments = self._moments.get(modeling.variable_name(var.name))
    if moments is None or name not in self._SLOT_NAMES:
      return None
    return moments[self._SLOT_NAMES.index(name)]

  def get_slot_names(self):
    """["adam_m", "adam_v"]."""
    return list(self._SLOT_NAMES)


class LAMBOptimizer(AdamWeightDecayOptimizer):
  """LAMB: Adam moments with bias correction, scaled per layer by a trust ratio.

  You et al. 2019, "Large Batch Optimization for Deep Learning: Training BERT
  in 76 minutes", algorithm 2. Per variable w (one "layer"), at update t
  (1, 2, ...), with gradient g:
    m = beta_1 * m + (1 - beta_1) * g
    v = beta_2 * v + (1 - beta_2) * g^2
    m_hat = m / (1 - beta_1^t),  v_hat = v / (1 - beta_2^t)
    update = m_hat / (sqrt(v_hat) + epsilon) [+ weight_decay_rate * w]
    ratio = ||w|| / ||update||, or 1.0 where either norm is 0
    w = w - learning_rate * ratio * update
  Norms are Euclidean over the whole variable. Weight decay is skipped for
  the names in `exclude_from_weight_decay`, as in AdamW; the trust ratio
  applies to every variable.

  Variables (root scope, non-trainable, float32 unless said): slots
  `<var>/lamb_m` (first moment) and `<var>/lamb_v` (second moment), and
  `lamb/update_count` (int64, t of the last update, for the bias correction).
  """

  _SLOT_NAMES = ("lamb_m", "lamb_v")

  def __init__(self,
               learning_rate,
               weight_decay_rate=0.0,
               beta_1=0.9,
               beta_2=0.999,
               epsilon=1e-6,
               exclude_from_weight_decay=None,
               name="LAMBOptimizer"):
    """Constructs the optimizer; arguments as `AdamWeightDecayOptimizer`'s."""
    super(LAMBOptimizer, self).__init__(
        learning_rate, weight_decay_rate=weight_decay_rate, beta_1=beta_1,
        beta_2=beta_2, epsilon=epsilon,
        exclude_from_weight_decay=exclude_from_weight_decay, name=name)
    self._update_count = None

  def _shared_variables(self):
    if self._update_count is None:
      self._update_count = _root_variable("lamb/update_count", [], tf.int64,
                                          tf.zeros_initializer())
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

  def get_slot(self, var, name):
    """The first (`lamb_m`) or second (`lamb_v`) moment of `var`, or None."""
    return super(LAMBOptimizer, self).get_slot(var, name)

  def get_slot_names(self):
    """["lamb_m", "lamb_v"]."""
    return list(self._SLOT_NAMES)
