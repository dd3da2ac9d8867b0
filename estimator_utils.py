"""Plumbing shared by every script: flags, estimator set-up, records, outputs.

The reference release repeats these pieces in each `run_*.py`; here they live
once, and the scripts keep only their task-specific `model_fn_builder`,
`input_fn_builder` and `create_model`:

* command line: `define_tpu_flags`, `run_main` (one-line errors for bad input),
  `expand_file_patterns`, `check_max_seq_length`;
* estimator: `make_run_config`, `make_estimator`, `init_from_checkpoint`,
  `ProgressHook` (examples/sec and ETA in the log);
* records: `int64_feature`, `float_feature`, `decode_record`,
  `tfrecord_input_fn_builder`;
* outputs: `atomic_write`, `write_eval_results`.
"""

import contextlib
import glob
import os
import sys
import time
import uuid

from absl import app
from absl import flags
from absl import logging
import tensorflow.compat.v1 as tf

import modeling
import optimization


# ----------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------


def _define_once(define_fn, name, default, help_text, **kwargs):
  if name not in flags.FLAGS:
    define_fn(name, default, help_text, **kwargs)


def define_tpu_flags():
  """Defines the TPU flags every script of the reference release takes.

  `use_tpu` (False), `tpu_name`, `tpu_zone`, `gcp_project`, `master` (None) and
  `num_tpu_cores` (8). Flags already defined are left alone, so a process can
  set up several scripts' flags.
  """
  _define_once(flags.DEFINE_bool, "use_tpu", False,
               "Whether to use a TPU (False runs on CPU or GPU).")
  _define_once(flags.DEFINE_string, "tpu_name", None,
               "The Cloud TPU to use: its name, or a grpc://ip:port address.")
  _define_once(flags.DEFINE_string, "tpu_zone", None,
               "GCE zone of the Cloud TPU; detected when not given.")
  _define_once(flags.DEFINE_string, "gcp_project", None,
               "GCP project of the Cloud TPU; detected when not given.")
  _define_once(flags.DEFINE_string, "master", None,
               "TensorFlow master URL.")
  _define_once(flags.DEFINE_integer, "num_tpu_cores", 8,
               "Number of TPU cores to use (only with use_tpu).")


def define_model_flags():
  """Defines the flags naming a pre-trained model and where outputs go.

  `bert_config_file`, `vocab_file`, `init_checkpoint`, `do_lower_case`
  (True) and `output_dir`, as the reference's fine-tuning scripts define them.
  """
  _define_once(flags.DEFINE_string, "bert_config_file", None,
               "The config JSON of the pre-trained BERT model.")
  _define_once(flags.DEFINE_string, "vocab_file", None,
               "The WordPiece vocabulary the model was trained with.")
  _define_once(flags.DEFINE_string, "init_checkpoint", None,
               "Checkpoint to start from (usually a pre-trained BERT): a "
               "prefix such as .../bert_model.ckpt, or a directory.")
  _define_once(flags.DEFINE_bool, "do_lower_case", True,
               "Lower-case the input: True for uncased models, False for "
               "cased ones.")
  _define_once(flags.DEFINE_string, "output_dir", None,
               "Where checkpoints, features and results are written.")


def define_fine_tuning_flags():
  """Defines the training/prediction flags shared by the fine-tuning scripts.

  `do_train`, `do_predict` (False), `train_batch_size` (32),
  `predict_batch_size` (8), `learning_rate` (5e-5), `num_train_epochs` (3.0),
  `warmup_proportion` (0.1), `save_checkpoints_steps` (1000),
  `iterations_per_loop` (1000), and the TPU flags: the reference's defaults.
  """
  _define_once(flags.DEFINE_bool, "do_train", False, "Whether to fine-tune.")
  _define_once(flags.DEFINE_bool, "do_predict", False,
               "Whether to predict the test / predict file.")
  _define_once(flags.DEFINE_integer, "train_batch_size", 32,
               "Batch size for training.")
  _define_once(flags.DEFINE_integer, "predict_batch_size", 8,
               "Batch size for prediction.")
  _define_once(flags.DEFINE_float, "learning_rate", 5e-5,
               "Peak learning rate for Adam.")
  _define_once(flags.DEFINE_float, "num_train_epochs", 3.0,
               "Training epochs over the training examples.")
  _define_once(flags.DEFINE_float, "warmup_proportion", 0.1,
               "Fraction of the training steps with linear learning-rate "
               "warmup (0.1 = 10%).")
  _define_once(flags.DEFINE_integer, "save_checkpoints_steps", 1000,
               "Steps between checkpoints.")
  _define_once(flags.DEFINE_integer, "iterations_per_loop", 1000,
               "Steps per TPU loop (not used off TPU).")
  define_tpu_flags()


def fine_tuning_steps(num_examples, train_batch_size, num_train_epochs,
                      warmup_proportion):
  """Training and warmup steps for a number of epochs, as the reference.

  Args:
    num_examples: int, training examples (one epoch).
    train_batch_size: int, examples per step.
    num_train_epochs: float, epochs.
    warmup_proportion: float, fraction of the steps spent warming up.

  Returns:
    (num_train_steps, num_warmup_steps); at least one training step, where
    the reference failed on a training set smaller than a batch.
  """
  num_train_steps = int(num_examples / train_batch_size * num_train_epochs)
  if num_train_steps < 1:
    logging.warning("%d examples / batch size %d * %s epochs is under one "
                    "step; training 1 step", num_examples, train_batch_size,
                    num_train_epochs)
    num_train_steps = 1
  return num_train_steps, int(num_train_steps * warmup_proportion)


_USER_ERRORS = (ValueError, OSError, tf.errors.NotFoundError,
                tf.errors.InvalidArgumentError,
                tf.errors.FailedPreconditionError,
                tf.errors.PermissionDeniedError,
                tf.errors.AlreadyExistsError)


def _one_line(error):
  """The essential message of `error` on one line.

  TensorFlow's graph-execution errors carry the Python stack of the failing
  op; keep only the lines that say what went wrong.
  """
  message = str(getattr(error, "message", None) or error)
  if isinstance(error, tf.errors.OpError):
    kept = [line.strip() for line in message.splitlines()
            if line.strip() and not line[:1].isspace()
            and not line.startswith(("Graph execution error",
                                     "Detected at node", "File "))]
    message = " ".join(kept) or message
  return " ".join(message.split())


def run_main(main):
  """Runs `main` through `absl.app.run`, reporting bad input in one line.

  A `ValueError`, `OSError` or TensorFlow `NotFoundError` /
  `InvalidArgumentError` escaping `main` is printed as `error: <message>` on
  stderr and the process exits with status 1. Set `BERT_DEBUG=1` to get the
  full traceback instead.
  """

  def _guarded(argv):
    try:
      return main(argv)
    except _USER_ERRORS as e:  # pylint: disable=catching-non-exception
      if os.environ.get("BERT_DEBUG"):
        raise
      sys.stderr.write("error: %s\n" % _one_line(e))
      sys.stderr.flush()
      sys.exit(1)

  app.run(_guarded)


def expand_file_patterns(patterns, flag_name="input_file"):
  """Expands comma-separated file names and globs, keeping their order.

  Args:
    patterns: str, e.g. "a.txt,shards/*.txt".
    flag_name: str, the flag the patterns came from (for the error message).

  Returns:
    list of str paths: each pattern's matches, sorted within the pattern.

  Raises:
    ValueError: when `patterns` is empty or one pattern matches no file.
  """
  pieces = [p.strip() for p in (patterns or "").split(",") if p.strip()]
  if not pieces:
    raise ValueError("--%s: expected one or more comma-separated files or "
                     "globs, got %r" % (flag_name, patterns))
  paths = []
  for pattern in pieces:
    matches = sorted(tf.io.gfile.glob(pattern))
    if not matches:
      raise ValueError("--%s: %r matched no files" % (flag_name, pattern))
    for match in matches:
      if tf.io.gfile.isdir(match):
        raise ValueError("--%s: %s is a directory; expected files (use a "
                         "glob such as %s/*)" % (flag_name, match, match))
    paths.extend(matches)
  return paths


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


def check_output_file(path, flag_name="output_file"):
  """Refuses an output path that cannot become a file, before any work.

  Raises:
    ValueError: when `path` is empty or an existing directory.
  """
  if not path:
    raise ValueError("--%s is required" % flag_name)
  if tf.io.gfile.isdir(path):
    raise ValueError("--%s: %s is a directory; expected a file name" %
                     (flag_name, path))


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


def load_bert_config(path, flag_name="bert_config_file"):
  """Reads a `BertConfig` from JSON, with a one-line error for a bad path.

  Raises:
    ValueError: when `path` is empty, missing, or not a JSON object.
  """
  if not path:
    raise ValueError("--%s is required: the JSON config of the BERT model"
                     % flag_name)
  if not tf.io.gfile.exists(path):
    raise ValueError("--%s: %s does not exist (expected the model's "
                     "bert_config.json)" % (flag_name, path))
  try:
    return modeling.BertConfig.from_json_file(path)
  except ValueError as e:
    raise ValueError("--%s: %s is not a valid BERT config JSON (%s)" %
                     (flag_name, path, e)) from e


# ----------------------------------------------------------------------------
# Estimator
# ----------------------------------------------------------------------------


def make_run_config(output_dir, save_checkpoints_steps, iterations_per_loop,
                    use_tpu=False, tpu_name=None, tpu_zone=None,
                    gcp_project=None, master=None, num_tpu_cores=8,
                    keep_checkpoint_max=5):
  """Builds the `tf.estimator.tpu.RunConfig` every script uses.

  With `use_tpu` and `tpu_name`, the TPU is resolved through
  `TPUClusterResolver` (this replaces the reference's `tf.contrib` resolver).
  Without a TPU the same config runs the TPUEstimator on CPU or GPU.

  Args:
    output_dir: str, where checkpoints and summaries go.
    save_checkpoints_steps: int, steps between checkpoints.
    iterations_per_loop: int, steps per TPU loop (not used off TPU).
    use_tpu, tpu_name, tpu_zone, gcp_project, master, num_tpu_cores: the TPU
      flags.
    keep_checkpoint_max: int, how many recent checkpoints to keep.

  Returns:
    A `tf.estimator.tpu.RunConfig`.
  """
  cluster = None
  if use_tpu and tpu_name:
    cluster = tf.distribute.cluster_resolver.TPUClusterResolver(
        tpu_name, zone=tpu_zone, project=gcp_project)
  # Off TPU, iterations_per_loop only scales TPUEstimator's step-counting
  # hook, which then logs examples/sec on every step; 1 makes it log every
  # `log_step_count_steps` (100) steps instead.
  tpu_config = tf.estimator.tpu.TPUConfig(
      iterations_per_loop=iterations_per_loop if use_tpu else 1,
      num_shards=num_tpu_cores,
      per_host_input_for_training=(
          tf.estimator.tpu.InputPipelineConfig.PER_HOST_V2))
  return tf.estimator.tpu.RunConfig(
      cluster=cluster,
      master=master,
      model_dir=output_dir,
      save_checkpoints_steps=save_checkpoints_steps,
      keep_checkpoint_max=keep_checkpoint_max,
      tpu_config=tpu_config)


def run_config_from_flags(flag_values, output_dir):
  """`make_run_config` from a script's parsed flags (call it in `main`).

  Args:
    flag_values: the parsed `absl.flags.FLAGS`, holding the TPU flags and,
      where the script has them, `save_checkpoints_steps` and
      `iterations_per_loop`.
    output_dir: str or None (a temporary directory), the model directory.
  """
  return make_run_config(
      output_dir,
      save_checkpoints_steps=getattr(flag_values, "save_checkpoints_steps",
                                     None),
      iterations_per_loop=getattr(flag_values, "iterations_per_loop", 1),
      use_tpu=flag_values.use_tpu, tpu_name=flag_values.tpu_name,
      tpu_zone=flag_values.tpu_zone, gcp_project=flag_values.gcp_project,
      master=flag_values.master, num_tpu_cores=flag_values.num_tpu_cores)


def make_estimator(model_fn, run_config, use_tpu, train_batch_size=None,
                   eval_batch_size=None, predict_batch_size=None):
  """Wraps `model_fn` in a `TPUEstimator` (CPU/GPU when `use_tpu` is False)."""
  return tf.estimator.tpu.TPUEstimator(
      use_tpu=use_tpu,
      model_fn=model_fn,
      config=run_config,
      train_batch_size=train_batch_size,
      eval_batch_size=eval_batch_size,
      predict_batch_size=predict_batch_size)


def init_from_checkpoint(init_checkpoint, use_tpu):
  """Initializes the graph's trainable variables from `init_checkpoint`.

  Call inside a `model_fn`, after the model is built. Variables whose names
  (and shapes) appear in the checkpoint are mapped through
  `modeling.get_assignment_map_from_checkpoint`; every trainable variable is
  logged with its shape, the initialized ones marked `*INIT_FROM_CKPT*`, as
  the reference does.

  Args:
    init_checkpoint: str or None, a checkpoint prefix (`.../bert_model.ckpt`).
    use_tpu: bool; on TPU the initialization runs inside a `Scaffold`.

  Returns:
    A `scaffold_fn` for `TPUEstimatorSpec` on TPU, else None.
  """
  tvars = tf.trainable_variables()
  initialized = {}
  scaffold_fn = None
  if init_checkpoint:
    assignment_map, initialized = modeling.get_assignment_map_from_checkpoint(
        tvars, init_checkpoint)
    if not assignment_map:
      raise ValueError(
          "--init_checkpoint: none of the model's %d variables is in %s; "
          "expected a BERT checkpoint (variables named bert/...)" %
          (len(tvars), init_checkpoint))
    if use_tpu:

      def tpu_scaffold():
        tf.train.init_from_checkpoint(init_checkpoint, assignment_map)
        return tf.train.Scaffold()

      scaffold_fn = tpu_scaffold
    else:
      tf.train.init_from_checkpoint(init_checkpoint, assignment_map)
  logging.info("**** Trainable Variables ****")
  for var in tvars:
    note = ", *INIT_FROM_CKPT*" if var.name in initialized else ""
    logging.info("  name = %s, shape = %s%s", var.name, var.shape, note)
  if init_checkpoint:
    logging.info("%d of %d trainable variables initialized from %s",
                 sum(1 for v in tvars if v.name in initialized), len(tvars),
                 init_checkpoint)
  return scaffold_fn


def train_spec(total_loss, learning_rate, num_train_steps, num_warmup_steps,
               use_tpu, scaffold_fn=None, options=None):
  """The `TPUEstimatorSpec` of a training step, as every script builds it.

  Args:
    total_loss: float32 scalar Tensor to minimize.
    learning_rate: float, peak learning rate.
    num_train_steps: int, steps (updates) of the learning-rate decay.
    num_warmup_steps: int, steps (updates) of linear warmup.
    use_tpu: bool; on TPU gradients are averaged across shards.
    scaffold_fn: from `init_from_checkpoint`, or None.
    options: (optional) `optimization.OptimizerOptions` (optimizer,
      accumulation, fp16 loss scaling); default the reference's training.

  Returns:
    A `tf.estimator.tpu.TPUEstimatorSpec` in TRAIN mode whose train op
    applies `optimization.create_optimizer` (and increments the global step).
    With fp16 loss scaling off TPU, a hook logs the loss scale and the
    skipped updates every 100 steps.
  """
  train_op = optimization.create_optimizer(
      total_loss, learning_rate, num_train_steps, num_warmup_steps, use_tpu,
      options=options)
  hooks = []
  if options is not None and options.uses_loss_scaling and not use_tpu:
    hooks.append(tf.estimator.LoggingTensorHook(
        {"loss_scale": tf.get_collection(optimization.LOSS_SCALE_COLLECTION)[0],
         "skipped_updates": tf.get_collection(
             optimization.SKIPPED_UPDATES_COLLECTION)[0]},
        every_n_iter=100))
  return tf.estimator.tpu.TPUEstimatorSpec(
      mode=tf.estimator.ModeKeys.TRAIN, loss=total_loss, train_op=train_op,
      scaffold_fn=scaffold_fn, training_hooks=hooks or None)


class ProgressHook(tf.estimator.SessionRunHook):
  """Logs the global step, examples/sec and the estimated time left.

  Args:
    batch_size: int, examples per step.
    total_steps: int or None, the step at which the run ends (for the ETA).
    every_n_steps: int, how often to log.
  """

  def __init__(self, batch_size, total_steps=None, every_n_steps=100):
    self._batch_size = batch_size
    self._total_steps = total_steps
    self._every_n_steps = max(1, int(every_n_steps))
    self._global_step = None
    self._last_time = None
    self._last_step = None
    self._calls = 0

  def begin(self):
    self._global_step = tf.train.get_global_step()

  def before_run(self, run_context):
    del run_context
    if self._global_step is None:
      return None
    return tf.train.SessionRunArgs(self._global_step)

  def after_run(self, run_context, run_values):
    del run_context
    self._calls += 1
    now = time.time()
    step = run_values.results if self._global_step is not None else self._calls
    if self._last_time is None:
      self._last_time, self._last_step = now, step
      return
    if step - self._last_step < self._every_n_steps:
      return
    elapsed = max(now - self._last_time, 1e-9)
    steps_per_sec = (step - self._last_step) / elapsed
    message = "step %d: %.2f examples/sec" % (
        step, steps_per_sec * self._batch_size)
    if self._total_steps and steps_per_sec > 0:
      left = max(self._total_steps - step, 0) / steps_per_sec
      message += ", ETA %s" % _format_seconds(left)
    logging.info(message)
    self._last_time, self._last_step = now, step


def _format_seconds(seconds):
  seconds = int(round(seconds))
  hours, rest = divmod(seconds, 3600)
  minutes, secs = divmod(rest, 60)
  return "%d:%02d:%02d" % (hours, minutes, secs)


# ----------------------------------------------------------------------------
# Records
# ----------------------------------------------------------------------------


def int64_feature(values):
  """A `tf.train.Feature` holding `values` as an int64 list."""
  return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))


def float_feature(values):
  """A `tf.train.Feature` holding `values` as a float list."""
  return tf.train.Feature(float_list=tf.train.FloatList(value=list(values)))


def decode_record(record, name_to_features):
  """Parses one serialized `tf.train.Example`, casting int64 to int32.

  TPUs support only int32 integers, so every int64 feature is cast; float
  features are left as they are.

  Args:
    record: scalar string Tensor, one serialized Example.
    name_to_features: dict name -> `tf.io.FixedLenFeature`.

  Returns:
    dict name -> Tensor.
  """
  example = tf.parse_single_example(record, name_to_features)
  for name in list(example.keys()):
    if example[name].dtype == tf.int64:
      example[name] = tf.cast(example[name], tf.int32)
  return example


def tfrecord_input_fn_builder(input_files, name_to_features, is_training,
                              drop_remainder, num_cpu_threads=4,
                              shuffle_buffer=100):
  """Builds an `input_fn(params)` over TFRecord files of Examples.

  Training reads the files in parallel in shuffled order, repeats forever and
  shuffles records with a buffer of `shuffle_buffer`. Evaluation and
  prediction read the files in the given order, once.

  Args:
    input_files: list of str paths.
    name_to_features: dict name -> `tf.io.FixedLenFeature`.
    is_training: bool.
    drop_remainder: bool; True gives fixed batch shapes (needed on TPU).
    num_cpu_threads: int, parallel readers and parsers when training.
    shuffle_buffer: int, records in the shuffle buffer when training.

  Returns:
    A function `input_fn(params)` -> `tf.data.Dataset` of batched feature
    dicts; the batch size is `params["batch_size"]`.
  """
  input_files = list(input_files)

  def input_fn(params):
    batch_size = params["batch_size"]
    if is_training:
      files = tf.data.Dataset.from_tensor_slices(tf.constant(input_files))
      files = files.repeat().shuffle(buffer_size=len(input_files))
      cycle_length = min(num_cpu_threads, len(input_files))
      d = files.interleave(
          tf.data.TFRecordDataset,
          cycle_length=cycle_length,
          num_parallel_calls=cycle_length,
          deterministic=False)
      d = d.shuffle(buffer_size=shuffle_buffer)
    else:
      d = tf.data.TFRecordDataset(input_files)
    d = d.map(lambda record: decode_record(record, name_to_features),
              num_parallel_calls=num_cpu_threads if is_training else None)
    d = d.batch(batch_size, drop_remainder=drop_remainder)
    return d.prefetch(1)

  return input_fn


# ----------------------------------------------------------------------------
# Outputs
# ----------------------------------------------------------------------------


def _temp_name(path):
  """A fresh temporary name beside `path`; removes ones a killed run left."""
  directory, base = os.path.split(path)
  prefix = ".%s.tmp-" % base
  if "://" not in path:
    for stale in glob.glob(os.path.join(directory, glob.escape(prefix) + "*")):
      logging.info("Removing %s, left by an earlier run that did not finish",
                   stale)
      os.remove(stale)
  return os.path.join(directory, prefix + uuid.uuid4().hex[:8])


@contextlib.contextmanager
def atomic_write(path, mode="w"):
  """Writes `path` through a temporary file renamed into place on success.

  A run killed or failing half-way leaves no partial file under `path` (the
  temporary file is removed on error).

  Args:
    path: str, the final file name (local or any `tf.io.gfile` file system).
    mode: "w" for text, "wb" for bytes.

  Yields:
    A writable file object.
  """
  if tf.io.gfile.isdir(path):
    raise ValueError("%s is a directory; expected a file name" % path)
  temp = _temp_name(path)
  directory = os.path.dirname(path)
  if directory:
    tf.io.gfile.makedirs(directory)
  try:
    with tf.io.gfile.GFile(temp, mode) as f:
      # GFile creates the file on the first write; an empty output must
      # still exist afterwards.
      f.write(b"" if "b" in mode else "")
      yield f
    tf.io.gfile.rename(temp, path, overwrite=True)
  except BaseException:
    if tf.io.gfile.exists(temp):
      tf.io.gfile.remove(temp)
    raise


def temp_path_for(path):
  """A temporary name beside `path`, for writers that need a file name.

  Use with `commit_temp(temp, path)` once the file is complete.
  """
  directory = os.path.dirname(path)
  if directory:
    tf.io.gfile.makedirs(directory)
  return _temp_name(path)


def commit_temp(temp, path):
  """Renames a completed temporary file over `path`."""
  tf.io.gfile.rename(temp, path, overwrite=True)


def write_eval_results(path, results):
  """Writes evaluation results as sorted `key = value` lines, atomically.

  Args:
    path: str, e.g. `output_dir/eval_results.txt`.
    results: dict of str -> number, as returned by `estimator.evaluate`.
  """
  logging.info("***** Eval results *****")
  with atomic_write(path) as f:
    for key in sorted(results.keys()):
      logging.info("  %s = %s", key, str(results[key]))
      f.write("%s = %s\n" % (key, str(results[key])))


def resolve_checkpoint(path, flag_name="init_checkpoint"):
  """Checks that a checkpoint exists and returns its prefix.

  Args:
    path: str, a checkpoint prefix (`.../bert_model.ckpt`, whose `.index`
      file must exist) or a directory holding checkpoints (the latest is
      used).
    flag_name: str, the flag the path came from (for the error message).

  Returns:
    str, the checkpoint prefix.

  Raises:
    ValueError: when no checkpoint is found at `path`.
  """
  if path and tf.io.gfile.isdir(path):
    latest = tf.train.latest_checkpoint(path)
    if latest:
      return latest
  elif path and tf.io.gfile.exists(path + ".index"):
    return path
  raise ValueError("--%s: no TensorFlow checkpoint at %r (expected a prefix "
                   "such as .../bert_model.ckpt with a .index file beside it, "
                   "or a directory of checkpoints)" % (flag_name, path))
