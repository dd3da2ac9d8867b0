"""The two runners (bert_tf/runner/): one interface, the same numbers.

On TensorFlow 2.15 a `--deterministic` run gives the same checkpoint (every
variable bit for bit) and the same output files through the Estimator and
the session runner, for each script, plain and with the training options
(two CPU replicas, accumulation, LAMB, bf16, XLA). On a stack without
`tf.estimator` the same scripts run through the session runner (these
end-to-end tests then check the outputs alone), and the runner flag refuses
what cannot run there in one line.
"""

import filecmp
import json
import os

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from helpers import data_path
from helpers import HAS_ESTIMATOR
from helpers import needs_estimator
from helpers import read_lines
from helpers import sgd_train_spec
from helpers import run_script
from helpers import shared_path
from helpers import tiny_model_flags
from helpers import write_tsv
from test_run_ner import _conll
from test_run_ner import _head_of_conll
from test_run_pretraining import _write_records
from test_run_squad import _real_squad_subset

from bert_tf.runner import select as runner_lib
from bert_tf.runner import session as session_runner
from bert_tf.train import checkpoints
from bert_tf.train import options as training_options
from bert_tf.train import spec as spec_lib

_ENV = {"TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}


# ----------------------------------------------------------------------------
# The flag.
# ----------------------------------------------------------------------------


def _run(**fields):
  tpu = training_options.TpuOptions(**fields)
  return training_options.RunOptions(tpu=tpu)


def test_auto_takes_the_estimator_exactly_where_tf_estimator_exists():
  assert _run().tpu.runner_name == ("estimator" if HAS_ESTIMATOR
                                    else "session")
  assert _run(runner="session").tpu.runner_name == "session"
  assert training_options.runner_problems(_run()) == []
  assert training_options.runner_problems(_run(runner="session")) == []


def test_runner_problems_are_one_line_each(monkeypatch):
  assert training_options.runner_problems(_run(runner="keras")) == [
      "--runner=keras: expected one of auto, estimator, session"]
  assert "not --runner=session" in training_options.runner_problems(
      _run(runner="session", use_tpu=True))[0] or not HAS_ESTIMATOR
  # A stack without tf.estimator (TensorFlow 2.16 on).
  monkeypatch.setattr(spec_lib, "estimator_available", lambda: False)
  [problem] = training_options.runner_problems(_run(runner="estimator"))
  assert problem.startswith("--runner=estimator needs tf.estimator")
  assert "use --runner=session" in problem
  [problem] = training_options.runner_problems(_run(use_tpu=True))
  assert problem.startswith("--use_tpu: TPU training needs the TPUEstimator")
  assert "TensorFlow 2.15 stack" in problem


def test_without_tf_estimator_a_model_fn_returns_a_model_spec(monkeypatch):
  with tf.Graph().as_default():
    spec = spec_lib.model_spec(mode=spec_lib.ModeKeys.PREDICT,
                               predictions={"x": tf.constant([1])})
  if HAS_ESTIMATOR:  # The reference's users can hand it to a TPUEstimator.
    assert isinstance(spec, tf.estimator.tpu.TPUEstimatorSpec)
    assert spec_lib.ModeKeys.PREDICT == tf.estimator.ModeKeys.PREDICT
  monkeypatch.setattr(spec_lib, "estimator_available", lambda: False)
  spec = spec_lib.model_spec(mode=spec_lib.ModeKeys.PREDICT,
                             predictions={"x": 1})
  assert isinstance(spec, spec_lib.ModelSpec)
  assert spec.predictions == {"x": 1} and spec.scaffold_fn is None


def test_make_runner_gives_the_session_runner_for_runner_session():
  run = training_options.RunOptions(
      tpu=training_options.TpuOptions(runner="session"), train_batch_size=4)
  runner = runner_lib.make_runner(lambda **_: None, run, "/tmp/unused",
                                  eval_batch_size=2, predict_batch_size=3)
  assert isinstance(runner, session_runner.SessionRunner)
  assert runner.model_dir == "/tmp/unused"


def test_session_runner_trains_evaluates_and_predicts_in_process(tmp_path):
  """A linear model: training moves the weight, evaluation reports the mean
  loss and metrics at the trained step, prediction yields every example."""

  def model_fn(features, labels, mode, params):
    del labels
    w = tf.get_variable("w", [], initializer=tf.zeros_initializer())
    prediction = w * features["x"]
    loss = tf.reduce_mean(tf.square(prediction - features["y"]))
    if mode == spec_lib.ModeKeys.TRAIN:
      return sgd_train_spec(loss)
    if mode == spec_lib.ModeKeys.EVAL:
      return spec_lib.model_spec(
          mode=mode, loss=loss,
          eval_metrics=(lambda p, y: {"mse": tf.metrics.mean_squared_error(
              y, p)}, [prediction, features["y"]]))
    assert params["batch_size"] == 3
    return spec_lib.model_spec(mode=mode, predictions={"p": prediction})

  x = np.arange(1, 8, dtype=np.float32)

  def input_fn(params):
    data = tf.data.Dataset.from_tensor_slices({"x": x, "y": 2.0 * x})
    return data.batch(params["batch_size"])

  def train_input_fn(params):
    return input_fn(params).repeat()

  run = training_options.RunOptions(
      tpu=training_options.TpuOptions(runner="session"), train_batch_size=7,
      save_checkpoints_steps=5)
  runner = runner_lib.make_runner(model_fn, run, str(tmp_path),
                                  eval_batch_size=2, predict_batch_size=3)
  runner.train(train_input_fn, max_steps=20)
  assert tf.train.latest_checkpoint(str(tmp_path)).endswith("model.ckpt-20")
  w = tf.train.load_variable(str(tmp_path), "w")
  assert abs(w - 2.0) < 1e-3
  results = runner.evaluate(input_fn)
  assert results["global_step"] == 20
  assert results["mse"] == pytest.approx(np.mean((w * x - 2 * x) ** 2),
                                         rel=1e-4)
  # The runner's `loss` is the mean of the 4 batches' means (as the
  # Estimator's), not the mean over examples.
  batch_means = [np.mean((w * b - 2 * b) ** 2) for b in np.split(x, [2, 4, 6])]
  assert results["loss"] == pytest.approx(np.mean(batch_means), rel=1e-4)
  assert os.listdir(os.path.join(str(tmp_path), "eval"))  # TensorBoard.
  assert runner.evaluate(input_fn, steps=1)["mse"] == pytest.approx(
      np.mean((w * x[:2] - 2 * x[:2]) ** 2), rel=1e-4)
  got = [p["p"] for p in runner.predict(input_fn)]
  np.testing.assert_allclose(got, w * x, rtol=1e-6)
  # A model_dir at max_steps already trains no further.
  runner.train(train_input_fn, max_steps=20)
  assert tf.train.load_variable(str(tmp_path), "global_step") == 20


# ----------------------------------------------------------------------------
# The same numbers through both runners (TF 2.15).
# ----------------------------------------------------------------------------


def _checkpoint_values(output_dir):
  """The latest checkpoint's name and variables (the input's position left
  out: its bytes hold what the prefetch buffers held at the save)."""
  path = tf.train.latest_checkpoint(output_dir)
  reader = tf.train.load_checkpoint(path)
  return os.path.basename(path), {
      name: reader.get_tensor(name)
      for name in reader.get_variable_to_shape_map()
      if not name.startswith(checkpoints.POSITION_SCOPE + "/")}


def _assert_identical_checkpoints(first, second):
  name_1, values_1 = _checkpoint_values(first)
  name_2, values_2 = _checkpoint_values(second)
  assert name_1 == name_2
  assert sorted(values_1) == sorted(values_2)
  different = [name for name in values_1
               if not np.array_equal(values_1[name], values_2[name])]
  assert not different, different[:5]
  return len(values_1)


def _through_both(tmp_path, script, args_for, timeout=400):
  """Runs `script` with --runner=estimator and --runner=session."""
  dirs = {}
  for runner in ("estimator", "session"):
    out = str(tmp_path / runner)
    result = run_script(script, args_for(out) + ["--runner=%s" % runner],
                        timeout=timeout, env=_ENV)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Runner: %s" % runner in result.stderr
    dirs[runner] = out
  return dirs["estimator"], dirs["session"]


def _pretraining_args(data):
  model = data_path("conformance", "modeling")

  def args_for(out):
    return ["--input_file=%s" % data, "--output_dir=%s" % out,
            "--bert_config_file=%s" % os.path.join(model, "bert_config.json"),
            "--do_train", "--do_eval", "--train_batch_size=8",
            "--eval_batch_size=8", "--max_seq_length=16",
            "--max_predictions_per_seq=4", "--num_train_steps=4",
            "--num_warmup_steps=1", "--learning_rate=1e-3",
            "--save_checkpoints_steps=2", "--max_eval_steps=2",
            "--deterministic"]

  return args_for


# (--use_xla is a session setting both runners take from one
# `runner.config.RunnerConfig`; XLA runs: test_distribute.py.)
@pytest.mark.slow
@needs_estimator
@pytest.mark.parametrize("options", [
    [],
    ["--distribution_strategy=mirrored", "--num_cpu_devices=2",
     "--num_gpus=0", "--gradient_accumulation_steps=2", "--optimizer=lamb",
     "--precision=bf16"],
], ids=["plain", "mirrored_accumulation_lamb_bf16"])
def test_pretraining_from_scratch_is_identical_through_both_runners(
    tmp_path, options):
  # Random initialization too: the runners make the same random ops in the
  # same order, so they get the same seeds.
  data = _write_records(str(tmp_path / "data.tfrecord"), 40, seq_length=16,
                        preds=4, uneven=True)
  base = _pretraining_args(data)
  estimator, session = _through_both(tmp_path, "run_pretraining.py",
                                     lambda out: base(out) + options)
  assert _assert_identical_checkpoints(estimator, session) > 100
  assert filecmp.cmp(os.path.join(estimator, "eval_results.txt"),
                     os.path.join(session, "eval_results.txt"),
                     shallow=False)


def _mrpc(tmp_path):
  data_dir = str(tmp_path / "mrpc")
  for split, count in (("train", 16), ("dev", 10), ("test", 11)):
    lines = read_lines(shared_path("data", "glue", "MRPC", split + ".tsv"))
    write_tsv(os.path.join(data_dir, split + ".tsv"), lines[:count + 1])
  return data_dir


@pytest.mark.slow
@needs_estimator
def test_classifier_is_identical_through_both_runners(tmp_path):
  data_dir = _mrpc(tmp_path)

  def args_for(out):
    return tiny_model_flags() + [
        "--task_name=MRPC", "--do_train", "--do_eval", "--do_predict",
        "--data_dir=%s" % data_dir, "--output_dir=%s" % out,
        "--max_seq_length=32", "--train_batch_size=4",
        "--num_train_epochs=1", "--eval_batch_size=4",
        "--predict_batch_size=8", "--deterministic",
        "--export_dir=%s" % os.path.join(out, "export")]

  estimator, session = _through_both(tmp_path, "run_classifier.py", args_for)
  assert _assert_identical_checkpoints(estimator, session) > 100
  for name in ("eval_results.txt", "test_results.tsv"):
    assert filecmp.cmp(os.path.join(estimator, name),
                       os.path.join(session, name), shallow=False), name
  # Both exports serve the same numbers.
  exports = [os.path.join(d, "export", os.listdir(os.path.join(d, "export"))[0])
             for d in (estimator, session)]
  outputs = [_serve(path) for path in exports]
  np.testing.assert_array_equal(outputs[0], outputs[1])


def _serve(export):
  """probabilities of the export for a fixed batch of ids."""
  ids = np.array([[2, 20, 31, 3] + [0] * 28,
                  [2, 77, 3] + [0] * 29], np.int32)
  mask = (ids > 0).astype(np.int32)
  with tf.Graph().as_default(), tf.Session() as session:
    meta = tf.saved_model.loader.load(session, ["serve"], export)
    signature = meta.signature_def["serving_default"]
    feeds = {signature.inputs[name].name: value for name, value in
             (("input_ids", ids), ("input_mask", mask),
              ("segment_ids", np.zeros_like(ids)))}
    return session.run(signature.outputs["probabilities"].name, feeds)


# ----------------------------------------------------------------------------
# Every script end to end through the session runner (and, on TF 2.15, equal
# to the Estimator's outputs).
# ----------------------------------------------------------------------------


def _session_run(tmp_path, script, args_for, outputs, timeout=400):
  """Runs `script` through the session runner; on TF 2.15 also through the
  Estimator, and asserts equal `outputs` files. Returns the output dir."""
  if HAS_ESTIMATOR:
    estimator, session = _through_both(tmp_path, script, args_for, timeout)
    for name in outputs:
      assert filecmp.cmp(os.path.join(estimator, name),
                         os.path.join(session, name), shallow=False), name
    return session
  out = str(tmp_path / "session")
  result = run_script(script, args_for(out) + ["--runner=session"],
                      timeout=timeout, env=_ENV)
  assert result.returncode == 0, result.stderr[-3000:]
  assert "Runner: session" in result.stderr
  return out


@pytest.mark.slow
def test_squad_through_the_session_runner(tmp_path):
  train_file, predict_file = _real_squad_subset(tmp_path)

  def args_for(out):
    return tiny_model_flags() + [
        "--output_dir=%s" % out, "--do_train", "--do_predict",
        "--train_file=%s" % train_file, "--predict_file=%s" % predict_file,
        "--version_2_with_negative", "--max_seq_length=64",
        "--doc_stride=32", "--max_query_length=16", "--train_batch_size=4",
        "--num_train_epochs=1", "--predict_batch_size=16", "--deterministic"]

  out = _session_run(tmp_path, "run_squad.py", args_for,
                     ["predictions.json", "nbest_predictions.json",
                      "null_odds.json", "eval_results.json"])
  with open(os.path.join(out, "predictions.json"), encoding="utf-8") as f:
    assert len(json.load(f)) == 8


@pytest.mark.slow
def test_ner_through_the_session_runner(tmp_path):
  data = tmp_path / "data"
  _head_of_conll(_conll("eng.train"), data / "eng.train", 16)
  _head_of_conll(_conll("eng.testa"), data / "eng.testa", 8)
  _head_of_conll(_conll("eng.testb"), data / "eng.testb", 8)

  def args_for(out):
    return tiny_model_flags() + [
        "--data_dir=%s" % data, "--output_dir=%s" % out,
        "--max_seq_length=24", "--doc_stride=8", "--do_train", "--do_eval",
        "--do_predict", "--train_batch_size=8", "--num_train_epochs=1",
        "--learning_rate=1e-3", "--deterministic"]

  out = _session_run(tmp_path, "run_ner.py", args_for,
                     ["eval_results.txt", "dev_predictions.txt",
                      "test_predictions.txt"])
  assert "eval_f1" in read_lines(os.path.join(out, "eval_results.txt"))[1]


@pytest.mark.slow
def test_extract_features_through_the_session_runner(tmp_path):
  model = data_path("conformance", "extract_features")
  input_file = os.path.join(model, "input.txt")

  def args_for(out):
    os.makedirs(out, exist_ok=True)
    return tiny_model_flags(("conformance", "extract_features"),
                            do_lower_case=True) + [
        "--input_file=%s" % input_file,
        "--output_file=%s" % os.path.join(out, "features.jsonl"),
        "--layers=-1,-2", "--max_seq_length=16", "--batch_size=4"]

  out = _session_run(tmp_path, "extract_features.py", args_for,
                     ["features.jsonl"])
  got = [json.loads(line) for line in
         read_lines(os.path.join(out, "features.jsonl"))]
  want = [json.loads(line) for line in
          read_lines(os.path.join(model, "output.jsonl"))]
  assert len(got) == len(want)
  for row, expected in zip(got, want):
    for feature, feature_want in zip(row["features"], expected["features"]):
      assert feature["token"] == feature_want["token"]
      for layer, layer_want in zip(feature["layers"], feature_want["layers"]):
        np.testing.assert_allclose(layer["values"], layer_want["values"],
                                   atol=2e-6)
