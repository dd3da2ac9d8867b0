"""The training options' choices, importable without TensorFlow.

The flag table (`bert_tf.cli.flags`) defines its enum flags from these, so
that a script can define and parse its flags, and answer `--help` or a bad
flag, before TensorFlow loads; `options.py` and `distribute.py` check
values against the same tuples.
"""

import os

__all__ = ["PRECISIONS", "RUNNERS", "STRATEGIES", "CPU_JIT_FLAG",
           "enable_xla_cpu_clustering"]

# --precision: the encoder's arithmetic (`options.PRECISION_DTYPES`' keys).
PRECISIONS = ("fp32", "bf16", "fp16")
# --runner: auto takes the Estimator where this TensorFlow has it.
RUNNERS = ("auto", "estimator", "session")
# --distribution_strategy.
STRATEGIES = ("none", "mirrored", "multi_worker_mirrored")
# Without this XLA flag TensorFlow's auto-clustering leaves CPU ops alone
# (global_jit_level only clusters GPU ops); it is read when TensorFlow first
# initializes its devices, so it must be set before that.
CPU_JIT_FLAG = "--tf_xla_cpu_global_jit"


def enable_xla_cpu_clustering():
  """Adds `--tf_xla_cpu_global_jit` to TF_XLA_FLAGS (before TF lists devices).

  Called right after the flags are parsed, when --use_xla is set: later
  the variable has no effect.
  """
  current = os.environ.get("TF_XLA_FLAGS", "")
  if CPU_JIT_FLAG not in current.split():
    os.environ["TF_XLA_FLAGS"] = (current + " " + CPU_JIT_FLAG).strip()
