"""The inputs of pre-training: the records create_pretraining_data.py wrote.

The reference release's `input_fn_builder` over them, and the check of
their lengths against the flags (`check_record_lengths`), one line. With a
`masking.Masker` the records are unmasked ones (`--dynamic_masking`),
masked as they are read; without next-sentence prediction they have no
`next_sentence_labels`. Records of `create_pretraining_data.py
--pack_sequences` (several instances a row, `records.PackedSerializer`)
are found by their features (`packed_rows`): the data says how it was
made, so no flag can disagree with it.
"""

import collections
import itertools

from absl import logging
import tensorflow.compat.v1 as tf

from bert_tf.train import input_fn as input_utils

__all__ = ["input_fn_builder", "check_record_lengths", "Packing",
           "packed_rows"]

# Rows `packed_rows` reads to count instances a row.
_ROWS_SAMPLED = 1000


class Packing(collections.namedtuple(
    "Packing", ["max_per_row", "instances_per_row"])):
  """Packed records: slots a row (int, K) and the mean of real instances
  a row (float) over the first rows."""


def _lengths(max_seq_length, max_predictions_per_seq, dynamic_masking=False,
             next_sentence=True, word_marks=False, max_per_row=None):
  """The records' features: name -> (length, the flag giving it or None);
  `max_per_row`: packed rows of that many slots (None: unpacked)."""
  seq = (max_seq_length, "max_seq_length")
  lengths = {"input_ids": seq, "input_mask": seq, "segment_ids": seq}
  if max_per_row:
    lengths["position_ids"] = seq
    lengths.update((name, (max_per_row, None)) for name in (
        "cls_positions", "is_real_example", "example_index"))
  if not dynamic_masking:
    lengths.update((name, (max_predictions_per_seq, "max_predictions_per_seq"))
                   for name in ("masked_lm_positions", "masked_lm_ids",
                                "masked_lm_weights"))
  elif word_marks:
    lengths["word_continues"] = seq
  if next_sentence:
    lengths["next_sentence_labels"] = (max_per_row or 1, None)
  return lengths


def _name_to_features(max_seq_length, max_predictions_per_seq, **layout):
  """The record layout written by create_pretraining_data.py (`layout`:
  `_lengths`' keywords)."""
  return {
      name: tf.io.FixedLenFeature(
          [length], tf.float32 if name == "masked_lm_weights" else tf.int64)
      for name, (length, _) in _lengths(
          max_seq_length, max_predictions_per_seq, **layout).items()}


def input_fn_builder(input_files, max_seq_length, max_predictions_per_seq,
                     is_training, num_cpu_threads=4, use_tpu=False,
                     masker=None, next_sentence=True, max_per_row=None):
  """Returns an `input_fn(params)` over pre-training TFRecords.

  Training reads the files in parallel, shuffled, repeated forever, in
  batches of a fixed size. Evaluation reads them in order: on TPU repeated
  in fixed-size batches as in the reference (a TPU evaluation runs a fixed
  number of steps); on CPU/GPU once, keeping the last partial batch, so each
  example counts once (up to --max_eval_steps batches). int64 features become
  int32.

  Args:
    input_files: list of str, TFRecord paths.
    max_seq_length: int, length of `input_ids`, `input_mask`, `segment_ids`.
    max_predictions_per_seq: int, length of the `masked_lm_*` features.
    is_training: bool.
    num_cpu_threads: int, parallel readers and parsers when training.
    use_tpu: bool, whether the model runs on TPU (an addition to the
      reference's signature; only evaluation depends on it).
    masker: (optional) a `masking.Masker`: the records are unmasked
      (`--dynamic_masking`) and masked as read.
    next_sentence: bool, whether the records have `next_sentence_labels`.
    max_per_row: (optional) int, the records are packed rows of this many
      slots (`packed_rows`); batches count rows.
  """
  fixed_batches = is_training or use_tpu
  name_to_features = _name_to_features(
      max_seq_length, max_predictions_per_seq,
      dynamic_masking=masker is not None, next_sentence=next_sentence,
      word_marks=getattr(masker, "word_marks", False),
      max_per_row=max_per_row)
  base_input_fn = input_utils.tfrecord_input_fn_builder(
      input_files, name_to_features, is_training=is_training,
      drop_remainder=fixed_batches, num_cpu_threads=num_cpu_threads,
      transform=masker and masker.mask_features)

  def input_fn(params, config=None, input_context=None):
    dataset = base_input_fn(params, config, input_context)
    if not is_training and use_tpu:
      dataset = dataset.repeat()
    return dataset

  return input_fn


def check_record_lengths(input_files, max_seq_length, max_predictions_per_seq,
                         **layout):
  """Checks the first record of every file against the expected lengths.

  Cheap (one record per file) and catches data made with another
  --max_seq_length or --max_predictions_per_seq before training starts.
  The first file's first record says whether the records are packed, and
  K; every file must agree. `layout`: `dynamic_masking`, `next_sentence`,
  `word_marks` (bools), the records' kind.

  Raises:
    ValueError: naming the file, the feature, its length and the expected
      length; when a file is not a TFRecord of Examples; when records
      are masked under `dynamic_masking`; or when packed and unpacked
      files are mixed.
  """
  expected, first = None, None
  empty = []
  for path in input_files:
    example = _first_example(path)
    if example is None:
      logging.warning("Input file %s holds no records", path)
      empty.append(path)
      continue
    feature_map = example.features.feature
    packed = "position_ids" in feature_map
    if expected is None:
      first = (path, packed)
      expected = _lengths(
          max_seq_length, max_predictions_per_seq, max_per_row=packed and len(
              feature_map["cls_positions"].int64_list.value), **layout)
    elif packed != first[1]:
      packed_path, unpacked_path = (path, first[0]) if packed else (
          first[0], path)
      raise ValueError(
          "%s holds packed records and %s unpacked ones; expected every "
          "--input_file made with the same create_pretraining_data.py "
          "--pack_sequences" % (packed_path, unpacked_path))
    for name, (length, flag_name) in expected.items():
      if name not in example.features.feature:
        raise ValueError(
            "%s: record 0 has no feature %r; expected the output of "
            "create_pretraining_data.py with the same --dynamic_masking, "
            "--next_sentence and --pack_sequences" % (path, name))
      feature = example.features.feature[name]
      values = feature.float_list.value or feature.int64_list.value
      if len(values) != length:
        where = ("--%s=%d" % (flag_name, length) if flag_name
                 else "%d" % length)
        raise ValueError(
            "%s: record 0 has %s of length %d, but %s; create the data with "
            "the same value or change the flag" %
            (path, name, len(values), where))
    if (layout.get("dynamic_masking") and
        "masked_lm_positions" in example.features.feature):
      # Masking masked records again would train on doubly masked input.
      raise ValueError(
          "%s: record 0 is already masked; --dynamic_masking expects the "
          "output of create_pretraining_data.py --dynamic_masking=True "
          "(or drop the flag)" % path)
  if len(empty) == len(input_files):
    # Training would loop forever over an empty dataset.
    raise ValueError("--input_file: %s hold%s no records; expected the "
                     "output of create_pretraining_data.py" %
                     (", ".join(empty), "s" if len(empty) == 1 else ""))


def _first_example(path):
  """The first `tf.train.Example` of a TFRecord file, or None when empty."""
  try:
    for record in tf.io.tf_record_iterator(path):
      return tf.train.Example.FromString(record)
  except (tf.errors.DataLossError, ValueError) as e:
    raise ValueError("%s is not a TFRecord file of tf.train.Examples (%s)" %
                     (path, " ".join(str(e).split()))) from None
  return None


def packed_rows(input_files):
  """The `Packing` of packed records (`--pack_sequences`), else None.

  Reads the first file that holds records: its first record says whether
  they are packed (a `position_ids` feature) and K (`cls_positions`'
  length); its first rows (at most 1,000) give the mean of instances a row
  (`is_real_example`), which sizes the batches (`packing.scale_batch_size`).
  """
  for path in input_files:
    examples = [tf.train.Example.FromString(record) for record in
                itertools.islice(tf.io.tf_record_iterator(path),
                                 _ROWS_SAMPLED)]
    if not examples:
      continue
    features = examples[0].features.feature
    if "position_ids" not in features:
      return None
    real = [sum(e.features.feature["is_real_example"].int64_list.value)
            for e in examples]
    return Packing(len(features["cls_positions"].int64_list.value),
                   sum(real) / len(real))
  return None
