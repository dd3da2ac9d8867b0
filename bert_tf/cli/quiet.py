"""Keeps TensorFlow's start-up messages off the console; import it first.

`import tensorflow` prints about ten C++ lines (cuDNN/cuFFT/cuBLAS factory
registration, TensorRT, CPU feature notices) before a script says anything,
so a one-line `error:` came after a screen of noise. TensorFlow reads
`TF_CPP_MIN_LOG_LEVEL` once, when it is imported: every script imports this
module before TensorFlow, and it sets the level to 3 (C++ messages off;
TensorFlow's failures still reach the script as Python exceptions).

`BERT_DEBUG=1`, or a `TF_CPP_MIN_LOG_LEVEL` the user set, keeps TensorFlow's
own choice.
"""

import os

if not os.environ.get("BERT_DEBUG"):
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
