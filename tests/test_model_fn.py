"""`build_model_fn`: one model_fn for every task, with the head as a value.

A toy head defined here (a mean-squared error on the pooled output) goes
through all three modes: TRAIN updates the weights, EVAL returns the
head's loss and metrics, PREDICT its predictions; a mode the head does not
list is refused by name.
"""

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from bert_tf.train import model_fn as model_fn_utils
from bert_tf.train import spec as spec_lib
import modeling


class _PooledMeanHead(model_fn_utils.Head):
  """Predicts the mean of the pooled output; loss: its square."""

  modes = (spec_lib.ModeKeys.TRAIN, spec_lib.ModeKeys.EVAL,
           spec_lib.ModeKeys.PREDICT)

  def build(self, model, features, mode, update_share=None):
    value = tf.reduce_mean(model.get_pooled_output(), axis=-1)  # [B]
    loss = tf.reduce_mean(tf.square(value))
    if mode == spec_lib.ModeKeys.PREDICT:
      return model_fn_utils.HeadOutput(predictions={"value": value})
    return model_fn_utils.HeadOutput(
        loss=loss, eval_metrics=(
            lambda v: {"eval_value": tf.metrics.mean(v)}, [value]))


def _config():
  return modeling.BertConfig(vocab_size=30, hidden_size=32,
                             num_hidden_layers=2, num_attention_heads=2,
                             intermediate_size=37, max_position_embeddings=16)


def _features():
  ids = np.array([[1, 5, 7, 2, 0, 0], [1, 9, 2, 0, 0, 0]], np.int32)
  return {"input_ids": tf.constant(ids),
          "input_mask": tf.constant((ids > 0).astype(np.int32)),
          "segment_ids": tf.zeros_like(tf.constant(ids))}


def _spec(head, mode, schedule=None):
  model_fn = model_fn_utils.build_model_fn(
      head, _config(), init_checkpoint=None, use_tpu=False,
      use_one_hot_embeddings=False, schedule=schedule)
  return model_fn(_features(), None, mode, {})


def test_train_mode_updates_the_weights_with_the_heads_loss():
  with tf.Graph().as_default():
    spec = _spec(_PooledMeanHead(), spec_lib.ModeKeys.TRAIN,
                 model_fn_utils.TrainingSchedule(
                     learning_rate=0.1, num_train_steps=10,
                     num_warmup_steps=0))
    pooler = [v for v in tf.trainable_variables()
              if v.name == "bert/pooler/dense/kernel:0"][0]
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      before = sess.run(pooler)
      sess.run(spec.train_op)
      after = sess.run(pooler)
  assert spec.loss is not None
  assert np.abs(after - before).max() > 0


def test_eval_and_predict_modes_return_the_heads_outputs():
  with tf.Graph().as_default():
    spec = _spec(_PooledMeanHead(), spec_lib.ModeKeys.EVAL)
    assert spec.loss is not None
    metric_fn, tensors = spec.eval_metrics
    assert set(metric_fn(*tensors)) == {"eval_value"}
  with tf.Graph().as_default():
    spec = _spec(_PooledMeanHead(), spec_lib.ModeKeys.PREDICT)
    assert set(spec.predictions) == {"value"}
    assert spec.predictions["value"].shape.as_list() == [2]


def test_a_mode_the_head_does_not_support_is_refused_by_name():

  class TrainOnly(_PooledMeanHead):
    modes = (spec_lib.ModeKeys.TRAIN,)

  with tf.Graph().as_default():
    with pytest.raises(ValueError, match="TrainOnly supports the modes"):
      _spec(TrainOnly(), spec_lib.ModeKeys.PREDICT)
