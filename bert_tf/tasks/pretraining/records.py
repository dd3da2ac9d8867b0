# coding=utf-8
"""Pre-training instances straight to `tf.train.Example` wire bytes.

`ExampleSerializer` writes the reference's bytes (an Example built from an
`OrderedDict` of the features in `FEATURE_ORDER`) without building message
objects, which makes `create_pretraining_data.py` at least ~10% faster
(measured with `bench/bench_pretraining_data.py --ab`); `instance_features`
gives the padded feature lists the reference's way. `make_serializer` also
gives `UnmaskedSerializer`, the records of `--dynamic_masking`, and
`PackedSerializer`, those of `--pack_sequences`.
"""

import struct

from bert_tf import io as io_utils
from bert_tf.tasks import features as feature_utils
from bert_tf.tasks.pretraining import whole_words
from bert_tf.train import packing

__all__ = ["FEATURE_ORDER", "instance_features", "ExampleSerializer",
           "UnmaskedSerializer", "PackedSerializer", "make_serializer"]

# Feature order of the reference's OrderedDict; the serialized bytes depend on
# it (the reference builds each record's features in this order).
FEATURE_ORDER = ("input_ids", "input_mask", "segment_ids",
                 "masked_lm_positions", "masked_lm_ids", "masked_lm_weights",
                 "next_sentence_labels")


def instance_features(instance, vocab, max_seq_length,
                      max_predictions_per_seq):
  """The padded feature lists of one instance, in `FEATURE_ORDER`.

  Args:
    instance: a `TrainingInstance` (tokens, segment_ids, masked_lm_positions,
      masked_lm_labels, is_random_next).
    vocab: dict, token -> id.
    max_seq_length: int, length of input_ids, input_mask, segment_ids.
    max_predictions_per_seq: int, length of the three masked_lm_* lists.

  Returns:
    tuple of 7 lists: int lists, except masked_lm_weights (float: 1.0 for
    each masked position, 0.0 for padding); next_sentence_labels is [1]
    when B is random, else [0].

  Raises:
    ValueError: when the instance has more than `max_seq_length` tokens or
      more than `max_predictions_per_seq` masked positions.
  """
  input_ids = [vocab[token] for token in instance.tokens]
  num_tokens = len(input_ids)
  if num_tokens > max_seq_length:
    raise ValueError("instance has %d tokens; max_seq_length is %d"
                     % (num_tokens, max_seq_length))
  num_masked = len(instance.masked_lm_positions)
  if num_masked > max_predictions_per_seq:
    raise ValueError("instance has %d masked positions; "
                     "max_predictions_per_seq is %d"
                     % (num_masked, max_predictions_per_seq))
  input_ids, input_mask, segment_ids = feature_utils.pad_input(
      input_ids, instance.segment_ids, max_seq_length)
  pad = io_utils.pad_to
  return (
      input_ids, input_mask, segment_ids,
      pad(instance.masked_lm_positions, max_predictions_per_seq),
      pad([vocab[token] for token in instance.masked_lm_labels],
          max_predictions_per_seq),
      pad([1.0] * num_masked, max_predictions_per_seq, 0.0),
      [1 if instance.is_random_next else 0],
  )


# Order in which the features appear in the reference's serialized records:
# protobuf writes the `feature` map in its own hash order, which for the
# reference's insertion order above is this one (every record of
# conformance/pretraining_data). Any order parses to the same Example; this
# one keeps the files byte-identical.
_WIRE_ORDER = ("masked_lm_ids", "input_ids", "masked_lm_positions",
               "next_sentence_labels", "input_mask", "masked_lm_weights",
               "segment_ids")

_FLOAT_ONE = struct.pack("<f", 1.0)
_FLOAT_ZERO = struct.pack("<f", 0.0)


# Varints of small numbers (lengths, positions), looked up instead of encoded.
_SMALL_VARINTS = tuple(io_utils.varint(value) for value in range(1 << 12))


def _varint_of(value):
  return _SMALL_VARINTS[value] if value < 4096 else io_utils.varint(value)


def _length_delimited(tag, payload):
  """Protobuf field `tag` (one byte, wire type 2) holding `payload`."""
  return tag + _varint_of(len(payload)) + payload


class ExampleSerializer(object):
  """Serializes instances straight to `tf.train.Example` wire bytes.

  Writes the same bytes as building a `tf.train.Example` from an
  `OrderedDict` of features per instance (the reference's way; the tests
  check both against conformance/pretraining_data) at a fraction of the cost:
  each token's varint id is looked up once, padding is a constant byte run,
  and no message objects are built.

  Wire format: Example{1: Features{1: repeated map entry {1: key, 2:
  Feature{2: FloatList{1: packed float} | 3: Int64List{1: packed varint}}}}}.
  """

  feature_names = FEATURE_ORDER

  def __init__(self, tokenizer, max_seq_length, max_predictions_per_seq):
    self._vocab = tokenizer.vocab
    self._token_varints = {token: io_utils.varint(token_id)
                           for token, token_id in tokenizer.vocab.items()}
    self._position_varints = [io_utils.varint(p)
                              for p in range(max_seq_length)]
    self._max_seq_length = max_seq_length
    self._max_predictions_per_seq = max_predictions_per_seq
    # Entry = b"\n" len {b"\n" len key, b"\x12" len Feature}.
    self._key_fields = {
        name: _length_delimited(b"\n", name.encode("ascii"))
        for name in FEATURE_ORDER}

  def features(self, instance):
    """The padded feature lists of `instance`, in `FEATURE_ORDER`."""
    return instance_features(instance, self._vocab, self._max_seq_length,
                             self._max_predictions_per_seq)

  def serialize(self, instance):
    """Serialized `tf.train.Example` bytes of `instance`."""
    tokens = instance.tokens
    num_tokens = len(tokens)
    num_masked = len(instance.masked_lm_positions)
    if (num_tokens > self._max_seq_length or
        num_masked > self._max_predictions_per_seq):
      self.features(instance)  # Raises the ValueError naming the limit.
    seq_pad = b"\0" * (self._max_seq_length - num_tokens)
    pred_pad = self._max_predictions_per_seq - num_masked
    id_of = self._token_varints.__getitem__
    position_of = self._position_varints.__getitem__
    payloads = {
        "input_ids": b"".join(map(id_of, tokens)) + seq_pad,
        "input_mask": b"\x01" * num_tokens + seq_pad,
        "segment_ids": bytes(instance.segment_ids) + seq_pad,
        "masked_lm_positions": b"".join(
            map(position_of, instance.masked_lm_positions)) + b"\0" * pred_pad,
        "masked_lm_ids": b"".join(
            map(id_of, instance.masked_lm_labels)) + b"\0" * pred_pad,
        "masked_lm_weights": _FLOAT_ONE * num_masked + _FLOAT_ZERO * pred_pad,
        "next_sentence_labels": b"\x01" if instance.is_random_next else b"\0",
    }
    entries = []
    for name in _WIRE_ORDER:
      payload = payloads[name]
      value_list = _length_delimited(b"\n", payload) if payload else b""
      feature = _length_delimited(
          b"\x12" if name == "masked_lm_weights" else b"\x1a", value_list)
      entries.append(_length_delimited(
          b"\n", self._key_fields[name] + _length_delimited(b"\x12",
                                                             feature)))
    return _length_delimited(b"\n", b"".join(entries))


class UnmaskedSerializer(object):
  """Unmasked instances as `tf.train.Example` bytes (`--dynamic_masking`).

  Features: `input_ids`, `input_mask`, `segment_ids` [max_seq_length]; with
  `next_sentence`, `next_sentence_labels` [1] (1: B is random); with
  `word_marks`, `word_continues` [max_seq_length] (1 where a token continues
  the Chinese segmenter word before it, `whole_words.WordContinuation`).
  """

  def __init__(self, tokenizer, max_seq_length, next_sentence=True,
               word_marks=False):
    self._vocab = tokenizer.vocab
    self._max_seq_length = max_seq_length
    self._next_sentence = next_sentence
    self._word_marks = word_marks
    self.feature_names = (
        ("input_ids", "input_mask", "segment_ids") +
        ("next_sentence_labels",) * next_sentence +
        ("word_continues",) * word_marks)

  def features(self, instance):
    """The padded feature lists of `instance`, in `feature_names`' order;
    ValueError when it has more than `max_seq_length` tokens."""
    input_ids = [self._vocab[token] for token in instance.tokens]
    if len(input_ids) > self._max_seq_length:
      raise ValueError("instance has %d tokens; max_seq_length is %d"
                       % (len(input_ids), self._max_seq_length))
    values = list(feature_utils.pad_input(input_ids, instance.segment_ids,
                                          self._max_seq_length))
    if self._next_sentence:
      values.append([1 if instance.is_random_next else 0])
    if self._word_marks:
      values.append(io_utils.pad_to(
          [int(whole_words.is_continuation(token))
           for token in instance.tokens], self._max_seq_length))
    return values

  def serialize(self, instance):
    """Serialized `tf.train.Example` bytes of `instance`."""
    return io_utils.serialize_example(dict(zip(
        self.feature_names,
        map(io_utils.int64_feature, self.features(instance)))),
                                      self.feature_names)


class PackedSerializer(object):
  """Masked instances packed several a row (`--pack_sequences`).

  `pack` puts whole instances into rows of `max_seq_length` with
  `packing.pack` (first-fit decreasing, at most `max_per_row` a row) and
  at most `max_predictions_per_seq` masked words a row, its instances'
  together: a row that would hold more gives the instances placed last to
  new rows. Rows keep the order of their first instance. A row's features
  (`tf.train.Example`, names sorted): `input_ids`, `input_mask` (each
  token's slot 1..K, 0: padding), `segment_ids`, `position_ids`
  (restarting at 0) [max_seq_length]; `cls_positions`, `is_real_example`,
  `example_index` (the instance's index, -1: empty slot) and
  `next_sentence_labels` (1: B is random; 0 in an empty slot) [K];
  `masked_lm_positions` (offsets into the row), `masked_lm_ids`, and
  `masked_lm_weights` (float) [max_predictions_per_seq].
  """

  def __init__(self, tokenizer, max_seq_length, max_predictions_per_seq,
               max_per_row):
    self._vocab = tokenizer.vocab
    self._max_seq_length = max_seq_length
    self._max_predictions = max_predictions_per_seq
    self._max_per_row = max_per_row
    self.feature_names = tuple(sorted(
        ("input_ids", "input_mask", "segment_ids", "position_ids",
         "cls_positions", "is_real_example", "example_index",
         "next_sentence_labels", "masked_lm_positions", "masked_lm_ids",
         "masked_lm_weights")))

  def _groups(self, instances):
    """Lists of instance indices, one a row (tokens and masks fit)."""
    groups, pending = [], list(range(len(instances)))
    while pending:
      left = []
      for members in packing.first_fit_decreasing(
          [len(instances[i].tokens) for i in pending], self._max_seq_length,
          self._max_per_row):
        group, masked = [], 0
        for index in (pending[m] for m in members):
          count = len(instances[index].masked_lm_positions)
          if group and masked + count > self._max_predictions:
            left.append(index)
          else:
            group.append(index)
            masked += count
        groups.append(group)
      pending = sorted(left)
    return sorted(groups, key=min)

  def pack(self, instances):
    """The rows (dicts name -> list) of `instances` (`TrainingInstance`s).

    Raises:
      ValueError: an instance longer than `max_seq_length` or with more
        than `max_predictions_per_seq` masked positions.
    """
    for instance in instances:  # Raises naming the limit.
      if (len(instance.tokens) > self._max_seq_length or
          len(instance.masked_lm_positions) > self._max_predictions):
        instance_features(instance, self._vocab, self._max_seq_length,
                          self._max_predictions)
    rows = []
    for group in self._groups(instances):
      row, = packing.pack(
          [{"input_ids": [self._vocab[t] for t in instances[i].tokens],
            "segment_ids": list(instances[i].segment_ids)} for i in group],
          self._max_seq_length, self._max_per_row)
      row["example_index"] = [group[j] if j >= 0 else -1
                              for j in row["example_index"]]
      positions, ids, labels = [], [], []
      for index, start in zip(row["example_index"], row["cls_positions"]):
        instance = instances[index] if index >= 0 else None
        labels.append(int(bool(instance and instance.is_random_next)))
        if instance:
          positions += [start + p for p in instance.masked_lm_positions]
          ids += [self._vocab[t] for t in instance.masked_lm_labels]
      pad = io_utils.pad_to
      row.update(
          next_sentence_labels=labels,
          masked_lm_positions=pad(positions, self._max_predictions),
          masked_lm_ids=pad(ids, self._max_predictions),
          masked_lm_weights=pad([1.0] * len(ids), self._max_predictions,
                                0.0))
      rows.append(row)
    return rows

  def features(self, row):
    """The row's feature lists, in `feature_names`' order."""
    return [row[name] for name in self.feature_names]

  def serialize(self, row):
    """Serialized `tf.train.Example` bytes of a row of `pack`."""
    return packing.serialize_row(row)


def make_serializer(tokenizer, max_seq_length, max_predictions_per_seq,
                    dynamic_masking=False, next_sentence=True,
                    word_marks=False, max_per_row=None):
  """The serializer of the records asked for: the reference's
  (`ExampleSerializer`) unless `dynamic_masking` (`UnmaskedSerializer`) or
  `max_per_row` (an int: `PackedSerializer`)."""
  if max_per_row:
    return PackedSerializer(tokenizer, max_seq_length,
                            max_predictions_per_seq, max_per_row)
  if dynamic_masking:
    return UnmaskedSerializer(tokenizer, max_seq_length, next_sentence,
                              word_marks)
  return ExampleSerializer(tokenizer, max_seq_length, max_predictions_per_seq)
