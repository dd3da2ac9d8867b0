"""Bug-report cases: the learning-rate schedule, sequences longer than
max_position_embeddings, and the assignment map from a checkpoint.

Each case file (tests/data/cases) is read and its `expected` (or `right`)
value asserted; the neighbour tests cover the rest of each kind (the whole
kind is fixed, not the one input).
"""

import collections
import json

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from helpers import data_path
from helpers import import_or_skip
import modeling
import optimization
from bert_tf.cli import startup


def _load_case(name):
  with open(data_path("cases", name)) as f:
    return json.load(f)


# ---------------------------------------------------------------------------
# Learning-rate schedule.
# ---------------------------------------------------------------------------


def _schedule(init_lr, num_train_steps, num_warmup_steps, steps):
  """Evaluates the rate tensor `create_optimizer` builds at each step."""
  with tf.Graph().as_default():
    weight = tf.get_variable("w", initializer=1.0)
    optimization.create_optimizer(weight * weight, init_lr, num_train_steps,
                                  num_warmup_steps, use_tpu=False)
    (learning_rate,) = tf.get_collection(
        optimization.LEARNING_RATE_COLLECTION)
    global_step = tf.train.get_global_step()
    step_value = tf.placeholder(tf.int64, [])
    set_step = tf.assign(global_step, step_value)
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      values = []
      for step in steps:
        sess.run(set_step, {step_value: step})
        values.append(sess.run(learning_rate))
  return np.array(values, dtype=np.float32)


def _reference_rule(init_lr, num_train_steps, num_warmup_steps, steps):
  """float64 form of the documented rule."""
  values = []
  for step in steps:
    if step < num_warmup_steps:
      values.append(init_lr * step / num_warmup_steps)
    else:
      values.append(init_lr * (1 - min(step, num_train_steps) /
                               num_train_steps))
  return np.array(values)


def test_case_learning_rate_schedule():
  case = _load_case("optimization_learning_rate_schedule.json")
  inputs, expected = case["input"], case["expected"]
  steps = inputs["query_steps"]
  actual = _schedule(inputs["init_lr"], inputs["num_train_steps"],
                     inputs["num_warmup_steps"], steps)
  want = expected["learning_rate_float32"]
  # Bit for bit: the same float32 ops as the reference.
  np.testing.assert_array_equal(
      actual, np.array([want[str(s)] for s in steps], dtype=np.float32))

  # Kept for parity: step 0 has rate 0, so the first step leaves the weights
  # unchanged (only Adam's moments move), and the global step still counts.
  one_step = expected["one_step_from_global_step_0"]
  with tf.Graph().as_default():
    weight = tf.get_variable(
        "w", initializer=tf.constant(one_step["w_before"], tf.float32))
    train_op = optimization.create_optimizer(
        tf.reduce_sum(tf.square(weight - 3.0)), inputs["init_lr"],
        inputs["num_train_steps"], inputs["num_warmup_steps"],
        inputs["use_tpu"])
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      np.testing.assert_array_equal(sess.run(weight), one_step["w_before"])
      sess.run(train_op)
      np.testing.assert_array_equal(sess.run(weight), one_step["w_after"])
      assert (sess.run(tf.train.get_global_step()) ==
              one_step["global_step_after"])
      (adam_m,) = [v for v in tf.global_variables()
                   if v.op.name == "w/adam_m"]
      assert np.abs(sess.run(adam_m)).max() > 0


@pytest.mark.parametrize("init_lr,num_train_steps,num_warmup_steps,steps", [
    # Around the warmup end and the train end of the case's schedule.
    (1e-4, 100, 10, list(range(0, 13)) + list(range(97, 104))),
    # No warmup: the decay line from init_lr at step 0.
    (2e-5, 50, 0, [0, 1, 2, 25, 49, 50, 51, 500]),
    # Warmup as long as training: warmup all the way, 0 from the end on.
    (3e-5, 30, 30, [0, 1, 15, 28, 29, 30, 31]),
    # Warmup longer than training: warmup rate until the warmup end.
    (1e-3, 10, 20, [0, 5, 9, 10, 11, 19, 20, 21]),
    # One-step warmup.
    (5e-5, 10, 1, [0, 1, 2, 9, 10]),
])
def test_schedule_neighbours_follow_the_rule(init_lr, num_train_steps,
                                             num_warmup_steps, steps):
  actual = _schedule(init_lr, num_train_steps, num_warmup_steps, steps)
  np.testing.assert_allclose(
      actual, _reference_rule(init_lr, num_train_steps, num_warmup_steps,
                              steps), rtol=1e-6, atol=1e-11)


def test_schedule_peak_is_never_reached_with_warmup():
  steps = list(range(0, 101))
  actual = _schedule(1e-4, 100, 10, steps)
  assert actual[0] == 0.0  # Kept for parity: no update at step 0.
  assert actual.max() < 1e-4
  assert actual[9] == pytest.approx(actual[10], rel=1e-6)  # 9e-5 both sides.
  assert actual[100] == 0.0


# ---------------------------------------------------------------------------
# Sequences longer than max_position_embeddings.
# ---------------------------------------------------------------------------


def _max_position_case():
  case = _load_case("modeling_max_position_embeddings.json")
  return modeling.BertConfig.from_dict(case["input"]["bert_config"]), case


def test_case_max_position_embeddings():
  config, case = _max_position_case()
  inputs = [c for c in case["input"]["cases"] if "BertModel_input_shape" in c]
  too_long = inputs[0]["BertModel_input_shape"]
  exact = inputs[1]["BertModel_input_shape"]
  assert too_long == [1, 10] and exact == [1, 8]
  # The right behaviour: a ValueError while building the graph naming both
  # numbers (the reference asserted at run time instead).
  assert "ValueError at graph construction" in (
      case["expected"]["right"]["seq_10_gt_8"])
  with tf.Graph().as_default():
    with pytest.raises(ValueError) as info:
      modeling.BertModel(config, is_training=False,
                         input_ids=tf.zeros(too_long, dtype=tf.int32))
    assert "10" in str(info.value) and "8" in str(info.value)
    assert not tf.global_variables()  # Failed before building anything.
  with tf.Graph().as_default():  # Equality is allowed.
    model = modeling.BertModel(config, is_training=False,
                               input_ids=tf.zeros(exact, dtype=tf.int32))
    assert (model.get_sequence_output().shape.as_list() ==
            case["expected"]["seq_8"]["sequence_output_shape"])


def test_max_position_neighbour_max_plus_one_raises_and_max_is_allowed():
  config, _ = _max_position_case()
  for seq_length in (9, 64):
    with tf.Graph().as_default():
      with pytest.raises(ValueError, match=r"%d.*8" % seq_length):
        modeling.BertModel(config, is_training=False,
                           input_ids=tf.zeros([2, seq_length], tf.int32))
  for seq_length in (1, 7, 8):
    with tf.Graph().as_default():
      modeling.BertModel(config, is_training=True,
                         input_ids=tf.zeros([2, seq_length], tf.int32))


def test_max_position_neighbour_embedding_postprocessor_checks_statically():
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match=r"12.*max_position_embeddings 8"):
      modeling.embedding_postprocessor(tf.zeros([2, 12, 16]),
                                       max_position_embeddings=8)


def test_max_position_neighbour_unknown_length_checked_at_run_time():
  config, _ = _max_position_case()
  with tf.Graph().as_default():
    input_ids = tf.placeholder(tf.int32, shape=[1, None])
    model = modeling.BertModel(config, is_training=False, input_ids=input_ids)
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      output = sess.run(model.get_sequence_output(),
                        {input_ids: np.zeros([1, 8], np.int32)})
      assert output.shape == (1, 8, 16)
      with pytest.raises(tf.errors.InvalidArgumentError,
                         match="max_position_embeddings 8"):
        sess.run(model.get_sequence_output(),
                 {input_ids: np.zeros([1, 10], np.int32)})


def test_max_position_neighbour_max_seq_length_flag_check():
  import_or_skip("tensorflow", "./setup.sh")
  config = modeling.BertConfig(vocab_size=10, max_position_embeddings=512)
  with pytest.raises(ValueError) as info:
    startup.check_max_seq_length(1024, config)
  assert "1024" in str(info.value) and "512" in str(info.value)
  startup.check_max_seq_length(512, config)


# ---------------------------------------------------------------------------
# Assignment map from a checkpoint.
# ---------------------------------------------------------------------------


def _write_checkpoint(directory, shapes, extra_non_trainable=()):
  """A checkpoint holding variables of `shapes`, values arange + 1."""
  path = str(directory / "model.ckpt")
  with tf.Graph().as_default():
    for name, shape in shapes.items():
      size = int(np.prod(shape))
      tf.get_variable(name, initializer=tf.constant(
          np.arange(1, size + 1, dtype=np.float32).reshape(shape)))
    for name in extra_non_trainable:
      tf.get_variable(name, shape=[1], trainable=False)
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      tf.train.Saver().save(sess, path)
  return path


def _graph_variables(shapes):
  return [tf.get_variable(name, shape=shape,
                          initializer=tf.constant_initializer(-7.0))
          for name, shape in shapes.items()]


def test_case_assignment_map(tmp_path):
  case = _load_case("checkpoint_assignment_map.json")
  inputs, expected = case["input"], case["expected"]
  checkpoint = _write_checkpoint(tmp_path, inputs["checkpoint_vars"])

  with tf.Graph().as_default():
    tvars = _graph_variables(inputs["graph_vars_case1"])
    assignment_map, initialized = (
        modeling.get_assignment_map_from_checkpoint(tvars, checkpoint))
    assert isinstance(assignment_map, collections.OrderedDict)
    assert dict(assignment_map) == expected["case1_assignment_map"]
    assert sorted(initialized) == expected["case1_initialized_variable_names"]
    tf.train.init_from_checkpoint(checkpoint, assignment_map)
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      values = dict(zip([v.op.name for v in tvars], sess.run(tvars)))
  np.testing.assert_array_equal(values["bert/pooler/dense/kernel"],
                                [[1, 2], [3, 4]])
  np.testing.assert_array_equal(values["output_weights"], np.full([2, 2], -7))

  # Case 2: a shape mismatch is a ValueError naming both shapes.
  assert expected["case2"].startswith("ValueError")
  with tf.Graph().as_default():
    tvars = _graph_variables(inputs["graph_vars_case2"])
    assignment_map, _ = modeling.get_assignment_map_from_checkpoint(
        tvars, checkpoint)
    with pytest.raises(ValueError, match=r"\(5, 2\).*\[4, 2\]"):
      tf.train.init_from_checkpoint(checkpoint, assignment_map)


def test_assignment_map_neighbour_checkpoint_only_and_graph_only_variables(
    tmp_path):
  checkpoint = _write_checkpoint(
      tmp_path, {"bert/pooler/dense/kernel": [2, 2]},
      extra_non_trainable=["bert/pooler/dense/kernel/adam_m", "global_step"])
  with tf.Graph().as_default():
    tvars = _graph_variables({"bert/pooler/dense/kernel": [2, 2],
                              "cls/squad/output_weights": [2, 2]})
    assignment_map, initialized = (
        modeling.get_assignment_map_from_checkpoint(tvars, checkpoint))
  assert list(assignment_map.items()) == [
      ("bert/pooler/dense/kernel", "bert/pooler/dense/kernel")]
  assert set(initialized) == {"bert/pooler/dense/kernel",
                              "bert/pooler/dense/kernel:0"}
  assert "cls/squad/output_weights:0" not in initialized


def test_assignment_map_neighbour_colon_zero_suffix_and_scoped_names(tmp_path):
  checkpoint = _write_checkpoint(
      tmp_path, {"bert/embeddings/word_embeddings": [4, 2]})
  with tf.Graph().as_default():
    with tf.variable_scope("student"):  # Scoped copy: a different name.
      scoped = _graph_variables({"bert/embeddings/word_embeddings": [4, 2]})
    plain = _graph_variables({"bert/embeddings/word_embeddings": [4, 2]})
    assert plain[0].name == "bert/embeddings/word_embeddings:0"
    assignment_map, initialized = (
        modeling.get_assignment_map_from_checkpoint(scoped + plain,
                                                    checkpoint))
    assert dict(assignment_map) == {
        "bert/embeddings/word_embeddings": "bert/embeddings/word_embeddings"}
    assert "student/bert/embeddings/word_embeddings:0" not in initialized
    assert all(not key.endswith(":0:0") for key in initialized)

    scoped_only, _ = modeling.get_assignment_map_from_checkpoint(scoped,
                                                                 checkpoint)
    assert not scoped_only


def test_assignment_map_neighbour_missing_checkpoint_names_the_path(tmp_path):
  missing = str(tmp_path / "nowhere" / "bert_model.ckpt")
  with tf.Graph().as_default():
    tvars = _graph_variables({"w": [1]})
    with pytest.raises(tf.errors.NotFoundError, match="nowhere"):
      modeling.get_assignment_map_from_checkpoint(tvars, missing)
