"""Command-line options for training at scale: precision, accumulation, LAMB, XLA.

One place for the flags every trainer (`run_pretraining.py`,
`run_classifier.py`, `run_squad.py`) takes on top of the reference's, their
checks, and what they change in the estimator's `RunConfig`:

  startup.define_flags(startup.TRAINING_FLAGS, ...)  # the flags, defined once
  training = options_from_flags(FLAGS)                # checked, in main()
  ... model_fn_builder(..., options=training.optimizer_options)

`estimator_utils.run_config_from_flags` applies `configure_run_config`.

Each flag's default is the reference's behaviour (float32, AdamW, one batch
per update, no XLA, no extra determinism).
"""

import dataclasses
import os

from absl import logging
import tensorflow as tf_v2  # enable_op_determinism has no compat.v1 name.
import tensorflow.compat.v1 as tf

import optimization

# The graph-level seed of --deterministic runs (any fixed value would do).
DETERMINISTIC_SEED = 12345

_PRECISIONS = ["fp32", "bf16", "fp16"]
# --precision -> the encoder's compute dtype (`modeling.BertModel`); only fp16
# changes the optimizer too (`OptimizerOptions.loss_scaling`).
_COMPUTE_DTYPES = {"fp32": tf.float32, "bf16": tf.bfloat16,
                   "fp16": tf.float16}
_OPTIMIZERS = ["adamw", "lamb"]
# Without this XLA flag TensorFlow's auto-clustering leaves CPU ops alone
# (global_jit_level only clusters GPU ops); it is read when TensorFlow first
# initializes its devices, so it must be set before that.
_CPU_JIT_FLAG = "--tf_xla_cpu_global_jit"


@dataclasses.dataclass(frozen=True)
class TrainingOptions:
  """The parsed training flags.

  Attributes:
    optimizer_options: `optimization.OptimizerOptions` (optimizer, fp16 loss
      scaling, accumulation, polynomial power) for
      `estimator_utils.train_spec`.
    use_xla: bool, compile clusters of ops with XLA.
    deterministic: bool, op determinism and fixed seeds.
    precision: "fp32", "bf16" or "fp16" (--precision).
  """

  optimizer_options: optimization.OptimizerOptions = (
      optimization.OptimizerOptions())
  use_xla: bool = False
  deterministic: bool = False
  precision: str = "fp32"

  @property
  def compute_dtype(self):
    """The `tf.DType` to pass to `modeling.BertModel(compute_dtype=...)`."""
    return _COMPUTE_DTYPES[self.precision]

  @property
  def gradient_accumulation_steps(self):
    """Micro-batches (of --train_batch_size examples) per update."""
    return self.optimizer_options.gradient_accumulation_steps


def options_from_flags(flag_values):
  """Checks the training flags and returns a `TrainingOptions`.

  Args:
    flag_values: the parsed `absl.flags.FLAGS` holding
      `startup.TRAINING_FLAGS` (missing ones take their defaults).

  Raises:
    ValueError: one line naming the flag: an unknown --precision or
      --optimizer, --gradient_accumulation_steps below 1, --poly_power <= 0,
      --precision=fp16 without a GPU, or --use_xla where TensorFlow was
      built without XLA.
  """
  precision = getattr(flag_values, "precision", "fp32")
  optimizer = getattr(flag_values, "optimizer", "adamw")
  accumulation = getattr(flag_values, "gradient_accumulation_steps", 1)
  poly_power = getattr(flag_values, "poly_power", 1.0)
  use_xla = bool(getattr(flag_values, "use_xla", False))
  deterministic = bool(getattr(flag_values, "deterministic", False))
  if precision not in _PRECISIONS:
    raise ValueError("--precision=%s: expected one of %s" %
                     (precision, ", ".join(_PRECISIONS)))
  if optimizer not in _OPTIMIZERS:
    raise ValueError("--optimizer=%s: expected one of %s" %
                     (optimizer, ", ".join(_OPTIMIZERS)))
  if not isinstance(accumulation, int) or accumulation < 1:
    raise ValueError("--gradient_accumulation_steps=%s: expected an integer "
                     ">= 1" % (accumulation,))
  if not poly_power > 0:
    raise ValueError("--poly_power=%s: expected a number > 0" % (poly_power,))
  if precision == "fp16" and not tf.config.list_physical_devices("GPU"):
    raise ValueError("--precision=fp16 needs a GPU (TensorFlow sees none); "
                     "on CPU or TPU use --precision=bf16")
  if use_xla and not tf.test.is_built_with_xla():
    raise ValueError("--use_xla: this TensorFlow build has no XLA; drop the "
                     "flag")
  return TrainingOptions(
      optimizer_options=optimization.OptimizerOptions(
          optimizer=optimizer, loss_scaling=(precision == "fp16"),
          gradient_accumulation_steps=accumulation, poly_power=poly_power),
      use_xla=use_xla, deterministic=deterministic, precision=precision)


def configure_run_config(run_config, training):
  """Applies --use_xla and --deterministic to an estimator `RunConfig`.

  XLA: the session's `global_jit_level` is set to ON_1 (auto-clustering) and
  `--tf_xla_cpu_global_jit` is added to the TF_XLA_FLAGS environment
  variable, without which no CPU op is clustered. TensorFlow reads that
  variable once per process, when it first initializes its devices (the
  first session, or a `tf.config.list_physical_devices` call): later it
  has no effect. The scripts therefore set it as soon as their flags are
  parsed (`startup.run_main`).

  Determinism: `tf.config.experimental.enable_op_determinism()` (which also
  makes tf.data keep its input order and run stateful map functions
  serially) and the graph seed `DETERMINISTIC_SEED` (dropout and shuffling
  then repeat from run to run).

  Args:
    run_config: `tf.estimator.tpu.RunConfig` (or `tf.estimator.RunConfig`).
    training: `TrainingOptions`.

  Returns:
    The `RunConfig`, replaced with the new session config and seed where a
    flag asks for them (unchanged otherwise).
  """
  changes = {}
  if training.use_xla:
    enable_xla_cpu_clustering()
    session_config = tf.ConfigProto()
    if run_config.session_config is not None:
      session_config.CopyFrom(run_config.session_config)
    else:
      session_config.allow_soft_placement = True  # The Estimator's default.
    session_config.graph_options.optimizer_options.global_jit_level = (
        tf.OptimizerOptions.ON_1)
    changes["session_config"] = session_config
  if training.deterministic:
    tf_v2.config.experimental.enable_op_determinism()
    changes["tf_random_seed"] = DETERMINISTIC_SEED
    logging.info("Deterministic run: op determinism on, graph seed %d",
                 DETERMINISTIC_SEED)
  return run_config.replace(**changes) if changes else run_config


def enable_xla_cpu_clustering():
  """Adds `--tf_xla_cpu_global_jit` to TF_XLA_FLAGS (before TF lists devices)."""
  current = os.environ.get("TF_XLA_FLAGS", "")
  if _CPU_JIT_FLAG not in current.split():
    os.environ["TF_XLA_FLAGS"] = (current + " " + _CPU_JIT_FLAG).strip()
