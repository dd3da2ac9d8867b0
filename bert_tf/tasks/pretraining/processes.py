"""`create_pretraining_data.py --num_workers=N`: one process a corpus part,
and the progress lines of every run (`Progress`, `process_usage`).

`split_corpus` cuts the corpus at document boundaries (blank lines),
`check_parts` refuses parts too small for next-sentence prediction,
`part_output_files` and `check_output_paths` name and check each part's
outputs, and `run_parts` runs the parts, renaming their outputs into place
only when every part succeeded. What is written does not depend on this:
each part runs the reference's algorithm on its share.
"""

import array
import bisect
import contextlib
import ctypes
import ctypes.util
import multiprocessing
import os
import signal
import time

from absl import logging

from bert_tf import io as io_utils

try:
  import resource
except ImportError:  # Not on Unix: no usage figures.
  resource = None

__all__ = ["Progress", "process_usage", "split_corpus", "describe_ranges",
           "random_next_ranges", "check_parts", "part_output_files",
           "check_output_paths", "run_parts"]

# Seconds between progress lines.
_PROGRESS_INTERVAL_S = 15.0


class Progress(object):
  """Logs a running count with its rate, at most every few seconds."""

  def __init__(self, what, prefix="", detail=None):
    self._what = what
    self._prefix = prefix
    self._detail = detail  # Optional callable -> str appended to each line.
    self._start = time.time()
    self._next_log = self._start + _PROGRESS_INTERVAL_S
    self.count = 0

  def add(self, n=1):
    self.count += n
    if self.count % 64 == 0 and time.time() >= self._next_log:
      self.log()

  def log(self, final=False):
    elapsed = max(time.time() - self._start, 1e-9)
    self._next_log = time.time() + _PROGRESS_INTERVAL_S
    logging.info("%s%s %d %s in %.1f s (%.1f/s)%s", self._prefix,
                 "done:" if final else "progress:", self.count, self._what,
                 elapsed, self.count / elapsed,
                 self._detail() if self._detail else "")


def process_usage():
  """(CPU seconds, peak resident MiB) of this process; NaN where unknown."""
  if resource is None:
    return float("nan"), float("nan")
  usage = resource.getrusage(resource.RUSAGE_SELF)
  return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0


def split_corpus(input_files, num_parts):
  """Cuts the corpus at blank lines into `num_parts` parts of similar size.

  Scans the bytes only (no tokenizing). Part k starts at the document
  boundary (the first blank line after a document) nearest k/num_parts of
  the corpus's bytes, moved as little as needed for every part to hold at
  least one document whenever the corpus has `num_parts` documents or more.

  Args:
    input_files: list of str, the corpus files in order.
    num_parts: int >= 1.

  Returns:
    (parts, num_documents): parts[k] is a list of `(path, start, end)` byte
    ranges (end None: to the end of the file), empty when there are fewer
    documents than parts; num_documents[k] counts the part's runs of
    non-blank lines (documents before tokenization).
  """
  # TensorFlow's file system for remote corpora; create_pretraining_data.py
  # defines its flags from this package before TensorFlow loads.
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  sizes = [tf.io.gfile.stat(path).length for path in input_files]
  starts = [sum(sizes[:i]) for i in range(len(sizes))]
  # Corpus offset of the blank line that ends document i (8 bytes each).
  boundaries = array.array("q")
  total_documents = 0
  in_document = False
  for file_index, path in enumerate(input_files):
    offset = starts[file_index]
    for raw_line in io_utils.iter_raw_lines(path):
      if not io_utils.decode_line(raw_line).strip():  # Blank line.
        if in_document:
          boundaries.append(offset)
        in_document = False
      elif not in_document:
        total_documents += 1
        in_document = True
      offset += len(raw_line) + 1
  chosen = _nearest_boundaries(boundaries, total_documents, sum(sizes),
                               num_parts)
  cuts = []
  for index in chosen:
    file_index = bisect.bisect_right(starts, boundaries[index]) - 1
    cuts.append((file_index, boundaries[index] - starts[file_index]))
  ends = [index + 1 for index in chosen] + [total_documents]
  num_documents = [end - begin for begin, end in zip([0] + ends, ends)]
  num_documents += [0] * (num_parts - len(num_documents))
  return _ranges_between_cuts(input_files, cuts, num_parts), num_documents


def _nearest_boundaries(boundaries, total_documents, total_bytes, num_parts):
  """Indexes into `boundaries` of the `num_parts - 1` cuts (fewer when the
  corpus has fewer documents than parts).

  Cut k goes to the boundary nearest `total_bytes * k / num_parts` (on a tie
  the later one), within the range that leaves each part a document.
  """
  chosen = []
  for k in range(1, num_parts):
    low = chosen[-1] + 1 if chosen else 0
    # Parts k..num_parts-1 each need one of the documents after the cut.
    high = min(total_documents - 1 - (num_parts - k), len(boundaries) - 1)
    if low > high:
      break
    target = total_bytes * k / num_parts
    index = bisect.bisect_left(boundaries, target, low, high + 1)
    if index > low and (index > high or
                        target - boundaries[index - 1] <
                        boundaries[index] - target):
      index -= 1
    chosen.append(index)
  return chosen


def random_next_ranges(parts, num_documents):
  """Where each part draws its "random next" segments from, besides itself.

  A part of one document has no other document of its own: it takes them
  from the next part (the last part from the one before). Other parts use
  their own documents only, as the reference does.

  Returns:
    list of lists of `(path, start, end)`, one per part (empty: none); each
    borrowing is logged.
  """
  borrowed = []
  for k, count in enumerate(num_documents):
    if count == 1 and len(parts) > 1:
      borrowed.append(parts[k + 1] if k + 1 < len(parts) else parts[k - 1])
      logging.info("part %d/%d holds one document: its random next segments "
                   "come from %s", k, len(parts),
                   describe_ranges(borrowed[-1]))
    else:
      borrowed.append([])
  return borrowed


def _ranges_between_cuts(input_files, cuts, num_parts):
  """Turns cut points into per-part lists of `(path, start, end)`."""
  bounds = [(0, 0)] + cuts + [(len(input_files) - 1, None)]
  parts = []
  for k in range(num_parts):
    if k + 1 >= len(bounds):
      parts.append([])  # Not enough blank lines to cut this many parts.
      continue
    (first_file, start), (last_file, end) = bounds[k], bounds[k + 1]
    ranges = []
    for file_index in range(first_file, last_file + 1):
      range_start = start if file_index == first_file else 0
      range_end = end if file_index == last_file else None
      if range_end is None or range_end > range_start:
        ranges.append((input_files[file_index], range_start, range_end))
    parts.append(ranges)
  return parts


def describe_ranges(ranges):
  """`path[start:end], ...` of a part's byte ranges, for messages."""
  return ", ".join("%s[%d:%s]" % (path, start, "" if end is None else end)
                   for path, start, end in ranges) or "no text left to cut"


def check_parts(parts, num_documents, flag_name="num_workers"):
  """Refuses parts without a document, before any work starts.

  Raises:
    ValueError: naming `--<flag_name>`, the part and its byte ranges.
  """
  for k, count in enumerate(num_documents):
    if count < 1:
      raise ValueError(
          "--%s=%d: part %d of the corpus (%s) holds no document; the "
          "corpus has %d document(s) (documents are separated by blank "
          "lines): use at most that many parts, or more text"
          % (flag_name, len(parts), k, describe_ranges(parts[k]),
             sum(num_documents)))


def part_output_files(output_files, num_workers, flag_name="num_workers"):
  """Output path(s) of each part: a list of `num_workers` lists of str.

  One worker writes all `output_files`; N workers take one path each, or
  part k writes `<path>-0000k-of-0000N` when one path is given.
  (`--num_shards` names its shards the same way.)

  Raises:
    ValueError: for another number of paths, naming `--<flag_name>`.
  """
  if num_workers == 1:
    return [output_files]
  if len(output_files) == num_workers:
    return [[path] for path in output_files]
  if len(output_files) == 1:
    return [["%s-%05d-of-%05d" % (output_files[0], k, num_workers)]
            for k in range(num_workers)]
  raise ValueError(
      "--output_file: got %d paths; with --%s=%d give one path (part "
      "k writes <path>-0000k-of-%05d) or %d paths" %
      (len(output_files), flag_name, num_workers, num_workers, num_workers))


def check_output_paths(input_files, output_files, num_workers,
                       flag_name="num_workers"):
  """Refuses output paths that are directories, repeated, or inputs.

  To be called before any work: a repeated path would lose the instances
  sent to its first use, and an input path would be overwritten.

  Args:
    input_files: list of str, the corpus.
    output_files: list of str, as given to `--output_file`.
    num_workers: int, see `part_output_files`.
    flag_name: str, the flag that set `num_workers` (for messages).

  Raises:
    ValueError: naming `--output_file` and the path.
  """
  seen = {}
  inputs = {os.path.abspath(os.path.normpath(path)) for path in input_files}
  for paths in part_output_files(output_files, num_workers, flag_name):
    for path in paths:
      io_utils.check_output_file(path, "output_file")
      key = os.path.abspath(os.path.normpath(path))
      if key in seen:
        raise ValueError("--output_file: %s is given more than once (as %s "
                         "and %s); each output path must be distinct"
                         % (key, seen[key], path))
      if key in inputs:
        raise ValueError("--output_file: %s is also an --input_file; it "
                         "would overwrite the corpus" % path)
      seen[key] = path


def run_parts(input_files, num_workers, output_files, run_part, *args):
  """Runs `run_part` on each part of the corpus, in a process each.

  The corpus is cut with `split_corpus` and checked with `check_parts`
  before any process starts. Worker k calls
  `run_part(k, num_workers, ranges_k, temp_output_paths_k, *args,
  random_next_from=borrowed_k)` (`random_next_ranges`), which
  returns a small picklable dict `summary` with the part's `documents` and
  `instances` counts (sent back with the worker's `cpu_s` and `peak_rss_mb`
  added). The outputs are renamed into place only when every part
  succeeded.

  Returns:
    list of the parts' summaries, in part order.

  Raises:
    The first failing part's exception, or ChildProcessError if a worker
    died without a word; every part's temporary files are then removed.
  """
  start = time.time()
  parts, num_documents = split_corpus(input_files, num_workers)
  check_parts(parts, num_documents)
  logging.info("Split the corpus into %d parts of %s documents in %.1f s",
               num_workers, "/".join(str(n) for n in num_documents),
               time.time() - start)
  part_outputs = part_output_files(output_files, num_workers)
  borrowed = random_next_ranges(parts, num_documents)
  with contextlib.ExitStack() as outputs:
    temps = [[outputs.enter_context(io_utils.atomic_path(path))
              for path in paths] for paths in part_outputs]
    results = _run_processes(run_part, [
        ((k, num_workers, parts[k], temps[k]) + args,
         {"random_next_from": borrowed[k]}) for k in range(num_workers)])
  for k, result in enumerate(results):
    logging.info("part %d/%d: %d documents, %d instances, %.1f s CPU, peak "
                 "RSS %.1f MiB; wrote %s", k, num_workers,
                 result["documents"], result["instances"], result["cpu_s"],
                 result["peak_rss_mb"], ", ".join(part_outputs[k]))
  return results


def _worker_main(connection, run_part, part_args, part_kwargs, parent):
  """Entry point of a worker process: runs one part, sends its outcome.

  Sends `("ok", summary)` or `("error", exception)`; Ctrl-C (sent to the
  whole process group) sends `("error", KeyboardInterrupt())` without a
  traceback. The worker ends when its parent (process id `parent`) dies.
  """
  _end_with_parent(parent)
  try:
    summary = dict(run_part(*part_args, **part_kwargs))
    summary["cpu_s"], summary["peak_rss_mb"] = process_usage()
    connection.send(("ok", summary))
  except KeyboardInterrupt:
    connection.send(("error", KeyboardInterrupt()))
  except Exception as e:  # pylint: disable=broad-except
    connection.send(("error", e))
  finally:
    connection.close()


def _end_with_parent(parent):
  """Asks Linux to send this process SIGTERM when its parent dies
  (`prctl(PR_SET_PDEATHSIG)`); elsewhere, nothing. Exits at once when the
  parent is already gone."""
  signal.signal(signal.SIGTERM, signal.SIG_DFL)
  try:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6",
                       use_errno=True)
    libc.prctl(1, int(signal.SIGTERM))  # 1: PR_SET_PDEATHSIG.
  except (OSError, AttributeError):
    return
  if os.getppid() != parent:
    os._exit(1)  # pylint: disable=protected-access


def _run_processes(run_part, all_part_args):
  """Runs `run_part(*args, **kwargs)` for each `(args, kwargs)` in its own
  process.

  One process per part (forked where the system allows, else spawned), so
  each holds one part's data only. When this process stops waiting (Ctrl-C,
  an error), the workers still running are ended.
  """
  method = ("fork" if "fork" in multiprocessing.get_all_start_methods()
            else "spawn")
  context = multiprocessing.get_context(method)
  workers = []
  try:
    for part_args, part_kwargs in all_part_args:
      receiver, sender = context.Pipe(duplex=False)
      process = context.Process(target=_worker_main,
                                args=(sender, run_part, part_args, part_kwargs,
                                      os.getpid()),
                                name="part-%d" % part_args[0])
      process.start()
      sender.close()
      workers.append((process, receiver))
    outcomes = [_receive(process, receiver) for process, receiver in workers]
  finally:
    for process, _ in workers:
      if process.is_alive():
        process.terminate()
        process.join()
  errors = [payload for status, payload in outcomes if status != "ok"]
  if errors:
    raise errors[0]
  return [payload for _, payload in outcomes]


def _receive(process, receiver):
  """(status, payload) from one worker, after it has exited."""
  try:
    outcome = receiver.recv()
  except EOFError:
    outcome = None
  process.join()
  if outcome is None:
    outcome = ("error", ChildProcessError(
        "--num_workers: the process for %s exited with code %s before "
        "finishing (out of memory?)" % (process.name, process.exitcode)))
  return outcome
