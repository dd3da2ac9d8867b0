# coding=utf-8
"""Benchmarks `create_pretraining_data.py` with 1 and 2 workers.

Builds a corpus of real text from the shared data folder (English SQuAD/XQuAD
paragraphs, GLUE RTE and SST-2 sentences, the BERT sample text; Chinese
Wikipedia text from CMRC 2018), mixed and repeated to reach `--corpus_mb`
megabytes in two files, then runs the
script as a subprocess, interleaving the worker counts, `--reps` times each.
For each run it measures wall time, instances/s (instances written / wall
time, including start-up), CPU seconds of all processes (`os.wait4`), the
critical-path CPU seconds (main process + slowest worker, as the script logs
them: the wall time a machine with a free core per process would need), and
the peak resident memory of the main process and each worker. Prints a
markdown table of medians with min-max and the 2-vs-1 worker ratios. On a
shared machine the wall-clock ratio reflects the other load; the
critical-path ratio does not.

  python bench/bench_pretraining_data.py            # 10 MB, 5 reps each
  python bench/bench_pretraining_data.py --reps=7 --dupe_factor=2

`--ab=serializer,shuffle` instead measures what each named speed trick is
worth end to end: every round runs the script as it is and once with each
trick replaced by the plain library call (`bench/cpd_variants.py`), in an
order that rotates from round to round; it prints each variant's median wall
and CPU seconds (all processes), the ratio to the unchanged script measured
in the same rounds, whether the output bytes were identical, and the CPU
flags of the machine. On a shared machine the CPU-seconds ratio is the one
to trust.

  python bench/bench_pretraining_data.py --ab=serializer,shuffle,gc_paused \
      --corpus_mb=2 --reps=3 --workers=1

The shared folder is `$BERT_SHARED_DIR` (default `../shared`).
"""

import collections
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FLAGS = flags.FLAGS


def define_flags():
  flags.DEFINE_float("corpus_mb", 10.0, "Corpus size in MB (10^6 bytes).")
  flags.DEFINE_integer("reps", 5, "Runs per worker count (interleaved).")
  flags.DEFINE_string("workers", "1,2", "Comma-separated worker counts.")
  flags.DEFINE_integer("dupe_factor", 10,
                       "--dupe_factor of each run (10: the script's default).")
  flags.DEFINE_integer("max_seq_length", 128, "--max_seq_length of each run.")
  flags.DEFINE_string("vocab_file", None,
                      "Vocabulary; default: the shared uncased BERT vocab.")
  flags.DEFINE_bool("writer_microbench", True,
                    "Also time serializing records the reference's way "
                    "(an Example built from an OrderedDict per instance) "
                    "against the script's direct encoder, in-process.")
  flags.DEFINE_list("ab", [],
                    "Speed tricks to measure by turning each off in turn "
                    "(names: see bench/cpd_variants.py TRICKS); runs with "
                    "the first --workers count.")
  flags.DEFINE_string("work_dir", None,
                      "Where to build the corpus and outputs (default: a "
                      "temporary folder, removed at the end).")


def _shared(*parts):
  root = os.environ.get("BERT_SHARED_DIR", os.path.join(_REPO, "..", "shared"))
  path = os.path.join(root, *parts)
  if not os.path.exists(path):
    raise FileNotFoundError("%s not found: set BERT_SHARED_DIR to the shared "
                            "folder" % path)
  return path


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _squad_documents(path):
  """Each paragraph of a SQuAD-format file as one document of sentences."""
  with open(path, encoding="utf-8") as f:
    data = json.load(f)["data"]
  documents = []
  for article in data:
    for paragraph in article["paragraphs"]:
      sentences = [s.strip() for s in _SENTENCE_END.split(paragraph["context"])]
      documents.append([s for s in sentences if s])
  return documents


def _tsv_column_documents(path, columns, lines_per_document):
  """Sentences of the given TSV columns, grouped into documents."""
  sentences = []
  with open(path, encoding="utf-8") as f:
    next(f)  # Header.
    for row in f:
      cells = row.rstrip("\n").split("\t")
      sentences.extend(cells[c].strip() for c in columns if c < len(cells))
  sentences = [s for s in sentences if s]
  return [sentences[i:i + lines_per_document]
          for i in range(0, len(sentences), lines_per_document)]


def _english_documents():
  documents = []
  documents += _squad_documents(
      _shared("data", "squad", "xquad_en_dev_v1.1", "xquad.en.json"))
  documents += _squad_documents(
      _shared("data", "squad", "haystack_dev_v2.0_small", "small.json"))
  documents += _tsv_column_documents(
      _shared("data", "glue", "RTE", "train.tsv"), [1, 2], 6)
  documents += _tsv_column_documents(
      _shared("data", "glue", "SST-2", "train.tsv"), [0], 12)
  texts = ["\n".join(d) for d in documents]
  with open(_shared("data", "pretrain", "sample_text.txt"),
            encoding="utf-8") as f:
    texts += f.read().strip().split("\n\n")
  return texts


def _chinese_documents():
  with open(_shared("data", "pretrain", "zh_cmrc2018_dev_wiki.txt"),
            encoding="utf-8") as f:
    return [d.strip() for d in f.read().split("\n\n") if d.strip()]


def _write_repeated(path, text, num_bytes):
  """Writes `text` repeated (blank line between copies), cut at the first
  document boundary after `num_bytes`; returns the size written."""
  data = text.encode("utf-8")
  copies = max(1, -(-num_bytes // (len(data) + 1)))
  data = b"\n\n".join([data] * copies) + b"\n"
  cut = data.find(b"\n\n", num_bytes)
  if cut >= 0:
    data = data[:cut + 1]
  with open(path, "wb") as f:
    f.write(data)
  return len(data)


def build_corpus(work_dir, corpus_mb):
  """Writes two files of about `corpus_mb / 2` MB each.

  Each file mixes English (every other document) and Chinese (every other
  document) text the same way, repeated to its size, so that the two
  worker parts hold similar amounts of work.

  Returns:
    (paths, sizes in bytes).
  """
  english, chinese = _english_documents(), _chinese_documents()
  paths, sizes = [], []
  for k in range(2):
    text = "\n\n".join(english[k::2] + chinese[k::2])
    paths.append(os.path.join(work_dir, "corpus%d.txt" % k))
    sizes.append(_write_repeated(paths[-1], text, int(corpus_mb * 1e6 / 2)))
  return paths, sizes


_DONE = re.compile(r"Done: (\d+) instances .*main process: ([\d.]+) s CPU, "
                   r"peak RSS ([\d.]+) MiB")
_PART = re.compile(r"part (\d+)/\d+: (\d+) documents, (\d+) instances, "
                   r"([\d.]+) s CPU, peak RSS ([\d.]+) MiB")


def run_once(corpus, vocab_file, out_dir, workers, without=None):
  """Runs the script once; returns a dict of measurements.

  `without`: None runs the script itself; a list of trick names runs it
  through `bench/cpd_variants.py` with those tricks turned off.
  """
  tag = "w%d%s" % (workers, "" if without is None else
                   "-" + ("-".join(without) or "asis"))
  output = os.path.join(out_dir, tag + ".tfrecord")
  if without is None:
    cmd = [sys.executable, os.path.join(_REPO, "create_pretraining_data.py")]
  else:
    cmd = [sys.executable, os.path.join(_REPO, "bench", "cpd_variants.py"),
           "--without=" + ",".join(without), "--"]
  cmd += ["--input_file=" + ",".join(corpus), "--output_file=" + output,
         "--vocab_file=" + vocab_file, "--do_lower_case=true",
         "--dupe_factor=%d" % FLAGS.dupe_factor,
         "--max_seq_length=%d" % FLAGS.max_seq_length,
         "--num_workers=%d" % workers]
  log_path = os.path.join(out_dir, tag + ".log")
  with open(log_path, "w") as log:
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                            cwd=_REPO)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
  with open(log_path) as log:
    text = log.read()
  done = _DONE.search(text)
  if status != 0 or not done:
    raise RuntimeError("run failed (status %d):\n%s" % (status, text[-3000:]))
  instances = int(done.group(1))
  parts = list(_PART.finditer(text))
  main_cpu = float(done.group(2))
  worker_cpu = [float(m.group(4)) for m in parts]
  critical_cpu = main_cpu + (max(worker_cpu) if worker_cpu else 0.0)
  return {
      "workers": workers, "wall_s": wall, "instances": instances,
      "instances_per_s": instances / wall,
      "cpu_s": usage.ru_utime + usage.ru_stime,
      "critical_cpu_s": critical_cpu,
      "instances_per_critical_cpu_s": instances / critical_cpu,
      "tree_peak_mib": usage.ru_maxrss / 1024.0,
      "main_peak_mib": float(done.group(3)),
      "worker_peak_mib": [float(m.group(5)) for m in parts],
      "part_documents": [int(m.group(2)) for m in parts],
      "output_md5": _outputs_md5(output, workers),
  }


def _outputs_md5(output, workers):
  """md5 of the output file(s) of one run, concatenated in part order."""
  paths = [output] if workers == 1 else [
      "%s-%05d-of-%05d" % (output, k, workers) for k in range(workers)]
  digest = hashlib.md5()
  for path in paths:
    with open(path, "rb") as f:
      digest.update(f.read())
    os.remove(path)
  return digest.hexdigest()


def _cpu_flags():
  """The CPU model and SIMD flags of this machine (Linux), for the record."""
  try:
    with open("/proc/cpuinfo") as f:
      text = f.read()
  except OSError:
    return "unknown"
  model = re.search(r"model name\s*:\s*(.*)", text)
  found = re.search(r"flags\s*:\s*(.*)", text)
  simd = [f for f in (found.group(1).split() if found else [])
          if f.startswith(("sse", "ssse", "avx", "fma", "bmi"))]
  return "%s; %d cores; %s" % (model.group(1) if model else "?",
                               os.cpu_count() or 0, " ".join(simd))


def ab_tricks(corpus, sizes, vocab_file, work_dir, workers, tricks):
  """Interleaved A/B runs: the script as is vs each trick turned off.

  Round r runs the variants [as is] + tricks rotated by r, so no variant
  always runs first or last. Prints a markdown table of medians and the
  off/on ratios (> 1: the trick saves time).
  """
  variants = [[]] + [[t] for t in tricks]
  results = collections.defaultdict(list)
  for rep in range(FLAGS.reps):
    shift = rep % len(variants)
    for without in variants[shift:] + variants[:shift]:
      result = run_once(corpus, vocab_file, work_dir, workers, without)
      results[tuple(without)].append(result)
      print("round %d, without %s: %.1f s wall, %.1f s CPU, %d instances, "
            "md5 %s, load %.2f" % (
                rep, ",".join(without) or "-", result["wall_s"],
                result["cpu_s"], result["instances"], result["output_md5"],
                os.getloadavg()[0]), file=sys.stderr, flush=True)
  print("Corpus: %.1f MB in %d files, dupe_factor=%d, max_seq_length=%d, "
        "num_workers=%d, %d interleaved rounds. CPU: %s. Load average "
        "after: %s\n" % (sum(sizes) / 1e6, len(corpus), FLAGS.dupe_factor,
                         FLAGS.max_seq_length, workers, FLAGS.reps,
                         _cpu_flags(), " ".join("%.2f" % x
                                                for x in os.getloadavg())))
  print("| trick | on: wall s | off: wall s | wall off/on | on: CPU s | "
        "off: CPU s | CPU off/on | same bytes |")
  print("|---|---|---|---|---|---|---|---|")
  base = results[()]
  base_wall = statistics.median(r["wall_s"] for r in base)
  base_cpu = statistics.median(r["cpu_s"] for r in base)
  base_md5 = {r["output_md5"] for r in base}
  for trick in tricks:
    rows = results[(trick,)]
    wall = statistics.median(r["wall_s"] for r in rows)
    cpu = statistics.median(r["cpu_s"] for r in rows)
    same = {r["output_md5"] for r in rows} == base_md5 and len(base_md5) == 1
    print("| %s | %.1f | %.1f | %.2f | %.1f | %.1f | %.2f | %s |" % (
        trick, base_wall, wall, wall / base_wall, base_cpu, cpu,
        cpu / base_cpu, "yes" if same else "NO"))


def _span(values, fmt):
  return (fmt + " (" + fmt + "-" + fmt + ")") % (
      statistics.median(values), min(values), max(values))


def print_table(results, worker_counts, corpus, sizes):
  """Markdown table: medians (min-max) per worker count, and the ratios."""
  print("Corpus: %s (%.1f MB in %d files), dupe_factor=%d, max_seq_length="
        "%d, %d runs per row, interleaved. Load average after: %s\n" % (
            ", ".join(os.path.basename(p) for p in corpus), sum(sizes) / 1e6,
            len(corpus), FLAGS.dupe_factor, FLAGS.max_seq_length, FLAGS.reps,
            " ".join("%.2f" % x for x in os.getloadavg())))
  print("| workers | wall s | instances | instances/s | CPU s, all "
        "processes | critical-path CPU s | peak RSS main MiB | peak RSS per "
        "worker MiB |")
  print("|---|---|---|---|---|---|---|---|")
  wall_rate, cpu_rate = {}, {}
  for w in worker_counts:
    rows = [r for r in results if r["workers"] == w]
    wall_rate[w] = statistics.median(r["instances_per_s"] for r in rows)
    cpu_rate[w] = statistics.median(r["instances_per_critical_cpu_s"]
                                    for r in rows)
    per_worker = [max(r["worker_peak_mib"]) for r in rows
                  if r["worker_peak_mib"]]
    print("| %d | %s | %s | %s | %s | %s | %s | %s |" % (
        w, _span([r["wall_s"] for r in rows], "%.1f"),
        _span([r["instances"] for r in rows], "%d"),
        _span([r["instances_per_s"] for r in rows], "%.0f"),
        _span([r["cpu_s"] for r in rows], "%.1f"),
        _span([r["critical_cpu_s"] for r in rows], "%.1f"),
        _span([r["main_peak_mib"] for r in rows], "%.0f"),
        _span(per_worker, "%.0f") if per_worker else "-"))
  base = worker_counts[0]
  for w in worker_counts[1:]:
    print("\nMedian instances/s (wall), %d vs %d worker(s): %.2fx" % (
        w, base, wall_rate[w] / wall_rate[base]))
    print("Median instances per critical-path CPU second (main process + "
          "slowest worker: the wall time with a free core per process), %d vs "
          "%d: %.2fx" % (w, base, cpu_rate[w] / cpu_rate[base]))


def writer_microbench(corpus, vocab_file, num_bytes=2000000):
  """Per-instance cost of the reference-style vs the direct record encoder.

  Both serialize the same instances (from the first `num_bytes` of the
  corpus, dupe_factor 1); the bytes must be equal.
  """
  sys.path.insert(0, _REPO)
  import random  # pylint: disable=g-import-not-at-top
  import create_pretraining_data as cpd  # pylint: disable=g-import-not-at-top
  from bert_tf.tasks.pretraining import records  # pylint: disable=g-import-not-at-top
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  import tokenization  # pylint: disable=g-import-not-at-top

  # pylint: disable=protected-access
  tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
  documents = cpd._read_documents([(corpus[0], 0, num_bytes)], tokenizer)
  instances = cpd._instances_from_documents(
      documents, tokenizer, FLAGS.max_seq_length, 1, 0.1, 0.15, 20,
      random.Random(12345), False)

  def reference_style(instance):
    features = collections.OrderedDict()
    for name, values in zip(records.FEATURE_ORDER, records.instance_features(
        instance, tokenizer.vocab, FLAGS.max_seq_length, 20)):
      features[name] = (cpd.create_float_feature(values)
                        if name == "masked_lm_weights"
                        else cpd.create_int_feature(values))
    return tf.train.Example(
        features=tf.train.Features(feature=features)).SerializeToString()

  encoder = records.ExampleSerializer(tokenizer, FLAGS.max_seq_length, 20)
  timings = {}
  outputs = {}
  for name, fn in (("reference-style Example", reference_style),
                   ("direct encoder", encoder.serialize)):
    best = float("inf")
    for _ in range(3):
      start = time.perf_counter()
      outputs[name] = [fn(instance) for instance in instances]
      best = min(best, time.perf_counter() - start)
    timings[name] = best / len(instances) * 1e6
  same = len(set(tuple(v) for v in outputs.values())) == 1
  print("\nRecord serialization, %d instances (best of 3): %s; identical "
        "bytes: %s" % (len(instances), ", ".join(
            "%s %.1f us/instance" % item for item in timings.items()), same))


def main(_):
  worker_counts = [int(w) for w in FLAGS.workers.split(",")]
  vocab_file = FLAGS.vocab_file or _shared(
      "data", "vocab", "uncased_L-12_H-768_A-12", "vocab.txt")
  work_dir = FLAGS.work_dir or tempfile.mkdtemp(prefix="bench_cpd_")
  os.makedirs(work_dir, exist_ok=True)
  try:
    corpus, sizes = build_corpus(work_dir, FLAGS.corpus_mb)
    if FLAGS.ab:
      ab_tricks(corpus, sizes, vocab_file, work_dir, worker_counts[0],
                FLAGS.ab)
      return
    results = []
    for rep in range(FLAGS.reps):
      for w in worker_counts:
        result = run_once(corpus, vocab_file, work_dir, w)
        results.append(result)
        print("rep %d, %d worker(s): %.1f s, %d instances, %.0f/s, CPU %.1f "
              "s, critical path %.1f s, worker peaks %s MiB, load %.2f" % (
                  rep, w, result["wall_s"], result["instances"],
                  result["instances_per_s"], result["cpu_s"],
                  result["critical_cpu_s"], result["worker_peak_mib"],
                  os.getloadavg()[0]), file=sys.stderr, flush=True)
    print_table(results, worker_counts, corpus, sizes)
    if FLAGS.writer_microbench:
      writer_microbench(corpus, vocab_file)
  finally:
    if not FLAGS.work_dir:
      shutil.rmtree(work_dir, ignore_errors=True)


if __name__ == "__main__":
  define_flags()
  app.run(main)
