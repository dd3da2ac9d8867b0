"""LAMB's learning rate on the pre-training example of docs/pretraining.md.

Runs that pre-training example (`configs/bert_tiny_config.json`,
`sample_text.txt` records, batch 32, sequence 128) for a few steps with
AdamW at its `--learning_rate=1e-3` and with LAMB at several
rates, all in this run, and prints each run's masked-LM and next-sentence
loss (`--do_eval`, the same records) with the ratio to AdamW's.

  .venv/bin/python bench/bench_lamb_lr.py [--steps=20] [--vocab=...]

CPU only (CUDA_VISIBLE_DEVICES is cleared), `--deterministic`, so the runs
differ only in the optimizer and its rate.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

__all__ = ["main"]

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_SHARED = os.environ.get("BERT_SHARED_DIR", os.path.join(_ROOT, "..", "shared"))


def _run(args, env):
  result = subprocess.run([sys.executable] + args, cwd=_ROOT, env=env,
                          capture_output=True, text=True)
  if result.returncode:
    sys.exit(result.stderr[-3000:])


def _eval_results(path):
  with open(path) as f:
    return {k.strip(): float(v) for k, v in
            (line.split("=") for line in f if "=" in line)}


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--steps", type=int, default=20)
  parser.add_argument("--vocab", default=os.path.join(
      _SHARED, "data", "vocab", "uncased_L-12_H-768_A-12", "vocab.txt"))
  parser.add_argument("--lamb_rates", default="1e-3,5e-3,1e-2,2e-2")
  args = parser.parse_args()
  env = dict(os.environ, CUDA_VISIBLE_DEVICES="", TF_CPP_MIN_LOG_LEVEL="3")
  work = tempfile.mkdtemp(prefix="bench_lamb_")
  try:
    _bench(args, env, work)
  finally:
    shutil.rmtree(work, ignore_errors=True)


def _bench(args, env, work):
  """Makes the records, trains each optimizer and rate, prints the table."""
  records = os.path.join(work, "tf_examples.tfrecord")
  _run(["create_pretraining_data.py",
        "--input_file=" + os.path.join(_SHARED, "data", "pretrain",
                                       "sample_text.txt"),
        "--output_file=" + records, "--vocab_file=" + args.vocab,
        "--do_lower_case=True", "--max_seq_length=128",
        "--max_predictions_per_seq=20", "--masked_lm_prob=0.15",
        "--random_seed=12345", "--dupe_factor=5"], env)
  runs = [("adamw", 1e-3)] + [("lamb", float(r))
                              for r in args.lamb_rates.split(",")]
  results = []
  for optimizer, rate in runs:
    out = os.path.join(work, "%s_%g" % (optimizer, rate))
    _run(["run_pretraining.py", "--input_file=" + records,
          "--output_dir=" + out, "--do_train=True", "--do_eval=True",
          "--bert_config_file=" + os.path.join(_ROOT, "configs",
                                               "bert_tiny_config.json"),
          "--train_batch_size=32", "--max_seq_length=128",
          "--max_predictions_per_seq=20",
          "--num_train_steps=%d" % args.steps,
          "--num_warmup_steps=%d" % max(1, args.steps // 10),
          "--learning_rate=%g" % rate, "--optimizer=" + optimizer,
          "--max_eval_steps=10", "--deterministic=True"], env)
    results.append((optimizer, rate, _eval_results(
        os.path.join(out, "eval_results.txt"))))
  reference = results[0][2]["masked_lm_loss"]
  print("%d steps, batch 32, warmup %d; loss after training (eval on the "
        "training records)" % (args.steps, max(1, args.steps // 10)))
  print("| optimizer | learning rate | masked_lm_loss | / AdamW 1e-3 | "
        "next_sentence_loss |")
  print("|---|---:|---:|---:|---:|")
  for optimizer, rate, values in results:
    print("| %s | %g | %.3f | %.2f | %.3f |" % (
        optimizer, rate, values["masked_lm_loss"],
        values["masked_lm_loss"] / reference,
        values["next_sentence_loss"]))


if __name__ == "__main__":
  main()
