"""Keeps TensorFlow's C++ start-up messages off the console.

`import tensorflow` prints about ten C++ lines (cuDNN/cuFFT/cuBLAS factory
registration, TensorRT, CPU feature notices) before a script says anything,
so a one-line `error:` came after a screen of noise. TensorFlow reads
`TF_CPP_MIN_LOG_LEVEL` once, when it is imported, so the level must be set
before: `bert_tf/cli/__init__.py` calls `quiet_tensorflow()` before any
module of the package imports TensorFlow, and every script imports
`bert_tf.cli` first.
"""

import os
import sys

__all__ = ["quiet_tensorflow"]


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
