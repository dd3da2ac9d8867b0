"""A temporary folder each command owns, so a killed run leaves no trace.

Python's `tempfile` is where TensorFlow's autograph writes its
`__autograph_generated_file*.py` files and where Apache Beam's DirectRunner
makes its `beam-temp*`, `beam-pipeline-temp*` and `tmp*` folders; a run
killed with SIGKILL left them in the system temp directory for good. A
command (`entry.run_main`) first calls `use_own_temp_dir`, which makes
`<system temp>/bert-tf.<host>.<pid>.<random>/` and points `tempfile` and
`TMPDIR` (inherited by worker processes) at it. The folder is removed at
exit (an exit through `os._exit`, the lost-peer watchdog's, removes it
first: `bert_tf.io.remove_own_temp_dir`); one that a killed process left is
removed at the next start of any command, once its process is gone
(`bert_tf.io.writer_may_run`).
"""

import atexit
import glob
import os
import shutil
import tempfile

from absl import logging

from bert_tf import io as io_utils

__all__ = ["PREFIX", "use_own_temp_dir", "remove_dead_temp_dirs"]

# Name prefix of the folders, in the system temp directory.
PREFIX = io_utils.TEMP_DIR_PREFIX


def remove_dead_temp_dirs(system_temp):
  """Removes the folders `use_own_temp_dir` made for processes now gone.

  Args:
    system_temp: str, the folder that holds them.

  Returns:
    list of str, the folders removed.
  """
  removed = []
  for path in glob.glob(os.path.join(glob.escape(system_temp),
                                     PREFIX + "*")):
    if io_utils.writer_may_run(os.path.basename(path)[len(PREFIX):]):
      continue
    logging.info("Removing %s, the temporary folder of a run that did not "
                 "finish", path)
    shutil.rmtree(path, ignore_errors=True)
    removed.append(path)
  return removed


def use_own_temp_dir():
  """Points `tempfile` and `TMPDIR` at a new folder this process owns.

  Removes the folders of dead processes first (`remove_dead_temp_dirs`);
  the new folder is removed when this process exits (not in a forked
  child).

  Returns:
    str, the folder.
  """
  system_temp = tempfile.gettempdir()
  remove_dead_temp_dirs(system_temp)
  owner = os.getpid()
  path = tempfile.mkdtemp(prefix=io_utils.own_temp_dir_prefix(),
                          dir=system_temp)
  os.environ["TMPDIR"] = path
  tempfile.tempdir = path

  def remove():
    if os.getpid() == owner:
      shutil.rmtree(path, ignore_errors=True)

  atexit.register(remove)
  return path
