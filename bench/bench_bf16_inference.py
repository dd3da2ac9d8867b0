"""bf16 / fp32 BERT-Base inference against the matmul probe's bf16 / fp32.

Issue #32, item 2: bf16 inference at >= 1.7x fp32 and >= 92% of the ratio
the in-run matmul probe reaches on this CPU. Times, interleaved in one
process (`bench_training`'s inference graph, batch 8 x 128, the same
weights in every row): fp32; bf16 with the weights cast on every step (as
training graphs read them); bf16 with the weights cast once into local
variables (`cast_weights_once`, as the scripts' PREDICT and EVAL graphs);
and the probe ([1024 x 768] x [768 x 3072]) in both precisions. Prints the
step times, bf16 / fp32 of both bf16 rows, the probe's ratio and 92% of it,
and checks that both bf16 rows give the same sequence output.

Run from the repo root (about 1 minute on 2 cores):
  python bench/bench_bf16_inference.py
"""

import statistics

from absl import flags
import numpy as np

# bench_training (found beside this file) puts the repo root on sys.path and
# quiets TensorFlow's C++ log before TensorFlow loads.
# pylint: disable=g-import-not-at-top,wrong-import-order
import bench_training

import bench_encoder
from bert_tf.cli import entry as cli_entry
# pylint: enable=g-import-not-at-top,wrong-import-order

FLAGS = flags.FLAGS

ROWS = (("fp32", "fp32", True), ("bf16, cast every step", "bf16", False),
        ("bf16, cast once", "bf16", True))


def main(_):
  threads = bench_training.inference_header()
  config = bench_encoder.bert_config(FLAGS.num_hidden_layers,
                                     FLAGS.seq_length)
  batch = bench_encoder.feed_batch(config, FLAGS.batch_size, FLAGS.seq_length)
  rows, outputs, sessions, values = {}, {}, [], None
  for name, precision, once in ROWS:
    sess, fetch, feed = bench_training.open_row(
        config, batch, threads, kind="inference", precision=precision,
        cast_weights_once=once)
    sessions.append(sess)
    values = bench_training.same_weights(sess, values)
    outputs[name] = sess.run(fetch, feed).astype(np.float32)
    rows[name] = (lambda s=sess, f=fetch, d=feed: s.run(f, d))
  for precision in ("fp32", "bf16"):
    rows["probe " + precision], probe_sess = bench_training.open_probe(
        precision, threads)
    sessions.append(probe_sess)
  timings = bench_encoder.time_interleaved(rows, FLAGS.repetitions, 2, 1)
  for sess in sessions:
    sess.close()
  seconds = {k: statistics.median(w for w, _ in v) for k, v in timings.items()}
  gap = float(np.abs(outputs[ROWS[1][0]] - outputs[ROWS[2][0]]).max())
  print("\n| row | ms (median) | min - max | fp32 / row |\n"
        "|---|---:|---:|---:|")
  for name in rows:
    walls = [w for w, _ in timings[name]]
    reference = seconds["probe fp32" if name.startswith("probe") else "fp32"]
    print("| %s | %.1f | %.1f - %.1f | %.3fx |" % (
        name, seconds[name] * 1e3, min(walls) * 1e3, max(walls) * 1e3,
        reference / seconds[name]))
  ceiling = seconds["probe fp32"] / seconds["probe bf16"]
  print("\nbf16 / fp32: cast every step %.3fx, cast once %.3fx; matmul probe "
        "%.3fx, 92%% of it %.3fx; the bf16 rows' outputs differ by %.3g" % (
            seconds["fp32"] / seconds[ROWS[1][0]],
            seconds["fp32"] / seconds[ROWS[2][0]], ceiling, 0.92 * ceiling,
            gap))


if __name__ == "__main__":
  bench_training.define_inference_flags()
  cli_entry.run_main(main)
