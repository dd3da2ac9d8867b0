"""Which TFRecord file a `DataLossError` came from.

TensorFlow reports "truncated record at 855" without the file; a script
reads TFRecords inside `reading(paths)`, and `explain_data_loss` checks
each path at that offset against the framing: uint64 length, uint32
masked_crc32c(length), data, uint32 masked_crc32c(data) (little-endian,
CRC-32C masked as TensorFlow's `core/lib/hash/crc32c.h`).
"""

import contextlib
import re
import struct

import tensorflow.compat.v1 as tf

__all__ = ["reading", "record_files_of", "explain_data_loss"]


def _crc32c_table():
  """The 256-entry lookup table of reflected CRC-32C (polynomial 0x82F63B78)."""
  table = []
  for n in range(256):
    crc = n
    for _ in range(8):
      crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    table.append(crc)
  return tuple(table)


_CRC32C_TABLE = _crc32c_table()


def _masked_crc32c(data):
  """TensorFlow's masked CRC-32C of `data` (bytes) -> int (uint32)."""
  crc = 0xFFFFFFFF
  for byte in data:
    crc = _CRC32C_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
  crc ^= 0xFFFFFFFF
  return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


@contextlib.contextmanager
def reading(paths):
  """Within, an escaping `DataLossError` carries `paths` (the TFRecord
  files read) for `entry.run_main`'s `explain_data_loss`."""
  try:
    yield
  except tf.errors.DataLossError as e:
    files = getattr(e, "record_files", [])
    e.record_files = files + [p for p in paths if p not in files]
    raise


def record_files_of(error):
  """The TFRecord files that `reading` gave `error` (any exception).

  Returns:
    list of str; empty outside `reading`.
  """
  return list(getattr(error, "record_files", ()))


def _record_is_bad(path, offset):
  """Whether a damaged record starts at `offset` of `path`: its header
  (bad header, cut short) or its data (TensorFlow reports 12 bytes on)."""
  try:
    size = tf.io.gfile.stat(path).length
  except tf.errors.OpError:
    return False
  if offset >= size:
    return False
  with tf.io.gfile.GFile(path, "rb") as f:
    position = 0
    while True:
      f.seek(position)
      header = f.read(12)
      if len(header) < 12:
        return position == offset
      length, = struct.unpack("<Q", header[:8])
      if struct.unpack("<I", header[8:])[0] != _masked_crc32c(header[:8]):
        return position == offset
      if position + 12 + length + 4 > size:
        return position == offset
      if position + 12 == offset:  # TensorFlow names a bad data CRC so.
        data = f.read(length)
        footer = f.read(4)
        return struct.unpack("<I", footer)[0] != _masked_crc32c(data)
      position += 12 + length + 4
      if position > offset:
        return False


def explain_data_loss(error, record_files):
  """One line for a `tf.errors.DataLossError`: "<file>: truncated record
  at byte <n>; ..." naming the damaged file of `record_files` ("one of the
  input files" when none is, unless there is one), or the error's own
  message for another error."""
  message = " ".join(str(getattr(error, "message", error)).split())
  found = re.search(r"(truncated|corrupted) record at (\d+)", message)
  if not found:
    return message
  kind, offset = found.group(1), int(found.group(2))
  record_files = list(record_files)
  bad = [path for path in record_files if _record_is_bad(path, offset)]
  if not bad and len(record_files) == 1:
    bad = record_files
  where = ", ".join(bad) if bad else "one of the input files"
  return ("%s: %s record at byte %d; the file is damaged or was cut short "
          "(recreate it)" % (where, kind, offset))
