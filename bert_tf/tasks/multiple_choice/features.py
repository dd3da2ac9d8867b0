"""Multiple-choice features: one `[CLS] A [SEP] B [SEP]` row per choice.

Each question becomes `num_choices` rows of the classifier's pair layout
(`bert_tf/tasks/features.py`): sentence A the context, sentence B the start
of the next sentence and the ending, truncated longest-first to
`max_seq_length - 3` tokens as the reference truncates pairs. A record
holds the rows of one question:

  input_ids, input_mask, segment_ids   int64 [num_choices * seq_length]
  label_ids                            int64 [1] (0 where unlabelled)
  is_real_example                      int64 [1] (0 for TPU padding)

and the `input_fn` gives them back as int32 [batch_size, num_choices,
seq_length] (`label_ids`, `is_real_example`: [batch_size]).
"""

import collections
import dataclasses

from absl import logging
import tensorflow.compat.v1 as tf

from bert_tf import io as io_utils
from bert_tf.tasks import features as feature_utils
from bert_tf.train import input_fn as input_utils
import tokenization

__all__ = ["ChoiceFeatures", "convert_example", "padding_features",
           "write_records", "file_based_input_fn_builder"]

_WIRE_ORDER = ("input_ids", "input_mask", "segment_ids", "label_ids",
               "is_real_example")


@dataclasses.dataclass(eq=False)
class ChoiceFeatures:
  """The model inputs of one question.

  Attributes:
    input_ids: list of `num_choices` lists of `max_seq_length` ints.
    input_mask: the same shape; 1 for real tokens, 0 for padding.
    segment_ids: the same shape; 0 for `[CLS] A [SEP]`, 1 for `B [SEP]`.
    label_id: int, the right ending's index (0 where unlabelled).
    is_real_example: bool, False for TPU padding.
  """

  input_ids: list
  input_mask: list
  segment_ids: list
  label_id: int = 0
  is_real_example: bool = True


def convert_example(example, max_seq_length, tokenizer, log=False):
  """The features of one `MultipleChoiceExample`.

  Args:
    example: `data.MultipleChoiceExample`.
    max_seq_length: int, the padded length of each choice's row.
    tokenizer: `tokenization.FullTokenizer`.
    log: bool, log the rows (the first examples of a file, as the
      reference logs its first five).

  Returns:
    `ChoiceFeatures`.

  Raises:
    ValueError: when `max_seq_length` cannot hold a pair's special tokens.
  """
  context = tokenizer.tokenize(example.context)
  rows = []
  for text in example.choice_texts():
    tokens, segment_ids = feature_utils.pack_tokens(
        context, tokenizer.tokenize(text), max_seq_length)
    rows.append((tokens,) + feature_utils.pad_input(
        tokenizer.convert_tokens_to_ids(tokens), segment_ids,
        max_seq_length))
  if log:
    logging.info("*** Example ***")
    logging.info("guid: %s, label: %s", example.guid, example.label)
    for tokens, input_ids, _, _ in rows:
      logging.info("tokens: %s",
                   " ".join(tokenization.printable_text(t) for t in tokens))
      logging.info("input_ids: %s", " ".join(str(x) for x in input_ids))
  return ChoiceFeatures(
      input_ids=[row[1] for row in rows], input_mask=[row[2] for row in rows],
      segment_ids=[row[3] for row in rows],
      label_id=0 if example.label is None else example.label)


def padding_features(num_choices, max_seq_length):
  """All-zero features with `is_real_example=False` (TPU padding)."""
  zeros = [[0] * max_seq_length for _ in range(num_choices)]
  return ChoiceFeatures(input_ids=zeros, input_mask=zeros, segment_ids=zeros,
                        label_id=0, is_real_example=False)


def _flat(rows):
  """[num_choices][seq_length] -> [num_choices * seq_length], row by row."""
  return [value for row in rows for value in row]


def _record(feature):
  """The `tf.train.Feature`s of a `ChoiceFeatures`, by name."""
  flat = _flat
  record = collections.OrderedDict()
  record["input_ids"] = io_utils.int64_feature(flat(feature.input_ids))
  record["input_mask"] = io_utils.int64_feature(flat(feature.input_mask))
  record["segment_ids"] = io_utils.int64_feature(flat(feature.segment_ids))
  record["label_ids"] = io_utils.int64_feature([feature.label_id])
  record["is_real_example"] = io_utils.int64_feature(
      [int(feature.is_real_example)])
  return record


def write_records(examples, max_seq_length, tokenizer, output_file,
                  batch_multiple=None):
  """Writes the questions' features to a TFRecord file, atomically.

  Args:
    examples: list of `data.MultipleChoiceExample`, each with the same
      number of endings.
    max_seq_length: int.
    tokenizer: `tokenization.FullTokenizer`.
    output_file: str, the TFRecord file.
    batch_multiple: int or None; padding records are added until the count
      is a multiple of it (TPU evaluation and prediction).

  Returns:
    int, the number of records written (padding included).
  """
  num_choices = len(examples[0].endings) if examples else 0
  written = 0
  with io_utils.atomic_path(output_file) as temp, \
      tf.io.TFRecordWriter(temp) as writer:
    for index, example in enumerate(examples):
      if index % 10000 == 0:
        logging.info("Writing example %d of %d", index, len(examples))
      feature = convert_example(example, max_seq_length, tokenizer,
                                log=index < 2)
      writer.write(io_utils.serialize_example(_record(feature), _WIRE_ORDER))
      written += 1
    while batch_multiple and written % batch_multiple:
      writer.write(io_utils.serialize_example(
          _record(padding_features(num_choices, max_seq_length)),
          _WIRE_ORDER))
      written += 1
  return written


def file_based_input_fn_builder(input_file, num_choices, seq_length,
                                is_training, drop_remainder):
  """An `input_fn` over a file `write_records` wrote.

  Args:
    input_file: str, the TFRecord file.
    num_choices: int, the endings per question it was written with.
    seq_length: int, its `max_seq_length`.
    is_training: bool; training repeats and shuffles.
    drop_remainder: bool, drop the last partial batch (TPU, training).

  Returns:
    `input_fn(params, ...)`: batches of int32 `input_ids`, `input_mask`,
    `segment_ids` [batch_size, num_choices, seq_length], `label_ids` and
    `is_real_example` [batch_size]; batch size `params["batch_size"]`.
  """
  rows = [num_choices, seq_length]
  name_to_features = {
      "input_ids": tf.io.FixedLenFeature(rows, tf.int64),
      "input_mask": tf.io.FixedLenFeature(rows, tf.int64),
      "segment_ids": tf.io.FixedLenFeature(rows, tf.int64),
      "label_ids": tf.io.FixedLenFeature([], tf.int64),
      "is_real_example": tf.io.FixedLenFeature([], tf.int64),
  }
  return input_utils.tfrecord_input_fn_builder(
      [input_file], name_to_features, is_training=is_training,
      drop_remainder=drop_remainder)
