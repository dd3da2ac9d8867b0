"""A run's checkpoints, in one place: saving, keeping, finding and pruning.

Every runner saves through one `Saving` (a `Saver` per graph, handed to
whoever saves: the runner's checkpoint hook, `TimedCheckpointHook`), which
keeps the Estimator's `KEEP_CHECKPOINT_MAX` newest; on one device each
checkpoint also holds the training input's position (`Saving.track`).
Before training, `start_training` takes the output folder's lock, removes
the saves a kill cut (`remove_killed_saves`) and checks the checkpoint it
resumes from (`check_resume`). `latest` finds a folder's checkpoint from its
`checkpoint` state file, checked (`read_state`); `resolve` finds the one a
flag names; `checkpoint_to_export` the one an export takes. `keep_copy`
copies one into another folder (the best checkpoint into
`<output_dir>/best/`, `best.BestKeeper`), and `named_in` checks a name read
back from a record. After a divergence,
`prune_after_divergence` removes the checkpoints no lower learning rate can
recover from.

Files are found by their exact names, never by a glob of a folder's name: a
folder named `pre[2]` is a folder like any other (TensorFlow's own
`tf.train.latest_checkpoint` and `Saver` glob the prefix, and a `[2]` there
matches `pre2`). A name read back from a file (the state file, the best
record) must be a checkpoint name of the expected shape in the expected
folder.
"""

import collections
import json
import os
import re
import shutil
import time

from absl import logging
import numpy as np
import tensorflow.compat.v1 as tf

from bert_tf import io as io_utils
from bert_tf import tf_private
from bert_tf.checks import checkpoint as checkpoint_checks
from bert_tf.checks import lock as lock_checks
from bert_tf.train import distribute as distribute_utils
from bert_tf.train import variables as variables_lib

__all__ = ["PREFIX", "INIT_RECORD", "KEEP_CHECKPOINT_MAX", "SANE_WEIGHT",
           "POSITION_SCOPE", "Saver", "Positions", "Position",
           "Saving", "TimedCheckpointHook", "start_training",
           "remove_killed_saves", "read_state", "latest", "latest_step",
           "resolve",
           "check_resume", "remove_checkpoint", "copy_checkpoint",
           "keep_copy", "named_in", "prune_after_divergence",
           "checkpoint_to_export"]

# The runners' checkpoint prefix and how many they keep (the Estimator's).
PREFIX = "model.ckpt"
KEEP_CHECKPOINT_MAX = 5
# A training run's --init_checkpoint, as JSON ({"init_checkpoint": path}).
INIT_RECORD = "init_checkpoint.json"
# The largest |weight| from which a lower learning rate can still recover:
# far above a trained BERT's weights (the tiny test model's stay below 1),
# far below what a diverging run reaches (1e30 and more).
SANE_WEIGHT = 1e4
# The scope of the checkpoint entries holding the training input's position
# (its iterator's serialized state, a string scalar), which each checkpoint
# of a one-device run holds beside the variables.
POSITION_SCOPE = variables_lib.INPUT_POSITION_SCOPE
_STEP_NAME = re.compile(r"^model\.ckpt-(\d+)$")


# ----------------------------------------------------------------------------
# Saving and keeping
# ----------------------------------------------------------------------------


class Saver(tf.train.Saver):
  """`tf.train.Saver` with exact file names.

  TensorFlow's saver globs a checkpoint's prefix to check that it exists,
  to date it and to remove it, so in a folder named `pre[2]` it could
  never restore, and it removed the old checkpoints of `pre2` instead of
  its own. This one reads and removes the files by their exact names; what
  it writes (the checkpoint, the `checkpoint` state file) is the same.
  Graph mode only, as the runners.

  `positions`: the `Positions` its checkpoints hold beside the variables
  (None: none); a checkpoint without them, or whose position another input
  pipeline saved, restores the variables and starts the input from its
  beginning, with a warning.
  """

  positions = None

  def restore(self, sess, save_path):
    """Restores `save_path` (a checkpoint prefix) into `sess`.

    Raises:
      ValueError: no checkpoint has that prefix.
    """
    if not save_path or not tf.io.gfile.exists(save_path + ".index"):
      raise ValueError("%s: no such checkpoint (no %s.index)" %
                       (save_path, save_path))
    logging.info("Restoring parameters from %s", save_path)
    prefix = checkpoint_checks.readable_prefix(save_path)
    saver_def = self.saver_def
    positions = self.positions or ()
    if positions and not {p.key for p in positions} <= set(
        tf.train.load_checkpoint(prefix).get_variable_to_shape_map()):
      logging.warning(
          "%s holds no input position (saved by an older version): the "
          "input pipeline restarts from its beginning", save_path)
      saver_def = self.positions.variables_only.saver_def
    try:
      sess.run(saver_def.restore_op_name,
               {saver_def.filename_tensor_name: prefix})
    except tf.errors.OpError as e:
      # A position saved by another input pipeline (other files, batch size
      # or flags) does not restore into this one.
      if saver_def is not self.saver_def or "Iterator" not in str(e):
        raise
      logging.warning(
          "%s: its input position does not fit this run's input pipeline "
          "(%s): the input pipeline restarts from its beginning", save_path,
          e.message.split(". ")[0].split(" from checkpoint: ")[-1])
      saver_def = self.positions.variables_only.saver_def
      sess.run(saver_def.restore_op_name,
               {saver_def.filename_tensor_name: prefix})
    if saver_def is not self.saver_def:
      sess.run([p.initializer for p in positions])

  def recover_last_checkpoints(self, checkpoint_paths):
    """Takes over the checkpoints a state file lists (those still there),
    as the ones to keep."""
    found = []
    for path in checkpoint_paths:
      try:
        found.append((path, tf.io.gfile.stat(path + ".index").mtime_nsec
                      / 1e9))
      except tf.errors.NotFoundError:
        continue
    self.set_last_checkpoints_with_time(found)

  def save(self, sess, save_path, global_step=None, latest_filename=None,
           meta_graph_suffix="meta", write_meta_graph=True, write_state=True,
           strip_default_attrs=False, save_debug_info=False):
    """`tf.train.Saver.save`, removing the checkpoint that falls out of the
    newest `max_to_keep` by its exact file names, after the new one is
    saved (the saver's own removal is never reached)."""
    step = global_step
    if step is not None and not isinstance(step, (int, np.integer)):
      step = tf.train.global_step(sess, step)
    before = list(self.last_checkpoints)
    keep = self.saver_def.max_to_keep if self.saver_def else 0
    target = save_path if step is None else "%s-%d" % (save_path, step)
    kept = [p for p in before if p != target]
    dropped = (kept[:max(0, len(kept) + 1 - keep)] if keep and write_state
               else [])
    now = time.time()
    if dropped:
      self.set_last_checkpoints_with_time(
          [(p, now) for p in kept[len(dropped):]])
    try:
      path = super().save(
          sess, save_path, global_step=step, latest_filename=latest_filename,
          meta_graph_suffix=meta_graph_suffix,
          write_meta_graph=write_meta_graph, write_state=write_state,
          strip_default_attrs=strip_default_attrs,
          save_debug_info=save_debug_info)
    except BaseException:
      if dropped:
        self.set_last_checkpoints_with_time([(p, now) for p in before])
      raise
    for old in dropped:
      remove_checkpoint(old)
    return path


class Saving(object):
  """The saver of a run's graphs: the one every saver of a graph uses.

  The Estimator's saver (sharded, relative paths in the state file, the
  newest `keep` kept), made once per graph, as the exact-name `Saver`. The
  runner puts it in its `Scaffold`; `TimedCheckpointHook` saves with it, so
  `keep` counts the timed checkpoints too. The training input's iterator,
  given to `track` before the graph's saver is made, is saved in the same
  checkpoints (its position: `Positions`), so a save holds the variables
  and the position together.

  Args:
    keep: int, how many checkpoints to keep.
  """

  def __init__(self, keep=KEEP_CHECKPOINT_MAX):
    self.keep = keep
    self._graph = None
    self._saver = None
    self._positions = None

  def _this_graph(self):
    graph = tf.get_default_graph()
    if graph is not self._graph:
      self._graph, self._saver = graph, None
      self._positions = Positions()
    return self._positions

  def track(self, iterator):
    """Saves `iterator`'s position (an initializable `tf.data` iterator of
    the default graph) with every checkpoint, as `POSITION_SCOPE/iterator`:
    a restore puts it back, a fresh start initializes it (`start_input`).
    Call before the graph's first `saver()`."""
    self._this_graph().add(iterator)

  def start_input(self, scaffold, session):
    """A `Scaffold`'s `init_fn` (no checkpoint restored): initializes the
    tracked iterators."""
    del scaffold
    session.run([p.initializer for p in self._this_graph()])

  def saver(self):
    """The `Saver` of the default graph (made at the first call in it)."""
    positions = self._this_graph()
    if self._saver is None:
      var_list = None
      if positions:
        variables = (tf.global_variables() +
                     tf.get_collection(tf.GraphKeys.SAVEABLE_OBJECTS))
        var_list = variables + [p.saveable for p in positions]
        positions.variables_only = tf.train.Saver(
            variables, sharded=True, save_relative_paths=True)
      self._saver = Saver(var_list, sharded=True, max_to_keep=self.keep,
                          keep_checkpoint_every_n_hours=10000,
                          defer_build=var_list is None,
                          save_relative_paths=True)
      self._saver.positions = positions
    return self._saver


class Positions(list):
  """The training input's positions that a graph's checkpoints hold: one
  `Position` per tracked iterator; `variables_only`: a saver of the same
  graph restoring the variables alone (the checkpoints of older versions)."""

  variables_only = None

  def add(self, iterator):
    key = "%s/iterator%s" % (POSITION_SCOPE, "_%d" % len(self) if self else "")
    self.append(Position(tf_private.iterator_saveable(iterator, key), key,
                         iterator.initializer))


Position = collections.namedtuple("Position", "saveable key initializer")


class TimedCheckpointHook(tf.train.SessionRunHook):
  """Writes a checkpoint every `save_secs` seconds, besides the step ones.

  Saves with the run's saver (`saving.saver()`, so `keep` counts these
  too), after the step that crosses the interval.

  Args:
    output_dir: str, the model directory.
    save_secs: float, seconds between checkpoints.
    saving: the run's `Saving`.
  """

  def __init__(self, output_dir, save_secs, saving):
    self._output_dir = output_dir
    self._save_secs = save_secs
    self._saving = saving
    self._saver = None
    self._last_time = None
    self._last_step = None
    self._global_step = None

  def begin(self):
    self._global_step = tf.train.get_global_step()
    self._saver = self._saving.saver()

  def after_create_session(self, session, coord):
    del coord
    self._last_time = time.time()
    self._last_step = int(session.run(self._global_step))

  def after_run(self, run_context, run_values):
    del run_values
    if time.time() - self._last_time < self._save_secs:
      return
    step = int(run_context.session.run(self._global_step))
    if step == self._last_step:
      return
    path = self._saver.save(run_context.session,
                            os.path.join(self._output_dir, PREFIX),
                            global_step=step)
    logging.info("Saved %s (%d s since the last timed checkpoint)", path,
                 self._save_secs)
    self._last_time, self._last_step = time.time(), step


def start_training(output_dir, init_checkpoint=None):
  """Before training into `output_dir`: `lock.lock_output_dir`, the removal
  of saves a killed run left (`remove_killed_saves`), `check_resume`, then
  the record of `init_checkpoint` (str or None, `--init_checkpoint`) in
  `INIT_RECORD`, which `convert_checkpoint.py` names in a model card.

  The workers of one multi-worker run share `output_dir`; only the chief
  (`distribute_utils.is_chief`), which alone writes there, takes the lock.

  Returns:
    The `lock.OutputDirLock`, which the caller keeps while it trains (None
    on the other workers, and for a remote folder).

  Raises:
    ValueError: another live run trains there, its state file is damaged,
      or its latest checkpoint is truncated or damaged.
  """
  held = None
  if distribute_utils.is_chief():
    held = lock_checks.lock_output_dir(output_dir)
  try:
    if held is not None:  # No other run writes here now.
      remove_killed_saves(output_dir)
    check_resume(output_dir)
    if held is not None and init_checkpoint:
      with io_utils.atomic_write(os.path.join(output_dir, INIT_RECORD)) as f:
        f.write(json.dumps({"init_checkpoint": init_checkpoint}) + "\n")
  except BaseException:
    if held is not None:
      held.release()
    raise
  return held


# A checkpoint save writes its shards into `<prefix>_temp/` (sharded V2
# format; older versions add a random suffix) and merges them into place.
_KILLED_SAVE = re.compile(r"model\.ckpt-\d+_temp(_[0-9a-f]+)?$")
# TensorFlow's atomic file writes (the `.meta` graph, the `checkpoint`
# state, the merged `.index`) write `<file>.tmp<hex>` or
# `<file>.tempstate<n>` and rename it; a full disk or a kill leaves it.
_CUT_WRITE = re.compile(r"^(model\.ckpt-\d+|checkpoint|graph\.pbtxt).*"
                        r"\.(tmp[0-9a-f]{6,}|tempstate\d+)$")


def remove_killed_saves(output_dir):
  """Removes what saves that a kill or a full disk cut left: the shard
  folders (`model.ckpt-N_temp/`) and TensorFlow's temporary files
  (`model.ckpt-N.meta.tmp<hex>`, `checkpoint.tmp<hex>`, `.tempstate<n>`).

  Call only while holding the folder's lock: a live run's save in progress
  looks the same. Every such folder is a save that never became a
  checkpoint (the merge removes it).

  Returns:
    list of str, the folders and files removed.
  """
  if "://" in output_dir or not os.path.isdir(output_dir):
    return []
  removed = []
  for name in sorted(os.listdir(output_dir)):
    path = os.path.join(output_dir, name)
    if _KILLED_SAVE.match(name) and os.path.isdir(path):
      shutil.rmtree(path, ignore_errors=True)
    elif _CUT_WRITE.match(name) and os.path.isfile(path):
      os.remove(path)
    else:
      continue
    logging.info("Removing %s, the unfinished save of an earlier run", path)
    removed.append(path)
  return removed


def remove_checkpoint(prefix):
  """Removes the files of checkpoint `prefix` (found by exact name)."""
  for path in checkpoint_checks.checkpoint_files(prefix):
    tf.io.gfile.remove(path)


def copy_checkpoint(prefix, folder):
  """Copies the files of checkpoint `prefix` into `folder`, each atomically.

  Returns:
    str, the copy's prefix.

  Raises:
    ValueError: `prefix` has no files.
  """
  sources = checkpoint_checks.checkpoint_files(prefix)
  if not sources:
    raise ValueError("%s: no such checkpoint to copy" % prefix)
  tf.io.gfile.makedirs(folder)
  for source in sources:
    target = os.path.join(folder, os.path.basename(source))
    with io_utils.atomic_path(target) as temp:
      tf.io.gfile.copy(source, temp, overwrite=True)
  return os.path.join(folder, os.path.basename(prefix))


# ----------------------------------------------------------------------------
# Finding
# ----------------------------------------------------------------------------


def _newest_here(folder):
  """The basename of the newest `model.ckpt-N` with a `.index` in
  `folder`, or None."""
  steps = []
  for name in tf.io.gfile.listdir(folder):
    found = _STEP_NAME.match(name[:-len(".index")]) if name.endswith(
        ".index") else None
    if found:
      steps.append(int(found.group(1)))
  return "%s-%d" % (PREFIX, max(steps)) if steps else None


def _state_problem(folder, what):
  """The one line for a `checkpoint` state file that names no usable
  checkpoint: what is wrong and what to do."""
  state = os.path.join(folder, "checkpoint")
  newest = _newest_here(folder)
  if newest:
    advice = ("%s is there: to resume from it, replace the file with the "
              "line model_checkpoint_path: \"%s\"; or delete the file to "
              "start over" % (newest, newest))
  else:
    advice = "no checkpoint is there: delete the file to start over"
  return "%s: %s; %s" % (state, what, advice)


def read_state(folder):
  """The checkpoints that `folder`'s `checkpoint` state file names, checked.

  Args:
    folder: str, a training output folder (or any checkpoint folder).

  Returns:
    (latest, all): the latest checkpoint's prefix and every listed one's
    (those whose files are there), oldest first; (None, []) without a state
    file.

  Raises:
    ValueError: one line naming the state file, when it is not UTF-8 text,
      not a checkpoint state, or names a checkpoint whose files are not
      there, saying what to do.
  """
  state_file = os.path.join(folder, "checkpoint")
  if not tf.io.gfile.exists(state_file):
    return None, []
  with tf.io.gfile.GFile(state_file, "rb") as f:
    raw = f.read()
  try:
    raw.decode("utf-8")
  except UnicodeDecodeError as e:
    raise ValueError(_state_problem(folder, "not a checkpoint state file "
                                    "(byte 0x%02x at offset %d is not UTF-8)"
                                    % (raw[e.start], e.start))) from None
  try:
    state = tf.train.get_checkpoint_state(folder)
  except ValueError:
    state = None
  if state is None:
    raise ValueError(_state_problem(
        folder, "not a checkpoint state file (%s)" %
        ("empty" if not raw.strip() else "it does not parse")))
  latest_path = state.model_checkpoint_path
  if not tf.io.gfile.exists(latest_path + ".index"):
    raise ValueError(_state_problem(folder, "it names %s, which is not "
                                    "there" % latest_path))
  listed = [p for p in state.all_model_checkpoint_paths
            if tf.io.gfile.exists(p + ".index")]
  if latest_path not in listed:
    listed.append(latest_path)
  return latest_path, listed


def latest(folder):
  """The latest checkpoint's prefix in `folder` (`read_state`), or None.

  Raises:
    ValueError: as `read_state`.
  """
  if not folder or not tf.io.gfile.isdir(folder):
    return None
  return read_state(folder)[0]


def latest_step(folder):
  """The global step (int) of `folder`'s latest checkpoint; 0 without one.

  Raises:
    ValueError: as `read_state`.
  """
  path = latest(folder)
  if path is None:
    return 0
  return int(tf.train.load_variable(checkpoint_checks.readable_prefix(path),
                                    tf.GraphKeys.GLOBAL_STEP))


def resolve(path, flag_name="init_checkpoint"):
  """The checkpoint prefix that `path` names.

  Accepted, in this order: a folder holding `bert_model.ckpt.index` (a
  released model, or one `convert_checkpoint.py` wrote); a folder with a
  `checkpoint` state file (a training `output_dir`: its latest checkpoint);
  a checkpoint prefix whose `.index` file exists (`.../bert_model.ckpt`,
  `.../model.ckpt-1000`); the `.index` file itself.

  Returns:
    str, the checkpoint prefix.

  Raises:
    ValueError: naming the flag and the path, when no checkpoint is there
      (or the folder's state file is damaged).
  """
  if path and path.endswith(".index"):
    path = path[:-len(".index")]
  if path and tf.io.gfile.isdir(path):
    released = os.path.join(path, "bert_model.ckpt")
    if tf.io.gfile.exists(released + ".index"):
      return released
    try:
      found = latest(path)
    except ValueError as e:
      raise ValueError("--%s: %s" % (flag_name, e)) from None
    if found:
      return found
  elif path and tf.io.gfile.exists(path + ".index"):
    return path
  raise ValueError("--%s: no TensorFlow checkpoint at %r (expected a model "
                   "folder with bert_model.ckpt.index, a training output_dir "
                   "with a 'checkpoint' file, or a prefix such as "
                   ".../bert_model.ckpt with a .index file beside it)" %
                   (flag_name, path))


def check_resume(output_dir):
  """Refuses to resume from a latest checkpoint that cannot be read whole.

  Args:
    output_dir: str, the training folder (its `checkpoint` state file names
      the latest checkpoint; none there is accepted).

  Raises:
    ValueError: one line: the state file is damaged (`read_state`), or the
      latest checkpoint is truncated or its bytes damaged
      (`checkpoint.check_checkpoint`).
  """
  try:
    found = latest(output_dir)
  except ValueError as e:
    raise ValueError("--output_dir: %s" % e) from None
  if found:
    try:
      checkpoint_checks.check_checkpoint(found, flag_name="output_dir")
    except ValueError as e:
      raise ValueError("%s (training would resume from it; remove its "
                       "files to resume from the one before)" % e) from None


def checkpoint_to_export(output_dir, init_checkpoint):
  """The checkpoint an `--export_dir` run exports.

  Args:
    output_dir: str or None, the run's model directory; its latest
      checkpoint (what prediction uses) wins.
    init_checkpoint: str or None, a checkpoint prefix or directory, used
      when `output_dir` has no checkpoint.

  Returns:
    str, a checkpoint prefix.

  Raises:
    ValueError: when neither holds a checkpoint, or a state file is
      damaged.
  """
  found = latest(output_dir)
  if found:
    return found
  if init_checkpoint:
    try:
      return resolve(init_checkpoint)
    except ValueError:
      pass
  raise ValueError(
      "--export_dir: no checkpoint to export: --output_dir=%s holds none and "
      "--init_checkpoint=%s is not a checkpoint (train first, or point "
      "--init_checkpoint at a fine-tuned checkpoint)" %
      (output_dir, init_checkpoint))


# ----------------------------------------------------------------------------
# After a divergence
# ----------------------------------------------------------------------------


def _weights_problem(prefix):
  """Why a lower learning rate cannot recover from `prefix`'s weights (a
  non-finite value, or one beyond `SANE_WEIGHT`), or None.

  The optimizer's slots (`<weight>/adam_m`, ...) and the fp16 loss scale
  are no weights: only their finiteness counts.
  """
  reader = tf.train.load_checkpoint(checkpoint_checks.readable_prefix(prefix))
  dtypes = reader.get_variable_to_dtype_map()
  names = set(dtypes)
  for name in sorted(names):
    if not dtypes[name].is_floating:
      continue
    value = reader.get_tensor(name)
    if not np.all(np.isfinite(value)):
      return "%s is not finite" % name
    slot = "/" in name and name.rsplit("/", 1)[0] in names
    if slot or name == "loss_scale" or not value.size:
      continue
    largest = float(np.max(np.abs(value)))
    if largest > SANE_WEIGHT:
      return "%s reaches %.3g" % (name, largest)
  return None


def prune_after_divergence(model_dir):
  """Removes the newest checkpoints that no lower learning rate can
  recover from: weights not finite, or beyond `SANE_WEIGHT`.

  The step that made the loss NaN may have been saved (the checkpoint hook
  runs before the NaN check), and the steps before it may hold weights of
  1e30: a rerun would resume from them and diverge again. The state file
  then names the newest sane checkpoint; without one it is removed, and a
  rerun starts over.

  Returns:
    (kept, removed): the newest sane checkpoint's prefix (None when none
    is left) and the removed ones' prefixes with the reason, as
    "prefix (reason)".
  """
  try:
    _, paths = read_state(model_dir)
  except ValueError:
    return None, []
  removed = []
  while paths:
    problem = _weights_problem(paths[-1])
    if problem is None:
      break
    path = paths.pop()
    remove_checkpoint(path)
    logging.warning("Removed %s: %s", path, problem)
    removed.append("%s (%s)" % (os.path.basename(path), problem))
  if removed and paths:
    # Relative names, as the runners' savers write them.
    tf.train.update_checkpoint_state(
        model_dir, os.path.basename(paths[-1]),
        all_model_checkpoint_paths=[os.path.basename(p) for p in paths])
  elif removed:
    tf.io.gfile.remove(os.path.join(model_dir, "checkpoint"))
  return (paths[-1] if paths else None), removed


# ----------------------------------------------------------------------------
# A copy: the best checkpoint
# ----------------------------------------------------------------------------


def named_in(folder, name, source):
  """The prefix of checkpoint `name`, read back from the file `source`,
  checked to be a checkpoint name (`model.ckpt-N`) whose files are in
  `folder`: never a pattern, never a path elsewhere.

  Raises:
    ValueError: naming `source` and what was expected.
  """
  if not isinstance(name, str) or not _STEP_NAME.match(name):
    raise ValueError("%s: best_checkpoint is %s, expected a checkpoint name "
                     "such as %s-100" % (source, json.dumps(name), PREFIX))
  prefix = os.path.join(folder, name)
  if not tf.io.gfile.exists(prefix + ".index"):
    raise ValueError("%s: best_checkpoint is %s, but %s has no %s.index" %
                     (source, json.dumps(name), folder, name))
  return prefix


def keep_copy(prefix, folder):
  """Copies checkpoint `prefix` into `folder` with a `checkpoint` state
  file naming it, so that the folder is a checkpoint folder
  (`--init_checkpoint=<output_dir>/best`). Other checkpoints there stay
  (`remove_checkpoint` them once nothing names them).

  Returns:
    str, the copy's prefix.
  """
  copy = copy_checkpoint(prefix, folder)
  name = json.dumps(os.path.basename(copy))
  with io_utils.atomic_write(os.path.join(folder, "checkpoint")) as f:
    f.write("model_checkpoint_path: %s\n" % name)
    f.write("all_model_checkpoint_paths: %s\n" % name)
  return copy
