"""Length-bucketed batches (`--bucket_by_length`): less padding computed.

The reference pads every input to `--max_seq_length`, so a 20-token GLUE
sentence costs as much as a 128-token one. With buckets, a batch is cut to
its longest input, rounded up to one of a few lengths (`bucket_lengths`),
so that only a few shapes reach the graph (few XLA clusters, few TF
Serving batch shapes). The records on disk keep the reference's fixed
length; the cut happens in the input pipeline.

Padding is masked out of attention (an additive -10000 before the
softmax, whose exp is exactly 0 in float32) and every other op works per
token, so a cut batch gives each real token the same values as the padded
one, within float32 rounding. Training also groups inputs of similar
length into the same batch (`group_by_length`); evaluation and prediction
keep the input order, each batch cut to its own longest input.

TPUs need static shapes: the flag is refused with `--use_tpu`
(`flag_problems`). Under a strategy each replica's batch has its own
length; the embedding's gradient is then all-reduced dense
(`train_op.gradients`).
"""

import tensorflow.compat.v1 as tf

__all__ = ["BASE_KEYS", "bucket_lengths", "bucket_length",
           "python_bucket_length", "trim_batch",
           "cut_batches", "group_by_length", "flag_problems"]

# The [batch, seq_length] features of a sentence(-pair) input.
BASE_KEYS = ("input_ids", "input_mask", "segment_ids")
# The shortest bucket: below it, the fixed costs of a step dominate.
_SHORTEST = 16


def bucket_lengths(max_seq_length):
  """The lengths a batch may be cut to: powers of two and their midpoints
  from 16 (16, 24, 32, 48, 64, 96, 128, 192, ...), below
  `max_seq_length`, then `max_seq_length` itself.

  Args:
    max_seq_length: int >= 1.

  Returns:
    Sorted tuple of ints; the last is `max_seq_length`. Each step is at
    most 1.5x the one before, so a batch computes at most 1.5x its longest
    input (plus the rounding up to 16).
  """
  lengths = []
  power = _SHORTEST
  while power < max_seq_length:
    lengths.append(power)
    if power * 3 // 2 < max_seq_length:
      lengths.append(power * 3 // 2)
    power *= 2
  return tuple(lengths) + (int(max_seq_length),)


def _bucket_index(lengths, length):
  """int32 scalar Tensor: the index of the bucket of an int32 `length`,
  the number of `lengths` below it (len(lengths) past the last)."""
  boundaries = tf.constant(lengths, tf.int32)
  return tf.reduce_sum(tf.cast(boundaries < length, tf.int32))


def bucket_length(lengths, longest):
  """The smallest of `lengths` (a sorted tuple) >= `longest`, an int32
  scalar Tensor: the length a batch whose longest input is `longest` is cut
  to (`python_bucket_length` outside a graph)."""
  index = tf.minimum(_bucket_index(lengths, longest), len(lengths) - 1)
  return tf.gather(tf.constant(lengths, tf.int32), index)


def python_bucket_length(lengths, longest):
  """`bucket_length` for a Python int `longest` (a serving client's)."""
  return next((length for length in lengths if length >= longest),
              lengths[-1])


def _longest(mask):
  """int32 scalar: the most real tokens of any row of `mask` [batch,
  seq_length] (1 real, 0 padding; real tokens come first)."""
  return tf.reduce_max(tf.reduce_sum(tf.cast(mask, tf.int32), axis=-1))


def trim_batch(features, lengths, sequence_keys, mask_key="input_mask"):
  """Cuts a batch's sequence features to its bucket length.

  Args:
    features: dict name -> Tensor; those in `sequence_keys` are
      [batch_size, seq_length, ...], padded to the records' fixed length.
    lengths: `bucket_lengths(...)` of that fixed length.
    sequence_keys: names of the features to cut (along axis 1).
    mask_key: the feature whose row sums are the inputs' lengths.

  Returns:
    A new dict: the sequence features [batch_size, L, ...] with L =
    `bucket_length(lengths, longest input)`; the others unchanged.
  """
  length = bucket_length(lengths, _longest(features[mask_key]))
  trimmed = dict(features)
  for key in sequence_keys:
    trimmed[key] = features[key][:, :length]
  return trimmed


def cut_batches(dataset, lengths, sequence_keys=BASE_KEYS,
                mask_key="input_mask"):
  """`dataset` (batched feature dicts) with each batch cut by `trim_batch`
  to its own bucket length; the batches and their order unchanged."""
  return dataset.map(lambda batch: trim_batch(batch, lengths, sequence_keys,
                                              mask_key))


def group_by_length(dataset, batch_size, lengths, drop_remainder,
                    mask_key="input_mask"):
  """Batches an unbatched dataset so that each batch's inputs share a
  bucket (inputs of similar length train together).

  Each bucket fills its own batch of `batch_size` as inputs arrive; the
  batches come out in the order they fill, so a shuffled input still gives
  shuffled batches.

  Args:
    dataset: `tf.data.Dataset` of feature dicts, one input each, with
      `mask_key` [seq_length].
    batch_size: int.
    lengths: `bucket_lengths(seq_length)`.
    drop_remainder: bool, whether each bucket drops its last partial batch.
    mask_key: the feature whose sum is an input's length.

  Returns:
    A `tf.data.Dataset` of batched feature dicts, still padded to the
    records' length (`trim_batch` cuts them).
  """

  def bucket(features):
    length = tf.reduce_sum(tf.cast(features[mask_key], tf.int32))
    return tf.cast(_bucket_index(lengths, length), tf.int64)

  def batch(_, window):
    return window.batch(batch_size, drop_remainder=drop_remainder)

  return dataset.group_by_window(bucket, batch, window_size=batch_size)


def flag_problems(bucket_by_length, use_tpu):
  """`--bucket_by_length`'s problem with the other flags, as a list of at
  most one message."""
  if bucket_by_length and use_tpu:
    return ["--bucket_by_length: batches of varying length need dynamic "
            "shapes, which TPUs do not take; leave it off with --use_tpu"]
  return []
