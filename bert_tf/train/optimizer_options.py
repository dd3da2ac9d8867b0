"""`OptimizerOptions`: everything about an update beyond the learning rate.

One frozen value that `optimization.create_optimizer` (and through it every
trainer) takes; its defaults are the reference release's training (AdamW,
weight decay 0.01, clipping at global norm 1.0, linear decay, one batch per
update, no loss scaling). The scripts build it from the command-line flags
(`bert_tf.train.options.TrainingOptions.optimizer_options`). The model's
compute dtype is not here: it is an argument of `modeling.BertModel`.
"""

import dataclasses

__all__ = ["OptimizerOptions"]

_EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")
_OPTIMIZERS = ("adamw", "lamb")


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
    loss_scaling: bool, dynamic loss scaling (for a float16 model; Micikevicius
      et al. 2018, "Mixed Precision Training", section 3.2). bfloat16 has
      float32's range and needs none.
    initial_loss_scale: float, the loss scale at the start.
    loss_scale_growth_steps: int, consecutive finite gradients after which
      the loss scale doubles.
    exclude_from_weight_decay: tuple of regular expressions; variables whose
      name matches one get no weight decay.

  Raises:
    ValueError: (on construction) one line naming the bad field.
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

  def __post_init__(self):
    if self.optimizer not in _OPTIMIZERS:
      raise ValueError("optimizer must be one of %s, got %r" %
                       (", ".join(_OPTIMIZERS), self.optimizer))
    if (not isinstance(self.gradient_accumulation_steps, int) or
        self.gradient_accumulation_steps < 1):
      raise ValueError("gradient_accumulation_steps must be an integer >= 1, "
                       "got %r" % (self.gradient_accumulation_steps,))
    if not isinstance(self.loss_scaling, bool):
      raise ValueError("loss_scaling must be a bool, got %r" %
                       (self.loss_scaling,))
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
