"""Length-bucketed batches (`--bucket_by_length`): less padding computed.

A batch is cut in the input pipeline to its longest input rounded up to a
few lengths (`bucket_lengths`); records keep the fixed length. Padding is
masked out of attention (exp(-10000) is 0 in float32) and the other ops are
per token, so real tokens get the same values within float32 rounding.
Training groups similar lengths (`group_by_length`); evaluation and
prediction keep the input order. Refused with `--use_tpu` (static shapes).
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
  """Sorted tuple of lengths a batch may be cut to: 16, 24, 32, 48, 64, 96,
  ... below `max_seq_length`, then `max_seq_length` (each step at most
  1.5x the one before)."""
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
  """A new dict with the `sequence_keys` features ([batch_size,
  seq_length, ...]) cut along axis 1 to the bucket of the longest input
  (row sums of `mask_key`); others unchanged."""
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
  bucket; batches come out in the order they fill (shuffled input stays
  shuffled), still padded (`trim_batch` cuts them); `drop_remainder` per
  bucket."""

  def bucket(features):
    length = tf.reduce_sum(tf.cast(features[mask_key], tf.int32))
    return tf.cast(_bucket_index(lengths, length), tf.int64)

  def batch(_, window):
    return window.batch(batch_size, drop_remainder=drop_remainder)

  return dataset.group_by_window(bucket, batch, window_size=batch_size)


def flag_problems(bucket_by_length, use_tpu, pack_sequences=False):
  """`--bucket_by_length`'s problem with the other flags, as a list of at
  most one message."""
  if bucket_by_length and use_tpu:
    return ["--bucket_by_length: batches of varying length need dynamic "
            "shapes, which TPUs do not take; leave it off with --use_tpu"]
  if bucket_by_length and pack_sequences:
    return ["--pack_sequences: rows are full already; leave "
            "--bucket_by_length off with it"]
  return []
