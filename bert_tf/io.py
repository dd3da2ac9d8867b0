"""Files and formats: the one I/O layer every script reads and writes through.

Reading text follows one rule for line ends and invalid UTF-8 (`read_lines`);
writes appear under their final name only when complete and flushed to disk
(`atomic_path`). Paths may be local or on any `tf.io.gfile` file system.
"""

import contextlib
import errno
import gc
import glob
import os
import shutil
import socket
import tempfile
import uuid

from absl import logging
import numpy as np

from bert_tf.checks import disk

__all__ = ["varint", 
    "iter_raw_lines",
    "decode_line",
    "read_lines",
    "check_text_file",
    "atomic_path",
    "sync_to_disk",
    "sync_folder",
    "writer_may_run",
    "TEMP_DIR_PREFIX",
    "own_temp_dir_prefix",
    "remove_own_temp_dir",
    "atomic_write",
    "write_eval_results",
    "number_str",
    "expand_file_patterns",
    "check_output_file",
    "int64_feature",
    "float_feature",
    "serialize_example",
    "pad_to",
    "gc_paused",
]

_READ_BLOCK_BYTES = 1 << 20


def _gfile():
  """`tf.io.gfile`, imported on first use: reading local text files (the
  tokenizer's vocabulary) does not need TensorFlow."""
  # Not at the top: importing this module must not import TensorFlow.
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  return tf.io.gfile


def _is_remote(path):
  return "://" in path


def _exists(path):
  return _gfile().exists(path) if _is_remote(path) else os.path.exists(path)


def _isdir(path):
  return _gfile().isdir(path) if _is_remote(path) else os.path.isdir(path)


def _open_bytes(path):
  return _gfile().GFile(path, "rb") if _is_remote(path) else open(path, "rb")


# ----------------------------------------------------------------------------
# Reading text
# ----------------------------------------------------------------------------


def _raw_lines(path, start, end):
  """Yields `(line, ended)`: a line's bytes and whether a `\\n` ended it."""
  remaining = None if end is None else end - start
  with _open_bytes(path) as reader:
    if start:
      reader.seek(start)
    pending = b""
    while remaining is None or remaining > 0:
      size = (_READ_BLOCK_BYTES if remaining is None
              else min(_READ_BLOCK_BYTES, remaining))
      block = reader.read(size)
      if not block:
        break
      if remaining is not None:
        remaining -= len(block)
      lines = (pending + block).split(b"\n")
      pending = lines.pop()
      for line in lines:
        yield line, True
    if pending:
      yield pending, False


def iter_raw_lines(path, start=0, end=None):
  """Yields the lines (bytes, without `\\n`) of `path`'s bytes [start, end).

  A line ends at `\\n` only; the last may lack it. `start` is a line's
  first byte; `end` None reads to the end. Read in 1 MiB blocks.
  """
  for line, _ in _raw_lines(path, start, end):
    yield line


def decode_line(raw, strict=False, where=None):
  """One line's bytes as `str`, every `\\r` removed, invalid UTF-8 dropped
  (the reference's `convert_to_unicode`).

  Raises:
    ValueError: with `strict`, invalid UTF-8; the message starts with
      `where` (`file:line`).
  """
  raw = raw.replace(b"\r", b"")
  if not strict:
    return raw.decode("utf-8", "ignore")
  try:
    return raw.decode("utf-8")
  except UnicodeDecodeError as e:
    raise ValueError("%s: not valid UTF-8 (%s)" % (where or "input", e)) from None


_BINARY_MAGIC = ((b"\x1f\x8b", "gzip"), (b"BZh", "bzip2"),
                 (b"\xfd7zXZ\x00", "xz"), (b"PK\x03\x04", "zip"))
_SNIFF_BYTES = 8192


def check_text_file(path):
  """Refuses a compressed or binary file given where text is expected.

  Gzip, bzip2, xz or zip magic bytes, or first 8 KiB at least 10% NUL bytes
  (a TFRecord, UTF-16, an archive); a few NULs pass, as in the reference.

  Raises:
    ValueError: naming the file and what it looks like.
  """
  with _open_bytes(path) as reader:
    head = reader.read(_SNIFF_BYTES)
  for magic, kind in _BINARY_MAGIC:
    if head.startswith(magic) and (kind != "bzip2" or head[3:4].isdigit()):
      raise ValueError("%s is a %s file, not UTF-8 text; decompress it first" %
                       (path, kind))
  if head and head.count(b"\x00") * 10 >= len(head):
    raise ValueError("%s is a binary file (%d NUL bytes in its first %d), not "
                     "UTF-8 text" % (path, head.count(b"\x00"), len(head)))


def read_lines(path, start=0, end=None, strict=False, refuse_binary=True):
  """Yields `(line_number, text)` for each line of a text file.

  The project's one rule, the reference's `GFile.readline()` loop: a line
  ends at `\\n` only; `\\r` is removed; invalid UTF-8 bytes are dropped (one
  warning per call counts them); a last line with no `\\n` that decodes to
  nothing is not a line. `start`, `end`: a byte range, as `iter_raw_lines`;
  line numbers are 1-based within it.

  Raises:
    FileNotFoundError: `path` does not exist.
    ValueError: with `strict`, a line that is not valid UTF-8 (naming
      `path:line`); with `refuse_binary`, a compressed or binary file.
  """
  if not _exists(path):
    raise FileNotFoundError("%s: no such file" % path)
  if _isdir(path):
    raise ValueError("%s is a directory; expected a text file" % path)
  if refuse_binary:
    check_text_file(path)
  dropped_bytes = dropped_lines = 0
  try:
    for number, (raw, ended) in enumerate(_raw_lines(path, start, end), 1):
      text = decode_line(raw, strict, "%s:%d" % (path, number))
      if not raw.isascii():
        lost = len(raw) - raw.count(b"\r") - len(text.encode("utf-8"))
        if lost:
          dropped_bytes += lost
          dropped_lines += 1
      if text or ended:
        yield number, text
  finally:
    if dropped_bytes:
      logging.warning(
          "%s: dropped %d bytes that are not UTF-8, on %d lines (the "
          "reference's rule; a Latin-1 file? convert it with iconv -f latin1 "
          "-t utf-8)", path, dropped_bytes, dropped_lines)


# ----------------------------------------------------------------------------
# Writing
# ----------------------------------------------------------------------------


def _temp_name(path):
  """A fresh temporary name `.<base>.tmp-<host>.<pid>.<random>` beside
  `path`; removes those left by processes that no longer run (several
  processes may write the same output at once: multi-worker runs)."""
  directory, base = os.path.split(path.rstrip("/"))
  prefix = ".%s.tmp-" % base
  if "://" not in path:
    for stale in glob.glob(os.path.join(directory, glob.escape(prefix) + "*")):
      if writer_may_run(stale[len(os.path.join(directory, prefix)):]):
        continue
      logging.info("Removing %s, left by an earlier run that did not finish",
                   stale)
      _remove(stale)
  return os.path.join(directory, "%s%s.%d.%s" % (
      prefix, socket.gethostname(), os.getpid(), uuid.uuid4().hex[:8]))


def writer_may_run(suffix):
  """Whether the process that made a temporary name (its `suffix`, after
  `.tmp-`) may still be writing it: on another host, or alive here."""
  parts = suffix.rsplit(".", 2)
  if len(parts) != 3 or not parts[1].isdigit():
    return False  # Not a name of this scheme: an earlier run's.
  host, pid = parts[0], int(parts[1])
  if host != socket.gethostname():
    return True
  if pid == os.getpid():
    return False  # This process: an earlier, failed write's.
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    return True  # Alive, another user's.
  return True


# Name prefix of the temporary folder each command owns, in the system temp
# directory (`bert_tf.cli.leftovers`): `bert-tf.<host>.<pid>.<random>`.
TEMP_DIR_PREFIX = "bert-tf."


def own_temp_dir_prefix():
  """The name prefix of this process's own temporary folder."""
  return "%s%s.%d." % (TEMP_DIR_PREFIX, socket.gethostname(), os.getpid())


def remove_own_temp_dir():
  """Removes this process's own temporary folder (`bert_tf.cli.leftovers`)
  for an exit that skips `atexit` (`os._exit`); never another process's
  folder or the system's. Returns the folder removed, or None."""
  path = tempfile.gettempdir()
  if not os.path.basename(path).startswith(own_temp_dir_prefix()):
    return None
  shutil.rmtree(path, ignore_errors=True)
  return path


def _remove(path):
  """Removes a file or a folder tree, if it exists."""
  if _isdir(path):
    if "://" in path:
      _gfile().rmtree(path)
    else:
      shutil.rmtree(path, ignore_errors=True)
  elif _exists(path):
    _gfile().remove(path)


@contextlib.contextmanager
def atomic_path(path):
  """Yields a temporary name (same folder) that becomes `path` on success.

  The one atomic-output mechanism: on success the file or folder is
  renamed over `path` (replacing a file or an empty folder; a link to a
  folder is kept), on error removed. Local outputs are `fsync`ed before the
  rename and their folder after, so a crash leaves the old or the complete
  new output. A full disk or a file-size limit is one `OSError` naming
  `path`.

  Raises:
    ValueError: when `path` is a folder that is not empty.
  """
  if (not _is_remote(path) and os.path.islink(path.rstrip("/")) and
      os.path.isdir(path)):
    path = os.path.realpath(path)
  directory = os.path.dirname(path.rstrip("/"))
  if directory:
    _gfile().makedirs(directory)
  temp = _temp_name(path)
  try:
    yield temp
    if _isdir(path):
      if _gfile().listdir(path):
        raise ValueError("%s already exists and is not an empty folder" %
                         path)
      if _is_remote(path):
        _gfile().rmtree(path)
      else:
        os.rmdir(path)
    if _is_remote(path):
      _gfile().rename(temp, path, overwrite=True)
    else:
      sync_to_disk(temp)
      os.replace(temp, path)
      sync_folder(os.path.dirname(os.path.abspath(path)))
  except BaseException as e:
    _remove(temp)
    if disk.is_disk_full(e) and not isinstance(e, _WriteFailed):
      # An inner atomic output's failure (nested blocks) already names
      # its file: passed on as it is, not wrapped again.
      raise _WriteFailed(
          errno.ENOSPC, "%s: write failed: the disk is full or the "
          "file-size limit was reached (%s); free space and rerun" %
          (path, disk.essential_text(e))) from None
    raise


class _WriteFailed(OSError):
  """A write of an atomic output that failed on a full disk, its message
  naming the file (the `OSError` that `atomic_path` raises)."""


# fsync errors that say the file system cannot sync this kind of file (a
# folder on some file systems, a FUSE mount): nothing to make durable there.
_SYNC_UNSUPPORTED = frozenset(
    code for code in (getattr(errno, name, None) for name in
                      ("EINVAL", "ENOTSUP", "EOPNOTSUPP", "EBADF"))
    if code is not None)


def _fsync(path, flags):
  """`os.fsync` of `path` opened with `flags`; unsupported syncs, and a
  file or folder this process may not open for reading, skipped."""
  try:
    fd = os.open(path, flags)
  except PermissionError:
    return
  try:
    os.fsync(fd)
  except OSError as e:
    if e.errno not in _SYNC_UNSUPPORTED:
      raise
  finally:
    os.close(fd)


def sync_folder(directory):
  """Flushes a local folder's entries to disk (what makes a rename survive
  a power loss); skips remote paths and file systems that cannot
  (`EINVAL`, `ENOTSUP`).

  Raises:
    OSError: the disk reported an error (`EIO`, `ENOSPC`).
  """
  if _is_remote(directory):
    return
  _fsync(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))


def sync_to_disk(path):
  """`fsync`s a written local file, or every file then folder of a tree
  (deepest first), whoever wrote it; skips remote paths, links and file
  systems that cannot (`EINVAL`, `ENOTSUP`).

  Raises:
    OSError: the disk reported an error (`EIO`, `ENOSPC`).
  """
  if _is_remote(path) or os.path.islink(path):
    return
  if not os.path.isdir(path):
    if os.path.isfile(path):
      _fsync(path, os.O_RDONLY)
    return
  for root, _, files in os.walk(path, topdown=False):
    for name in files:
      file_path = os.path.join(root, name)
      if os.path.isfile(file_path) and not os.path.islink(file_path):
        _fsync(file_path, os.O_RDONLY)
    sync_folder(root)


@contextlib.contextmanager
def atomic_write(path, mode="w"):
  """Opens `path` for writing ("w" text, "wb" bytes) through `atomic_path`;
  an empty output still exists afterwards.

  Raises:
    ValueError: when `path` is a directory.
  """
  if _isdir(path):
    raise ValueError("%s is a directory; expected a file name" % path)
  with atomic_path(path) as temp:
    with _gfile().GFile(temp, mode) as f:
      # GFile creates the file on the first write.
      f.write(b"" if "b" in mode else "")
      yield f


def write_eval_results(path, results):
  """Writes `results` (str -> number) as sorted `key = value` lines,
  atomically: the reference's `eval_results.txt`."""
  logging.info("***** Eval results *****")
  with atomic_write(path) as f:
    for key in sorted(results.keys()):
      logging.info("  %s = %s", key, number_str(results[key]))
      f.write("%s = %s\n" % (key, number_str(results[key])))


def number_str(value):
  """`str(value)` as numpy 1 prints it (the reference's output files).

  numpy 2 prints float32 of magnitude >= 1e6 (float16: 1e3) in scientific
  notation; this keeps numpy 1's positional form for 1e-4 <= |x| < 1e16
  (and 0), shortest round-trip digits. Other values print with `str()`.
  """
  if (isinstance(value, np.floating) and value.dtype.itemsize < 8 and
      np.isfinite(value)):
    magnitude = abs(float(value))
    if magnitude == 0 or 1e-4 <= magnitude < 1e16:
      return np.format_float_positional(value, unique=True, trim="0")
    return np.format_float_scientific(value, unique=True, trim="-",
                                      exp_digits=2)
  return str(value)


# ----------------------------------------------------------------------------
# Paths
# ----------------------------------------------------------------------------


def expand_file_patterns(patterns, flag_name="input_file"):
  """Expands comma-separated file names and globs, keeping their order
  (matches sorted within a pattern); returns a list of paths.

  Raises:
    ValueError: naming `flag_name`: empty `patterns`, or a pattern that
      matches no file or a directory.
  """
  pieces = [p.strip() for p in (patterns or "").split(",") if p.strip()]
  if not pieces:
    raise ValueError("--%s: expected one or more comma-separated files or "
                     "globs, got %r" % (flag_name, patterns))
  paths = []
  for pattern in pieces:
    matches = sorted(_gfile().glob(pattern))
    if not matches:
      raise ValueError("--%s: %r matched no files" % (flag_name, pattern))
    for match in matches:
      if _isdir(match):
        raise ValueError("--%s: %s is a directory; expected files (use a "
                         "glob such as %s/*)" % (flag_name, match, match))
    paths.extend(matches)
  return paths


def check_output_file(path, flag_name="output_file"):
  """Refuses an output path that cannot become a file, before any work.

  Raises:
    ValueError: when `path` is empty or an existing directory.
  """
  if not path:
    raise ValueError("--%s is required" % flag_name)
  if _isdir(path):
    raise ValueError("--%s: %s is a directory; expected a file name" %
                     (flag_name, path))


# ----------------------------------------------------------------------------
# Records and lists
# ----------------------------------------------------------------------------


def _tf_train():
  """`tf.train`, imported on first use (as `_gfile`): reading text files must
  not need TensorFlow."""
  # Not at the top: importing this module must not import TensorFlow.
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  return tf.train


def int64_feature(values):
  """A `_tf_train().Feature` holding a list of ints (an `int64_list`)."""
  return _tf_train().Feature(int64_list=_tf_train().Int64List(value=list(values)))


def float_feature(values):
  """A `_tf_train().Feature` holding a list of floats (a `float_list`)."""
  return _tf_train().Feature(float_list=_tf_train().FloatList(value=list(values)))


def varint(value):
  """Protobuf base-128 varint of an int (negatives as uint64, as protobuf)."""
  value &= (1 << 64) - 1
  out = bytearray()
  while value > 0x7f:
    out.append((value & 0x7f) | 0x80)
    value >>= 7
  out.append(value)
  return bytes(out)


def _length_delimited(payload):
  """Field 1 (wire type 2, tag byte 0x0a) holding `payload`."""
  return b"\n" + varint(len(payload)) + payload


def serialize_example(features, wire_order):
  """`tf.train.Example` wire bytes with the features in `wire_order`.

  protobuf's order of map entries changed between releases (protobuf 4,
  TF 2.15: the reference's; protobuf 7, TF 2.21: another); a fixed order
  keeps the TFRecords byte-identical on both. `features`: name ->
  `tf.train.Feature`.

  Raises:
    ValueError: when `wire_order` is not exactly the names of `features`.
  """
  if sorted(wire_order) != sorted(features):
    raise ValueError("wire order %s does not match the features %s" %
                     (sorted(wire_order), sorted(features)))
  entries = []
  for name in wire_order:
    value = features[name].SerializeToString()
    entries.append(_length_delimited(
        _length_delimited(name.encode("utf-8")) +
        b"\x12" + varint(len(value)) + value))
  return _length_delimited(b"".join(entries))


def pad_to(values, length, pad_value=0):
  """`values` as a new list, padded at the end with `pad_value` to `length`.

  Raises:
    ValueError: when `values` is already longer than `length`.
  """
  if len(values) > length:
    raise ValueError("%d values do not fit in length %d" %
                     (len(values), length))
  return list(values) + [pad_value] * (length - len(values))


# ----------------------------------------------------------------------------
# Speed
# ----------------------------------------------------------------------------


class gc_paused(contextlib.ContextDecorator):  # pylint: disable=invalid-name
  """Pauses Python's cyclic garbage collector, restoring its state after
  (`with gc_paused():` or `@gc_paused()`): for code building millions of
  small acyclic lists, where full collections made reading SST-2 about 6x
  and making pre-training instances about 3x slower."""

  def __enter__(self):
    self._was_enabled = gc.isenabled()
    gc.disable()
    return self

  def __exit__(self, *exc):
    if self._was_enabled:
      gc.enable()
    return False
