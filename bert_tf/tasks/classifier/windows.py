"""Classifier features beyond the reference: label sets and long documents.

Used by `run_classifier.py` only with `--multi_label=True` or
`--doc_stride=K` (without them the reference's conversion in `features` is
used, byte for byte). With `doc_stride`, a `text_a` longer than one input is
cut into overlapping windows as `run_squad.py` cuts a paragraph
(`bert_tf.tasks.squad.data.doc_spans`): each window is `[CLS] window [SEP]`
(`[CLS] window [SEP] b [SEP]` for a pair, `text_b` whole in every window)
and carries its document's label; at prediction time the windows'
probabilities are combined into one line per document (`aggregate`).
"""

import collections

from absl import logging
import numpy as np
import tensorflow.compat.v1 as tf

from bert_tf import io as io_utils
from bert_tf.tasks import features as feature_utils
from bert_tf.tasks.classifier import data
from bert_tf.tasks.classifier.data import PaddingInputExample
from bert_tf.tasks.squad import data as squad_data

__all__ = ["AGGREGATIONS", "encode_windows", "write_features", "aggregate"]

# --window_aggregation's values, listed where the flag can read them without
# TensorFlow.
AGGREGATIONS = data.AGGREGATIONS


def encode_windows(example, tokenizer, max_seq_length, doc_stride=None):
  """The padded inputs of one example: one, or one per window.

  Args:
    example: an `InputExample`.
    tokenizer: `tokenization.FullTokenizer`.
    max_seq_length: int, the input length.
    doc_stride: int or None. None: one input, truncated as the reference
      does (`feature_utils.pack_tokens`). Else windows of `text_a` whose
      starts are `doc_stride` tokens apart, until one reaches its end.

  Returns:
    List of `(input_ids, input_mask, segment_ids)`, each a list of
    `max_seq_length` ints.

  Raises:
    ValueError: `doc_stride` < 1, or a `text_b` that leaves no room for
      `text_a`.
  """
  tokens_a = tokenizer.tokenize(example.text_a)
  tokens_b = (None if example.text_b is None else
              tokenizer.tokenize(example.text_b))
  if doc_stride is None:
    packed = [feature_utils.pack_tokens(tokens_a, tokens_b, max_seq_length)]
  else:
    if doc_stride < 1:
      raise ValueError("--doc_stride=%d: expected at least 1 token" %
                       doc_stride)
    budget = max_seq_length - 2 - (0 if tokens_b is None else
                                   len(tokens_b) + 1)
    if budget < 1:
      raise ValueError(
          "example %s: text_b has %d tokens, which leaves no room for text_a "
          "in max_seq_length=%d (with doc_stride, text_b is whole in every "
          "window)" % (example.guid, len(tokens_b), max_seq_length))
    spans = squad_data.doc_spans(len(tokens_a), budget, doc_stride) or [
        squad_data.DocSpan(0, 0)]
    packed = []
    for span in spans:
      window = tokens_a[span.start:span.start + span.length]
      packed.append(feature_utils.pack_tokens(window, tokens_b,
                                              max_seq_length))
  return [feature_utils.pad_input(tokenizer.convert_tokens_to_ids(tokens),
                                  segment_ids, max_seq_length)
          for tokens, segment_ids in packed]


_WIRE_ORDER = ("is_real_example", "input_mask", "input_ids", "segment_ids",
               "label_ids")


def _record(input_ids, input_mask, segment_ids, labels, is_real):
  record = collections.OrderedDict()
  record["input_ids"] = io_utils.int64_feature(input_ids)
  record["input_mask"] = io_utils.int64_feature(input_mask)
  record["segment_ids"] = io_utils.int64_feature(segment_ids)
  record["label_ids"] = (io_utils.float_feature(labels)
                         if labels and isinstance(labels[0], float) else
                         io_utils.int64_feature(labels))
  record["is_real_example"] = io_utils.int64_feature([int(is_real)])
  # The reference's records' order on every stack (io_utils.serialize_example).
  return io_utils.serialize_example(record, _WIRE_ORDER)


def write_features(examples, head, max_seq_length, tokenizer, output_file,
                   doc_stride=None, batch_multiple=None):
  """Writes the examples' inputs (all windows) to a TFRecord file.

  Keys as the reference's records; `label_ids` is the head's (a float for
  regression, a 0/1 vector for multi-label). The file appears under its
  name only when complete.

  Args:
    examples: list of `InputExample` (a `PaddingInputExample` is skipped:
      padding is added here, see `batch_multiple`).
    head: the classifier head (`model.SingleLabelHead` or a subclass): its
      `label_ids(example)` and `padding_label`.
    max_seq_length: int.
    tokenizer: `tokenization.FullTokenizer`.
    output_file: str, the TFRecord path.
    doc_stride: int or None, see `encode_windows`.
    batch_multiple: int or None: pad with all-zero records
      (`is_real_example` 0) to a multiple of it (TPU).

  Returns:
    List of int, for each record the index of its example in `examples`
    (-1 for padding), in file order.
  """
  owners = []
  with io_utils.atomic_path(output_file) as temp, \
      tf.io.TFRecordWriter(temp) as writer:
    for index, example in enumerate(examples):
      if isinstance(example, PaddingInputExample):
        continue
      labels = head.label_ids(example)
      windows = encode_windows(example, tokenizer, max_seq_length, doc_stride)
      for input_ids, input_mask, segment_ids in windows:
        writer.write(_record(input_ids, input_mask, segment_ids, labels,
                             True))
        owners.append(index)
    while batch_multiple and len(owners) % batch_multiple:
      zeros = [0] * max_seq_length
      writer.write(_record(zeros, zeros, zeros,
                           list(head.padding_label), False))
      owners.append(-1)
  logging.info("Wrote %d records (%d examples) to %s",
               sum(1 for o in owners if o >= 0), len(examples), output_file)
  return owners


def aggregate(predictions, owners, num_examples, how="mean"):
  """Combines the windows' outputs into one array per example.

  Args:
    predictions: iterable of prediction dicts, in file order, with
      `probabilities` (or `predictions` for regression).
    owners: `write_features`' return value.
    num_examples: int, the number of examples.
    how: "mean" or "max", taken over each example's windows, per output.

  Returns:
    List of `num_examples` float numpy arrays.

  Raises:
    ValueError: fewer predictions than records, or an unknown `how`.
  """
  if how not in AGGREGATIONS:
    raise ValueError("--window_aggregation=%s: expected one of %s" %
                     (how, ", ".join(AGGREGATIONS)))
  windows = [[] for _ in range(num_examples)]
  seen = 0
  for owner, prediction in zip(owners, predictions):
    seen += 1
    if owner < 0:
      continue
    value = prediction.get("probabilities", prediction.get("predictions"))
    windows[owner].append(np.reshape(np.asarray(value, np.float64), [-1]))
  if seen < len(owners):
    raise ValueError("got %d predictions for %d records" %
                     (seen, len(owners)))
  reduce_fn = np.mean if how == "mean" else np.max
  return [reduce_fn(np.stack(w), axis=0) for w in windows]
