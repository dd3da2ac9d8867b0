"""The update's token mean: accumulation that gives the big batch's
token-weighted losses (bert_tf/train/accumulation.with_update_shares and
model_fn.weighted_mean_loss(update_share=)).

With micro-batches of different numbers of masked tokens, dividing each by
its own count is not the big batch's mean; these tests use records where it
is not, and check N micro-batches against one big batch in process. (The
scripts do not switch it on yet: see README, "Gradient accumulation".)
"""

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import modeling
import optimization
import run_pretraining
from bert_tf.train import accumulation
from bert_tf.train import model_fn as model_fn_utils
from bert_tf.train import spec as spec_lib

_CONFIG = dict(vocab_size=60, hidden_size=32, num_hidden_layers=2,
               num_attention_heads=4, intermediate_size=37,
               max_position_embeddings=32, type_vocab_size=2,
               hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
_SEQ, _PRED = 16, 10


def _records(num, seed=3):
  """Pre-training features, 1 to 10 masked tokens each (uneven batches)."""
  rng = np.random.RandomState(seed)
  weights = np.zeros([num, _PRED], np.float32)
  # The first half of every big batch has 1 masked token, the second 10:
  # per-micro-batch means weigh a token of the first half 10 times more.
  counts = np.where(np.arange(num) % 8 < 4, 1, 10)
  counts = np.minimum(counts + rng.randint(0, 2, size=num), _PRED)
  for i, count in enumerate(counts):
    weights[i, :count] = 1.0
  return {
      "input_ids": rng.randint(1, 60, size=(num, _SEQ)).astype(np.int32),
      "input_mask": np.ones([num, _SEQ], np.int32),
      "segment_ids": np.zeros([num, _SEQ], np.int32),
      "masked_lm_positions": rng.randint(0, _SEQ, size=(num, _PRED)).astype(
          np.int32),
      "masked_lm_ids": rng.randint(1, 60, size=(num, _PRED)).astype(np.int32),
      "masked_lm_weights": weights,
      "next_sentence_labels": rng.randint(0, 2, size=(num, 1)).astype(
          np.int32),
  }


def _train(records, batch_size, accumulation_steps, init, num_updates=3,
           shares=True, optimizer="adamw"):
  """Trains run_pretraining's model_fn in a plain session; its variables."""
  with tf.Graph().as_default():
    def input_fn(params, config=None, input_context=None):
      del config, input_context
      return tf.data.Dataset.from_tensor_slices(records).repeat().batch(
          params["batch_size"], drop_remainder=True)
    if shares:
      input_fn = accumulation.update_shares_input_fn(
          input_fn, accumulation_steps,
          lambda window: window["masked_lm_weights"])
    features = tf.data.make_one_shot_iterator(
        input_fn({"batch_size": batch_size})).get_next()
    model_fn = run_pretraining.model_fn_builder(
        modeling.BertConfig(**_CONFIG), init, 1e-3, 10, 0, False, False,
        options=optimization.OptimizerOptions(
            optimizer=optimizer,
            gradient_accumulation_steps=accumulation_steps))
    spec = model_fn(features, None, spec_lib.ModeKeys.TRAIN, {})
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      for _ in range(num_updates * accumulation_steps):
        sess.run(spec.train_op)
      return sess.run({v.op.name: v for v in tf.trainable_variables()})


def _initial_checkpoint(tmp_path):
  with tf.Graph().as_default():
    features = {k: tf.constant(v[:2]) for k, v in _records(2).items()}
    run_pretraining.model_fn_builder(
        modeling.BertConfig(**_CONFIG), None, 1e-3, 10, 0, False,
        False)(features, None, spec_lib.ModeKeys.EVAL, {})
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      path = tf.train.Saver().save(sess, str(tmp_path / "init.ckpt"))
      start = sess.run({v.op.name: v for v in tf.trainable_variables()})
  return path, start


def _worst_relative_error(accumulated, once, start):
  worst = 0.0
  assert set(once) == set(accumulated)
  for name in once:
    moved = np.abs(once[name] - start[name]).max()
    if moved > 1e-4:
      worst = max(worst, np.abs(accumulated[name] - once[name]).max() / moved)
  return worst


@pytest.mark.parametrize("optimizer", ["adamw", "lamb"])
def test_micro_batches_give_the_big_batch_masked_lm_mean(tmp_path, optimizer):
  records = _records(48)
  init, start = _initial_checkpoint(tmp_path)
  once = _train(records, 16, 1, init, optimizer=optimizer)
  accumulated = _train(records, 8, 2, init, optimizer=optimizer)
  per_micro_batch = _train(records, 8, 2, init, shares=False,
                           optimizer=optimizer)
  # The old normalization (each micro-batch by its own count) is far off on
  # these records: the test can tell the two apart.
  assert _worst_relative_error(per_micro_batch, once, start) > 0.05
  # The update's mean: the big batch, up to float32 rounding (Adam's
  # division magnifies it for near-zero gradients; measured 1.2e-5, against
  # 0.50 for per-micro-batch means).
  assert _worst_relative_error(accumulated, once, start) < 1e-3


def test_update_share_is_the_window_total_over_its_elements():
  records = {"w": np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 0.0],
                            [1.0, 1.0]], np.float32)}
  dataset = accumulation.with_update_shares(
      tf.data.Dataset.from_tensor_slices(records).batch(1), 2,
      lambda window: window["w"])
  shares = [float(e[accumulation.UPDATE_SHARE_KEY][0]) for e in
            dataset.as_numpy_iterator()]
  assert shares == [1.5, 1.5, 1.0, 1.0]


def test_weighted_mean_with_a_share_divides_by_it():
  with tf.Graph().as_default(), tf.Session() as sess:
    loss = model_fn_utils.weighted_mean_loss(
        tf.constant([2.0, 4.0]), tf.constant([1.0, 1.0]),
        update_share=tf.constant([3.0, 3.0]))
    plain = model_fn_utils.weighted_mean_loss(tf.constant([2.0, 4.0]),
                                              tf.constant([1.0, 1.0]))
    value, plain_value = sess.run([loss, plain])
  assert value == pytest.approx(2.0, rel=1e-5)
  assert plain_value == pytest.approx(3.0, rel=1e-5)
