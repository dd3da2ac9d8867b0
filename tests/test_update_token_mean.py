"""Gradient accumulation gives the big batch's token-weighted losses.

The masked-LM loss and NER's token loss are means over the labelled tokens
of a whole update. With micro-batches of different numbers of masked tokens,
dividing each by its own count is not the big batch's mean; these tests use
records where it is not, and check N micro-batches against one big batch, in
process and through the scripts (run_pretraining.py, run_ner.py).
"""

import json
import os

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from helpers import data_path, run_script, runner_pairs, write_json
import modeling
import optimization
import run_ner
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


def _masked_lm_weights(window):
  return window["masked_lm_weights"]


def _own_count_as_share(weight_fn):
  """The old normalization, for comparison: each micro-batch divided by its
  own count of labelled tokens (`weight_fn`)."""

  def add_share(batch):
    batch = dict(batch)
    weights = tf.cast(weight_fn(batch), tf.float32)
    batch[accumulation.UPDATE_SHARE_KEY] = tf.fill(
        [tf.shape(weights)[0]], tf.reduce_sum(weights))
    return batch

  return add_share


def _features(records, batch_size, accumulation_steps, weight_fn,
              shares=True):
  """The next training batch of `records`, repeated, each carrying its
  update's share of `weight_fn`'s total
  (`accumulation.update_shares_input_fn`), or without `shares` its own
  count."""
  def input_fn(params, config=None, input_context=None):
    del config, input_context
    return tf.data.Dataset.from_tensor_slices(records).repeat().batch(
        params["batch_size"], drop_remainder=True)
  if shares:
    input_fn = accumulation.update_shares_input_fn(
        input_fn, accumulation_steps, weight_fn)
  elif accumulation_steps > 1:
    plain_input_fn = input_fn
    input_fn = lambda params: plain_input_fn(params).map(
        _own_count_as_share(weight_fn))
  return tf.data.make_one_shot_iterator(
      input_fn({"batch_size": batch_size})).get_next()


def _train(records, batch_size, accumulation_steps, init, num_updates=3,
           shares=True, optimizer="adamw"):
  """Trains run_pretraining's model_fn in a plain session; its variables."""
  with tf.Graph().as_default():
    features = _features(records, batch_size, accumulation_steps,
                         _masked_lm_weights, shares)
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


def _relative_gap(accumulated, once, start):
  """The largest ||accumulated - once|| / ||once - start|| over variables.

  Norms, not single elements: one element whose gradient is near zero can
  take an Adam step of another size from a last-bit difference (here once
  in a full-suite run on TF 2.21: 5.3e-3 by `_worst_relative_error`, 1.2e-5
  in a run of its own), which says nothing about the mean.
  """
  worst = 0.0
  for name in once:
    moved = float(np.linalg.norm(once[name] - start[name]))
    if moved > 1e-4:
      worst = max(worst, float(np.linalg.norm(accumulated[name] -
                                              once[name])) / moved)
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


def test_an_accumulating_model_fn_requires_the_update_share():
  # No silent fall-back to each micro-batch's own count: the input and the
  # model_fn are set from the same option.
  options = optimization.OptimizerOptions(gradient_accumulation_steps=2)
  features = {"x": tf.constant([1.0])}
  with pytest.raises(ValueError, match="--gradient_accumulation_steps=2: "
                     "the training input lacks 'update_weight_share'"):
    accumulation.update_share(features, options, spec_lib.ModeKeys.TRAIN,
                              use_tpu=False)
  for mode, use_tpu, steps in ((spec_lib.ModeKeys.EVAL, False, 2),
                               (spec_lib.ModeKeys.TRAIN, True, 2),
                               (spec_lib.ModeKeys.TRAIN, False, 1)):
    assert accumulation.update_share(
        features, optimization.OptimizerOptions(
            gradient_accumulation_steps=steps), mode, use_tpu) is None


def test_a_packed_accumulating_head_requires_the_slot_share():
  share = tf.constant([2.0])
  with pytest.raises(ValueError, match="lacks 'update_slot_share'"):
    accumulation.slot_share({accumulation.UPDATE_SHARE_KEY: share}, share)
  assert accumulation.slot_share({}, None) is None


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


def _write_records(path, records):
  with tf.io.TFRecordWriter(path) as writer:
    for i in range(len(records["input_ids"])):
      feature = {}
      for name, values in records.items():
        values = values[i].reshape(-1)
        if values.dtype == np.float32:
          feature[name] = tf.train.Feature(
              float_list=tf.train.FloatList(value=values))
        else:
          feature[name] = tf.train.Feature(
              int64_list=tf.train.Int64List(value=values))
      writer.write(tf.train.Example(features=tf.train.Features(
          feature=feature)).SerializeToString())


_TWO_REPLICAS = ("--distribution_strategy=mirrored", "--num_cpu_devices=2")


@pytest.mark.slow
@pytest.mark.parametrize("runner,replicas",
                         runner_pairs([(), _TWO_REPLICAS]),
                         ids=["one_device", "two_replicas"])
def test_run_pretraining_accumulation_equals_the_big_batch(tmp_path, runner,
                                                           replicas):
  records = _records(48)
  data = str(tmp_path / "data.tfrecord")
  _write_records(data, records)
  init, start = _initial_checkpoint(tmp_path)
  config = write_json(tmp_path, _CONFIG, "bert_config.json")
  results = []
  # Two replicas: each takes 4 of the 8 examples of a micro-batch, and the
  # update's mean is over both replicas' masked tokens.
  for name, batch, steps, extra in (("once", 16, 1, ()),
                                    ("accumulated", 8, 2, replicas)):
    output_dir = str(tmp_path / name)
    proc = run_script("run_pretraining.py", [
        "--bert_config_file=" + config, "--input_file=" + data,
        "--output_dir=" + output_dir, "--init_checkpoint=" + init,
        "--max_seq_length=%d" % _SEQ, "--max_predictions_per_seq=%d" % _PRED,
        "--train_batch_size=%d" % batch,
        "--gradient_accumulation_steps=%d" % steps, "--learning_rate=1e-3",
        "--num_warmup_steps=0", "--num_train_steps=3", "--do_train=True",
        "--deterministic=True", "--runner=" + runner] + list(extra),
        env={"CUDA_VISIBLE_DEVICES": ""})
    assert proc.returncode == 0, proc.stderr[-3000:]
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(output_dir))
    results.append({n: reader.get_tensor(n) for n in start})
  once, accumulated = results
  assert _worst_relative_error(accumulated, once, start) < 1e-3


def _ner_records(num, seed=5):
  """NER features, 1 to 10 labelled tokens each (uneven micro-batches)."""
  pretraining = _records(num, seed)
  rng = np.random.RandomState(seed)
  weights = np.zeros([num, _SEQ], np.float32)
  weights[:, :_PRED] = pretraining["masked_lm_weights"]
  return {
      "input_ids": pretraining["input_ids"],
      "input_mask": pretraining["input_mask"],
      "segment_ids": pretraining["segment_ids"],
      "label_ids": rng.randint(0, 5, size=(num, _SEQ)).astype(np.int32),
      "label_weights": weights,
      "is_real_example": np.ones([num], np.int32),
  }


def _train_ner(records, batch_size, accumulation_steps, init, num_updates=3,
               shares=True):
  """Trains run_ner's token classifier in a plain session; its variables.

  run_ner's input wiring (`update_shares_input_fn` with its own
  `_label_weights`) and loss, without dropout: run_ner.py's head always
  drops 10% when training (as the reference's classifier head), so runs
  with other batch shapes never see the same masks.
  """
  with tf.Graph().as_default():
    tf.set_random_seed(7)
    features = _features(records, batch_size, accumulation_steps,
                         run_ner._label_weights, shares)  # pylint: disable=protected-access
    loss, _, _, _ = run_ner.create_model(
        modeling.BertConfig(**_CONFIG), False, features["input_ids"],
        features["input_mask"], features["segment_ids"],
        features["label_ids"], run_ner._label_weights(features), 5, False,  # pylint: disable=protected-access
        update_share=features.get(accumulation.UPDATE_SHARE_KEY))
    tvars = tf.trainable_variables()
    assignment, _ = modeling.get_assignment_map_from_checkpoint(tvars, init)
    tf.train.init_from_checkpoint(init, assignment)
    train_op = optimization.create_optimizer(
        loss, 1e-3, 10, 0, False, options=optimization.OptimizerOptions(
            gradient_accumulation_steps=accumulation_steps))
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      start = sess.run({v.op.name: v for v in tvars})
      for _ in range(num_updates * accumulation_steps):
        sess.run(train_op)
      return sess.run({v.op.name: v for v in tvars}), start


def test_ner_micro_batches_give_the_big_batch_token_mean(tmp_path):
  records = _ner_records(48)
  init, _ = _initial_checkpoint(tmp_path)
  # The head (cls/ner) is not in the checkpoint: the graph seed gives it
  # the same initial values in every run (all graphs build the same ops
  # before it but the input's).
  once, start = _train_ner(records, 16, 1, init)
  accumulated, start_accumulated = _train_ner(records, 8, 2, init)
  per_micro_batch, _ = _train_ner(records, 8, 2, init, shares=False)
  # Measured: 0.077 per micro-batch, 4.5e-6 with the update's token mean.
  assert _relative_gap(per_micro_batch, once, start) > 0.05
  for name, value in start.items():
    np.testing.assert_array_equal(start_accumulated[name], value)
  assert _relative_gap(accumulated, once, start) < 1e-3


@pytest.mark.slow
def test_run_ner_trains_on_the_update_token_mean(tmp_path):
  # The numbers are checked in process above (the head's dropout keeps two
  # runs of run_ner.py with other batch shapes apart); here, that the script
  # feeds its training through the update's shares.
  from test_run_ner import _conll, _head_of_conll
  data = tmp_path / "data"
  _head_of_conll(_conll("eng.train"), data / "eng.train", 24)
  model_dir = data_path("conformance", "modeling")
  proc = run_script("run_ner.py", [
      "--data_dir=%s" % data, "--output_dir=%s" % (tmp_path / "out"),
      "--vocab_file=" + os.path.join(model_dir, "vocab.txt"),
      "--bert_config_file=" + os.path.join(model_dir, "bert_config.json"),
      "--init_checkpoint=" + os.path.join(model_dir, "bert_model.ckpt"),
      "--max_seq_length=24", "--do_train=True", "--train_batch_size=4",
      "--gradient_accumulation_steps=2", "--num_train_epochs=1"],
      env={"CUDA_VISIBLE_DEVICES": ""})
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert ("Token-weighted loss: the mean over the labelled tokens of each "
          "update's 2 micro-batches (2 per replica)") in proc.stderr
