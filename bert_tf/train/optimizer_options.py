"""`OptimizerOptions`: everything about an update beyond the learning rate.

One frozen value that `optimization.create_optimizer` (and through it every
trainer) takes; its defaults are the reference release's training (AdamW,
weight decay 0.01, clipping at global norm 1.0, linear decay, one batch per
update, no loss scaling). The scripts build it from the command-line flags
(`bert_tf.train.options.TrainingOptions.optimizer_options`). The model's
compute dtype is not here: it is an argument of `modeling.BertModel`.

Its fields are checked in one place, `problems`: on construction (a
`ValueError` naming the field) and, for options read from flags, among a
script's start-up problems (`bert_tf.train.options.training_problems`,
which names the flag).
"""

import dataclasses

from bert_tf.train import optimizers

__all__ = ["OptimizerOptions", "problems"]

_EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")


@dataclasses.dataclass(frozen=True)
class OptimizerOptions:
  """Everything about the update beyond the learning rate, as one value.

  The defaults are the reference release's training.

  Attributes:
    optimizer: a name of `optimizers.REGISTRY`: "adamw"
      (`AdamWeightDecayOptimizer`, the reference's), "lamb"
      (`LAMBOptimizer`), "adamw_fused" (`FusedAdamWeightDecayOptimizer`).
    weight_decay_rate: float, decoupled weight decay per unit of learning
      rate.
    beta_1, beta_2: floats, decay rates of the first and second moments.
    epsilon: float, added to the square root of the second moment.
    clip_norm: float, gradients are clipped to this global norm (of the mean
      gradient of an update).
    poly_power: float, power of the polynomial learning-rate decay
      (1.0 = linear, the reference's).
    gradient_accumulation_steps: int >= 1, micro-batches per update.
    loss_scaling: bool, dynamic loss scaling (for a float16 model; Micikevicius
      et al. 2018, "Mixed Precision Training", section 3.2). bfloat16 has
      float32's range and needs none.
    initial_loss_scale: float, the loss scale at the start.
    loss_scale_growth_steps: int, consecutive finite gradients after which
      the loss scale doubles.
    exclude_from_weight_decay: tuple of regular expressions; variables whose
      name matches one get no weight decay.

  Raises:
    ValueError: (on construction) one line naming the bad field; not
      raised by `unchecked`.
  """

  optimizer: str = "adamw"
  weight_decay_rate: float = 0.01
  beta_1: float = 0.9
  beta_2: float = 0.999
  epsilon: float = 1e-6
  clip_norm: float = 1.0
  poly_power: float = 1.0
  gradient_accumulation_steps: int = 1
  loss_scaling: bool = False
  initial_loss_scale: float = 2.0**15
  loss_scale_growth_steps: int = 2000
  exclude_from_weight_decay: tuple = _EXCLUDE_FROM_WEIGHT_DECAY

  @property
  def runs_per_update(self):
    """Session runs (micro-batches) per update."""
    return self.gradient_accumulation_steps

  @property
  def conditional_update(self):
    """Whether a run of the train op may leave the global step as it is
    (accumulation, or an fp16 run skipping a non-finite gradient): the
    hooks then read the step after each run."""
    return self.gradient_accumulation_steps > 1 or self.loss_scaling

  # Construction checks the fields unless `unchecked` builds the value.
  check: dataclasses.InitVar[bool] = True

  def __post_init__(self, check):
    if check:
      for name, value, expected in problems(self):
        raise ValueError("%s must be %s, got %r" % (name, expected, value))

  @classmethod
  def unchecked(cls, **values):
    """The options as given, unchecked (a script reads them from its flags
    and reports `problems` together with its other start-up problems)."""
    return cls(check=False, **values)


def problems(options):
  """What is wrong with an `OptimizerOptions`' fields.

  Returns:
    list of (field name, value, what was expected), in field order; empty
    when the options are good.
  """
  found = []

  def expect(name, good, expected):
    if not good:
      found.append((name, getattr(options, name), expected))

  expect("optimizer", options.optimizer in optimizers.REGISTRY,
         "one of " + ", ".join(optimizers.REGISTRY))
  accumulation = options.gradient_accumulation_steps
  expect("gradient_accumulation_steps",
         isinstance(accumulation, int) and not isinstance(accumulation, bool)
         and accumulation >= 1, "an integer >= 1")
  expect("loss_scaling", isinstance(options.loss_scaling, bool), "a bool")
  expect("poly_power", _positive(options.poly_power), "a number > 0")
  expect("clip_norm", _positive(options.clip_norm), "a number > 0")
  expect("initial_loss_scale", _at_least(options.initial_loss_scale, 1),
         "a number >= 1")
  expect("loss_scale_growth_steps",
         _at_least(options.loss_scale_growth_steps, 1), "an integer >= 1")
  return found


def _positive(value):
  try:
    return value > 0
  except TypeError:
    return False


def _at_least(value, low):
  try:
    return value >= low
  except TypeError:
    return False
