"""`create_pretraining_data.py --num_shards=N`: the corpus parts on Beam.

The corpus is cut as `--num_workers=N` cuts it, each part one Beam element
run by the script's own part function (seed `random_seed + k`): shard k is
byte-identical to part k of `--num_workers=N`, and a worker holds one part.
Outputs appear only when every shard is written
(`beam_support.atomic_outputs`).
"""

import importlib
import os
import re
import sys
import time

from absl import logging

import bert_tf
from bert_tf.cli import flags as cli_flags
from bert_tf.corpus import beam_support
from bert_tf.tasks.pretraining import processes

__all__ = ["define_flags", "parts_from_flags", "run_shards"]

_NAMESPACE = "create_pretraining_data"


def define_flags():
  """Defines `--num_shards` and `--pipeline_options` (the shared table's)."""
  cli_flags.define_flags("num_shards", "pipeline_options")


def parts_from_flags(flag_values):
  """(number of corpus parts, the flag that sets it), checked before work.

  Raises:
    ValueError: a negative `--num_shards`, `--pipeline_options` without
      it, with `--num_workers` > 1, bad options, or no Beam.
  """
  num_shards = flag_values.num_shards
  if num_shards < 0:
    raise ValueError("--num_shards is %d; expected 0 (no Beam) or a number "
                     "of shards" % num_shards)
  if not num_shards:
    if flag_values.pipeline_options:
      raise ValueError("--pipeline_options: needs --num_shards (the Beam "
                       "pipeline's number of shards)")
    return flag_values.num_workers, "num_workers"
  if flag_values.num_workers != 1:
    raise ValueError("--num_shards=%d and --num_workers=%d: give one of them "
                     "(Beam runs the shards in its own workers)" %
                     (num_shards, flag_values.num_workers))
  beam_support.import_beam("num_shards")
  beam_support.pipeline_options(flag_values.pipeline_options, num_shards)
  return num_shards, "num_shards"


def run_shards(input_files, output_files, run_part, flag_values, *args):
  """Runs `run_part(k, num_parts, ranges, output_paths, *args,
  random_next_from=...)` (importable by name; returns the part's
  `documents` and `instances`) on each of `--num_shards` parts, on Beam;
  returns the number of instances written.

  Raises:
    ValueError: a part too small, or a worker's user error (one line).
  """
  beam = beam_support.import_beam("num_shards")
  num_shards = flag_values.num_shards
  options = beam_support.pipeline_options(flag_values.pipeline_options,
                                          num_shards)
  start = time.time()
  parts, num_documents = processes.split_corpus(input_files, num_shards)
  processes.check_parts(parts, num_documents, "num_shards")
  logging.info("Split the corpus into %d shards of %s documents in %.1f s",
               num_shards, "/".join(str(n) for n in num_documents),
               time.time() - start)
  part_outputs = processes.part_output_files(output_files, num_shards,
                                             "num_shards")
  target = (_module_name(run_part), run_part.__name__)
  beam_support.worker_pythonpath(sys.modules[run_part.__module__], bert_tf)
  with beam_support.atomic_outputs(part_outputs) as temps:
    borrowed = processes.random_next_ranges(parts, num_documents)
    elements = [(k, num_shards, parts[k], temps[k], borrowed[k])
                for k in range(num_shards)]
    metrics = _run_pipeline(beam, options, elements, target, args)
  return _log_parts(metrics, num_shards, part_outputs)


def _module_name(function):
  """Importable module name of `function` (a script run as `__main__` is
  imported by its file name)."""
  name = function.__module__
  if name == "__main__":
    path = getattr(sys.modules[name], "__file__", "") or ""
    name = re.sub(r"\.py$", "", path.replace("\\", "/").split("/")[-1])
  return name


def _run_pipeline(beam, options, elements, target, args):
  """Runs the shards' pipeline; returns its committed counter values."""
  pipeline = beam.Pipeline(options=options)
  _ = (pipeline
       | "Parts" >> beam.Create(elements)
       # Breaks fusion: each part may go to another worker.
       | "Spread" >> beam.Reshuffle()
       | "RunPart" >> beam.Map(_run_one_part, target, args))
  result = beam_support.run_pipeline(pipeline, "num_shards")
  return beam_support.counters(beam, result, _NAMESPACE)


def _run_one_part(element, target, args):
  """Beam step: writes one part's records under fresh attempt names
  (`beam_support.attempt_paths`); returns the part index."""
  # The beam extra is optional: imported only where a pipeline runs.
  from apache_beam.metrics import Metrics  # pylint: disable=g-import-not-at-top
  part_index, num_parts, ranges, temps, borrowed = element
  run_part = getattr(importlib.import_module(target[0]), target[1])
  with beam_support.attempt_paths(temps) as attempts:
    summary = run_part(part_index, num_parts, ranges, attempts, *args,
                       random_next_from=borrowed)
  cpu_s, peak_rss_mb = processes.process_usage()
  counts = {"documents": summary["documents"],
            "instances": summary["instances"],
            "cpu_ms": int(cpu_s * 1000),
            "peak_rss_kib": int(peak_rss_mb * 1024),
            "pid": os.getpid()}
  for name, value in counts.items():
    Metrics.counter(_NAMESPACE, "%s-%05d" % (name, part_index)).inc(value)
  return part_index


def _log_parts(metrics, num_shards, part_outputs):
  """Logs each shard's line (as `--num_workers` logs each part's)."""
  total = 0
  for k in range(num_shards):
    value = lambda name, k=k: metrics.get("%s-%05d" % (name, k), 0)
    total += value("instances")
    logging.info("shard %d/%d: %d documents, %d instances, %.1f s CPU, peak "
                 "RSS %.1f MiB (worker process %d); wrote %s", k, num_shards,
                 value("documents"), value("instances"),
                 value("cpu_ms") / 1000.0, value("peak_rss_kib") / 1024.0,
                 value("pid"), ", ".join(part_outputs[k]))
  return total
