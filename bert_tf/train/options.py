"""A run's options (training, TPU, tf.distribute, evaluation during
training), read from the flags once.

`main` builds one `RunOptions` (`from_flags(FLAGS, problems)`) and passes
it, or its parts, down; nothing below the scripts reads a flag. Fields are
named after the flags (`cli/flags.py`) and filled generically
(`read_flags`); a choice's values are listed once here (`PRECISION_DTYPES`,
`OPTIMIZERS` from `optimizers.REGISTRY`, `distribute.STRATEGIES`). Every
default is the reference's behaviour (float32, AdamW, one batch per update,
no XLA, one device).
"""

import dataclasses
import os
import types
from typing import Optional

from absl import logging
import tensorflow as tf_v2  # enable_op_determinism has no compat.v1 name.
import tensorflow.compat.v1 as tf

from bert_tf.checks import numbers as number_checks
from bert_tf.train import choices
from bert_tf.train import distribute as distribute_utils
from bert_tf.train import optimizer_options as optimizer_options_lib
from bert_tf.train import optimizers
from bert_tf.train import spec as spec_lib

__all__ = ["PRECISION_DTYPES", "OPTIMIZERS", "RUNNERS", "DETERMINISTIC_SEED",
           "TrainingOptions", "TpuOptions", "DistributeOptions", "EvalOptions",
           "RunOptions", "field_names", "read_flags", "check",
           "distribution_problems", "runner_problems", "training_problems",
           "evaluation_problems", "number_flag_problems", "from_flags",
           "default_session_config", "session_settings",
           "enable_xla_cpu_clustering"]

# --precision -> the encoder's compute dtype (weights stay float32).
PRECISION_DTYPES = types.MappingProxyType(dict(zip(
    choices.PRECISIONS, (tf.float32, tf.bfloat16, tf.float16))))
# --optimizer's values: the names of the optimizer table (read-only, live).
OPTIMIZERS = optimizers.REGISTRY
RUNNERS = choices.RUNNERS
# The graph-level seed of --deterministic runs (any fixed value would do).
DETERMINISTIC_SEED = 12345
_CPU_JIT_FLAG = choices.CPU_JIT_FLAG
enable_xla_cpu_clustering = choices.enable_xla_cpu_clustering


@dataclasses.dataclass(frozen=True)
class TrainingOptions:
  """The flags of training at scale (`cli.flags.TRAINING_FLAGS`).

  Attributes:
    precision: a key of `PRECISION_DTYPES`: the encoder's arithmetic.
    optimizer_options: `OptimizerOptions`, filled from the flags its
      field's metadata names; `loss_scaling` follows `precision` (fp16).
    use_xla: bool, compile clusters of ops with XLA.
    deterministic: bool, op determinism and fixed seeds.
  """

  precision: str = "fp32"
  optimizer_options: optimizer_options_lib.OptimizerOptions = (
      dataclasses.field(default_factory=optimizer_options_lib.OptimizerOptions,
                        metadata={"flags": ("optimizer",
                                            "gradient_accumulation_steps",
                                            "poly_power")}))
  use_xla: bool = False
  deterministic: bool = False

  @property
  def dropout_seed(self):
    """int seed of a --deterministic run's stateless dropout
    (`model_fn.TrainingSchedule`); None: stateful, the reference's."""
    return DETERMINISTIC_SEED if self.deterministic else None

  def __post_init__(self):
    if self.optimizer_options.loss_scaling != self.loss_scaling:
      # Frozen: the one derived field is set once, here.
      object.__setattr__(self, "optimizer_options", dataclasses.replace(
          self.optimizer_options, loss_scaling=self.loss_scaling,
          check=False))

  @property
  def compute_dtype(self):
    """The `tf.DType` to pass to `modeling.BertModel(compute_dtype=...)`."""
    return PRECISION_DTYPES[self.precision]

  @property
  def loss_scaling(self):
    """Dynamic loss scaling: fp16 only (bfloat16 has float32's range)."""
    return self.precision == "fp16"

  @property
  def gradient_accumulation_steps(self):
    """`optimizer_options.gradient_accumulation_steps` (micro-batches per
    update), which the runner and the input size read."""
    return self.optimizer_options.gradient_accumulation_steps


@dataclasses.dataclass(frozen=True)
class TpuOptions:
  """The runner and TPU flags (`cli.flags.TPU_FLAGS`); see their help texts.

  Attributes:
    runner: one of `RUNNERS`, the flag; `runner_name` is what runs.
    use_tpu ... num_tpu_cores: the reference's TPU flags.
  """

  runner: str = "auto"
  use_tpu: bool = False
  tpu_name: Optional[str] = None
  tpu_zone: Optional[str] = None
  gcp_project: Optional[str] = None
  master: Optional[str] = None
  num_tpu_cores: int = 8

  @property
  def runner_name(self):
    """"estimator" or "session": `runner` with auto resolved."""
    if self.runner != "auto":
      return self.runner
    return "estimator" if spec_lib.estimator_available() else "session"


@dataclasses.dataclass(frozen=True)
class DistributeOptions:
  """The tf.distribute flags (`cli.flags.DISTRIBUTE_FLAGS`): strategy (one
  of `distribute.STRATEGIES`), GPUs per machine, logical CPU replicas (0:
  no split), seconds to wait for the other tasks, the graph and input
  seed."""

  distribution_strategy: str = "none"
  num_gpus: int = 1
  num_cpu_devices: int = 0
  worker_timeout_secs: int = 300
  random_seed: Optional[int] = None


@dataclasses.dataclass(frozen=True)
class EvalOptions:
  """Evaluation during fine-tuning (`cli.flags.BEST_CHECKPOINT_FLAGS`):
  evaluate every this many steps, the eval key that ranks checkpoints,
  evaluations without improvement before stopping (each None: off)."""

  eval_every_steps: Optional[int] = None
  keep_best_by: Optional[str] = None
  early_stopping_patience: Optional[int] = None


@dataclasses.dataclass(frozen=True)
class RunOptions:
  """Everything about a run beyond its model and data.

  Attributes:
    training, tpu, distribute, evaluation: the groups of options.
    do_train, do_eval, do_predict: the flags, except that a multi-worker
      task other than the chief neither evaluates nor predicts.
    train_batch_size: int or None, the global training batch.
    save_checkpoints_steps, save_checkpoints_secs, iterations_per_loop:
      the flags (None where the script has none).
    flags_given: frozenset of these names set on the command line.
  """

  training: TrainingOptions = dataclasses.field(
      default_factory=TrainingOptions)
  tpu: TpuOptions = dataclasses.field(default_factory=TpuOptions)
  distribute: DistributeOptions = dataclasses.field(
      default_factory=DistributeOptions)
  evaluation: EvalOptions = dataclasses.field(default_factory=EvalOptions)
  do_train: bool = False
  do_eval: bool = False
  do_predict: bool = False
  train_batch_size: Optional[int] = None
  save_checkpoints_steps: Optional[int] = None
  save_checkpoints_secs: Optional[int] = None
  iterations_per_loop: int = 1
  flags_given: frozenset = frozenset()

  @property
  def examples_per_update(self):
    """Examples of one update: the batch times the accumulation steps."""
    return self.train_batch_size * self.training.gradient_accumulation_steps


def field_names(cls):
  """The flag names of an options dataclass: its fields, in order (for a
  nested options value, the flags its field's metadata names)."""
  names = []
  for field in _flag_fields(cls):
    names.extend(field.metadata.get("flags", (field.name,)))
  return tuple(names)


def _flag_fields(cls):
  return [f for f in dataclasses.fields(cls) if f.name != "flags_given"]


def _read(cls, flag_values, given, names=None):
  """`cls` with each field the flag of its name (its default where none);
  only the fields in `names`, when given, are read from flags. A class
  with an `unchecked` constructor is built unchecked: its problems are
  reported with the script's other start-up problems."""
  values = {}
  for field in _flag_fields(cls):
    if dataclasses.is_dataclass(field.default_factory):
      values[field.name] = _read(field.default_factory, flag_values, given,
                                 field.metadata.get("flags"))
      continue
    default = field.default
    if names is not None and field.name not in names:
      values[field.name] = default
      continue
    values[field.name] = getattr(flag_values, field.name, default)
    flag = _flag(flag_values, field.name)
    if flag is not None and flag.present:
      given.add(field.name)
  return getattr(cls, "unchecked", cls)(**values)


def _flag(flag_values, name):
  """The `absl.flags.Flag` named `name`, or None (not defined, or a plain
  namespace of values)."""
  try:
    return flag_values[name] if name in flag_values else None
  except TypeError:
    return None


def read_flags(flag_values):
  """A `RunOptions` filled from parsed flags (any object with them as
  attributes; an undefined flag takes the field's default), unchecked."""
  given = set()
  run = _read(RunOptions, flag_values, given)
  return dataclasses.replace(run, flags_given=frozenset(given))


def training_problems(training):
  """The problems of a `TrainingOptions`, each a one-line message naming
  the flag (the optimizer options' checks are `optimizer_options.problems`)."""
  problems = []
  if training.precision not in PRECISION_DTYPES:
    problems.append("--precision=%s: expected one of %s" %
                    (training.precision, ", ".join(PRECISION_DTYPES)))
  for name, value, expected in optimizer_options_lib.problems(
      training.optimizer_options):
    problems.append("--%s=%s: expected %s" % (name, value, expected))
  if (training.precision == "fp16" and
      not tf.config.list_physical_devices("GPU")):
    problems.append("--precision=fp16 needs a GPU (TensorFlow sees none); "
                    "on CPU or TPU use --precision=bf16")
  if training.use_xla and not tf.test.is_built_with_xla():
    problems.append("--use_xla: this TensorFlow build has no XLA; drop the "
                    "flag")
  return problems


def check(run):
  """Every problem (list of str) of a `RunOptions`: the runner, the first
  tf.distribute problem, then each training option."""
  return (runner_problems(run) + distribution_problems(run) +
          training_problems(run.training))


def runner_problems(run):
  """The runner's problem, as a list of at most one (the Estimator needs
  `tf.estimator`, TF 2.15 and older; TPUs need the Estimator)."""
  tpu = run.tpu
  if tpu.runner not in RUNNERS:
    return ["--runner=%s: expected one of %s" % (tpu.runner,
                                                 ", ".join(RUNNERS))]
  if tpu.runner_name == "estimator" and not spec_lib.estimator_available():
    return ["--runner=estimator needs tf.estimator, which TensorFlow %s "
            "lacks (removed in 2.16): use --runner=session (or auto), or "
            "the TensorFlow 2.15 stack on Python 3.9-3.11" % tf_v2.__version__]
  if tpu.use_tpu and tpu.runner_name == "session":
    if not spec_lib.estimator_available():
      return ["--use_tpu: TPU training needs the TPUEstimator, which "
              "TensorFlow %s lacks: use the TensorFlow 2.15 stack (Python "
              "3.9-3.11, see README)" % tf_v2.__version__]
    return ["--use_tpu runs on the TPUEstimator: use --runner=estimator (or "
            "auto), not --runner=session"]
  return []


def distribution_problems(run):
  """The tf.distribute options' first problem (the later ones depend on
  it), as a list of at most one."""
  try:
    distribute_utils.check_options(
        run, len(tf.config.list_physical_devices("GPU")))
  except ValueError as e:
    return [str(e)]
  return []


def _default_gpus(run):
  """`run` with an unset `--num_gpus` under a mirrored strategy: every GPU
  TensorFlow sees, or none with `--num_cpu_devices` or without GPUs."""
  options = run.distribute
  if ("num_gpus" in run.flags_given or run.tpu.use_tpu or
      options.distribution_strategy not in ("mirrored",
                                            "multi_worker_mirrored")):
    return run
  visible = (0 if options.num_cpu_devices else
             len(tf.config.list_physical_devices("GPU")))
  return dataclasses.replace(
      run, distribute=dataclasses.replace(options, num_gpus=visible))


def evaluation_problems(run):
  """The evaluation-during-training options' problems, one line each,
  checked against `do_train`/`do_eval` as given."""
  options = run.evaluation
  every = options.eval_every_steps
  problems = []
  if every is not None:
    if every < 1:
      problems.append("--eval_every_steps: got %d, expected at least 1" %
                      every)
    if not (run.do_train and run.do_eval):
      problems.append("--eval_every_steps needs --do_train and --do_eval "
                      "(it evaluates the dev set during training)")
  if options.keep_best_by and every is None:
    problems.append("--keep_best_by needs --eval_every_steps (the "
                    "evaluations that rank the checkpoints)")
  patience = options.early_stopping_patience
  if patience is not None:
    if patience < 1:
      problems.append("--early_stopping_patience: got %d, expected at "
                      "least 1" % patience)
    if not options.keep_best_by:
      problems.append("--early_stopping_patience needs --keep_best_by (the "
                      "key whose improvement it waits for)")
    if run.distribute.distribution_strategy == "multi_worker_mirrored":
      problems.append("--early_stopping_patience: not with "
                      "--distribution_strategy=multi_worker_mirrored (only "
                      "the chief evaluates; the other workers would wait "
                      "for it)")
  return problems


def number_flag_problems(flag_values):
  """One-line messages for the number flags (defined by the script) that
  are not finite or out of their `bert_tf.checks.numbers.RANGES` range."""
  return number_checks.flag_problems(flag_values)


def from_flags(flag_values, problems):
  """The `RunOptions` of a script's parsed flags (call it once, in `main`).

  Every problem is added to `problems` (`checks.problems.Problems`), which
  the script raises with its other start-up checks; nothing is raised
  here. A multi-worker task other than the chief gets `do_eval` and
  `do_predict` off (the chief alone writes results).
  """
  run = _default_gpus(read_flags(flag_values))
  problems.extend(check(run) + evaluation_problems(run))
  # A flag another check already named (a script's own, the devices') is
  # reported once, by that check.
  problems.extend_unnamed(number_flag_problems(flag_values))
  if (run.distribute.distribution_strategy == "multi_worker_mirrored" and
      run.do_train and not distribute_utils.is_chief()):
    left = [name for name in ("do_eval", "do_predict") if getattr(run, name)]
    for name in left:
      logging.info("Not the chief: --%s is left to the chief", name)
    run = dataclasses.replace(run, do_eval=False, do_predict=False)
  return run


def default_session_config():
  """The `ConfigProto` both runners start from: soft placement and two
  passes of Grappler's meta optimizer, as a plain `tf.Session` and a loaded
  SavedModel have (the remapper fuses `modeling.gelu` into the matmul only
  in its second pass: with one, predictions differed from the export's in
  the last float32 digit and ran 7-18% slower)."""
  config = tf.ConfigProto(allow_soft_placement=True)
  rewrite = config.graph_options.rewrite_options
  rewrite.meta_optimizer_iterations = type(rewrite).TWO
  return config


def session_settings(training, session_config=None, seed=None):
  """(session_config, seed) of a run's --use_xla and --deterministic.

  XLA: `global_jit_level` ON_1 (on CPU it needs `--tf_xla_cpu_global_jit`
  in TF_XLA_FLAGS, set by `entry.run_main`; a warning says when missing).
  Determinism: `enable_op_determinism()` (tf.data keeps its order) and the
  graph seed `DETERMINISTIC_SEED`. `session_config` (None: the runner's
  default) is not modified: XLA returns a new one; `seed` is returned
  unless determinism replaces it.
  """
  if training.use_xla:
    if _CPU_JIT_FLAG not in os.environ.get("TF_XLA_FLAGS", "").split():
      logging.warning("--use_xla: TF_XLA_FLAGS lacks %s, so only GPU ops are "
                      "compiled (entry.run_main sets it)", _CPU_JIT_FLAG)
    config = tf.ConfigProto()
    if session_config is not None:
      config.CopyFrom(session_config)
    else:
      config.allow_soft_placement = True  # The Estimator's default.
    config.graph_options.optimizer_options.global_jit_level = (
        tf.OptimizerOptions.ON_1)
    session_config = config
  if training.deterministic:
    tf_v2.config.experimental.enable_op_determinism()
    seed = DETERMINISTIC_SEED
    logging.info("Deterministic run: op determinism on, graph seed %d",
                 DETERMINISTIC_SEED)
  return session_config, seed

