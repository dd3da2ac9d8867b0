"""Where a BERT step's time goes: op time per kind, from TensorFlow's trace.

For each row (a training step and an inference step, in every precision of
`--precisions`), builds the graph of `bench_training.build_graph` (BertModel,
the two pre-training heads and the optimizer update on random tokens fed
through placeholders; inference: the encoder's sequence output), runs
`--warmup_steps` untimed steps, times `--timed_steps` steps without tracing
(the wall step time, median), then runs `--traced_steps` steps with
`RunOptions(trace_level=FULL_TRACE)` and sums, over the `step_stats` of the
trace, each node's op time (op_end_rel_micros - op_start_rel_micros) by kind:

  matmul             dense-layer matmuls (MatMul and oneDNN's _MklMatMul,
                     _FusedMatMul, ... which may hold a fused bias/activation)
  attention          the batched matmuls of attention (BatchMatMul*, Einsum:
                     scores and context, forward and backward)
  softmax            Softmax / LogSoftmax and their gradients
  layer norm         ops under a LayerNorm scope, fused layer-norm kernels
  GELU               the activation's elementwise ops (its Gelu scope),
                     forward and backward; in inference oneDNN runs it inside
                     the matmul kernel, which counts as matmul
  dropout            ops under a dropout scope (random mask, select, scale)
  cast               Cast (bf16 <-> fp32)
  embedding gradient the gather's gradient: UnsortedSegmentSum, scatters
  optimizer          Apply*/Assign*Variable ops and the update's own nodes
                     (`optimizer_nodes`: global-norm clipping, moments,
                     learning rate, the AdamW/LAMB update)
  input pipeline     dataset ops (IteratorGetNext, ParseExample, ...): none
                     here, the rows feed random tensors
  other              the rest (reshapes, transposes, bias gradients, adds...)

The per-kind times are averaged over the traced steps. Sessions run as
bench_training.py's do (`--threads` intra- and inter-op threads), so nodes
run concurrently and share the cores: the summed op time exceeds the wall
step time, and the first table's shares (%) are of the summed op time; the
wall step time is given apart. A second table splits the traced step's
wall time instead: each instant evenly among the nodes running then, and
"idle" when none runs. Each row also gives the matmul FLOP rate of the step
(matmul FLOPs / untraced wall step time) and of the matmul and attention
kernels alone (matmul FLOPs / their part of the traced wall time), against
the in-run probe: a TensorFlow [1024, 768] x [768, 3072] matmul in the
row's precision, timed after each of the row's timed steps.

Run from the repo root (about 3 minutes on 2 cores, BERT-Base):
  python bench/bench_op_times.py
  python bench/bench_op_times.py --num_hidden_layers=2 --precisions=fp32
"""

import collections
import os
import re
import statistics
import sys
import time

from absl import flags

# bench_training (found beside this file) puts the repo root on sys.path and
# quiets TensorFlow's C++ logs before TensorFlow loads: it comes first.
# pylint: disable=g-bad-import-order,wrong-import-order
import bench_training
import bench_encoder
import tensorflow.compat.v1 as tf
from bert_tf.cli import entry as cli_entry
from bert_tf.train import options as training_options
# pylint: enable=g-bad-import-order,wrong-import-order

FLAGS = flags.FLAGS

KINDS = ("matmul", "attention", "softmax", "layer norm", "GELU", "dropout",
         "cast", "embedding gradient", "optimizer", "input pipeline", "other")

CPU_FLAGS = ("amx_bf16", "avx512_bf16", "avx512f", "avx2")

_INPUT_OPS = frozenset([
    "IteratorGetNext", "IteratorGetNextSync", "IteratorGetNextAsOptional",
    "MultiDeviceIteratorGetNextFromShard", "ParseExample", "ParseExampleV2",
    "ParseSingleExample", "ParseSequenceExample", "DecodeRaw",
    "TFRecordReader", "TFRecordReaderV2", "ReaderReadV2"])
_EMBEDDING_GRADIENT = re.compile(
    r"UnsortedSegmentSum|SparseSegment|Scatter")
_UPDATE_OPS = frozenset(["AssignVariableOp", "AssignAddVariableOp",
                         "AssignSubVariableOp", "Assign", "AssignAdd",
                         "AssignSub"])
_APPLY_PREFIXES = ("Apply", "ResourceApply", "_MklApply",
                   "_MklResourceApply")
_BATCHED_MATMUL = re.compile(r"BatchMatMul|Einsum")
_SOFTMAX_SCOPE = re.compile(r"(^|/)(Log)?Softmax(_\d+)?_grad(/|$)")
_GELU_SCOPE = re.compile(r"(^|/)Gelu(/|$)")


def define_flags():
  flags.DEFINE_integer("num_hidden_layers", 12, "Encoder layers.")
  flags.DEFINE_integer("hidden_size", 768, "Hidden width.")
  flags.DEFINE_integer("seq_length", 128, "Tokens per sequence.")
  flags.DEFINE_integer("batch_size", 8, "Sequences per step.")
  flags.DEFINE_integer("warmup_steps", 2, "Untimed steps per row first.")
  flags.DEFINE_integer("timed_steps", 5,
                       "Untraced steps per row giving the wall step time.")
  flags.DEFINE_integer("traced_steps", 5,
                       "Traced steps per row whose op times are averaged.")
  flags.DEFINE_integer("threads", 0,
                       "Intra- and inter-op threads (0: all cores).")
  flags.DEFINE_integer("probe_products", 3,
                       "Probe products timed after each timed step.")
  flags.DEFINE_list("precisions", ["fp32", "bf16"], "Precisions to trace.")
  flags.DEFINE_list("steps", ["train", "inference"], "Which steps to trace.")
  flags.DEFINE_list("optimizer", ["adamw"],
                    "Optimizer(s) of the training step (names of "
                    "--optimizer); several: a training row for each, "
                    "in the same run.")


# ---------------------------------------------------------------------------
# Classifying the trace's nodes.


def op_kind(node_name, op_type, in_update=False):
  """The kind (one of `KINDS`) of one executed node.

  Args:
    node_name: str, the node's name in the executed (partition) graph, e.g.
      "gradients/bert/encoder/layer_0/attention/self/MatMul_grad/MatMul".
    op_type: str, its op type after Grappler and oneDNN's rewrites, e.g.
      "_MklBatchMatMulV2"; "" when unknown.
    in_update: bool, the node is part of the optimizer update (see
      `optimizer_nodes`).

  Returns:
    str, the kind.
  """
  if op_type in _INPUT_OPS:
    return "input pipeline"
  if _EMBEDDING_GRADIENT.search(op_type):
    return "embedding gradient"
  if op_type in ("Cast", "_MklCast"):
    return "cast"
  if _BATCHED_MATMUL.search(op_type):
    return "attention" if "/attention/" in "/" + node_name else "matmul"
  if "MatMul" in op_type:
    return "matmul"
  if (in_update or op_type in _UPDATE_OPS or
      op_type.startswith(_APPLY_PREFIXES)):
    return "optimizer"
  if "Softmax" in op_type or _SOFTMAX_SCOPE.search(node_name):
    return "softmax"
  parts = node_name.split("/")
  if "LayerNorm" in op_type or "LayerNorm" in parts:
    return "layer norm"
  if "dropout" in parts:
    return "dropout"
  if "Gelu" in op_type or _GELU_SCOPE.search(node_name):
    return "GELU"
  return "other"


def _input_names(node):
  return [i.lstrip("^").split(":")[0] for i in node.input
          if not i.startswith("^")]


def optimizer_nodes(partition_graphs):
  """Names of the nodes of the optimizer update in an executed graph.

  The variable updates (Assign*VariableOp, Apply*) and, repeatedly, every
  node outside the gradients/ scope (tf.gradients' default name) whose data
  consumers are all such nodes: the reference-style optimizers build their
  update from plain elementwise ops in the root scope (global-norm
  clipping, the moments, the learning rate, the weight update). A node
  that the forward pass or the gradients also read (a shared constant, a
  weight's read) is left out. Empty for a graph without updates.

  Args:
    partition_graphs: iterable of GraphDef (RunMetadata.partition_graphs).

  Returns:
    set of str.
  """
  consumers = collections.defaultdict(list)
  inputs = {}
  found = set()
  for graph in partition_graphs:
    for node in graph.node:
      inputs[node.name] = _input_names(node)
      for name in inputs[node.name]:
        consumers[name].append(node.name)
      if node.op in _UPDATE_OPS or node.op.startswith(_APPLY_PREFIXES):
        found.add(node.name)
  frontier = list(found)
  while frontier:
    for name in inputs.get(frontier.pop(), ()):
      if (name not in found and not name.startswith("gradients/") and
          all(c in found for c in consumers[name])):
        found.add(name)
        frontier.append(name)
  return found


def kind_times(run_metadata):
  """One traced step's time by kind, in microseconds.

  Args:
    run_metadata: tf.RunMetadata of a run with FULL_TRACE and
      output_partition_graphs.

  Returns:
    dict with
      "kinds": kind -> summed op time (op_end_rel_micros -
        op_start_rel_micros of its nodes), every kind of `KINDS` present;
      "types": (kind, op type) -> summed op time;
      "wall": kind -> its part of the step's wall time: each instant of the
        trace is split evenly among the nodes running then, and instants
        with none go to "idle" (so the values add up to "span");
      "span": first node start to last node end.
  """
  graphs = run_metadata.partition_graphs
  types = {node.name: node.op for graph in graphs for node in graph.node}
  update = optimizer_nodes(graphs)
  by_kind = dict.fromkeys(KINDS, 0)
  by_type = collections.Counter()
  events = []
  span_start, span_end = None, None
  for device in run_metadata.step_stats.dev_stats:
    for stats in device.node_stats:
      op_type = types.get(stats.node_name) or _label_type(stats.timeline_label)
      micros = stats.op_end_rel_micros - stats.op_start_rel_micros
      kind = op_kind(stats.node_name, op_type, stats.node_name in update)
      by_kind[kind] += micros
      by_type[(kind, op_type)] += micros
      start = stats.all_start_micros + stats.op_start_rel_micros
      if micros > 0:
        events += [(start, 1, kind), (start + micros, -1, kind)]
      node_end = stats.all_start_micros + stats.all_end_rel_micros
      if span_start is None:
        span_start, span_end = stats.all_start_micros, node_end
      span_start = min(span_start, stats.all_start_micros)
      span_end = max(span_end, node_end)
  wall = dict.fromkeys(KINDS + ("idle",), 0.0)
  if span_start is not None:
    events.sort(key=lambda e: (e[0], e[1]))  # Ends first at equal times.
    running = collections.Counter()
    now = span_start
    for time_, change, kind in events:
      count = sum(running.values())
      for running_kind, n in running.items():
        wall[running_kind] += (time_ - now) * n / count
      if not count:
        wall["idle"] += time_ - now
      now = time_
      running[kind] += change
      if not running[kind]:
        del running[kind]
    wall["idle"] += span_end - now
  return {"kinds": by_kind, "types": dict(by_type), "wall": wall,
          "span": (span_end - span_start) if span_start is not None else 0}


def _label_type(label):
  """The op type in a timeline label "name = Type(inputs)", or ""."""
  match = re.match(r"[^=]*= *([A-Za-z0-9_]+)", label or "")
  return match.group(1) if match else ""


# ---------------------------------------------------------------------------
# Running the rows.


def trace_row(sess, fetch, feed, probe, flags_):
  """Times and traces one row, with the probe timed between its steps.

  Args:
    sess, fetch, feed: the row's session, fetch and feed dict.
    probe: function running one probe product (see `bench_training.open_probe`).
    flags_: object with warmup_steps, timed_steps, traced_steps and
      probe_products (ints).

  Returns:
    dict: "wall" (list of untraced step seconds), "probe" (list of product
    seconds, `probe_products` after each timed step), and the means over
    the traced steps of `kind_times`' "kinds", "types", "wall" (here
    "wall_kinds") and "span", in seconds; "onednn" (bool: oneDNN's _Mkl
    ops ran).
  """
  for _ in range(flags_.warmup_steps):
    sess.run(fetch, feed)
    probe()
  walls, products = [], []
  for _ in range(flags_.timed_steps):
    start = time.perf_counter()
    sess.run(fetch, feed)
    walls.append(time.perf_counter() - start)
    for _ in range(flags_.probe_products):
      start = time.perf_counter()
      probe()
      products.append(time.perf_counter() - start)
  options = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE,
                          output_partition_graphs=True)
  kinds, types, wall_kinds = (collections.Counter() for _ in range(3))
  spans = []
  for _ in range(flags_.traced_steps):
    metadata = tf.RunMetadata()
    sess.run(fetch, feed, options=options, run_metadata=metadata)
    step = kind_times(metadata)
    kinds.update(step["kinds"])
    types.update(step["types"])
    wall_kinds.update(step["wall"])
    spans.append(step["span"])
  scale = 1e-6 / flags_.traced_steps
  return {"wall": walls, "probe": products,
          "kinds": {k: kinds[k] * scale for k in KINDS},
          "types": {k: v * scale for k, v in types.items()},
          "wall_kinds": {k: v * scale for k, v in wall_kinds.items()},
          "span": statistics.mean(spans) * 1e-6,
          "onednn": any(t.startswith("_Mkl") for _, t in types)}


def step_flops(config, step, batch_size, seq_length, predictions):
  """Matmul FLOPs of one step (training: 3 x forward, with the MLM head)."""
  if step == "inference":
    return batch_size * bench_encoder.forward_flops(config, seq_length)
  return 3 * batch_size * bench_encoder.forward_flops(config, seq_length,
                                                      predictions)


# ---------------------------------------------------------------------------
# Output.


def _load():
  return "load %.2f %.2f %.2f" % os.getloadavg()


def kinds_table(results):
  """Markdown: per kind, ms per step and % of the summed op time, by row."""
  labels = list(results)
  lines = ["| kind | " + " | ".join(labels) + " |",
           "|---|" + "---:|" * len(labels)]
  totals = {label: sum(r["kinds"].values()) for label, r in results.items()}
  for kind in KINDS:
    cells = []
    for label in labels:
      seconds = results[label]["kinds"][kind]
      cells.append("%.1f ms (%.1f%%)" % (
          seconds * 1e3, 100.0 * seconds / totals[label] if totals[label]
          else 0.0))
    lines.append("| %s | %s |" % (kind, " | ".join(cells)))
  rows = [
      ("summed op time", lambda r, t: "%.0f ms" % (t * 1e3)),
      ("wall step time (untraced, median)",
       lambda r, t: "%.0f ms" % (statistics.median(r["wall"]) * 1e3)),
      ("traced step span", lambda r, t: "%.0f ms" % (r["span"] * 1e3)),
      ("summed op time / wall",
       lambda r, t: "%.2f" % (t / statistics.median(r["wall"]))),
      ("matmul GFLOP/s of the step (wall)",
       lambda r, t: "%.0f" % r["gflops"]),
      ("in-run probe GFLOP/s, same precision",
       lambda r, t: "%.0f" % r["probe_gflops"]),
      ("step / probe", lambda r, t: "%.0f%%" % (100.0 * r["gflops"] /
                                                r["probe_gflops"])),
      ("matmul GFLOP/s of the matmul + attention wall time",
       lambda r, t: "%.0f" % r["kernel_gflops"]),
      ("machine load (1 min) at the row", lambda r, t: "%.2f" % r["load"]),
  ]
  for name, cell in rows:
    lines.append("| %s | %s |" % (name, " | ".join(
        cell(results[label], totals[label]) for label in labels)))
  return "\n".join(lines)


def wall_table(results):
  """Markdown: per kind, % of the traced step's wall time, by row."""
  labels = list(results)
  lines = ["| kind | " + " | ".join(labels) + " |",
           "|---|" + "---:|" * len(labels)]
  for kind in KINDS + ("idle",):
    lines.append("| %s | %s |" % (kind, " | ".join(
        "%.1f%%" % (100.0 * results[label]["wall_kinds"].get(kind, 0.0) /
                    results[label]["span"]) for label in labels)))
  return "\n".join(lines)


def other_lines(results, top=6):
  """The op types that make up most of "other", per row."""
  lines = []
  for label, result in results.items():
    other = sorted(((t, s) for (k, t), s in result["types"].items()
                    if k == "other"), key=lambda item: -item[1])[:top]
    lines.append("  %s: %s" % (label, ", ".join(
        "%s %.1f ms" % (t or "?", s * 1e3) for t, s in other)))
  return lines


def _check_flags():
  """Raises ValueError naming the flag that is out of range."""
  for name in ("timed_steps", "traced_steps", "probe_products"):
    if getattr(FLAGS, name) < 1:
      raise ValueError("--%s=%d: expected at least 1" % (
          name, getattr(FLAGS, name)))
  for name, allowed in (("precisions",
                         sorted(training_options.PRECISION_DTYPES)),
                        ("steps", ["train", "inference"]),
                        ("optimizer", list(training_options.OPTIMIZERS))):
    unknown = [v for v in getattr(FLAGS, name) if v not in allowed]
    if unknown:
      raise ValueError("--%s: unknown %s; expected some of %s" % (
          name, ", ".join(unknown), ", ".join(allowed)))


def main(_):
  _check_flags()
  threads = FLAGS.threads or os.cpu_count()
  config = bench_encoder.bert_config(FLAGS.num_hidden_layers,
                                     FLAGS.seq_length, FLAGS.hidden_size)
  predictions = 20
  batch = bench_encoder.feed_batch(config, FLAGS.batch_size, FLAGS.seq_length,
                                   predictions)
  model, found = bench_training.cpu_flags()
  print("CPU: %s; flags: %s" % (model, ", ".join(
      "%s %s" % (f, "yes" if f in found else "no") for f in CPU_FLAGS)))
  print("TensorFlow %s, Python %s; %d threads; %s" % (
      tf.__version__, sys.version.split()[0], threads, _load()), flush=True)
  results = {}
  rows = [(step, optimizer) for step in FLAGS.steps
          for optimizer in (FLAGS.optimizer if step == "train" else
                            FLAGS.optimizer[:1])]
  for precision in FLAGS.precisions:
    for step, optimizer in rows:
      label = "%s %s" % (step, precision)
      if step == "train" and len(FLAGS.optimizer) > 1:
        label += " " + optimizer
      start = time.time()
      probe, probe_sess = bench_training.open_probe(precision, threads)
      sess, fetch, feed = bench_training.open_row(
          config, batch, threads, kind=step,
          precision=precision, optimizer=optimizer)
      result = trace_row(sess, fetch, feed, probe, FLAGS)
      sess.close()
      probe_sess.close()
      flops = step_flops(config, step, FLAGS.batch_size, FLAGS.seq_length,
                         predictions)
      result["gflops"] = flops / statistics.median(result["wall"]) / 1e9
      result["kernel_gflops"] = flops / (
          result["wall_kinds"]["matmul"] +
          result["wall_kinds"]["attention"]) / 1e9
      result["probe_gflops"] = bench_training.PROBE_FLOPS / statistics.median(
          result["probe"]) / 1e9
      result["load"] = os.getloadavg()[0]
      results[label] = result
      print("  traced %s (%.0f s, %s, oneDNN kernels: %s)" % (
          label, time.time() - start, _load(),
          "yes" if result["onednn"] else "no"), flush=True)
  print("\nBERT L=%d H=%d, batch %d x seq %d, %s; %d traced steps per row "
        "after %d warm-up and %d timed; TF %s.\n" % (
            config.num_hidden_layers, config.hidden_size, FLAGS.batch_size,
            FLAGS.seq_length, ", ".join(FLAGS.optimizer), FLAGS.traced_steps,
            FLAGS.warmup_steps, FLAGS.timed_steps, tf.__version__))
  print(kinds_table(results))
  print("\nShares of the summed op time (nodes overlap on %d inter-op "
        "threads). Input pipeline: random tensors fed through placeholders, "
        "no input pipeline.\n\nThe traced step's wall time split among the "
        "nodes running at each instant:\n" % threads)
  print(wall_table(results))
  print("\nLargest op types in \"other\" (op time):")
  print("\n".join(other_lines(results)))


if __name__ == "__main__":
  define_flags()
  cli_entry.run_main(main)
