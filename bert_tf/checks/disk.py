"""Writes that hit a full disk or a file-size limit, told in one line."""

import errno
import os
import re

__all__ = ["is_disk_full", "disk_full_message", "final_name",
           "essential_text"]

# A path in an error's text (TensorFlow names the file it was writing): it
# starts the text or follows a space, quote, bracket or `=`, so an op's
# name (`save/SaveV2`) is not taken for one. A single bracket belongs to
# it (a folder named `pre[2]`); `[[` starts TensorFlow's node note.
_PATH = re.compile(r"(?:(?<=[\s'\"(=\[])|^)"
                   r"(?:[a-z][a-z0-9+.-]*://[^\s/]*)?"
                   r"/(?:[^\s;,'\"()\[\]]|\[(?!\[)|\](?!\]))+")
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
# `OutOfRangeError`, ENOSPC as a `ResourceExhaustedError`, not as OSError),
# and the cause each names.
_DISK_FULL_TEXT = ("File too large", "No space left on device",
                   "Disk quota exceeded")
_CAUSES = {"File too large": "file too large",
           "No space left on device": "no space left on device",
           "Disk quota exceeded": "disk quota exceeded"}
# A checkpoint's file (`<prefix>.index`, `.data-K-of-N`, `.meta`) or prefix.
_CHECKPOINT_FILE = re.compile(
    r"^(.*\.ckpt(-\d+)?)(\.index|\.meta|\.data-\d{5}-of-\d{5})?$")


def essential_text(error):
  """The message of `error` on one line, without TensorFlow's Python stack
  of the failing op (`Detected at node ...`, `File "..."` lines)."""
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
  """One line: `<file>: write failed: ...` (the file under its final name:
  `path`, else the error's `filename` or first path) and the cause (file
  too large, no space, quota); for a checkpoint's file, `<folder>: saving
  checkpoint <prefix> failed: ...`."""
  text = (" ".join(error.split()) if isinstance(error, str)
          else essential_text(error))
  if "the disk is full or the file-size limit" in text:  # From bert_tf.io.
    return re.sub(r"^\[Errno \d+\] ", "", text)
  name = path or getattr(error, "filename", None)
  if not name:
    found = _PATH.search(text)
    name = found.group(0) if found else None
  # The cause alone: TensorFlow's text also names the op (`save/SaveV2`),
  # the temporary file, and adds an out-of-memory hint.
  cause = next((short for part, short in _CAUSES.items() if part in text),
               text)
  checkpoint = _CHECKPOINT_FILE.match(final_name(name)) if name else None
  if checkpoint:
    folder, prefix = os.path.split(checkpoint.group(1))
    return ("%s: saving checkpoint %s failed: the disk is full or the "
            "file-size limit was reached (%s); free space and rerun" %
            (folder, prefix, cause))
  return ("%swrite failed: the disk is full or the file-size limit was "
          "reached (%s); free space and rerun" %
          ("%s: " % final_name(name) if name else "", cause))


def final_name(path):
  """The file a temporary name is written for (a checkpoint shard's
  `.../model.ckpt-4_temp/part-...` -> `.../model.ckpt-4`); else the name."""
  for pattern, replacement in _TEMP_NAMES:
    path = pattern.sub(replacement, path)
  return path
