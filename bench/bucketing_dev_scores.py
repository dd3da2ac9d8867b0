"""Dev scores with and without --bucket_by_length, over several seeds.

Fine-tunes all-MiniLM-L6-v2 (the real 6-layer, 384-wide BERT that
setup.sh installs, converted by convert_checkpoint.py) with the scripts as
a user runs them, --random_seed 1..N, fixed padding and bucketed:
  * run_classifier.py on GLUE MRPC (all 3,668 training pairs, the 408 dev
    pairs): dev accuracy and F1;
  * run_ner.py on a CoNLL-2003 subset (the first --conll_sentences
    sentences of eng.train; all of eng.testa): dev entity F1.
It prints each run's scores and wall time, then per mode the mean and the
seed-to-seed spread (sample standard deviation, min-max), and the gap of
the means. Bucketed batches group inputs of similar length, so the order
of the training examples differs from the fixed run of the same seed: the
comparison is of distributions over seeds, not run by run.

Run from the repo root (BERT_SHARED_DIR: the data; default ../shared):
  python bench/bucketing_dev_scores.py            # 3 seeds, 1 epoch each
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags

# bench_bucketing (found beside this file) puts the repo root on sys.path.
# pylint: disable=g-import-not-at-top,wrong-import-order
import bench_bucketing
import convert_checkpoint
# pylint: enable=g-import-not-at-top,wrong-import-order

_REPO = bench_bucketing._REPO  # pylint: disable=protected-access

FLAGS = flags.FLAGS


def define_flags():
  flags.DEFINE_integer("seeds", 3, "Seeds per mode (1..N).")
  flags.DEFINE_float("num_train_epochs", 1.0, "Epochs of each run.")
  flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate.")
  flags.DEFINE_integer("conll_sentences", 4000,
                       "Training sentences of the CoNLL-2003 subset.")
  flags.DEFINE_list("tasks", ["mrpc", "conll2003"], "Data sets.")


def _head(src, dst, num_sentences):
  """The first `num_sentences` sentences of a CoNLL file."""
  seen, out = 0, []
  with open(src, encoding="utf-8") as f:
    for line in f:
      if not line.strip():
        seen += 1
        if seen >= num_sentences:
          break
      out.append(line)
  with open(dst, "w", encoding="utf-8") as f:
    f.write("".join(out))


def _eval_results(path):
  with open(path, encoding="utf-8") as f:
    return {key: float(value) for key, value in
            (line.rstrip("\n").split(" = ") for line in f)}


def _run(script, args):
  start = time.perf_counter()
  result = subprocess.run([sys.executable, os.path.join(_REPO, script)] +
                          args, cwd=_REPO, capture_output=True, text=True,
                          check=False)
  if result.returncode:
    sys.exit("%s failed:\n%s" % (script, result.stderr[-3000:]))
  return time.perf_counter() - start


def main(_):
  with tempfile.TemporaryDirectory(prefix="bucketing_dev_scores_") as work:
    _measure(work)


def _measure(work):
  """Every run, with its files under `work`; prints the table."""
  model_dir = os.path.join(work, "minilm")
  convert_checkpoint.hf_to_tf(os.path.dirname(bench_bucketing._vocab_file()),  # pylint: disable=protected-access
                              model_dir)
  model = ["--vocab_file=%s/vocab.txt" % model_dir,
           "--bert_config_file=%s/bert_config.json" % model_dir,
           "--init_checkpoint=%s" % model_dir, "--max_seq_length=128",
           "--learning_rate=%g" % FLAGS.learning_rate,
           "--num_train_epochs=%g" % FLAGS.num_train_epochs,
           "--do_train", "--do_eval"]
  conll = os.path.join(work, "conll")
  os.makedirs(conll)
  source = bench_bucketing._shared("data", "ner", "conll2003")  # pylint: disable=protected-access
  _head(os.path.join(source, "eng.train"), os.path.join(conll, "eng.train"),
        FLAGS.conll_sentences)
  _head(os.path.join(source, "eng.testa"), os.path.join(conll, "eng.testa"),
        10 ** 9)
  tasks = {
      "mrpc": ("run_classifier.py", [
          "--task_name=MRPC", "--data_dir=%s" % bench_bucketing._shared(  # pylint: disable=protected-access
              "data", "glue", "MRPC"), "--train_batch_size=32"],
               ("eval_accuracy", "eval_f1")),
      "conll2003": ("run_ner.py", ["--data_dir=%s" % conll,
                                   "--train_batch_size=32"], ("eval_f1",)),
  }
  scores = {}
  for task in FLAGS.tasks:
    script, args, keys = tasks[task]
    for seed in range(1, FLAGS.seeds + 1):
      for bucket in (False, True):
        out = os.path.join(work, "%s-%d-%s" % (task, seed, bucket))
        seconds = _run(script, model + args + [
            "--output_dir=" + out, "--random_seed=%d" % seed,
            "--bucket_by_length=%s" % bucket])
        results = _eval_results(os.path.join(out, "eval_results.txt"))
        scores.setdefault((task, bucket), []).append(
            (seconds, [results[k] for k in keys]))
        print("%s seed %d %s: %s, %.0f s" % (
            task, seed, "bucketed" if bucket else "fixed",
            ", ".join("%s %.4f" % (k, results[k]) for k in keys), seconds),
              flush=True)
  print("\nall-MiniLM-L6-v2, %g epoch(s), learning rate %g, seeds 1-%d" % (
      FLAGS.num_train_epochs, FLAGS.learning_rate, FLAGS.seeds))
  print("| data | metric | fixed mean (sd, min-max) | bucketed mean (sd, "
        "min-max) | gap of means | mean run s fixed / bucketed |")
  print("|---|---|---|---|---|---|")
  for task in FLAGS.tasks:
    keys = tasks[task][2]
    for i, key in enumerate(keys):
      cells = []
      for bucket in (False, True):
        values = [s[1][i] for s in scores[task, bucket]]
        cells.append("%.4f (%.4f, %.4f-%.4f)" % (
            statistics.mean(values),
            statistics.stdev(values) if len(values) > 1 else 0.0,
            min(values), max(values)))
      gap = (statistics.mean(s[1][i] for s in scores[task, True]) -
             statistics.mean(s[1][i] for s in scores[task, False]))
      times = [statistics.mean(s[0] for s in scores[task, b])
               for b in (False, True)]
      print("| %s | %s | %s | %s | %+.4f | %.0f / %.0f |" % (
          task, key, cells[0], cells[1], gap, times[0], times[1]))


if __name__ == "__main__":
  define_flags()
  app.run(main)
