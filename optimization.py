"""Functions and classes related to optimization (weight updates).

`create_optimizer` builds the training op of every script. By default it is
the reference's: linear warmup then linear decay to zero, gradients clipped
to global norm 1.0, `AdamWeightDecayOptimizer` (Adam without bias
correction, decoupled weight decay; Loshchilov and Hutter 2017; Devlin et
al. 2018, appendix A.2). `OptimizerOptions` turns on, each off by default:
`optimizer="lamb"` (You et al. 2019, algorithm 2) or `"adamw_fused"` (any
name of `bert_tf.train.optimizers.REGISTRY`); `poly_power`;
`gradient_accumulation_steps=N` (N runs per update; the global step counts
updates); `loss_scaling` (fp16; Micikevicius et al. 2018, section 3.2).
All of them work under a `tf.distribute` strategy: gradients averaged
across replicas before clipping, the same update on every copy, kept out of
XLA. The machinery lives in `bert_tf/train/`; this module keeps the
reference's public names.
"""

import tensorflow.compat.v1 as tf

from bert_tf.train import adamw
from bert_tf.train import lamb
from bert_tf.train import optimizer_options
from bert_tf.train import update

__all__ = ["create_optimizer", "learning_rate_schedule", "OptimizerOptions",
           "make_optimizer", "AdamWeightDecayOptimizer", "LAMBOptimizer",
           "LEARNING_RATE_COLLECTION", "LOSS_SCALE_COLLECTION",
           "SKIPPED_UPDATES_COLLECTION"]

# Graph collections that `create_optimizer` fills for its callers' logging
# and tests (the project's own code takes these values from
# `update.TrainStep` instead): the learning-rate tensor (one float32 scalar
# per call) and, with fp16 loss scaling, the loss-scale variables (float32
# scale; int64 count of updates skipped for non-finite gradients).
LEARNING_RATE_COLLECTION = "learning_rate"
LOSS_SCALE_COLLECTION = "loss_scale"
SKIPPED_UPDATES_COLLECTION = "skipped_updates"

OptimizerOptions = optimizer_options.OptimizerOptions
AdamWeightDecayOptimizer = adamw.AdamWeightDecayOptimizer
LAMBOptimizer = lamb.LAMBOptimizer
learning_rate_schedule = update.learning_rate_schedule
make_optimizer = update.make_optimizer


def create_optimizer(loss, init_lr, num_train_steps, num_warmup_steps,
                     use_tpu, options=None):
  """Builds the training op: an optimizer update plus the global-step increment.

  The rate comes from the global step read *before* the increment, which
  runs after every variable update, so step t applies lr(t) (the reference
  left them unordered; its golden vectors show this schedule).

  With `gradient_accumulation_steps = N > 1` each run is a micro-batch: its
  gradient is added to float32 `<var>/gradient_accumulator`s and
  `gradient_accumulation/micro_steps` advances; every N-th run applies the
  clipped mean, zeroes the sums and increments the global step, so steps,
  the schedule and `max_steps` count updates, and a checkpoint resumes an
  interrupted update exactly. With `loss_scaling` (fp16) the gradients come
  from the loss times the `loss_scale` variable; a non-finite one skips the
  micro-batch, halves the scale (not below 1) and counts in
  `loss_scale/skipped_updates`; `loss_scale_growth_steps` finite ones in a
  row double it. Under a strategy (replica context) the same holds for the
  global batch.

  Args:
    loss: float32 scalar Tensor to minimize (the mean over the micro-batch).
    init_lr: float, peak learning rate.
    num_train_steps: int, total training updates (decay reaches 0 there).
    num_warmup_steps: int, linear warmup updates (0 for none).
    use_tpu: bool; `CrossShardOptimizer`, and no summaries.
    options: (optional) `OptimizerOptions`; default the reference's training.

  Returns:
    An Operation that runs one (micro-)step.

  Raises:
    ValueError: if `loss` depends on no trainable variable.
  """
  step = update.build_train_step(loss, init_lr, num_train_steps,
                                num_warmup_steps, use_tpu, options=options)
  tf.add_to_collection(LEARNING_RATE_COLLECTION, step.learning_rate)
  if step.loss_scale is not None:
    tf.add_to_collection(LOSS_SCALE_COLLECTION, step.loss_scale.scale)
    tf.add_to_collection(SKIPPED_UPDATES_COLLECTION, step.loss_scale.skipped)
  return step.train_op
