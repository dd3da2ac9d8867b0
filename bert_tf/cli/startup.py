"""What every script does before its work: flags, checks, one-line errors.

Public names:

* `define_flags(*names, **defaults)`: defines shared flags from one table
  (`SHARED_FLAGS`), each flag once in a process;
* `run_main(main)`: runs a script's `main`, reporting bad input (including
  flag-parsing errors) as one line, `error: ...`;
* `resolve_init_checkpoint(path)`: a released model folder, a checkpoint
  prefix or a training `output_dir` -> a checkpoint prefix;
* `prepare_model(...)`: the start-up checks, in one fixed order, returning
  the config, checkpoint and tokenizer a script works with;
* `load_bert_config`, `check_max_seq_length`, `load_tokenizer`,
  `check_vocab_size`: the single checks `prepare_model` is made of;
  `positive_flag_problems`, `training_flag_problems`,
  `fine_tuning_flag_problems`: checks the scripts add to it.
"""

import collections
import os
import sys

from absl import app
from absl import flags

import modeling
import tokenization


# ----------------------------------------------------------------------------
# Flags
# ----------------------------------------------------------------------------

_S, _B, _I, _F = (flags.DEFINE_string, flags.DEFINE_bool,
                  flags.DEFINE_integer, flags.DEFINE_float)


def _enum(*values):
  """A define function for an enum flag with `values`."""

  def define(name, default, help_text, **kwargs):
    return flags.DEFINE_enum(name, default, list(values), help_text,
                             **kwargs)

  return define

# Every flag that more than one script takes: name -> (define, default,
# help). Names and defaults are the reference release's.
SHARED_FLAGS = collections.OrderedDict([
    # The model.
    ("bert_config_file", (_S, None,
                          "bert_config.json of the BERT model: its layer "
                          "count, sizes and vocabulary size.")),
    ("vocab_file", (_S, None,
                    "vocab.txt the model was pre-trained with: one WordPiece "
                    "token per line.")),
    ("init_checkpoint", (_S, None,
                         "Weights to start from: a released model folder "
                         "(its bert_model.ckpt), a checkpoint prefix such as "
                         ".../bert_model.ckpt, or a training output_dir (its "
                         "latest checkpoint).")),
    ("do_lower_case", (_B, True,
                       "Lower-case and strip accents before WordPiece: True "
                       "for uncased models, False for cased ones.")),
    ("output_dir", (_S, None,
                    "Folder for checkpoints, summaries and result files; a "
                    "second run with the same folder resumes training.")),
    ("max_seq_length", (_I, 128,
                        "Length of every input in WordPiece tokens, [CLS] "
                        "and [SEP] included: longer inputs are cut, shorter "
                        "ones padded.")),
    ("doc_stride", (_I, 128,
                    "How far, in WordPiece tokens, each window over a text "
                    "longer than one input starts after the previous one.")),
    ("max_predictions_per_seq", (_I, 20,
                                 "Masked positions per sequence (the length "
                                 "of the masked_lm_* features).")),
    # Data.
    ("data_dir", (_S, None,
                  "Folder holding the task's data files.")),
    ("label_column", (_I, -1,
                      "Column of the label (0-based; negative counts from "
                      "the end). run_classifier.py: train.tsv and dev.tsv "
                      "of the tsv task; run_ner.py: every CoNLL file.")),
    # What to run.
    ("do_train", (_B, False, "Train the model.")),
    ("do_eval", (_B, False, "Evaluate on the evaluation data.")),
    ("do_predict", (_B, False, "Write predictions for the test data.")),
    # Training.
    ("train_batch_size", (_I, 32, "Examples per training step.")),
    ("eval_batch_size", (_I, 8, "Examples per evaluation step.")),
    ("predict_batch_size", (_I, 8, "Examples per prediction step.")),
    ("learning_rate", (_F, 5e-5,
                       "Peak learning rate, reached after the warmup and "
                       "then decayed linearly to 0.")),
    ("num_train_epochs", (_F, 3.0, "Passes over the training data.")),
    ("warmup_proportion", (_F, 0.1,
                           "Share of the training steps spent raising the "
                           "learning rate linearly from 0 (0.1 = 10%).")),
    ("num_train_steps", (_I, 100000, "Training steps (optimizer updates).")),
    ("num_warmup_steps", (_I, 10000,
                          "Steps that raise the learning rate linearly from "
                          "0 to its peak.")),
    ("save_checkpoints_steps", (_I, 1000,
                                "Write a checkpoint every this many steps.")),
    ("save_checkpoints_secs", (_I, 600,
                               "Also write a checkpoint every this many "
                               "seconds of training (0: by steps only), so "
                               "a killed run loses little work.")),
    ("iterations_per_loop", (_I, 1000,
                             "Steps the TPU runs per call from the host "
                             "(ignored off TPU).")),
    # Training at scale (training_options.py reads them).
    ("precision", (_enum("fp32", "bf16", "fp16"), "fp32",
                   "Arithmetic of the encoder's matmuls: fp32 (as released), "
                   "bf16 (bfloat16; fast on CPUs with AMX or AVX512-BF16, on "
                   "TPUs and on Ampere or newer GPUs) or fp16 (float16 with "
                   "dynamic loss scaling; GPU only). Weights, checkpoints, "
                   "layer norm, softmax and losses stay float32.")),
    ("gradient_accumulation_steps", (_I, 1,
                                     "Batches of --train_batch_size examples "
                                     "whose mean gradient makes one update; "
                                     "steps, warmup and --num_train_steps "
                                     "count updates.")),
    ("optimizer", (_enum("adamw", "lamb"), "adamw",
                   "adamw: Adam with decoupled weight decay, no bias "
                   "correction (as released). lamb: layer-wise adaptive "
                   "moments (You et al. 2019), for large batches.")),
    ("poly_power", (_F, 1.0,
                    "Power of the polynomial learning-rate decay after the "
                    "warmup (1.0 = linear, as released).")),
    ("use_xla", (_B, False,
                 "Compile clusters of ops with XLA (just in time, on CPU and "
                 "GPU). Under a distribution strategy the optimizer's update "
                 "is left uncompiled, so that every replica's copy gets the "
                 "same update.")),
    ("deterministic", (_B, False,
                       "Reruns give the same weights on the same machine and "
                       "software: deterministic kernels, fixed seeds and a "
                       "fixed input order. Slower.")),
    # Serving.
    ("export_dir", (_S, None,
                    "Also write a SavedModel for serving under this folder, "
                    "in a new timestamped version sub-folder, after the other "
                    "steps. Alone (no --do_* step), it exports the latest "
                    "checkpoint of --output_dir, else --init_checkpoint.")),
    # TPU.
    ("use_tpu", (_B, False, "Run on a Cloud TPU (False: CPU or GPU).")),
    ("tpu_name", (_S, None,
                  "The Cloud TPU: its name, or a grpc://ip:port address.")),
    ("tpu_zone", (_S, None,
                  "GCE zone of the Cloud TPU (found from its name when "
                  "unset).")),
    ("gcp_project", (_S, None,
                     "GCP project of the Cloud TPU (found from its name when "
                     "unset).")),
    ("master", (_S, None, "Address of the TensorFlow master.")),
    ("num_tpu_cores", (_I, 8,
                       "TPU cores to use; with --use_tpu only.")),
    # tf.distribute (several GPUs or machines); not with --use_tpu.
    ("distribution_strategy", (_S, "none",
                               "none: one device (the reference's path). "
                               "mirrored: data-parallel over --num_gpus GPUs "
                               "of this machine (or --num_cpu_devices CPU "
                               "replicas). multi_worker_mirrored: over the "
                               "machines that the TF_CONFIG environment "
                               "variable lists, --num_gpus GPUs each. Batch "
                               "sizes stay global (all replicas together); "
                               "--train_batch_size must be a multiple of the "
                               "replica count.")),
    ("num_gpus", (_I, 1,
                  "GPUs per machine for --distribution_strategy (0: the "
                  "CPU). With none, more than 1 is refused.")),
    ("num_cpu_devices", (_I, 0,
                         "With --distribution_strategy=mirrored and "
                         "--num_gpus=0: split the CPU into this many "
                         "replicas (0: no split). For testing.")),
    ("worker_timeout_secs", (_I, 300,
                             "With multi_worker_mirrored: seconds to wait "
                             "for every other TF_CONFIG task to be "
                             "reachable before failing.")),
    ("random_seed", (_I, None,
                     "Seed of the graph's random operations and of the "
                     "training input's shuffling (each worker adds its "
                     "index); default unseeded, a new order every run.")),
])

TPU_FLAGS = ("use_tpu", "tpu_name", "tpu_zone", "gcp_project", "master",
             "num_tpu_cores")
MODEL_FLAGS = ("bert_config_file", "vocab_file", "init_checkpoint",
               "do_lower_case", "output_dir")
TRAINING_FLAGS = ("precision", "gradient_accumulation_steps", "optimizer",
                  "poly_power", "use_xla", "deterministic")
DISTRIBUTE_FLAGS = ("distribution_strategy", "num_gpus", "num_cpu_devices",
                    "worker_timeout_secs", "random_seed")
FINE_TUNING_FLAGS = ("do_train", "do_predict", "train_batch_size",
                     "predict_batch_size", "learning_rate", "num_train_epochs",
                     "warmup_proportion", "save_checkpoints_steps",
                     "save_checkpoints_secs", "iterations_per_loop")


def define_flags(*names, **defaults):
  """Defines the named shared flags, with the script's own defaults.

  Args:
    *names: str names from `SHARED_FLAGS` (or tuples of them, such as
      `TPU_FLAGS`).
    **defaults: name -> default, where a script's reference default differs
      from the table's (`max_seq_length=384` for SQuAD).

  Raises:
    KeyError: a name that is not in `SHARED_FLAGS`.
    absl.flags.DuplicateFlagError: a flag that is already defined: each
      flag has one definition in a process.
  """
  flat = []
  for name in names:
    flat.extend([name] if isinstance(name, str) else name)
  for name in defaults:
    if name not in flat:
      raise KeyError("default given for %r, which is not defined here" % name)
  # The flags belong to the calling script, so that its --help lists them.
  module = sys._getframe(1).f_globals.get("__name__")  # pylint: disable=protected-access
  if module == "__main__":
    module = sys.argv[0]
  for name in flat:
    define, default, help_text = SHARED_FLAGS[name]
    define(name, defaults.get(name, default), help_text, module_name=module)


# ----------------------------------------------------------------------------
# Running a script
# ----------------------------------------------------------------------------


def _user_errors():
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  return (ValueError, OSError, tf.errors.NotFoundError,
          tf.errors.InvalidArgumentError, tf.errors.FailedPreconditionError,
          tf.errors.PermissionDeniedError, tf.errors.AlreadyExistsError,
          tf.errors.DataLossError)


def _is_user_error(error):
  """Bad input, or a write that hit a full disk (TensorFlow reports EFBIG
  as `OutOfRangeError`, ENOSPC as `ResourceExhaustedError`)."""
  from bert_tf.checks import disk  # pylint: disable=g-import-not-at-top
  return isinstance(error, _user_errors()) or disk.is_disk_full(error)


def _one_line(error):
  """The essential message of `error` on one line.

  TensorFlow's graph-execution errors carry the Python stack of the failing
  op; only the lines that say what went wrong are kept.
  """
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  from bert_tf.checks import disk  # pylint: disable=g-import-not-at-top
  from bert_tf.checks import records  # pylint: disable=g-import-not-at-top
  if disk.is_disk_full(error):
    return disk.disk_full_message(_one_line_text(error))
  if isinstance(error, tf.errors.DataLossError):
    return records.explain_data_loss(error, records.record_files_of(error))
  return _one_line_text(error)


def _one_line_text(error):
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  message = str(getattr(error, "message", None) or error)
  if isinstance(error, tf.errors.OpError):
    kept = [line.strip() for line in message.splitlines()
            if line.strip() and not line[:1].isspace()
            and not line.startswith(("Graph execution error",
                                     "Detected at node", "File "))]
    message = " ".join(kept) or message
  return " ".join(message.split())


def _fail(message):
  sys.stderr.write("error: %s\n" % message)
  sys.stderr.flush()
  sys.exit(1)


def _parse_flags(argv):
  """absl's flag parsing, with a parsing error as one `error:` line."""
  try:
    argv = flags.FLAGS(argv)
  except flags.Error as e:
    if os.environ.get("BERT_DEBUG"):
      raise
    _fail("%s (see --helpfull)" % " ".join(str(e).split()))
  if getattr(flags.FLAGS, "use_xla", False):
    # TensorFlow reads TF_XLA_FLAGS once, when it first lists its devices,
    # and `import tensorflow` registers an absl callback that does so right
    # after this parsing: later (in main) the variable has no effect.
    from bert_tf.train import options as training_options  # pylint: disable=g-import-not-at-top
    training_options.enable_xla_cpu_clustering()
  return argv


def run_main(main):
  """Runs `main` through `absl.app.run`, reporting bad input in one line.

  Right after the flags are parsed, `--use_xla` switches on XLA's CPU
  clustering (`training_options.enable_xla_cpu_clustering`); before `main`,
  `distribute_utils.setup_from_flags` checks the `DISTRIBUTE_FLAGS` (where
  the script has them) and splits the CPU for `--num_cpu_devices`.

  A flag that does not parse, a missing required flag, or a `ValueError`,
  `OSError` or TensorFlow `NotFoundError` / `InvalidArgumentError` /
  `FailedPreconditionError` / `PermissionDeniedError` / `AlreadyExistsError`
  / `DataLossError` (with the damaged TFRecord file named) escaping `main`,
  or any write that hit a full disk or a file-size limit, is printed as
  `error: <message>` on stderr, and the process exits with status 1.
  `BERT_DEBUG=1` gives the full traceback (and TensorFlow's deprecation
  notices) instead.
  """

  def _guarded(argv):
    if not os.environ.get("BERT_DEBUG"):
      # Deprecation notices of tf.compat.v1 APIs (a dozen lines before the
      # first line of the project's own log); BERT_DEBUG=1 shows them.
      from tensorflow.python.util import deprecation  # pylint: disable=g-import-not-at-top
      from tensorflow.python.util import module_wrapper  # pylint: disable=g-import-not-at-top
      deprecation._PRINT_DEPRECATION_WARNINGS = False  # pylint: disable=protected-access
      module_wrapper._PER_MODULE_WARNING_LIMIT = 0  # pylint: disable=protected-access
    try:
      from bert_tf.train import distribute as distribute_utils  # pylint: disable=g-import-not-at-top
      distribute_utils.setup_from_flags(flags.FLAGS)
      return main(argv)
    except Exception as e:  # pylint: disable=broad-except
      if os.environ.get("BERT_DEBUG") or not _is_user_error(e):
        raise
      _fail(_one_line(e))


  app.run(_guarded, flags_parser=_parse_flags)


# ----------------------------------------------------------------------------
# Start-up checks
# ----------------------------------------------------------------------------


def positive_flag_problems(flag_values, names):
  """`--name=N: expected at least 1` for each named flag below 1."""
  return ["--%s=%d: expected at least 1" % (name, flag_values[name].value)
          for name in names if flag_values[name].value < 1]


def fine_tuning_flag_problems(flag_values, positive_flags=()):
  """The flag problems of a fine-tuning script with train/eval/predict steps
  over files in `--data_dir` (run_classifier.py, run_ner.py).

  Args:
    flag_values: parsed flags with `do_train`, `do_eval`, `do_predict`,
      `export_dir`, `max_seq_length`, the batch sizes, `data_dir` and the
      training flags.
    positive_flags: more integer flags that must be at least 1.

  Returns:
    list of one-line messages.
  """
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  problems = []
  if not (flag_values.do_train or flag_values.do_eval or
          flag_values.do_predict or flag_values.export_dir):
    problems.append("At least one of --do_train, --do_eval or --do_predict "
                    "must be set. (--export_dir alone exports only.)")
  if flag_values.max_seq_length < 3:
    problems.append("--max_seq_length: got %d, expected at least 3" %
                    flag_values.max_seq_length)
  problems += positive_flag_problems(
      flag_values, tuple(positive_flags) + (
          "train_batch_size", "eval_batch_size", "predict_batch_size"))
  if not tf.io.gfile.isdir(flag_values.data_dir):
    problems.append("--data_dir: %s is not a directory" %
                    flag_values.data_dir)
  return problems + training_flag_problems(flag_values)


def training_flag_problems(flag_values):
  """The training flags' problems (`training_options.options_from_flags`)."""
  from bert_tf.train import options as training_options  # pylint: disable=g-import-not-at-top
  try:
    training_options.options_from_flags(flag_values)
  except ValueError as e:
    return [str(e)]
  return []


def load_bert_config(path, flag_name="bert_config_file"):
  """Reads a `BertConfig` from JSON, with a one-line error for a bad file.

  Beyond `BertConfig.from_json_file` (which, like the reference, takes any
  keys), the values are checked by `config.check_bert_config_json`.

  Raises:
    ValueError: when `path` is empty, missing, not JSON, or a config with a
      missing size, a value of the wrong type or range, or a hidden_size
      that num_attention_heads does not divide (every bad key named).
  """
  if not path:
    raise ValueError("--%s is required: the JSON config of the BERT model"
                     % flag_name)
  if not os.path.exists(path) and "://" not in path:
    raise ValueError("--%s: %s does not exist (expected the model's "
                     "bert_config.json)" % (flag_name, path))
  from bert_tf.checks import config as config_checks  # pylint: disable=g-import-not-at-top
  try:
    config = modeling.BertConfig.from_json_file(path)
    config_checks.check_bert_config_json(config_checks.read_json(path), path,
                                         flag_name)
  except (ValueError, OSError) as e:
    if str(e).startswith("--%s: " % flag_name):
      raise
    raise ValueError("--%s: %s is not a valid BERT config JSON (%s)" %
                     (flag_name, path, e)) from e
  return config


def check_max_seq_length(max_seq_length, bert_config,
                         flag_name="max_seq_length"):
  """Refuses a sequence length the model has no position embeddings for.

  Raises:
    ValueError: when `max_seq_length` > `bert_config.max_position_embeddings`.
  """
  if max_seq_length > bert_config.max_position_embeddings:
    raise ValueError(
        "--%s=%d is longer than the model's max_position_embeddings=%d; use "
        "--%s <= %d or a model with more position embeddings" %
        (flag_name, max_seq_length, bert_config.max_position_embeddings,
         flag_name, bert_config.max_position_embeddings))


def check_vocab_size(tokenizer, bert_config, flag_name="vocab_file"):
  """Refuses a vocabulary with ids the model has no embeddings for.

  Raises:
    ValueError: when the vocabulary has more tokens than the config's
      `vocab_size` (its ids would index past the embedding table).
  """
  if len(tokenizer.vocab) > bert_config.vocab_size:
    raise ValueError(
        "--%s has %d tokens but the model's vocab_size is %d: use the "
        "vocab.txt that came with the model" %
        (flag_name, len(tokenizer.vocab), bert_config.vocab_size))


def resolve_init_checkpoint(path, flag_name="init_checkpoint"):
  """The checkpoint prefix that `path` names.

  Accepted, in this order: a folder holding `bert_model.ckpt.index` (a
  released model, or one `convert_checkpoint.py` wrote); a folder with a
  `checkpoint` state file (a training `output_dir`: its latest checkpoint);
  a checkpoint prefix whose `.index` file exists (`.../bert_model.ckpt`,
  `.../model.ckpt-1000`); the `.index` file itself.

  Returns:
    str, the checkpoint prefix.

  Raises:
    ValueError: naming the flag and the path, when no checkpoint is there.
  """
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  if path and path.endswith(".index"):
    path = path[:-len(".index")]
  if path and tf.io.gfile.isdir(path):
    released = os.path.join(path, "bert_model.ckpt")
    if tf.io.gfile.exists(released + ".index"):
      return released
    latest = tf.train.latest_checkpoint(path)
    if latest:
      return latest
  elif path and tf.io.gfile.exists(path + ".index"):
    return path
  raise ValueError("--%s: no TensorFlow checkpoint at %r (expected a model "
                   "folder with bert_model.ckpt.index, a training output_dir "
                   "with a 'checkpoint' file, or a prefix such as "
                   ".../bert_model.ckpt with a .index file beside it)" %
                   (flag_name, path))


def _check_checkpoint(checkpoint, bert_config):
  """A whole checkpoint whose `bert/` shapes fit the config (see
  `checkpoint.check_checkpoint`); logs the variables it lacks."""
  from bert_tf.checks import checkpoint as checkpoint_checks  # pylint: disable=g-import-not-at-top
  from absl import logging  # pylint: disable=g-import-not-at-top
  missing = checkpoint_checks.check_checkpoint(checkpoint, "init_checkpoint",
                                               bert_config)
  if missing:
    logging.warning("--init_checkpoint: %s lacks %d of the model's variables "
                    "(such as %s); they start from random values",
                    checkpoint, len(missing), missing[0])


Model = collections.namedtuple(
    "Model", ["bert_config", "init_checkpoint", "tokenizer"])


def prepare_model(bert_config_file, max_seq_length=None, init_checkpoint=None,
                  do_lower_case=True, vocab_file=None, output_dir=None,
                  need_output_dir=True, need_checkpoint=False, problems=()):
  """The start-up checks every script runs, in one fixed order.

  1. the config (`--bert_config_file`); 2. the sequence length against the
  model's position embeddings; 3. the checkpoint (`resolve_init_checkpoint`;
  then that it is whole and its `bert/` shapes fit the config);
  4. the casing against a released checkpoint's name (the reference's
  `validate_case_matches_checkpoint`); 5. the vocabulary's size against the
  model's; 6. the output folder. Every problem found is reported together,
  after the script's own `problems`, in one `ValueError` (one per line of
  the message would hide all but the last from a `error:` line, so they are
  joined with "; ").

  Args:
    bert_config_file: str, the `--bert_config_file` flag.
    max_seq_length: int or None (not checked).
    init_checkpoint: str or None, the `--init_checkpoint` flag.
    do_lower_case: bool, the `--do_lower_case` flag (None: a script
      without a vocabulary; the casing is not checked).
    vocab_file: str or None (no tokenizer is made).
    output_dir: str or None, the `--output_dir` flag.
    need_output_dir: bool, whether `--output_dir` is required.
    need_checkpoint: bool, whether `--init_checkpoint` is required.
    problems: list of str, the script's own flag problems found before.

  Returns:
    `Model(bert_config, init_checkpoint, tokenizer)`: the `BertConfig`, the
    resolved checkpoint prefix (or None) and a `FullTokenizer` (or None).

  Raises:
    ValueError: listing every problem found.
  """
  problems = list(problems)

  def attempt(check, *args):
    try:
      return check(*args)
    except (ValueError, OSError) as e:
      problems.append(str(e))
      return None

  bert_config = attempt(load_bert_config, bert_config_file)
  if bert_config is not None and max_seq_length is not None:
    attempt(check_max_seq_length, max_seq_length, bert_config)
  checkpoint = None
  if init_checkpoint:
    checkpoint = attempt(resolve_init_checkpoint, init_checkpoint)
    if checkpoint is not None:
      attempt(_check_checkpoint, checkpoint, bert_config)
  elif need_checkpoint:
    problems.append("--init_checkpoint is required")
  if init_checkpoint and do_lower_case is not None:
    attempt(tokenization.validate_case_matches_checkpoint, do_lower_case,
            checkpoint or init_checkpoint)
  tokenizer = None
  if vocab_file is not None:
    tokenizer = attempt(load_tokenizer, vocab_file, do_lower_case)
    if tokenizer is not None and bert_config is not None:
      attempt(check_vocab_size, tokenizer, bert_config)
  if not output_dir and need_output_dir:
    problems.append("--output_dir is required: where checkpoints and "
                    "results go")
  elif output_dir and os.path.isfile(output_dir):
    problems.append("--output_dir: %s is a file; expected a folder" %
                    output_dir)
  if problems:
    raise ValueError("; ".join(problems))
  return Model(bert_config, checkpoint, tokenizer)


def load_tokenizer(vocab_file, do_lower_case):
  """A `FullTokenizer` for `--vocab_file`.

  Raises:
    ValueError: naming the flag, when the path is empty, a directory or
      missing (the one wording every script uses).
  """
  if not vocab_file:
    raise ValueError("--vocab_file is required: the model's vocab.txt")
  if os.path.isdir(vocab_file):
    raise ValueError("--vocab_file: %s is a directory; expected the model's "
                     "vocab.txt" % vocab_file)
  if "://" not in vocab_file and not os.path.exists(vocab_file):
    raise ValueError("--vocab_file: %s does not exist (expected the model's "
                     "vocab.txt)" % vocab_file)
  return tokenization.FullTokenizer(vocab_file=vocab_file,
                                    do_lower_case=do_lower_case)
