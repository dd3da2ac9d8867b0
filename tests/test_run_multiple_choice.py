"""run_multiple_choice.py end to end, and its one-line errors.

Runs the script in a subprocess with the tiny conformance checkpoint on the
shared SWAG sample (10 questions, 4 endings): JSON lines for training and
evaluation, SWAG's CSV layout (no label column) for the test split.
"""

import csv
import json
import os
import types

from absl import flags
import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from helpers import read_lines
from helpers import run_script
from helpers import shared_path
from helpers import tiny_model_flags
from bert_tf.export import serving
import predict_saved_model
import run_multiple_choice

_ENDINGS = ["ending0", "ending1", "ending2", "ending3"]


def _sample():
  return [json.loads(line)
          for line in read_lines(shared_path("data", "swag", "sample.json"))]


def _write_swag_csv(path, questions, with_label):
  """SWAG's layout: an unnamed index column first; test: no label."""
  header = (["", "video-id", "fold-ind", "startphrase", "sent1", "sent2",
             "gold-source"] + _ENDINGS + (["label"] if with_label else []))
  with open(path, "w", encoding="utf-8", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(header)
    for k, q in enumerate(questions):
      writer.writerow([k, "anetv_%d" % k, k, q["sent1"] + " " + q["sent2"],
                       q["sent1"], q["sent2"], "gold"] +
                      [q[e] for e in _ENDINGS] +
                      ([q["label"]] if with_label else []))


def _data_dir(tmp_path):
  data_dir = tmp_path / "data"
  data_dir.mkdir()
  sample = "\n".join(read_lines(shared_path("data", "swag", "sample.json")))
  for name in ("train.json", "val.json"):
    (data_dir / name).write_text(sample + "\n", encoding="utf-8")
  _write_swag_csv(str(data_dir / "test.csv"), _sample(), with_label=False)
  return str(data_dir)


def _eval_results(path):
  return {key: float(value) for key, value in
          (line.split(" = ") for line in read_lines(path))}


@pytest.mark.parametrize("export_dir, problems", [
    ("/tmp/export", []),
    ("", ["At least one of --do_train, --do_eval or --do_predict must be "
          "set. (--export_dir alone exports only.)"])])
def test_export_dir_alone_is_a_run(tmp_path, export_dir, problems):
  # As run_classifier.py and run_squad.py: --export_dir alone exports the
  # output folder's checkpoint.
  values = flags.FlagValues()
  for name in ("do_train", "do_eval", "do_predict"):
    flags.DEFINE_boolean(name, False, "", flag_values=values)
  for name in ("max_seq_length", "train_batch_size", "eval_batch_size",
               "predict_batch_size"):
    flags.DEFINE_integer(name, 8, "", flag_values=values)
  flags.DEFINE_string("export_dir", export_dir, "", flag_values=values)
  flags.DEFINE_string("data_dir", str(tmp_path), "", flag_values=values)
  values(["run_multiple_choice.py"])
  assert run_multiple_choice._flag_problems(values) == problems


@pytest.mark.e2e
@pytest.mark.slow
def test_swag_sample_train_eval_predict_export_end_to_end(tmp_path):
  output_dir = str(tmp_path / "out")
  data_dir = _data_dir(tmp_path)
  export_dir = str(tmp_path / "export")
  result = run_script("run_multiple_choice.py", [
      "--do_train", "--do_eval", "--do_predict",
      "--export_dir=%s" % export_dir,
      "--data_dir=%s" % data_dir, "--output_dir=%s" % output_dir,
      "--max_seq_length=48", "--train_batch_size=4", "--num_train_epochs=1",
      "--eval_batch_size=4", "--predict_batch_size=4"] + tiny_model_flags())
  assert result.returncode == 0, result.stderr[-3000:]
  results = _eval_results(os.path.join(output_dir, "eval_results.txt"))
  assert sorted(results) == ["eval_accuracy", "eval_loss", "global_step",
                             "loss"]
  assert results["global_step"] == 2  # 10 questions / 4, one epoch.
  assert 0.0 <= results["eval_accuracy"] <= 1.0
  lines = read_lines(os.path.join(output_dir, "test_results.tsv"))
  assert len(lines) == 10  # Not a multiple of --predict_batch_size.
  for line in lines:
    cells = line.split("\t")
    probabilities = [float(x) for x in cells[:4]]
    assert sum(probabilities) == pytest.approx(1.0, abs=1e-5)
    assert int(cells[4]) == int(np.argmax(probabilities))
  assert "*INIT_FROM_CKPT*" in result.stderr
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(output_dir))
  shapes = reader.get_variable_to_shape_map()
  assert shapes["cls/multiple_choice/output_weights"] == [1, 32]
  assert shapes["cls/multiple_choice/output_bias"] == [1]
  assert not [name for name in os.listdir(output_dir) if ".tmp" in name]
  # The export serves the same probabilities as --do_predict.
  version = serving.resolve_version(export_dir)
  config, _, _ = serving.read_assets(version)
  assert config["kind"] == "multiple_choice"
  served = str(tmp_path / "served")
  predict_saved_model._multiple_choice(  # pylint: disable=protected-access
      version, config, types.SimpleNamespace(
          input_file=os.path.join(data_dir, "test.csv"), batch_size=3,
          output_dir=served))
  expected = [line.split("\t") for line in lines]
  got = [line.split("\t") for line in read_lines(
      os.path.join(served, "test_results.tsv"))]
  np.testing.assert_allclose(np.array([row[:4] for row in got], float),
                             np.array([row[:4] for row in expected], float),
                             atol=1e-6, rtol=0)
  assert [row[4] for row in got] == [row[4] for row in expected]


@pytest.mark.slow
def test_a_bad_row_stops_the_run_with_one_line(tmp_path):
  data_dir = tmp_path / "data"
  data_dir.mkdir()
  questions = _sample()
  questions[6]["label"] = 4
  (data_dir / "train.json").write_text(
      "\n".join(json.dumps(q) for q in questions) + "\n", encoding="utf-8")
  output_dir = str(tmp_path / "out")
  result = run_script("run_multiple_choice.py", [
      "--do_train", "--data_dir=%s" % data_dir, "--max_seq_length=48",
      "--output_dir=%s" % output_dir] + tiny_model_flags())
  assert result.returncode == 1
  assert "Traceback" not in result.stderr
  assert result.stderr.strip().splitlines()[-1] == (
      "error: %s:7: label 4 is out of range for 4 endings (expected 0..3)" %
      (data_dir / "train.json"))
  assert not os.path.exists(os.path.join(output_dir, "train.tf_record"))


@pytest.mark.slow
def test_accumulation_bf16_and_two_replicas_train_and_evaluate(tmp_path):
  # The shared training options: 2 micro-batches per update, bf16 compute,
  # a mirrored strategy over 2 CPU devices (the session runner: both stacks).
  output_dir = str(tmp_path / "out")
  result = run_script("run_multiple_choice.py", [
      "--do_train", "--do_eval", "--data_dir=%s" % _data_dir(tmp_path),
      "--output_dir=%s" % output_dir, "--max_seq_length=48",
      "--train_batch_size=4", "--num_train_epochs=2",
      "--gradient_accumulation_steps=2", "--precision=bf16",
      "--distribution_strategy=mirrored", "--num_cpu_devices=2",
      "--runner=session"] + tiny_model_flags())
  assert result.returncode == 0, result.stderr[-3000:]
  results = _eval_results(os.path.join(output_dir, "eval_results.txt"))
  assert results["global_step"] == 2  # 10 questions / 8 per update * 2.
  assert results["eval_loss"] == pytest.approx(np.log(4.0), abs=0.05)
