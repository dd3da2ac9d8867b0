"""Functions and classes related to optimization (weight updates).

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
* `loss_scaling=True` (fp16): dynamic loss scaling (Micikevicius et al.
  2018, "Mixed Precision Training", section 3.2): non-finite gradients skip
  the update.

Both optimizers update mirrored variables correctly under a `tf.distribute`
strategy: `create_optimizer` averages the gradients across replicas before
clipping, and every replica applies the same update to its copy. Gradient
accumulation and loss scaling work there too (accumulation is local to each
replica, with one all-reduce per update). Under a strategy the update is
kept out of XLA's auto-clustering, so that `--use_xla` cannot make the
copies differ.

The machinery lives in `bert_tf.train`, one concern a module:
`optimizer_options` (the options), `train_op` (gradients, all-reduce, the
conditional update), `accumulation`, `loss_scale`, `xla` (keeping the update
out of XLA), `optimizer_base` (per-variable updates on any strategy) and
`lamb`. The names users import stay importable from here.
"""

import tensorflow.compat.v1 as tf

from bert_tf.train import lamb
from bert_tf.train import loss_scale
from bert_tf.train import optimizer_base
from bert_tf.train import optimizer_options
from bert_tf.train import train_op as train_op_lib
from bert_tf.train import xla

__all__ = ["create_optimizer", "learning_rate_schedule", "OptimizerOptions",
           "make_optimizer", "AdamWeightDecayOptimizer", "LAMBOptimizer",
           "LEARNING_RATE_COLLECTION", "LOSS_SCALE_COLLECTION",
           "SKIPPED_UPDATES_COLLECTION"]

# Graph collection holding the learning-rate tensor that `create_optimizer`
# builds (one float32 scalar per call), for logging and tests.
LEARNING_RATE_COLLECTION = "learning_rate"
# Graph collections holding the loss-scale variables of an fp16 train op
# (float32 scale; int64 count of updates skipped for non-finite gradients).
LOSS_SCALE_COLLECTION = loss_scale.LOSS_SCALE_COLLECTION
SKIPPED_UPDATES_COLLECTION = loss_scale.SKIPPED_UPDATES_COLLECTION

OptimizerOptions = optimizer_options.OptimizerOptions
LAMBOptimizer = lamb.LAMBOptimizer


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

  With `options.loss_scaling` (fp16) the gradients come from the loss times a
  dynamic loss scale (variable `loss_scale`) and are divided by it. A
  non-finite gradient skips the micro-batch: no accumulation, no update, no
  global-step increment; the scale halves (not below 1) and
  `loss_scale/skipped_updates` counts it. After
  `options.loss_scale_growth_steps` finite gradients in a row the scale
  doubles.

  Under a `tf.distribute` strategy (called in replica context) the same
  rules hold for the global batch, with every replica's copy of every
  variable given the same update; see `train_op.conditional_train_op` for
  how accumulation and loss scaling run there.

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
  if options.gradient_accumulation_steps > 1 or options.loss_scaling:
    # The update does not run on every step: see train_op.
    return train_op_lib.conditional_train_op(loss, tvars, optimizer,
                                             global_step, learning_rate,
                                             options, use_tpu)

  grads, tvars = train_op_lib.gradients(loss, tvars)
  # Under a tf.distribute strategy: the mean over the replicas.
  grads = train_op_lib.all_reduce_mean(grads, tvars)
  with xla.kept_out_of_xla():
    (grads, _) = tf.clip_by_global_norm(grads, clip_norm=options.clip_norm)
    apply_op = train_op_lib.apply_gradients(optimizer,
                                            list(zip(grads, tvars)),
                                            global_step)
    # Kept for parity: the optimizers leave the global step alone and the
    # train op increments it explicitly, after the updates.
    with tf.control_dependencies([apply_op, learning_rate]):
      increment = tf.assign_add(global_step, 1)
  return tf.group(apply_op, increment, name="train_op")


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

  Returns:
    The optimizer, its hyperparameters from `options`.
  """
  options = options or OptimizerOptions()
  cls = LAMBOptimizer if options.optimizer == "lamb" else (
      AdamWeightDecayOptimizer)
  return cls(learning_rate=learning_rate,
             weight_decay_rate=options.weight_decay_rate,
             beta_1=options.beta_1, beta_2=options.beta_2,
             epsilon=options.epsilon,
             exclude_from_weight_decay=list(options.exclude_from_weight_decay))


class AdamWeightDecayOptimizer(optimizer_base.PerVariableOptimizer):
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

  `apply_gradients` (`optimizer_base.PerVariableOptimizer`) skips pairs
  whose gradient is None, creates each variable's slots and applies
  `_apply_one` to it, grouping the assignments into one op; under a
  `tf.distribute` strategy it runs in cross-replica context, averages the
  gradients across replicas (unless the caller already did) and gives every
  replica's copy of each variable and slot the same update.
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
    super(AdamWeightDecayOptimizer, self).__init__(
        learning_rate, weight_decay_rate=weight_decay_rate, beta_1=beta_1,
        beta_2=beta_2, epsilon=epsilon,
        exclude_from_weight_decay=exclude_from_weight_decay, name=name)

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
