"""The start-up checks of a script's model, in one fixed order.

`prepare_model` runs them (config, sequence length, checkpoint, casing,
vocabulary, output folder) and reports every problem together;
`load_bert_config`, `check_max_seq_length`,
`load_tokenizer` and `check_vocab_size` are the single checks, and
`positive_flag_problems` / `fine_tuning_flag_problems` the flag checks the
scripts add to it. Every problem goes to the script's one
`checks.problems.Problems`, reported together. `start` is the one call a
script's `main` begins with: all of it, then the devices.
"""

import collections
import os

from absl import logging
import tensorflow.compat.v1 as tf

from bert_tf.checks import checkpoint as checkpoint_checks
from bert_tf.checks import config as config_checks
from bert_tf.checks.problems import Problems
from bert_tf.export import saved_model
from bert_tf.runner import loop
from bert_tf.train import checkpoints
from bert_tf.train import lengths as lengths_lib
from bert_tf.train import options as training_options
import modeling
import tokenization

__all__ = ["positive_flag_problems", "fine_tuning_flag_problems",
           "load_bert_config", "check_training_memory",
           "check_max_seq_length", "check_vocab_size", "Model",
           "prepare_model", "load_tokenizer", "check_special_tokens",
           "SPECIAL_TOKENS", "Start", "start"]


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
      `export_dir`, `max_seq_length`, the batch sizes and `data_dir` (the
      training options are checked by `training_options.from_flags`).
    positive_flags: more integer flags that must be at least 1.

  Returns:
    list of one-line messages.
  """
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
  return problems + lengths_lib.flag_problems(
      flag_values.bucket_by_length, flag_values.use_tpu,
      getattr(flag_values, "pack_sequences", False))


def load_bert_config(path, flag_name="bert_config_file"):
  """Reads a `BertConfig` from JSON, with a one-line error for a bad file.

  Beyond `BertConfig.from_json_file` (which, like the reference, takes any
  keys), the values are checked by `config_checks.check_bert_config_json`.

  Raises:
    ValueError: when `path` is empty, missing, not JSON (or nested beyond
      `json_file.MAX_DEPTH`), or a config with a missing size, a value of
      the wrong type or range, a hidden_size that num_attention_heads does
      not divide, or weights larger than the machine's memory (every bad
      key named).
  """
  if not path:
    raise ValueError("--%s is required: the JSON config of the BERT model "
                     "(or --init_checkpoint naming a Hugging Face folder)"
                     % flag_name)
  if not os.path.exists(path) and "://" not in path:
    raise ValueError("--%s: %s does not exist (expected the model's "
                     "bert_config.json)" % (flag_name, path))
  try:
    json_object = config_checks.read_json(path)
  except (ValueError, OSError) as e:
    raise ValueError("--%s: %s" % (flag_name, e)) from None
  config_checks.check_bert_config_json(json_object, path, flag_name)
  config = modeling.BertConfig.from_dict(json_object)
  return config


def check_training_memory(bert_config, training, path):
  """Refuses a model whose training does not fit in memory, before any
  graph is built: the weights, the optimizer's two slots per weight
  (AdamW, LAMB) and, with `--gradient_accumulation_steps` > 1, the
  accumulation buffers, against the machine's (available) memory and the
  process's address-space limit (`config_checks.memory_problem`).

  Args:
    bert_config: `modeling.BertConfig`, checked.
    training: `TrainingOptions` (`optimizer`,
      `gradient_accumulation_steps`).
    path: str, the config file (for the message).

  Raises:
    ValueError: `--bert_config_file: <file>: the model has N parameters:
      training holds 3 float32 copies of each ...`.
  """
  problem = config_checks.memory_problem(
      bert_config.to_dict(), copies=config_checks.training_copies(
          training.optimizer_options.optimizer,
          training.gradient_accumulation_steps))
  if problem:
    raise ValueError("--bert_config_file: %s: %s" % (path, problem))


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


# The tokens every fine-tuning input and unknown word needs.
SPECIAL_TOKENS = ("[CLS]", "[SEP]", "[UNK]")


def check_special_tokens(tokenizer, vocab_file, flag_name="vocab_file"):
  """Refuses a vocabulary without `[CLS]`, `[SEP]` or `[UNK]`.

  Every feature starts with `[CLS]` and ends its segments with `[SEP]`; a
  word outside the vocabulary becomes `[UNK]`: without them the scripts
  failed on the first example (or the first unknown word) with a KeyError.

  Raises:
    ValueError: naming the flag, the file and the tokens it lacks.
  """
  missing = [t for t in SPECIAL_TOKENS if t not in tokenizer.vocab]
  if missing:
    raise ValueError(
        "--%s: %s lacks %s; expected a BERT WordPiece vocabulary with %s" %
        (flag_name, vocab_file, ", ".join(missing),
         ", ".join(SPECIAL_TOKENS)))


def _check_checkpoint(checkpoint, bert_config):
  """A whole checkpoint whose `bert/` shapes fit the config (see
  `checkpoint_checks.check_checkpoint`); logs the variables it lacks."""
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
                  need_output_dir=True, need_checkpoint=False, *, problems,
                  export_now=False, run=None):
  """The start-up checks every script runs, in one fixed order.

  1. the config (`--bert_config_file`; with a run that trains, its memory
  counts the optimizer's slots: `check_training_memory`); 2. the
  sequence length against the
  model's position embeddings; 3. the checkpoint (`checkpoints.resolve`;
  then that it is whole and its `bert/` shapes fit the config);
  4. the casing against a released checkpoint's name (the reference's
  `validate_case_matches_checkpoint`); 5. the vocabulary's special tokens
  and its size against the model's; 6. the output folder. Every problem
  found is added to `problems`, after the script's own, for the script to
  report together (`Problems.raise_if_any`); nothing is raised here.

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
    problems: `checks.problems.Problems`, added to.
    export_now: bool, whether the run exports the checkpoint it finds now
      (`--export_dir` without `--do_train`): that checkpoint must have a
      task head (`saved_model.check_task_head`).
    run: optional `RunOptions` of the run; when it trains, the memory
      check counts what training holds beside the weights.

  Returns:
    `Model(bert_config, init_checkpoint, tokenizer)`: the `BertConfig`, the
    resolved checkpoint prefix (or None) and a `FullTokenizer` (or None);
    a part whose check failed is None.
  """
  attempt = problems.attempt

  bert_config = attempt(load_bert_config, bert_config_file)
  if bert_config is not None and run is not None and run.do_train:
    attempt(check_training_memory, bert_config, run.training,
            bert_config_file)
  if bert_config is not None and max_seq_length is not None:
    attempt(check_max_seq_length, max_seq_length, bert_config)
  checkpoint = None
  if init_checkpoint:
    checkpoint = attempt(checkpoints.resolve, init_checkpoint)
    if checkpoint is not None:
      attempt(_check_checkpoint, checkpoint, bert_config)
  elif need_checkpoint:
    problems.add("--init_checkpoint is required")
  if init_checkpoint and do_lower_case is not None:
    attempt(tokenization.validate_case_matches_checkpoint,
            do_lower_case, checkpoint or init_checkpoint)
  tokenizer = None
  if vocab_file is not None:
    tokenizer = attempt(load_tokenizer, vocab_file, do_lower_case)
    if tokenizer is not None:
      attempt(check_special_tokens, tokenizer, vocab_file)
    if tokenizer is not None and bert_config is not None:
      attempt(check_vocab_size, tokenizer, bert_config)
  if export_now:
    exported = attempt(checkpoints.checkpoint_to_export,
                       output_dir, checkpoint or init_checkpoint)
    if exported is not None:
      attempt(saved_model.check_task_head, exported)
  if not output_dir and need_output_dir:
    problems.add("--output_dir is required: where checkpoints and results "
                 "go")
  elif output_dir and os.path.isfile(output_dir):
    problems.add("--output_dir: %s is a file; expected a folder" %
                 output_dir)
  return Model(bert_config, checkpoint, tokenizer)


def load_tokenizer(vocab_file, do_lower_case):
  """A `FullTokenizer` for `--vocab_file`.

  Raises:
    ValueError: naming the flag, when the path is empty, a directory or
      missing (the one wording every script uses).
  """
  if not vocab_file:
    raise ValueError("--vocab_file is required: the model's vocab.txt (or "
                     "--init_checkpoint naming a Hugging Face folder)")
  if os.path.isdir(vocab_file):
    raise ValueError("--vocab_file: %s is a directory; expected the model's "
                     "vocab.txt" % vocab_file)
  if "://" not in vocab_file and not os.path.exists(vocab_file):
    raise ValueError("--vocab_file: %s does not exist (expected the model's "
                     "vocab.txt)" % vocab_file)
  return tokenization.FullTokenizer(vocab_file=vocab_file,
                                    do_lower_case=do_lower_case)


Start = collections.namedtuple("Start", ["run", "model"])


def start(flag_values, script_problems=(), *, prepare=None,
          setup_devices=True, **prepare_args):
  """A script's start-up: every check, one error line, then the devices.

  Logs at INFO; collects `script_problems`, the run options'
  (`options.from_flags`) and the model's (`prepare`, default
  `prepare_model` over the flags `bert_config_file`, `max_seq_length`,
  `init_checkpoint`, `do_lower_case`, `vocab_file` and `output_dir`, with
  `prepare_args`), in that order; raises them together; then prepares the
  devices (`loop.setup_devices`).

  Args:
    flag_values: the parsed flags.
    script_problems: list of str, the script's own flag problems.
    prepare: (optional) function(problems, run) -> the model, in place of
      `prepare_model` (a script with other inputs to check); `run` (the
      `RunOptions`, or None where its flags were refused) sizes the memory
      check of a training run.
    setup_devices: bool, False for a script that makes its devices itself.
    **prepare_args: more keyword arguments of `prepare_model`.

  Returns:
    `Start(run, model)`: the checked `options.RunOptions` and what
    `prepare` returned (by default a `Model`).

  Raises:
    ValueError: one line naming every problem found.
  """
  logging.set_verbosity(logging.INFO)
  problems = Problems(script_problems)
  run = training_options.from_flags(flag_values, problems)
  if prepare is None:
    f = flag_values
    model = prepare_model(f.bert_config_file, f.max_seq_length,
                          f.init_checkpoint, f.do_lower_case, f.vocab_file,
                          getattr(f, "output_dir", None),
                          problems=problems, run=run, **prepare_args)
  else:
    model = prepare(problems, run)
  problems.raise_if_any()
  if setup_devices:
    loop.setup_devices(run)
  return Start(run, model)
