"""Keeps TensorFlow's C++ start-up messages off the console.

`import tensorflow` prints about ten C++ lines (cuDNN/cuFFT/cuBLAS factory
registration, TensorRT, CPU feature notices) before a script says anything,
so a one-line `error:` came after a screen of noise. TensorFlow reads
`TF_CPP_MIN_LOG_LEVEL` once, when it is imported, so the level must be set
before. Only the command line asks for it: each script's first statements
are `from bert_tf.cli import quiet` and `quiet.when_run_as_command(__name__)`,
which quiets TensorFlow when the script runs as a command (`python
run_classifier.py`, or its console command `bert-run-classifier`) and does
nothing when it is imported as a module. Importing the package changes
nothing in the process.
"""

import importlib.abc
import importlib.util
import logging
import os
import sys

__all__ = ["when_run_as_command", "is_command", "when_beam_worker",
           "quiet_tensorflow", "one_log_stream"]

# The main module of a Beam worker process (the DirectRunner's
# multi-processing workers, Dataflow's Python harness).
_BEAM_WORKER_MAIN = "apache_beam.runners.worker.sdk_worker_main"


def when_run_as_command(module_name):
  """`quiet_tensorflow()` when module `module_name` runs as a command.

  A script runs as a command when it is `__main__` (`python
  run_classifier.py`) or when the process is its console command, whose
  name is the module's with a `bert-` prefix and dashes
  (`bert-run-classifier`, see pyproject.toml), which imports the module
  and calls its `cli()`. Imported as a module (tests, a user's code), it
  changes nothing.

  Args:
    module_name: str, the script's `__name__`.

  Returns:
    bool, whether it quieted TensorFlow (see `quiet_tensorflow`).
  """
  if not is_command(module_name):
    return False
  return quiet_tensorflow()


def is_command(module_name):
  """Whether module `module_name` runs as a command: it is `__main__`, or
  the process is its console command (`bert-run-classifier` for
  `run_classifier`)."""
  command = "bert-" + module_name.replace("_", "-")
  return module_name == "__main__" or (
      os.path.basename(sys.argv[0] if sys.argv else "") == command)


def when_beam_worker():
  """Quiets TensorFlow's import in a Beam worker process; elsewhere nothing.

  A worker runs Beam's harness as `__main__` and imports the pipeline's
  code (`bert_tf.corpus`, which calls this first) before TensorFlow; it
  inherits `TF_CPP_MIN_LOG_LEVEL` from the launching command, but on
  TensorFlow 2.19+ each import still printed its start-up lines. Here the
  first import runs with stderr on /dev/null, as in the command, unless
  `BERT_DEBUG=1`.

  Returns:
    bool, whether this is a worker whose TensorFlow import is now quiet.
  """
  main = sys.modules.get("__main__")
  if (getattr(getattr(main, "__spec__", None), "name", None) !=
      _BEAM_WORKER_MAIN or "tensorflow" in sys.modules or
      os.environ.get("BERT_DEBUG")):
    return False
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  if not any(isinstance(f, _SilentImport) for f in sys.meta_path):
    sys.meta_path.insert(0, _SilentImport())
  return True


def quiet_tensorflow():
  """Sets `TF_CPP_MIN_LOG_LEVEL=3` (C++ messages off) unless told otherwise.

  TensorFlow 2.19 and later also print a few lines at import that no level
  silences (absl's "before absl::InitializeLog()" notice, the oneDNN and
  CUDA-driver notices), so TensorFlow's first import, whenever it comes,
  runs with the process's stderr pointed at /dev/null (`_SilentImport`);
  an import that fails still raises, and its traceback is printed
  afterwards. Nothing imports TensorFlow here: a module that needs no
  TensorFlow (`bert_tf.io`'s readers) stays free of it. TensorFlow's
  failures still reach the script as Python exceptions. `BERT_DEBUG=1`, or
  a `TF_CPP_MIN_LOG_LEVEL` the user set, keeps TensorFlow's own choice (and
  its import lines).

  Returns:
    bool, False when TensorFlow was imported already (the level then no
    longer has an effect).
  """
  if "tensorflow" in sys.modules:
    return False
  if os.environ.get("BERT_DEBUG") or "TF_CPP_MIN_LOG_LEVEL" in os.environ:
    return True
  os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
  if not any(isinstance(f, _SilentImport) for f in sys.meta_path):
    sys.meta_path.insert(0, _SilentImport())
  return True


class _SilentImport(importlib.abc.MetaPathFinder):
  """Runs the first `import tensorflow` with file descriptor 2 on
  /dev/null, then leaves `sys.meta_path`."""

  def find_spec(self, name, path, target=None):
    del path, target
    if name != "tensorflow":
      return None
    sys.meta_path.remove(self)
    spec = importlib.util.find_spec(name)
    if spec is not None and spec.loader is not None:
      spec.loader = _SilentLoader(spec.loader)
    return spec


class _SilentLoader(importlib.abc.Loader):
  """A loader whose module code runs with file descriptor 2 on /dev/null."""

  def __init__(self, loader):
    self._loader = loader

  def create_module(self, spec):
    return self._loader.create_module(spec)

  def exec_module(self, module):
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
      os.dup2(devnull, 2)
      self._loader.exec_module(module)
    finally:
      os.dup2(saved, 2)
      os.close(saved)
      os.close(devnull)


def one_log_stream():
  """Prints each TensorFlow log line once, in absl's format.

  TensorFlow's Python logger (`tensorflow`) gets its own stderr handler
  (`INFO:tensorflow:...`) when it is first used before any handler is on
  the root logger, and its records also reach absl's handler on the root
  (`I1201 ... file.py:12] ...`), so every line came twice. Call once absl
  has set up its handler (in `absl.app.run`'s main): TensorFlow's own
  stream handlers are then removed, and its lines come through absl's, as
  the scripts' own do. `BERT_DEBUG=1` changes nothing here.

  Returns:
    int, the handlers removed.
  """
  root = logging.getLogger()
  if not any(type(h).__name__ == "ABSLHandler" for h in root.handlers):
    return 0  # Not run by absl: TensorFlow's handler is the only one.
  logger = logging.getLogger("tensorflow")
  removed = 0
  for handler in list(logger.handlers):
    if type(handler) is logging.StreamHandler:  # pylint: disable=unidiomatic-typecheck
      logger.removeHandler(handler)
      removed += 1
  return removed
