"""Tests for optimization.py: golden schedules and AdamW trajectories."""

import ast
import json
import os

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from bert_tf.train import optimizer_base
from helpers import REPO_ROOT
from helpers import data_path
import optimization

# The tiny graph of conformance/optimization (README section 3), in order.
_KERNEL = "bert/encoder/layer_0/attention/output/dense/kernel"
_BIAS = "bert/encoder/layer_0/attention/output/dense/bias"
_GAMMA = "bert/encoder/layer_0/attention/output/LayerNorm/gamma"
_BETA = "bert/encoder/layer_0/attention/output/LayerNorm/beta"
_WORD_EMBEDDINGS = "bert/embeddings/word_embeddings"
_OUTPUT_BIAS = "cls/predictions/output_bias"
_TINY_VARIABLES = (_KERNEL, _BIAS, _GAMMA, _BETA, _WORD_EMBEDDINGS,
                   _OUTPUT_BIAS)


def _learning_rate_tensor():
  (learning_rate,) = tf.get_collection(optimization.LEARNING_RATE_COLLECTION)
  return learning_rate


def schedule_values(init_lr, num_train_steps, num_warmup_steps, steps):
  """The rate `create_optimizer` builds, evaluated at each global step."""
  with tf.Graph().as_default():
    weight = tf.get_variable("w", initializer=1.0)
    optimization.create_optimizer(weight * weight, init_lr, num_train_steps,
                                  num_warmup_steps, use_tpu=False)
    learning_rate = _learning_rate_tensor()
    global_step = tf.train.get_global_step()
    step_value = tf.placeholder(tf.int64, [])
    set_step = tf.assign(global_step, step_value)
    values = []
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      for step in steps:
        sess.run(set_step, {step_value: step})
        values.append(sess.run(learning_rate))
  return np.array(values, dtype=np.float32)


def test_learning_rate_schedule_matches_reference():
  path = data_path("conformance", "optimization", "lr_schedule.json")
  with open(path) as f:
    cases = json.load(f)
  assert len(cases) == 5
  for case in cases:
    actual = schedule_values(case["init_lr"], case["num_train_steps"],
                             case["num_warmup_steps"], case["steps"])
    np.testing.assert_allclose(
        actual, np.array(case["learning_rate"], np.float32), rtol=1e-6,
        atol=0, err_msg=str({k: case[k] for k in ("init_lr", "num_train_steps",
                                                   "num_warmup_steps")}))


def _build_tiny_graph(data):
  """The conformance loss over BERT-named variables; returns the loss."""
  variables = {
      name: tf.get_variable(name, initializer=tf.constant(data[name][0]))
      for name in _TINY_VARIABLES}
  ids = tf.constant(data["_ids"])
  word_embeddings = variables[_WORD_EMBEDDINGS]
  hidden = tf.matmul(tf.constant(data["_x"]) + tf.gather(word_embeddings, ids),
                     variables[_KERNEL]) + variables[_BIAS]  # [6, 3]
  hidden = hidden * variables[_GAMMA] + variables[_BETA]
  logits = tf.matmul(hidden, word_embeddings[:, :3], transpose_b=True)
  logits += variables[_OUTPUT_BIAS]  # [6, 5]
  squared = tf.reduce_mean(tf.square(hidden - tf.constant(data["_target"])))
  cross_entropy = tf.reduce_mean(
      tf.nn.sparse_softmax_cross_entropy_with_logits(labels=ids, logits=logits))
  return float(data["_loss_scale"]) * (squared + cross_entropy)


@pytest.mark.parametrize("file_name", ["steps.npz", "steps_noclip.npz"])
def test_twenty_adamw_steps_match_reference(file_name):
  data = np.load(data_path("conformance", "optimization", file_name))
  with tf.Graph().as_default():
    loss = _build_tiny_graph(data)
    train_op = optimization.create_optimizer(
        loss, init_lr=0.05, num_train_steps=20, num_warmup_steps=5,
        use_tpu=False)
    learning_rate = _learning_rate_tensor()
    tracked = {v.op.name: v for v in tf.global_variables()}
    assert len(tracked) == 6 * 3 + 1  # Variables, adam_m, adam_v, global_step.
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      for step in range(21):
        values = sess.run(tracked)
        for name, value in values.items():
          np.testing.assert_allclose(value, data[name][step], rtol=0,
                                     atol=1e-6, err_msg="%s step %d" %
                                     (name, step))
        if step == 20:
          break
        loss_value, rate = sess.run([loss, learning_rate])
        np.testing.assert_allclose(loss_value, data["_loss_before_step"][step],
                                   rtol=1e-5)
        np.testing.assert_allclose(rate, data["_learning_rate_used"][step],
                                   rtol=1e-6)
        sess.run(train_op)


def test_step_reads_global_step_before_increment_with_ref_variable():
  """Step t applies lr(t) even with a TF1 ref-variable global step."""
  with tf.Graph().as_default():
    global_step = tf.get_variable(
        "global_step", shape=[], dtype=tf.int64, trainable=False,
        initializer=tf.zeros_initializer(), use_resource=False,
        collections=[tf.GraphKeys.GLOBAL_VARIABLES,
                     tf.GraphKeys.GLOBAL_STEP])
    bias = tf.get_variable("bias", initializer=0.0)  # No weight decay.
    train_op = optimization.create_optimizer(
        bias, init_lr=1.0, num_train_steps=4, num_warmup_steps=0,
        use_tpu=False)
    config = tf.ConfigProto(inter_op_parallelism_threads=8)
    with tf.Session(config=config) as sess:
      sess.run(tf.global_variables_initializer())
      for step in range(4):
        before = sess.run(bias)
        sess.run(train_op)
        # Gradient 1: m = 1 - 0.9^(t+1), v = 1 - 0.999^(t+1).
        m = 1 - 0.9 ** (step + 1)
        v = 1 - 0.999 ** (step + 1)
        expected_lr = 1.0 * (1 - step / 4.0)
        np.testing.assert_allclose(before - sess.run(bias),
                                   expected_lr * m / (np.sqrt(v) + 1e-6),
                                   rtol=1e-5)
      assert sess.run(global_step) == 4


def _one_decay_step(names, weight_decay_rate, exclude):
  """One step with zero gradients: only weight decay moves the variables."""
  with tf.Graph().as_default():
    variables = [tf.get_variable(n, initializer=tf.constant([2.0, -4.0]))
                 for n in names]
    optimizer = optimization.AdamWeightDecayOptimizer(
        learning_rate=0.5, weight_decay_rate=weight_decay_rate,
        exclude_from_weight_decay=exclude)
    update = optimizer.apply_gradients(
        [(tf.zeros([2]), v) for v in variables])
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(update)
      return dict(zip(names, sess.run(variables)))


def test_weight_decay_skips_excluded_names():
  names = ["layer/dense/kernel", "layer/dense/bias", "layer/LayerNorm/gamma",
           "head/layer_norm/beta", "bert/embeddings/word_embeddings"]
  result = _one_decay_step(names, 0.1, ["LayerNorm", "layer_norm", "bias"])
  decayed = np.array([2.0, -4.0]) * (1 - 0.5 * 0.1)
  np.testing.assert_allclose(result["layer/dense/kernel"], decayed)
  np.testing.assert_allclose(result["bert/embeddings/word_embeddings"],
                             decayed)
  for name in names[1:4]:
    np.testing.assert_array_equal(result[name], [2.0, -4.0])


def test_weight_decay_applies_to_all_without_exclusions_and_none_at_zero():
  names = ["layer/dense/kernel", "layer/dense/bias"]
  result = _one_decay_step(names, 0.1, None)
  for name in names:
    np.testing.assert_allclose(result[name], [1.9, -3.8])
  result = _one_decay_step(names, 0.0, None)
  for name in names:
    np.testing.assert_array_equal(result[name], [2.0, -4.0])


def test_slot_variables_named_adam_m_and_adam_v_in_root_scope():
  with tf.Graph().as_default():
    kernel = tf.get_variable("bert/pooler/dense/kernel",
                             initializer=tf.ones([2, 2]))
    with tf.variable_scope("some_model_scope"):
      optimization.create_optimizer(tf.reduce_sum(kernel), 1e-3, 10, 1,
                                    use_tpu=False)
    slots = {v.op.name: v for v in tf.global_variables()
             if v.op.name.startswith("bert/")}
    assert sorted(slots) == ["bert/pooler/dense/kernel",
                             "bert/pooler/dense/kernel/adam_m",
                             "bert/pooler/dense/kernel/adam_v"]
    assert slots["bert/pooler/dense/kernel/adam_m"].shape.as_list() == [2, 2]
    assert [v.op.name for v in tf.trainable_variables()] == [
        "bert/pooler/dense/kernel"]


def test_get_slot_returns_the_moments():
  with tf.Graph().as_default():
    weight = tf.get_variable("w", initializer=tf.ones([3]))
    optimizer = optimization.AdamWeightDecayOptimizer(learning_rate=0.1)
    optimizer.apply_gradients([(tf.ones([3]), weight)])
    assert optimizer.get_slot(weight, "adam_m").op.name == "w/adam_m"
    assert optimizer.get_slot(weight, "adam_v").op.name == "w/adam_v"
    assert optimizer.get_slot(weight, "other") is None
    assert optimizer.get_slot_names() == ["adam_m", "adam_v"]


def test_variables_without_gradient_are_skipped():
  with tf.Graph().as_default():
    used = tf.get_variable("used/kernel", initializer=tf.ones([2]))
    unused = tf.get_variable("unused/kernel", initializer=tf.ones([2]))
    train_op = optimization.create_optimizer(tf.reduce_sum(used * used), 0.1,
                                             10, 0, use_tpu=False)
    names = {v.op.name for v in tf.global_variables()}
    assert "used/kernel/adam_m" in names
    assert "unused/kernel/adam_m" not in names
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(train_op)
      np.testing.assert_array_equal(sess.run(unused), [1.0, 1.0])
      assert (sess.run(used) < 1.0).all()
      assert sess.run(tf.train.get_global_step()) == 1


def test_loss_without_trainable_variables_raises():
  with tf.Graph().as_default():
    tf.get_variable("w", initializer=1.0)
    with pytest.raises(ValueError, match="depends on none"):
      optimization.create_optimizer(tf.constant(3.0), 0.1, 10, 0,
                                    use_tpu=False)


def test_learning_rate_summary_only_off_tpu():
  with tf.Graph().as_default():
    weight = tf.get_variable("w", initializer=1.0)
    optimization.create_optimizer(weight * weight, 0.1, 10, 0, use_tpu=False)
    summaries = tf.get_collection(tf.GraphKeys.SUMMARIES)
    assert len(summaries) == 1
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      proto = tf.Summary.FromString(sess.run(summaries[0]))
    assert proto.value[0].tag == "learning_rate"
    assert proto.value[0].simple_value == pytest.approx(0.1)


def test_tpu_wraps_with_cross_shard_optimizer_without_summary():
  with tf.Graph().as_default() as graph:
    weight = tf.get_variable("w", initializer=1.0)
    optimization.create_optimizer(weight * weight, 0.1, 10, 0, use_tpu=True)
    assert not tf.get_collection(tf.GraphKeys.SUMMARIES)
    op_types = {op.type for op in graph.get_operations()}
  assert "CrossReplicaSum" in op_types


# Every name users import from optimization.py: the reference's, then ours.
_PUBLIC_NAMES = (
    "create_optimizer", "AdamWeightDecayOptimizer",
    "learning_rate_schedule", "OptimizerOptions", "make_optimizer",
    "LAMBOptimizer", "LEARNING_RATE_COLLECTION", "LOSS_SCALE_COLLECTION",
    "SKIPPED_UPDATES_COLLECTION")
# The package modules that optimization.py builds on.
_MACHINERY = ("accumulation", "adamw", "adamw_fused", "lamb", "loss_scale",
              "optimizer_base", "optimizer_options", "optimizers", "schedule",
              "train_op", "update", "variables", "xla")


def test_public_names_import_from_optimization():
  # The import statement users write is what is tested, so it is here.
  # pylint: disable-next=g-import-not-at-top
  from optimization import (AdamWeightDecayOptimizer, LAMBOptimizer,
                            LEARNING_RATE_COLLECTION, LOSS_SCALE_COLLECTION,
                            OptimizerOptions, SKIPPED_UPDATES_COLLECTION,
                            create_optimizer, learning_rate_schedule,
                            make_optimizer)
  imported = (create_optimizer, AdamWeightDecayOptimizer,
              learning_rate_schedule, OptimizerOptions, make_optimizer,
              LAMBOptimizer, LEARNING_RATE_COLLECTION, LOSS_SCALE_COLLECTION,
              SKIPPED_UPDATES_COLLECTION)
  for name, value in zip(_PUBLIC_NAMES, imported):
    assert value is getattr(optimization, name), name
  assert set(optimization.__all__) == set(_PUBLIC_NAMES)


def test_collection_names_are_unchanged():
  assert (optimization.LEARNING_RATE_COLLECTION,
          optimization.LOSS_SCALE_COLLECTION,
          optimization.SKIPPED_UPDATES_COLLECTION) == (
              "learning_rate", "loss_scale", "skipped_updates")


@pytest.mark.parametrize("module", _MACHINERY)
def test_the_machinery_does_not_import_optimization(module):
  # Dependencies point down: optimization.py imports the package, never the
  # other way round.
  path = os.path.join(REPO_ROOT, "bert_tf", "train", module + ".py")
  with open(path) as f:
    tree = ast.parse(f.read())
  imported = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      imported.update(alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
      imported.add(node.module)
      imported.update(alias.name for alias in node.names)
  assert "optimization" not in imported


def test_both_optimizers_share_the_package_base_class():
  base = optimizer_base.PerVariableOptimizer
  assert issubclass(optimization.AdamWeightDecayOptimizer, base)
  assert issubclass(optimization.LAMBOptimizer, base)
  assert not issubclass(optimization.LAMBOptimizer,
                        optimization.AdamWeightDecayOptimizer)
  assert optimization.AdamWeightDecayOptimizer(0.1).get_slot_names() == [
      "adam_m", "adam_v"]
  assert optimization.LAMBOptimizer(0.1).get_slot_names() == [
      "lamb_m", "lamb_v"]
