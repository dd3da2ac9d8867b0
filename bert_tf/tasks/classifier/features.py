"""Classifier features: `InputFeatures`, their TFRecords and input_fns.

The reference release's `run_classifier.py` conversion: `[CLS] a [SEP] b [SEP]`
inputs (segment 0 then 1, padded with 0; a pair truncated longest-first), the
TFRecord keys `input_ids`, `input_mask`, `segment_ids`, `label_ids`,
`is_real_example` in that order, and the file and in-memory `input_fn`s.
`run_classifier.py` imports every public name from here.
"""

import collections
import dataclasses
from typing import Any

from absl import logging
import tensorflow.compat.v1 as tf

from bert_tf import io as io_utils
from bert_tf.tasks import features as feature_utils
from bert_tf.tasks.classifier.data import PaddingInputExample
from bert_tf.train import input_fn as input_utils
from bert_tf.train import lengths as lengths_lib
import tokenization

__all__ = [
    "InputFeatures",
    "convert_single_example",
    "convert_examples_to_features",
    "file_based_convert_examples_to_features",
    "file_based_input_fn_builder",
    "input_fn_builder",
    "pad_to_batch_multiple",
]


@dataclasses.dataclass(eq=False)
class InputFeatures:
  """The model inputs of one example (the reference's `InputFeatures`).

  Attributes:
    input_ids: list of `max_seq_length` ints, WordPiece ids padded with 0.
    input_mask: list of `max_seq_length` ints, 1 for real tokens, 0 for
      padding.
    segment_ids: list of `max_seq_length` ints, 0 for `[CLS] a [SEP]`, 1 for
      `b [SEP]`.
    label_id: int, the label's index in the task's label list; a float for
      a regression task.
    is_real_example: bool, False for a `PaddingInputExample`'s features.
  """

  input_ids: list
  input_mask: list
  segment_ids: list
  label_id: Any
  is_real_example: bool = True


# ----------------------------------------------------------------------------
# Feature conversion.
# ----------------------------------------------------------------------------


def _label_id(example, label_list):
  """The example's label as an int index, or a float for regression."""
  if label_list is None:
    return float(example.label)
  label_map = {label: i for i, label in enumerate(label_list)}
  if example.label not in label_map:
    raise ValueError("example %s: label %r is not one of %s" %
                     (example.guid, example.label, label_list))
  return label_map[example.label]


def convert_single_example(ex_index, example, label_list, max_seq_length,
                           tokenizer):
  """Converts a single `InputExample` into a single `InputFeatures`.

  Layout `[CLS] a [SEP] b [SEP]`, segment ids 0 for `[CLS] a [SEP]` and 1 for
  `b [SEP]`, padded with 0 to `max_seq_length`. A pair longer than
  `max_seq_length - 3` tokens is truncated longest-first; a single text is cut
  to `max_seq_length - 2`. A `PaddingInputExample` gives all-zero features with
  label id 0 and `is_real_example=False`.

  Args:
    ex_index: int, the example's position (the first 5 are logged).
    example: `InputExample` or `PaddingInputExample`.
    label_list: list of label strings; None for a regression task (the label
      id is then `float(example.label)`).
    max_seq_length: int, the padded length.
    tokenizer: `tokenization.FullTokenizer`.

  Returns:
    An `InputFeatures`.

  Raises:
    ValueError: if the label is not in `label_list`.
  """
  if isinstance(example, PaddingInputExample):
    return InputFeatures(
        input_ids=[0] * max_seq_length,
        input_mask=[0] * max_seq_length,
        segment_ids=[0] * max_seq_length,
        label_id=0.0 if label_list is None else 0,
        is_real_example=False)

  tokens_a = tokenizer.tokenize(example.text_a)
  tokens_b = None
  if example.text_b is not None:
    tokens_b = tokenizer.tokenize(example.text_b)
  tokens, segment_ids = feature_utils.pack_tokens(tokens_a, tokens_b,
                                                  max_seq_length)
  input_ids, input_mask, segment_ids = feature_utils.pad_input(
      tokenizer.convert_tokens_to_ids(tokens), segment_ids, max_seq_length)

  label_id = _label_id(example, label_list)
  if ex_index < 5:
    _log_example(example, tokens, input_ids, input_mask, segment_ids,
                 label_id)
  return InputFeatures(input_ids=input_ids, input_mask=input_mask,
                       segment_ids=segment_ids, label_id=label_id,
                       is_real_example=True)


def _log_example(example, tokens, input_ids, input_mask, segment_ids,
                 label_id):
  """Logs one converted example, as the reference does for the first five."""
  logging.info("*** Example ***")
  logging.info("guid: %s", example.guid)
  logging.info("tokens: %s",
               " ".join(tokenization.printable_text(t) for t in tokens))
  logging.info("input_ids: %s", " ".join(str(x) for x in input_ids))
  logging.info("input_mask: %s", " ".join(str(x) for x in input_mask))
  logging.info("segment_ids: %s", " ".join(str(x) for x in segment_ids))
  logging.info("label: %s (id = %s)", example.label, label_id)


def convert_examples_to_features(examples, label_list, max_seq_length,
                                 tokenizer):
  """Converts a list of `InputExample`s into a list of `InputFeatures`."""
  features = []
  for ex_index, example in enumerate(examples):
    if ex_index % 10000 == 0:
      logging.info("Writing example %d of %d", ex_index, len(examples))
    features.append(convert_single_example(ex_index, example, label_list,
                                           max_seq_length, tokenizer))
  return features


# The order in which the reference's records hold the features (protobuf's
# map order for the insertion order below); see io_utils.serialize_example.
_WIRE_ORDER = ("is_real_example", "input_mask", "input_ids", "segment_ids",
               "label_ids")


def _feature_record(feature):
  """The features of an `InputFeatures`, by name (`tf.train.Feature`s)."""
  if isinstance(feature.label_id, float):
    label_feature = io_utils.float_feature([feature.label_id])
  else:
    label_feature = io_utils.int64_feature([feature.label_id])
  # The reference's insertion order (the wire order follows from it).
  record = collections.OrderedDict()
  record["input_ids"] = io_utils.int64_feature(feature.input_ids)
  record["input_mask"] = io_utils.int64_feature(feature.input_mask)
  record["segment_ids"] = io_utils.int64_feature(feature.segment_ids)
  record["label_ids"] = label_feature
  record["is_real_example"] = io_utils.int64_feature(
      [int(feature.is_real_example)])
  return record


def file_based_convert_examples_to_features(examples, label_list,
                                            max_seq_length, tokenizer,
                                            output_file):
  """Converts `examples` to features and writes them to a TFRecord file.

  Keys: `input_ids`, `input_mask`, `segment_ids` (int64, `max_seq_length`),
  `label_ids` (int64, 1; float for regression) and `is_real_example` (int64,
  1), in that order. The file appears under its name only when complete.
  """
  with io_utils.atomic_path(output_file) as temp, \
      tf.io.TFRecordWriter(temp) as writer:
    for ex_index, example in enumerate(examples):
      if ex_index % 10000 == 0:
        logging.info("Writing example %d of %d", ex_index, len(examples))
      feature = convert_single_example(ex_index, example, label_list,
                                       max_seq_length, tokenizer)
      writer.write(io_utils.serialize_example(_feature_record(feature),
                                              _WIRE_ORDER))


def file_based_input_fn_builder(input_file, seq_length, is_training,
                                drop_remainder, label_feature=None,
                                bucket_by_length=False):
  """Creates an `input_fn` over a file written by
  `file_based_convert_examples_to_features`.

  Args:
    input_file: path of the TFRecord file.
    seq_length: int, the `max_seq_length` it was written with.
    is_training: bool; training repeats and shuffles.
    drop_remainder: bool, whether to drop the last partial batch (TPU only).
    label_feature: `tf.io.FixedLenFeature` of `label_ids` (a head's
      `label_feature`: a float for regression, a 0/1 vector for
      multi-label), or None: the reference's int64 label id.
    bucket_by_length: bool; True cuts each batch to its longest input
      rounded up to `lengths.bucket_lengths(seq_length)` (training groups
      inputs by length); False pads to `seq_length`, as the reference.

  Returns:
    `input_fn(params)` for the Estimator; the batch size is
    `params["batch_size"]`.
  """
  name_to_features = {
      "input_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
      "input_mask": tf.io.FixedLenFeature([seq_length], tf.int64),
      "segment_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
      "label_ids": label_feature or tf.io.FixedLenFeature([], tf.int64),
      "is_real_example": tf.io.FixedLenFeature([], tf.int64),
  }
  return input_utils.tfrecord_input_fn_builder(
      [input_file], name_to_features, is_training=is_training,
      drop_remainder=drop_remainder,
      length_buckets=(lengths_lib.bucket_lengths(seq_length)
                      if bucket_by_length else None))


def input_fn_builder(features, seq_length, is_training, drop_remainder):
  """Creates an `input_fn` over `InputFeatures` held in memory.

  The reference's in-memory input, for notebooks and small data sets; it
  embeds every feature in the graph as a constant, so use
  `file_based_input_fn_builder` for large ones.

  Args:
    features: list of `InputFeatures`.
    seq_length: int, their `max_seq_length`.
    is_training: bool; training repeats and shuffles (buffer 100).
    drop_remainder: bool, whether to drop the last partial batch (TPU).

  Returns:
    `input_fn(params)` for the Estimator, batch size `params["batch_size"]`;
    the batches hold int32 `input_ids`, `input_mask`, `segment_ids`
    ([batch_size, seq_length]), `label_ids` ([batch_size]; float32 when the
    labels are floats, for regression) and `is_real_example`.
  """
  num_examples = len(features)
  regression = bool(features) and isinstance(features[0].label_id, float)

  def column(name, dtype=tf.int32, width=seq_length):
    values = [getattr(f, name) for f in features]
    shape = [num_examples, width] if width else [num_examples]
    return tf.constant(values, shape=shape, dtype=dtype)

  def input_fn(params):
    d = tf.data.Dataset.from_tensor_slices({
        "input_ids": column("input_ids"),
        "input_mask": column("input_mask"),
        "segment_ids": column("segment_ids"),
        "label_ids": column("label_id",
                            tf.float32 if regression else tf.int32, None),
        "is_real_example": column("is_real_example", tf.int32, None),
    })
    if is_training:
      d = d.repeat().shuffle(buffer_size=100)
    return input_utils.without_autotune(
        d.batch(params["batch_size"], drop_remainder=drop_remainder))

  return input_fn


def pad_to_batch_multiple(examples, batch_size):
  """Appends `PaddingInputExample`s until `len(examples)` is a multiple of
  `batch_size` (what TPU evaluation and prediction need).

  Returns:
    A new list; `examples` itself is unchanged.
  """
  padded = list(examples)
  while len(padded) % batch_size != 0:
    padded.append(PaddingInputExample())
  return padded
