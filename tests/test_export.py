"""Tests for bert_tf/export/ (saved_model.py, serving.py) and
predict_saved_model.py: exported SavedModels give the runner's numbers,
through Python, saved_model_cli and the prediction script, and bad input is
refused in one line."""

import json
import logging
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from helpers import data_path
from helpers import REPO_ROOT
from helpers import shared_path

from bert_tf.checks import checkpoint as checkpoint_checks
from bert_tf.train import model_fn as model_fn_utils
from bert_tf.runner import select as runner_lib
from bert_tf.train import options as training_options
from bert_tf.export import saved_model as export_utils
from bert_tf.train import checkpoints
import modeling
import predict_saved_model
import run_classifier
import run_ner
import run_squad
from bert_tf.export import serving
import tokenization

_CLS_SEQ = 32
_SQUAD_SEQ, _SQUAD_STRIDE, _SQUAD_QUERY = 64, 16, 16
_SAVED_MODEL_CLI = os.path.join(os.path.dirname(sys.executable),
                                "saved_model_cli")


# ----------------------------------------------------------------------------
# Fixtures: a "fine-tuned" checkpoint (the tiny conformance encoder with a
# random head of unit scale, so outputs differ clearly between inputs), its
# exports and real inputs.
# ----------------------------------------------------------------------------


def _model_file(name):
  return os.path.join(data_path("conformance", "modeling"), name)


def _bert_config():
  return modeling.BertConfig.from_json_file(_model_file("bert_config.json"))


def _write_fine_tuned_checkpoint(output_dir, kind, with_global_step=True,
                                 num_labels=2):
  """Writes output_dir/model.ckpt-7 for `kind` ("classifier", "regression",
  "squad" or "ner", of `num_labels` tags): the conformance encoder plus a
  seeded random head; returns the checkpoint prefix."""
  with tf.Graph().as_default():
    zeros = tf.zeros([1, 8], tf.int32)
    if kind == "squad":
      run_squad.create_model(_bert_config(), False, zeros, zeros, zeros,
                             False)
    elif kind == "ner":
      run_ner.create_model(_bert_config(), False, zeros, zeros, zeros, zeros,
                           tf.zeros([1, 8]), num_labels, False)
    else:
      regression = kind == "regression"
      run_classifier.create_model(
          _bert_config(), False, zeros, zeros, zeros,
          tf.zeros([1], tf.float32 if regression else tf.int32),
          1 if regression else 2, False, is_regression=regression)
    if with_global_step:
      tf.train.get_or_create_global_step()
    model_fn_utils.init_from_checkpoint(_model_file("bert_model.ckpt"),
                                         False)
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      rng = np.random.RandomState(0)
      for var in tf.trainable_variables():
        if not var.op.name.startswith("bert/"):
          var.load(rng.normal(size=var.shape.as_list()).astype(np.float32),
                   session)
      return tf.train.Saver().save(
          session, os.path.join(output_dir, "model.ckpt"), global_step=7)


def _classifier_model_fn(regression=False):
  return run_classifier.model_fn_builder(
      _bert_config(), 1 if regression else 2, None, 0.0, None, None, False,
      False, is_regression=regression)


def _squad_model_fn():
  return run_squad.model_fn_builder(_bert_config(), None, 0.0, None, None,
                                    False, False)


def _export_classifier(checkpoint, export_dir, regression=False):
  return export_utils.export_saved_model(
      _classifier_model_fn(regression), checkpoint, export_dir, _CLS_SEQ,
      kind=export_utils.REGRESSION if regression else export_utils.CLASSIFIER,
      output_keys=["predictions" if regression else "probabilities"],
      vocab_file=_model_file("vocab.txt"),
      bert_config_file=_model_file("bert_config.json"), do_lower_case=True,
      label_list=None if regression else ["0", "1"],
      extra_features=(export_utils.REGRESSION_FEATURES if regression else
                      export_utils.CLASSIFIER_FEATURES),
      extra_config={"task_name": "mrpc"})


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
  """(model dir with checkpoint, checkpoint prefix, export base, version)."""
  root = tmp_path_factory.mktemp("classifier")
  checkpoint = _write_fine_tuned_checkpoint(str(root / "model"),
                                            "classifier")
  version = _export_classifier(checkpoint, str(root / "export"))
  return str(root / "model"), checkpoint, str(root / "export"), version


@pytest.fixture(scope="module")
def squad(tmp_path_factory):
  root = tmp_path_factory.mktemp("squad")
  checkpoint = _write_fine_tuned_checkpoint(str(root / "model"), "squad")
  version = export_utils.export_saved_model(
      _squad_model_fn(), checkpoint, str(root / "export"), _SQUAD_SEQ,
      kind=export_utils.SQUAD, output_keys=["start_logits", "end_logits"],
      vocab_file=_model_file("vocab.txt"),
      bert_config_file=_model_file("bert_config.json"), do_lower_case=True,
      extra_features=export_utils.SQUAD_FEATURES,
      extra_config={"doc_stride": _SQUAD_STRIDE,
                    "max_query_length": _SQUAD_QUERY,
                    "version_2_with_negative": False})
  return str(root / "model"), checkpoint, str(root / "export"), version


def _tokenizer():
  return tokenization.FullTokenizer(_model_file("vocab.txt"), True)


def _mrpc_test_rows(tmp_path, num_rows=20):
  """A data dir whose test.tsv holds the first `num_rows` rows of MRPC's."""
  with open(shared_path("data", "glue", "MRPC", "test.tsv"),
            encoding="utf-8") as f:
    lines = f.read().splitlines()[:num_rows + 1]
  data_dir = tmp_path / "mrpc"
  data_dir.mkdir(exist_ok=True)
  (data_dir / "test.tsv").write_text("\n".join(lines) + "\n",
                                     encoding="utf-8")
  return str(data_dir)


def _squad_subset(tmp_path):
  """6 real SQuAD 1.1 questions (XQuAD en) on 2 long paragraphs."""
  with open(shared_path("data", "squad", "xquad_en_dev_v1.1", "xquad.en.json"),
            encoding="utf-8") as f:
    article = json.load(f)["data"][0]
  article["paragraphs"] = article["paragraphs"][:2]
  for paragraph in article["paragraphs"]:
    paragraph["qas"] = paragraph["qas"][:3]
  path = tmp_path / "squad.json"
  path.write_text(json.dumps({"version": "1.1", "data": [article]}),
                  encoding="utf-8")
  return str(path)


def _runner_predict(model_fn, model_dir, features, batch_size=8):
  """The scripts' runner's predictions (the TPUEstimator off TPU on TF 2.15,
  else the session runner) of a dict of int32 arrays, from the latest
  checkpoint of model_dir."""
  model_runner = runner_lib.make_runner(
      model_fn, training_options.RunOptions(save_checkpoints_steps=1000),
      model_dir, predict_batch_size=batch_size)

  def input_fn(params):
    return tf.data.Dataset.from_tensor_slices(features).batch(
        params["batch_size"])

  return list(model_runner.predict(input_fn))


# ----------------------------------------------------------------------------
# The export itself.
# ----------------------------------------------------------------------------


def test_export_is_a_numbered_version_with_assets(classifier):
  _, _, export_dir, version = classifier
  assert os.path.dirname(version) == export_dir
  assert os.path.basename(version).isdigit()
  assert os.path.exists(os.path.join(version, "saved_model.pb"))
  assets = os.path.join(version, "assets.extra")
  assert sorted(os.listdir(assets)) == ["bert_config.json",
                                        "serving_config.json", "vocab.txt"]
  with open(os.path.join(assets, "vocab.txt"), "rb") as f:
    with open(_model_file("vocab.txt"), "rb") as g:
      assert f.read() == g.read()
  with open(os.path.join(assets, "serving_config.json"),
            encoding="utf-8") as f:
    config = json.load(f)
  assert config == {"kind": "classifier", "do_lower_case": True,
                    "max_seq_length": _CLS_SEQ, "label_list": ["0", "1"],
                    "output_keys": ["probabilities"], "task_name": "mrpc"}


def test_a_second_export_is_a_new_version_and_keeps_the_first(classifier,
                                                               tmp_path):
  _, checkpoint, _, _ = classifier
  base = str(tmp_path / "export")
  first = _export_classifier(checkpoint, base)
  with open(os.path.join(first, "saved_model.pb"), "rb") as f:
    first_bytes = f.read()
  first_mtime = os.path.getmtime(os.path.join(first, "saved_model.pb"))
  second = _export_classifier(checkpoint, base)
  assert second != first
  assert int(os.path.basename(second)) > int(os.path.basename(first))
  assert sorted(os.listdir(base)) == sorted(
      [os.path.basename(first), os.path.basename(second)])
  assert os.path.getmtime(os.path.join(first, "saved_model.pb")) == first_mtime
  with open(os.path.join(first, "saved_model.pb"), "rb") as f:
    assert f.read() == first_bytes
  assert serving.resolve_version(base) == second


def test_a_pretrained_checkpoint_without_the_head_is_refused(tmp_path):
  with pytest.raises(ValueError, match=r"lacks 2 of the model's \d+ "
                     r"variables \(output_weights, output_bias\)"):
    _export_classifier(_model_file("bert_model.ckpt"), str(tmp_path / "x"))


def test_loading_an_export_logs_no_fingerprint_note(classifier, caplog):
  """TensorFlow logged `Fingerprint not found. Saved model loading will
  continue.` at every load of an export (predict_saved_model.py printed
  it per export)."""
  # absl's logger at INFO too, whatever verbosity an earlier test left.
  with caplog.at_level(logging.INFO), caplog.at_level(logging.INFO,
                                                      logger="absl"):
    serving.BertServingModel(classifier[3])
  assert "Loading SavedModel" in caplog.text
  assert "Fingerprint" not in caplog.text
  assert "singleprint" not in caplog.text


def test_a_checkpoint_without_global_step_is_exported(classifier, tmp_path):
  # Converted checkpoints carry no global step; the export still loads.
  checkpoint = _write_fine_tuned_checkpoint(str(tmp_path / "model"),
                                            "classifier",
                                            with_global_step=False)
  names = [name for name, _ in tf.train.list_variables(checkpoint)]
  assert "global_step" not in names and "output_weights" in names
  inputs = [np.array([[101, 7, 8, 102] + [0] * (_CLS_SEQ - 4)], np.int32),
            np.array([[1] * 4 + [0] * (_CLS_SEQ - 4)], np.int32),
            np.zeros([1, _CLS_SEQ], np.int32)]
  with_step = serving.BertServingModel(classifier[3]).run(*inputs)
  without = serving.BertServingModel(
      _export_classifier(checkpoint, str(tmp_path / "export"))).run(*inputs)
  np.testing.assert_array_equal(without["probabilities"],
                                with_step["probabilities"])


def test_a_bracketed_folder_exports_and_serves(classifier, tmp_path):
  # TensorFlow's checkpoint and SavedModel readers find files by pattern:
  # `run[1]` was "not found" at export and at load.
  _, checkpoint, _, version = classifier
  folder = tmp_path / "run[1]"
  folder.mkdir()
  for path in checkpoint_checks.checkpoint_files(checkpoint):
    shutil.copy(path, str(folder / os.path.basename(path)))
  copied = str(folder / os.path.basename(checkpoint))
  bracketed = _export_classifier(copied, str(tmp_path / "export[1]"))
  inputs = [np.array([[101, 7, 8, 102] + [0] * (_CLS_SEQ - 4)], np.int32),
            np.array([[1] * 4 + [0] * (_CLS_SEQ - 4)], np.int32),
            np.zeros([1, _CLS_SEQ], np.int32)]
  np.testing.assert_array_equal(
      serving.BertServingModel(bracketed).run(*inputs)["probabilities"],
      serving.BertServingModel(version).run(*inputs)["probabilities"])


def test_serving_input_fills_the_features_a_client_does_not_send():
  # NER-style: a per-token label feature [batch, seq] besides the inputs.
  extra = {"label_ids": (tf.int32, [5], 0), "weight": (tf.float32, [], 1.5)}
  with tf.Graph().as_default():
    features, receivers = export_utils.serving_input_fn_builder(5, extra)()
    assert sorted(receivers) == sorted(export_utils.INPUT_NAMES)
    for tensor in receivers.values():
      assert tensor.dtype == tf.int32 and tensor.shape.as_list() == [None, 5]
    with tf.Session() as session:
      got = session.run(features, {
          receivers[n]: np.ones([3, 5], np.int32)
          for n in export_utils.INPUT_NAMES})
  assert got["label_ids"].tolist() == [[0] * 5] * 3
  assert got["weight"].tolist() == [1.5] * 3
  assert got["input_ids"].tolist() == [[1] * 5] * 3


def test_checkpoint_to_export_prefers_output_dir(classifier, tmp_path):
  model_dir, checkpoint, _, _ = classifier
  assert checkpoints.checkpoint_to_export(model_dir, None) == checkpoint
  assert checkpoints.checkpoint_to_export(str(tmp_path), checkpoint) == (
      checkpoint)
  assert checkpoints.checkpoint_to_export(None, model_dir) == checkpoint
  with pytest.raises(ValueError, match="no checkpoint to export"):
    checkpoints.checkpoint_to_export(str(tmp_path), str(tmp_path / "none"))


# ----------------------------------------------------------------------------
# Same numbers as Estimator.predict.
# ----------------------------------------------------------------------------


def _mrpc_features(tmp_path):
  data_dir = _mrpc_test_rows(tmp_path)
  examples = run_classifier.get_processor("mrpc").get_test_examples(data_dir)
  features = run_classifier.convert_examples_to_features(
      examples, ["0", "1"], _CLS_SEQ, _tokenizer())
  return examples, {
      name: np.array([getattr(f, name) for f in features], np.int32)
      for name in ("input_ids", "input_mask", "segment_ids")}


def test_classifier_export_matches_runner_predict(classifier, tmp_path):
  model_dir, _, _, version = classifier
  examples, inputs = _mrpc_features(tmp_path)
  features = dict(inputs, label_ids=np.zeros([len(examples)], np.int32),
                  is_real_example=np.ones([len(examples)], np.int32))
  want = np.stack([p["probabilities"] for p in _runner_predict(
      _classifier_model_fn(), model_dir, features)])
  model = serving.BertServingModel(version)
  got = model.run(inputs["input_ids"], inputs["input_mask"],
                  inputs["segment_ids"])
  assert sorted(got) == ["probabilities"]
  assert got["probabilities"].shape == (len(examples), 2)
  np.testing.assert_allclose(got["probabilities"], want, atol=1e-5, rtol=0)
  # The rows differ by far more than the tolerance (the tiny encoder's
  # pooled output varies little between inputs).
  assert np.ptp(want[:, 1]) > 2e-4
  # The raw-text wrapper builds the same inputs.
  probs = model.classify(examples[3].text_a, examples[3].text_b)
  assert list(probs) == ["0", "1"]
  np.testing.assert_allclose([probs["0"], probs["1"]], want[3], atol=1e-5)


def test_regression_export_serves_predictions_of_shape_batch(tmp_path):
  checkpoint = _write_fine_tuned_checkpoint(str(tmp_path / "model"),
                                            "regression")
  version = _export_classifier(checkpoint, str(tmp_path / "export"),
                               regression=True)
  examples, inputs = _mrpc_features(tmp_path)
  features = dict(inputs, label_ids=np.zeros([len(examples)], np.float32),
                  is_real_example=np.ones([len(examples)], np.int32))
  want = np.array([p["predictions"] for p in _runner_predict(
      _classifier_model_fn(True), str(tmp_path / "model"), features)])
  model = serving.BertServingModel(str(tmp_path / "export"))
  got = model.run(inputs["input_ids"], inputs["input_mask"],
                  inputs["segment_ids"])
  assert got["predictions"].shape == (len(examples),)
  np.testing.assert_allclose(got["predictions"], want, atol=1e-5, rtol=0)
  assert model.classify(examples[0].text_a, examples[0].text_b) == (
      pytest.approx(float(want[0]), abs=1e-5))
  assert model.version_dir == version


def _squad_features(predict_file):
  examples = run_squad.read_squad_examples(predict_file, is_training=False)
  features = []
  run_squad.convert_examples_to_features(
      examples, _tokenizer(), _SQUAD_SEQ, _SQUAD_STRIDE, _SQUAD_QUERY, False,
      features.append)
  return examples, features


def _assert_same_nbest(got, want):
  """The same candidates in the same order; their numbers within float32
  rounding (served in batches of 5, predicted in batches of 8: on an
  AVX2-only CPU a logit of another batch differed in the last bit, and the
  float64 probabilities by 1e-9)."""
  assert list(got) == list(want)
  for qas_id, candidates in want.items():
    assert [c["text"] for c in got[qas_id]] == [c["text"] for c in candidates]
    for served, expected in zip(got[qas_id], candidates):
      assert sorted(served) == sorted(expected)
      for key, value in expected.items():
        if isinstance(value, float):
          assert served[key] == pytest.approx(value, rel=1e-6, abs=1e-6), (
              qas_id, key)
        else:
          assert served[key] == value, (qas_id, key)


def test_squad_export_matches_runner_predict_over_many_windows(squad,
                                                                  tmp_path):
  model_dir, _, _, version = squad
  examples, features = _squad_features(_squad_subset(tmp_path))
  windows = [sum(f.example_index == i for f in features)
             for i in range(len(examples))]
  assert min(windows) >= 3, windows  # Every context spans several windows.
  inputs = {name: np.array([getattr(f, name) for f in features], np.int32)
            for name in ("input_ids", "input_mask", "segment_ids")}
  want = _runner_predict(
      _squad_model_fn(), model_dir,
      dict(inputs, unique_ids=np.array([f.unique_id for f in features],
                                       np.int32)))
  model = serving.BertServingModel(version)
  got = model.run(inputs["input_ids"], inputs["input_mask"],
                  inputs["segment_ids"])
  assert sorted(got) == ["end_logits", "start_logits"]
  for key in ("start_logits", "end_logits"):
    assert got[key].shape == (len(features), _SQUAD_SEQ)
    np.testing.assert_allclose(got[key], np.stack([p[key] for p in want]),
                               atol=1e-5, rtol=0)
  # The span search over all windows gives the Estimator's answers.
  results = [run_squad.RawResult(int(p["unique_ids"]),
                                 [float(x) for x in p["start_logits"]],
                                 [float(x) for x in p["end_logits"]])
             for p in want]
  expected = run_squad.write_predictions(
      examples, features, results, 20, 30, True,
      str(tmp_path / "p.json"), str(tmp_path / "n.json"),
      str(tmp_path / "o.json"))
  served = serving.predict_squad(model, examples, str(tmp_path / "served"),
                                 20, 30, 0.0, batch_size=5)
  assert served.predictions == expected.predictions
  _assert_same_nbest(served.nbest, expected.nbest)
  # The raw-text wrapper answers one question the same way.
  example = examples[0]
  answer = model.answer(example.question_text, " ".join(example.doc_tokens))
  assert answer["text"] == expected.predictions[example.qas_id]
  _assert_same_nbest({example.qas_id: answer["nbest"]},
                     {example.qas_id: expected.nbest[example.qas_id]})


def test_predict_classifier_logs_truncation_once_with_a_count(classifier,
                                                              tmp_path,
                                                              caplog):
  _, _, _, version = classifier
  model = serving.BertServingModel(version)
  examples = [run_classifier.InputExample("t-0", "short text", "also short"),
              run_classifier.InputExample("t-1", "word " * 40, "more " * 40),
              run_classifier.InputExample("t-2", "word " * 29, None),
              run_classifier.InputExample("t-3", "word " * 31, None)]
  caplog.set_level("INFO")
  output = str(tmp_path / "test_results.tsv")
  assert predict_saved_model.predict_classifier(model, examples, output,
                                                batch_size=3) == 4
  notes = [r.getMessage() for r in caplog.records if "truncated" in
           r.getMessage()]
  assert notes == ["2 of 4 inputs were longer than max_seq_length=32 tokens "
                   "and were truncated (as in training)"]
  with open(output, encoding="utf-8") as f:
    lines = f.read().splitlines()
  assert len(lines) == 4 and all(len(l.split("\t")) == 2 for l in lines)


# ----------------------------------------------------------------------------
# saved_model_cli.
# ----------------------------------------------------------------------------


def _cli(*args):
  proc = subprocess.run([_SAVED_MODEL_CLI] + list(args), capture_output=True,
                        text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return proc.stdout


def _signature_io(show_output):
  """{(inputs|outputs, name): (dtype, shape)} of serving_default."""
  io = {}
  pattern = re.compile(r"(inputs|outputs)\['(\w+)'\] tensor_info:\s+"
                       r"dtype: (\w+)\s+shape: (\([-\d, ]*\))")
  for match in pattern.finditer(show_output):
    io[(match.group(1), match.group(2))] = (match.group(3), match.group(4))
  return io


@pytest.mark.slow
def test_saved_model_cli_show_lists_signatures(classifier, squad):
  out = _cli("show", "--all", "--dir", classifier[3])
  assert "MetaGraphDef with tag-set: 'serve'" in out
  assert "signature_def['serving_default']" in out
  inputs = {("inputs", name): ("DT_INT32", "(-1, %d)" % _CLS_SEQ)
            for name in export_utils.INPUT_NAMES}
  inputs[("outputs", "probabilities")] = ("DT_FLOAT", "(-1, 2)")
  assert _signature_io(out) == inputs
  out = _cli("show", "--all", "--dir", squad[3])
  inputs = {("inputs", name): ("DT_INT32", "(-1, %d)" % _SQUAD_SEQ)
            for name in export_utils.INPUT_NAMES}
  for name in ("start_logits", "end_logits"):
    inputs[("outputs", name)] = ("DT_FLOAT", "(-1, %d)" % _SQUAD_SEQ)
  assert _signature_io(out) == inputs


@pytest.mark.slow
def test_saved_model_cli_run_gives_the_same_numbers(squad, tmp_path):
  _, _, _, version = squad
  _, features = _squad_features(_squad_subset(tmp_path))
  features = features[:6]
  args = []
  for name in export_utils.INPUT_NAMES:
    path = str(tmp_path / (name + ".npy"))
    np.save(path, np.array([getattr(f, name) for f in features], np.int32))
    args.append("%s=%s" % (name, path))
  _cli("run", "--dir", version, "--tag_set", "serve", "--signature_def",
       "serving_default", "--inputs", ";".join(args), "--outdir",
       str(tmp_path / "cli"))
  got = serving.BertServingModel(version).run(
      *[np.array([getattr(f, n) for f in features], np.int32)
        for n in export_utils.INPUT_NAMES])
  for key in ("start_logits", "end_logits"):
    cli = np.load(str(tmp_path / "cli" / (key + ".npy")))
    assert cli.shape == (6, _SQUAD_SEQ)
    np.testing.assert_allclose(cli, got[key], atol=1e-5, rtol=0)


# ----------------------------------------------------------------------------
# The scripts end to end.
# ----------------------------------------------------------------------------


def _run(script, args, timeout=300):
  env = dict(os.environ)
  env.pop("BERT_DEBUG", None)
  return subprocess.run([sys.executable, os.path.join(REPO_ROOT, script)] +
                        args, cwd=REPO_ROOT, env=env, capture_output=True,
                        text=True, timeout=timeout)


def _model_flags():
  return ["--vocab_file=%s" % _model_file("vocab.txt"),
          "--bert_config_file=%s" % _model_file("bert_config.json")]


@pytest.mark.e2e
@pytest.mark.slow
def test_classifier_end_to_end_predictions_equal_run_classifier(tmp_path):
  model_dir = str(tmp_path / "model")
  _write_fine_tuned_checkpoint(model_dir, "classifier")
  data_dir = _mrpc_test_rows(tmp_path, 30)
  proc = _run("run_classifier.py", _model_flags() + [
      "--task_name=MRPC", "--do_predict", "--data_dir=%s" % data_dir,
      "--output_dir=%s" % model_dir, "--max_seq_length=%d" % _CLS_SEQ,
      "--export_dir=%s" % (tmp_path / "export")])
  assert proc.returncode == 0, proc.stderr[-3000:]
  proc = _run("predict_saved_model.py", [
      "--model_dir=%s" % (tmp_path / "export"),
      "--input_file=%s" % os.path.join(data_dir, "test.tsv"),
      "--output_dir=%s" % (tmp_path / "served")])
  assert proc.returncode == 0, proc.stderr[-3000:]
  with open(os.path.join(model_dir, "test_results.tsv")) as f:
    want = f.read()
  with open(tmp_path / "served" / "test_results.tsv") as f:
    assert f.read() == want
  assert len(want.splitlines()) == 30
  assert re.search(r"\d+ of 30 inputs were longer than max_seq_length=32",
                   proc.stderr)


@pytest.mark.slow
def test_packed_classifier_export_serves_the_packed_predictions(tmp_path):
  # Short pairs, several a row: the export of a run with --pack_sequences
  # serves one example per input (the unpacked signature) and packed rows
  # (predict_saved_model.py --pack_sequences) with the packed run's
  # test_results.tsv, within float32 rounding.
  model_dir = str(tmp_path / "model")
  _write_fine_tuned_checkpoint(model_dir, "classifier")
  data_dir = _mrpc_test_rows(tmp_path, 12)
  lines = (tmp_path / "mrpc" / "test.tsv").read_text(
      encoding="utf-8").splitlines()
  short = [lines[0]] + ["\t".join(fields[:3] + [
      " ".join(text.split()[:1 + i % 3]) for text in fields[3:]])
                        for i, fields in enumerate(
                            line.split("\t") for line in lines[1:])]
  (tmp_path / "mrpc" / "test.tsv").write_text("\n".join(short) + "\n",
                                              encoding="utf-8")
  proc = _run("run_classifier.py", _model_flags() + [
      "--task_name=MRPC", "--do_predict", "--data_dir=%s" % data_dir,
      "--output_dir=%s" % model_dir, "--max_seq_length=%d" % _CLS_SEQ,
      "--pack_sequences", "--export_dir=%s" % (tmp_path / "export")])
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert int(re.search(r"Packed 12 inputs into (\d+) rows",
                       proc.stderr).group(1)) < 12
  for served, packing in (("served", []), ("served_packed", [
      "--pack_sequences", "--max_examples_per_row=3"])):
    proc = _run("predict_saved_model.py", [
        "--model_dir=%s" % (tmp_path / "export"),
        "--input_file=%s" % os.path.join(data_dir, "test.tsv"),
        "--output_dir=%s" % (tmp_path / served)] + packing)
    assert proc.returncode == 0, proc.stderr[-3000:]
  assert re.search(r"Packed 12 inputs into \d+ rows of 32 tokens",
                   proc.stderr)
  results = [np.loadtxt(path, ndmin=2) for path in (
      os.path.join(model_dir, "test_results.tsv"),
      tmp_path / "served" / "test_results.tsv",
      tmp_path / "served_packed" / "test_results.tsv")]
  assert results[0].shape == (12, 2)
  for result in results[1:]:
    np.testing.assert_allclose(result, results[0], atol=1e-5, rtol=0)


@pytest.mark.both_stacks
@pytest.mark.slow
def test_squad_end_to_end_predictions_equal_run_squad(tmp_path):
  model_dir = str(tmp_path / "model")
  checkpoint = _write_fine_tuned_checkpoint(model_dir, "squad")
  predict_file = _squad_subset(tmp_path)
  span_flags = ["--max_seq_length=%d" % _SQUAD_SEQ,
                "--doc_stride=%d" % _SQUAD_STRIDE,
                "--max_query_length=%d" % _SQUAD_QUERY]
  proc = _run("run_squad.py", _model_flags() + span_flags + [
      "--do_predict", "--predict_file=%s" % predict_file,
      "--output_dir=%s" % model_dir])
  assert proc.returncode == 0, proc.stderr[-3000:]
  # Export alone, from --init_checkpoint (a fresh output_dir).
  proc = _run("run_squad.py", _model_flags() + span_flags + [
      "--init_checkpoint=%s" % checkpoint,
      "--output_dir=%s" % (tmp_path / "fresh"),
      "--export_dir=%s" % (tmp_path / "export")])
  assert proc.returncode == 0, proc.stderr[-3000:]
  proc = _run("predict_saved_model.py", [
      "--model_dir=%s" % (tmp_path / "export"),
      "--input_file=%s" % predict_file, "--batch_size=3",
      "--output_dir=%s" % (tmp_path / "served")])
  assert proc.returncode == 0, proc.stderr[-3000:]
  for name in ("predictions.json", "nbest_predictions.json",
               "eval_results.json"):
    with open(os.path.join(model_dir, name)) as f:
      want = f.read()
    with open(tmp_path / "served" / name) as f:
      assert f.read() == want, name
  assert "questions were longer than max_query_length=16" in proc.stderr


# ----------------------------------------------------------------------------
# Bad input.
# ----------------------------------------------------------------------------


def test_missing_assets_are_named(classifier, tmp_path):
  version = str(tmp_path / "1")
  shutil.copytree(classifier[3], version)
  os.remove(os.path.join(version, "assets.extra", "vocab.txt"))
  os.remove(os.path.join(version, "assets.extra", "serving_config.json"))
  with pytest.raises(ValueError) as info:
    serving.BertServingModel(str(tmp_path))
  assert str(info.value) == (
      "--model_dir: %s is missing assets.extra/vocab.txt, "
      "assets.extra/serving_config.json (expected an export written with "
      "--export_dir)" % version)


def test_folder_without_an_export_is_refused(tmp_path):
  (tmp_path / "notes").mkdir()
  with pytest.raises(ValueError, match="holds no saved_model.pb and no "
                     "numbered version folder"):
    serving.resolve_version(str(tmp_path))
  with pytest.raises(ValueError, match="is not a directory"):
    serving.resolve_version(str(tmp_path / "missing"))


def test_malformed_row_is_refused_naming_file_and_line(tmp_path):
  data_dir = _mrpc_test_rows(tmp_path, 5)
  path = os.path.join(data_dir, "test.tsv")
  with open(path, "a", encoding="utf-8") as f:
    f.write("6\t1\t2\tonly one sentence\n")
  with pytest.raises(ValueError) as info:
    predict_saved_model.read_classifier_examples(
        "mrpc", path, {"kind": "classifier"})
  assert str(info.value) == (
      "%s:7: expected 5 tab-separated columns, got 4" % path)
  with pytest.raises(ValueError, match="--task_name=sts-b is a regression "
                     "task but the export is a classifier model"):
    predict_saved_model.read_classifier_examples(
        "sts-b", path, {"kind": "classifier"})


@pytest.mark.slow
def test_script_reports_bad_input_in_one_line(classifier, tmp_path):
  version = str(tmp_path / "export" / "5")
  shutil.copytree(classifier[3], version)
  os.remove(os.path.join(version, "assets.extra", "bert_config.json"))
  proc = _run("predict_saved_model.py", [
      "--model_dir=%s" % (tmp_path / "export"), "--input_file=x.tsv",
      "--output_dir=%s" % (tmp_path / "out")], timeout=120)
  assert proc.returncode == 1
  assert proc.stderr.strip().splitlines()[-1] == (
      "error: --model_dir: %s is missing assets.extra/bert_config.json "
      "(expected an export written with --export_dir)" % version)


def test_truncated_variables_are_one_line_naming_the_export(classifier,
                                                           tmp_path):
  version = str(tmp_path / "export" / "5")
  shutil.copytree(classifier[3], version)
  data = os.path.join(version, "variables", "variables.data-00000-of-00001")
  with open(data, "r+b") as f:
    f.truncate(os.path.getsize(data) // 2)
  with pytest.raises(ValueError) as info:
    serving.BertServingModel(version)
  message = str(info.value)
  assert message.startswith("--model_dir: %s: the SavedModel cannot be "
                            "loaded (" % version), message
  assert "\n" not in message and "File " not in message


def test_an_output_key_the_export_lacks_is_one_line_naming_the_file(
    classifier, tmp_path):
  version = str(tmp_path / "export" / "5")
  shutil.copytree(classifier[3], version)
  path = os.path.join(version, "assets.extra", "serving_config.json")
  with open(path) as f:
    config = json.load(f)
  config["output_keys"] = ["probabilities", "logits"]
  with open(path, "w") as f:
    json.dump(config, f)
  with pytest.raises(ValueError) as info:
    serving.BertServingModel(version)
  assert str(info.value) == (
      "%s: output_keys[1] is 'logits', expected one of the export's outputs "
      "(probabilities)" % path)
