"""Faults a long run meets, handled in one place.

Public names:

* bad files: `check_bert_config_json` (a config's keys, types and sizes),
  `expected_bert_shapes` and `check_checkpoint` (a checkpoint that is
  truncated or does not fit the config), `register_record_files` and
  `explain_data_loss` (which TFRecord file a `DataLossError` came from),
  `disk_full_message` (a write that hit a full disk or a file-size limit);
* two runs, one folder: `lock_output_dir` (with `check_resume_checkpoint`
  in `start_training`);
* preemption and losing little: `training_hooks` (SIGTERM saves a
  checkpoint at the current step, checkpoints by time as well as by steps,
  summaries at the final step and at a bounded interval),
  `exit_if_preempted`.
"""

import errno
import json
import os
import re
import signal
import struct
import time

from absl import logging
import tensorflow.compat.v1 as tf

# Exit status of a run stopped by SIGTERM after saving its checkpoint: the
# shell's 128 + 15, so a wrapper sees that the run did not finish.
PREEMPTED_EXIT_STATUS = 143


def _tf():
  return tf


# ----------------------------------------------------------------------------
# bert_config.json
# ----------------------------------------------------------------------------

# Keys that fix the shapes of the checkpoint's variables: no default can be
# right for them.
_REQUIRED_INT_KEYS = ("vocab_size", "hidden_size", "num_hidden_layers",
                      "num_attention_heads", "intermediate_size")
_OPTIONAL_INT_KEYS = ("max_position_embeddings", "type_vocab_size")
_PROBABILITY_KEYS = ("hidden_dropout_prob", "attention_probs_dropout_prob")


def check_bert_config_json(json_object, path, flag_name="bert_config_file"):
  """Refuses a config whose values cannot describe a BERT model.

  `modeling.BertConfig.from_dict` accepts any keys (as the reference does,
  for library users); scripts check the file here first.

  Args:
    json_object: the parsed JSON.
    path: str, the file (for the message).
    flag_name: str, the flag it came from.

  Raises:
    ValueError: one line naming the flag, the file and every bad key: a
      missing size key (vocab_size, hidden_size, num_hidden_layers,
      num_attention_heads, intermediate_size), a size that is not a positive
      integer, a dropout probability outside [0, 1), an initializer_range
      that is not a positive number, a hidden_act that is not a string, or a
      hidden_size that num_attention_heads does not divide.
  """
  where = "--%s: %s" % (flag_name, path)
  if not isinstance(json_object, dict):
    raise ValueError("%s must hold a JSON object, got %s" %
                     (where, type(json_object).__name__))
  problems = []
  for key in _REQUIRED_INT_KEYS + _OPTIONAL_INT_KEYS:
    if key not in json_object:
      if key in _REQUIRED_INT_KEYS:
        problems.append("%r is missing" % key)
      continue
    value = json_object[key]
    if isinstance(value, bool) or not isinstance(value, int):
      problems.append("%r is %r; expected a positive integer" % (key, value))
    elif value < 1:
      problems.append("%r is %d; expected a positive integer" % (key, value))
  for key in _PROBABILITY_KEYS:
    value = json_object.get(key, 0.0)
    if (isinstance(value, bool) or not isinstance(value, (int, float))
        or not 0.0 <= value < 1.0):
      problems.append("%r is %r; expected a probability in [0, 1)" %
                      (key, value))
  value = json_object.get("initializer_range", 0.02)
  if (isinstance(value, bool) or not isinstance(value, (int, float))
      or not value > 0):
    problems.append("'initializer_range' is %r; expected a positive number" %
                    (value,))
  value = json_object.get("hidden_act", "gelu")
  if value is not None and not isinstance(value, str):
    problems.append("'hidden_act' is %r; expected a name such as \"gelu\"" %
                    (value,))
  hidden, heads = (json_object.get("hidden_size"),
                   json_object.get("num_attention_heads"))
  if (not problems and hidden % heads):
    problems.append("hidden_size=%d is not a multiple of "
                    "num_attention_heads=%d" % (hidden, heads))
  if problems:
    raise ValueError("%s: %s" % (where, "; ".join(problems)))


def read_json(path):
  """The parsed JSON of a small file (local or `tf.io.gfile`)."""
  with _tf().io.gfile.GFile(path, "rb") as f:
    return json.loads(f.read().decode("utf-8"))


# ----------------------------------------------------------------------------
# Checkpoints
# ----------------------------------------------------------------------------


def expected_bert_shapes(bert_config):
  """The shapes of the encoder's variables, from the config alone.

  The variable names are the reference release's (`bert/embeddings/...`,
  `bert/encoder/layer_<i>/...`, `bert/pooler/dense/...`).

  Args:
    bert_config: `modeling.BertConfig`.

  Returns:
    dict name -> list of int.
  """
  h, i = bert_config.hidden_size, bert_config.intermediate_size
  shapes = {
      "bert/embeddings/word_embeddings": [bert_config.vocab_size, h],
      "bert/embeddings/token_type_embeddings":
          [bert_config.type_vocab_size, h],
      "bert/embeddings/position_embeddings":
          [bert_config.max_position_embeddings, h],
      "bert/embeddings/LayerNorm/beta": [h],
      "bert/embeddings/LayerNorm/gamma": [h],
      "bert/pooler/dense/kernel": [h, h],
      "bert/pooler/dense/bias": [h],
  }
  for layer in range(bert_config.num_hidden_layers):
    prefix = "bert/encoder/layer_%d/" % layer
    for name in ("query", "key", "value"):
      shapes[prefix + "attention/self/%s/kernel" % name] = [h, h]
      shapes[prefix + "attention/self/%s/bias" % name] = [h]
    dense = {"attention/output/dense": (h, h), "intermediate/dense": (h, i),
             "output/dense": (i, h)}
    for name, (rows, cols) in dense.items():
      shapes[prefix + name + "/kernel"] = [rows, cols]
      shapes[prefix + name + "/bias"] = [cols]
    for name in ("attention/output/LayerNorm", "output/LayerNorm"):
      shapes[prefix + name + "/beta"] = [h]
      shapes[prefix + name + "/gamma"] = [h]
  return shapes


def _checkpoint_reader(prefix, flag_name):
  tf = _tf()
  try:
    return tf.train.load_checkpoint(prefix)
  except (tf.errors.OpError, ValueError) as e:
    raise ValueError(
        "--%s: %s.index is not a readable checkpoint index (%s): the file is "
        "truncated or damaged; copy it again" %
        (flag_name, prefix, " ".join(str(e).split()))) from None


def check_checkpoint(prefix, flag_name="init_checkpoint", bert_config=None,
                     config_flag="bert_config_file"):
  """Refuses a checkpoint that cannot be read whole, or does not fit.

  Cheap: reads the index, not the weights. The `.data` files must be at
  least as large as the tensors the index lists (a truncated copy is not);
  with `bert_config`, every `bert/` variable the model has must have the
  shape the config gives it.

  Args:
    prefix: str, a checkpoint prefix (`.../bert_model.ckpt`).
    flag_name: str, the flag the checkpoint came from.
    bert_config: `modeling.BertConfig` or None (shapes not checked).
    config_flag: str, the flag the config came from.

  Returns:
    list of str, the model variables the checkpoint lacks (they start from
    random values, as in the reference); empty when it has them all.

  Raises:
    ValueError: one line naming the file (the variable, both shapes and the
      flags for a shape mismatch).
  """
  tf = _tf()
  reader = _checkpoint_reader(prefix, flag_name)
  shapes = reader.get_variable_to_shape_map()
  dtypes = reader.get_variable_to_dtype_map()
  data_files = tf.io.gfile.glob(prefix + ".data-*-of-*")
  if not data_files and shapes:
    raise ValueError("--%s: %s has an index but no .data-* file beside it" %
                     (flag_name, prefix))
  if all(dtypes[name] != tf.string for name in shapes):
    needed = 0
    for name, shape in shapes.items():
      count = 1
      for dim in shape:
        count *= dim
      needed += count * dtypes[name].size
    have = sum(tf.io.gfile.stat(path).length for path in data_files)
    if have < needed:
      raise ValueError(
          "--%s: %s is truncated: its .data files hold %d bytes but the "
          "index lists %d bytes of tensors; copy it again" %
          (flag_name, ", ".join(sorted(data_files)), have, needed))
  missing = []
  if bert_config is not None:
    for name, shape in sorted(expected_bert_shapes(bert_config).items()):
      if name not in shapes:
        missing.append(name)
      elif list(shapes[name]) != list(shape):
        raise ValueError(
            "--%s: variable %s has shape %s in %s, but --%s gives it %s; use "
            "the bert_config.json that came with the checkpoint" %
            (flag_name, name, list(shapes[name]), prefix, config_flag,
             list(shape)))
  return missing


def start_training(output_dir):
  """Before training into `output_dir`: `lock_output_dir`, then
  `check_resume_checkpoint`.

  The workers of one multi-worker run share `output_dir`; only the chief
  (`distribute_utils.is_chief`), which alone writes there, takes the lock.

  Raises:
    ValueError: another live run trains there, or its latest checkpoint is
      truncated.
  """
  from bert_tf.train import distribute as distribute_utils  # pylint: disable=g-import-not-at-top
  if distribute_utils.is_chief():
    lock_output_dir(output_dir)
  check_resume_checkpoint(output_dir)


def check_resume_checkpoint(output_dir):
  """Refuses to resume from a latest checkpoint that is truncated.

  Raises:
    ValueError: naming the checkpoint files, when `output_dir`'s latest
      checkpoint cannot be read whole.
  """
  latest = _tf().train.latest_checkpoint(output_dir)
  if latest:
    try:
      check_checkpoint(latest, flag_name="output_dir")
    except ValueError as e:
      raise ValueError("%s (training would resume from it; remove its "
                       "files to resume from the one before)" % e) from None


# ----------------------------------------------------------------------------
# TFRecord data loss
# ----------------------------------------------------------------------------

_RECORD_FILES = []


def register_record_files(paths):
  """Remembers TFRecord inputs, for `explain_data_loss`."""
  for path in paths:
    if path not in _RECORD_FILES:
      _RECORD_FILES.append(path)


def _crc32c_table():
  table = []
  for n in range(256):
    crc = n
    for _ in range(8):
      crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    table.append(crc)
  return table


_CRC_TABLE = []


def _masked_crc32c(data):
  if not _CRC_TABLE:
    _CRC_TABLE.extend(_crc32c_table())
  crc = 0xFFFFFFFF
  for byte in data:
    crc = _CRC_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
  crc ^= 0xFFFFFFFF
  return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def _record_is_bad(path, offset):
  """Whether a damaged TFRecord record starts at byte `offset` of `path`.

  Walks the record headers from the start (12 bytes each, skipping the
  data) to see whether `offset` is where this file's records start (a bad
  header or a cut-short record) or their data starts (a bad data checksum:
  TensorFlow reports those 12 bytes further), then checks that record.
  """
  try:
    size = tf.io.gfile.stat(path).length
  except tf.errors.OpError:
    return False
  if offset >= size:
    return False
  with tf.io.gfile.GFile(path, "rb") as f:
    position = 0
    while True:
      f.seek(position)
      header = f.read(12)
      if len(header) < 12:
        return position == offset
      length, = struct.unpack("<Q", header[:8])
      if struct.unpack("<I", header[8:])[0] != _masked_crc32c(header[:8]):
        return position == offset
      if position + 12 + length + 4 > size:
        return position == offset
      if position + 12 == offset:  # TensorFlow names a bad data CRC so.
        data = f.read(length)
        footer = f.read(4)
        return struct.unpack("<I", footer)[0] != _masked_crc32c(data)
      position += 12 + length + 4
      if position > offset:
        return False


def explain_data_loss(error):
  """One line for a `DataLossError` from reading TFRecords.

  TensorFlow says "truncated record at 855" or "corrupted record at 450"
  without the file; the registered input files are checked at that byte
  offset to name it.

  Args:
    error: a `tf.errors.DataLossError`.

  Returns:
    str.
  """
  message = " ".join(str(getattr(error, "message", error)).split())
  found = re.search(r"(truncated|corrupted) record at (\d+)", message)
  if not found:
    return message
  kind, offset = found.group(1), int(found.group(2))
  bad = [path for path in _RECORD_FILES if _record_is_bad(path, offset)]
  if not bad and len(_RECORD_FILES) == 1:
    bad = list(_RECORD_FILES)
  where = ", ".join(bad) if bad else "one of the input files"
  return ("%s: %s record at byte %d; the file is damaged or was cut short "
          "(recreate it)" % (where, kind, offset))


# ----------------------------------------------------------------------------
# Full disk
# ----------------------------------------------------------------------------

_DISK_FULL_TEXT = ("File too large", "No space left on device",
                   "Disk quota exceeded")


def is_disk_full(error):
  """Whether `error` says a write hit a full disk or a file-size limit."""
  if isinstance(error, OSError) and error.errno in (errno.EFBIG, errno.ENOSPC,
                                                    errno.EDQUOT):
    return True
  text = str(getattr(error, "message", None) or error)
  return any(part in text for part in _DISK_FULL_TEXT)


def disk_full_message(error, path=None):
  """One line: which file could not be written, and why."""
  text = " ".join(str(getattr(error, "message", None) or error).split())
  if "the disk is full or the file-size limit" in text:  # From io_utils.
    return re.sub(r"^\[Errno \d+\] ", "", text)
  name = path or getattr(error, "filename", None)
  return ("%swrite failed: the disk is full or the file-size limit was "
          "reached (%s); free space and rerun" %
          ("%s: " % name if name else "", text))


# ----------------------------------------------------------------------------
# Two runs, one folder
# ----------------------------------------------------------------------------

_LOCKS = {}


def lock_output_dir(output_dir, flag_name="output_dir"):
  """Holds `output_dir/.lock` until the process ends, or refuses the folder.

  An OS lock (`fcntl.flock`): the kernel releases it when the process ends,
  however it ends, so a killed run never leaves the folder locked. Remote
  folders (`gs://...`) are not locked.

  Raises:
    ValueError: naming the folder and the other run's process id, when a
      live process holds the lock.
  """
  import fcntl  # pylint: disable=g-import-not-at-top
  if not output_dir or "://" in output_dir:
    return
  os.makedirs(output_dir, exist_ok=True)
  key = os.path.realpath(output_dir)
  if key in _LOCKS:
    return
  path = os.path.join(output_dir, ".lock")
  fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
  try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
  except OSError:
    other = os.read(fd, 64).decode("ascii", "replace").strip() or "unknown"
    os.close(fd)
    raise ValueError(
        "--%s: %s is in use by another training run (pid %s); wait for it "
        "to finish or use another folder" % (flag_name, output_dir, other)
    ) from None
  os.ftruncate(fd, 0)
  os.write(fd, b"%d\n" % os.getpid())
  _LOCKS[key] = fd


# ----------------------------------------------------------------------------
# Training hooks
# ----------------------------------------------------------------------------

_PREEMPTED = {}


class PreemptionHook(tf.estimator.SessionRunHook):
  """Turns SIGTERM into a checkpoint at the current step and a clean stop.

  The handler only sets a flag; after the running step the hook asks the
  session to stop, and the Estimator's checkpoint hook saves the current
  step as the session ends. `exit_if_preempted` then exits.
  """

  def __init__(self):
    self._signal = None
    self._previous = None
    self._global_step = None

  def _on_signal(self, signum, frame):
    del frame
    self._signal = signum

  def begin(self):
    self._global_step = _tf().train.get_global_step()
    try:
      self._previous = signal.signal(signal.SIGTERM, self._on_signal)
    except ValueError:  # Not the main thread.
      self._previous = None

  def after_run(self, run_context, run_values):
    del run_values
    if self._signal is not None and "step" not in _PREEMPTED:
      step = int(run_context.session.run(self._global_step))
      _PREEMPTED["step"] = step
      logging.warning("SIGTERM received: saving a checkpoint at step %d, "
                      "then stopping", step)
      run_context.request_stop()

  def end(self, session):
    del session
    if self._previous is not None:
      signal.signal(signal.SIGTERM, self._previous)


class TimedCheckpointHook(tf.estimator.SessionRunHook):
  """Writes a checkpoint every `save_secs` seconds, besides the step ones.

  Uses the Estimator's own saver (so `keep_checkpoint_max` counts these
  too), after the step that crosses the interval.
  """

  def __init__(self, output_dir, save_secs):
    self._output_dir = output_dir
    self._save_secs = save_secs
    self._last_time = None
    self._last_step = None
    self._global_step = None

  def begin(self):
    self._global_step = _tf().train.get_global_step()

  def after_create_session(self, session, coord):
    del coord
    self._last_time = time.time()
    self._last_step = int(session.run(self._global_step))

  def after_run(self, run_context, run_values):
    del run_values
    if time.time() - self._last_time < self._save_secs:
      return
    tf = _tf()
    step = int(run_context.session.run(self._global_step))
    if step == self._last_step:
      return
    savers = tf.get_collection(tf.GraphKeys.SAVERS)
    if not savers:
      return
    path = savers[0].save(run_context.session,
                          os.path.join(self._output_dir, "model.ckpt"),
                          global_step=step)
    logging.info("Saved %s (%d s since the last timed checkpoint)", path,
                 self._save_secs)
    self._last_time, self._last_step = time.time(), step


class SummaryFlushHook(tf.estimator.SessionRunHook):
  """Summaries at the final step and at least every `every_secs`, flushed.

  The Estimator writes summaries every `save_summary_steps` (100) steps and
  its event file is flushed every 2 minutes: a 200-step run never showed
  its last step, and a killed run's events could be lost. This hook also
  writes them at the last step and after `every_secs`, and flushes the
  event file each time.
  """

  def __init__(self, output_dir, total_steps, every_secs=60.0,
               summary_steps=100):
    self._output_dir = output_dir
    self._total_steps = total_steps
    self._every_secs = every_secs
    self._summary_steps = summary_steps
    self._summary_op = None
    self._global_step = None
    self._next_step = None
    self._last_time = None
    self._requested = False

  def begin(self):
    tf = _tf()
    self._global_step = tf.train.get_global_step()
    self._summary_op = tf.summary.merge_all()

  def after_create_session(self, session, coord):
    del coord
    self._next_step = int(session.run(self._global_step)) + 1
    self._last_time = time.time()

  def _estimator_writes(self, step):
    return self._summary_steps and (step - 1) % self._summary_steps == 0

  def before_run(self, run_context):
    del run_context
    step = self._next_step
    self._requested = bool(
        self._summary_op is not None and not self._estimator_writes(step)
        and (step == self._total_steps
             or time.time() - self._last_time >= self._every_secs))
    fetches = {"step": self._global_step}
    if self._requested:
      fetches["summary"] = self._summary_op
    return _tf().train.SessionRunArgs(fetches)

  def after_run(self, run_context, run_values):
    del run_context
    step = self._next_step
    writer = _tf().summary.FileWriterCache.get(self._output_dir)
    if self._requested:
      writer.add_summary(run_values.results["summary"], step)
    if self._requested or self._estimator_writes(step):
      writer.flush()
      self._last_time = time.time()
    self._next_step = int(run_values.results["step"]) + 2

  def end(self, session):
    del session
    _tf().summary.FileWriterCache.get(self._output_dir).flush()


def training_hooks(output_dir, num_train_steps, save_checkpoints_steps,
                   save_checkpoints_secs, use_tpu=False):
  """The hooks every trainer adds to `estimator.train`.

  Warns when `num_train_steps` is below `save_checkpoints_steps` (the run
  would checkpoint only at its start and end by steps).

  Args:
    output_dir: str, the model directory.
    num_train_steps: int, the step the run ends at.
    save_checkpoints_steps: int or None, the step interval.
    save_checkpoints_secs: int, seconds between timed checkpoints (0: none).
    use_tpu: bool; on TPU the summary hook is left out (summaries are
      computed on the TPU).

  Returns:
    list of `SessionRunHook`.
  """
  _PREEMPTED.clear()
  if save_checkpoints_steps and num_train_steps < save_checkpoints_steps:
    logging.warning(
        "--num_train_steps=%d is below --save_checkpoints_steps=%d: "
        "checkpoints are written %sat the end only", num_train_steps,
        save_checkpoints_steps,
        ("every --save_checkpoints_secs=%d seconds and " %
         save_checkpoints_secs) if save_checkpoints_secs else "")
  hooks = [PreemptionHook()]
  if save_checkpoints_secs and save_checkpoints_secs > 0:
    hooks.append(TimedCheckpointHook(output_dir, save_checkpoints_secs))
  if not use_tpu:
    hooks.append(SummaryFlushHook(output_dir, num_train_steps))
  return hooks


def exit_if_preempted(output_dir):
  """Exits (status 143) after a SIGTERM stopped training, in one log line.

  Call right after `estimator.train`: a preempted run must not go on to
  evaluate or predict with a half-trained model.
  """
  step = _PREEMPTED.get("step")
  if step is None:
    return
  latest = _tf().train.latest_checkpoint(output_dir)
  logging.warning("Stopped by SIGTERM at step %d; checkpoint %s saved; rerun "
                  "the same command to resume", step, latest)
  raise SystemExit(PREEMPTED_EXIT_STATUS)
