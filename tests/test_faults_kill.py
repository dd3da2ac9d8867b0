"""SIGKILL at seeded random moments, then the same command again.

For each script: an uninterrupted reference run; then a run killed at three
seeded moments in a row (each kill hits the rerun of the one before), and a
last rerun to the end. It must complete; its deterministic outputs must be
byte-identical to the reference's; training must reach the requested
global step. A watcher thread polls the output folder throughout: a file
under its final name is always complete, and the `checkpoint` state file
always names a checkpoint whose files exist.
"""

import json
import os
import random
import signal
import time

import pytest
import tensorflow.compat.v1 as tf

import fault_helpers as fh

pytestmark = pytest.mark.slow

_KILLS = 3


def _final_name(path):
  """Whether `path` is an output's final name (not a temporary one, nor in
  a temporary folder; event files are not outputs)."""
  parts = os.path.normpath(path).split(os.sep)
  return not (any(p.startswith(".") or ".tmp-" in p or p.endswith("_temp")
                  for p in parts[-3:])
              or parts[-1].startswith("events.out"))


def _files(folder):
  found = {}
  for root, _, names in os.walk(folder):
    for name in names:
      path = os.path.join(root, name)
      if _final_name(path):
        found[os.path.relpath(path, folder)] = open(path, "rb").read()
  return found


def _checkpoint_state_ok(path, data):
  """The `checkpoint` file names a checkpoint whose index exists."""
  text = data.decode("utf-8", "replace")
  if "model_checkpoint_path" not in text:
    return "%s has no model_checkpoint_path: %r" % (path, text)
  name = text.split("model_checkpoint_path:", 1)[1].split("\n")[0]
  name = name.strip().strip('"')
  prefix = name if os.path.isabs(name) else os.path.join(
      os.path.dirname(path), name)
  if os.path.exists(prefix + ".index"):
    return None
  with open(path, "rb") as f:
    if f.read() != data:
      return None  # Replaced since: the newer state is checked next.
  return "%s names %s, which has no .index" % (path, name)


def _kill_then_finish(name, args, folder, seed, reference_seconds,
                      check, first_step_pattern=None):
  """Kills `_KILLS` runs at seeded moments, then runs to the end.

  Moments: the first kill at a random point of the reference run's
  duration; the next ones, for training, a random delay after the run's
  first training step (so that a kill lands mid-training), otherwise again
  a random point.

  Returns:
    (final CompletedProcess-like (returncode, stderr), watcher).
  """
  rng = random.Random(seed)
  watcher = fh.FolderWatcher(folder, _final_name, check)
  finished = None
  with watcher:
    for k in range(_KILLS):
      proc = fh.start(name, args)
      lines = fh.Lines(proc)
      if k and first_step_pattern:
        try:
          lines.wait_for(first_step_pattern, timeout=240)
        except AssertionError:
          pass  # Ended first; checked below.
        time.sleep(rng.uniform(0.0, 1.5))
      else:
        time.sleep(rng.uniform(0.2, 0.9) * reference_seconds)
      if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
      proc.wait()
      text = lines.text()
      if proc.returncode == 0:
        finished = (0, text)  # Done before the kill: nothing to rerun.
        break
      assert proc.returncode == -signal.SIGKILL, text[-3000:]
    if finished is None:
      result = fh.run(name, args, timeout=600)
      finished = (result.returncode, result.stderr)
  assert finished[0] == 0, finished[1][-3000:]
  assert watcher.seen and not watcher.errors, watcher.errors[:3]
  leftovers = [p for p in _all_paths(folder) if ".tmp-" in p]
  assert not leftovers, leftovers
  return finished, watcher


def _all_paths(folder):
  return [os.path.join(root, n) for root, _, names in os.walk(folder)
          for n in names] if os.path.isdir(folder) else []


def _reference(name, args):
  start = time.time()
  result = fh.run(name, args, timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  return time.time() - start


def _same_as(reference_files, extra_check=None):
  """A watcher check: files with a reference must match it byte for byte."""

  def check(path, data):
    for relative, expected in reference_files.items():
      if path.endswith(os.sep + relative) and data != expected:
        return "%s appeared incomplete or different (%d of %d bytes)" % (
            path, len(data), len(expected))
    if extra_check:
      return extra_check(path, data)
    return None

  return check


def _training_check(validators):
  def check(path, data):
    base = os.path.basename(path)
    if base == "checkpoint":
      return _checkpoint_state_ok(path, data)
    if base in validators:
      return validators[base](path, data)
    return None
  return check


# ---------------------------------------------------------------------------
# Deterministic scripts: byte-identical outputs.
# ---------------------------------------------------------------------------


def test_kill_create_pretraining_data(tmp_path):
  corpus = fh.write_corpus(str(tmp_path / "corpus.txt"), num_documents=60)

  def args(folder):
    return fh.flags(input_file=corpus,
                    output_file=os.path.join(folder, "out.tfrecord"),
                    vocab_file=fh.tiny("vocab.txt"), max_seq_length=fh.SEQ,
                    max_predictions_per_seq=fh.PREDS, dupe_factor=20)

  ref_dir, run_dir = str(tmp_path / "ref"), str(tmp_path / "run")
  os.makedirs(ref_dir)
  os.makedirs(run_dir)
  seconds = _reference("create_pretraining_data.py", args(ref_dir))
  expected = _files(ref_dir)
  _, watcher = _kill_then_finish("create_pretraining_data.py", args(run_dir),
                                 run_dir, 1, seconds, _same_as(expected))
  assert _files(run_dir) == expected


def test_kill_extract_features(tmp_path):
  text = tmp_path / "input.txt"
  text.write_text("".join("the quick brown fox %d ||| jumps over\n" % i
                          for i in range(200)))

  def args(folder):
    return fh.flags(input_file=str(text),
                    output_file=os.path.join(folder, "features.jsonl"),
                    vocab_file=fh.tiny("vocab.txt"),
                    bert_config_file=fh.tiny("bert_config.json"),
                    init_checkpoint=fh.tiny_checkpoint(),
                    max_seq_length=fh.SEQ, batch_size=8, layers="-1,-2")

  ref_dir, run_dir = str(tmp_path / "ref"), str(tmp_path / "run")
  os.makedirs(ref_dir)
  os.makedirs(run_dir)
  seconds = _reference("extract_features.py", args(ref_dir))
  expected = _files(ref_dir)
  _kill_then_finish("extract_features.py", args(run_dir), run_dir, 2,
                    seconds, _same_as(expected))
  assert _files(run_dir) == expected


def test_kill_convert_checkpoint(tmp_path):
  model_dir = os.path.dirname(fh.tiny("bert_config.json"))

  def args(folder):
    return fh.flags(direction="tf_to_hf", input=model_dir,
                    output=os.path.join(folder, "hf"))

  ref_dir, run_dir = str(tmp_path / "ref"), str(tmp_path / "run")
  os.makedirs(ref_dir)
  os.makedirs(run_dir)
  seconds = _reference("convert_checkpoint.py", args(ref_dir))
  expected = _files(ref_dir)
  assert sorted(expected) == sorted(
      os.path.join("hf", n) for n in (
          "README.md", "config.json", "model.safetensors",
          "tokenizer_config.json", "vocab.txt"))

  def whole_folder(path, data):
    del data
    present = set(os.listdir(os.path.dirname(path)))
    wanted = {os.path.basename(n) for n in expected}
    if not wanted <= present:
      return "%s appeared before it was complete: %s" % (
          os.path.dirname(path), sorted(present))
    return None

  _kill_then_finish("convert_checkpoint.py", args(run_dir), run_dir, 3,
                    seconds, _same_as(expected, whole_folder))
  assert _files(run_dir) == expected


# ---------------------------------------------------------------------------
# Trainers: complete, reach the requested step; cached features identical.
# ---------------------------------------------------------------------------


def _global_step(output_dir):
  return tf.train.load_variable(tf.train.latest_checkpoint(output_dir),
                                "global_step")


def _json_ok(path, data):
  try:
    json.loads(data.decode("utf-8"))
  except ValueError as e:
    return "%s appeared incomplete: %s" % (path, e)
  return None


def _lines_ok(count):
  def check(path, data):
    if data.count(b"\n") != count or not data.endswith(b"\n"):
      return "%s appeared with %d of %d lines" % (path, data.count(b"\n"),
                                                  count)
    return None
  return check


_FIRST_STEP = r"step \d+: first step of this run"


def test_kill_run_pretraining(tmp_path):
  data = fh.write_records(str(tmp_path / "data.tfrecord"), 32)

  def args(folder):
    return fh.pretraining_flags(data, folder, num_train_steps=60,
                                save_checkpoints_steps=5, do_eval=True,
                                max_eval_steps=4)

  ref_dir, run_dir = str(tmp_path / "ref"), str(tmp_path / "run")
  seconds = _reference("run_pretraining.py", args(ref_dir))
  _kill_then_finish(
      "run_pretraining.py", args(run_dir), run_dir, 4, seconds,
      _training_check({"eval_results.txt": _lines_ok(6)}), _FIRST_STEP)
  assert _global_step(run_dir) == 60
  with open(os.path.join(run_dir, "eval_results.txt")) as f:
    assert "global_step = 60\n" in f.read()


def test_kill_run_classifier(tmp_path):
  data_dir = fh.write_tsv_task(str(tmp_path / "data"), rows=96)

  def args(folder):
    return fh.classifier_flags(data_dir, folder, num_train_epochs=2.0,
                               save_checkpoints_steps=8, do_predict=True)

  ref_dir, run_dir = str(tmp_path / "ref"), str(tmp_path / "run")
  seconds = _reference("run_classifier.py", args(ref_dir))
  cached = {name: data for name, data in _files(ref_dir).items()
            if name.endswith(".tf_record")}
  assert "train.tf_record" in cached
  check = _training_check({"test_results.tsv": _lines_ok(96)})
  _kill_then_finish("run_classifier.py", args(run_dir), run_dir, 5, seconds,
                    _same_as(cached, check), _FIRST_STEP)
  assert _global_step(run_dir) == 48  # 96 * 2 / 4.
  for name, expected in cached.items():
    assert open(os.path.join(run_dir, name), "rb").read() == expected, name


def test_kill_run_squad(tmp_path):
  train = fh.write_squad(str(tmp_path / "train.json"), num_questions=48)

  def args(folder):
    return fh.squad_flags(train, folder, save_checkpoints_steps=5,
                          do_predict=True, predict_file=train)

  ref_dir, run_dir = str(tmp_path / "ref"), str(tmp_path / "run")
  seconds = _reference("run_squad.py", args(ref_dir))
  cached = {name: data for name, data in _files(ref_dir).items()
            if name.endswith(".tf_record")}
  steps = _global_step(ref_dir)
  check = _training_check({"predictions.json": _json_ok,
                           "nbest_predictions.json": _json_ok})
  _kill_then_finish("run_squad.py", args(run_dir), run_dir, 6, seconds,
                    _same_as(cached, check), _FIRST_STEP)
  assert _global_step(run_dir) == steps
  with open(os.path.join(run_dir, "predictions.json")) as f:
    assert len(json.load(f)) == 48
  for name, expected in cached.items():
    assert open(os.path.join(run_dir, name), "rb").read() == expected, name
