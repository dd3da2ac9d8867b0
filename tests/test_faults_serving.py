"""An export's `serving_config.json`, every field checked in one line.

`predict_saved_model.py` and `serving.BertServingModel` read it; each bad
value is refused naming the file, the key and what was expected (it was an
`IndexError` for `"bucket_lengths": []`, a `MemoryError` after 44 s for a
`max_seq_length` of 10^12, a `KeyError` for an output the export lacks).
"""

import json
import os

import pytest

import fault_helpers as fh
from bert_tf.export import saved_model as export_utils
from bert_tf.export import serving


def _classifier_config(**changes):
  config = {"kind": "classifier", "do_lower_case": True,
            "max_seq_length": 64, "output_keys": ["probabilities"],
            "label_list": ["0", "1"], "task_name": "mrpc"}
  config.update(changes)
  return config


def _squad_config(**changes):
  config = {"kind": "squad", "do_lower_case": True, "max_seq_length": 64,
            "output_keys": ["start_logits", "end_logits"], "label_list": None,
            "doc_stride": 32, "max_query_length": 16}
  config.update(changes)
  return config


def _ner_config(**changes):
  config = {"kind": "ner", "do_lower_case": True, "max_seq_length": 64,
            "output_keys": ["probabilities"], "label_list": ["O", "B-PER"],
            "doc_stride": 32, "document_context": False}
  config.update(changes)
  return {k: v for k, v in config.items() if v is not None}


def _export_assets(tmp_path, config, bert_config=None):
  """A version folder's assets.extra/ with `config`; returns its path."""
  assets = tmp_path / export_utils.ASSETS_DIR
  assets.mkdir()
  with open(fh.tiny("bert_config.json")) as f:
    model = json.load(f)
  model.update(bert_config or {})
  (assets / export_utils.CONFIG_ASSET).write_text(json.dumps(model))
  (assets / export_utils.VOCAB_ASSET).write_text("[PAD]\n")
  (assets / export_utils.SERVING_ASSET).write_text(json.dumps(config))
  return str(assets / export_utils.SERVING_ASSET)


def _refused(tmp_path, config, bert_config=None):
  path = _export_assets(tmp_path, config, bert_config)
  with pytest.raises(ValueError) as raised:
    serving.read_assets(str(tmp_path))
  message = str(raised.value)
  assert message.startswith(path + ": ") and "\n" not in message, message
  return message[len(path) + 2:]


@pytest.mark.parametrize("buckets, expected", [
    ([], "bucket_lengths is [], expected increasing lengths ending at "
     "max_seq_length=64 (or null: no buckets)"),
    ([0, 64], "bucket_lengths[0] is 0, expected an integer in [1, inf]"),
    ([16, 16, 64], "bucket_lengths [16, 16, 64]: expected increasing "
     "lengths ending at max_seq_length=64"),
    ("64", "bucket_lengths is '64', expected a list or null"),
])
def test_bad_bucket_lengths_are_one_line(tmp_path, buckets, expected):
  assert _refused(tmp_path, _classifier_config(bucket_lengths=buckets)) == (
      expected)


def test_a_huge_max_seq_length_is_refused_at_once(tmp_path):
  assert _refused(tmp_path, _classifier_config(max_seq_length=10 ** 12)) == (
      "max_seq_length is 1000000000000, expected an integer in [3, 1048576]")


def test_max_seq_length_beyond_the_models_positions_is_refused(tmp_path):
  message = _refused(tmp_path, _classifier_config(max_seq_length=1024),
                     bert_config={"max_position_embeddings": 512})
  assert message == (
      "max_seq_length is 1024, expected at most the model's "
      "max_position_embeddings=512 (%s)" %
      (tmp_path / export_utils.ASSETS_DIR / export_utils.CONFIG_ASSET))


@pytest.mark.parametrize("config, expected", [
    (_classifier_config(output_keys=[]), "output_keys is [], expected the "
     "names of the outputs (probabilities for a classifier export)"),
    (_classifier_config(output_keys=["probabilities", "probabilities"]),
     "output_keys names 'probabilities' twice, expected distinct names"),
    (_classifier_config(output_keys=["logits"]), "output_keys is ['logits'], "
     "expected it to name 'probabilities' (what a classifier export serves)"),
    (_squad_config(output_keys=["start_logits"]), "output_keys is "
     "['start_logits'], expected it to name 'end_logits' (what a squad "
     "export serves)"),
    (_classifier_config(output_keys=["probabilities", 3]),
     "output_keys[1] is 3, expected a string"),
    (_classifier_config(label_list=[]), "label_list is [], expected the "
     "classifier export's labels (a non-empty list of strings)"),
    (_classifier_config(label_list=None), "label_list is None, expected the "
     "classifier export's labels (a non-empty list of strings)"),
    (_squad_config(max_query_length=61), "max_query_length is 61, expected "
     "at most max_seq_length - 4 = 60 (room for [CLS], two [SEP] and a "
     "document token)"),
    (_squad_config(doc_stride=0), "doc_stride is 0, expected an integer in "
     "[1, inf]"),
    (_classifier_config(do_lower_case="yes"), "do_lower_case is 'yes', "
     "expected true or false"),
    (_classifier_config(tsv_columns={"text_a_column": -1}),
     "tsv_columns.text_a_column is -1, expected an integer in [0, inf]"),
    (_classifier_config(max_examples_per_row=0), "max_examples_per_row is "
     "0, expected an integer in [1, 4096]"),
    (_classifier_config(max_examples_per_row=5000), "max_examples_per_row "
     "is 5000, expected an integer in [1, 4096]"),
    (_classifier_config(max_examples_per_row="4"), "max_examples_per_row "
     "is '4', expected an integer or null"),
    (_squad_config(max_examples_per_row=4), "max_examples_per_row is 4, "
     "expected null for a squad export (only classifier, regression and NER "
     "exports serve packed rows)"),
    (_classifier_config(doc_stride=16, window_aggregation="median"),
     "window_aggregation is 'median', expected one of mean, max (how a "
     "classifier export with doc_stride combines a text's windows)"),
    (_classifier_config(doc_stride=0), "doc_stride is 0, expected an integer "
     "in [1, inf]"),
    (_ner_config(doc_stride=None), "the top level has no 'doc_stride' field "
     "(expected an integer)"),
    (_ner_config(document_context="yes"), "document_context is 'yes', "
     "expected true or false"),
])
def test_every_field_is_checked_in_one_line(tmp_path, config, expected):
  assert _refused(tmp_path, config) == expected


def test_a_good_ner_config_is_read(tmp_path):
  _export_assets(tmp_path, _ner_config(max_examples_per_row=16))
  assert serving.read_assets(str(tmp_path))[0]["max_examples_per_row"] == 16


def test_a_good_config_is_read(tmp_path):
  _export_assets(tmp_path, _squad_config(bucket_lengths=[16, 32, 64]))
  config, vocab, bert_config = serving.read_assets(str(tmp_path))
  assert config["bucket_lengths"] == [16, 32, 64]
  assert os.path.basename(vocab) == export_utils.VOCAB_ASSET
  assert os.path.basename(bert_config) == export_utils.CONFIG_ASSET


def test_an_output_key_the_export_lacks_is_named():
  config = _classifier_config(output_keys=["probabilities", "logits"])
  with pytest.raises(ValueError) as raised:
    serving.check_served_outputs(config, "serving_config.json",
                                 {"probabilities": [None, 2]})
  assert str(raised.value) == (
      "serving_config.json: output_keys[1] is 'logits', expected one of the "
      "export's outputs (probabilities)")


def test_a_label_list_of_the_wrong_length_is_named():
  config = _classifier_config(label_list=["a", "b", "c"])
  with pytest.raises(ValueError) as raised:
    serving.check_served_outputs(config, "serving_config.json",
                                 {"probabilities": [None, 2]})
  assert str(raised.value) == (
      "serving_config.json: label_list has 3 labels, expected 2 (the "
      "export's probabilities have shape [None, 2])")
  serving.check_served_outputs(_classifier_config(), "serving_config.json",
                               {"probabilities": [None, 2]})


def test_predict_saved_model_refuses_a_huge_max_seq_length_in_one_line(
    tmp_path):
  version = tmp_path / "export" / "1"
  version.mkdir(parents=True)
  (version / "saved_model.pb").write_bytes(b"")
  path = _export_assets(version, _classifier_config(max_seq_length=10 ** 12))
  result = fh.run("predict_saved_model.py", fh.flags(
      model_dir=tmp_path / "export", input_file=tmp_path / "test.tsv",
      output_dir=tmp_path / "out"), timeout=120)
  assert result.returncode == 1, result.stderr
  assert fh.last_line(result.stderr) == (
      "error: %s: max_seq_length is 1000000000000, expected an integer in "
      "[3, 1048576]" % path)
  assert not os.path.exists(str(tmp_path / "out"))
