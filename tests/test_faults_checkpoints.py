"""Checkpoint faults (bert_tf/train/checkpoints.py, the one owner of a
run's checkpoints): folder names that are glob patterns, damaged state
files and records, damaged checkpoint bytes, divergence, full disks.

Each fault is refused in one line naming the file and what to do, before
any graph is built, or handled so that the run trains on.
"""

import json
import os
import shutil
import tempfile

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import fault_helpers as fh
from helpers import RUNNERS
from helpers import tiny_model_flags
from helpers import write_tsv
from bert_tf.checks import checkpoint as checkpoint_checks
from bert_tf.cli import entry
from bert_tf.train import best as best_lib
from bert_tf.train import checkpoints


def _save_steps(folder, steps, value=lambda step: float(step), keep=5,
                recover=False):
  """Saves one variable `w` at each of `steps` into `folder` with the
  runners' saver (`checkpoints.Saving`), after taking over the folder's
  list of checkpoints with `recover` (as a resumed run's session does);
  returns the prefixes."""
  saving = checkpoints.Saving(keep)
  os.makedirs(folder, exist_ok=True)
  paths = []
  with tf.Graph().as_default():
    w = tf.get_variable("w", [3], initializer=tf.zeros_initializer())
    slot = tf.get_variable("w/adam_v", [3], initializer=tf.zeros_initializer(),
                           trainable=False)
    given = tf.placeholder(tf.float32, [])
    assign = tf.group(w.assign(tf.fill([3], given)),
                      slot.assign(tf.fill([3], 1e12)))
    saver = saving.saver()
    saver.build()
    if recover:
      saver.recover_last_checkpoints(checkpoints.read_state(folder)[1])
      assert [os.path.basename(p) for p in saver.last_checkpoints] == [
          os.path.basename(p) for p in checkpoints.read_state(folder)[1]]
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      for step in steps:
        session.run(assign, {given: value(step)})
        paths.append(saver.save(session, os.path.join(folder, "model.ckpt"),
                                global_step=step))
  return paths


def _restored_w(prefix):
  with tf.Graph().as_default():
    w = tf.get_variable("w", [3])
    tf.get_variable("w/adam_v", [3], trainable=False)
    saver = checkpoints.Saving().saver()
    saver.build()
    with tf.Session() as session:
      saver.restore(session, prefix)
      return session.run(w)


def _steps_in(folder):
  return sorted(int(name[len("model.ckpt-"):-len(".index")])
                for name in os.listdir(folder)
                if name.startswith("model.ckpt-") and name.endswith(".index"))


# ---------------------------------------------------------------------------
# A folder whose name is a glob pattern.
# ---------------------------------------------------------------------------


def test_a_bracketed_folder_keeps_restores_and_leaves_its_twin_alone(
    tmp_path):
  folder = str(tmp_path / "pre[2]")
  twin = str(tmp_path / "pre2")  # What the glob `pre[2]/...` matches.
  _save_steps(twin, [1, 2, 3])
  _save_steps(folder, [1, 2, 3, 4, 5, 6, 7])
  assert _steps_in(folder) == [3, 4, 5, 6, 7]  # The newest 5 kept.
  assert _steps_in(twin) == [1, 2, 3]
  assert checkpoints.latest(folder) == os.path.join(folder, "model.ckpt-7")
  assert _restored_w(checkpoints.latest(folder)).tolist() == [7.0] * 3
  # A later saver takes over the state file's list (as a resumed run does).
  _save_steps(folder, [8, 9], recover=True)
  assert _steps_in(folder) == [5, 6, 7, 8, 9]
  state = (tmp_path / "pre[2]" / "checkpoint").read_text()
  assert state.splitlines()[0] == 'model_checkpoint_path: "model.ckpt-9"'


def test_a_bracketed_folder_resolves_as_init_checkpoint_and_export(tmp_path):
  folder = str(tmp_path / "run[1]")
  _save_steps(folder, [4])
  prefix = os.path.join(folder, "model.ckpt-4")
  assert checkpoints.resolve(folder) == prefix
  assert checkpoints.checkpoint_to_export(folder, None) == prefix
  assert checkpoint_checks.check_checkpoint(prefix) == []


def test_a_bracketed_prefix_links_are_removed_at_exit(tmp_path, monkeypatch):
  folder = str(tmp_path / "run[1]")
  _save_steps(folder, [4])
  temp = tmp_path / "temp"
  temp.mkdir()
  monkeypatch.setattr(tempfile, "tempdir", str(temp))
  at_exit = []
  monkeypatch.setattr(checkpoint_checks.atexit, "register",
                      lambda *call: at_exit.append(call))
  readable = checkpoint_checks.readable_prefix(
      os.path.join(folder, "model.ckpt-4"))
  assert readable.startswith(str(temp)) and tf.train.load_checkpoint(readable)
  for function, *args in at_exit:
    function(*args)
  assert not os.listdir(temp)


def _classify(tmp_path, output_dir, runner, epochs):
  data = str(tmp_path / "data")
  rows = [["the a is %s of" % ("john", "city")[i % 2], str(i % 2)]
          for i in range(16)]
  for split, count in (("train", 16), ("dev", 8)):
    write_tsv(os.path.join(data, split + ".tsv"), rows[:count])
  return fh.run("run_classifier.py", [
      "--runner=" + runner, "--task_name=tsv", "--do_train", "--do_eval",
      "--data_dir=" + data, "--output_dir=" + output_dir,
      "--max_seq_length=8", "--train_batch_size=8",
      "--num_train_epochs=%d" % epochs, "--learning_rate=1e-3",
      "--save_checkpoints_secs=0", "--eval_every_steps=2",
      "--keep_best_by=eval_loss"] + tiny_model_flags())


@pytest.mark.slow
@pytest.mark.parametrize("runner", RUNNERS)
def test_a_bracketed_output_dir_trains_evaluates_and_resumes(tmp_path,
                                                             runner):
  output_dir = str(tmp_path / "pre[2]")
  first = _classify(tmp_path, output_dir, runner, epochs=2)
  assert first.returncode == 0, first.stderr[-3000:]
  record = json.loads(open(os.path.join(output_dir, "best",
                                        "best.json")).read())
  assert [int(e["global_step"]) for e in record["evaluations"]] == [2, 4]
  second = _classify(tmp_path, output_dir, runner, epochs=3)
  assert second.returncode == 0, second.stderr[-3000:]
  assert "step 5: first step of this run (resumed)" in second.stderr
  record = json.loads(open(os.path.join(output_dir, "best",
                                        "best.json")).read())
  assert [int(e["global_step"]) for e in record["evaluations"]] == [2, 4, 6]
  assert _steps_in(output_dir)[-1] == 6
  # At max_steps already: no training (the Estimator's own check globs the
  # folder's name, sees no checkpoint and trained one step more).
  third = _classify(tmp_path, output_dir, runner, epochs=3)
  assert third.returncode == 0, third.stderr[-3000:]
  assert _steps_in(output_dir)[-1] == 6


# ---------------------------------------------------------------------------
# The state file and the best record: names read back are checked.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("content, what", [
    (b"\xff\xfe model_checkpoint_path", "byte 0xff at offset 0 is not UTF-8"),
    (b"", "not a checkpoint state file (empty)"),
    (b"model_checkpoint_path: {{{", "not a checkpoint state file (it does "
     "not parse)"),
    (b'model_checkpoint_path: "model.ckpt-999"\n', "it names %s, which is "
     "not there"),
])
def test_a_damaged_state_file_is_one_line_before_any_graph(tmp_path, content,
                                                           what):
  folder = str(tmp_path / "out")
  _save_steps(folder, [60])
  state = os.path.join(folder, "checkpoint")
  with open(state, "wb") as f:
    f.write(content)
  if "%s" in what:
    what = what % os.path.join(folder, "model.ckpt-999")
  for call, flag in ((checkpoints.start_training, "--output_dir"),
                     (checkpoints.resolve, "--init_checkpoint")):
    with pytest.raises(ValueError) as info:
      held = call(folder)
      if held is not None:
        held.release()
    message = str(info.value)
    assert message.startswith("%s: %s: " % (flag, state)), message
    assert what in message and "\n" not in message
    assert message.endswith(
        'model.ckpt-60 is there: to resume from it, replace the file with '
        'the line model_checkpoint_path: "model.ckpt-60"; or delete the file '
        "to start over"), message


def test_a_state_file_without_checkpoints_says_to_delete_it(tmp_path):
  (tmp_path / "checkpoint").write_bytes(b"\x00\xff")
  with pytest.raises(ValueError, match="no checkpoint is there: delete the "
                     "file to start over$"):
    checkpoints.latest(str(tmp_path))


def _fake_checkpoint(folder, step):
  for suffix in (".index", ".data-00000-of-00001"):
    with open(os.path.join(folder, "model.ckpt-%d%s" % (step, suffix)),
              "w") as f:
      f.write(str(step))
  return os.path.join(folder, "model.ckpt-%d" % step)


@pytest.mark.parametrize("name", ["*", "model.ckpt-*", "../model.ckpt-3",
                                  "model.ckpt-3/..", "bert_model.ckpt",
                                  "model.ckpt-4"])
def test_a_best_record_naming_no_kept_checkpoint_is_refused(tmp_path, name):
  out = str(tmp_path)
  keeper = best_lib.BestKeeper(out, "eval_accuracy")
  keeper.update({"global_step": 3, "eval_accuracy": 0.5},
                _fake_checkpoint(out, 3))
  record_path = os.path.join(out, "best", "best.json")
  record = json.loads(open(record_path).read())
  record["best_checkpoint"] = name
  with open(record_path, "w") as f:
    json.dump(record, f)
  with pytest.raises(ValueError) as info:
    best_lib.BestKeeper(out, "eval_accuracy")
  message = str(info.value)
  assert message.startswith("%s: best_checkpoint is %s" %
                            (record_path, json.dumps(name))), message
  assert message.endswith("delete it to start the record anew")
  assert "\n" not in message
  # Nothing was removed: the kept checkpoint and the run's are there.
  assert sorted(os.listdir(os.path.join(out, "best"))) == [
      "best.json", "checkpoint", "eval_results.txt",
      "model.ckpt-3.data-00000-of-00001", "model.ckpt-3.index"]
  assert _steps_in(out) == [3]


def test_the_next_best_replaces_the_kept_one_by_exact_names(tmp_path):
  out = str(tmp_path)
  keeper = best_lib.BestKeeper(out, "eval_accuracy")
  keeper.update({"global_step": 3, "eval_accuracy": 0.5},
                _fake_checkpoint(out, 3))
  # A file a glob of the old prefix would take, and one of another step.
  for name in ("model.ckpt-3.notes", "model.ckpt-30.index"):
    (tmp_path / "best" / name).write_text("keep me")
  keeper.update({"global_step": 6, "eval_accuracy": 0.7},
                _fake_checkpoint(out, 6))
  assert sorted(os.listdir(os.path.join(out, "best"))) == [
      "best.json", "checkpoint", "eval_results.txt",
      "model.ckpt-3.notes", "model.ckpt-30.index",
      "model.ckpt-6.data-00000-of-00001", "model.ckpt-6.index"]
  assert keeper.best_checkpoint() == os.path.join(out, "best",
                                                  "model.ckpt-6")


# ---------------------------------------------------------------------------
# Damaged checkpoint bytes.
# ---------------------------------------------------------------------------


def _damaged_copy(folder, name="bert_model.ckpt"):
  os.makedirs(folder, exist_ok=True)
  source = fh.tiny_checkpoint()
  for suffix in (".index", ".data-00000-of-00001"):
    shutil.copy(source + suffix, os.path.join(folder, name + suffix))
  data = os.path.join(folder, name + ".data-00000-of-00001")
  with open(data, "r+b") as f:
    f.seek(os.path.getsize(data) // 2)
    byte = f.read(1)
    f.seek(-1, os.SEEK_CUR)
    f.write(bytes([byte[0] ^ 0xFF]))
  return os.path.join(folder, name), data


def test_damaged_checkpoint_bytes_are_refused_in_one_line(tmp_path):
  prefix, data = _damaged_copy(str(tmp_path / "model"))
  with pytest.raises(ValueError) as info:
    checkpoint_checks.check_checkpoint(prefix)
  message = str(info.value)
  assert message.startswith("--init_checkpoint: %s is damaged: tensor " %
                            data), message
  assert message.endswith(" fails its checksum; copy it again"), message
  assert "\n" not in message
  # The same as the checkpoint a run would resume from.
  out = str(tmp_path / "out")
  _, data = _damaged_copy(out, "model.ckpt-5")
  tf.train.update_checkpoint_state(out, "model.ckpt-5")
  with pytest.raises(ValueError, match=r"^--output_dir: %s is damaged: .*"
                     r"training would resume from it" % data):
    checkpoints.check_resume(out)


@pytest.mark.slow
def test_damaged_init_checkpoint_is_one_line_from_a_script(tmp_path):
  prefix, data = _damaged_copy(str(tmp_path / "model"))
  records = fh.write_records(str(tmp_path / "data.tfrecord"), 8)
  out = str(tmp_path / "out")
  result = fh.run("run_pretraining.py", fh.pretraining_flags(
      records, out, init_checkpoint=prefix))
  assert result.returncode == 1
  line = fh.last_line(result.stderr)
  assert line.startswith("error: --init_checkpoint: %s is damaged" % data)
  assert len(line) < 400 and "Traceback" not in result.stderr
  assert not os.path.exists(os.path.join(out, "graph.pbtxt"))


@pytest.mark.slow
def test_a_damaged_state_file_is_one_line_from_a_script(tmp_path):
  records = fh.write_records(str(tmp_path / "data.tfrecord"), 8)
  out = str(tmp_path / "out")
  first = fh.run("run_pretraining.py", fh.pretraining_flags(
      records, out, num_train_steps=2))
  assert first.returncode == 0, first.stderr[-3000:]
  os.remove(os.path.join(out, "graph.pbtxt"))
  with open(os.path.join(out, "checkpoint"), "w") as f:
    f.write('model_checkpoint_path: "model.ckpt-999"\n')
  result = fh.run("run_pretraining.py", fh.pretraining_flags(
      records, out, num_train_steps=4))
  assert result.returncode == 1
  line = fh.last_line(result.stderr)
  assert line.startswith("error: --output_dir: %s: it names %s, which is "
                         "not there; model.ckpt-2 is there" % (
                             os.path.join(out, "checkpoint"),
                             os.path.join(out, "model.ckpt-999"))), line
  assert not os.path.exists(os.path.join(out, "graph.pbtxt"))


# ---------------------------------------------------------------------------
# After a divergence.
# ---------------------------------------------------------------------------


def test_divergence_prunes_to_a_checkpoint_a_lower_rate_recovers_from(
    tmp_path):
  out = str(tmp_path)
  values = {2: 0.5, 4: 3e4, 6: 1e30, 8: float("nan")}
  _save_steps(out, [2, 4, 6, 8], value=values.get)
  kept, removed = checkpoints.prune_after_divergence(out)
  assert kept == os.path.join(out, "model.ckpt-2")
  assert removed == ["model.ckpt-8 (w is not finite)",
                     "model.ckpt-6 (w reaches 1e+30)",
                     "model.ckpt-4 (w reaches 3e+04)"]
  assert _steps_in(out) == [2]
  assert checkpoints.latest(out) == kept
  # The optimizer's slot (1e12 here) is no weight: step 2 is sane.
  assert checkpoints.prune_after_divergence(out) == (kept, [])


def test_divergence_without_a_sane_checkpoint_starts_over(tmp_path):
  out = str(tmp_path)
  _save_steps(out, [2, 4], value=lambda step: 1e30)
  kept, removed = checkpoints.prune_after_divergence(out)
  assert kept is None and len(removed) == 2
  assert os.listdir(out) == []
  assert checkpoints.latest(out) is None


def test_sane_weights_of_the_tiny_model_are_below_the_bound():
  reader = tf.train.load_checkpoint(fh.tiny_checkpoint())
  largest = max(float(np.max(np.abs(reader.get_tensor(name))))
                for name in reader.get_variable_to_shape_map())
  assert largest < checkpoints.SANE_WEIGHT


# ---------------------------------------------------------------------------
# A save on a full disk.
# ---------------------------------------------------------------------------

_SAVE_FAILED = ("%s: saving checkpoint model.ckpt-0 failed: the disk is full "
                "or the file-size limit was reached (%s); free space and "
                "rerun")


@pytest.mark.parametrize("error, cause", [
    (tf.errors.OutOfRangeError(None, None, (
        "Graph execution error:\n\nDetected at node 'save/SaveV2' defined at "
        "(most recent call last):\n  File \"run_pretraining.py\", line 1\n"
        "Node: 'save/SaveV2'\n{0}/model.ckpt-0_temp/part-00000-of-00001."
        "data-00000-of-00001.tempstate1950643412232864868; File too large\n"
        "\t [[{{{{node save/SaveV2}}}}]]")), "file too large"),
    (tf.errors.ResourceExhaustedError(None, None, (
        "{0}/model.ckpt-0_temp/part-00000-of-00001.data-00000-of-00001."
        "tempstate77; No space left on device\n\t [[{{{{node save/SaveV2}}}}]]"
        "\nHint: If you want to see a list of allocated tensors when OOM "
        "happens, add report_tensor_allocations_upon_oom to RunOptions for "
        "current allocation info.")), "no space left on device"),
])
@pytest.mark.parametrize("folder", ["/runs/out", "/runs/pre[2]"])
def test_a_save_on_a_full_disk_names_the_folder_and_the_cause(error, cause,
                                                              folder):
  error = type(error)(None, None, error.message.format(folder))
  assert entry.one_line(error) == _SAVE_FAILED % (folder, cause)


@pytest.mark.slow
def test_a_save_on_a_full_disk_is_one_line_from_a_script(tmp_path):
  # A vocabulary of 40,000: the weights outgrow the limit, the graph not.
  with open(fh.tiny("bert_config.json")) as f:
    config = json.load(f)
  config["vocab_size"] = 40000
  config_file = str(tmp_path / "bert_config.json")
  with open(config_file, "w") as f:
    json.dump(config, f)
  records = fh.write_records(str(tmp_path / "data.tfrecord"), 8)
  out = str(tmp_path / "out")
  result = fh.run("run_pretraining.py", fh.pretraining_flags(
      records, out, num_train_steps=2, init_checkpoint="",
      bert_config_file=config_file), file_size_limit=4000000)
  assert result.returncode == 1
  assert fh.last_line(result.stderr) == "error: " + _SAVE_FAILED % (
      out, "file too large")
  assert "Traceback" not in result.stderr
