"""Packed rows in exports: the `serving_packed` signature of a packed run's
classifier, regression and multi-label exports, and `predict_saved_model.py
--pack_sequences`, whose test_results.tsv equals the unpacked one within
1e-5 on real MRPC pairs (bert_tf/export/saved_model.py, serving.py); bad
packed values are refused in one line."""

import json
import os
import shutil
import types

import numpy as np
import pytest
import tensorflow as tf2

from helpers import shared_path
from test_export import _bert_config
from test_export import _model_file
from test_export import _write_fine_tuned_checkpoint
from test_portable import _need_onnx

from bert_tf.export import portable
from bert_tf.export import saved_model as export_utils
from bert_tf.export import serving
from bert_tf.tasks.classifier import model as classifier_model
from bert_tf.tasks.classifier import windows as windows_lib
from bert_tf.train import model_fn as model_fn_utils
import predict_saved_model
import run_classifier

_SEQ, _SLOTS = 64, 4


_HEADS = {"classifier": lambda: classifier_model.SingleLabelHead(["0", "1"]),
          "regression": classifier_model.RegressionHead,
          "multi_label": lambda: classifier_model.MultiLabelHead(["0", "1"])}


def _export(checkpoint, export_dir, kind, slots):
  head = _HEADS[kind]()
  spec = head.export_spec()
  return export_utils.export_saved_model(
      model_fn_utils.build_model_fn(head, _bert_config(), None, False, False,
                                    log_features=False),
      checkpoint, export_dir, _SEQ, kind=spec["kind"],
      output_keys=spec["output_keys"], vocab_file=_model_file("vocab.txt"),
      bert_config_file=_model_file("bert_config.json"), do_lower_case=True,
      label_list=head.label_list or None,
      extra_features=spec["extra_features"],
      extra_config=dict(spec["extra_config"], task_name="mrpc"),
      max_examples_per_row=slots)


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
  """kind -> packed export (rows of 4); "unpacked": the classifier's
  export without packing; multi-label on the classifier's checkpoint."""
  root = tmp_path_factory.mktemp("packed")
  checkpoints = {kind: _write_fine_tuned_checkpoint(str(root / kind), kind)
                 for kind in ("classifier", "regression")}
  checkpoints["multi_label"] = checkpoints["classifier"]
  versions = {kind: _export(checkpoint, str(root / (kind + "_export")),
                            kind, _SLOTS)
              for kind, checkpoint in checkpoints.items()}
  versions["unpacked"] = _export(checkpoints["classifier"],
                                 str(root / "unpacked"), "classifier", None)
  return versions


@pytest.fixture(scope="module")
def mrpc_pairs():
  """18 MRPC test pairs: every third whole (truncated to 64 tokens), the
  others cut to their first 1 to 3 words, so rows hold 1 to 4 pairs."""
  with open(shared_path("data", "glue", "MRPC", "test.tsv"),
            encoding="utf-8") as f:
    rows = [line.split("\t") for line in f.read().splitlines()[1:19]]
  examples = []
  for i, row in enumerate(rows):
    texts = [text if i % 3 == 0 else " ".join(text.split()[:1 + i % 3])
             for text in row[3:5]]
    examples.append(run_classifier.InputExample("test-%d" % i, *texts))
  return examples


def _copy_with_config(version_dir, tmp_path, **changes):
  """A copy of the export at `version_dir` whose serving_config.json has
  `changes`; its version folder."""
  version = str(tmp_path / "1")
  shutil.copytree(version_dir, version)
  path = os.path.join(version, "assets.extra", "serving_config.json")
  with open(path, encoding="utf-8") as f:
    config = json.load(f)
  with open(path, "w", encoding="utf-8") as f:
    json.dump(dict(config, **changes), f)
  return version


@pytest.mark.parametrize("kind", sorted(_HEADS))
def test_packed_predictions_equal_unpacked_ones(exports, mrpc_pairs,
                                                tmp_path, kind, caplog):
  model = serving.BertServingModel(exports[kind])
  caplog.set_level("INFO", logger="absl")  # absl.logging.info's own logger.
  results = []
  for slots in (None, _SLOTS):
    path = str(tmp_path / ("%s.tsv" % slots))
    assert predict_saved_model.predict_classifier(
        model, mrpc_pairs, path, batch_size=3,
        max_examples_per_row=slots) == len(mrpc_pairs)
    results.append(np.loadtxt(path, ndmin=2))
  assert "Packed 18 inputs into 10 rows of 64 tokens" in caplog.text
  assert results[0].shape == (18, 1 if kind == "regression" else 2)
  np.testing.assert_allclose(results[1], results[0], atol=1e-5, rtol=0)
  # The outputs differ between examples by far more than the tolerance.
  assert np.ptp(results[0][:, -1]) > 2e-4


@pytest.mark.parametrize("aggregation", ["mean", "max"])
def test_windows_of_long_texts_give_one_line_a_text(exports, mrpc_pairs,
                                                   tmp_path, aggregation):
  # As run_classifier.py --doc_stride: text_a in windows 8 tokens apart,
  # each text's line the mean (max) of its windows' probabilities. The
  # pairs' texts joined: up to 90 tokens, short ones one window.
  texts = [run_classifier.InputExample(e.guid, e.text_a + " " + e.text_b)
           for e in mrpc_pairs]
  model = serving.BertServingModel(exports["classifier"])
  windows, owners = [], []
  for index, example in enumerate(texts):
    for window in windows_lib.encode_windows(example, model.tokenizer, _SEQ,
                                             8):
      windows.append(window)
      owners.append(index)
  assert len(windows) == 68  # The 6 whole pairs: 5 to 16 windows each.
  alone = model.run(*(np.array(x) for x in zip(*windows)))["probabilities"]
  reduce_fn = np.mean if aggregation == "mean" else np.max
  expected = [reduce_fn(alone[np.array(owners) == index], axis=0)
              for index in range(len(texts))]
  for slots in (None, _SLOTS):
    path = str(tmp_path / ("%s.tsv" % slots))
    assert predict_saved_model.predict_classifier(
        model, texts, path, batch_size=3, max_examples_per_row=slots,
        doc_stride=8, window_aggregation=aggregation) == len(texts)
    np.testing.assert_allclose(np.loadtxt(path, ndmin=2), expected,
                               atol=1e-5, rtol=0)
  # An export that keeps the windows (serving_config.json's doc_stride and
  # window_aggregation): `classify` reads them too.
  version = _copy_with_config(exports["classifier"], tmp_path, doc_stride=8,
                              window_aggregation=aggregation)
  classified = serving.BertServingModel(version).classify(texts[3].text_a)
  np.testing.assert_allclose([classified["0"], classified["1"]], expected[3],
                             atol=1e-5, rtol=0)
  # A pair's text_b is whole in every window: one too long is one line.
  with pytest.raises(ValueError) as raised:
    predict_saved_model.predict_classifier(
        model, mrpc_pairs[3:4], str(tmp_path / "pairs.tsv"), batch_size=3,
        doc_stride=8)
  assert str(raised.value) == (
      "example test-3: text_b has 91 tokens, which leaves no room for "
      "text_a in max_seq_length=64 (with doc_stride, text_b is whole in "
      "every window)")


def test_the_packed_signature_sits_beside_the_unchanged_default(exports):
  signatures = {}
  for name in ("classifier", "unpacked"):
    loaded = tf2.saved_model.load(exports[name])
    signatures[name] = {
        key: (sig.structured_input_signature[1],
              {k: v.shape.as_list() for k, v in
               sig.structured_outputs.items()})
        for key, sig in loaded.signatures.items()}
    with open(os.path.join(exports[name], "assets.extra",
                           "serving_config.json"), encoding="utf-8") as f:
      signatures[name]["config"] = json.load(f)
  packed, unpacked = signatures["classifier"], signatures["unpacked"]
  assert sorted(unpacked) == ["config", "serving_default"]
  assert "max_examples_per_row" not in unpacked["config"]
  assert packed["serving_default"] == unpacked["serving_default"]
  assert packed["config"] == dict(unpacked["config"], max_examples_per_row=4)
  inputs, outputs = packed["serving_packed"]
  assert {k: v.shape.as_list() for k, v in inputs.items()} == {
      "input_ids": [None, _SEQ], "input_mask": [None, _SEQ],
      "segment_ids": [None, _SEQ], "position_ids": [None, _SEQ],
      "cls_positions": [None, _SLOTS]}
  assert outputs == {"probabilities": [None, _SLOTS, 2]}


def _flags(**values):
  return types.SimpleNamespace(**dict(
      {"pack_sequences": True, "max_examples_per_row": None}, **values))


def _config(version):
  return serving.read_assets(version)[0]


def test_examples_per_row_defaults_to_the_exports(exports):
  version = exports["classifier"]
  rows_of = predict_saved_model._examples_per_row  # pylint: disable=protected-access
  assert rows_of(_flags(), _config(version), version) == _SLOTS
  assert rows_of(_flags(max_examples_per_row=2), _config(version),
                 version) == 2
  assert rows_of(_flags(pack_sequences=False), _config(version),
                 version) is None


def test_packed_faults_are_one_line(exports, tmp_path):
  rows_of = predict_saved_model._examples_per_row  # pylint: disable=protected-access
  version = exports["classifier"]
  with pytest.raises(ValueError) as raised:
    rows_of(_flags(max_examples_per_row=5), _config(version), version)
  assert str(raised.value) == (
      "--max_examples_per_row=5: expected 1..4, the export's "
      "max_examples_per_row (%s)" % version)
  unpacked = exports["unpacked"]
  with pytest.raises(ValueError) as raised:
    rows_of(_flags(), _config(unpacked), unpacked)
  assert str(raised.value) == (
      "--pack_sequences: %s has no packed signature (no max_examples_per_row "
      "in its serving_config.json); packed rows need an export of "
      "run_classifier.py or run_ner.py --pack_sequences --export_dir" %
      unpacked)
  tflite = tmp_path / "tflite"
  tflite.mkdir()
  (tflite / "model.tflite").write_bytes(b"")
  with pytest.raises(ValueError) as raised:
    serving.packed_slots(str(tflite), _config(version))
  assert str(raised.value) == (
      "--pack_sequences: %s holds model.tflite but no model_packed.onnx; "
      "packed rows need an export of run_classifier.py or run_ner.py "
      "--pack_sequences --export_dir, or its onnx or onnx_int8 form" % tflite)
  # A row wider than the export's slots, or longer than its rows.
  model = serving.BertServingModel(version)
  row = {"input_ids": [101, 102], "input_mask": [1, 1], "segment_ids": [0, 0],
         "position_ids": [0, 1], "cls_positions": [0] * 5}
  with pytest.raises(ValueError) as raised:
    model.run_packed([row])
  assert str(raised.value) == (
      "--max_examples_per_row: rows of 5 examples and 2 tokens, expected at "
      "most the export's max_examples_per_row=4 and max_seq_length=64 (%s)" %
      version)


def test_a_config_claiming_packed_rows_without_the_signature_is_one_line(
    exports, tmp_path):
  version = _copy_with_config(exports["unpacked"], tmp_path,
                              max_examples_per_row=4)
  with pytest.raises(ValueError) as raised:
    serving.BertServingModel(version)
  assert str(raised.value) == (
      "--model_dir: %s: serving_config.json has max_examples_per_row=4 but "
      "the SavedModel has no serving_packed signature: export it again" %
      version)


@pytest.mark.slow
def test_the_onnx_form_serves_packed_rows(exports, mrpc_pairs, tmp_path):
  # --convert_to=onnx of a packed export: model.onnx and model_packed.onnx.
  _need_onnx()
  version = exports["classifier"]
  folder = portable.convert(version, str(tmp_path), ["onnx"],
                            _config(version))["onnx"]
  assert os.path.isfile(os.path.join(folder, portable.PACKED_MODEL_FILE))
  results = []
  for model_dir, slots in ((version, None), (folder, _SLOTS)):
    path = str(tmp_path / ("%s.tsv" % slots))
    predict_saved_model.predict_classifier(
        serving.BertServingModel(model_dir), mrpc_pairs, path, batch_size=3,
        max_examples_per_row=slots)
    results.append(np.loadtxt(path, ndmin=2))
  np.testing.assert_allclose(results[1], results[0], atol=1e-5, rtol=0)
