"""One training run per output folder: an OS lock on `output_dir/.lock`.

An `fcntl.flock` lock: the kernel releases it when its process ends,
however it ends (SIGKILL included), so a killed run never leaves the folder
locked. Unix only, as the scripts are.
"""

import errno
import fcntl
import os
import stat

__all__ = ["OutputDirLock", "lock_output_dir"]


class OutputDirLock(object):
  """A held lock on `output_dir/.lock`, freed by `release()`, the end of a
  `with` block, dropping the object or the process's end."""

  def __init__(self, output_dir, fd):
    self.output_dir = output_dir
    self._fd = fd
    # Bound now: `__del__` may run as the interpreter shuts down, when the
    # module's globals are gone.
    self._close = os.close

  def release(self):
    """Frees the folder (closing the lock file); a second call does nothing."""
    fd, self._fd = self._fd, None
    if fd is not None:
      self._close(fd)

  def __enter__(self):
    return self

  def __exit__(self, *exc_info):
    self.release()
    return False

  def __del__(self):
    self.release()


def lock_output_dir(output_dir, flag_name="output_dir"):
  """Locks `output_dir` (created when missing) for one training run.

  The lock file holds the holder's process id. Returns an `OutputDirLock`
  to keep while training, or None for an empty or remote (`gs://`) folder.

  Raises:
    ValueError: naming the folder and the other run's process id, when a
      live process (this one included) holds it; or when `.lock` is a link
      or not a regular file.
  """
  if not output_dir or "://" in output_dir:
    return None
  os.makedirs(output_dir, exist_ok=True)
  path = os.path.join(output_dir, ".lock")
  try:
    # O_NOFOLLOW: a `.lock` that is a link is never followed (its target
    # would be truncated and get the pid).
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
  except OSError as e:
    if os.path.islink(path) or e.errno == errno.ELOOP:
      raise ValueError("--%s: %s is a symbolic link; expected the lock file "
                       "of the folder (remove the link)" % (flag_name, path)
                      ) from None
    raise
  if not stat.S_ISREG(os.fstat(fd).st_mode):
    os.close(fd)
    raise ValueError("--%s: %s is not a regular file; expected the lock "
                     "file of the folder" % (flag_name, path))
  try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
  except OSError:
    other = os.read(fd, 64).decode("ascii", "replace").strip() or "unknown"
    os.close(fd)
    raise ValueError(
        "--%s: %s is in use by another training run (pid %s); wait for it "
        "to finish or use another folder" % (flag_name, output_dir, other)
    ) from None
  os.ftruncate(fd, 0)
  os.write(fd, b"%d\n" % os.getpid())
  return OutputDirLock(output_dir, fd)
