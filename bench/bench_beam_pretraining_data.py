# coding=utf-8
"""Benchmarks `create_pretraining_data.py --num_shards` (Apache Beam).

On the corpus of bench/bench_pretraining_data.py (real English and Chinese
text from the shared data folder, `--corpus_mb` MB in two files), runs the
script interleaved, `--reps` times each, as:

  workers=N   --num_workers=N
  beam=N      --num_shards=N on the DirectRunner, N processes
              (--direct_running_mode=multi_processing)

for N in `--parallelism` (default 1 and 2: equal parallelism, and 1 vs 2),
checks that beam=N writes the same bytes as workers=N, and prints a markdown
table of medians (min-max): wall seconds, instances/s, CPU seconds of all
processes, the peak RSS of the main process and of each worker process, and
the ratios beam/workers and 2 vs 1. Then, for memory: one shard of a corpus
`--corpus_mb / 4` against four shards of `--corpus_mb` (parts of equal size)
on two Beam processes, with each worker's peak RSS. Prints the CPU model and
flags; on a shared machine, the CPU-seconds columns are the ones to trust.

  .venv/bin/python bench/bench_beam_pretraining_data.py --reps=3  (after ./setup.sh --beam)
"""

import hashlib
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_pretraining_data as base  # pylint: disable=g-import-not-at-top  # The same corpus.

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FLAGS = flags.FLAGS


def define_flags():
  flags.DEFINE_float("corpus_mb", 11.0, "Corpus size in MB (10^6 bytes).")
  flags.DEFINE_integer("reps", 3, "Runs per configuration (interleaved).")
  flags.DEFINE_string("parallelism", "1,2", "Comma-separated N.")
  flags.DEFINE_integer("dupe_factor", 10, "--dupe_factor of each run.")
  flags.DEFINE_integer("max_seq_length", 128, "--max_seq_length of each run.")
  flags.DEFINE_bool("memory", True, "Also run the 1x/4x memory comparison.")
  flags.DEFINE_string("work_dir", None, "Where to build the corpus and "
                      "outputs (default: a temporary folder, removed).")


_DONE = re.compile(r"Done: (\d+) instances .*main process: ([\d.]+) s CPU, "
                   r"peak RSS ([\d.]+) MiB")
_PART = re.compile(r"(?:part|shard) (\d+)/\d+: (\d+) documents, (\d+) "
                   r"instances, ([\d.]+) s CPU, peak RSS ([\d.]+) MiB"
                   r"(?: \(worker process (\d+)\))?")


def run_once(corpus, vocab_file, out_dir, mode, n):
  """One run of the script; returns its measurements."""
  output = os.path.join(out_dir, "%s%d.tfrecord" % (mode, n))
  cmd = [sys.executable, os.path.join(_REPO, "create_pretraining_data.py"),
         "--input_file=" + ",".join(corpus), "--output_file=" + output,
         "--vocab_file=" + vocab_file, "--do_lower_case=true",
         "--dupe_factor=%d" % FLAGS.dupe_factor,
         "--max_seq_length=%d" % FLAGS.max_seq_length]
  if mode == "workers":
    cmd.append("--num_workers=%d" % n)
  else:
    cmd += ["--num_shards=%d" % n,
            "--pipeline_options=--runner=DirectRunner,--direct_num_workers=%d,"
            "--direct_running_mode=multi_processing" % min(n, 2)]
  log_path = output + ".log"
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
  parts = list(_PART.finditer(text))
  instances = int(done.group(1))
  # Peak RSS per worker process (Beam: a process may run several shards).
  peaks = {}
  for m in parts:
    key = m.group(6) or m.group(1)
    peaks[key] = max(peaks.get(key, 0.0), float(m.group(5)))
  return {"mode": mode, "n": n, "wall_s": wall, "instances": instances,
          "instances_per_s": instances / wall,
          "cpu_s": usage.ru_utime + usage.ru_stime,
          "main_peak_mib": float(done.group(3)),
          "worker_peak_mib": sorted(peaks.values()),
          "md5": _outputs_md5(output, n)}


def _outputs_md5(output, n):
  paths = [output] if n == 1 else ["%s-%05d-of-%05d" % (output, k, n)
                                   for k in range(n)]
  digest = hashlib.md5()
  for path in paths:
    with open(path, "rb") as f:
      digest.update(f.read())
    os.remove(path)
  return digest.hexdigest()


def _median(rows, key):
  return statistics.median(r[key] for r in rows)


def print_table(results, ns, corpus, sizes):
  print("Corpus: %.1f MB in %d files, dupe_factor=%d, max_seq_length=%d, %d "
        "interleaved runs per row. CPU: %s. Load average after: %s\n" % (
            sum(sizes) / 1e6, len(corpus), FLAGS.dupe_factor,
            FLAGS.max_seq_length, FLAGS.reps, base._cpu_flags(),  # pylint: disable=protected-access
            " ".join("%.2f" % x for x in os.getloadavg())))
  print("| run | wall s | instances/s | CPU s, all processes | peak RSS main "
        "MiB | peak RSS per worker MiB | same bytes as workers |")
  print("|---|---|---|---|---|---|---|")
  for n in ns:
    for mode in ("workers", "beam"):
      rows = [r for r in results if r["mode"] == mode and r["n"] == n]
      ref = {r["md5"] for r in results if r["mode"] == "workers" and
             r["n"] == n}
      peaks = [p for r in rows for p in r["worker_peak_mib"]]
      print("| %s=%d | %s | %s | %s | %s | %s | %s |" % (
          mode, n, base._span([r["wall_s"] for r in rows], "%.1f"),  # pylint: disable=protected-access
          base._span([r["instances_per_s"] for r in rows], "%.0f"),  # pylint: disable=protected-access
          base._span([r["cpu_s"] for r in rows], "%.1f"),  # pylint: disable=protected-access
          base._span([r["main_peak_mib"] for r in rows], "%.0f"),  # pylint: disable=protected-access
          ("%.0f-%.0f" % (min(peaks), max(peaks))) if peaks else "-",
          "yes" if {r["md5"] for r in rows} == ref and len(ref) == 1
          else "NO"))
  print()
  for n in ns:
    w = [r for r in results if r["mode"] == "workers" and r["n"] == n]
    b = [r for r in results if r["mode"] == "beam" and r["n"] == n]
    print("N=%d: beam/workers instances/s (wall) %.2fx; CPU s %.2fx" % (
        n, _median(b, "instances_per_s") / _median(w, "instances_per_s"),
        _median(b, "cpu_s") / _median(w, "cpu_s")))
  if len(ns) > 1:
    for mode in ("workers", "beam"):
      rate = {n: _median([r for r in results if r["mode"] == mode and
                          r["n"] == n], "instances_per_s") for n in ns}
      print("%s: %d vs %d instances/s (wall) %.2fx" % (
          mode, ns[1], ns[0], rate[ns[1]] / rate[ns[0]]))


def memory_comparison(vocab_file, work_dir):
  """Peak RSS per Beam worker: 1 shard of X MB vs 4 shards of 4X MB."""
  print("\nMemory: parts of %.1f MB; DirectRunner, 2 processes" %
        (FLAGS.corpus_mb / 4))
  print("| corpus MB | shards | instances | peak RSS per worker MiB | main "
        "MiB |")
  print("|---|---|---|---|---|")
  for scale, shards in ((1, 1), (4, 4)):
    folder = os.path.join(work_dir, "mem%d" % scale)
    os.makedirs(folder, exist_ok=True)
    corpus, sizes = base.build_corpus(folder, FLAGS.corpus_mb * scale / 4)
    r = run_once(corpus, vocab_file, folder, "beam", shards)
    print("| %.1f | %d | %d | %s | %.0f |" % (
        sum(sizes) / 1e6, shards, r["instances"],
        ", ".join("%.0f" % p for p in r["worker_peak_mib"]),
        r["main_peak_mib"]), flush=True)


def main(_):
  ns = [int(n) for n in FLAGS.parallelism.split(",")]
  vocab_file = base._shared("data", "vocab", "uncased_L-12_H-768_A-12",  # pylint: disable=protected-access
                            "vocab.txt")
  work_dir = FLAGS.work_dir or tempfile.mkdtemp(prefix="bench_beam_")
  os.makedirs(work_dir, exist_ok=True)
  try:
    corpus, sizes = base.build_corpus(work_dir, FLAGS.corpus_mb)
    results = []
    for rep in range(FLAGS.reps):
      configs = [(mode, n) for n in ns for mode in ("workers", "beam")]
      shift = rep % len(configs)
      for mode, n in configs[shift:] + configs[:shift]:
        r = run_once(corpus, vocab_file, work_dir, mode, n)
        results.append(r)
        print("rep %d %s=%d: %.1f s, %d instances, CPU %.1f s, worker peaks "
              "%s MiB, load %.2f" % (rep, mode, n, r["wall_s"],
                                     r["instances"], r["cpu_s"],
                                     r["worker_peak_mib"],
                                     os.getloadavg()[0]),
              file=sys.stderr, flush=True)
    print_table(results, ns, corpus, sizes)
    if FLAGS.memory:
      memory_comparison(vocab_file, work_dir)
  finally:
    if not FLAGS.work_dir:
      shutil.rmtree(work_dir, ignore_errors=True)


if __name__ == "__main__":
  define_flags()
  app.run(main)
