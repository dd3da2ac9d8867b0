"""Tests for bert_tf/export/portable.py and predict_saved_model.py
--convert_to: TensorFlow Lite and ONNX files made from an export give the
SavedModel's numbers (float32 within 1e-5; int8 close), serve through the
same client and script, and bad input is one line.

ONNX needs the onnx extra, which ./setup.sh --test installs: without it
those tests skip (fail under CI), naming how to get it. Each head's export
is made and converted once, to every format it is tested in, per module."""

import functools
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from helpers import data_path
from helpers import import_or_skip
from helpers import REPO_ROOT
from helpers import run_script

from bert_tf.export import portable
from bert_tf.export import saved_model as export_utils
from bert_tf.export import serving
from bert_tf.tasks.classifier import multi_label as multi_label_lib
from bert_tf.train import model_fn as model_fn_utils
from bert_tf.train import spec as spec_lib
import modeling
import predict_saved_model
import run_classifier
import run_ner
import run_squad

_SEQ = 32
_LABELS = ["a", "b", "c"]


def _need_onnx():
  """Skips the test (fails it under CI) where the onnx extra is missing."""
  for name in ("onnxruntime", "onnx", "tf2onnx"):
    import_or_skip(name, "./setup.sh --test (or --onnx: the onnx extra)")


def _have_onnx():
  try:
    for name in ("onnxruntime", "onnx", "tf2onnx"):
      __import__(name)
  except ImportError:
    return False
  return True


def _model_file(name):
  return os.path.join(data_path("conformance", "modeling"), name)


def _bert_config():
  return modeling.BertConfig.from_json_file(_model_file("bert_config.json"))


# kind -> (model_fn, extra features, export kind, output keys, labels,
# extra config).
def _spec(kind):
  config = _bert_config()
  if kind == "squad":
    return (run_squad.model_fn_builder(config, None, 0.0, None, None, False,
                                       False),
            export_utils.SQUAD_FEATURES, export_utils.SQUAD,
            ["start_logits", "end_logits"], None,
            {"doc_stride": 8, "max_query_length": 8})
  if kind == "ner":
    return (run_ner.model_fn_builder(config, len(_LABELS), None, 0.0, None,
                                     None, False, False),
            export_utils.NER_FEATURES, export_utils.NER, ["probabilities"],
            _LABELS, {"doc_stride": 8})
  regression = kind == "regression"
  multi = kind == "multi_label"
  features = dict(export_utils.REGRESSION_FEATURES if regression else
                  export_utils.CLASSIFIER_FEATURES)
  extra = {"task_name": "tsv"}
  if multi:
    features["label_ids"] = (tf.int32, (len(_LABELS),), 0)
    extra["problem_type"] = multi_label_lib.PROBLEM_TYPE
  return (run_classifier.model_fn_builder(
      config, 1 if regression else len(_LABELS), None, 0.0, None, None,
      False, False, is_regression=regression, multi_label=multi),
          features,
          export_utils.REGRESSION if regression else export_utils.CLASSIFIER,
          ["predictions" if regression else "probabilities"],
          None if regression else _LABELS, extra)


def _export(kind, root):
  """A "fine-tuned" export of `kind`: the conformance encoder plus a seeded
  random head of unit scale (outputs differ clearly between inputs)."""
  model_fn, features, export_kind, keys, labels, extra = _spec(kind)
  with tf.Graph().as_default():
    inputs, _ = export_utils.serving_input_fn_builder(_SEQ, features)()
    tf.train.get_or_create_global_step()
    model_fn(inputs, None, spec_lib.ModeKeys.PREDICT, {})
    model_fn_utils.init_from_checkpoint(_model_file("bert_model.ckpt"),
                                         False)
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      rng = np.random.RandomState(0)
      for var in tf.trainable_variables():
        if not var.op.name.startswith("bert/"):
          var.load(rng.normal(size=var.shape.as_list()).astype(np.float32),
                   session)
      checkpoint = tf.train.Saver().save(
          session, os.path.join(root, "model", "model.ckpt"))
  return export_utils.export_saved_model(
      model_fn, checkpoint, os.path.join(root, "export"), _SEQ,
      kind=export_kind, output_keys=keys, vocab_file=_model_file("vocab.txt"),
      bert_config_file=_model_file("bert_config.json"), do_lower_case=True,
      label_list=labels, extra_features=features, extra_config=extra)


def _batch(batch_size, seed=1):
  """Token ids of varied lengths (padding zeroed), two segments."""
  rng = np.random.RandomState(seed)
  ids = rng.randint(1, 1000, size=[batch_size, _SEQ]).astype(np.int32)
  lengths = rng.randint(5, _SEQ + 1, size=[batch_size])
  mask = (np.arange(_SEQ)[None, :] < lengths[:, None]).astype(np.int32)
  segments = ((np.arange(_SEQ)[None, :] >= lengths[:, None] // 2) &
              (mask == 1)).astype(np.int32)
  return ids * mask, mask, segments


# Head kind -> the formats its tests compare (ONNX ones where installed).
_FORMATS = {"classifier": ("tflite", "tflite_int8", "onnx", "onnx_int8")}


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
  """kind -> (SavedModel version folder, conversion output folder); made on
  first use, with every format of `_FORMATS` (default tflite and onnx) in
  one conversion."""
  made = {}

  def get(kind):
    if kind not in made:
      root = str(tmp_path_factory.mktemp(kind))
      version = _export(kind, root)
      out = os.path.join(root, "portable")
      todo = [name for name in _FORMATS.get(kind, ("tflite", "onnx"))
              if _have_onnx() or not name.startswith("onnx")]
      config, _, _ = serving.read_assets(version)
      portable.convert(version, out, todo, config)
      made[kind] = (version, out)
    return made[kind]

  return get


def test_asset_names_agree_with_saved_model():
  # pylint: disable=protected-access
  assert portable._ASSETS_DIR == export_utils.ASSETS_DIR
  assert portable._ASSET_NAMES == export_utils.ASSET_NAMES
  assert portable._SERVING_ASSET == export_utils.SERVING_ASSET
  assert portable._INPUT_NAMES == export_utils.INPUT_NAMES
  assert portable._PACKED_SIGNATURE == export_utils.PACKED_SIGNATURE


@functools.lru_cache(maxsize=None)
def _served(folder):
  """`serving.BertServingModel(folder)`, loaded once per module."""
  return serving.BertServingModel(folder)


def _assert_same_outputs(version, folder, batch_size=3):
  want_model = _served(version)
  got_model = _served(folder)
  batch = _batch(batch_size)
  want = want_model.run(*batch)
  got = got_model.run(*batch)
  assert sorted(got) == sorted(want)
  for name, value in want.items():
    assert got[name].shape == value.shape, name
    np.testing.assert_allclose(got[name], value, rtol=0, atol=1e-5,
                               err_msg=name)
  return want, got


@pytest.mark.parametrize("kind", ["classifier", "regression", "multi_label",
                                  "ner", "squad"])
def test_float_tflite_equals_the_saved_model(exports, kind):
  version, out = exports(kind)
  want, _ = _assert_same_outputs(version, os.path.join(out, "tflite"))
  # Outputs differ between inputs (the comparison is not of constants).
  first = next(iter(want.values()))
  assert np.max(np.ptp(np.reshape(first, [first.shape[0], -1]), axis=0)) > 0.01
  _assert_same_outputs(version, os.path.join(out, "tflite"), batch_size=1)


@pytest.mark.parametrize("kind", ["classifier", "regression", "multi_label",
                                  "ner", "squad"])
def test_float_onnx_equals_the_saved_model(exports, kind):
  _need_onnx()
  version, out = exports(kind)
  _assert_same_outputs(version, os.path.join(out, "onnx"))
  _assert_same_outputs(version, os.path.join(out, "onnx"), batch_size=1)


def test_serving_config_is_the_exports_plus_the_format(exports):
  version, out = exports("classifier")
  config, _, _ = serving.read_assets(version)
  served, _, _ = serving.read_assets(os.path.join(out, "tflite"))
  portable_entry = served.pop("portable")
  assert served == config
  assert portable_entry["format"] == "tflite"
  assert portable_entry["weights"] == "float32"
  assert portable_entry["threads"] == portable.DEFAULT_THREADS["tflite"]
  for name in ("vocab.txt", "bert_config.json"):
    with open(os.path.join(version, "assets.extra", name), "rb") as f:
      want = f.read()
    with open(os.path.join(out, "tflite", "assets.extra", name), "rb") as f:
      assert f.read() == want


def test_int8_tflite_is_smaller_and_close(exports):
  version, out = exports("classifier")
  sizes = [os.path.getsize(os.path.join(out, name, "model.tflite"))
           for name in ("tflite", "tflite_int8")]
  assert sizes[1] < sizes[0] * 0.6, sizes
  want = _served(version).run(*_batch(4))["probabilities"]
  got = _served(os.path.join(out, "tflite_int8")).run(
      *_batch(4))["probabilities"]
  np.testing.assert_allclose(got, want, atol=0.05)


def test_int8_onnx_is_smaller_and_close(exports):
  _need_onnx()
  version, out = exports("classifier")
  sizes = [os.path.getsize(os.path.join(out, name, "model.onnx"))
           for name in ("onnx", "onnx_int8")]
  assert sizes[1] < sizes[0] * 0.6, sizes
  # One weight scale per output channel of each dense layer.
  onnx = import_or_skip("onnx")
  scales = [init.dims for init in onnx.load(
      os.path.join(out, "onnx_int8", "model.onnx")).graph.initializer
            if init.name.endswith("intermediate/dense/MatMul/ReadVariableOp"
                                  ":0_scale")]
  assert scales and all(list(dims) == [_bert_config().intermediate_size]
                        for dims in scales), scales
  want = _served(version).run(*_batch(4))["probabilities"]
  got = _served(os.path.join(out, "onnx_int8")).run(
      *_batch(4))["probabilities"]
  np.testing.assert_allclose(got, want, atol=0.05)


def test_predict_saved_model_writes_the_same_results_from_each_format(
    exports, tmp_path):
  version, out = exports("classifier")
  rows = tmp_path / "test.tsv"
  rows.write_text("the cat sat .\tit sat\nno\tyes a b c\n"
                  "a longer sentence with words\tand another one\n")
  config, _, _ = serving.read_assets(version)
  examples = predict_saved_model.read_classifier_examples(
      "tsv", str(rows), config)
  results = {}
  for name, folder in (("saved_model", version),
                       ("tflite", os.path.join(out, "tflite"))):
    path = str(tmp_path / (name + ".tsv"))
    predict_saved_model.predict_classifier(_served(folder), examples, path,
                                           2)
    results[name] = np.loadtxt(path, delimiter="\t")
  assert results["tflite"].shape == (3, len(_LABELS))
  np.testing.assert_allclose(results["tflite"], results["saved_model"],
                             atol=1e-5)


def test_onnx_is_served_without_tensorflow(exports):
  _need_onnx()
  version, out = exports("classifier")
  folder = os.path.join(out, "onnx")
  want = _served(version).run(*_batch(2))["probabilities"]
  code = (
      "import sys, json, numpy as np\n"
      "sys.path.insert(0, %r)\n"
      "from bert_tf.export import portable\n"
      "from bert_tf.tasks import features\n"
      "import tokenization\n"
      "config = portable.read_config(%r)\n"
      "tokenizer = tokenization.FullTokenizer(%r, config['do_lower_case'])\n"
      "tokens, segments = features.pack_tokens(tokenizer.tokenize('a b'),\n"
      "    tokenizer.tokenize('c'), config['max_seq_length'])\n"
      "features.pad_input(tokenizer.convert_tokens_to_ids(tokens),\n"
      "    segments, config['max_seq_length'])\n"
      "runner = portable.OnnxRunner(%r, config)\n"
      "batch = [np.array(x) for x in json.loads(sys.stdin.read())]\n"
      "out = runner.run(*batch)['probabilities']\n"
      "assert 'tensorflow' not in sys.modules, 'tensorflow imported'\n"
      "print(json.dumps(out.tolist()))\n" %
      (REPO_ROOT, folder, os.path.join(folder, "assets.extra", "vocab.txt"),
       folder))
  done = subprocess.run(
      [sys.executable, "-c", code], capture_output=True, text=True,
      input=json.dumps([x.tolist() for x in _batch(2)]), timeout=120,
      check=False)
  assert done.returncode == 0, done.stderr[-2000:]
  np.testing.assert_allclose(np.array(json.loads(done.stdout)), want,
                             atol=1e-5)


def _copy_assets(version, folder):
  os.makedirs(os.path.join(folder, "assets.extra"))
  for name in export_utils.ASSET_NAMES:
    with open(os.path.join(version, "assets.extra", name), "rb") as f:
      data = f.read()
    with open(os.path.join(folder, "assets.extra", name), "wb") as f:
      f.write(data)


@pytest.mark.parametrize("model_file", ["model.tflite", "model.onnx"])
def test_a_damaged_model_file_is_one_line_naming_it(exports, tmp_path,
                                                    model_file):
  if model_file == "model.onnx":
    _need_onnx()
  version, _ = exports("classifier")
  folder = str(tmp_path / "damaged")
  _copy_assets(version, folder)
  with open(os.path.join(folder, model_file), "wb") as f:
    f.write(b"not a model at all")
  with pytest.raises(ValueError) as raised:
    serving.BertServingModel(folder)
  message = str(raised.value)
  assert "\n" not in message
  assert os.path.join(folder, model_file) in message
  assert "make it again with predict_saved_model.py --convert_to" in message


def test_a_folder_without_model_or_assets_is_one_line(exports, tmp_path):
  version, out = exports("classifier")
  with pytest.raises(ValueError, match=r"holds the --convert_to folders "
                     r".*tflite.*; expected one of them \(e\.g\. "):
    serving.resolve_version(out)
  folder = str(tmp_path / "no_assets")
  os.makedirs(folder)
  with open(os.path.join(folder, "model.tflite"), "wb") as f:
    with open(os.path.join(out, "tflite", "model.tflite"), "rb") as g:
      f.write(g.read())
  with pytest.raises(ValueError, match=r"is missing assets.extra/vocab.txt"):
    serving.BertServingModel(folder)
  del version


def test_a_missing_runtime_is_one_line_naming_the_extra(exports, tmp_path,
                                                        monkeypatch):
  version, _ = exports("classifier")
  folder = str(tmp_path / "onnx")
  _copy_assets(version, folder)
  with open(os.path.join(folder, "model.onnx"), "wb") as f:
    f.write(b"")
  monkeypatch.setitem(sys.modules, "onnxruntime", None)
  with pytest.raises(ValueError, match=r"is an ONNX model and onnxruntime "
                     r"is not importable .*\(./setup.sh --onnx\)$"):
    serving.BertServingModel(folder)
  monkeypatch.setitem(sys.modules, "tf2onnx", None)
  config, _, _ = serving.read_assets(version)
  with pytest.raises(ValueError, match=r"--convert_to: onnx needs .*tf2onnx.*"
                     r"\(./setup.sh --onnx\)$"):
    portable.convert(version, str(tmp_path / "out"), ["onnx"], config)
  assert not os.path.exists(str(tmp_path / "out" / "onnx"))


def test_bad_formats_and_a_taken_folder_are_one_line(exports, tmp_path):
  version, out = exports("classifier")
  config, _, _ = serving.read_assets(version)
  with pytest.raises(ValueError, match=r"--convert_to: onnx_fp16, expected "
                     r"a comma-separated list of onnx, onnx_int8, tflite, "
                     r"tflite_int8$"):
    portable.convert(version, str(tmp_path), ["onnx_fp16"], config)
  with pytest.raises(ValueError, match=r"already exists and is not empty"):
    portable.convert(version, out, ["tflite"], config)


def test_the_script_refuses_a_bad_ner_line_from_a_portable_folder(
    exports, tmp_path):
  _, out = exports("ner")
  rows = tmp_path / "test.tsv"
  rows.write_text("a\tz\n")
  done = subprocess.run(
      [sys.executable, "predict_saved_model.py",
       "--model_dir=" + os.path.join(out, "tflite"),
       "--input_file=" + str(rows), "--output_dir=" + str(tmp_path / "o")],
      cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, check=False)
  assert done.returncode != 0
  lines = [line for line in done.stderr.splitlines() if "error" in line]
  assert len(lines) == 1, done.stderr[-2000:]
  assert lines[0].endswith(
      "%s:1: label 'z' is not in the export's label_list (labels: %s)" %
      (rows, " ".join(_LABELS)))


@pytest.mark.slow
def test_the_script_converts_then_predicts_the_same_file(exports, tmp_path):
  """predict_saved_model.py --convert_to writes the folders; the script then
  writes the same test_results.tsv from the TensorFlow Lite folder as from
  the SavedModel (and refuses to convert a converted folder)."""
  version, _ = exports("classifier")
  rows = tmp_path / "test.tsv"
  rows.write_text("the cat sat .\tit sat\nno\tyes a b c\n")
  out = str(tmp_path / "portable")
  done = run_script("predict_saved_model.py", [
      "--model_dir=" + version, "--convert_to=tflite", "--output_dir=" + out])
  assert done.returncode == 0, done.stderr[-2000:]
  assert os.path.isfile(os.path.join(out, "tflite", "model.tflite"))
  results = {}
  for name, folder in (("saved_model", version),
                       ("tflite", os.path.join(out, "tflite"))):
    done = run_script("predict_saved_model.py", [
        "--model_dir=" + folder, "--input_file=" + str(rows),
        "--task_name=tsv", "--output_dir=" + str(tmp_path / name)])
    assert done.returncode == 0, done.stderr[-2000:]
    results[name] = np.loadtxt(str(tmp_path / name / "test_results.tsv"),
                               delimiter="\t")
  assert results["tflite"].shape == (2, len(_LABELS))
  np.testing.assert_allclose(results["tflite"], results["saved_model"],
                             atol=1e-5)
  done = run_script("predict_saved_model.py", [
      "--model_dir=" + os.path.join(out, "tflite"), "--convert_to=onnx",
      "--output_dir=" + str(tmp_path / "again")])
  assert done.returncode != 0
  assert "is already a tflite model; --convert_to takes the SavedModel" in (
      done.stderr)
