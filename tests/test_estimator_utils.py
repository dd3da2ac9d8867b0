"""Tests for bert_tf/train/estimator.py: steps, checkpoint init, the input
pipeline."""

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from bert_tf.train import model_fn as model_fn_utils
from bert_tf.train import spec as spec_lib
from bert_tf.train import input_fn as input_utils
from bert_tf import io as io_utils

def test_decode_record_casts_int64_to_int32():
  example = tf.train.Example(features=tf.train.Features(feature={
      "input_ids": io_utils.int64_feature([1, 2, 3]),
      "weights": io_utils.float_feature([0.5, 1.0])}))
  with tf.Graph().as_default():
    parsed = input_utils.decode_record(
        tf.constant(example.SerializeToString()),
        {"input_ids": tf.FixedLenFeature([3], tf.int64),
         "weights": tf.FixedLenFeature([2], tf.float32)})
    assert parsed["input_ids"].dtype == tf.int32
    assert parsed["weights"].dtype == tf.float32
    with tf.Session() as sess:
      values = sess.run(parsed)
  np.testing.assert_array_equal(values["input_ids"], [1, 2, 3])
  np.testing.assert_allclose(values["weights"], [0.5, 1.0])


def test_tfrecord_input_fn_eval_reads_in_order_and_keeps_last_batch(tmp_path):
  paths = [str(tmp_path / "a.tfrecord"), str(tmp_path / "b.tfrecord")]
  value = 0
  for path in paths:
    with tf.io.TFRecordWriter(path) as writer:
      for _ in range(3):
        writer.write(tf.train.Example(features=tf.train.Features(feature={
            "x": io_utils.int64_feature([value])})).SerializeToString())
        value += 1
  input_fn = input_utils.tfrecord_input_fn_builder(
      paths, {"x": tf.FixedLenFeature([1], tf.int64)}, is_training=False,
      drop_remainder=False)
  with tf.Graph().as_default():
    batch = tf.data.make_one_shot_iterator(
        input_fn({"batch_size": 4})).get_next()
    with tf.Session() as sess:
      first = sess.run(batch)["x"].ravel().tolist()
      second = sess.run(batch)["x"].ravel().tolist()
  assert first == [0, 1, 2, 3] and second == [4, 5]


def test_fine_tuning_steps_follow_epochs_and_warmup():
  assert model_fn_utils.fine_tuning_steps(100, 32, 3.0, 0.1) == (9, 0)
  assert model_fn_utils.fine_tuning_steps(3668, 32, 3.0, 0.1) == (343, 34)
  # A training set smaller than one batch still trains one step.
  assert model_fn_utils.fine_tuning_steps(5, 32, 1.0, 0.1) == (1, 0)


def test_init_from_checkpoint_refuses_a_checkpoint_without_bert(tmp_path):
  with tf.Graph().as_default():
    tf.get_variable("foo/bar", shape=[2])
    saver = tf.train.Saver()
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      prefix = saver.save(sess, str(tmp_path / "other.ckpt"))
  with tf.Graph().as_default():
    tf.get_variable("bert/embeddings/word_embeddings", shape=[4, 2])
    with pytest.raises(ValueError, match="--init_checkpoint: none of the "
                       "model's 1 variables is in"):
      model_fn_utils.init_from_checkpoint(prefix, use_tpu=False)


def test_weights_are_cast_once_only_in_graphs_that_do_not_train_off_tpu():
  keys = spec_lib.ModeKeys
  assert not model_fn_utils.cast_weights_once(keys.TRAIN, use_tpu=False)
  assert model_fn_utils.cast_weights_once(keys.EVAL, use_tpu=False)
  assert model_fn_utils.cast_weights_once(keys.PREDICT, use_tpu=False)
  assert not model_fn_utils.cast_weights_once(keys.PREDICT, use_tpu=True)
