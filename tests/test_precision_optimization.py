"""Tests of the optimizer additions: LAMB, accumulation, fp16, strategies."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from helpers import REPO_ROOT
import modeling
import optimization

Options = optimization.OptimizerOptions


# ---------------------------------------------------------------------------
# Options.
# ---------------------------------------------------------------------------


def test_options_defaults_are_the_reference_training():
  options = Options()
  assert (options.optimizer, options.weight_decay_rate, options.beta_1,
          options.beta_2, options.epsilon, options.clip_norm,
          options.poly_power, options.gradient_accumulation_steps,
          options.loss_scaling) == ("adamw", 0.01, 0.9, 0.999, 1e-6, 1.0,
                                    1.0, 1, False)
  assert options.exclude_from_weight_decay == ("LayerNorm", "layer_norm",
                                               "bias")
  # The compute dtype is the model's argument, not an optimizer setting.
  assert not hasattr(options, "precision")
  assert not hasattr(options, "compute_dtype")


@pytest.mark.parametrize("kwargs,message", [
    (dict(optimizer="sgd"), "optimizer must be one of adamw, lamb"),
    (dict(loss_scaling="fp16"), "loss_scaling must be a bool"),
    (dict(gradient_accumulation_steps=0), "gradient_accumulation_steps"),
    (dict(gradient_accumulation_steps=2.5), "gradient_accumulation_steps"),
    (dict(poly_power=0.0), "poly_power"),
    (dict(clip_norm=-1.0), "clip_norm"),
    (dict(initial_loss_scale=0.5), "initial_loss_scale"),
    (dict(loss_scale_growth_steps=0), "loss_scale_growth_steps"),
])
def test_bad_options_raise_one_line_value_errors(kwargs, message):
  with pytest.raises(ValueError, match=message) as info:
    Options(**kwargs)
  assert "\n" not in str(info.value)


def test_bf16_model_gets_the_default_train_op_without_loss_scale():
  with tf.Graph().as_default() as graph:
    weight = tf.get_variable("w", initializer=1.0)
    half = tf.cast(weight, tf.bfloat16)
    optimization.create_optimizer(tf.cast(half * half, tf.float32), 0.1, 10,
                                  0, False, Options())
    names = {v.op.name for v in tf.global_variables()}
    op_types = {op.type for op in graph.get_operations()}
  assert names == {"w", "w/adam_m", "w/adam_v", "global_step"}
  assert "Switch" not in op_types  # No tf.cond: the reference's op.


# ---------------------------------------------------------------------------
# Polynomial power.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("power", [0.5, 2.0])
def test_poly_power_sets_the_decay_curve(power):
  with tf.Graph().as_default():
    weight = tf.get_variable("w", initializer=1.0)
    optimization.create_optimizer(weight * weight, 0.2, 10, 2, False,
                                  Options(poly_power=power))
    (learning_rate,) = tf.get_collection(
        optimization.LEARNING_RATE_COLLECTION)
    step = tf.placeholder(tf.int64, [])
    set_step = tf.assign(tf.train.get_global_step(), step)
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      values = []
      for s in range(12):
        sess.run(set_step, {step: s})
        values.append(sess.run(learning_rate))
  expected = [0.2 * s / 2 if s < 2 else 0.2 * (1 - min(s, 10) / 10) ** power
              for s in range(12)]
  np.testing.assert_allclose(values, expected, rtol=1e-5, atol=1e-7)


# ---------------------------------------------------------------------------
# LAMB.
# ---------------------------------------------------------------------------


def _numpy_lamb(params, grads_per_step, lr, decay, excluded, beta_1=0.9,
                beta_2=0.999, epsilon=1e-6):
  """LAMB (You et al. 2019, algorithm 2) by hand in float64."""
  params = {k: v.astype(np.float64) for k, v in params.items()}
  m = {k: np.zeros_like(v) for k, v in params.items()}
  v = {k: np.zeros_like(p) for k, p in params.items()}
  for t, grads in enumerate(grads_per_step, start=1):
    for name, grad in grads.items():
      m[name] = beta_1 * m[name] + (1 - beta_1) * grad
      v[name] = beta_2 * v[name] + (1 - beta_2) * grad**2
      m_hat = m[name] / (1 - beta_1**t)
      v_hat = v[name] / (1 - beta_2**t)
      update = m_hat / (np.sqrt(v_hat) + epsilon)
      if name not in excluded:
        update = update + decay * params[name]
      w_norm, u_norm = np.linalg.norm(params[name]), np.linalg.norm(update)
      ratio = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
      params[name] = params[name] - lr * ratio * update
  return params, m, v


def test_lamb_two_steps_match_numpy_by_hand():
  rng = np.random.RandomState(3)
  start = {"layer/dense/kernel": rng.randn(3, 2).astype(np.float32),
           "layer/dense/bias": np.zeros([2], np.float32),  # ||w|| = 0.
           "layer/LayerNorm/gamma": rng.randn(2).astype(np.float32)}
  grads = [{k: rng.randn(*v.shape).astype(np.float32)
            for k, v in start.items()} for _ in range(2)]
  grads[1]["layer/LayerNorm/gamma"][:] = 0.0  # ||update|| of gamma still > 0.
  with tf.Graph().as_default():
    variables = {k: tf.get_variable(k, initializer=tf.constant(v))
                 for k, v in start.items()}
    feeds = {k: tf.placeholder(tf.float32, v.shape) for k, v in start.items()}
    optimizer = optimization.LAMBOptimizer(
        learning_rate=0.1, weight_decay_rate=0.01,
        exclude_from_weight_decay=["LayerNorm", "layer_norm", "bias"])
    update = optimizer.apply_gradients(
        [(feeds[k], variables[k]) for k in start])
    names = sorted(v.op.name for v in tf.global_variables())
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      for step_grads in grads:
        sess.run(update, {feeds[k]: g for k, g in step_grads.items()})
      actual = sess.run(variables)
      moments = {k: sess.run([optimizer.get_slot(variables[k], "lamb_m"),
                              optimizer.get_slot(variables[k], "lamb_v")])
                 for k in start}
      (count,) = [v for v in tf.global_variables()
                  if v.op.name == "lamb/update_count"]
      assert sess.run(count) == 2
  expected, m, v = _numpy_lamb(start, grads, 0.1, 0.01,
                               excluded={"layer/dense/bias",
                                         "layer/LayerNorm/gamma"})
  for name in start:
    np.testing.assert_allclose(actual[name], expected[name], rtol=1e-5,
                               atol=1e-6, err_msg=name)
    np.testing.assert_allclose(moments[name][0], m[name], rtol=1e-5,
                               atol=1e-7)
    np.testing.assert_allclose(moments[name][1], v[name], rtol=1e-5,
                               atol=1e-9)
  assert names == sorted(
      ["lamb/update_count"] + list(start) +
      [k + "/lamb_m" for k in start] + [k + "/lamb_v" for k in start])
  assert optimizer.get_slot_names() == ["lamb_m", "lamb_v"]
  # The trust ratio moved the kernel by lr * ||w|| per step, not lr * ||u||.
  assert not np.allclose(actual["layer/dense/kernel"],
                         start["layer/dense/kernel"], atol=1e-3)


def test_lamb_first_step_moves_each_layer_by_lr_times_its_norm():
  """Trust ratio: ||delta w|| = lr * ||w|| whatever the gradient's size."""
  with tf.Graph().as_default():
    kernel = tf.get_variable("a/kernel", initializer=[[3.0, 4.0]])  # ||w||=5
    optimizer = optimization.LAMBOptimizer(learning_rate=0.01)
    update = optimizer.apply_gradients([(tf.constant([[1e-3, -7.0]]),
                                         kernel)])
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(update)
      moved = sess.run(kernel) - np.array([[3.0, 4.0]])
  np.testing.assert_allclose(np.linalg.norm(moved), 0.01 * 5.0, rtol=1e-5)


# ---------------------------------------------------------------------------
# Gradient accumulation.
# ---------------------------------------------------------------------------

_TINY = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2,
             num_attention_heads=4, intermediate_size=37,
             max_position_embeddings=64, type_vocab_size=2)


def _batches(num_examples, seq_length=8, seed=0):
  rng = np.random.RandomState(seed)
  ids = rng.randint(1, 99, size=(num_examples, seq_length)).astype(np.int32)
  mask = np.ones_like(ids)
  mask[:, -2:] = rng.randint(0, 2, size=(num_examples, 2))
  targets = rng.randn(num_examples, 32).astype(np.float32)
  return ids, mask, targets


def _train_tiny_bert(options, micro_batches, num_updates=3, init_lr=0.05,
                     checkpoint_after=None, tmp_path=None):
  """Trains the tiny encoder (dropout off) and returns its variables.

  `micro_batches`: list of (ids, mask, targets) fed in turn, cycling.
  Loss: mean over the batch of the squared distance of the pooled output to
  a target, times 50 so that clipping at norm 1.0 is active.
  With `checkpoint_after=k`, the graph is saved after k runs and rebuilt
  from the checkpoint in a fresh graph and session (a restart).
  """
  runs = num_updates * options.gradient_accumulation_steps
  state, done, results = None, 0, None
  while results is None:
    with tf.Graph().as_default():
      ids = tf.placeholder(tf.int32, [None, 8])
      mask = tf.placeholder(tf.int32, [None, 8])
      targets = tf.placeholder(tf.float32, [None, 32])
      tf.set_random_seed(7)
      model = modeling.BertModel(modeling.BertConfig(**_TINY),
                                 is_training=False, input_ids=ids,
                                 input_mask=mask)
      loss = 50.0 * tf.reduce_mean(tf.reduce_sum(
          tf.square(model.get_pooled_output() - targets), axis=-1))
      train_op = optimization.create_optimizer(loss, init_lr, 6, 1, False,
                                               options)
      saver = tf.train.Saver()
      with tf.Session() as sess:
        if state is None:
          sess.run(tf.global_variables_initializer())
        else:
          saver.restore(sess, state)
        stop = runs if checkpoint_after is None or state else checkpoint_after
        while done < stop:
          batch = micro_batches[done % len(micro_batches)]
          sess.run(train_op, {ids: batch[0], mask: batch[1],
                              targets: batch[2]})
          done += 1
        if done < runs:
          state = saver.save(sess, str(tmp_path / "mid.ckpt"))
          continue
        results = sess.run({v.op.name: v for v in tf.global_variables()})
  return results


@pytest.mark.slow
@pytest.mark.parametrize("optimizer", ["adamw", "lamb", "adamw_fused"])
def test_accumulating_micro_batches_equals_one_large_batch(optimizer):
  ids, mask, targets = _batches(4 * 3)
  large = [(ids[4 * u:4 * u + 4], mask[4 * u:4 * u + 4],
            targets[4 * u:4 * u + 4]) for u in range(3)]
  small = [(ids[i:i + 1], mask[i:i + 1], targets[i:i + 1])
           for i in range(12)]
  start = _train_tiny_bert(Options(optimizer=optimizer), large,
                           num_updates=0)
  once = _train_tiny_bert(Options(optimizer=optimizer), large)
  accumulated = _train_tiny_bert(
      Options(optimizer=optimizer, gradient_accumulation_steps=4), small)
  assert once["global_step"] == 3
  assert accumulated["global_step"] == 3
  assert accumulated["gradient_accumulation/micro_steps"] == 12
  kernel = "bert/pooler/dense/kernel"
  assert np.abs(once[kernel] - start[kernel]).max() > 1e-3  # It trained.
  for name in start:
    if name.startswith("bert/"):
      # Float32 sums in another order, which Adam's division magnifies for
      # near-zero gradients: compare to how far 3 updates moved the variable
      # (measured: under 0.1% of it).
      moved = np.abs(once[name] - start[name]).max()
      error = np.abs(accumulated[name] - once[name]).max()
      assert error <= max(2e-3 * moved, 1e-6), (name, error, moved)
    accumulator = name + "/gradient_accumulator"
    if accumulator in accumulated:  # Zeroed after each update.
      assert not accumulated[accumulator].any()


@pytest.mark.slow
def test_accumulation_restart_mid_update_resumes_exactly(tmp_path):
  ids, mask, targets = _batches(6, seed=2)
  small = [(ids[i:i + 1], mask[i:i + 1], targets[i:i + 1]) for i in range(6)]
  options = Options(gradient_accumulation_steps=3)
  straight = _train_tiny_bert(options, small, num_updates=2)
  restarted = _train_tiny_bert(options, small, num_updates=2,
                               checkpoint_after=4, tmp_path=tmp_path)
  for name, value in straight.items():
    np.testing.assert_allclose(restarted[name], value, rtol=1e-6, atol=1e-7,
                               err_msg=name)


def test_accumulation_advances_global_step_once_per_update():
  with tf.Graph().as_default():
    weight = tf.get_variable("w", initializer=[1.0, 2.0])
    x = tf.placeholder(tf.float32, [2])
    # Gradients near Adam's epsilon (1e-6), where the update depends on their
    # size: it tells the mean of the micro-batches from their sum.
    train_op = optimization.create_optimizer(
        1e-6 * tf.reduce_sum(weight * x), 0.1, 10, 0, False,
        Options(gradient_accumulation_steps=3, weight_decay_rate=0.0))
    accumulator = [v for v in tf.global_variables()
                   if v.op.name == "w/gradient_accumulator"][0]
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      steps, moved = [], []
      for feed in ([1.0, 0.0], [2.0, 0.0], [3.0, 0.0], [1.0, 1.0]):
        before = sess.run(weight)
        sess.run(train_op, {x: feed})
        steps.append(sess.run(tf.train.get_global_step()))
        moved.append(not np.array_equal(before, sess.run(weight)))
      assert steps == [0, 0, 1, 1]
      assert moved == [False, False, True, False]
      np.testing.assert_allclose(sess.run(accumulator), [1e-6, 1e-6])
      # Adam's first update of the mean gradient g = 2e-6 at lr(0) = 0.1:
      # 0.1 * 0.1 g / (sqrt(0.001 g^2) + 1e-6).
      g = 2e-6
      np.testing.assert_allclose(
          sess.run(weight),
          [1.0 - 0.1 * 0.1 * g / (np.sqrt(0.001 * g * g) + 1e-6), 2.0],
          rtol=1e-5)


# ---------------------------------------------------------------------------
# fp16 dynamic loss scaling.
# ---------------------------------------------------------------------------


def _loss_scale_graph(accumulation=1, growth_steps=3):
  weight = tf.get_variable("layer/kernel", initializer=[1.0, -2.0])
  x = tf.placeholder(tf.float32, [2])
  loss = tf.reduce_sum(weight * x)
  train_op = optimization.create_optimizer(
      loss, 0.1, 100, 0, False,
      Options(loss_scaling=True, initial_loss_scale=8.0,
              loss_scale_growth_steps=growth_steps,
              gradient_accumulation_steps=accumulation))
  (scale,) = tf.get_collection(optimization.LOSS_SCALE_COLLECTION)
  (skipped,) = tf.get_collection(optimization.SKIPPED_UPDATES_COLLECTION)
  return weight, x, train_op, scale, skipped


def test_fp16_inf_gradient_skips_update_and_halves_scale():
  with tf.Graph().as_default():
    weight, x, train_op, scale, skipped = _loss_scale_graph()
    global_step = tf.train.get_global_step()
    (learning_rate,) = tf.get_collection(
        optimization.LEARNING_RATE_COLLECTION)
    # learning_rate, loss_scale, skipped_updates.
    assert len(tf.get_collection(tf.GraphKeys.SUMMARIES)) == 3
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(train_op, {x: [1.0, 1.0]})
      after_first = sess.run([weight, global_step, scale, skipped])
      rate_before = sess.run(learning_rate)
      adam_m = [v for v in tf.global_variables()
                if v.op.name == "layer/kernel/adam_m"][0]
      m_before = sess.run(adam_m)
      sess.run(train_op, {x: [np.inf, 1.0]})  # Injected inf gradient.
      np.testing.assert_array_equal(sess.run(weight), after_first[0])
      np.testing.assert_array_equal(sess.run(adam_m), m_before)
      assert sess.run(global_step) == after_first[1] == 1
      assert sess.run(learning_rate) == rate_before
      assert sess.run(scale) == 4.0 and after_first[2] == 8.0
      assert sess.run(skipped) == 1 and after_first[3] == 0
      sess.run(train_op, {x: [np.nan, 1.0]})
      assert sess.run(scale) == 2.0 and sess.run(skipped) == 2
      sess.run(train_op, {x: [1.0, 1.0]})
      assert sess.run(global_step) == 2
      summary_values = sess.run(tf.summary.merge_all())
  proto = tf.Summary.FromString(summary_values)
  values = {v.tag: v.simple_value for v in proto.value}
  assert values["loss_scale"] == 2.0
  assert values["skipped_updates"] == 2.0


def test_fp16_scale_doubles_after_a_run_of_finite_steps():
  with tf.Graph().as_default():
    _, x, train_op, scale, _ = _loss_scale_graph(growth_steps=3)
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      scales = []
      for feed in ([1, 1], [1, 1], [1, 1], [1, 1], [np.inf, 1], [1, 1]):
        sess.run(train_op, {x: feed})
        scales.append(sess.run(scale))
  assert scales == [8.0, 8.0, 16.0, 16.0, 8.0, 8.0]


def test_fp16_gradients_are_unscaled():
  """The applied update is the one of the unscaled gradient (SGD-like check)."""
  with tf.Graph().as_default():
    weight, x, train_op, _, _ = _loss_scale_graph()
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(train_op, {x: [0.5, 0.0]})
      moved = sess.run(weight) - np.array([1.0, -2.0])
  # Adam's first step moves by lr * 0.1g / (sqrt(0.001 g^2) + eps): about
  # lr * 3.162 for any g >> eps; zero gradient -> only weight decay.
  np.testing.assert_allclose(moved[0], -0.1 * (0.05 / (np.sqrt(0.00025) +
                                                        1e-6) + 0.01 * 1.0),
                             rtol=1e-4)


def test_fp16_inf_micro_batch_does_not_advance_accumulation():
  with tf.Graph().as_default():
    weight, x, train_op, _, skipped = _loss_scale_graph(accumulation=2)
    micro = [v for v in tf.global_variables()
             if v.op.name == "gradient_accumulation/micro_steps"][0]
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(train_op, {x: [1.0, 1.0]})
      sess.run(train_op, {x: [np.inf, 1.0]})
      assert sess.run(micro) == 1 and sess.run(skipped) == 1
      assert sess.run(tf.train.get_global_step()) == 0
      sess.run(train_op, {x: [1.0, 1.0]})
      assert sess.run(micro) == 2
      assert sess.run(tf.train.get_global_step()) == 1
      assert np.isfinite(sess.run(weight)).all()


# ---------------------------------------------------------------------------
# tf.distribute: two logical CPU devices in a fresh process.
# ---------------------------------------------------------------------------

# argv: optimizer, accumulation steps N, precision, output .npz. Trains
# 3 updates of N micro-batches of 4 examples on one device, and the same on
# two replicas (2 examples each). With fp16 a last micro-batch has an inf
# loss on replica 1 only.
_DISTRIBUTED_SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    import tensorflow as tf2
    cpu = tf2.config.list_physical_devices("CPU")[0]
    tf2.config.set_logical_device_configuration(
        cpu, [tf2.config.LogicalDeviceConfiguration()] * 2)
    import tensorflow.compat.v1 as tf
    import modeling
    import optimization

    optimizer_name, num_micro = sys.argv[1], int(sys.argv[2])
    precision, out_path = sys.argv[3], sys.argv[4]
    rng = np.random.RandomState(0)
    IDS = rng.randint(1, 99, size=(4 * num_micro, 8)).astype(np.int32)
    TARGETS = rng.randn(4 * num_micro, 32).astype(np.float32)
    CONFIG = modeling.BertConfig(vocab_size=99, hidden_size=32,
                                 num_hidden_layers=2, num_attention_heads=4,
                                 intermediate_size=37, type_vocab_size=2)

    def build(rows, factor=1.0):
      tf.set_random_seed(3)
      model = modeling.BertModel(CONFIG, is_training=False,
                                 input_ids=tf.gather(tf.constant(IDS), rows))
      targets = tf.gather(tf.constant(TARGETS), rows)
      loss = 20.0 * factor * tf.reduce_mean(tf.reduce_sum(
          tf.square(model.get_pooled_output() - targets), axis=-1))
      return optimization.create_optimizer(
          loss, 0.02, 10, 2, False,
          optimization.OptimizerOptions(
              optimizer=optimizer_name, loss_scaling=(precision == "fp16"),
              gradient_accumulation_steps=num_micro))

    def values(sess, collection=tf.GraphKeys.GLOBAL_VARIABLES):
      out = {}
      for v in tf.get_collection(collection):
        copies = getattr(v, "values", (v,))
        for i, copy in enumerate(copies):
          out["%s@%d" % (copies[0].op.name, i)] = sess.run(copy)
      return out

    def train(sess, train_op, micro):
      for _ in range(3):
        for k in range(num_micro):
          sess.run(train_op, {micro: k})

    results = {}
    with tf.Graph().as_default():  # One device, micro-batches of 4.
      micro = tf.placeholder(tf.int32, [])
      build(tf.range(4) + 4 * micro)
      train_op = tf.get_default_graph().get_operation_by_name("train_op")
      with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        init = values(sess)
        results.update({"init/" + k: v for k, v in init.items()})
        train(sess, train_op, micro)
        results.update({"single/" + k: v for k, v in values(sess).items()})
    with tf.Graph().as_default():  # Two replicas, 2 examples each.
      micro = tf.placeholder(tf.int32, [])
      factor = tf.placeholder_with_default(1.0, [])
      strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
      with strategy.scope():
        def replica_fn():
          replica = tf.distribute.get_replica_context().replica_id_in_sync_group
          return build(tf.range(2) + 2 * replica + 4 * micro,
                       tf.where(tf.equal(replica, 1), factor, 1.0))
        train_op = strategy.group(
            strategy.extended.call_for_each_replica(replica_fn))
      with tf.Session() as sess:
        sess.run([tf.global_variables_initializer(),
                  tf.local_variables_initializer()])
        # Same initial values as the single-device graph (same seeds).
        for k, v in values(sess).items():
          base = k.rsplit("@", 1)[0] + "@0"
          np.testing.assert_array_equal(v, init[base], err_msg=k)
        train(sess, train_op, micro)
        results.update({"mirrored/" + k: v for k, v in values(sess).items()})
        if precision == "fp16":
          sess.run(train_op, {micro: 0, factor: np.inf})
          after = values(sess)
          after.update(values(sess, tf.GraphKeys.LOCAL_VARIABLES))
          results.update({"overflow/" + k: v for k, v in after.items()})
    np.savez(out_path, **results)
    """)


def _run_distributed(tmp_path, optimizer, num_micro=1, precision="fp32"):
  """{phase: {variable name: {replica: value}}}, phases as in the script."""
  out = tmp_path / "results.npz"
  env = dict(os.environ, PYTHONPATH=REPO_ROOT, TF_CPP_MIN_LOG_LEVEL="2")
  proc = subprocess.run(
      [sys.executable, "-c", _DISTRIBUTED_SCRIPT, optimizer, str(num_micro),
       precision, str(out)],
      capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  data = np.load(out)
  phases = {}
  for key in data.files:
    phase, rest = key.split("/", 1)
    name, replica = rest.rsplit("@", 1)
    phases.setdefault(phase, {}).setdefault(name, {})[int(replica)] = data[key]
  return phases


@pytest.mark.slow
@pytest.mark.parametrize("optimizer,num_micro,precision", [
    # fp32 AdamW and LAMB, with and without micro-batches, run through
    # run_pretraining.py in test_distribute.py; fp16's loss scale here.
    ("lamb", 2, "fp16")])
def test_mirrored_replicas_stay_identical_and_match_one_device(
    optimizer, num_micro, precision, tmp_path):
  phases = _run_distributed(tmp_path, optimizer, num_micro, precision)
  single = {name: copies[0] for name, copies in phases["single"].items()}
  init = {name: copies[0] for name, copies in phases["init"].items()}
  replicas = phases["mirrored"]
  # One device checkpoints the accumulation state; under a strategy it is in
  # per-replica local variables.
  local = {name for name in single if "gradient_accumulat" in name}
  assert bool(local) == (num_micro > 1)
  assert set(replicas) == set(single) - local
  slot = "lamb_m" if optimizer == "lamb" else "adam_m"
  assert "bert/pooler/dense/kernel/" + slot in replicas
  assert single["global_step"] == 3
  kernel = "bert/pooler/dense/kernel"
  assert np.abs(single[kernel] - init[kernel]).max() > 1e-4  # It trained.
  for name, copies in replicas.items():
    assert sorted(copies) == [0, 1], name  # Mirrored on both devices.
    np.testing.assert_array_equal(copies[0], copies[1], err_msg=name)
    if name.startswith("bert/") and "/" + slot[:-1] not in name:
      # Two half-batch gradients averaged vs one: float32 sums in another
      # order. Compare to how far 3 updates moved the variable.
      # (The key biases have a zero gradient, softmax being shift-invariant,
      # and barely move.)
      moved = np.abs(single[name] - init[name]).max()
      error = np.abs(copies[0] - single[name]).max()
      assert error <= max(2e-3 * moved, 1e-6), (name, error, moved)
    else:
      np.testing.assert_allclose(copies[0], single[name], rtol=1e-3,
                                 atol=1e-6, err_msg=name)
  if precision == "fp16":
    # 6 finite micro-batches, then one whose loss is inf on replica 1 only:
    # both replicas skip it, and both halve the scale.
    after = phases["overflow"]
    assert single["loss_scale/good_steps"] == 3 * num_micro
    for name, copies in after.items():
      assert sorted(copies) == [0, 1], name
      np.testing.assert_array_equal(copies[0], copies[1], err_msg=name)
    assert after["loss_scale"][0] == replicas["loss_scale"][0] / 2
    assert after["loss_scale/skipped_updates"][0] == 1
    assert after["loss_scale/good_steps"][0] == 0
    assert after["gradient_accumulation/micro_steps"][0] == 3 * num_micro
    for name, copies in replicas.items():
      if not name.startswith("loss_scale"):
        np.testing.assert_array_equal(after[name][0], copies[0],
                                      err_msg=name)
