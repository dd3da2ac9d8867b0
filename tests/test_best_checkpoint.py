"""Tests for evaluation during fine-tuning (bert_tf/train/best.py):
--eval_every_steps, --keep_best_by, --early_stopping_patience, the export
of the best checkpoint, and a resumed run keeping the record."""

import json
import os

import pytest

from helpers import read_lines
from helpers import run_script
from helpers import shared_path
from helpers import RUNNERS
from helpers import tiny_model_flags
from helpers import write_tsv

from bert_tf.train import best as best_lib
from bert_tf.train import options as training_options


# ----------------------------------------------------------------------------
# The keeper and the loop, with a fake runner.
# ----------------------------------------------------------------------------


class _FakeRunner(object):
  """Writes empty checkpoint files as training "reaches" a step."""

  def __init__(self, model_dir, scores):
    self.model_dir = model_dir
    self.scores = scores  # step -> eval value
    self.trained_to, self.evaluated = [], []

  def write_checkpoint(self, step):
    for suffix in (".index", ".data-00000-of-00001"):
      with open(os.path.join(self.model_dir, "model.ckpt-%d%s" %
                             (step, suffix)), "w") as f:
        f.write(str(step))
    with open(os.path.join(self.model_dir, "checkpoint"), "w") as f:
      f.write('model_checkpoint_path: "model.ckpt-%d"\n' % step)

  def train(self, max_steps):
    self.trained_to.append(max_steps)
    self.write_checkpoint(max_steps)

  def evaluate(self):
    with open(os.path.join(self.model_dir, "checkpoint")) as f:
      step = int(f.read().split("-")[-1].strip().strip('"'))
    self.evaluated.append(step)
    return {"global_step": step, "eval_accuracy": self.scores[step],
            "eval_loss": 1.0 - self.scores[step]}


def _loop(runner, keeper, num_steps=10, every=3):
  return best_lib.train_with_evaluation(runner, runner.train,
                                        runner.evaluate, num_steps, every,
                                        keeper)


def test_loop_trains_to_each_multiple_and_keeps_the_best(tmp_path):
  runner = _FakeRunner(str(tmp_path), {3: 0.5, 6: 0.8, 9: 0.7, 10: 0.6})
  keeper = best_lib.BestKeeper(str(tmp_path), "eval_accuracy")
  results = _loop(runner, keeper)
  assert runner.trained_to == [3, 6, 9, 10]
  assert runner.evaluated == [3, 6, 9, 10]
  assert results["global_step"] == 10
  best_dir = tmp_path / "best"
  assert keeper.best_checkpoint() == str(best_dir / "model.ckpt-6")
  assert sorted(os.listdir(best_dir)) == [
      "best.json", "checkpoint", "eval_results.txt",
      "model.ckpt-6.data-00000-of-00001", "model.ckpt-6.index"]
  assert "eval_accuracy = 0.8" in read_lines(best_dir / "eval_results.txt")
  record = json.loads((best_dir / "best.json").read_text())
  assert (record["best_step"], record["since_best"]) == (6, 2)


def test_loss_keys_are_better_lower():
  assert not best_lib.higher_is_better("eval_loss")
  assert best_lib.higher_is_better("eval_f1")


def test_patience_stops_after_evaluations_without_improvement(tmp_path):
  runner = _FakeRunner(str(tmp_path), {3: 0.9, 6: 0.5, 9: 0.5, 10: 1.0})
  keeper = best_lib.BestKeeper(str(tmp_path), "eval_loss", patience=1)
  _loop(runner, keeper)
  # eval_loss 0.1 at step 3, then 0.5: one evaluation without improvement.
  assert runner.evaluated == [3, 6]
  assert keeper.should_stop()
  # Run again: the record says it stopped; nothing more is trained.
  again = _FakeRunner(str(tmp_path), runner.scores)
  _loop(again, best_lib.BestKeeper(str(tmp_path), "eval_loss", patience=1))
  assert again.trained_to == [] and again.evaluated == []


def test_resume_after_a_kill_keeps_the_record_and_evaluates_the_gap(
    tmp_path):
  scores = {3: 0.6, 6: 0.4, 9: 0.5, 10: 0.45}
  runner = _FakeRunner(str(tmp_path), scores)
  keeper = best_lib.BestKeeper(str(tmp_path), "eval_accuracy")
  runner.write_checkpoint(3)
  keeper.update(runner.evaluate(), str(tmp_path / "model.ckpt-3"))
  runner.write_checkpoint(6)  # Killed after saving step 6, before its eval.
  resumed = _FakeRunner(str(tmp_path), scores)
  keeper = best_lib.BestKeeper(str(tmp_path), "eval_accuracy")
  assert keeper.record["best_step"] == 3
  _loop(resumed, keeper)
  assert resumed.evaluated == [6, 9, 10] and resumed.trained_to == [9, 10]
  assert keeper.record["best_step"] == 3  # 0.6 still the best.
  assert [int(e["global_step"]) for e in keeper.record["evaluations"]] == [
      3, 6, 9, 10]


def test_another_key_on_resume_is_refused(tmp_path):
  keeper = best_lib.BestKeeper(str(tmp_path), "eval_accuracy")
  _FakeRunner(str(tmp_path), {}).write_checkpoint(1)
  keeper.update({"global_step": 1, "eval_accuracy": 0.5},
                str(tmp_path / "model.ckpt-1"))
  with pytest.raises(ValueError, match="ranks by 'eval_accuracy'"):
    best_lib.BestKeeper(str(tmp_path), "eval_loss")


def test_unknown_key_names_the_keys_the_evaluation_gives():
  with pytest.raises(ValueError) as e:
    best_lib.check_key("eval_f2", {"eval_f1", "eval_loss"})
  assert str(e.value) == ("--keep_best_by=eval_f2: the evaluation gives "
                          "eval_f1, eval_loss")


# ----------------------------------------------------------------------------
# End to end through run_classifier.py.
# ----------------------------------------------------------------------------


def _data(folder):
  rows = [["the a is %s of" % ("john", "city")[i % 2], str(i % 2)]
          for i in range(24)]
  for split, count in (("train", 24), ("dev", 8), ("test", 4)):
    write_tsv(os.path.join(folder, split + ".tsv"), rows[:count])
  return folder


def _classify(tmp_path, extra, output_dir=None, epochs=2):
  output_dir = output_dir or str(tmp_path / "out")
  result = run_script("run_classifier.py", [
      "--task_name=tsv", "--do_train", "--do_eval",
      "--data_dir=" + _data(str(tmp_path / "data")),
      "--output_dir=" + output_dir, "--max_seq_length=8",
      "--train_batch_size=8", "--num_train_epochs=%d" % epochs,
      "--learning_rate=1e-3", "--save_checkpoints_secs=0"] + extra +
                      tiny_model_flags())
  return result, output_dir


def _eval_results(path):
  return {k: float(v) for k, v in
          (line.split(" = ") for line in read_lines(path))}


@pytest.mark.slow
@pytest.mark.parametrize("runner", RUNNERS)
def test_best_checkpoint_is_kept_predicted_with_and_exported(tmp_path,
                                                             runner):
  export_dir = str(tmp_path / "export")
  result, output_dir = _classify(tmp_path, [
      "--runner=" + runner, "--eval_every_steps=2",
      "--keep_best_by=eval_loss", "--do_predict",
      "--export_dir=" + export_dir])
  assert result.returncode == 0, result.stderr[-3000:]
  best_dir = os.path.join(output_dir, "best")
  record = json.loads(open(os.path.join(best_dir, "best.json")).read())
  assert [int(e["global_step"]) for e in record["evaluations"]] == [2, 4, 6]
  losses = {int(e["global_step"]): e["eval_loss"]
            for e in record["evaluations"]}
  assert record["best_step"] == min(losses, key=losses.get)
  kept = _eval_results(os.path.join(best_dir, "eval_results.txt"))
  assert kept["global_step"] == record["best_step"]
  assert kept["eval_loss"] == pytest.approx(min(losses.values()), rel=1e-6)
  assert os.path.exists(os.path.join(
      best_dir, "model.ckpt-%d.index" % record["best_step"]))
  # The final eval_results.txt is the last step's; prediction and the
  # export use the best.
  assert _eval_results(os.path.join(output_dir,
                                    "eval_results.txt"))["global_step"] == 6
  best_prefix = os.path.join(best_dir, "model.ckpt-%d" % record["best_step"])
  assert "Predicting with the best checkpoint, %s" % best_prefix in (
      result.stderr)
  assert "Exporting %s" % best_prefix in result.stderr
  assert len(read_lines(os.path.join(output_dir, "test_results.tsv"))) == 4


@pytest.mark.slow
def test_early_stopping_and_resume_keep_the_record(tmp_path):
  # learning_rate 0: eval_loss never improves after the first evaluation.
  result, output_dir = _classify(tmp_path, [
      "--eval_every_steps=1", "--keep_best_by=eval_loss",
      "--early_stopping_patience=2", "--learning_rate=0"], epochs=3)
  assert result.returncode == 0, result.stderr[-3000:]
  assert "Early stopping at step 3" in result.stderr
  record = json.loads(open(os.path.join(output_dir, "best",
                                        "best.json")).read())
  assert [int(e["global_step"]) for e in record["evaluations"]] == [1, 2, 3]
  assert record["best_step"] == 1
  # A later run in the same folder, with more patience, resumes the record.
  result, _ = _classify(tmp_path, [
      "--eval_every_steps=3", "--keep_best_by=eval_loss",
      "--learning_rate=0"], output_dir=output_dir, epochs=3)
  assert result.returncode == 0, result.stderr[-3000:]
  record = json.loads(open(os.path.join(output_dir, "best",
                                        "best.json")).read())
  assert [int(e["global_step"]) for e in record["evaluations"]] == [
      1, 2, 3, 6, 9]
  assert record["best_step"] == 1


@pytest.mark.slow
def test_best_checkpoint_under_mirrored_two_cpu_replicas(tmp_path):
  result, output_dir = _classify(tmp_path, [
      "--eval_every_steps=3", "--keep_best_by=eval_accuracy",
      "--distribution_strategy=mirrored", "--num_cpu_devices=2",
      "--num_gpus=0"], epochs=1)
  assert result.returncode == 0, result.stderr[-3000:]
  assert "Training on 2 replicas" in result.stderr
  record = json.loads(open(os.path.join(output_dir, "best",
                                        "best.json")).read())
  assert [int(e["global_step"]) for e in record["evaluations"]] == [3]


@pytest.mark.slow
@pytest.mark.parametrize("flags,message", [
    (["--eval_every_steps=2", "--keep_best_by=eval_f2"],
     "--keep_best_by=eval_f2: the evaluation gives eval_accuracy, eval_loss, "
     "global_step, loss"),
    (["--keep_best_by=eval_loss"],
     "--keep_best_by needs --eval_every_steps (the evaluations that rank "
     "the checkpoints)"),
])
def test_bad_best_checkpoint_flags_are_one_line(tmp_path, flags, message):
  result, _ = _classify(tmp_path, flags)
  assert result.returncode == 1
  assert result.stderr.strip().splitlines()[-1] == "error: " + message


@pytest.mark.slow
def test_run_ner_keeps_the_best_by_entity_f1(tmp_path):
  # On the session runner, both stacks' runner (the keeping itself is the
  # loop's, run on each runner above; what is NER's here is its F1 key).
  data = tmp_path / "data"
  data.mkdir()
  for name, count in (("eng.train", 12), ("eng.testa", 10)):
    lines, seen = [], 0
    for line in read_lines(shared_path("data", "ner", "conll2003", name)):
      if not line.strip():
        seen += 1
        if seen >= count:
          break
      lines.append(line)
    (data / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
  output_dir = str(tmp_path / "out")
  result = run_script("run_ner.py", [
      "--runner=session", "--data_dir=%s" % data,
      "--output_dir=" + output_dir, "--max_seq_length=24", "--doc_stride=8",
      "--do_train", "--do_eval", "--train_batch_size=8",
      "--num_train_epochs=1", "--learning_rate=1e-3",
      "--save_checkpoints_secs=0", "--eval_every_steps=2",
      "--keep_best_by=eval_f1"] + tiny_model_flags())
  assert result.returncode == 0, result.stderr[-3000:]
  record = json.loads(open(os.path.join(output_dir, "best",
                                        "best.json")).read())
  steps = [int(e["global_step"]) for e in record["evaluations"]]
  assert steps[:-1] == list(range(2, steps[-1], 2)) and len(steps) >= 2
  kept = _eval_results(os.path.join(output_dir, "best", "eval_results.txt"))
  assert kept["eval_f1"] == max(e["eval_f1"] for e in record["evaluations"])
  assert "eval_f1_PER" in kept


def test_a_worker_that_is_not_the_chief_trains_to_the_same_steps(tmp_path):
  runner = _FakeRunner(str(tmp_path), {})
  assert best_lib.train_with_evaluation(runner, runner.train, None, 10, 3,
                                        None) is None
  assert runner.trained_to == [3, 6, 9, 10] and runner.evaluated == []


def _run(**values):
  """`RunOptions` with the evaluation flags (and steps) given."""
  evaluation = {k: values.pop(k) for k in ("eval_every_steps", "keep_best_by",
                                           "early_stopping_patience")
                if k in values}
  evaluation = training_options.EvalOptions(**dict(
      dict(eval_every_steps=2, keep_best_by="eval_loss"), **evaluation))
  strategy = values.pop("distribution_strategy", "none")
  return training_options.RunOptions(
      evaluation=evaluation,
      distribute=training_options.DistributeOptions(
          distribution_strategy=strategy),
      **dict(dict(do_train=True, do_eval=True), **values))


@pytest.mark.parametrize("values,message", [
    ({"eval_every_steps": 0}, "--eval_every_steps: got 0, expected at least 1"),
    ({"do_eval": False}, "--eval_every_steps needs --do_train and --do_eval"),
    ({"early_stopping_patience": 2, "keep_best_by": None},
     "--early_stopping_patience needs --keep_best_by"),
    ({"early_stopping_patience": 2,
      "distribution_strategy": "multi_worker_mirrored"},
     "--early_stopping_patience: not with --distribution_strategy="
     "multi_worker_mirrored"),
])
def test_flag_problems(values, message):
  problems = training_options.evaluation_problems(_run(**values))
  assert len(problems) == 1 and problems[0].startswith(message), problems


def test_good_flags_have_no_problems():
  run = _run(early_stopping_patience=3)
  assert training_options.evaluation_problems(run) == []
  assert run.evaluation == training_options.EvalOptions(2, "eval_loss", 3)
