"""The inputs of pre-training: the records create_pretraining_data.py wrote.

The reference release's `input_fn_builder` over them, and the check of
their lengths against the flags (`check_record_lengths`), one line.
"""

from absl import logging
import tensorflow.compat.v1 as tf

from bert_tf.train import input_fn as input_utils

__all__ = ["input_fn_builder", "check_record_lengths"]


def _name_to_features(max_seq_length, max_predictions_per_seq):
  """The record layout written by create_pretraining_data.py."""
  return {
      "input_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
      "input_mask": tf.io.FixedLenFeature([max_seq_length], tf.int64),
      "segment_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
      "masked_lm_positions":
          tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
      "masked_lm_ids":
          tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
      "masked_lm_weights":
          tf.io.FixedLenFeature([max_predictions_per_seq], tf.float32),
      "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
  }


def input_fn_builder(input_files, max_seq_length, max_predictions_per_seq,
                     is_training, num_cpu_threads=4, use_tpu=False):
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
  """
  fixed_batches = is_training or use_tpu
  base_input_fn = input_utils.tfrecord_input_fn_builder(
      input_files, _name_to_features(max_seq_length, max_predictions_per_seq),
      is_training=is_training, drop_remainder=fixed_batches,
      num_cpu_threads=num_cpu_threads)

  def input_fn(params, config=None, input_context=None):
    dataset = base_input_fn(params, config, input_context)
    if not is_training and use_tpu:
      dataset = dataset.repeat()
    return dataset

  return input_fn


def check_record_lengths(input_files, max_seq_length, max_predictions_per_seq):
  """Checks the first record of every file against the expected lengths.

  Cheap (one record per file) and catches data made with another
  --max_seq_length or --max_predictions_per_seq before training starts.

  Raises:
    ValueError: naming the file, the feature, its length and the expected
      length; or when a file is not a TFRecord of Examples.
  """
  expected = {
      "input_ids": (max_seq_length, "max_seq_length"),
      "input_mask": (max_seq_length, "max_seq_length"),
      "segment_ids": (max_seq_length, "max_seq_length"),
      "masked_lm_positions": (max_predictions_per_seq,
                              "max_predictions_per_seq"),
      "masked_lm_ids": (max_predictions_per_seq, "max_predictions_per_seq"),
      "masked_lm_weights": (max_predictions_per_seq,
                            "max_predictions_per_seq"),
      "next_sentence_labels": (1, None),
  }
  empty = []
  for path in input_files:
    example = _first_example(path)
    if example is None:
      logging.warning("Input file %s holds no records", path)
      empty.append(path)
      continue
    for name, (length, flag_name) in expected.items():
      if name not in example.features.feature:
        raise ValueError("%s: record 0 has no feature %r; expected the output "
                         "of create_pretraining_data.py" % (path, name))
      feature = example.features.feature[name]
      values = feature.float_list.value or feature.int64_list.value
      if len(values) != length:
        where = ("--%s=%d" % (flag_name, length) if flag_name
                 else "%d" % length)
        raise ValueError(
            "%s: record 0 has %s of length %d, but %s; create the data with "
            "the same value or change the flag" %
            (path, name, len(values), where))
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
