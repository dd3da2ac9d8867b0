"""io.serialize_example and the task writers' fixed feature orders (the
reference's record bytes on protobuf 4 and 7)."""

from google import protobuf
import pytest
import tensorflow.compat.v1 as tf

from bert_tf import io as io_utils
from bert_tf.tasks.classifier import features as classifier_features
from bert_tf.tasks.ner import features as ner_features
from bert_tf.tasks.pretraining import records
from bert_tf.tasks.squad import data as squad_data


def _feature_names(serialized):
  """The feature names of a serialized Example, in the order of the bytes."""
  names = []
  position = 0

  def varint():
    nonlocal position
    value, shift = 0, 0
    while True:
      byte = serialized[position]
      position += 1
      value |= (byte & 0x7f) << shift
      shift += 7
      if byte < 0x80:
        return value

  assert serialized[0] == 0x0a
  position = 1
  end = varint() + position
  while position < end:
    assert serialized[position] == 0x0a
    position += 1
    entry_end = varint() + position
    assert serialized[position] == 0x0a
    position += 1
    length = varint()
    names.append(serialized[position:position + length].decode("utf-8"))
    position = entry_end
  return names


def test_serialize_example_writes_the_given_order_and_parses_back():
  assert io_utils.serialize_example(
      {"a": io_utils.int64_feature([1])}, ["a"]) == (
          b"\n\x0c\n\n\n\x01a\x12\x05\x1a\x03\n\x01\x01")
  features = {"ids": io_utils.int64_feature(range(300)),
              "weights": io_utils.float_feature([0.5, 1.0]),
              "empty": io_utils.int64_feature([]),
              "big": io_utils.int64_feature([2 ** 40, -1])}
  built = tf.train.Example(features=tf.train.Features(feature=features))
  for order in (["ids", "weights", "empty", "big"],
                ["big", "empty", "weights", "ids"]):
    serialized = io_utils.serialize_example(features, order)
    assert _feature_names(serialized) == order
    assert tf.train.Example.FromString(serialized) == built
  with pytest.raises(ValueError, match="does not match the features"):
    io_utils.serialize_example(features, ["ids", "weights"])


def test_writers_wire_orders_are_protobuf_4s_order_of_their_features():
  """The writers' fixed orders are what protobuf 4 (TensorFlow 2.15, whose
  records are the reference's bytes) writes for their insertion order;
  protobuf 7 (TensorFlow 2.21) writes another, so there only the orders'
  names are checked."""
  inserted = {
      classifier_features._WIRE_ORDER: (
          "input_ids", "input_mask", "segment_ids", "label_ids",
          "is_real_example"),
      squad_data._TRAIN_WIRE_ORDER: (
          "unique_ids", "input_ids", "input_mask", "segment_ids",
          "start_positions", "end_positions", "is_impossible"),
      squad_data._EVAL_WIRE_ORDER: (
          "unique_ids", "input_ids", "input_mask", "segment_ids"),
      ner_features._WIRE_ORDER: (
          "unique_ids", "input_ids", "input_mask", "segment_ids",
          "label_ids", "label_weights", "is_real_example"),
      records._WIRE_ORDER: records.FEATURE_ORDER,
  }
  for wire_order, insertion_order in inserted.items():
    assert sorted(wire_order) == sorted(insertion_order)
    features = {}
    for value, name in enumerate(insertion_order):
      features[name] = io_utils.int64_feature([value])
    built = tf.train.Example(features=tf.train.Features(feature=features))
    if protobuf.__version__.startswith("4."):
      assert _feature_names(built.SerializeToString()) == list(wire_order)
