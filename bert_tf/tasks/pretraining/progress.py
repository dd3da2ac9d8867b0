"""Progress and resource lines in `create_pretraining_data.py`'s log."""

import time

from absl import logging

try:
  import resource
except ImportError:  # Not on Unix: no usage figures.
  resource = None

__all__ = ["Progress", "process_usage"]

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
