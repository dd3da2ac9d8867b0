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
  `optimizer="adamw_fused"`: the same AdamW through TensorFlow's fused Adam
  kernel (any name of `bert_tf.train.optimizers.REGISTRY`);
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

This module is the reference's public face over `bert_tf.train`, where the
machinery lives, one concern a module: `update` (the optimizer choice and
the train op, `build_train_step`), `schedule` (the learning rate),
`optimizers` (the optimizers by name), `adamw`, `adamw_fused`, `lamb`,
`optimizer_options`, `train_op` (gradients, all-reduce, the conditional
update), `accumulation`, `loss_scale`, `xla` (keeping the update out of XLA)
and `optimizer_base` (per-variable updates on any strategy). Nothing in the
package imports this module; the names users import stay importable here.
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
  step = update.build_train_step(loss, init_lr, num_train_steps,
                                num_warmup_steps, use_tpu, options=options)
  tf.add_to_collection(LEARNING_RATE_COLLECTION, step.learning_rate)
  if step.loss_scale is not None:
    tf.add_to_collection(LOSS_SCALE_COLLECTION, step.loss_scale.scale)
    tf.add_to_collection(SKIPPED_UPDATES_COLLECTION, step.loss_scale.skipped)
  return step.train_op
