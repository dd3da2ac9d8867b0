"""bench/bench_op_times.py: the trace's nodes of a real training step map to
the right kinds, and the kinds' times add up to the step's op time.

A 2-layer 32-wide BERT (bf16, so that casts run), one warm-up and one traced
step per graph; no timing is asserted.
"""
import os
import sys

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "bench"))

# The bench modules set TF_CPP_MIN_LOG_LEVEL for their own runs: kept out of
# this process's environment, which the scripts other tests start inherit
# (with it set, prepare_corpus.py's Beam workers printed 11 lines, not 5).
_LOG_LEVEL = os.environ.get("TF_CPP_MIN_LOG_LEVEL")
# pylint: disable=g-import-not-at-top,wrong-import-position
import bench_encoder
import bench_op_times
import bench_training
import modeling
# pylint: enable=g-import-not-at-top,wrong-import-position
if _LOG_LEVEL is None:
  os.environ.pop("TF_CPP_MIN_LOG_LEVEL", None)
else:
  os.environ["TF_CPP_MIN_LOG_LEVEL"] = _LOG_LEVEL


def _traced(kind, precision, optimizer="adamw"):
  """{node name: (op type, kind)}, `kind_times` of the step, and the op
  time summed over the trace's nodes (microseconds)."""
  config = modeling.BertConfig(
      vocab_size=99, hidden_size=32, num_hidden_layers=2,
      num_attention_heads=4, intermediate_size=37, type_vocab_size=2,
      max_position_embeddings=64)
  batch = bench_encoder.make_batch(np.random.RandomState(1), config, 2, 16, 3)
  batch = {k: v.astype(np.float32 if v.dtype == np.float32 else np.int32)
           for k, v in batch.items()}
  sess, fetch, feed = bench_training.open_row(
      config, batch, 2, kind=kind, precision=precision, optimizer=optimizer)
  with sess:
    sess.run(fetch, feed)
    metadata = tf.RunMetadata()
    sess.run(fetch, feed, options=tf.RunOptions(
        trace_level=tf.RunOptions.FULL_TRACE, output_partition_graphs=True),
             run_metadata=metadata)
  types = {n.name: n.op for g in metadata.partition_graphs for n in g.node}
  update = bench_op_times.optimizer_nodes(metadata.partition_graphs)
  nodes = {}
  total = 0
  for device in metadata.step_stats.dev_stats:
    for stats in device.node_stats:
      op_type = types.get(stats.node_name, "")
      nodes[stats.node_name] = (op_type, bench_op_times.op_kind(
          stats.node_name, op_type, stats.node_name in update))
      total += stats.op_end_rel_micros - stats.op_start_rel_micros
  step = bench_op_times.kind_times(metadata)
  return nodes, step, total


@pytest.fixture(scope="module")
def train_bf16():
  return _traced("train", "bf16")


def _kinds(nodes, predicate):
  """The kinds of the nodes whose (name, op type) satisfy `predicate`."""
  found = {kind for name, (op_type, kind) in nodes.items()
           if predicate(name, op_type)}
  assert found, "no traced node matches"
  return found


def test_attention_batched_matmuls_forward_and_backward_are_attention(
    train_bf16):
  nodes, _, _ = train_bf16
  assert _kinds(nodes, lambda n, t: "BatchMatMul" in t and n.startswith(
      "bert/encoder/layer_0/attention/self/")) == {"attention"}
  assert _kinds(nodes, lambda n, t: "BatchMatMul" in t and n.startswith(
      "gradients/bert/encoder/layer_1/attention/self/")) == {"attention"}


def test_dense_matmuls_are_matmul_even_under_attention_self(train_bf16):
  nodes, _, _ = train_bf16
  assert _kinds(nodes, lambda n, t: "MatMul" in t and "/query/" in n) == {
      "matmul"}
  assert _kinds(nodes, lambda n, t: "MatMul" in t and
                "intermediate/dense" in n) == {"matmul"}


def test_softmax_forward_and_its_gradient_are_softmax(train_bf16):
  nodes, _, _ = train_bf16
  assert _kinds(nodes, lambda n, t: "Softmax" in t and
                "attention/self" in n) == {"softmax"}
  assert _kinds(nodes, lambda n, t: "attention/self/Softmax_grad/" in n) == {
      "softmax"}


def test_layer_norm_gelu_dropout_cast_and_embedding_gradient(train_bf16):
  nodes, _, _ = train_bf16
  assert _kinds(nodes, lambda n, t: t == "Rsqrt" and "LayerNorm" in n) == {
      "layer norm"}
  assert _kinds(nodes, lambda n, t: t == "Tanh" and
                n.endswith("intermediate/dense/Gelu/Tanh")) == {"GELU"}
  assert _kinds(nodes, lambda n, t: t == "TanhGrad" and
                "intermediate/dense/Gelu/Tanh_grad" in n) == {"GELU"}
  assert _kinds(nodes, lambda n, t: t == "RandomUniform") == {"dropout"}
  assert _kinds(nodes, lambda n, t: t == "Cast" and "/query/" in n) == {
      "cast"}
  assert _kinds(nodes, lambda n, t: t == "UnsortedSegmentSum") == {
      "embedding gradient"}


def test_adamw_update_is_optimizer_and_the_model_is_not(train_bf16):
  nodes, step, _ = train_bf16
  assert _kinds(nodes, lambda n, t: t == "AssignVariableOp") == {"optimizer"}
  assert _kinds(nodes, lambda n, t: t == "L2Loss") == {"optimizer"}
  # The moments' reads and beta_1 * m, root-scope ops with no gradient input.
  assert _kinds(nodes, lambda n, t: t == "VarHandleOp" and
                n.endswith("/adam_m")) == {"optimizer"}
  assert "optimizer" not in _kinds(nodes, lambda n, t: n.startswith(
      ("bert/", "gradients/", "cls/")) and t not in ("VarHandleOp", "Const"))
  assert step["kinds"]["optimizer"] > 0


def test_lamb_update_is_optimizer():
  nodes, _, _ = _traced("train", "fp32", optimizer="lamb")
  assert _kinds(nodes, lambda n, t: t == "AssignVariableOp") == {"optimizer"}
  assert _kinds(nodes, lambda n, t: t == "VarHandleOp" and
                n.endswith("/lamb_m")) == {"optimizer"}
  assert bench_op_times.op_kind("Adam/update_w/ResourceApplyAdam",
                                "ResourceApplyAdam") == "optimizer"


def test_fused_adamw_update_is_optimizer():
  nodes, _, _ = _traced("train", "fp32", optimizer="adamw_fused")
  assert _kinds(nodes, lambda n, t: t == "ResourceApplyAdam") == {"optimizer"}
  assert _kinds(nodes, lambda n, t: t == "AssignSubVariableOp") == {
      "optimizer"}  # The weight decay.


def test_kinds_times_sum_to_the_total_op_time(train_bf16):
  _, step, total = train_bf16
  assert set(step["kinds"]) == set(bench_op_times.KINDS)
  assert sum(step["kinds"].values()) == total > 0


def test_wall_split_adds_up_to_the_traced_span(train_bf16):
  _, step, _ = train_bf16
  assert set(step["wall"]) == set(bench_op_times.KINDS) | {"idle"}
  assert sum(step["wall"].values()) == pytest.approx(step["span"])
  assert step["wall"]["matmul"] > 0


def test_inference_has_no_optimizer_and_no_input_pipeline():
  nodes, step, total = _traced("inference", "fp32")
  assert not any(n.startswith("gradients/") for n in nodes)
  assert step["kinds"]["optimizer"] == step["kinds"]["input pipeline"] == 0
  assert step["kinds"]["attention"] > 0
  assert sum(step["kinds"].values()) == total
