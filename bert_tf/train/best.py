"""Evaluation during fine-tuning: the best checkpoint and early stopping.

`--eval_every_steps=N` trains to each multiple of N and evaluates there
(`train_with_evaluation`); `--keep_best_by=<key>` copies the best
checkpoint by that `eval_results.txt` key (lower is better for `*loss`)
with its results into `<output_dir>/best/` (`BestKeeper`);
`--early_stopping_patience=K` stops after K evaluations without
improvement. `best/best.json` is rewritten atomically after each
evaluation, so a resumed run carries on with it.
"""

import json
import os

from absl import logging
import tensorflow.compat.v1 as tf

from bert_tf import io as io_utils
from bert_tf import json_file
from bert_tf.train import checkpoints

__all__ = ["BEST_DIR", "RECORD_FILE", "read_record", "higher_is_better", "check_key",
           "BestKeeper", "train", "train_with_evaluation"]

BEST_DIR = "best"
RECORD_FILE = "best.json"


def higher_is_better(key):
  """Whether a larger value of eval key `key` is better (not a loss)."""
  return not key.endswith("loss")


def check_key(key, known_keys):
  """Raises ValueError unless `key` is one of `known_keys`.

  The message names the flag and the keys the task's evaluation gives.
  """
  if key not in known_keys:
    raise ValueError("--keep_best_by=%s: the evaluation gives %s" %
                     (key, ", ".join(sorted(known_keys))))


# best.json: key -> JSON kind (null until a first best).
_RECORD_KINDS = {"key": ("string", "null"), "best_step": ("integer", "null"),
                 "best_value": ("number", "null"),
                 "best_checkpoint": ("string", "null"),
                 "since_best": "integer", "evaluations": "list"}


def read_record(path):
  """The saved record of a `BestKeeper` (`best/best.json`), checked.

  Raises:
    ValueError: bad JSON, a key of the wrong type, or a `best_checkpoint`
      outside the folder; naming the file and key, and saying to delete it.
  """
  try:
    saved = json_file.load(path, max_bytes=2 ** 26)
    for key, kind in _RECORD_KINDS.items():
      json_file.field(saved, key, kind, path, minimum=0 if kind == "integer"
                      else None)
    for i, entry in enumerate(saved["evaluations"]):
      json_file.field(entry, "global_step", ("integer", "number"), path,
                      json_file.index_path("evaluations", i))
    if saved["best_checkpoint"] is not None:
      checkpoints.named_in(os.path.dirname(path), saved["best_checkpoint"],
                           path)
  except ValueError as e:
    raise ValueError("%s; delete it to start the record anew" % e) from None
  return saved


class BestKeeper(object):
  """Keeps the best checkpoint of a run in `<output_dir>/best/` by `key`
  (None: evaluations recorded only); `patience`: see `should_stop`."""

  def __init__(self, output_dir, key=None, patience=None):
    self.best_dir = os.path.join(output_dir, BEST_DIR)
    self.key = key
    self.patience = patience
    self._record_path = os.path.join(self.best_dir, RECORD_FILE)
    self.record = {"key": key, "best_step": None, "best_value": None,
                   "best_checkpoint": None, "since_best": 0,
                   "evaluations": []}
    if tf.io.gfile.exists(self._record_path):
      saved = read_record(self._record_path)
      if saved.get("key") != key:
        raise ValueError(
            "--keep_best_by=%s: %s ranks by %r; use the same key to resume, "
            "or another --output_dir" % (key, self._record_path,
                                        saved.get("key")))
      self.record.update(saved)
      logging.info("Resuming the record of %s: best %s = %s at step %s",
                   self._record_path, key, self.record["best_value"],
                   self.record["best_step"])

  def evaluated_steps(self):
    """The steps already evaluated, as ints."""
    return {int(e["global_step"]) for e in self.record["evaluations"]}

  def best_checkpoint(self):
    """The kept checkpoint's prefix, or None."""
    name = self.record["best_checkpoint"]
    return os.path.join(self.best_dir, name) if name else None

  def should_stop(self):
    """True after `patience` evaluations in a row without improvement."""
    return bool(self.patience and self.record["since_best"] >= self.patience)

  def update(self, results, checkpoint_path):
    """Records one evaluation (`results` with `global_step`) and keeps
    `checkpoint_path` when best; returns whether it became the best.

    Raises:
      ValueError: `key` is not among the results' keys.
    """
    step = int(results["global_step"])
    entry = {name: float(value) for name, value in results.items()}
    self.record["evaluations"].append(entry)
    improved, old = False, None
    if self.key:
      check_key(self.key, results)
      value = float(results[self.key])
      best = self.record["best_value"]
      improved = best is None or (value > best if higher_is_better(self.key)
                                  else value < best)
      if improved:
        old = self.best_checkpoint()
        checkpoints.keep_copy(checkpoint_path, self.best_dir)
        io_utils.write_eval_results(
            os.path.join(self.best_dir, "eval_results.txt"), results)
        self.record.update(best_step=step, best_value=value,
                           best_checkpoint=os.path.basename(checkpoint_path),
                           since_best=0)
        logging.info("Best %s = %s at step %d: kept in %s", self.key, value,
                     step, self.best_dir)
      else:
        self.record["since_best"] += 1
        logging.info("%s = %s at step %d; best %s at step %s (%d without "
                     "improvement)", self.key, value, step, best,
                     self.record["best_step"], self.record["since_best"])
    self._write_record()
    # The previous best goes only once the record names the new one.
    if old and os.path.basename(old) != os.path.basename(checkpoint_path):
      checkpoints.remove_checkpoint(old)
    return improved

  def _write_record(self):
    tf.io.gfile.makedirs(self.best_dir)
    with io_utils.atomic_write(self._record_path) as f:
      f.write(json.dumps(self.record, indent=2, sort_keys=True) + "\n")


def train_with_evaluation(model_runner, train_fn, evaluate_fn, num_train_steps,
                          every_steps, keeper):
  """Trains to `num_train_steps`, evaluating every `every_steps` steps.

  Resumes from the latest checkpoint; a step trained to but not evaluated
  is evaluated first. `train_fn(max_steps)` is one runner `train` call;
  `evaluate_fn()` the latest checkpoint's results; `keeper` None on a
  non-chief worker (it trains the same steps, evaluates nothing). Returns
  the last evaluation's results, or None.
  """
  model_dir = model_runner.model_dir

  def latest():
    path = checkpoints.latest(model_dir)
    return path, (int(path.rsplit("-", 1)[-1]) if path else 0)

  results = None
  path, step = latest()
  while True:
    due = step > 0 and (step % every_steps == 0 or step >= num_train_steps)
    if keeper is None:
      pass  # Not the chief: train to the same steps, the chief evaluates.
    elif due and step not in keeper.evaluated_steps():
      results = evaluate_fn()
      keeper.update(results, path)
      if keeper.should_stop():
        logging.info("Early stopping at step %d: %d evaluations without a "
                     "better %s", step, keeper.record["since_best"],
                     keeper.key)
        break
    elif keeper.should_stop():
      logging.info("The record says the run stopped early at step %d", step)
      break
    if step >= num_train_steps:
      break
    target = min(num_train_steps, (step // every_steps + 1) * every_steps)
    train_fn(target)
    if keeper is None:  # A non-chief may not see the chief's checkpoints.
      step = target
      continue
    previous, (path, step) = step, latest()
    if step <= previous:
      raise ValueError("%s: training to step %d wrote no new checkpoint "
                       "(latest step %d)" % (model_dir, target, step))
  return results


def train(model_runner, train_fn, evaluate_fn, num_train_steps, options,
          evaluates):
  """A fine-tuning script's training, plain or evaluating as it goes
  (`options`: `EvalOptions`; `evaluates`: this process evaluates). Returns
  (keeper or None, last results or None)."""
  if not options.eval_every_steps:
    train_fn(num_train_steps)
    return None, None
  keeper = None
  if evaluates:
    keeper = BestKeeper(model_runner.model_dir, options.keep_best_by or None,
                        options.early_stopping_patience)
  results = train_with_evaluation(model_runner, train_fn,
                                  evaluate_fn if evaluates else None,
                                  num_train_steps, options.eval_every_steps,
                                  keeper)
  return keeper, results
