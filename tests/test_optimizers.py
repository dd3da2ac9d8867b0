"""Tests of the optimizer table, the learning-rate function and adamw_fused."""

import json
import os
import re

from absl import flags
import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from helpers import REPO_ROOT
from helpers import data_path
import modeling
import optimization
from bert_tf.cli import flags as cli_flags
from bert_tf.train import accumulation
from bert_tf.train import adamw_fused
from bert_tf.train import loss_scale
from bert_tf.train import optimizer_base
from bert_tf.train import optimizers
from bert_tf.train import options as training_options
from bert_tf.train import schedule
from bert_tf.train import variables as variables_lib
import test_optimization

Options = optimization.OptimizerOptions


# ---------------------------------------------------------------------------
# The table.
# ---------------------------------------------------------------------------


def _define_optimizer_flag():
  values = flags.FlagValues()
  define, default, help_text = cli_flags.SHARED_FLAGS["optimizer"]
  define("optimizer", default, help_text, flag_values=values)
  return values


def test_the_table_lists_the_reference_first_and_feeds_the_flag():
  assert list(optimizers.REGISTRY) == ["adamw", "lamb", "adamw_fused"]
  assert training_options.OPTIMIZERS is optimizers.REGISTRY
  values = _define_optimizer_flag()
  assert values["optimizer"].parser.enum_values == list(optimizers.REGISTRY)
  assert values["optimizer"].default == "adamw"
  for name, entry in optimizers.REGISTRY.items():
    assert "%s: %s" % (name, entry.summary) in values["optimizer"].help


@pytest.mark.parametrize("name,cls", [
    ("adamw", optimization.AdamWeightDecayOptimizer),
    ("lamb", optimization.LAMBOptimizer),
    ("adamw_fused", adamw_fused.FusedAdamWeightDecayOptimizer)])
def test_each_name_builds_its_optimizer_from_the_options(name, cls):
  optimizer = optimization.make_optimizer(
      0.5, Options(optimizer=name, weight_decay_rate=0.2, beta_1=0.8,
                   epsilon=1e-3, exclude_from_weight_decay=("bias",)))
  assert type(optimizer) is cls  # pylint: disable=unidiomatic-typecheck
  assert (optimizer.learning_rate, optimizer.weight_decay_rate,
          optimizer.beta_1, optimizer.beta_2, optimizer.epsilon,
          optimizer.exclude_from_weight_decay) == (0.5, 0.2, 0.8, 0.999,
                                                   1e-3, ["bias"])


def test_every_optimizers_state_is_left_out_of_a_conversion():
  # variables.is_training_state is what convert_checkpoint.py drops: every
  # registered optimizer's slots and counters, the accumulators, the fp16
  # loss scale and the step, and never a weight.
  weight_name = "bert/encoder/layer_0/output/dense/kernel"
  for name in optimizers.REGISTRY:
    with tf.Graph().as_default():
      weight = tf.get_variable(weight_name, [2, 2])
      optimizers.build(0.1, Options(optimizer=name)).apply_gradients(
          [(tf.ones([2, 2]), weight)])
      loss_scale.DynamicLossScale(2.0, 10)
      accumulation.Accumulators([weight], None)
      tf.train.get_or_create_global_step()
      names = [v.op.name for v in tf.global_variables()]
    assert len(names) >= 8, (name, names)
    assert [n for n in names if not variables_lib.is_training_state(n)] == [
        weight_name], name


def test_register_refuses_a_taken_or_odd_name_in_one_line():
  with pytest.raises(ValueError, match="'adamw' is registered already"):
    optimizers.register("adamw", None, "")
  with pytest.raises(ValueError, match="expected letters, digits"):
    optimizers.register("adam-w", None, "")
  assert list(optimizers.REGISTRY) == ["adamw", "lamb", "adamw_fused"]


def test_an_unknown_name_is_refused_by_the_options_and_the_flags():
  with pytest.raises(ValueError, match="^optimizer must be one of adamw, "
                     "lamb, adamw_fused, got 'sgd'$"):
    Options(optimizer="sgd")
  assert optimization.OptimizerOptions.unchecked(optimizer="sgd").optimizer \
      == "sgd"
  training = training_options.TrainingOptions(
      optimizer_options=Options.unchecked(optimizer="sgd"))
  assert training_options.training_problems(training) == [
      "--optimizer=sgd: expected one of adamw, lamb, adamw_fused"]


# ---------------------------------------------------------------------------
# Adding an optimizer (docs/layout.md): a toy defined here only.
# ---------------------------------------------------------------------------


class _ToySgd(optimizer_base.PerVariableOptimizer):
  """param -= learning_rate * gradient, the gradient kept in one slot."""

  _SLOT_NAMES = ("toy_gradient",)

  def _apply_one(self, grad, param, param_name, toy_gradient):
    del param_name
    grad = tf.convert_to_tensor(grad)
    return [toy_gradient.assign(grad),
            param.assign_sub(self.learning_rate * grad)]


def _tiny_bert_loss():
  config = modeling.BertConfig(vocab_size=40, hidden_size=32,
                               num_hidden_layers=2, num_attention_heads=2,
                               intermediate_size=64, hidden_dropout_prob=0.0,
                               attention_probs_dropout_prob=0.0)
  ids = tf.constant(np.random.RandomState(3).randint(1, 40, size=(2, 8)),
                    tf.int32)
  model = modeling.BertModel(config=config, is_training=True, input_ids=ids)
  return tf.reduce_mean(tf.square(model.get_pooled_output() - 0.5))


def test_a_toy_optimizer_registered_once_trains_a_tiny_bert_one_step():
  with optimizers.registered("toy_sgd", optimizers.from_options(_ToySgd),
                             "plain gradient descent (a test's toy)."):
    # The flag takes it, and the options read from the flag are good.
    values = flags.FlagValues()
    for name in cli_flags.TRAINING_FLAGS:
      define, default, help_text = cli_flags.SHARED_FLAGS[name]
      define(name, default, help_text, flag_values=values)
    values(["prog", "--optimizer=toy_sgd"])
    assert "toy_sgd: plain gradient descent" in values["optimizer"].help
    run = training_options.read_flags(values)
    assert training_options.training_problems(run.training) == []
    options = run.training.optimizer_options
    assert options.optimizer == "toy_sgd"

    with tf.Graph().as_default():
      tf.set_random_seed(1)
      loss = _tiny_bert_loss()
      train_op = optimization.create_optimizer(loss, 0.1, 10, 0, False,
                                               options)
      (kernel,) = [v for v in tf.trainable_variables()
                   if v.op.name == "bert/pooler/dense/kernel"]
      names = {v.op.name for v in tf.global_variables()}
      with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        before = sess.run(kernel)
        sess.run(train_op)
        after, step = sess.run([kernel, tf.train.get_global_step()])
        slot = sess.run([v for v in tf.global_variables()
                         if v.op.name == kernel.op.name + "/toy_gradient"][0])
  assert "bert/pooler/dense/kernel/toy_gradient" in names
  assert not any(name.endswith("/adam_m") for name in names)
  assert step == 1
  assert np.abs(slot).max() > 0
  np.testing.assert_allclose(after, before - 0.1 * slot, rtol=0, atol=1e-7)
  # Gone after the block: the table is as it was.
  assert "toy_sgd" not in optimizers.REGISTRY
  with pytest.raises(ValueError, match="optimizer must be one of"):
    Options(optimizer="toy_sgd")


def test_the_layout_recipe_names_files_that_exist():
  with open(os.path.join(REPO_ROOT, "docs", "layout.md"),
            encoding="utf-8") as f:
    text = f.read()
  section = text.split("## Adding an optimizer", 1)[1].split("\n## ", 1)[0]
  paths = set(re.findall(r"`((?:bert_tf|tests|docs)/[\w/]+\.(?:py|md))`",
                         section))
  assert "bert_tf/train/optimizers.py" in paths
  assert "tests/test_optimizers.py" in paths
  for path in paths:
    assert os.path.exists(os.path.join(REPO_ROOT, path)), path


# ---------------------------------------------------------------------------
# The learning rate: one function, on numbers and on tensors.
# ---------------------------------------------------------------------------


def test_the_learning_rate_on_numbers_and_on_tensors_is_the_reference():
  with open(data_path("conformance", "optimization", "lr_schedule.json")) as f:
    cases = json.load(f)
  for case in cases:
    args = (case["init_lr"], case["num_train_steps"],
            case["num_warmup_steps"])
    expected = np.array(case["learning_rate"], np.float32)
    python = [schedule.learning_rate(step, *args) for step in case["steps"]]
    assert all(isinstance(rate, float) for rate in python)
    # (float32 rounding near the end of the decay, where 1 - p cancels.)
    np.testing.assert_allclose(python, expected, rtol=1e-6, atol=1e-10)
    with tf.Graph().as_default():
      step = tf.placeholder(tf.int64, [])
      rate = schedule.learning_rate(step, *args)
      assert rate.dtype == tf.float32
      with tf.Session() as sess:
        graph = [sess.run(rate, {step: s}) for s in case["steps"]]
    np.testing.assert_array_equal(
        graph, test_optimization.schedule_values(*args, case["steps"]))


@pytest.mark.parametrize("power", [0.5, 2.0])
def test_the_learning_rate_with_a_power_on_numbers_and_tensors(power):
  steps = [0, 1, 2, 3, 7, 10, 12]
  python = [schedule.learning_rate(s, 0.2, 10, 2, power) for s in steps]
  expected = [0.0, 0.1] + [0.2 * (1 - min(s, 10) / 10.0) ** power
                           for s in steps[2:]]
  np.testing.assert_allclose(python, expected, rtol=1e-12)
  with tf.Graph().as_default():
    rates = [schedule.learning_rate(tf.constant(s, tf.int64), 0.2, 10, 2,
                                    power) for s in steps]
    with tf.Session() as sess:
      graph = sess.run(rates)
  np.testing.assert_allclose(graph, expected, rtol=1e-6)


# ---------------------------------------------------------------------------
# adamw_fused.
# ---------------------------------------------------------------------------


def _trajectory(data, options):
  """The conformance graph's 21 states (variables and slots) under
  `options`; the learning rate of each update checked as it goes."""
  states = []
  with tf.Graph().as_default():
    loss = test_optimization._build_tiny_graph(data)  # pylint: disable=protected-access
    train_op = optimization.create_optimizer(
        loss, init_lr=0.05, num_train_steps=20, num_warmup_steps=5,
        use_tpu=False, options=options)
    tracked = {v.op.name: v for v in tf.global_variables()}
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      for step in range(21):
        states.append(sess.run(tracked))
        if step < 20:
          sess.run(train_op)
  return states


@pytest.mark.parametrize("file_name", ["steps.npz", "steps_noclip.npz"])
def test_adamw_fused_follows_the_reference_for_twenty_steps(file_name):
  data = np.load(data_path("conformance", "optimization", file_name))
  states = _trajectory(data, Options(optimizer="adamw_fused"))
  assert len(states[0]) == 6 * 3 + 1  # Same variables and slot names.
  worst = {"variables": 0.0, "adam_m": 0.0, "adam_v": 0.0}
  for step, values in enumerate(states):
    for name, value in values.items():
      kind = name.rsplit("/", 1)[-1]
      kind = kind if kind in worst else "variables"
      worst[kind] = max(worst[kind],
                        float(np.abs(value - data[name][step]).max()))
  # Measured (TF 2.15 and 2.21, CPU): variables 7.2e-7 and 3.6e-7 from the
  # reference's (the reference-style adamw: 6.0e-7, 4.8e-7), adam_m 6.9e-7,
  # adam_v 5e-8 (1.7e-5 of its size: the kernel's (1 - beta_2)).
  assert worst["variables"] <= 1e-6, worst
  assert worst["adam_m"] <= 1e-6 and worst["adam_v"] <= 1e-7, worst


def test_adamw_fused_without_the_scale_correction_would_drift():
  # What the rate and epsilon scaling cancels: the kernel's float32
  # (1 - beta) makes v 1.3e-5 smaller for beta_2 = 0.999.
  first, second = adamw_fused._moment_scales(0.9, 0.999)  # pylint: disable=protected-access
  assert abs(second - 1) == pytest.approx(1.29e-5, rel=1e-2)
  assert abs(first - 1) < 3e-7
  assert adamw_fused._moment_scales(0.5, 0.75) == (1.0, 1.0)  # pylint: disable=protected-access


def _tiny_bert_states(options, steps=3):
  with tf.Graph().as_default():
    tf.set_random_seed(2)
    loss = _tiny_bert_loss()
    train_op = optimization.create_optimizer(loss, 0.01, 10, 1, False,
                                             options)
    graph_def = tf.get_default_graph().as_graph_def()
    # With accumulation the update sits in a cond's branch functions.
    op_types = {node.op for node in graph_def.node} | {
        node.op for function in graph_def.library.function
        for node in function.node_def}
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      start = sess.run({v.op.name: v for v in tf.global_variables()})
      for _ in range(steps * options.gradient_accumulation_steps):
        sess.run(train_op)
      end = sess.run({v.op.name: v for v in tf.global_variables()})
  return start, end, op_types


@pytest.mark.parametrize("accumulation", [1, 2])
def test_adamw_fused_trains_a_tiny_bert_as_adamw_does(accumulation):
  start, plain, plain_ops = _tiny_bert_states(
      Options(gradient_accumulation_steps=accumulation))
  _, fused, fused_ops = _tiny_bert_states(
      Options(optimizer="adamw_fused",
              gradient_accumulation_steps=accumulation))
  assert "ResourceApplyAdam" in fused_ops
  assert "ResourceApplyAdam" not in plain_ops
  assert set(fused) == set(plain)  # Checkpoints interchange.
  assert fused["global_step"] == 3
  for name, value in plain.items():
    if name.startswith("bert/") and not name.endswith(
        ("adam_m", "adam_v", "gradient_accumulator")):
      moved = np.abs(value - start[name]).max()
      assert moved > 0, name  # Every weight trained (decay or gradient).
      error = np.abs(fused[name] - value).max()
      assert error <= max(1e-3 * moved, 2e-7), (name, error, moved)


def test_adamw_fused_decays_only_the_weights_adamw_decays():
  names = ["layer/dense/kernel", "layer/dense/bias", "layer/LayerNorm/gamma"]
  with tf.Graph().as_default():
    variables = [tf.get_variable(n, initializer=tf.constant([2.0, -4.0]))
                 for n in names]
    optimizer = optimization.make_optimizer(
        0.5, Options(optimizer="adamw_fused", weight_decay_rate=0.1))
    update = optimizer.apply_gradients(
        [(tf.zeros([2]), v) for v in variables])
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(update)
      result = dict(zip(names, sess.run(variables)))
  np.testing.assert_allclose(result["layer/dense/kernel"], [1.9, -3.8],
                             rtol=1e-7)
  for name in names[1:]:
    np.testing.assert_array_equal(result[name], [2.0, -4.0])


def test_adamw_fused_falls_back_to_plain_ops_for_reference_variables():
  with tf.Graph().as_default():
    weight = tf.get_variable("w", initializer=tf.constant([1.0, -2.0]),
                             use_resource=False)
    optimizer = optimization.make_optimizer(
        0.1, Options(optimizer="adamw_fused"))
    update = optimizer.apply_gradients([(tf.constant([0.5, 0.5]), weight)])
    op_types = {op.type for op in tf.get_default_graph().get_operations()}
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(update)
      value = sess.run(weight)
  assert "ResourceApplyAdam" not in op_types
  # m = 0.05, v = 0.00025: the update is 0.05 / (0.0158 + 1e-6) + decay.
  step = 0.05 / (np.sqrt(0.00025) + 1e-6)
  np.testing.assert_allclose(value, [1.0 - 0.1 * (step + 0.01),
                                     -2.0 - 0.1 * (step - 0.02)], rtol=1e-6)
