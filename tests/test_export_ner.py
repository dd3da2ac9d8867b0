"""NER exports served by predict_saved_model.py: test_predictions.txt equal
to the runner's on real CoNLL-2003 sentences (windows included), the packed
signature of a run_ner.py --pack_sequences export giving the unpacked
probabilities within 1e-5, and bad input refused in one line
(predict_saved_model.py, bert_tf/export/saved_model.py, serving.py)."""

import json
import os
import re
import types

import numpy as np
import pytest
import tensorflow as tf2

from helpers import run_script
from helpers import shared_path
from test_export import _bert_config
from test_export import _model_file
from test_export import _runner_predict
from test_export import _write_fine_tuned_checkpoint
from test_portable import _need_onnx

from bert_tf.cli import fine_tuning
from bert_tf.export import portable
from bert_tf.export import saved_model as export_utils
from bert_tf.export import serving
from bert_tf.tasks.ner import features as ner_features
from bert_tf.tasks.ner import metrics as ner_metrics
from bert_tf.tasks.ner import model as ner_model
from bert_tf.tasks.ner import reader as ner_reader
import predict_saved_model
import run_ner
import tokenization

_SEQ, _STRIDE, _SLOTS = 64, 16, 4
_LABELS = ["B-LOC", "B-MISC", "B-ORG", "B-PER", "I-LOC", "I-MISC", "I-ORG",
           "I-PER", "O"]


def _test_sentences():
  """18 CoNLL-2003 test sentences, in their own lines: 16 short ones (of
  1 to 5 words, several a row) around 2 long ones (3 windows each)."""
  with open(shared_path("data", "ner", "conll2003", "eng.testb"),
            encoding="utf-8") as f:
    blocks = [block for block in f.read().split("\n\n")
              if block.strip() and not block.startswith("-DOCSTART-")]
  short = [block for block in blocks if len(block.splitlines()) <= 5][:16]
  long = [block for block in blocks if len(block.splitlines()) > 25][:2]
  return "\n\n".join(short[:8] + long + short[8:]) + "\n"


@pytest.fixture(scope="module")
def ner(tmp_path_factory):
  """A packed export as run_ner.py --pack_sequences --export_dir writes it
  (run_ner's serving and model-file settings, rows of 4), its checkpoint
  folder and a CoNLL file of test sentences (`_test_sentences`)."""
  root = tmp_path_factory.mktemp("ner")
  model_dir = str(root / "model")
  _write_fine_tuned_checkpoint(model_dir, "ner",
                               num_labels=len(_LABELS))
  flag_values = types.SimpleNamespace(
      doc_stride=_STRIDE, document_context=False,
      vocab_file=_model_file("vocab.txt"),
      bert_config_file=_model_file("bert_config.json"), do_lower_case=True,
      max_seq_length=_SEQ, output_dir=model_dir,
      export_dir=str(root / "export"), bucket_by_length=False,
      pack_sequences=True, max_examples_per_row=_SLOTS)
  version = fine_tuning.exporter(
      ner_model.TokenHead(len(_LABELS)), _bert_config(),
      run_ner._serving(flag_values, _LABELS),  # pylint: disable=protected-access
      run_ner._model_files(flag_values), None)()  # pylint: disable=protected-access
  test_file = root / "test.txt"
  test_file.write_text(_test_sentences(), encoding="utf-8")
  return types.SimpleNamespace(model_dir=model_dir, version=version,
                               test_file=str(test_file))


def _flags(test_file, output_dir, **values):
  return types.SimpleNamespace(**dict(
      {"input_file": test_file, "output_dir": str(output_dir),
       "label_column": -1, "batch_size": 3, "pack_sequences": False,
       "max_examples_per_row": None}, **values))


def _served(ner, output_dir, model_dir=None, **values):
  """predict_saved_model.py's NER path, in process: the config of the
  export (or `model_dir`) read and checked as main reads it; returns
  test_predictions.txt."""
  model_dir = model_dir or ner.version
  config = serving.read_assets(model_dir)[0]
  test_file = values.pop("test_file", ner.test_file)
  predict_saved_model._KINDS[config["kind"]](  # pylint: disable=protected-access
      model_dir, config, _flags(test_file, output_dir, **values))
  with open(os.path.join(output_dir, "test_predictions.txt"),
            encoding="utf-8") as f:
    return f.read()


def test_served_predictions_equal_the_runners(ner, tmp_path, caplog):
  # run_ner.py --do_predict's path: features, runner predictions, word
  # labels, test_predictions.txt.
  sentences = ner_reader.read_conll_file(ner.test_file)
  features, _ = ner_features.convert_sentences_to_features(
      sentences, _LABELS, tokenization.FullTokenizer(
          _model_file("vocab.txt"), do_lower_case=True), _SEQ, _STRIDE, False)
  assert len(features) > len(sentences)  # Some sentences have two windows.
  arrays = {name: np.array([getattr(f, name) for f in features], np.int32)
            for name in ("input_ids", "input_mask", "segment_ids",
                         "label_ids", "label_weights", "unique_id",
                         "is_real_example")}
  arrays["unique_ids"] = arrays.pop("unique_id")
  predictions = _runner_predict(ner_model.model_fn_builder(
      _bert_config(), len(_LABELS), None, 0.0, None, None, False, False),
                                ner.model_dir, arrays)
  ner_metrics.write_conll_predictions(
      str(tmp_path / "want.txt"), sentences, ner_metrics.word_predictions(
          sentences, features, predictions, _LABELS))
  want = (tmp_path / "want.txt").read_text(encoding="utf-8")
  caplog.set_level("INFO", logger="absl")
  assert _served(ner, tmp_path / "served") == want
  assert len(set(line.split()[-1] for line in want.splitlines()
                 if line)) > 2  # Labels vary.
  assert "Test set (%s): precision" % ner.test_file in caplog.text
  # Packed rows (the export's packed signature) give the same file.
  assert _served(ner, tmp_path / "packed", pack_sequences=True) == want
  rows = re.search(r"Packed %d inputs into (\d+) rows" % len(features),
                   caplog.text)
  assert int(rows.group(1)) <= len(features) // 2


def test_packed_probabilities_equal_unpacked_ones(ner):
  model = serving.BertServingModel(ner.version)
  tokenizer = model.tokenizer
  features, _ = ner_features.convert_sentences_to_features(
      ner_reader.read_conll_file(ner.test_file), _LABELS, tokenizer, _SEQ,
      _STRIDE, False)
  want = model.run(*([getattr(f, name) for f in features]
                     for name in export_utils.INPUT_NAMES))["probabilities"]
  got = model.predict_packed(
      [{name: getattr(f, name)[:sum(f.input_mask)] for name in (
          "input_ids", "segment_ids")} for f in features], _SLOTS, 2)
  assert len(got) == len(features)
  for i, feature in enumerate(features):
    length = sum(feature.input_mask)
    np.testing.assert_allclose(got[i]["probabilities"][:length],
                               want[i][:length], atol=1e-5, rtol=0)
    assert not got[i]["probabilities"][length:].any()
  # The outputs differ between tokens by far more than the tolerance.
  assert np.ptp(want[:, 1, :]) > 0.01


def test_the_packed_signature_has_no_cls_positions(ner):
  signatures = tf2.saved_model.load(ner.version).signatures
  inputs = {name: (sig.structured_input_signature[1], {
      k: v.shape.as_list() for k, v in sig.structured_outputs.items()})
            for name, sig in signatures.items()}
  assert sorted(inputs) == ["serving_default", "serving_packed"]
  default, packed = inputs["serving_default"], inputs["serving_packed"]
  assert {k: v.shape.as_list() for k, v in default[0].items()} == {
      name: [None, _SEQ] for name in export_utils.INPUT_NAMES}
  assert {k: v.shape.as_list() for k, v in packed[0].items()} == {
      name: [None, _SEQ] for name in export_utils.INPUT_NAMES + (
          "position_ids",)}
  assert default[1] == packed[1] == {
      "probabilities": [None, _SEQ, len(_LABELS)]}
  with open(os.path.join(ner.version, "assets.extra", "serving_config.json"),
            encoding="utf-8") as f:
    config = json.load(f)
  assert config["max_examples_per_row"] == _SLOTS
  assert config["kind"] == "ner"


def _error(call):
  with pytest.raises(ValueError) as raised:
    call()
  assert "\n" not in str(raised.value)
  return str(raised.value)


def test_invalid_tag_sequences_are_counted_in_one_warning(ner, tmp_path,
                                                         caplog):
  # As run_ner.py with --tag_scheme=auto: IOB2 detected (two B- starts to
  # one I- start), the I-LOC after O counted and kept.
  conll = tmp_path / "iob2.txt"
  conll.write_text(
      "John NNP I-NP B-PER\nSmith NNP I-NP I-PER\nsaid VBD I-VP O\n\n"
      "Mary NNP I-NP B-PER\nsaw VBD I-VP O\nParis NNP I-NP I-LOC\n",
      encoding="utf-8")
  caplog.set_level("INFO", logger="absl")
  lines = _served(ner, tmp_path / "o", test_file=str(conll)).splitlines()
  assert [line.split()[:2] for line in lines if line][-1] == ["Paris",
                                                             "I-LOC"]
  assert ("%s: 1 of 2 sentences have a tag sequence that is invalid in IOB2 "
          "(first: line 7, 'I-LOC' after 'O'); they are kept as they are" %
          conll) in caplog.text


def test_bad_ner_inputs_are_one_line(ner, tmp_path):
  bad = tmp_path / "bad.txt"
  bad.write_text("EU NNP I-NP I-ORG\nrejects VBZ I-VP\n", encoding="utf-8")
  assert _error(lambda: _served(ner, tmp_path / "o", test_file=str(bad))) == (
      "%s:2: expected 4 space-separated columns (as on line 1), got 3" % bad)
  bad.write_text("EU NNP I-NP I-ORG\nrejects VBZ I-VP B-VERB\n",
                 encoding="utf-8")
  assert _error(lambda: _served(ner, tmp_path / "o", test_file=str(bad))) == (
      "%s:2: label 'B-VERB' is not in the export's label_list (labels: %s)"
      % (bad, " ".join(_LABELS)))
  assert _error(lambda: _served(ner, tmp_path / "o", pack_sequences=True,
                                max_examples_per_row=5)) == (
      "--max_examples_per_row=5: expected 1..4, the export's "
      "max_examples_per_row (%s)" % ner.version)
  assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_run_ner_and_the_script_write_the_same_predictions(ner, tmp_path):
  # run_ner.py --do_predict --pack_sequences --export_dir, then
  # predict_saved_model.py --pack_sequences on its export.
  model_dir = str(tmp_path / "model")
  _write_fine_tuned_checkpoint(model_dir, "ner",
                               num_labels=len(_LABELS))
  ner_reader.write_label_list(os.path.join(model_dir, "label_list.txt"),
                              _LABELS)
  proc = run_script("run_ner.py", [
      "--vocab_file=%s" % _model_file("vocab.txt"),
      "--bert_config_file=%s" % _model_file("bert_config.json"),
      "--do_predict", "--data_dir=%s" % os.path.dirname(ner.test_file),
      "--test_file=%s" % os.path.basename(ner.test_file),
      "--output_dir=%s" % model_dir, "--max_seq_length=%d" % _SEQ,
      "--doc_stride=%d" % _STRIDE, "--pack_sequences",
      "--max_examples_per_row=%d" % _SLOTS,
      "--export_dir=%s" % (tmp_path / "export")])
  assert proc.returncode == 0, proc.stderr[-3000:]
  proc = run_script("predict_saved_model.py", [
      "--model_dir=%s" % (tmp_path / "export"),
      "--input_file=%s" % ner.test_file, "--pack_sequences",
      "--output_dir=%s" % (tmp_path / "served")])
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert re.search(r"Packed 24 inputs into 12 rows of 64 tokens",
                   proc.stderr)
  assert "Test set (%s): precision" % ner.test_file in proc.stderr
  want = (tmp_path / "model" / "test_predictions.txt").read_text("utf-8")
  assert (tmp_path / "served" / "test_predictions.txt").read_text(
      "utf-8") == want
  assert want == _served(ner, tmp_path / "in_process")


@pytest.mark.slow
def test_the_onnx_form_serves_packed_ner_rows(ner, tmp_path):
  # --convert_to=onnx of a packed NER export: model.onnx and
  # model_packed.onnx, each giving the SavedModel's test_predictions.txt.
  _need_onnx()
  folder = portable.convert(ner.version, str(tmp_path), ["onnx"],
                            serving.read_assets(ner.version)[0])["onnx"]
  assert os.path.isfile(os.path.join(folder, portable.PACKED_MODEL_FILE))
  want = _served(ner, tmp_path / "saved_model")
  for packed in (False, True):
    assert _served(ner, tmp_path / str(packed), model_dir=folder,
                   pack_sequences=packed) == want
