"""Keeps TensorFlow's C++ start-up messages off the console.

`import tensorflow` prints about ten C++ lines (cuDNN/cuFFT/cuBLAS factory
registration, TensorRT, CPU feature notices) before a script says anything,
so a one-line `error:` came after a screen of noise. TensorFlow reads
`TF_CPP_MIN_LOG_LEVEL` once, when it is imported, so the level must be set
before: `bert_tf/cli/__init__.py` calls `quiet_tensorflow()` before any
module of the package imports TensorFlow, and every script imports
`bert_tf.cli` first.
"""

import logging
import os
import sys

__all__ = ["quiet_tensorflow", "one_log_stream"]


def quiet_tensorflow():
  """Sets `TF_CPP_MIN_LOG_LEVEL=3` (C++ messages off) unless told otherwise.

  TensorFlow's failures still reach the script as Python exceptions.
  `BERT_DEBUG=1`, or a `TF_CPP_MIN_LOG_LEVEL` the user set, keeps
  TensorFlow's own choice.

  Returns:
    bool, False when TensorFlow was imported already (the level then no
    longer has an effect).
  """
  if not os.environ.get("BERT_DEBUG"):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  return "tensorflow" not in sys.modules


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
