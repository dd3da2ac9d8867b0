"""BERT's optimizer: linear warmup and decay, Adam with decoupled weight decay.

`create_optimizer` builds the training op used by every fine-tuning and
pre-training script: learning rate from the global step (linear warmup, then
linear decay to zero), gradients clipped to global norm 1.0, and
`AdamWeightDecayOptimizer` (Adam without bias correction plus decoupled weight
decay, Loshchilov and Hutter 2017, "Decoupled Weight Decay Regularization";
Devlin et al. 2018, appendix A.2).
"""

import re

import tensorflow.compat.v1 as tf

# Graph collection holding the learning-rate tensor that `create_optimizer`
# builds (one float32 scalar per call), for logging and tests.
LEARNING_RATE_COLLECTION = "learning_rate"

_WEIGHT_DECAY_RATE = 0.01
_EXCLUDE_FROM_WEIGHT_DECAY = ["LayerNorm", "layer_norm", "bias"]
_CLIP_NORM = 1.0


def learning_rate_schedule(global_step, init_lr, num_train_steps,
                           num_warmup_steps):
  """The learning rate at a given global step, as a float32 scalar Tensor.

  Linear decay from `init_lr` at step 0 to 0.0 at `num_train_steps` (and 0.0
  afterwards); when `num_warmup_steps > 0`, steps below it use the warmup rate
  `init_lr * step / num_warmup_steps` instead. So step 0 has rate 0.0 (kept
  for parity: the released models were trained with that schedule), and the
  rate drops from warmup straight onto the decay line, never reaching
  `init_lr`.

  Args:
    global_step: integer scalar Tensor or Variable, the step *before* this
      step's increment.
    init_lr: float, peak learning rate.
    num_train_steps: int, steps over which the rate decays to 0.
    num_warmup_steps: int, warmup steps (0 for none).

  Returns:
    float32 scalar Tensor.
  """
  learning_rate = tf.constant(value=init_lr, shape=[], dtype=tf.float32)
  # The reference's op: float32 results are bit-identical to the releases.
  learning_rate = tf.train.polynomial_decay(
      learning_rate, global_step, num_train_steps, end_learning_rate=0.0,
      power=1.0, cycle=False)
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


def create_optimizer(loss, init_lr, num_train_steps, num_warmup_steps,
                     use_tpu):
  """Builds the training op: AdamW update plus the global-step increment.

  The learning rate is computed from the global step read *before* this
  step's increment, and the increment runs after every variable update
  (control dependencies), so step t always applies lr(t). The reference left
  the read and the increment unordered (a race); this is the intended
  schedule, which the reference's golden vectors show.

  Args:
    loss: float32 scalar Tensor to minimize.
    init_lr: float, peak learning rate.
    num_train_steps: int, total training steps (decay reaches 0 there).
    num_warmup_steps: int, linear warmup steps (0 for none).
    use_tpu: bool; wrap the optimizer in `CrossShardOptimizer` and skip the
      TensorBoard summary (summaries do not run inside a TPU loop).

  Returns:
    An Operation that updates every trainable variable that has a gradient
    and increments the global step by one.

  Raises:
    ValueError: if `loss` depends on no trainable variable.
  """
  global_step = tf.train.get_or_create_global_step()
  step_before = global_step.read_value()
  learning_rate = learning_rate_schedule(step_before, init_lr,
                                         num_train_steps, num_warmup_steps)
  tf.add_to_collection(LEARNING_RATE_COLLECTION, learning_rate)
  if not use_tpu:
    tf.summary.scalar("learning_rate", learning_rate)

  optimizer = AdamWeightDecayOptimizer(
      learning_rate=learning_rate,
      weight_decay_rate=_WEIGHT_DECAY_RATE,
      beta_1=0.9,
      beta_2=0.999,
      epsilon=1e-6,
      exclude_from_weight_decay=_EXCLUDE_FROM_WEIGHT_DECAY)
  if use_tpu:
    # tf.contrib.tpu.CrossShardOptimizer in TF 1.x. Kept for parity: gradients
    # come from tf.gradients and are clipped per shard; its apply_gradients
    # then sums them across shards.
    optimizer = tf.tpu.CrossShardOptimizer(optimizer)

  grads_and_vars = _clipped_gradients(loss, tf.trainable_variables())
  apply_op = optimizer.apply_gradients(grads_and_vars, global_step=global_step)
  # Kept for parity: AdamWeightDecayOptimizer leaves the global step alone and
  # the train op increments it explicitly, after the updates.
  with tf.control_dependencies([apply_op, learning_rate]):
    increment = tf.assign_add(global_step, 1)
  return tf.group(apply_op, increment, name="train_op")


def _clipped_gradients(loss, tvars):
  """(gradient, variable) pairs, clipped to global norm 1.0.

  Variables without a gradient (None) are left out.
  """
  grads = tf.gradients(loss, tvars)
  pairs = [(g, v) for g, v in zip(grads, tvars) if g is not None]
  if not pairs:
    raise ValueError("loss %s depends on none of the %d trainable variables" %
                     (loss.name, len(tvars)))
  clipped, _ = tf.clip_by_global_norm([g for g, _ in pairs],
                                      clip_norm=_CLIP_NORM)
  return list(zip(clipped, [v for _, v in pairs]))


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
  """

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
    self._moments = {}  # variable name -> (adam_m, adam_v)

  def apply_gradients(self, grads_and_vars, global_step=None, name=None):
    """Returns an op applying one AdamW step to every (gradient, variable).

    Pairs whose gradient is None are skipped. `global_step` is accepted for
    the `tf.train.Optimizer` interface but not incremented (kept for parity;
    `create_optimizer` increments it).
    """
    del global_step  # Incremented by create_optimizer.
    assignments = []
    for grad, param in grads_and_vars:
      if grad is None or param is None:
        continue
      assignments.extend(self._apply_one(grad, param))
    return tf.group(*assignments, name=name or self.get_name())

  def _apply_one(self, grad, param):
    """The three assignments (param, m, v) of one variable's update."""
    param_name = _variable_name(param.name)
    if isinstance(grad, tf.IndexedSlices):  # From gathers: update is dense.
      grad = tf.convert_to_tensor(grad)
    adam_m, adam_v = self._create_moments(param, param_name)

    next_m = self.beta_1 * adam_m + (1.0 - self.beta_1) * grad
    next_v = self.beta_2 * adam_v + (1.0 - self.beta_2) * tf.square(grad)
    update = next_m / (tf.sqrt(next_v) + self.epsilon)
    if self._do_use_weight_decay(param_name):
      update += self.weight_decay_rate * param
    next_param = param - self.learning_rate * update
    return [param.assign(next_param), adam_m.assign(next_m),
            adam_v.assign(next_v)]

  def _create_moments(self, param, param_name):
    """Zero-initialized, non-trainable `<param>/adam_m` and `<param>/adam_v`."""
    root_scope = tf.VariableScope(reuse=False, name="")
    with tf.variable_scope(root_scope, auxiliary_name_scope=False):
      moments = tuple(
          tf.get_variable(
              name=param_name + suffix,
              shape=param.shape.as_list(),
              dtype=tf.float32,
              trainable=False,
              initializer=tf.zeros_initializer())
          for suffix in ("/adam_m", "/adam_v"))
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
    """The `adam_m` or `adam_v` variable of `var`, or None."""
    moments = self._moments.get(_variable_name(var.name))
    if moments is None or name not in ("adam_m", "adam_v"):
      return None
    return moments[0] if name == "adam_m" else moments[1]

  def get_slot_names(self):
    """["adam_m", "adam_v"]."""
    return ["adam_m", "adam_v"]


def _variable_name(name):
  """'bert/x/kernel:0' -> 'bert/x/kernel'."""
  match = re.match(r"^(.*):\d+$", name)
  return match.group(1) if match else name
