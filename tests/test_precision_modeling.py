"""Tests for BertModel's compute_dtype: bfloat16/float16 encoders, float32 state."""

import os

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from helpers import data_path
import modeling


def _conformance(name):
  return data_path("conformance", "modeling", name)


_CHECKPOINT = os.path.join(os.path.dirname(_conformance("bert_config.json")),
                           "bert_model.ckpt")


def _conformance_model(compute_dtype, is_training=False,
                       cast_weights_once=False):
  """The tiny conformance model on its inputs, in the default graph."""
  inputs = np.load(_conformance("inputs.npz"))
  return modeling.BertModel(
      modeling.BertConfig.from_json_file(_conformance("bert_config.json")),
      is_training=is_training, input_ids=tf.constant(inputs["input_ids"]),
      input_mask=tf.constant(inputs["input_mask"]),
      token_type_ids=tf.constant(inputs["token_type_ids"]),
      compute_dtype=compute_dtype, cast_weights_once=cast_weights_once)


def _encoder_outputs(compute_dtype, is_training=False):
  """Runs the tiny conformance model from its checkpoint in `compute_dtype`.

  Returns (outputs dict, {variable name: dtype}, {graph dtype of gradients}).
  """
  with tf.Graph().as_default():
    model = _conformance_model(compute_dtype, is_training)
    assignment_map, _ = modeling.get_assignment_map_from_checkpoint(
        tf.trainable_variables(), _CHECKPOINT)
    tf.train.init_from_checkpoint(_CHECKPOINT, assignment_map)
    variables = {v.op.name: v.dtype.base_dtype for v in tf.global_variables()}
    grads = tf.gradients(tf.reduce_sum(model.get_pooled_output()),
                         tf.trainable_variables())
    grad_dtypes = {g.dtype.base_dtype for g in grads if g is not None}
    fetches = {"sequence_output": model.get_sequence_output(),
               "pooled_output": model.get_pooled_output(),
               "embedding_output": model.get_embedding_output(),
               "layer_0": model.get_all_encoder_layers()[0]}
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      return sess.run(fetches), variables, grad_dtypes


def test_bfloat16_encoder_is_close_to_float32_with_float32_variables():
  expected, fp32_vars, _ = _encoder_outputs(tf.float32)
  actual, bf16_vars, grad_dtypes = _encoder_outputs(tf.bfloat16)
  # Same variables, same names, all float32: checkpoints interchange.
  assert bf16_vars == fp32_vars
  assert len(bf16_vars) == 39
  assert set(bf16_vars.values()) == {tf.float32}
  assert grad_dtypes == {tf.float32}
  for key, value in actual.items():
    assert value.dtype == np.float32, key
  # bfloat16 keeps 8 significant bits (relative step 2^-8 = 0.4%); the
  # outputs are layer-normed, |x| < 4. Measured: 0.028 max, 0.0015 pooled.
  np.testing.assert_allclose(actual["sequence_output"],
                             expected["sequence_output"], rtol=0, atol=0.08)
  np.testing.assert_allclose(actual["pooled_output"],
                             expected["pooled_output"], rtol=0, atol=0.01)
  diff = np.abs(actual["sequence_output"] - expected["sequence_output"])
  assert diff.mean() < 0.01
  # ... and it really ran in bfloat16 (not silently in float32).
  assert diff.max() > 1e-4


def test_float16_graph_builds_and_runs_close_to_float32():
  expected, fp32_vars, _ = _encoder_outputs(tf.float32)
  actual, fp16_vars, grad_dtypes = _encoder_outputs(tf.float16)
  assert fp16_vars == fp32_vars
  assert grad_dtypes == {tf.float32}
  np.testing.assert_allclose(actual["sequence_output"],
                             expected["sequence_output"], rtol=0, atol=0.03)
  assert np.abs(actual["sequence_output"] -
                expected["sequence_output"]).max() > 1e-5


def test_float32_compute_dtype_builds_no_cast_ops():
  """The default graph is the reference's: nothing is cast."""
  with tf.Graph().as_default() as graph:
    config = modeling.BertConfig(vocab_size=99, hidden_size=32,
                                 num_hidden_layers=2, num_attention_heads=4,
                                 intermediate_size=37)
    modeling.BertModel(config, is_training=True,
                       input_ids=tf.zeros([2, 5], tf.int32))
    casts = [op for op in graph.get_operations() if op.type == "Cast"
             and op.outputs[0].dtype != tf.float32]
    float_casts = [op for op in graph.get_operations() if op.type == "Cast"
                   and op.inputs[0].dtype.base_dtype == tf.float32]
  assert not casts
  assert not float_casts


def test_bfloat16_model_casts_matmuls_and_keeps_softmax_in_float32():
  with tf.Graph().as_default() as graph:
    config = modeling.BertConfig(vocab_size=99, hidden_size=32,
                                 num_hidden_layers=1, num_attention_heads=4,
                                 intermediate_size=37)
    modeling.BertModel(config, is_training=True,
                       input_ids=tf.zeros([2, 5], tf.int32),
                       compute_dtype=tf.bfloat16)
    ops = graph.get_operations()
  matmul_dtypes = {op.outputs[0].dtype for op in ops
                   if op.type in ("MatMul", "BatchMatMulV2")}
  softmax_dtypes = {op.outputs[0].dtype for op in ops if op.type == "Softmax"}
  moments_dtypes = {op.outputs[0].dtype for op in ops
                    if op.type == "Rsqrt"}
  # The pooler and the embeddings' one-hot type matmul are bfloat16 too.
  assert matmul_dtypes == {tf.bfloat16}
  assert softmax_dtypes == {tf.float32}
  assert moments_dtypes == {tf.float32}


def test_bfloat16_checkpoint_loads_in_float32_and_back(tmp_path):
  config = modeling.BertConfig(vocab_size=99, hidden_size=32,
                               num_hidden_layers=2, num_attention_heads=4,
                               intermediate_size=37)
  ids = np.array([[5, 7, 9, 0]], np.int32)
  prefix = str(tmp_path / "model.ckpt")
  outputs = {}
  for dtype, save in ((tf.bfloat16, True), (tf.float32, False),
                      (tf.float16, False)):
    with tf.Graph().as_default():
      model = modeling.BertModel(config, is_training=False,
                                 input_ids=tf.constant(ids),
                                 compute_dtype=dtype)
      saver = tf.train.Saver()
      with tf.Session() as sess:
        if save:
          sess.run(tf.global_variables_initializer())
          saver.save(sess, prefix)
        else:
          saver.restore(sess, prefix)
        outputs[dtype.name] = sess.run(model.get_pooled_output())
  np.testing.assert_allclose(outputs["float32"], outputs["bfloat16"],
                             atol=0.02)
  np.testing.assert_allclose(outputs["float32"], outputs["float16"],
                             atol=0.005)


def test_unknown_compute_dtype_raises():
  with tf.Graph().as_default():
    config = modeling.BertConfig(vocab_size=9, hidden_size=8,
                                 num_hidden_layers=1, num_attention_heads=2,
                                 intermediate_size=8)
    with pytest.raises(ValueError, match="compute_dtype.*float64"):
      modeling.BertModel(config, is_training=False,
                         input_ids=tf.zeros([1, 3], tf.int32),
                         compute_dtype=tf.float64)


def test_bfloat16_dropout_runs_when_training():
  with tf.Graph().as_default():
    config = modeling.BertConfig(vocab_size=99, hidden_size=32,
                                 num_hidden_layers=1, num_attention_heads=4,
                                 intermediate_size=37)
    model = modeling.BertModel(config, is_training=True,
                               input_ids=tf.ones([2, 5], tf.int32),
                               compute_dtype=tf.bfloat16)
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      first, second = sess.run(model.get_sequence_output()), sess.run(
          model.get_sequence_output())
  assert np.isfinite(first).all()
  assert not np.array_equal(first, second)


def _weight_casts(graph, fetches):
  """Cast nodes that the step computing `fetches` runs on a kernel or bias
  (a Cast of a ReadVariableOp of a `.../kernel` or `.../bias` variable)."""
  step = tf.graph_util.extract_sub_graph(
      graph.as_graph_def(), [t.op.name for t in fetches])
  nodes = {node.name: node for node in step.node}
  def read_variable(name):
    node = nodes[name.split(":")[0]]
    return (node.input[0].split(":")[0] if node.op == "ReadVariableOp"
            else "")
  return [node.name for node in step.node if node.op == "Cast" and
          read_variable(node.input[0]).endswith(("/kernel", "/bias"))]


def _restored_bfloat16_outputs(cast_weights_once):
  """The conformance model in bfloat16, restored as the scripts restore it:
  a `MonitoredSession` (checkpoint first, then the local initializer).

  Returns (sequence and pooled outputs, {local variable: dtype}, the Cast
  nodes on weights that one step runs).
  """
  with tf.Graph().as_default() as graph:
    model = _conformance_model(tf.bfloat16,
                               cast_weights_once=cast_weights_once)
    fetches = [model.get_sequence_output(), model.get_pooled_output()]
    local = {v.op.name: v.dtype.base_dtype for v in tf.local_variables()}
    assert not set(local) & {v.op.name for v in tf.global_variables()}
    assert not set(local) & {v.op.name for v in tf.trainable_variables()}
    casts = _weight_casts(graph, fetches)
    creator = tf.train.ChiefSessionCreator(
        checkpoint_filename_with_path=_CHECKPOINT)
    with tf.train.MonitoredSession(session_creator=creator) as sess:
      return sess.run(fetches), local, casts


def test_cast_weights_once_reads_the_restored_weights_cast_once():
  """The inference graphs' bfloat16 weight copies (the scripts' PREDICT and
  EVAL graphs) hold the restored checkpoint's values: the outputs are those
  of casting on every step, bit for bit, and no step casts a weight."""
  expected, no_local, per_step_casts = _restored_bfloat16_outputs(False)
  actual, local, once_casts = _restored_bfloat16_outputs(True)
  assert not no_local
  # 2 layers x 6 dense layers + the pooler, a kernel and a bias each.
  assert len(local) == 26
  assert set(local.values()) == {tf.bfloat16}
  assert "bert/encoder/layer_1/intermediate/dense/kernel_bfloat16" in local
  assert "bert/pooler/dense/bias_bfloat16" in local
  assert len(per_step_casts) == 26
  assert not once_casts
  for got, want in zip(actual, expected):
    np.testing.assert_array_equal(got, want)


def test_cast_weights_once_makes_no_copies_in_float32():
  with tf.Graph().as_default():
    config = modeling.BertConfig(vocab_size=99, hidden_size=32,
                                 num_hidden_layers=1, num_attention_heads=4,
                                 intermediate_size=37)
    modeling.BertModel(config, is_training=False,
                       input_ids=tf.zeros([2, 5], tf.int32),
                       cast_weights_once=True)
    assert not tf.local_variables()


@pytest.mark.parametrize("dtype", [tf.bfloat16, tf.float16])
def test_low_precision_dropout_drops_at_the_rate_and_rescales(dtype):
  """bfloat16/float16 dropout draws its uniform numbers in float32: it
  keeps each value with chance 0.9 and scales the kept ones by 1/0.9."""
  with tf.Graph().as_default():
    tf.set_random_seed(3)
    dropped = modeling.dropout(tf.ones([400, 500], dtype), 0.1)
    assert dropped.dtype == dtype
    with tf.Session() as sess:
      values = sess.run(tf.cast(dropped, tf.float32))
  kept = values != 0
  # 200,000 draws: the kept share's standard deviation is 0.0007.
  assert abs(kept.mean() - 0.9) < 0.004
  np.testing.assert_array_equal(np.unique(values[kept]),
                                [_rounded(1 / 0.9, dtype)])


def _rounded(value, dtype):
  """`value` rounded to `dtype` and back to a Python float."""
  with tf.Graph().as_default(), tf.Session() as sess:
    return float(sess.run(tf.cast(tf.cast(value, dtype), tf.float32)))


def test_cast_weights_once_in_a_training_graph_is_refused():
  """The copies take no gradient: a training graph would never update them."""
  with tf.Graph().as_default():
    config = modeling.BertConfig(vocab_size=99, hidden_size=32,
                                 num_hidden_layers=1, num_attention_heads=4,
                                 intermediate_size=37)
    with pytest.raises(ValueError, match="cast_weights_once.*is_training"):
      modeling.BertModel(config, is_training=True,
                         input_ids=tf.zeros([2, 5], tf.int32),
                         compute_dtype=tf.bfloat16, cast_weights_once=True)


def _attention_probs_with_float32_scaling(query, key, mask, size_per_head):
  """The attention probabilities as computed before the scaling moved into
  bfloat16: scores cast to float32, then scaled and masked."""
  scores = tf.cast(tf.matmul(query, key, transpose_b=True), tf.float32)
  scores *= 1.0 / np.sqrt(size_per_head)
  scores += (1.0 - tf.expand_dims(tf.cast(mask, tf.float32), 1)) * -10000.0
  return tf.cast(tf.nn.softmax(scores), tf.bfloat16)


def test_bfloat16_attention_fuses_its_scale_and_mask_with_float32_results():
  """64-wide heads: the scores' matmul, 1/8 scaling and mask run as one
  oneDNN kernel in bfloat16, and the probabilities equal those of scaling
  in float32 bit for bit (1/8 is a power of two)."""
  rng = np.random.RandomState(0)
  batch, heads, length, width = 2, 2, 16, 64
  with tf.Graph().as_default():
    from_tensor = tf.constant(rng.standard_normal(
        [batch, length, heads * width]).astype(np.float32), tf.bfloat16)
    mask = np.ones([batch, length, length], np.float32)
    mask[1, :, 11:] = 0  # The second sequence is 11 tokens long.
    with tf.variable_scope("attention"):
      context = modeling.attention_layer(
          from_tensor, from_tensor, tf.constant(mask, tf.bfloat16),
          num_attention_heads=heads, size_per_head=width)
    graph = tf.get_default_graph()
    probs = graph.get_tensor_by_name("attention/Softmax:0").consumers()[0]
    query, key = (graph.get_tensor_by_name("attention/%s:0" % name)
                  for name in ("transpose", "transpose_1"))
    expected = _attention_probs_with_float32_scaling(query, key, mask, width)
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      metadata = tf.RunMetadata()
      # Separate runs: fetched together, Grappler would share the scores'
      # matmul between the two, and a shared matmul cannot fuse.
      ours, _ = sess.run([probs.outputs[0], context],
                         options=tf.RunOptions(output_partition_graphs=True),
                         run_metadata=metadata)
      theirs = sess.run(expected)
  np.testing.assert_array_equal(ours.astype(np.float32),
                                theirs.astype(np.float32))
  nodes = [n for g in metadata.partition_graphs for n in g.node]
  if not any(n.op.startswith("_Mkl") for n in nodes):
    pytest.skip("oneDNN kernels are off in this TensorFlow")
  fused = [[op.decode() for op in n.attr["fused_ops"].list.s]
           for n in nodes if n.op == "_MklFusedBatchMatMulV2"]
  assert fused == [["Mul", "Add"]]
