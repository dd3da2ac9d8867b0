"""The task writers' fixed feature orders (the reference's record bytes)."""

from google import protobuf
import tensorflow.compat.v1 as tf

from helpers import example_feature_names

from bert_tf import io as io_utils
from bert_tf.tasks.classifier import features as classifier_features
from bert_tf.tasks.ner import features as ner_features
from bert_tf.tasks.pretraining import records
from bert_tf.tasks.squad import data as squad_data


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
      assert example_feature_names(built.SerializeToString()) == list(wire_order)
