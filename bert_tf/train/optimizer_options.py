"""`OptimizerOptions`: everything about an update beyond the learning rate,
one frozen value that `optimization.create_optimizer` takes; the defaults
are the reference's training. Checked in one place (`problems`): on
construction, and among a script's start-up problems (naming the flag)."""

import dataclasses

from bert_tf.train import optimizers

__all__ = ["OptimizerOptions", "problems"]

_EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")


@dataclasses.dataclass(frozen=True)
class OptimizerOptions:
  """Everything about the update beyond the learning rate; the defaults are
  the reference release's training.

  Attributes:
    optimizer: a name of `optimizers.REGISTRY` ("adamw", the reference's;
      "lamb"; "adamw_fused").
    weight_decay_rate: float, decoupled decay per unit of learning rate.
    beta_1, beta_2, epsilon: Adam's moment decays and epsilon.
    clip_norm: float, the global norm an update's mean gradient is
      clipped to.
    poly_power: float, the learning-rate decay's power (1.0: linear).
    gradient_accumulation_steps: int >= 1, micro-batches per update.
    loss_scaling: bool, fp16 dynamic loss scaling (Micikevicius et al.
      2018, section 3.2), with `initial_loss_scale` doubling after
      `loss_scale_growth_steps` finite gradients.
    exclude_from_weight_decay: tuple of regular expressions.

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
  """(field name, value, what was expected) of each bad field, in field
  order; empty when the options are good."""
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
