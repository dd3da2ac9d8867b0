"""Tests for modeling.py: golden vectors, checkpoint names and the helpers."""

import json
import math
import os

import numpy as np
import pytest
import tensorflow.compat.v1 as tf
from tensorflow.core.protobuf import rewriter_config_pb2

from helpers import data_path
import modeling
from bert_tf.train import options as training_options

_OUTPUT_KEYS = ("embedding_output", "all_encoder_layers_0",
                "all_encoder_layers_1", "sequence_output", "pooled_output")


def _conformance(name):
  return data_path("conformance", "modeling", name)


def _tiny_config(**overrides):
  """The reference's tiny tester shape (layers cut to 2 for speed)."""
  params = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2,
                num_attention_heads=4, intermediate_size=37,
                max_position_embeddings=64, type_vocab_size=16)
  params.update(overrides)
  return modeling.BertConfig(**params)


def _random_inputs(batch_size=13, seq_length=7, vocab_size=99, seed=0):
  rng = np.random.RandomState(seed)
  input_ids = rng.randint(0, vocab_size, size=(batch_size, seq_length))
  input_mask = rng.randint(0, 2, size=(batch_size, seq_length))
  input_mask[:, 0] = 1
  token_type_ids = rng.randint(0, 2, size=(batch_size, seq_length))
  return (input_ids.astype(np.int32), input_mask.astype(np.int32),
          token_type_ids.astype(np.int32))


def _outputs(model):
  layers = model.get_all_encoder_layers()
  return {
      "embedding_output": model.get_embedding_output(),
      "all_encoder_layers_0": layers[0],
      "all_encoder_layers_1": layers[1],
      "sequence_output": model.get_sequence_output(),
      "pooled_output": model.get_pooled_output(),
  }


# ---------------------------------------------------------------------------
# Golden vectors from the reference release.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("config_name,expected_name,use_one_hot", [
    ("bert_config.json", "expected.npz", False),
    ("bert_config.json", "expected_one_hot.npz", True),
    ("bert_config_relu.json", "expected_relu.npz", False),
])
def test_bert_model_matches_reference_outputs(config_name, expected_name,
                                              use_one_hot):
  inputs = np.load(_conformance("inputs.npz"))
  expected = np.load(_conformance(expected_name))
  init_checkpoint = os.path.join(
      os.path.dirname(_conformance("variables.json")), "bert_model.ckpt")
  graph = tf.Graph()
  with graph.as_default():
    config = modeling.BertConfig.from_json_file(_conformance(config_name))
    model = modeling.BertModel(
        config, is_training=False,
        input_ids=tf.constant(inputs["input_ids"]),
        input_mask=tf.constant(inputs["input_mask"]),
        token_type_ids=tf.constant(inputs["token_type_ids"]),
        use_one_hot_embeddings=use_one_hot)
    assignment_map, initialized = modeling.get_assignment_map_from_checkpoint(
        tf.trainable_variables(), init_checkpoint)
    assert len(assignment_map) == 39
    for var in tf.trainable_variables():
      assert var.name in initialized
    tf.train.init_from_checkpoint(init_checkpoint, assignment_map)
    with tf.Session(graph=graph) as sess:
      sess.run(tf.global_variables_initializer())
      actual = sess.run(_outputs(model))
  for key in _OUTPUT_KEYS:
    np.testing.assert_allclose(actual[key], expected[key], rtol=0, atol=1e-5,
                               err_msg=key)


def test_bert_model_variables_match_checkpoint_names_and_shapes():
  with open(_conformance("variables.json")) as f:
    expected = {v["name"]: v["shape"] for v in json.load(f)
                if v["name"].startswith("bert/")}
  graph = tf.Graph()
  with graph.as_default():
    config = modeling.BertConfig.from_json_file(
        _conformance("bert_config.json"))
    modeling.BertModel(config, is_training=True,
                       input_ids=tf.zeros([2, 16], dtype=tf.int32))
    actual = {v.name[:-len(":0")]: v.shape.as_list()
              for v in tf.global_variables()}
  assert len(expected) == 39
  assert actual == expected


# ---------------------------------------------------------------------------
# BertModel behaviour.
# ---------------------------------------------------------------------------


def test_tiny_tester_output_shapes():
  input_ids, input_mask, token_type_ids = _random_inputs()
  graph = tf.Graph()
  with graph.as_default():
    model = modeling.BertModel(
        _tiny_config(), is_training=True, input_ids=tf.constant(input_ids),
        input_mask=tf.constant(input_mask),
        token_type_ids=tf.constant(token_type_ids))
    with tf.Session(graph=graph) as sess:
      sess.run(tf.global_variables_initializer())
      out = sess.run(_outputs(model))
      table = sess.run(model.get_embedding_table())
  for key in _OUTPUT_KEYS[:-1]:
    assert out[key].shape == (13, 7, 32), key
  assert out["pooled_output"].shape == (13, 32)
  assert table.shape == (99, 32)
  assert len(model.get_all_encoder_layers()) == 2


def test_unknown_batch_and_length_give_dynamic_shapes():
  graph = tf.Graph()
  with graph.as_default():
    input_ids = tf.placeholder(tf.int32, shape=[None, None])
    model = modeling.BertModel(_tiny_config(), is_training=False,
                               input_ids=input_ids)
    assert model.get_sequence_output().shape.as_list() == [None, None, 32]
    with tf.Session(graph=graph) as sess:
      sess.run(tf.global_variables_initializer())
      pooled, seq = sess.run(
          [model.get_pooled_output(), model.get_sequence_output()],
          {input_ids: np.ones((3, 5), np.int32)})
  assert pooled.shape == (3, 32)
  assert seq.shape == (3, 5, 32)


def test_one_hot_and_gather_embeddings_are_equivalent():
  input_ids, input_mask, token_type_ids = _random_inputs(seed=1)
  graph = tf.Graph()
  with graph.as_default():
    models = []
    for use_one_hot in (False, True):
      with tf.variable_scope(tf.get_variable_scope(), reuse=use_one_hot):
        models.append(modeling.BertModel(
            _tiny_config(), is_training=False,
            input_ids=tf.constant(input_ids),
            input_mask=tf.constant(input_mask),
            token_type_ids=tf.constant(token_type_ids),
            use_one_hot_embeddings=use_one_hot, scope="bert"))
    assert len(tf.global_variables()) == 39  # Shared, not duplicated.
    with tf.Session(graph=graph) as sess:
      sess.run(tf.global_variables_initializer())
      gather_out, one_hot_out = sess.run([_outputs(m) for m in models])
  for key in _OUTPUT_KEYS:
    np.testing.assert_allclose(gather_out[key], one_hot_out[key], atol=1e-6,
                               err_msg=key)


def _two_runs(is_training):
  input_ids, input_mask, token_type_ids = _random_inputs(seed=2)
  graph = tf.Graph()
  with graph.as_default():
    model = modeling.BertModel(
        _tiny_config(hidden_dropout_prob=0.5), is_training=is_training,
        input_ids=tf.constant(input_ids), input_mask=tf.constant(input_mask),
        token_type_ids=tf.constant(token_type_ids))
    with tf.Session(graph=graph) as sess:
      sess.run(tf.global_variables_initializer())
      first = sess.run(model.get_sequence_output())
      second = sess.run(model.get_sequence_output())
  return first, second


def test_dropout_applies_when_training():
  first, second = _two_runs(is_training=True)
  assert not np.allclose(first, second)


def test_no_dropout_when_not_training():
  first, second = _two_runs(is_training=False)
  np.testing.assert_array_equal(first, second)


def test_seq_length_above_max_position_embeddings_raises_at_graph_time():
  with tf.Graph().as_default():
    with pytest.raises(ValueError) as info:
      modeling.BertModel(_tiny_config(max_position_embeddings=6),
                         is_training=False,
                         input_ids=tf.zeros([2, 7], dtype=tf.int32))
  assert "7" in str(info.value) and "6" in str(info.value)
  with tf.Graph().as_default():  # Equal lengths are allowed.
    model = modeling.BertModel(_tiny_config(max_position_embeddings=7),
                               is_training=False,
                               input_ids=tf.zeros([2, 7], dtype=tf.int32))
    assert model.get_sequence_output().shape.as_list() == [2, 7, 32]


def test_hidden_size_not_multiple_of_heads_raises():
  with tf.Graph().as_default():
    with pytest.raises(ValueError,
                       match="hidden_size 30.*num_attention_heads 4"):
      modeling.BertModel(_tiny_config(hidden_size=30), is_training=False,
                         input_ids=tf.zeros([2, 7], dtype=tf.int32))


def test_bert_model_rejects_rank_1_input_ids():
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match="input_ids.*rank 1.*expected rank 2"):
      modeling.BertModel(_tiny_config(), is_training=False,
                         input_ids=tf.zeros([7], dtype=tf.int32))


# ---------------------------------------------------------------------------
# BertConfig.
# ---------------------------------------------------------------------------


def test_config_json_round_trip_keeps_unknown_keys(tmp_path):
  source = {"vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12,
            "num_attention_heads": 12, "intermediate_size": 3072,
            "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
            "attention_probs_dropout_prob": 0.1,
            "max_position_embeddings": 512, "type_vocab_size": 2,
            "initializer_range": 0.02, "directionality": "bidi",
            "pooler_type": "first_token_transform"}
  path = tmp_path / "bert_config.json"
  path.write_text(json.dumps(source))
  config = modeling.BertConfig.from_json_file(str(path))
  assert config.directionality == "bidi"
  assert config.type_vocab_size == 2
  assert config.to_dict() == source
  assert json.loads(config.to_json_string()) == source
  again = modeling.BertConfig.from_dict(json.loads(config.to_json_string()))
  assert again.to_dict() == source


def test_config_defaults_and_to_dict_is_a_copy():
  config = modeling.BertConfig(vocab_size=10)
  assert config.hidden_size == 768 and config.type_vocab_size == 16
  assert config.hidden_act == "gelu" and config.initializer_range == 0.02
  config.to_dict()["hidden_size"] = 1
  assert config.hidden_size == 768


def test_config_missing_file_names_the_path(tmp_path):
  path = str(tmp_path / "nope" / "bert_config.json")
  with pytest.raises(FileNotFoundError, match="nope"):
    modeling.BertConfig.from_json_file(path)


def test_config_invalid_json_names_the_path(tmp_path):
  path = tmp_path / "bad_config.json"
  path.write_text("{vocab_size: 3")
  with pytest.raises(ValueError, match="bad_config.json"):
    modeling.BertConfig.from_json_file(str(path))
  path.write_text("[1, 2]")
  with pytest.raises(ValueError, match="top level is a list, expected an object"):
    modeling.BertConfig.from_json_file(str(path))


# ---------------------------------------------------------------------------
# Activations.
# ---------------------------------------------------------------------------


def _evaluate(fn, values):
  with tf.Graph().as_default():
    with tf.Session() as sess:
      return sess.run(fn(tf.constant(values, dtype=tf.float32)))


def test_gelu_is_the_tanh_approximation():
  x = np.array([-3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0])
  expected = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) *
                                    (x + 0.044715 * x ** 3)))
  np.testing.assert_allclose(_evaluate(modeling.gelu, x), expected, atol=1e-6)
  # A hand value: gelu(1) with the tanh form is 0.841192, not erf's 0.841345.
  assert abs(_evaluate(modeling.gelu, [1.0])[0] - 0.8411920) < 1e-6


def test_gelu_exact_is_the_erf_form():
  x = np.array([-3.0, -1.0, 0.0, 1.0, 3.0])
  expected = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x])
  np.testing.assert_allclose(_evaluate(modeling.gelu_exact, x), expected,
                             atol=1e-6)
  assert abs(_evaluate(modeling.gelu_exact, [1.0])[0] - 0.8413447) < 1e-6


def test_gelu_equals_the_reference_formula_bit_for_bit():
  # modeling.gelu is written 0.5 * x * (1 + t) under a "Gelu" name scope (the
  # shape Grappler's remapper fuses into oneDNN's matmul); the reference wrote
  # x * (0.5 * (1 + t)). Halving is exact, so unfused they are the same floats.
  x = np.random.RandomState(0).standard_normal(100000).astype(np.float32) * 4

  def reference(v):
    cdf = 0.5 * (1.0 + tf.tanh(math.sqrt(2.0 / math.pi) *
                               (v + 0.044715 * tf.pow(v, 3))))
    return v * cdf

  with tf.Graph().as_default():
    values = tf.constant(x)
    with tf.Session() as sess:
      ours, theirs = sess.run([modeling.gelu(values), reference(values)])
  np.testing.assert_array_equal(ours, theirs)


def _run_partitioned(fetch, config):
  """(value of fetch, the executed graph's nodes) in a new session."""
  with tf.Session(config=config) as sess:
    sess.run(tf.global_variables_initializer())
    metadata = tf.RunMetadata()
    value = sess.run(fetch, options=tf.RunOptions(
        output_partition_graphs=True), run_metadata=metadata)
  return value, [n for g in metadata.partition_graphs for n in g.node]


def test_inference_fuses_gelu_into_the_matmul_within_float32_rounding():
  input_ids, input_mask, token_type_ids = _random_inputs()
  with tf.Graph().as_default():
    tf.set_random_seed(3)
    model = modeling.BertModel(
        _tiny_config(intermediate_size=64), is_training=False,
        input_ids=tf.constant(input_ids), input_mask=tf.constant(input_mask),
        token_type_ids=tf.constant(token_type_ids))
    # The runners' config: the remapper fuses GELU only in a second pass.
    config = training_options.default_session_config()
    fused, nodes = _run_partitioned(model.get_sequence_output(), config)
    if not any(n.op.startswith("_Mkl") for n in nodes):
      pytest.skip("oneDNN kernels are off in this TensorFlow")
    fused_ops = [[op.decode() for op in n.attr["fused_ops"].list.s]
                 for n in nodes if "MatMul" in n.op]
    assert fused_ops.count(["BiasAdd", "GeluApproximate"]) == 2  # 2 layers.
    assert not [n for n in nodes if n.op == "Tanh"]
    off = training_options.default_session_config()
    off.graph_options.rewrite_options.remapping = (
        rewriter_config_pb2.RewriterConfig.OFF)
    unfused, nodes = _run_partitioned(model.get_sequence_output(), off)
    assert [n for n in nodes if n.op == "Tanh"]
  np.testing.assert_allclose(fused, unfused, rtol=0, atol=1e-6)


def test_get_activation_names():
  assert modeling.get_activation("gelu") is modeling.gelu
  assert modeling.get_activation("GELU") is modeling.gelu
  assert modeling.get_activation("gelu_exact") is modeling.gelu_exact
  assert modeling.get_activation("relu") is tf.nn.relu
  assert modeling.get_activation("tanh") is tf.tanh
  assert modeling.get_activation("linear") is None
  assert modeling.get_activation("") is None
  assert modeling.get_activation(None) is None
  assert modeling.get_activation(tf.sigmoid) is tf.sigmoid


def test_get_activation_unknown_name_raises():
  with pytest.raises(ValueError, match="swish"):
    modeling.get_activation("swish")


def test_get_activation_non_callable_raises():
  with pytest.raises(ValueError, match="42"):
    modeling.get_activation(42)


# ---------------------------------------------------------------------------
# Helpers.
# ---------------------------------------------------------------------------


def test_get_shape_list_returns_tensors_for_unknown_dims():
  with tf.Graph().as_default():
    tensor = tf.placeholder(tf.float32, shape=[None, 5, None])
    shape = modeling.get_shape_list(tensor, expected_rank=3)
    assert shape[1] == 5 and isinstance(shape[1], int)
    assert isinstance(shape[0], tf.Tensor) and isinstance(shape[2], tf.Tensor)
    with tf.Session() as sess:
      dims = sess.run([shape[0], shape[2]],
                      {tensor: np.zeros((2, 5, 3), np.float32)})
  assert dims == [2, 3]


def test_get_shape_list_static_shape_is_all_ints():
  with tf.Graph().as_default():
    assert modeling.get_shape_list(tf.zeros([2, 3, 4])) == [2, 3, 4]


def test_assert_rank_error_names_tensor_and_ranks():
  with tf.Graph().as_default():
    tensor = tf.zeros([2, 3], name="my_tensor")
    modeling.assert_rank(tensor, 2)
    modeling.assert_rank(tensor, [2, 3])
    with pytest.raises(ValueError) as info:
      modeling.assert_rank(tensor, 3)
    message = str(info.value)
    assert "my_tensor" in message and "rank 2" in message
    assert "expected rank 3" in message
    with pytest.raises(ValueError, match=r"expected rank \[3, 4\]"):
      modeling.assert_rank(tensor, [3, 4])
    with pytest.raises(ValueError, match="input_ids"):
      modeling.get_shape_list(tensor, expected_rank=1, name="input_ids")


def test_attention_mask_from_input_mask():
  with tf.Graph().as_default():
    from_tensor = tf.zeros([2, 3], dtype=tf.int32)
    to_mask = tf.constant([[1, 1, 0], [1, 0, 0]])
    mask = modeling.create_attention_mask_from_input_mask(from_tensor, to_mask)
    with tf.Session() as sess:
      value = sess.run(mask)
  assert value.dtype == np.float32
  expected = np.array([[[1, 1, 0]] * 3, [[1, 0, 0]] * 3], dtype=np.float32)
  np.testing.assert_array_equal(value, expected)


def test_masked_keys_do_not_change_attention_output():
  rng = np.random.RandomState(3)
  values = rng.randn(1, 4, 8).astype(np.float32)
  changed = values.copy()
  changed[0, 3] += 5.0  # Only the masked key position differs.
  with tf.Graph().as_default():
    from_tensor = tf.placeholder(tf.float32, [1, 4, 8])
    mask = tf.constant([[[1, 1, 1, 0]] * 4], dtype=tf.float32)
    context = modeling.attention_layer(from_tensor, from_tensor, mask,
                                       num_attention_heads=2, size_per_head=4)
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      first = sess.run(context, {from_tensor: values})
      second = sess.run(context, {from_tensor: changed})
  # Query rows 0-2 see the same unmasked keys: unchanged up to exp(-10000).
  np.testing.assert_allclose(first[0, :3], second[0, :3], atol=1e-6)
  assert first.shape == (1, 4, 8)


def test_layer_norm_variables_and_math():
  values = np.array([[1.0, 2.0, 4.0], [0.0, 0.0, 3.0]], np.float32)
  with tf.Graph().as_default():
    output = modeling.layer_norm(tf.constant(values))
    names = sorted(v.name for v in tf.global_variables())
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      actual = sess.run(output)
  assert names == ["LayerNorm/beta:0", "LayerNorm/gamma:0"]
  mean = values.mean(-1, keepdims=True)
  expected = (values - mean) / np.sqrt(values.var(-1, keepdims=True) + 1e-12)
  np.testing.assert_allclose(actual, expected, atol=1e-5)


def test_embedding_lookup_returns_output_and_table():
  with tf.Graph().as_default():
    ids = tf.constant([[1, 2, 3], [4, 0, 0]])
    output, table = modeling.embedding_lookup(ids, vocab_size=10,
                                              embedding_size=6)
    assert output.shape.as_list() == [2, 3, 6]
    assert table.shape.as_list() == [10, 6]
    assert table.name == "word_embeddings:0"
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      out_value, table_value = sess.run([output, table])
  np.testing.assert_array_equal(out_value[0, 1], table_value[2])
  # Truncated normal: nothing beyond two standard deviations.
  assert np.abs(table_value).max() <= 2 * 0.02 + 1e-7


def test_reshape_to_and_from_matrix_round_trip():
  with tf.Graph().as_default():
    tensor = tf.reshape(tf.range(24, dtype=tf.float32), [2, 3, 4])
    matrix = modeling.reshape_to_matrix(tensor)
    assert matrix.shape.as_list() == [6, 4]
    back = modeling.reshape_from_matrix(matrix, [2, 3, 4])
    with tf.Session() as sess:
      np.testing.assert_array_equal(*sess.run([tensor, back]))
    with pytest.raises(ValueError, match="rank >= 2"):
      modeling.reshape_to_matrix(tf.zeros([3]))


def test_dropout_zero_or_none_is_identity():
  with tf.Graph().as_default():
    tensor = tf.ones([3])
    assert modeling.dropout(tensor, 0.0) is tensor
    assert modeling.dropout(tensor, None) is tensor
