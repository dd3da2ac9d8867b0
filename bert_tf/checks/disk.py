"""Writes that hit a full disk or a file-size limit, told in one line."""

import errno
import re

__all__ = ["is_disk_full", "disk_full_message", "final_name",
           "essential_text"]

# A path in an error's text (TensorFlow names the file it was writing): it
# starts the text or follows a space, quote, bracket or `=`, so an op's
# name (`save/SaveV2`) is not taken for one.
_PATH = re.compile(r"(?:(?<=[\s'\"(=\[])|^)"
                   r"(?:[a-z][a-z0-9+.-]*://[^\s/]*)?/[^\s;,'\"()\[\]]+")
# Temporary names and what they become: a checkpoint shard
# (`<prefix>_temp[_<hex>]/part-K-of-N.data-...`, merged into `<prefix>`),
# TensorFlow's atomic writes (`<file>.tempstate<n>`, `<file>.tmp<hex>`) and
# this project's (`.<file>.tmp-<host>.<pid>.<random>`, bert_tf.io).
_TEMP_NAMES = (
    (re.compile(r"_temp(_[0-9a-f]+)?/part-\d+-of-\d+.*$"), ""),
    (re.compile(r"\.tempstate\d+$"), ""),
    (re.compile(r"\.tmp[0-9a-f]{6,}$"), ""),
    (re.compile(r"(^|/)\.([^/]+)\.tmp-[^/]*$"), r"\1\2"),
)

# How TensorFlow's file systems word the three errors (EFBIG arrives as an
# `OutOfRangeError`, ENOSPC as a `ResourceExhaustedError`, not as OSError).
_DISK_FULL_TEXT = ("File too large", "No space left on device",
                   "Disk quota exceeded")


def essential_text(error):
  """The message of `error` on one line, without a Python stack.

  TensorFlow's graph-execution errors carry the Python stack of the
  failing op (`Graph execution error:`, `Detected at node ...`, indented
  `File "..."` lines); only the lines that say what went wrong are kept.

  Args:
    error: an exception.

  Returns:
    str.
  """
  message = str(getattr(error, "message", None) or error)
  kept = [line.strip() for line in message.splitlines()
          if line.strip() and not line[:1].isspace()
          and not line.startswith(("Graph execution error",
                                   "Detected at node", "File ",
                                   "Traceback "))]
  return " ".join(" ".join(kept).split()) or " ".join(message.split())


def is_disk_full(error):
  """Whether `error` (any exception) says a write hit a full disk, a disk
  quota or a file-size limit (EFBIG, ENOSPC, EDQUOT)."""
  if isinstance(error, OSError) and error.errno in (errno.EFBIG, errno.ENOSPC,
                                                    errno.EDQUOT):
    return True
  text = str(getattr(error, "message", None) or error)
  return any(part in text for part in _DISK_FULL_TEXT)


def disk_full_message(error, path=None):
  """One line: `<file>: write failed: ...`, the file under its final name.

  Args:
    error: the exception, or its text.
    path: str or None, the file; else the error's own `filename`, else the
      first path in its text (TensorFlow's errors name the file there).

  Returns:
    str.
  """
  text = (" ".join(error.split()) if isinstance(error, str)
          else essential_text(error))
  if "the disk is full or the file-size limit" in text:  # From bert_tf.io.
    return re.sub(r"^\[Errno \d+\] ", "", text)
  name = path or getattr(error, "filename", None)
  if not name:
    found = _PATH.search(text)
    name = found.group(0) if found else None
  if name:
    name = final_name(name)
  return ("%swrite failed: the disk is full or the file-size limit was "
          "reached (%s); free space and rerun" %
          ("%s: " % name if name else "", text))


def final_name(path):
  """The file a temporary name is written for (the name itself otherwise).

  A checkpoint shard's temporary folder becomes the checkpoint prefix
  (`.../model.ckpt-4_temp/part-00000-of-00001.data-00000-of-00001` ->
  `.../model.ckpt-4`); TensorFlow's and this project's temporary files
  become the file they are renamed to.
  """
  for pattern, replacement in _TEMP_NAMES:
    path = pattern.sub(replacement, path)
  return path
