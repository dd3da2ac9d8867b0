"""Packed sequences: several whole examples in one row of `max_seq_length`.

`--pack_sequences` puts the inputs of several examples into one row
(first-fit decreasing, an example never split, at most
`--max_examples_per_row` of them), so a batch computes fewer padding
tokens on one static shape [batch_size, max_seq_length] (TPU and XLA take
it). In a row, `input_mask` holds each token's slot 1..K (0: padding) and
`position_ids` restart at 0 for each example; `modeling.BertModel` then
keeps every example's attention to itself (`block_diagonal`) and pools
each slot's `[CLS]` (`pool_positions`), so each example's outputs equal
its unpacked run's within float32 rounding (Krell et al. 2021, "Efficient
Sequence Packing without Cross-contamination"). Per slot [K]:
`cls_positions`, `is_real_example` (0: empty slot), `example_index` (the
example's place in the input, -1: empty) and the task's labels.

Pure Python on features already made, so every task can pack its own;
the model_fn (`encoder_inputs`) and the heads (`slots`) read the rows.
"""

import numpy as np
import tensorflow.compat.v1 as tf

from bert_tf import io as io_utils
from bert_tf.train import input_fn as input_utils
import modeling

__all__ = ["first_fit_decreasing", "pack", "empty_row", "add_slot_values",
           "write_rows", "serialize_row", "rows_input_fn",
           "encoder_inputs", "slots", "unslot", "unpack",
           "scale_batch_size", "training_input_fn", "input_features",
           "TRAINING_SPAN"]

# Fixed padding's training input shuffles records in a buffer of 100 (the
# reference's run_classifier.py), so an update draws on about this many
# consecutive examples of the file. Packed training keeps that span: rows
# are packed from runs of this many consecutive examples, in file order,
# and shuffled in a buffer of about this many examples.
TRAINING_SPAN = 100


def first_fit_decreasing(lengths, capacity, max_per_row):
  """Rows of item indices: longest first, each into the first row with room.

  Deterministic (ties keep the input order); O(n log n) with a max-tree of
  the rows' free space.

  Args:
    lengths: list of int, each item's length, 1..`capacity`.
    capacity: int, a row's length.
    max_per_row: int >= 1, items a row holds at most.

  Returns:
    List of rows, each a list of item indices in the order they were placed.

  Raises:
    ValueError: an item longer than `capacity` or shorter than 1.
  """
  for index, length in enumerate(lengths):
    if not 1 <= length <= capacity:
      raise ValueError("item %d has length %d, expected 1..%d" %
                       (index, length, capacity))
  size = 1
  while size < max(1, len(lengths)):
    size *= 2
  free = [-1] * (2 * size)  # Leaves: each row's free space (-1: no room).
  rows, used = [], []

  def set_free(row, value):
    node = row + size
    free[node] = value
    while node > 1:
      node //= 2
      free[node] = max(free[2 * node], free[2 * node + 1])

  for index in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
    length = lengths[index]
    if free[1] >= length:  # The leftmost row with room.
      node = 1
      while node < size:
        node = 2 * node if free[2 * node] >= length else 2 * node + 1
      row = node - size
    else:
      row = len(rows)
      rows.append([])
      used.append(0)
    rows[row].append(index)
    used[row] += length
    set_free(row, -1 if len(rows[row]) >= max_per_row
             else capacity - used[row])
  return rows


def pack(sequences, max_seq_length, max_per_row, window=None):
  """Packs examples' unpadded inputs into rows.

  Args:
    sequences: list of dicts, one per item, of per-token int lists of one
      length 1..`max_seq_length`: `input_ids` (`[CLS]` first),
      `segment_ids` and any others (token labels, weights).
    max_seq_length: int, the row length.
    max_per_row: int, slots per row (K).
    window: int, or None: None packs all items together (fewest rows, the
      longest first); an int packs each run of `window` consecutive items
      on its own (the last run takes the remainder: `window` to
      2 * `window` - 1 items) and orders the rows by their first item, so
      the rows keep the items' order (training: `TRAINING_SPAN`; 1-4%
      more rows on GLUE and CoNLL-2003).

  Returns:
    List of dicts of int lists: the items' keys, concatenated, `input_mask`
    (slot 1..K, 0: padding) and `position_ids` [max_seq_length], padded
    with 0; `cls_positions`, `example_index` (the item's index, -1: empty
    slot), `is_real_example` [K].
  """
  rows = []
  token_keys = list(sequences[0]) + ["input_mask", "position_ids"] if (
      sequences) else []
  lengths = [len(item["input_ids"]) for item in sequences]
  if window is None:
    groups = first_fit_decreasing(lengths, max_seq_length, max_per_row)
  else:
    starts = list(range(0, len(lengths), window))
    if len(starts) > 1 and len(lengths) - starts[-1] < window:
      starts.pop()  # No run of a few items alone in half-empty rows.
    groups = sorted((
        [start + m for m in members]
        for start, end in zip(starts, starts[1:] + [len(lengths)])
        for members in first_fit_decreasing(
            lengths[start:end], max_seq_length, max_per_row)), key=min)
  for members in groups:
    row = {name: [] for name in token_keys + ["cls_positions"]}
    for slot, index in enumerate(members, 1):
      length = len(sequences[index]["input_ids"])
      row["cls_positions"].append(len(row["input_ids"]))
      for name, values in sequences[index].items():
        row[name] += list(values)
      row["input_mask"] += [slot] * length
      row["position_ids"] += list(range(length))
    for name in token_keys:
      row[name] += [0] * (max_seq_length - len(row[name]))
    empty = max_per_row - len(members)
    row["cls_positions"] += [0] * empty
    row["example_index"] = list(members) + [-1] * empty
    row["is_real_example"] = [1] * len(members) + [0] * empty
    rows.append(row)
  return rows


def empty_row(max_seq_length, max_per_row):
  """A row of padding only (TPU's whole batches): `pack`'s keys."""
  row = {name: [0] * max_seq_length for name in (
      "input_ids", "segment_ids", "input_mask", "position_ids")}
  row.update(cls_positions=[0] * max_per_row,
             example_index=[-1] * max_per_row,
             is_real_example=[0] * max_per_row)
  return row


def add_slot_values(rows, name, values, padding):
  """Adds feature `name` to every row: each slot's item's value (a list),
  `padding` (a list) for an empty slot; concatenated over the K slots."""
  for row in rows:
    row[name] = [value for index in row["example_index"]
                 for value in (values[index] if index >= 0 else padding)]


def write_rows(path, rows):
  """Writes rows (dicts name -> list of ints or floats) to a TFRecord file
  of `tf.train.Example`s, which appears under its name only when complete."""
  with io_utils.atomic_path(path) as temp, tf.io.TFRecordWriter(temp) as out:
    for row in rows:
      out.write(serialize_row(row))


def serialize_row(row):
  """`tf.train.Example` bytes of a row (name -> list of ints, or of floats
  where any value is a float), the names sorted: the same bytes on every
  protobuf release."""
  features = {name: (io_utils.float_feature(values)
                     if any(isinstance(v, float) for v in values) else
                     io_utils.int64_feature(values))
              for name, values in row.items()}
  return io_utils.serialize_example(features, sorted(features))


def rows_input_fn(rows):
  """An `input_fn(params)` batching `rows` (dicts of ints or int lists, one
  set of keys) held in the graph as int32 constants (TPU hosts cannot call
  back into Python); the last batch may be partial."""

  def input_fn(params):
    tensors = {name: tf.constant([row[name] for row in rows], dtype=tf.int32)
               for name in rows[0]}
    return input_utils.without_autotune(
        tf.data.Dataset.from_tensor_slices(tensors).batch(
            params["batch_size"], drop_remainder=False))

  return input_fn


def input_features(seq_length, max_per_row, label_feature=None):
  """The packed records' `tf.io.FixedLenFeature`s, by name (labels: the
  head's `label_feature` per slot, [K] + its shape; None: no labels)."""
  features = {name: tf.io.FixedLenFeature([seq_length], tf.int64)
              for name in ("input_ids", "input_mask", "segment_ids",
                           "position_ids")}
  for name in ("cls_positions", "is_real_example", "example_index"):
    features[name] = tf.io.FixedLenFeature([max_per_row], tf.int64)
  if label_feature is not None:
    features["label_ids"] = tf.io.FixedLenFeature(
        [max_per_row] + list(label_feature.shape), label_feature.dtype)
  return features


def encoder_inputs(features):
  """`modeling.BertModel`'s packing arguments for a feature dict: none for
  unpacked inputs (no `position_ids`)."""
  if "position_ids" not in features:
    return {}
  inputs = {"position_ids": features["position_ids"], "block_diagonal": True}
  if "cls_positions" in features:
    inputs["pool_positions"] = features["cls_positions"]
  return inputs


def slots(tensor):
  """[B, K, ...] -> [B*K, ...]: one entry per slot (static sizes kept)."""
  shape = modeling.get_shape_list(tensor)
  return tf.reshape(tensor, [-1] + shape[2:])


def unslot(tensor, num_slots):
  """[B*K, ...] -> [B, K, ...], `slots`' inverse."""
  shape = modeling.get_shape_list(tensor)
  return tf.reshape(tensor, [-1, num_slots] + shape[1:])


def unpack(predictions, num_items, token_keys=()):
  """Per-item prediction dicts, in item order, from per-row ones.

  Args:
    predictions: iterable of dicts of numpy arrays [K, ...], one per row,
      with `example_index` [K] (-1: empty slot); with `token_keys`, also
      the row's `input_mask` [max_seq_length].
    num_items: int, the items packed.
    token_keys: keys of per-token outputs [max_seq_length, ...]: each
      item gets its own tokens', first, padded with zeros (its unpacked
      layout).

  Returns:
    List of `num_items` dicts (without `example_index` and `input_mask`).

  Raises:
    ValueError: an item without a prediction.
  """
  items = [None] * num_items
  per_row = tuple(token_keys) + ("example_index", "input_mask")
  for row in predictions:
    for slot, index in enumerate(np.reshape(row["example_index"], [-1])):
      if index >= 0:
        items[index] = {key: value[slot] for key, value in row.items()
                        if key not in per_row}
        for key in token_keys:
          own = row[key][row["input_mask"] == slot + 1]
          items[index][key] = np.zeros_like(row[key])
          items[index][key][:len(own)] = own
  missing = sum(item is None for item in items)
  if missing:
    raise ValueError("%d of %d packed examples got no prediction" %
                     (missing, num_items))
  return items


def scale_batch_size(input_fn, examples_per_row):
  """`input_fn` whose batches hold `params["batch_size"]` examples on
  average: max(1, round(batch_size / examples_per_row)) rows."""

  def scaled(params, config=None, input_context=None):
    rows = max(1, int(round(params["batch_size"] / examples_per_row)))
    return input_fn(dict(params, batch_size=rows), config, input_context)

  return scaled


def training_input_fn(path, schema, examples_per_row):
  """The training `input_fn` over packed rows that `pack(...,
  window=TRAINING_SPAN)` wrote to `path`: repeated, shuffled in a buffer
  of about `TRAINING_SPAN` examples, whole batches of about
  `params["batch_size"]` examples (`scale_batch_size`).

  Args:
    path: str, the TFRecord file.
    schema: dict name -> `tf.io.FixedLenFeature` (`input_features`).
    examples_per_row: float > 0, the file's examples over its rows.
  """
  return scale_batch_size(input_utils.tfrecord_input_fn_builder(
      [path], schema, is_training=True, drop_remainder=True,
      shuffle_buffer=max(1, int(round(TRAINING_SPAN / examples_per_row)))),
                          examples_per_row)
