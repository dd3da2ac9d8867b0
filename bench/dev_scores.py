"""Dev scores of fixed padding against --bucket_by_length or
--pack_sequences, over several seeds.

Fine-tunes all-MiniLM-L6-v2 (the real 6-layer, 384-wide BERT that
setup.sh installs, converted by convert_checkpoint.py; --num_hidden_layers
keeps its first N layers) with the scripts as a user runs them,
--random_seed 1..N, fixed padding and the --variant flag set, the same
flags otherwise:
  * run_classifier.py on GLUE MRPC, SST-2 or CoLA (the first
    --train_examples training examples, 0: all; the whole dev set): dev
    accuracy, and F1 (MRPC) or Matthews correlation (CoLA);
  * run_ner.py on a CoNLL-2003 subset (the first --conll_sentences
    sentences of eng.train, the first --conll_dev_sentences of eng.testa):
    dev entity F1.
It prints each run's scores and wall time, then per data set, metric and
mode the mean and the seed-to-seed spread (sample standard deviation,
min-max), the gap of the means, and whether the variant's mean lies within
fixed padding's min-max. Bucketed or packed batches hold other examples
than the fixed run of the same seed: the comparison is of distributions
over seeds, not run by run.

Run from the repo root (BERT_SHARED_DIR: the data; default ../shared):
  python bench/dev_scores.py --variant=pack_sequences   # 3 seeds, 1 epoch
"""

import json
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
_shared = bench_bucketing._shared  # pylint: disable=protected-access

FLAGS = flags.FLAGS

# Data set -> (script, GLUE folder or None, eval_results.txt keys).
_TASKS = {"mrpc": ("run_classifier.py", "MRPC", ("eval_accuracy", "eval_f1")),
          "sst2": ("run_classifier.py", "SST-2", ("eval_accuracy",)),
          "cola": ("run_classifier.py", "CoLA", ("eval_accuracy", "eval_mcc")),
          "conll2003": ("run_ner.py", None, ("eval_f1",))}


def define_flags():
  flags.DEFINE_enum("variant", "pack_sequences",
                    ["pack_sequences", "bucket_by_length"],
                    "The flag compared with fixed padding.")
  flags.DEFINE_integer("seeds", 3, "Seeds per mode (1..N).")
  flags.DEFINE_float("num_train_epochs", 1.0, "Epochs of each run.")
  flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate.")
  flags.DEFINE_integer("train_batch_size", 32, "Examples per update.")
  flags.DEFINE_integer("max_seq_length", 128, "As the scripts' flag.")
  flags.DEFINE_integer("num_hidden_layers", 0,
                       "Keep the first N encoder layers (0: all 6).")
  flags.DEFINE_integer("train_examples", 0,
                       "GLUE training examples (the first N; 0: all).")
  flags.DEFINE_integer("conll_sentences", 4000,
                       "Training sentences of the CoNLL-2003 subset.")
  flags.DEFINE_integer("conll_dev_sentences", 0,
                       "Dev sentences of eng.testa (the first N; 0: all).")
  flags.DEFINE_list("modes", ["fixed", "variant"],
                    "Which runs to make: fixed padding, the variant, or both "
                    "(the table needs both; runs are deterministic per "
                    "seed, so one mode's runs can be added to an earlier "
                    "run's).")
  flags.DEFINE_list("tasks", ["mrpc", "conll2003"],
                    "Data sets: " + ", ".join(_TASKS))


def _head(src, dst, num_sentences):
  """The first `num_sentences` sentences of a CoNLL file (all: 0)."""
  seen, out = 0, []
  with open(src, encoding="utf-8") as f:
    for line in f:
      if not line.strip():
        seen += 1
        if seen >= num_sentences > 0:
          break
      out.append(line)
  _write(dst, out)


def _write(path, lines):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    f.write("".join(lines))


def _glue(work, name):
  """A copy of GLUE folder `name` with the first --train_examples."""
  source, folder = _shared("data", "glue", name), os.path.join(work, name)
  for split in ("train", "dev"):
    with open(os.path.join(source, split + ".tsv"), encoding="utf-8") as f:
      lines = f.readlines()
    if split == "train" and FLAGS.train_examples:
      # CoLA's files have no header line; the others have one.
      lines = lines[:FLAGS.train_examples + (name != "CoLA")]
    _write(os.path.join(folder, split + ".tsv"), lines)
  return folder


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
  with tempfile.TemporaryDirectory(prefix="dev_scores_") as work:
    _measure(work)


def _model(work):
  """The scripts' model flags: MiniLM, converted, maybe cut to fewer
  layers (the checkpoint's other layers are not read)."""
  model_dir = os.path.join(work, "minilm")
  convert_checkpoint.hf_to_tf(os.path.dirname(bench_bucketing._vocab_file()),  # pylint: disable=protected-access
                              model_dir)
  config_file = os.path.join(model_dir, "bert_config.json")
  if FLAGS.num_hidden_layers:
    with open(config_file, encoding="utf-8") as f:
      config = json.load(f)
    config["num_hidden_layers"] = FLAGS.num_hidden_layers
    _write(config_file, [json.dumps(config, indent=2)])
  return ["--vocab_file=%s/vocab.txt" % model_dir,
          "--bert_config_file=" + config_file,
          "--init_checkpoint=%s" % model_dir]


def _measure(work):
  """Every run, with its files under `work`; prints the table."""
  if not FLAGS.modes or set(FLAGS.modes) - {"fixed", "variant"}:
    raise app.UsageError("--modes=%s: expected fixed and/or variant" %
                         ",".join(FLAGS.modes))
  common = _model(work) + [
      "--max_seq_length=%d" % FLAGS.max_seq_length,
      "--learning_rate=%g" % FLAGS.learning_rate,
      "--num_train_epochs=%g" % FLAGS.num_train_epochs,
      "--train_batch_size=%d" % FLAGS.train_batch_size,
      "--do_train", "--do_eval"]
  scores = {}
  for task in FLAGS.tasks:
    script, glue, keys = _TASKS[task]
    if glue:
      args = ["--task_name=" + glue, "--data_dir=" + _glue(work, glue)]
    else:
      conll, source = (os.path.join(work, "conll"),
                       _shared("data", "ner", "conll2003"))
      _head(os.path.join(source, "eng.train"),
            os.path.join(conll, "eng.train"), FLAGS.conll_sentences)
      _head(os.path.join(source, "eng.testa"),
            os.path.join(conll, "eng.testa"), FLAGS.conll_dev_sentences)
      args = ["--data_dir=" + conll]
    for seed in range(1, FLAGS.seeds + 1):
      for on in [m == "variant" for m in ("fixed", "variant")
                 if m in FLAGS.modes]:
        out = os.path.join(work, "%s-%d-%s" % (task, seed, on))
        seconds = _run(script, common + args + [
            "--output_dir=" + out, "--random_seed=%d" % seed,
            "--%s=%s" % (FLAGS.variant, on)])
        results = _eval_results(os.path.join(out, "eval_results.txt"))
        scores.setdefault((task, on), []).append(
            (seconds, [results[k] for k in keys]))
        print("%s seed %d %s: %s, %.0f s" % (
            task, seed, FLAGS.variant if on else "fixed",
            ", ".join("%s %.4f" % (k, results[k]) for k in keys), seconds),
              flush=True)
  if set(FLAGS.modes) >= {"fixed", "variant"}:
    _table(scores)


def _table(scores):
  print("\nall-MiniLM-L6-v2%s, %g epoch(s), learning rate %g, batch %d, "
        "max_seq_length %d, seeds 1-%d; %s against fixed padding" % (
            " (first %d layers)" % FLAGS.num_hidden_layers
            if FLAGS.num_hidden_layers else "", FLAGS.num_train_epochs,
            FLAGS.learning_rate, FLAGS.train_batch_size, FLAGS.max_seq_length,
            FLAGS.seeds, FLAGS.variant))
  print("| data | metric | fixed: mean (sd, min-max) | %s: mean (sd, "
        "min-max) | gap of means | within fixed's min-max | run s, fixed / "
        "%s |" % (FLAGS.variant, FLAGS.variant))
  print("|---|---|---|---|---|---|---|")
  for task in FLAGS.tasks:
    for i, key in enumerate(_TASKS[task][2]):
      values = [[s[1][i] for s in scores[task, on]] for on in (False, True)]
      cells = ["%.4f (%.4f, %.4f-%.4f)" % (
          statistics.mean(v), statistics.stdev(v) if len(v) > 1 else 0.0,
          min(v), max(v)) for v in values]
      mean = statistics.mean(values[1])
      times = [statistics.mean(s[0] for s in scores[task, on])
               for on in (False, True)]
      print("| %s | %s | %s | %s | %+.4f | %s | %.0f / %.0f |" % (
          task, key, cells[0], cells[1], mean - statistics.mean(values[0]),
          "yes" if min(values[0]) <= mean <= max(values[0]) else "no",
          times[0], times[1]))


if __name__ == "__main__":
  define_flags()
  app.run(main)
