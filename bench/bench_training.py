"""Training and inference throughput by precision, accumulation and optimizer.

Times this project's pre-training step (`modeling.BertModel` + the heads of
`run_pretraining.py` + `optimization.create_optimizer`) on random weights and
random tokens, BERT-Base shape and sequence length 128 by default:
  * train rows: precision fp32 or bf16 x gradient accumulation 1 or 4 x
    optimizer adamw or lamb (dropout on, as in real training);
  * inference rows: fp32 and bf16 encoder forward (sequence output).
One timed "step" is one session run of `--batch_size` sequences (with
accumulation 4, every 4th run also applies the update; rows run 4 steps per
repetition so that each repetition holds whole updates). Each row is timed
interleaved with the baseline of its kind (fp32, adamw, accumulation 1),
in alternating order, after untimed warm-up runs; only those two graphs are
alive at a time (ten BERT-Base training graphs with their optimizer state
would need about 20 GB). The table gives sequences/s (median, min-max) and
each row's ratio to the baseline medians timed with it.

It also prints the CPU's bfloat16 features (lscpu flags amx_bf16,
avx512_bf16), the speed-up target that applies to it (AMX: bf16 training
>= 1.8x and inference >= 2.0x; AVX512-BF16 without AMX: >= 1.7x both and
>= 92% of the matmul probe's bf16 / fp32, issue #32; no native bf16: none),
whether oneDNN is on, which kernels the matmuls of each inference graph got
(oneDNN `_Mkl*` ops or plain Eigen ones), and with bf16 rows, their bf16 /
fp32 beside the probe's.

Run from the repo root:
  python bench/bench_training.py --quick     # a few minutes on 2 cores
  python bench/bench_training.py             # batch 8, 3 repetitions
"""

import os
import statistics
import subprocess
import sys
import time

from absl import flags
import numpy as np

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _path in (_REPO, os.path.join(_REPO, "bench")):
  if _path not in sys.path:
    sys.path.insert(0, _path)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

# pylint: disable=g-import-not-at-top,wrong-import-position
import tensorflow.compat.v1 as tf

import bench_encoder
import modeling
import optimization
import run_pretraining
from bert_tf.cli import flags as cli_flags
from bert_tf.cli import entry as cli_entry
from bert_tf.train import options as training_options
# pylint: enable=g-import-not-at-top,wrong-import-position

FLAGS = flags.FLAGS


def define_flags():
  flags.DEFINE_bool("quick", False,
                    "Batch 2, 2 repetitions, 1 warm-up run: a few minutes.")
  flags.DEFINE_integer("num_hidden_layers", 12, "Encoder layers.")
  flags.DEFINE_integer("seq_length", 128, "Tokens per sequence.")
  flags.DEFINE_integer("batch_size", 8, "Sequences per run (micro-batch).")
  flags.DEFINE_integer("repetitions", 3, "Timed repetitions of every row.")
  flags.DEFINE_integer("warmup_steps", 2, "Untimed runs per row first.")
  flags.DEFINE_integer("threads", 0, "Intra-op threads (0: all cores).")
  flags.DEFINE_list("precisions", ["fp32", "bf16"], "Precisions to time.")
  flags.DEFINE_list("optimizers", ["adamw", "lamb"], "Optimizers to time.")
  flags.DEFINE_list("accumulations", ["1", "4"],
                    "Gradient accumulation steps to time.")
  # --use_xla: also time fp32 adamw accumulation-1 training and fp32
  # inference with XLA auto-clustering (same process). The scripts' shared
  # flag, so that cli_entry.run_main turns on XLA's CPU clustering in time
  # (TensorFlow reads TF_XLA_FLAGS right after the flags are parsed).
  cli_flags.define_flags("use_xla")


_STEPS_PER_REPETITION = 4  # Whole updates for accumulation 4.


def build_graph(config, batch, kind, precision, accumulation=1,
                optimizer="adamw", cast_weights_once=None):
  """Builds one row's graph; returns (graph, fetch, placeholders).

  `kind` "train" (the pre-training step: BertModel, both heads and the
  optimizer update; fetch is the train op) or "inference" (fetch is the
  sequence output, float [batch, seq, hidden]); `batch`: numpy arrays as
  from `bench_encoder.make_batch`, fed through placeholders of their shapes;
  `cast_weights_once`: see `modeling.BertModel`; None = for inference, as
  the scripts' PREDICT and EVAL graphs. Initialize with `initialize`.
  """
  if cast_weights_once is None:
    cast_weights_once = kind == "inference"
  graph = tf.Graph()
  with graph.as_default():
    tf.set_random_seed(1)
    inputs = {k: tf.placeholder(tf.float32 if v.dtype == np.float32 else
                                tf.int32, v.shape, name=k)
              for k, v in batch.items()}
    model = modeling.BertModel(
        config, is_training=(kind == "train"), input_ids=inputs["input_ids"],
        input_mask=inputs["input_mask"], token_type_ids=inputs["segment_ids"],
        compute_dtype=training_options.PRECISION_DTYPES[precision],
        cast_weights_once=cast_weights_once)
    if kind == "inference":
      fetch = model.get_sequence_output()
    else:
      mlm_loss, _, _ = run_pretraining.get_masked_lm_output(
          config, model.get_sequence_output(), model.get_embedding_table(),
          inputs["masked_lm_positions"], inputs["masked_lm_ids"],
          inputs["masked_lm_weights"])
      nsp_loss, _, _ = run_pretraining.get_next_sentence_output(
          config, model.get_pooled_output(), inputs["next_sentence_labels"])
      fetch = optimization.create_optimizer(
          mlm_loss + nsp_loss, init_lr=1e-4, num_train_steps=100000,
          num_warmup_steps=0, use_tpu=False,
          options=optimization.OptimizerOptions(
              optimizer=optimizer, loss_scaling=(precision == "fp16"),
              gradient_accumulation_steps=accumulation))
  return graph, fetch, inputs


def same_weights(sess, values=None):
  """Gives an open row the weights of another: returns {name: value} of the
  session's global variables when `values` is None, else loads `values`
  into them and refills the local variables cast from them."""
  with sess.graph.as_default():
    variables = tf.global_variables()
    if values is None:
      return {v.op.name: sess.run(v) for v in variables}
    for v in variables:
      v.load(values[v.op.name], sess)
    sess.run(tf.local_variables_initializer())
  return values


def define_inference_flags():
  """The flags of the inference A/B benchmarks (bench_gelu_fusion.py,
  bench_bf16_inference.py)."""
  flags.DEFINE_integer("num_hidden_layers", 12, "Encoder layers.")
  flags.DEFINE_integer("batch_size", 8, "Sequences per step.")
  flags.DEFINE_integer("seq_length", 128, "Tokens per sequence.")
  flags.DEFINE_integer("repetitions", 5, "Timed repetitions of every row.")
  flags.DEFINE_integer("threads", 0, "Intra-op threads (0: all cores).")


def inference_header():
  """Prints the CPU and the inference benchmarks' shape; returns the
  intra-op thread count (--threads, or every core)."""
  threads = FLAGS.threads or os.cpu_count()
  model, present, _ = cpu_report()
  print("CPU: %s; bf16 flags: %s" % (model, ", ".join(present) or "none"))
  print("TF %s, BERT L=%d H=768 inference, batch %d x %d, %d threads, %d "
        "repetitions x 2 steps" % (tf.__version__, FLAGS.num_hidden_layers,
                                    FLAGS.batch_size, FLAGS.seq_length,
                                    threads, FLAGS.repetitions), flush=True)
  return threads


def initialize(sess):
  """Initializes the session graph's variables: the global ones, then the
  local ones (the inference graphs' weights cast once from them; run
  `tf.local_variables_initializer()` again after loading other values)."""
  with sess.graph.as_default():
    sess.run(tf.global_variables_initializer())
    sess.run(tf.local_variables_initializer())


def open_row(config, batch, threads, xla=False, **row):
  """(session with the row's graph initialized, fetch, feed dict)."""
  graph, fetch, inputs = build_graph(config, batch, **row)
  session_config = tf.ConfigProto(intra_op_parallelism_threads=threads,
                                  inter_op_parallelism_threads=threads)
  if xla:  # As --use_xla sets it (training_options.configure_run_config).
    session_config.graph_options.optimizer_options.global_jit_level = (
        tf.OptimizerOptions.ON_1)
  sess = tf.Session(graph=graph, config=session_config)
  initialize(sess)
  return sess, fetch, {inputs[k]: v for k, v in batch.items()}


def runner(config, batch, threads, xla=False, **row):
  """A function running one step of a row (graph built and initialized)."""
  sess, fetch, feed = open_row(config, batch, threads, xla, **row)
  return (lambda: sess.run(fetch, feed_dict=feed)), sess


def matmul_kernels(config, batch, precision, threads):
  """{op type: count} of the matmul kernels an inference graph really runs."""
  graph, fetch, inputs = build_graph(config, batch, "inference", precision)
  with tf.Session(graph=graph, config=tf.ConfigProto(
      intra_op_parallelism_threads=threads)) as sess:
    initialize(sess)
    metadata = tf.RunMetadata()
    sess.run(fetch, {inputs[k]: v for k, v in batch.items()},
             options=tf.RunOptions(output_partition_graphs=True),
             run_metadata=metadata)
  counts = {}
  for partition in metadata.partition_graphs:
    for node in partition.node:
      if "MatMul" in node.op:
        counts[node.op] = counts.get(node.op, 0) + 1
  return counts


PROBE_FLOPS = 2 * 1024 * 768 * 3072  # [1024, 768] x [768, 3072].


def open_probe(precision, threads):
  """(function running one [1024, 768] x [768, 3072] product, session).

  The issue's in-run matmul probe: one TensorFlow matmul of BERT-Base's
  feed-forward shape (batch 8 x 128 tokens) in `precision`, its operands
  stored in that dtype so that only the product runs (`PROBE_FLOPS`).
  """
  dtype = training_options.PRECISION_DTYPES[precision]
  rng = np.random.RandomState(0)
  graph = tf.Graph()
  with graph.as_default():
    a, b = (tf.Variable(tf.cast(rng.standard_normal(shape).astype(np.float32),
                                dtype)) for shape in ((1024, 768), (768, 3072)))
    product = tf.matmul(a, b).op
    init = tf.global_variables_initializer()
  sess = tf.Session(graph=graph, config=tf.ConfigProto(
      intra_op_parallelism_threads=threads,
      inter_op_parallelism_threads=threads))
  sess.run(init)
  return (lambda: sess.run(product)), sess


def cpu_flags():
  """(CPU model name, set of its feature flags) from lscpu; empty if absent."""
  try:
    text = subprocess.run(["lscpu"], capture_output=True, text=True,
                          check=False).stdout
  except OSError:
    text = ""
  model = next((line.split(":", 1)[1].strip() for line in text.splitlines()
                if line.startswith("Model name")), "unknown CPU")
  found = set()
  for line in text.splitlines():
    if line.startswith("Flags"):
      found = set(line.split(":", 1)[1].split())
  return model, found


def cpu_report():
  """(model name, bf16 flags present, the target that applies) from lscpu."""
  model, found = cpu_flags()
  present = sorted(f for f in ("amx_bf16", "amx_tile", "avx512_bf16",
                               "avx512f") if f in found)
  if "amx_bf16" in found:
    target = "AMX: bf16 training >= 1.8x, inference >= 2.0x fp32"
  elif "avx512_bf16" in found:
    target = ("AVX512-BF16 without AMX: bf16 >= 1.7x fp32 and >= 92% of the "
              "matmul probe's bf16 / fp32, training and inference")
  else:
    target = ("none: no native bf16 on this CPU (no amx_bf16, no "
              "avx512_bf16); bf16 arithmetic is emulated and expected slower")
  return model, present, target


def _onednn_state():
  setting = os.environ.get("TF_ENABLE_ONEDNN_OPTS")
  try:
    from tensorflow.python.util import _pywrap_util_port  # pylint: disable=g-import-not-at-top
    built = _pywrap_util_port.IsMklEnabled()
  except (ImportError, AttributeError):
    built = None
  return "TF_ENABLE_ONEDNN_OPTS=%s; oneDNN custom ops on: %s" % (
      setting if setting is not None else
      "(unset: TF 2.15 then turns them on only for CPUs with AVX512_VNNI, "
      "AVX512_BF16 or AMX-class features)", built)


def _rows():
  """The timed rows; the fp32 adamw accumulation-1 baseline always first."""
  rows = [dict(kind="train", precision="fp32", accumulation=1,
               optimizer="adamw")]
  for precision in FLAGS.precisions:
    for accumulation in [int(a) for a in FLAGS.accumulations]:
      for optimizer in FLAGS.optimizers:
        row = dict(kind="train", precision=precision,
                   accumulation=accumulation, optimizer=optimizer)
        if row not in rows:
          rows.append(row)
  if FLAGS.use_xla:
    rows.append(dict(rows[0], xla=True))
  for precision in ["fp32"] + [p for p in FLAGS.precisions if p != "fp32"]:
    rows.append(dict(kind="inference", precision=precision))
  if FLAGS.use_xla:
    rows.append(dict(kind="inference", precision="fp32", xla=True))
  return rows


def _label(row):
  xla = " xla" if row.get("xla") else ""
  if row["kind"] == "inference":
    return "inference %s%s" % (row["precision"], xla)
  return "train %s accum %d %s%s" % (row["precision"], row["accumulation"],
                                     row["optimizer"], xla)


def _baseline(row):
  return dict(kind=row["kind"], precision="fp32", accumulation=1,
              optimizer="adamw") if row["kind"] == "train" else dict(
                  kind="inference", precision="fp32")


def time_rows(rows, config, batch, threads):
  """{label: (row timings, baseline timings taken with it)}."""
  results = {}
  baselines = {}
  for row in rows:
    base = _baseline(row)
    if _label(base) not in baselines:
      baselines[_label(base)] = runner(config, batch, threads, **base)
    if row == base:
      continue
    start = time.time()
    step, sess = runner(config, batch, threads, **row)
    pair = {"base": baselines[_label(base)][0], "row": step}
    timings = bench_encoder.time_interleaved(
        pair, FLAGS.repetitions, _STEPS_PER_REPETITION, FLAGS.warmup_steps)
    sess.close()
    results[_label(row)] = (timings["row"], timings["base"])
    print("  timed %s (%.0f s)" % (_label(row), time.time() - start),
          flush=True)
  for label, (_, sess) in baselines.items():
    del label
    sess.close()
  return results


def _ratio(pairs, base):
  """Baseline median wall time over the row's (its speed-up)."""
  return (statistics.median(w for w, _ in base) /
          statistics.median(w for w, _ in pairs))


def _table(rows, results, batch_size):
  lines = ["| row | sequences/s median (min-max) | ms/run | cores used | "
           "ratio to fp32 adamw accum 1 |", "|---|---|---|---|---|"]
  for row in rows:
    if row == _baseline(row):
      # The baseline's runs from every pair it was timed in.
      pairs = [p for label, (_, base) in results.items()
               if label.startswith(row["kind"]) for p in base]
      ratio = 1.0
    else:
      pairs, base = results[_label(row)]
      ratio = _ratio(pairs, base)
    walls = [w for w, _ in pairs]
    med = statistics.median(walls)
    lines.append("| %s | %.2f (%.2f-%.2f) | %.0f | %.1f | %.2fx |" % (
        _label(row), batch_size / med, batch_size / max(walls),
        batch_size / min(walls), med * 1e3,
        statistics.median(c / w for w, c in pairs), ratio))
  return "\n".join(lines)


def _bf16_summary(rows, results, threads):
  """bf16 / fp32 of the training (fp32 adamw, accumulation 1) and inference
  rows, beside the matmul probe's bf16 / fp32 timed interleaved now (issue
  #32, item 2: >= 1.7x and >= 92% of the probe's ratio)."""
  probes, sessions = {}, []
  for precision in ("fp32", "bf16"):
    probes[precision], sess = open_probe(precision, threads)
    sessions.append(sess)
  timings = bench_encoder.time_interleaved(probes, 3 * FLAGS.repetitions,
                                           _STEPS_PER_REPETITION, 2)
  for sess in sessions:
    sess.close()
  probe = {k: statistics.median(w for w, _ in v) for k, v in timings.items()}
  ceiling = probe["fp32"] / probe["bf16"]
  ratios = []
  for kind in ("train", "inference"):
    row = dict(kind=kind, precision="bf16")
    if kind == "train":
      row.update(accumulation=1, optimizer="adamw")
    if row in rows:
      ratios.append("%s %.2fx" % (kind, _ratio(*results[_label(row)])))
  return ("bf16 / fp32: %s; matmul probe [1024 x 768] x [768 x 3072] %.2fx "
          "(92%% of it: %.2fx)" % (", ".join(ratios), ceiling, 0.92 * ceiling))


def main(_):
  if FLAGS.quick:
    FLAGS.batch_size, FLAGS.repetitions, FLAGS.warmup_steps = 2, 2, 1
  if "fp32" not in FLAGS.precisions:
    raise ValueError("--precisions must include fp32 (the baseline)")
  threads = FLAGS.threads or os.cpu_count()
  config = bench_encoder.bert_config(FLAGS.num_hidden_layers,
                                     FLAGS.seq_length)
  batch = bench_encoder.feed_batch(config, FLAGS.batch_size, FLAGS.seq_length)
  model, present, target = cpu_report()
  print("CPU: %s; bf16 flags: %s" % (model, ", ".join(present) or "none"))
  print("Target: %s" % target)
  print(_onednn_state())
  for precision in FLAGS.precisions:
    print("Inference matmul kernels, %s: %s" % (
        precision, matmul_kernels(config, batch, precision, threads)))
  rows = _rows()
  start = time.time()
  results = time_rows(rows, config, batch, threads)
  print("Timed %d rows in %.0f s" % (len(rows), time.time() - start))
  print("\nBERT L=%d H=768, batch %d x seq %d, %d threads, %d repetitions x "
        "%d runs, TF %s.\n" % (config.num_hidden_layers, FLAGS.batch_size,
                               FLAGS.seq_length, threads, FLAGS.repetitions,
                               _STEPS_PER_REPETITION, tf.__version__))
  print(_table(rows, results, FLAGS.batch_size))
  if "bf16" in FLAGS.precisions:
    print("\n" + _bf16_summary(rows, results, threads))


if __name__ == "__main__":
  define_flags()
  cli_entry.run_main(main)
