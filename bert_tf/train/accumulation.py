"""Gradient accumulation: float32 sums of micro-batch gradients, a counter.

`train_op` applies the mean of N micro-batches' gradients every N-th run;
under a strategy each replica keeps its own sums (one all-reduce per
update). Token-weighted losses (masked LM, NER) are means over the whole
update's labelled tokens: the training input carries each micro-batch's
share of the update's count (`with_update_shares`, added by
`runner/loop.py` for `Training.token_weights`), which
`model_fn.weighted_mean_loss` divides by (`update_share`). Packed
pre-training rows carry a second share, of the update's real slots, for
the next-sentence loss beside the masked LM's (`slot_share`).
"""

from absl import logging
import tensorflow.compat.v1 as tf

import modeling
from bert_tf.train import spec as spec_lib
from bert_tf.train import variables as variables_lib

__all__ = ["Accumulators", "UPDATE_SHARE_KEY", "SLOT_SHARE_KEY",
           "with_update_shares", "update_shares_input_fn", "update_share",
           "slot_share", "micro_step_counter"]

# The feature holding a micro-batch's share of its update's total weight.
UPDATE_SHARE_KEY = "update_weight_share"
# With packed rows, the share of the update's real slots (examples), for a
# per-example loss beside a token-level one (`slot_share`).
SLOT_SHARE_KEY = "update_slot_share"


def with_update_shares(dataset, micro_batches, weight_fn):
  """Adds to each element of `dataset` (batched feature dicts) its share of
  its update's total weight: `UPDATE_SHARE_KEY`, float32 [batch], the
  total of `weight_fn(features)` (0/1 loss weights) over the update's
  `micro_batches` elements (N steps times the replicas fed) divided by
  their number. `weight_fn` may also return a dict of feature names to
  such weights: one share each. Unchanged when `micro_batches` is 1."""
  if micro_batches <= 1:
    return dataset

  def totals(batch):
    weights = weight_fn(batch)
    if not isinstance(weights, dict):
      weights = {UPDATE_SHARE_KEY: weights}
    return {key: tf.reduce_sum(tf.cast(value, tf.float32))
            for key, value in weights.items()}

  def add_shares(window):
    micro = tf.data.Dataset.zip(window)
    # Input ops: with --use_xla under multi_worker_mirrored, XLA's CPU
    # auto-clustering took them onto the local job's CPU beside the
    # worker's, and the input iterator failed to start ("Multiple CPU
    # devices").
    with tf.xla.experimental.jit_scope(compile_ops=False):
      # Per micro-batch, not stacked: with --bucket_by_length the
      # micro-batches of one update differ in length. The weights are
      # 0/1, so the float32 sums are exact in either order.
      sums = micro.map(totals)
      total = sums.reduce(
          {key: tf.constant(0.0) for key in sums.element_spec},
          lambda acc, batch: {key: acc[key] + batch[key] for key in acc})

    def with_share(batch):
      with tf.xla.experimental.jit_scope(compile_ops=False):
        batch = dict(batch)
        size = tf.shape(next(iter(batch.values())))[0]
        for key, value in total.items():
          batch[key] = tf.fill([size], value / float(micro_batches))
        return batch

    return micro.map(with_share)

  windows = dataset.window(micro_batches, drop_remainder=True)
  return windows.flat_map(add_shares)


def update_shares_input_fn(input_fn, accumulation_steps, weight_fn):
  """`input_fn` (same signature) whose micro-batches carry their update's
  weight share; `input_fn` itself when `accumulation_steps` is 1."""
  if accumulation_steps <= 1:
    return input_fn

  def wrapped(params, config=None, input_context=None):
    dataset = input_fn(params, config, input_context)
    replicas = 1
    if input_context is not None:
      replicas = max(1, input_context.num_replicas_in_sync //
                     max(1, input_context.num_input_pipelines))
    logging.info("Token-weighted loss: the mean over the labelled tokens of "
                 "each update's %d micro-batches (%d per replica)",
                 accumulation_steps * replicas, accumulation_steps)
    return with_update_shares(dataset, accumulation_steps * replicas,
                              weight_fn).prefetch(1)

  return wrapped


def update_share(features, options, mode, use_tpu):
  """`features[UPDATE_SHARE_KEY]` (float32 [batch_size]) of an
  accumulating training micro-batch; None where a batch is its own update
  (one micro-batch, evaluation, prediction, TPU).

  Raises:
    ValueError: the training input lacks the share (not built with
      `loop.Training(token_weights=...)`).
  """
  if (mode != spec_lib.ModeKeys.TRAIN or use_tpu or options is None or
      options.runs_per_update == 1):
    return None
  if UPDATE_SHARE_KEY not in features:
    raise ValueError(
        "--gradient_accumulation_steps=%d: the training input lacks %r, the "
        "update's token count that a token-level loss divides by; give the "
        "training loop the loss weights (loop.Training(token_weights=...))"
        % (options.runs_per_update, UPDATE_SHARE_KEY))
  return features[UPDATE_SHARE_KEY]


def slot_share(features, update_share):
  """`features[SLOT_SHARE_KEY]` (float32 [batch_size]) where `update_share`
  is not None (an accumulating training micro-batch), else None.

  Raises:
    ValueError: the training input lacks it (a `Training.token_weights`
      without the slots' weights).
  """
  if update_share is None:
    return None
  if SLOT_SHARE_KEY not in features:
    raise ValueError(
        "gradient accumulation over packed rows: the training input lacks "
        "%r, the update's count of real slots that a per-example loss "
        "divides by (loop.Training(token_weights=...) gives it)" %
        SLOT_SHARE_KEY)
  return features[SLOT_SHARE_KEY]


def micro_step_counter(distributed):
  """The int64 variable `gradient_accumulation/micro_steps`, made on the
  first call, the same one after (`Accumulators` and the dropout key read
  it). `distributed`: under a strategy it is a local variable."""
  local = (dict(collections=[tf.GraphKeys.LOCAL_VARIABLES]) if distributed
           else {})
  return variables_lib.root_variable(
      "gradient_accumulation/micro_steps", [], tf.int64,
      tf.zeros_initializer(), reuse=tf.AUTO_REUSE, **local)


class Accumulators(object):
  """Float32 gradient sums `<var>/gradient_accumulator` and the int64
  counter `gradient_accumulation/micro_steps` (attribute `micro_steps`).

  On one device they are global variables, checkpointed: a restart finishes
  its update exactly. Under a strategy they are replica-local (ON_READ
  sums, a mirrored counter) and not checkpointed: a restart from inside an
  update begins it again.
  """

  def __init__(self, variables, strategy):
    """Sums for `variables` (those with a gradient); `strategy` None on one
    device, else called in cross-replica context."""
    self._strategy = strategy
    local = ({} if strategy is None else
             dict(collections=[tf.GraphKeys.LOCAL_VARIABLES]))
    per_replica = ({} if strategy is None else
                   dict(synchronization=tf.VariableSynchronization.ON_READ,
                        aggregation=tf.VariableAggregation.SUM))
    self.micro_steps = micro_step_counter(strategy is not None)
    self._sums = [
        variables_lib.root_variable(
            modeling.variable_name(v.name) + "/gradient_accumulator",
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
