"""Writes that hit a full disk or a file-size limit, told in one line."""

import errno
import re

__all__ = ["is_disk_full", "disk_full_message"]

# How TensorFlow's file systems word the three errors (EFBIG arrives as an
# `OutOfRangeError`, ENOSPC as a `ResourceExhaustedError`, not as OSError).
_DISK_FULL_TEXT = ("File too large", "No space left on device",
                   "Disk quota exceeded")


def is_disk_full(error):
  """Whether `error` (any exception) says a write hit a full disk, a disk
  quota or a file-size limit (EFBIG, ENOSPC, EDQUOT)."""
  if isinstance(error, OSError) and error.errno in (errno.EFBIG, errno.ENOSPC,
                                                    errno.EDQUOT):
    return True
  text = str(getattr(error, "message", None) or error)
  return any(part in text for part in _DISK_FULL_TEXT)


def disk_full_message(error, path=None):
  """One line: which file could not be written, and why.

  Args:
    error: the exception, or its text.
    path: str or None, the file; else the error's own `filename`, if any.

  Returns:
    str.
  """
  text = " ".join(str(getattr(error, "message", None) or error).split())
  if "the disk is full or the file-size limit" in text:  # From bert_tf.io.
    return re.sub(r"^\[Errno \d+\] ", "", text)
  name = path or getattr(error, "filename", None)
  return ("%swrite failed: the disk is full or the file-size limit was "
          "reached (%s); free space and rerun" %
          ("%s: " % name if name else "", text))
