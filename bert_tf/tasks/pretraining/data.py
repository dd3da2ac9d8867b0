# coding=utf-8
"""Speed and scale for `create_pretraining_data.py`: its record encoder, its
copy of `random.shuffle` and its multi-process runner.

The script keeps the reference's algorithm; what is here changes how fast
and in how many processes it runs, never what it writes. The encoder and the
shuffle are kept because each makes the whole script at least ~10% faster
(measured with `bench/bench_pretraining_data.py --ab`, which turns each off
in turn; numbers in the README).

Public names:

* records: `FEATURE_ORDER`, `instance_features` (an instance's padded
  feature lists), `ExampleSerializer` (instances straight to
  `tf.train.Example` wire bytes, the reference's bytes);
* randomness: `shuffle` (the draws of `random.Random.shuffle`, faster);
* several workers: `split_corpus` (cut the corpus at document boundaries),
  `check_parts`, `part_output_files`, `check_output_paths`,
  `describe_ranges`, `run_parts` (one process a part; outputs renamed into
  place only when all parts succeed);
* logging: `Progress`, `process_usage`.
"""

import contextlib
import multiprocessing
import os
import random
import struct
import time

from absl import logging
import tensorflow.compat.v1 as tf

from bert_tf.tasks import features as feature_utils
from bert_tf import io as io_utils

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


# ----------------------------------------------------------------------------
# Randomness.


def _shuffle_by_getrandbits(items, rng):
  """`rng.shuffle(items)` with the same draws, without per-draw calls.

  CPython's `Random.shuffle` swaps item i (from the end) with item j, j drawn
  uniformly from [0, i] as `getrandbits(bit length of i + 1)` retried until
  below i + 1. Inlined here because masking shuffles every instance's
  positions and this is most of the time spent making instances.
  """
  getrandbits = rng.getrandbits
  for i in range(len(items) - 1, 0, -1):
    n = i + 1
    bits = n.bit_length()
    j = getrandbits(bits)
    while j >= n:
      j = getrandbits(bits)
    items[i], items[j] = items[j], items[i]


def _same_draws_as_random_shuffle():
  """Whether `_shuffle_by_getrandbits` reproduces this Python's shuffle."""
  for seed, size in ((0, 2), (1, 7), (2, 130), (3, 1000)):
    expected, got = list(range(size)), list(range(size))
    random.Random(seed).shuffle(expected)
    _shuffle_by_getrandbits(got, random.Random(seed))
    if got != expected:
      return False
  return True


_FAST_SHUFFLE = _same_draws_as_random_shuffle()


def shuffle(items, rng):
  """Shuffles in place exactly as `rng.shuffle(items)` does."""
  if _FAST_SHUFFLE and rng.__class__ is random.Random:
    _shuffle_by_getrandbits(items, rng)
  else:  # A custom generator, or a Python whose shuffle differs.
    rng.shuffle(items)


# ----------------------------------------------------------------------------
# Records.

# Feature order of the reference's OrderedDict; the serialized bytes depend on
# it (the reference builds each record's features in this order).
FEATURE_ORDER = ("input_ids", "input_mask", "segment_ids",
                 "masked_lm_positions", "masked_lm_ids", "masked_lm_weights",
                 "next_sentence_labels")


def instance_features(instance, vocab, max_seq_length,
                      max_predictions_per_seq):
  """The padded feature lists of one instance, in `FEATURE_ORDER`.

  Args:
    instance: a `TrainingInstance` (tokens, segment_ids, masked_lm_positions,
      masked_lm_labels, is_random_next).
    vocab: dict, token -> id.
    max_seq_length: int, length of input_ids, input_mask, segment_ids.
    max_predictions_per_seq: int, length of the three masked_lm_* lists.

  Returns:
    tuple of 7 lists: int lists, except masked_lm_weights (float: 1.0 for
    each masked position, 0.0 for padding); next_sentence_labels is [1]
    when B is random, else [0].

  Raises:
    ValueError: when the instance has more than `max_seq_length` tokens or
      more than `max_predictions_per_seq` masked positions.
  """
  input_ids = [vocab[token] for token in instance.tokens]
  num_tokens = len(input_ids)
  if num_tokens > max_seq_length:
    raise ValueError("instance has %d tokens; max_seq_length is %d"
                     % (num_tokens, max_seq_length))
  num_masked = len(instance.masked_lm_positions)
  if num_masked > max_predictions_per_seq:
    raise ValueError("instance has %d masked positions; "
                     "max_predictions_per_seq is %d"
                     % (num_masked, max_predictions_per_seq))
  input_ids, input_mask, segment_ids = feature_utils.pad_input(
      input_ids, instance.segment_ids, max_seq_length)
  pad = io_utils.pad_to
  return (
      input_ids, input_mask, segment_ids,
      pad(instance.masked_lm_positions, max_predictions_per_seq),
      pad([vocab[token] for token in instance.masked_lm_labels],
          max_predictions_per_seq),
      pad([1.0] * num_masked, max_predictions_per_seq, 0.0),
      [1 if instance.is_random_next else 0],
  )


# Order in which the features appear in the reference's serialized records:
# protobuf writes the `feature` map in its own hash order, which for the
# reference's insertion order above is this one (every record of
# conformance/pretraining_data). Any order parses to the same Example; this
# one keeps the files byte-identical.
_WIRE_ORDER = ("masked_lm_ids", "input_ids", "masked_lm_positions",
               "next_sentence_labels", "input_mask", "masked_lm_weights",
               "segment_ids")

_FLOAT_ONE = struct.pack("<f", 1.0)
_FLOAT_ZERO = struct.pack("<f", 0.0)


def _varint(value):
  """Protobuf base-128 varint of a non-negative int (negatives as uint64)."""
  value &= (1 << 64) - 1
  out = bytearray()
  while value > 0x7f:
    out.append((value & 0x7f) | 0x80)
    value >>= 7
  out.append(value)
  return bytes(out)


# Varints of small numbers (lengths, positions), looked up instead of encoded.
_SMALL_VARINTS = [_varint(value) for value in range(1 << 12)]


def _varint_of(value):
  return _SMALL_VARINTS[value] if value < 4096 else _varint(value)


def _length_delimited(tag, payload):
  """Protobuf field `tag` (one byte, wire type 2) holding `payload`."""
  return tag + _varint_of(len(payload)) + payload


class ExampleSerializer(object):
  """Serializes instances straight to `tf.train.Example` wire bytes.

  Writes the same bytes as building a `tf.train.Example` from an
  `OrderedDict` of features per instance (the reference's way; the tests
  check both against conformance/pretraining_data) at a fraction of the cost:
  each token's varint id is looked up once, padding is a constant byte run,
  and no message objects are built.

  Wire format: Example{1: Features{1: repeated map entry {1: key, 2:
  Feature{2: FloatList{1: packed float} | 3: Int64List{1: packed varint}}}}}.
  """

  def __init__(self, tokenizer, max_seq_length, max_predictions_per_seq):
    self._vocab = tokenizer.vocab
    self._token_varints = {token: _varint(token_id)
                           for token, token_id in tokenizer.vocab.items()}
    self._position_varints = [_varint(p) for p in range(max_seq_length)]
    self._max_seq_length = max_seq_length
    self._max_predictions_per_seq = max_predictions_per_seq
    # Entry = b"\n" len {b"\n" len key, b"\x12" len Feature}.
    self._key_fields = {
        name: _length_delimited(b"\n", name.encode("ascii"))
        for name in FEATURE_ORDER}

  def features(self, instance):
    """The padded feature lists of `instance`, in `FEATURE_ORDER`."""
    return instance_features(instance, self._vocab, self._max_seq_length,
                             self._max_predictions_per_seq)

  def serialize(self, instance):
    """Serialized `tf.train.Example` bytes of `instance`."""
    tokens = instance.tokens
    num_tokens = len(tokens)
    num_masked = len(instance.masked_lm_positions)
    if (num_tokens > self._max_seq_length or
        num_masked > self._max_predictions_per_seq):
      self.features(instance)  # Raises the ValueError naming the limit.
    seq_pad = b"\0" * (self._max_seq_length - num_tokens)
    pred_pad = self._max_predictions_per_seq - num_masked
    id_of = self._token_varints.__getitem__
    position_of = self._position_varints.__getitem__
    payloads = {
        "input_ids": b"".join(map(id_of, tokens)) + seq_pad,
        "input_mask": b"\x01" * num_tokens + seq_pad,
        "segment_ids": bytes(instance.segment_ids) + seq_pad,
        "masked_lm_positions": b"".join(
            map(position_of, instance.masked_lm_positions)) + b"\0" * pred_pad,
        "masked_lm_ids": b"".join(
            map(id_of, instance.masked_lm_labels)) + b"\0" * pred_pad,
        "masked_lm_weights": _FLOAT_ONE * num_masked + _FLOAT_ZERO * pred_pad,
        "next_sentence_labels": b"\x01" if instance.is_random_next else b"\0",
    }
    entries = []
    for name in _WIRE_ORDER:
      payload = payloads[name]
      value_list = _length_delimited(b"\n", payload) if payload else b""
      feature = _length_delimited(
          b"\x12" if name == "masked_lm_weights" else b"\x1a", value_list)
      entries.append(_length_delimited(
          b"\n", self._key_fields[name] + _length_delimited(b"\x12",
                                                             feature)))
    return _length_delimited(b"\n", b"".join(entries))


# ----------------------------------------------------------------------------
# Several workers.


def split_corpus(input_files, num_parts):
  """Cuts the corpus at blank lines into `num_parts` parts of similar size.

  Scans the bytes only (no tokenizing). A part starts at the first blank line
  at or after k/num_parts of the corpus's bytes.

  Args:
    input_files: list of str, the corpus files in order.
    num_parts: int >= 1.

  Returns:
    (parts, num_documents): parts[k] is a list of `(path, start, end)` byte
    ranges (end None: to the end of the file), empty when there are too few
    blank lines to cut this many parts; num_documents[k] counts the part's
    runs of non-blank lines (documents before tokenization).
  """
  sizes = [tf.io.gfile.stat(path).length for path in input_files]
  total = sum(sizes)
  targets = [total * k / num_parts for k in range(1, num_parts)]
  cuts = []  # (file_index, byte_offset) where part len(cuts) + 1 starts.
  num_documents = [0] * num_parts
  in_document = False
  base = 0
  for file_index, path in enumerate(input_files):
    offset = 0
    for raw_line in io_utils.iter_raw_lines(path):
      if not io_utils.decode_line(raw_line).strip():  # Blank line.
        if len(cuts) < len(targets) and base + offset >= targets[len(cuts)]:
          cuts.append((file_index, offset))
        in_document = False
      elif not in_document:
        num_documents[len(cuts)] += 1
        in_document = True
      offset += len(raw_line) + 1
    base += sizes[file_index]
  return _ranges_between_cuts(input_files, cuts, num_parts), num_documents


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


def check_parts(parts, num_documents):
  """Refuses parts that cannot hold two documents, before any work starts.

  Raises:
    ValueError: naming `--num_workers`, the part and its byte ranges.
  """
  for k, count in enumerate(num_documents):
    if count < 2:
      raise ValueError(
          "--num_workers=%d: part %d of the corpus (%s) holds %d document(s); "
          "next-sentence prediction needs at least two documents per part "
          "(documents are separated by blank lines): use fewer workers or "
          "more text" % (len(parts), k, describe_ranges(parts[k]), count))


def part_output_files(output_files, num_workers):
  """Output path(s) of each part: a list of `num_workers` lists of str.

  One worker writes all `output_files`; N workers take one path each, or
  part k writes `<path>-0000k-of-0000N` when one path is given.

  Raises:
    ValueError: for another number of paths.
  """
  if num_workers == 1:
    return [output_files]
  if len(output_files) == num_workers:
    return [[path] for path in output_files]
  if len(output_files) == 1:
    return [["%s-%05d-of-%05d" % (output_files[0], k, num_workers)]
            for k in range(num_workers)]
  raise ValueError(
      "--output_file: got %d paths; with --num_workers=%d give one path (part "
      "k writes <path>-0000k-of-%05d) or %d paths" %
      (len(output_files), num_workers, num_workers, num_workers))


def check_output_paths(input_files, output_files, num_workers):
  """Refuses output paths that are directories, repeated, or inputs.

  To be called before any work: a repeated path would lose the instances
  sent to its first use, and an input path would be overwritten.

  Args:
    input_files: list of str, the corpus.
    output_files: list of str, as given to `--output_file`.
    num_workers: int, see `part_output_files`.

  Raises:
    ValueError: naming `--output_file` and the path.
  """
  seen = {}
  inputs = {os.path.abspath(os.path.normpath(path)) for path in input_files}
  for paths in part_output_files(output_files, num_workers):
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


def process_usage():
  """(CPU seconds, peak resident MiB) of this process; NaN where unknown."""
  try:
    import resource  # pylint: disable=g-import-not-at-top
  except ImportError:  # Not on Unix.
    return float("nan"), float("nan")
  usage = resource.getrusage(resource.RUSAGE_SELF)
  return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0


def run_parts(input_files, num_workers, output_files, run_part, *args):
  """Runs `run_part` on each part of the corpus, in a process each.

  The corpus is cut with `split_corpus` and checked with `check_parts`
  before any process starts. Worker k calls
  `run_part(k, num_workers, ranges_k, temp_output_paths_k, *args)`, which
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
  with contextlib.ExitStack() as outputs:
    temps = [[outputs.enter_context(io_utils.atomic_path(path))
              for path in paths] for paths in part_outputs]
    results = _run_processes(run_part, [
        (k, num_workers, parts[k], temps[k]) + args
        for k in range(num_workers)])
  for k, result in enumerate(results):
    logging.info("part %d/%d: %d documents, %d instances, %.1f s CPU, peak "
                 "RSS %.1f MiB; wrote %s", k, num_workers,
                 result["documents"], result["instances"], result["cpu_s"],
                 result["peak_rss_mb"], ", ".join(part_outputs[k]))
  return results


def _worker_main(connection, run_part, part_args):
  """Entry point of a worker process: runs one part, sends its outcome.

  Sends `("ok", summary)` or `("error", exception)`.
  """
  try:
    summary = dict(run_part(*part_args))
    summary["cpu_s"], summary["peak_rss_mb"] = process_usage()
    connection.send(("ok", summary))
  except Exception as e:  # pylint: disable=broad-except
    connection.send(("error", e))
  finally:
    connection.close()


def _run_processes(run_part, all_part_args):
  """Runs `run_part(*args)` for each `args` in its own process.

  One process per part (forked where the system allows, else spawned), so
  each holds one part's data only.
  """
  method = ("fork" if "fork" in multiprocessing.get_all_start_methods()
            else "spawn")
  context = multiprocessing.get_context(method)
  workers = []
  for part_args in all_part_args:
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_worker_main,
                              args=(sender, run_part, part_args),
                              name="part-%d" % part_args[0])
    process.start()
    sender.close()
    workers.append((process, receiver))
  outcomes = [_receive(process, receiver) for process, receiver in workers]
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
