"""Encoder throughput: this project's BertModel (TF) vs Hugging Face (PyTorch).

Times, on the same machine, shapes and thread count:
  * inference: `modeling.BertModel` (tf.compat.v1 Session, `is_training=False`)
    vs `transformers.BertModel` (eval mode, `torch.no_grad`), sequence output;
  * a training step: `BertModel` + the pre-training heads of
    `run_pretraining.py` (masked LM at `max_predictions_per_seq` positions,
    next sentence) + `optimization.create_optimizer` (AdamW, clipping at global
    norm 1.0) vs `transformers.BertForPreTraining` with the same labels +
    `torch.optim.AdamW` and the same clipping. Hugging Face's head projects
    every position onto the vocabulary (its design), so its step does more
    work; the FLOP column counts each side's own matmuls.
Random initialisation (BERT-Base shape by default), random token ids, full
attention masks, dropout on in training as in real training. Rows run
interleaved (each repetition times every row once, in rotating order) after
untimed warm-up steps, together with float32 `matmul_size`-square products
in numpy, TensorFlow and PyTorch, so that all rows see the same load of a
shared machine. The table gives sequences/s (median and min-max over
repetitions), the cores each row really got (process CPU time / wall time),
and the achieved matmul FLOP/s as a fraction of the ceiling, the best
library's median matmul rate (multiply-add = 2 FLOPs).

Run from the repo root (about 2.5 minutes on 2 CPU cores with the defaults):
  python bench/bench_encoder.py
  python bench/bench_encoder.py --num_hidden_layers=2 --repetitions=3
"""

import importlib
import importlib.util
import os
import statistics
import sys
import time

from absl import flags
import numpy as np

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _REPO not in sys.path:
  sys.path.insert(0, _REPO)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

# pylint: disable=g-import-not-at-top,wrong-import-position
# triton (imported by the CUDA builds of torch) crashes when it loads after
# TensorFlow >= 2.20, which loads with RTLD_GLOBAL: it is loaded first.
if importlib.util.find_spec("triton") is not None:
  importlib.import_module("triton")
import tensorflow.compat.v1 as tf

import modeling
import optimization
import run_pretraining
from bert_tf.cli import entry
# pylint: enable=g-import-not-at-top,wrong-import-position

FLAGS = flags.FLAGS


def define_flags():
  flags.DEFINE_integer("num_hidden_layers", 12, "Encoder layers.")
  flags.DEFINE_integer("hidden_size", 768, "Hidden width.")
  flags.DEFINE_integer("num_attention_heads", 12, "Attention heads.")
  flags.DEFINE_integer("intermediate_size", 3072, "Feed-forward width.")
  flags.DEFINE_integer("vocab_size", 30522, "Vocabulary size.")
  flags.DEFINE_integer("seq_length", 128, "Tokens per sequence.")
  flags.DEFINE_integer("batch_size", 8, "Sequences per step.")
  flags.DEFINE_integer("max_predictions_per_seq", 20,
                       "Masked-LM predictions per sequence (training step).")
  flags.DEFINE_integer("repetitions", 5, "Timed repetitions of every row.")
  flags.DEFINE_integer("steps", 1, "Steps per row per repetition.")
  flags.DEFINE_integer("warmup_steps", 1, "Untimed steps per row first.")
  flags.DEFINE_integer("threads", 0,
                       "Intra-op threads for both frameworks (0: all cores).")
  flags.DEFINE_list("modes", ["inference", "train"], "Which steps to time.")
  flags.DEFINE_integer("matmul_size", 2048, "Side of the ceiling's matmul.")


# ---------------------------------------------------------------------------
# Inputs and FLOP counts.


def bert_config(num_hidden_layers=12, seq_length=128, hidden_size=768,
                hidden_act="gelu"):
  """A BERT-Base-shaped `modeling.BertConfig` (30,522 WordPieces, 64-wide
  heads, feed-forward 4 x hidden) with `num_hidden_layers` layers."""
  return modeling.BertConfig(
      vocab_size=30522, hidden_size=hidden_size,
      num_hidden_layers=num_hidden_layers,
      num_attention_heads=max(1, hidden_size // 64),
      intermediate_size=4 * hidden_size, type_vocab_size=2,
      max_position_embeddings=max(512, seq_length), hidden_act=hidden_act)


def feed_batch(config, batch_size, seq_length, max_predictions=20):
  """`make_batch` from the benchmarks' seed, as float32 and int32 arrays."""
  batch = make_batch(np.random.RandomState(12345), config, batch_size,
                     seq_length, max_predictions)
  return {k: v.astype(np.float32 if v.dtype == np.float32 else np.int32)
          for k, v in batch.items()}


def make_batch(rng, config, batch_size, seq_length, max_predictions):
  """Random int32 inputs and pre-training labels, as numpy arrays."""
  positions = np.stack([
      np.sort(rng.choice(np.arange(1, seq_length), max_predictions,
                         replace=False)) for _ in range(batch_size)])
  half = seq_length // 2
  return {
      "input_ids": rng.randint(0, config.vocab_size, (batch_size, seq_length)),
      "input_mask": np.ones((batch_size, seq_length)),
      "segment_ids": np.tile([0] * half + [1] * (seq_length - half),
                             (batch_size, 1)),
      "masked_lm_positions": positions,
      "masked_lm_ids": rng.randint(0, config.vocab_size, positions.shape),
      "masked_lm_weights": np.ones(positions.shape, np.float32),
      "next_sentence_labels": rng.randint(0, 2, (batch_size,)),
  }


def forward_flops(config, seq_length, head_positions=0):
  """Matmul FLOPs of one sequence's forward pass (multiply-add = 2).

  Per layer: Q, K, V and output projections 8·T·H², feed-forward 4·T·H·I,
  scores and weighted sum 4·T²·H; plus the pooler 2·H², and for
  `head_positions` masked-LM positions the transform 2·H² and the vocabulary
  projection 2·H·V each.
  """
  t, h = seq_length, config.hidden_size
  layer = 8 * t * h * h + 4 * t * h * config.intermediate_size + 4 * t * t * h
  head = head_positions * (2 * h * h + 2 * h * config.vocab_size)
  return config.num_hidden_layers * layer + 2 * h * h + head


# ---------------------------------------------------------------------------
# The runners: each is a function that performs one step.


def _session(graph, threads):
  session_config = tf.ConfigProto(intra_op_parallelism_threads=threads,
                                  inter_op_parallelism_threads=threads)
  return tf.Session(graph=graph, config=session_config)


def tf_runner(config, batch, mode, threads):
  """One step of this project's model in a tf.compat.v1 graph."""
  graph = tf.Graph()
  with graph.as_default():
    tf.set_random_seed(1)
    inputs = {k: tf.placeholder(tf.float32 if v.dtype == np.float32 else
                                tf.int32, v.shape, name=k)
              for k, v in batch.items()}
    model = modeling.BertModel(
        config, is_training=(mode == "train"), input_ids=inputs["input_ids"],
        input_mask=inputs["input_mask"], token_type_ids=inputs["segment_ids"])
    if mode == "inference":
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
          num_warmup_steps=0, use_tpu=False)
    init = tf.global_variables_initializer()
  sess = _session(graph, threads)
  sess.run(init)
  feed = {inputs[k]: v for k, v in batch.items()}
  return lambda: sess.run(fetch, feed_dict=feed)


def torch_runners(config, batch, modes, threads):
  """Steps of Hugging Face's BERT in PyTorch (one model's weights for both)."""
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  torch.set_num_threads(threads)
  torch.manual_seed(1)
  hf_config = transformers.BertConfig(
      vocab_size=config.vocab_size, hidden_size=config.hidden_size,
      num_hidden_layers=config.num_hidden_layers,
      num_attention_heads=config.num_attention_heads,
      intermediate_size=config.intermediate_size, hidden_act="gelu_new",
      max_position_embeddings=config.max_position_embeddings,
      type_vocab_size=config.type_vocab_size, layer_norm_eps=1e-12)
  model = transformers.BertForPreTraining(hf_config)
  t = {k: torch.tensor(v, dtype=torch.float32 if v.dtype == np.float32
                       else torch.long) for k, v in batch.items()}
  labels = torch.full_like(t["input_ids"], -100)  # -100: not predicted.
  labels.scatter_(1, t["masked_lm_positions"], t["masked_lm_ids"])
  optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, eps=1e-6,
                                weight_decay=0.01)

  def inference():
    model.eval()
    with torch.no_grad():
      return model.bert(input_ids=t["input_ids"],
                        attention_mask=t["input_mask"],
                        token_type_ids=t["segment_ids"]).last_hidden_state

  def train():
    model.train()
    loss = model(input_ids=t["input_ids"], attention_mask=t["input_mask"],
                 token_type_ids=t["segment_ids"], labels=labels,
                 next_sentence_label=t["next_sentence_labels"]).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)

  runners = {"inference": inference, "train": train}
  return {mode: runners[mode] for mode in modes}, (
      "torch %s (%s BLAS), transformers %s, attention %s" %
      (torch.__version__,
       "MKL" if torch.backends.mkl.is_available() else "non-MKL",
       transformers.__version__,
       model.config._attn_implementation))  # pylint: disable=protected-access


# ---------------------------------------------------------------------------
# The ceiling, the timing loop and the table.

_MATMULS_PER_STEP = 4  # Products per timed matmul step (each is short).


def matmul_runners(size, threads):
  """Steps of `_MATMULS_PER_STEP` float32 [size, size] products per library.

  Returns:
    dict library -> function, for numpy, TensorFlow and PyTorch.
  """
  import torch  # pylint: disable=g-import-not-at-top
  rng = np.random.RandomState(0)
  a, b = (rng.standard_normal((size, size)).astype(np.float32)
          for _ in range(2))
  graph = tf.Graph()
  with graph.as_default():
    product = tf.matmul(tf.Variable(a), tf.Variable(b))
    init = tf.global_variables_initializer()
  sess = _session(graph, threads)
  sess.run(init)
  ta, tb = torch.from_numpy(a), torch.from_numpy(b)
  out = torch.empty(size, size)
  products = {
      "numpy": lambda: np.dot(a, b),
      "TensorFlow": lambda: sess.run(product.op),
      "PyTorch": lambda: torch.mm(ta, tb, out=out),
  }

  def repeat(fn):
    def step():
      for _ in range(_MATMULS_PER_STEP):
        fn()
    return step

  return {name: repeat(fn) for name, fn in products.items()}


def time_interleaved(runners, repetitions, steps, warmup_steps):
  """Wall and CPU seconds per step of every runner, one pair per repetition.

  Each repetition times every runner once (`steps` consecutive steps), in an
  order that rotates by one each repetition, so the drifts of a shared
  machine spread over all rows. CPU seconds are the whole process's (all
  threads), so CPU / wall is the number of cores a row really got.
  """
  names = list(runners)
  for name in names:
    for _ in range(warmup_steps):
      runners[name]()
  timings = {name: [] for name in names}
  for rep in range(repetitions):
    for name in names[rep % len(names):] + names[:rep % len(names)]:
      wall, cpu = time.perf_counter(), time.process_time()
      for _ in range(steps):
        runners[name]()
      timings[name].append(((time.perf_counter() - wall) / steps,
                            (time.process_time() - cpu) / steps))
  return timings


def _table(timings, flops, batch_size):
  """Markdown table: throughput, GFLOP/s and fraction of the matmul ceiling."""
  rates = {name: flops[name] / statistics.median(w for w, _ in timings[name])
           / 1e9 for name in timings}
  ceiling = max(rate for (mode, _), rate in rates.items() if mode == "matmul")
  lines = ["| step | implementation | per second median (min-max) | "
           "ms/step median | cores used | GFLOP/step | GFLOP/s | "
           "% of ceiling |", "|---|---|---|---|---|---|---|---|"]
  for (mode, impl), pairs in timings.items():
    walls = [w for w, _ in pairs]
    med = statistics.median(walls)
    cores = statistics.median(c / w for w, c in pairs)
    size = batch_size if mode != "matmul" else _MATMULS_PER_STEP
    unit = "sequences" if mode != "matmul" else "products"
    lines.append(
        "| %s | %s | %.2f (%.2f-%.2f) %s | %.0f | %.2f | %.1f | %.1f | %.0f%% |"
        % (mode, impl, size / med, size / max(walls), size / min(walls),
           unit, med * 1e3, cores,
           flops[(mode, impl)] / 1e9, rates[(mode, impl)],
           100.0 * rates[(mode, impl)] / ceiling))
  return "\n".join(lines)


def _build_runners(config, batch, threads):
  """Every timed row: (mode, implementation) -> (step function, FLOPs/step)."""
  hf_runners, hf_versions = torch_runners(config, batch, FLAGS.modes, threads)
  ours, theirs = "this project (TF %s graph)" % tf.__version__, "Hugging Face"
  seq, preds = FLAGS.seq_length, FLAGS.max_predictions_per_seq
  rows = {}
  for mode in FLAGS.modes:
    if mode == "inference":
      ours_flops = theirs_flops = forward_flops(config, seq)
    else:  # Forward + backward = 3 x forward; heads differ (see docstring).
      ours_flops = 3 * forward_flops(config, seq, preds)
      theirs_flops = 3 * forward_flops(config, seq, seq)
    rows[(mode, ours)] = (tf_runner(config, batch, mode, threads),
                          ours_flops * FLAGS.batch_size)
    rows[(mode, theirs)] = (hf_runners[mode], theirs_flops * FLAGS.batch_size)
  for lib, fn in matmul_runners(FLAGS.matmul_size, threads).items():
    rows[("matmul", lib)] = (fn, _MATMULS_PER_STEP * 2 * FLAGS.matmul_size ** 3)
  return rows, hf_versions


def main(_):
  threads = FLAGS.threads or os.cpu_count()
  config = modeling.BertConfig(
      vocab_size=FLAGS.vocab_size, hidden_size=FLAGS.hidden_size,
      num_hidden_layers=FLAGS.num_hidden_layers,
      num_attention_heads=FLAGS.num_attention_heads,
      intermediate_size=FLAGS.intermediate_size, type_vocab_size=2,
      max_position_embeddings=max(512, FLAGS.seq_length))
  batch = feed_batch(config, FLAGS.batch_size, FLAGS.seq_length,
                     FLAGS.max_predictions_per_seq)
  rows, hf_versions = _build_runners(config, batch, threads)
  timings = time_interleaved({k: fn for k, (fn, _) in rows.items()},
                             FLAGS.repetitions, FLAGS.steps,
                             FLAGS.warmup_steps)
  print("\nEncoder L=%d H=%d A=%d I=%d, batch %d x seq %d, %d threads, "
        "%d repetitions x %d steps; %s.\n" %
        (config.num_hidden_layers, config.hidden_size,
         config.num_attention_heads, config.intermediate_size,
         FLAGS.batch_size, FLAGS.seq_length, threads, FLAGS.repetitions,
         FLAGS.steps, hf_versions))
  print(_table(timings, {k: f for k, (_, f) in rows.items()},
               FLAGS.batch_size))
  print("\nCeiling: the best median of the float32 %d x %d matmul rows "
        "(timed interleaved with the model rows). FLOPs count matmuls only "
        "(multiply-add = 2); cores used = process CPU time / wall time." %
        (FLAGS.matmul_size, FLAGS.matmul_size))


if __name__ == "__main__":
  define_flags()
  entry.run_main(main)
