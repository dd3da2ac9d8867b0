"""GELU fused into oneDNN's matmul in inference, against the unfused op order.

`modeling.gelu` is built in the op order and name scope that Grappler's
remapper (second pass) turns, with the matmul and bias before it, into one
oneDNN kernel (`_MklNativeFusedMatMul`, fused_ops BiasAdd + GeluApproximate)
wherever nothing else reads the pre-activation: in inference. The reference
wrote the same formula as x * (0.5 * (1 + tanh(...))), which the remapper
does not match. This benchmark builds BERT-Base inference (batch 8 x 128,
`bench_training`'s graph) both ways, with the same weights, and times them
interleaved with the in-run matmul probe, fp32 and bf16. It prints, per
precision, the step times, the speed-up, the largest difference of the
sequence outputs, and bf16 / fp32 of both graphs beside the probe's bf16 /
fp32 (issue #32, item 2: >= 1.7x and >= 92% of the probe's ratio).

Run from the repo root (about 3 minutes on 2 cores):
  python bench/bench_gelu_fusion.py
"""

import math
import statistics

from absl import flags
import numpy as np

# bench_training (found beside this file) puts the repo root on sys.path and
# quiets TensorFlow's C++ log before TensorFlow loads.
# pylint: disable=g-import-not-at-top,wrong-import-order
import bench_training
import tensorflow.compat.v1 as tf

import bench_encoder
from bert_tf.cli import entry as cli_entry
# pylint: enable=g-import-not-at-top,wrong-import-order

FLAGS = flags.FLAGS


def unfused_gelu(x):
  """The tanh GELU in the reference's op order (not matched by the remapper)."""
  cdf = 0.5 * (1.0 + tf.tanh(
      math.sqrt(2.0 / math.pi) * (x + 0.044715 * tf.pow(x, 3))))
  return x * cdf


def _config(hidden_act):
  return bench_encoder.bert_config(FLAGS.num_hidden_layers, FLAGS.seq_length,
                                   hidden_act=hidden_act)


def _fused_gelus(sess, fetch, feed):
  """How many matmul kernels of the step run GELU inside them."""
  metadata = tf.RunMetadata()
  sess.run(fetch, feed, options=tf.RunOptions(output_partition_graphs=True),
           run_metadata=metadata)
  return sum(1 for graph in metadata.partition_graphs for node in graph.node
             if b"GeluApproximate" in node.attr["fused_ops"].list.s)


def time_precision(precision, batch, threads):
  """Step seconds of both graphs and the probe, the outputs' largest gap."""
  rows, outputs, sessions, values = {}, {}, [], None
  for name, act in (("unfused", unfused_gelu), ("fused", "gelu")):
    sess, fetch, feed = bench_training.open_row(
        _config(act), batch, threads, kind="inference", precision=precision)
    sessions.append(sess)
    values = bench_training.same_weights(sess, values)
    outputs[name] = sess.run(fetch, feed).astype(np.float32)
    print("  %s %s: %d matmul kernels with GELU inside" % (
        precision, name, _fused_gelus(sess, fetch, feed)), flush=True)
    rows[name] = (lambda s=sess, f=fetch, d=feed: s.run(f, d))
  probe, probe_sess = bench_training.open_probe(precision, threads)
  sessions.append(probe_sess)
  rows["probe"] = probe
  timings = bench_encoder.time_interleaved(rows, FLAGS.repetitions, 2, 1)
  for sess in sessions:
    sess.close()
  seconds = {k: statistics.median(w for w, _ in v) for k, v in timings.items()}
  gap = float(np.abs(outputs["fused"] - outputs["unfused"]).max())
  return seconds, gap


def main(_):
  threads = bench_training.inference_header()
  batch = bench_encoder.feed_batch(_config("gelu"), FLAGS.batch_size,
                                   FLAGS.seq_length)
  results = {p: time_precision(p, batch, threads) for p in ("fp32", "bf16")}
  print("\n| precision | unfused ms | fused ms | speed-up | largest output "
        "gap |\n|---|---:|---:|---:|---:|")
  for precision, (seconds, gap) in results.items():
    print("| %s | %.0f | %.0f | %.3fx | %.2g |" % (
        precision, seconds["unfused"] * 1e3, seconds["fused"] * 1e3,
        seconds["unfused"] / seconds["fused"], gap))
  fp32, bf16 = results["fp32"][0], results["bf16"][0]
  ceiling = fp32["probe"] / bf16["probe"]
  print("\nbf16 / fp32: unfused %.3fx, fused %.3fx; matmul probe %.3fx "
        "(92%% of it: %.3fx)" % (fp32["unfused"] / bf16["unfused"],
                                 fp32["fused"] / bf16["fused"], ceiling,
                                 0.92 * ceiling))


if __name__ == "__main__":
  bench_training.define_inference_flags()
  cli_entry.run_main(main)
