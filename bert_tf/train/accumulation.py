"""Gradient accumulation: float32 sums of micro-batch gradients, and a counter.

With N micro-batches per update, each run of the train op adds its gradient
to the sums and advances the counter; `train_op` applies the mean of the N
gradients every N-th run and zeroes the sums. On one device the state is
checkpointed with the model. Under a strategy each replica keeps its own
sums (no communication while accumulating; one all-reduce per update).

Token-weighted losses (the masked-LM loss, NER's token loss) are means over
the labelled tokens of the whole update, as one big batch gives them: the
training input carries, in every micro-batch, its share of the update's
token count (`with_update_shares`), which `model_fn.weighted_mean_loss`
divides by in place of the micro-batch's own count. Only the input can
know it (it looks ahead over the update's micro-batches), so it travels
as a feature, both ends set from the same option: `runner/loop.py` adds it
to the training input of a script that gives `Training.token_weights`,
and the model_fn, built with the same `OptimizerOptions`, requires it
(`update_share`) rather than fall back to the micro-batch's own count.
"""

from absl import logging
import tensorflow.compat.v1 as tf

import modeling
from bert_tf.train import spec as spec_lib
from bert_tf.train import variables as variables_lib

__all__ = ["Accumulators", "UPDATE_SHARE_KEY", "with_update_shares",
           "update_shares_input_fn", "update_share"]

# The feature holding a micro-batch's share of its update's total weight.
UPDATE_SHARE_KEY = "update_weight_share"


def with_update_shares(dataset, micro_batches, weight_fn):
  """Adds to each micro-batch its share of its update's total weight.

  An update takes `micro_batches` consecutive elements of the pipeline (N
  accumulation steps times the R replicas it feeds, which take its elements
  in turn). The total of `weight_fn` over those elements, divided by their
  number, is the share: the mean loss of the update is then
  sum(w * loss) / share per element, averaged over the N micro-batches and
  the replicas (`weighted_mean_loss` sums the shares of the replicas).

  Args:
    dataset: `tf.data.Dataset` of batched feature dicts (repeated: training).
    micro_batches: int, elements per update fed by this pipeline.
    weight_fn: function(feature dict of one micro-batch) -> float32
      Tensor of its loss weights (0 or 1, any shape).

  Returns:
    The dataset, each element with `UPDATE_SHARE_KEY`: float32 [batch], the
    share repeated for each example. Unchanged when `micro_batches` is 1.
  """
  if micro_batches <= 1:
    return dataset

  def add_shares(window):
    micro = tf.data.Dataset.zip(window)
    # Input ops: with --use_xla under multi_worker_mirrored, XLA's CPU
    # auto-clustering took them onto the local job's CPU beside the
    # worker's, and the input iterator failed to start ("Multiple CPU
    # devices").
    with tf.xla.experimental.jit_scope(compile_ops=False):
      # Per micro-batch, not stacked: with --bucket_by_length the
      # micro-batches of one update differ in length. The weights are
      # 0/1, so the float32 sum is exact in either order.
      total = micro.reduce(
          tf.constant(0.0, tf.float32),
          lambda acc, batch: acc + tf.reduce_sum(
              tf.cast(weight_fn(batch), tf.float32)))

    def with_share(batch):
      with tf.xla.experimental.jit_scope(compile_ops=False):
        batch = dict(batch)
        size = tf.shape(next(iter(batch.values())))[0]
        batch[UPDATE_SHARE_KEY] = tf.fill([size], total / float(micro_batches))
        return batch

    return micro.map(with_share)

  windows = dataset.window(micro_batches, drop_remainder=True)
  return windows.flat_map(add_shares)


def update_shares_input_fn(input_fn, accumulation_steps, weight_fn):
  """`input_fn` whose micro-batches carry their update's weight share.

  Args:
    input_fn: a training `input_fn(params, config=None, input_context=None)`.
    accumulation_steps: int, micro-batches per update
      (`--gradient_accumulation_steps`).
    weight_fn: as for `with_update_shares`.

  Returns:
    An input_fn of the same signature (`input_fn` itself when
    `accumulation_steps` is 1: one batch is its own update).
  """
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
  """A training micro-batch's share of its update's token weight, or None.

  None where a batch is its own update: one micro-batch per update,
  evaluation and prediction, and TPU (the reference's per-batch mean).

  Args:
    features: the model_fn's feature dict.
    options: `OptimizerOptions` or None (the reference's training).
    mode: the model_fn's mode (`spec.ModeKeys`).
    use_tpu: bool.

  Returns:
    float32 Tensor [batch_size], `features[UPDATE_SHARE_KEY]`, or None.

  Raises:
    ValueError: the training input of an accumulating run lacks the share
      (it was not built with `loop.Training(token_weights=...)`).
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


class Accumulators(object):
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

  Attributes:
    micro_steps: the int64 counter variable (micro-batches accumulated).
  """

  def __init__(self, variables, strategy):
    """Creates the sums and the counter.

    Args:
      variables: list of the trainable variables that have a gradient.
      strategy: None on one device; otherwise the `tf.distribute` strategy
        (called in cross-replica context).
    """
    self._strategy = strategy
    local = ({} if strategy is None else
             dict(collections=[tf.GraphKeys.LOCAL_VARIABLES]))
    per_replica = ({} if strategy is None else
                   dict(synchronization=tf.VariableSynchronization.ON_READ,
                        aggregation=tf.VariableAggregation.SUM))
    self.micro_steps = variables_lib.root_variable(
        "gradient_accumulation/micro_steps", [], tf.int64,
        tf.zeros_initializer(), **local)
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
