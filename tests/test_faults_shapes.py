"""Issue #34: input that parses but has the wrong shape, one test per case.

Each test names a case of the issue; on the code before it each one gave a
traceback (RecursionError, TypeError, AttributeError, KeyError) or was
accepted. In-process, except one end-to-end check that the script prints
exactly one `error:` line.
"""

import json
import os

import pytest

import fault_helpers as fh
from bert_tf.checks import config as config_checks
from bert_tf.checks import disk
from bert_tf.cli import startup
from bert_tf.convert import files as convert_files
from bert_tf.convert import folders as convert_folders
from bert_tf.export import saved_model as export_utils
from bert_tf.export import serving
from bert_tf.tasks.squad import data as squad_data
from bert_tf.tasks.squad import predictions as squad_predictions
from bert_tf.train import options as training_options
import modeling

_DEEP = 100000


def _tiny_config():
  with open(fh.tiny("bert_config.json")) as f:
    return json.load(f)


def _write(path, text):
  with open(path, "w") as f:
    f.write(text if isinstance(text, str) else json.dumps(text))
  return str(path)


def _one_line(info, path):
  message = str(info.value)
  assert "\n" not in message and str(path) in message, message
  return message


# ---------------------------------------------------------------------------
# bert_config.json.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["[" * _DEEP + "]" * _DEEP,
                                  "{\"a\":" * _DEEP + "1" + "}" * _DEEP])
def test_bert_config_nested_100000_deep_is_one_line(tmp_path, text):
  path = _write(tmp_path / "bert_config.json", text)
  with pytest.raises(ValueError) as info:
    startup.load_bert_config(path)
  assert "nested deeper than 64 levels" in _one_line(info, path)
  with pytest.raises(ValueError, match="nested deeper"):
    modeling.BertConfig.from_json_file(path)


@pytest.mark.parametrize("key,value,expected", [
    ("initializer_range", float("inf"), "'initializer_range' is inf; "
     "expected a finite positive number"),
    ("hidden_size", 10 ** 9, "'hidden_size' is 1000000000; expected a "
     "positive integer up to 65536"),
    ("num_hidden_layers", 10 ** 30, "'num_hidden_layers' is "
     "1000000000000000000000000000000; expected a positive integer up to "
     "1000"),
])
def test_absurd_config_value_is_refused_at_start_up(tmp_path, key, value,
                                                    expected):
  config = dict(_tiny_config(), **{key: value})
  path = _write(tmp_path / "bert_config.json", config)
  with pytest.raises(ValueError) as info:
    startup.load_bert_config(path)
  assert expected in _one_line(info, path)


def test_model_larger_than_memory_is_refused_with_its_size(tmp_path):
  config = dict(_tiny_config(), hidden_size=32768, num_attention_heads=64,
                intermediate_size=131072, num_hidden_layers=1000)
  count = config_checks.parameter_count(config)
  assert count > 10 ** 12
  message = config_checks.memory_problem(config)
  assert message.startswith("the model has %d parameters: its float32 "
                            "weights alone need " % count), message
  assert "but this machine has" in message
  path = _write(tmp_path / "bert_config.json", config)
  with pytest.raises(ValueError, match="the model has %d parameters" % count):
    startup.load_bert_config(path)


def test_parameter_count_matches_the_tiny_models_variables():
  with open(fh.tiny("variables.json")) as f:
    shapes = [v["shape"] for v in json.load(f)
              if v["name"].startswith("bert/")]
  total = 0
  for shape in shapes:
    size = 1
    for dim in shape:
      size *= dim
    total += size
  assert config_checks.parameter_count(_tiny_config()) == total


def test_memory_problem_compares_with_the_memory_given():
  config = _tiny_config()
  count = config_checks.parameter_count(config)
  assert config_checks.memory_problem(config, memory_bytes=4 * count) is None
  assert "the model has %d parameters" % count in (
      config_checks.memory_problem(config, memory_bytes=4 * count - 1))


# ---------------------------------------------------------------------------
# SQuAD.
# ---------------------------------------------------------------------------


def _squad(**qa):
  question = {"id": "q1", "question": "Who?",
              "answers": [{"text": "Ann", "answer_start": 0}]}
  question.update(qa)
  return {"data": [{"paragraphs": [{"context": "Ann came.",
                                    "qas": [question]}]}]}


def test_squad_nested_100000_deep_is_one_line(tmp_path):
  path = _write(tmp_path / "train.json",
                "{\"data\":" + "[" * _DEEP + "]" * _DEEP + "}")
  with pytest.raises(ValueError) as info:
    squad_data.read_squad_examples(path, True)
  assert "nested deeper" in _one_line(info, path)


@pytest.mark.parametrize("qas_id", [["q"], {"a": 1}])
def test_squad_question_id_that_is_a_list_or_object_is_refused(tmp_path,
                                                              qas_id):
  path = _write(tmp_path / "train.json", _squad(id=qas_id))
  with pytest.raises(ValueError) as info:
    squad_data.read_squad_examples(path, False)
  assert ("data[0].paragraphs[0].qas[0].id is a list, expected a string"
          in _one_line(info, path) or "is an object, expected a string" in
          str(info.value))


def test_squad_v2_answers_int_with_is_impossible_is_refused(tmp_path):
  path = _write(tmp_path / "train.json", _squad(answers=3,
                                                is_impossible=True))
  with pytest.raises(ValueError) as info:
    squad_data.read_squad_examples(path, True, version_2_with_negative=True)
  assert ("data[0].paragraphs[0].qas[0].answers is 3, expected a list or "
          "null" in _one_line(info, path))


# ---------------------------------------------------------------------------
# Hugging Face folders and tf_to_hf.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name,read", [
    ("config.json", lambda d: convert_files.read_json(
        os.path.join(d, "config.json"))),
    ("model.safetensors.index.json", convert_files.safetensors_files),
    ("tokenizer.json", convert_files.hf_vocab_text),
    ("tokenizer_config.json", convert_files.log_lower_case),
])
def test_hf_file_that_is_a_list_is_one_line(tmp_path, name, read):
  path = _write(tmp_path / name, [1, 2])
  with pytest.raises(ValueError) as info:
    read(str(tmp_path))
  assert "the top level is a list, expected an object" in _one_line(info,
                                                                    path)


def test_shard_index_with_int_file_names_is_refused(tmp_path):
  path = _write(tmp_path / "model.safetensors.index.json",
                {"weight_map": {"bert.pooler.dense.bias": 3}})
  with pytest.raises(ValueError) as info:
    convert_files.safetensors_files(str(tmp_path))
  assert "weight_map['bert.pooler.dense.bias'] is 3, expected a string" in (
      _one_line(info, path))


@pytest.mark.parametrize("name", ["../elsewhere/model.safetensors",
                                  "/etc/model.safetensors", "link.safetensors"])
def test_shard_index_leading_out_of_the_folder_is_refused(tmp_path, name):
  folder = tmp_path / "model"
  (tmp_path / "elsewhere").mkdir()
  (tmp_path / "elsewhere" / "model.safetensors").write_bytes(b"x")
  folder.mkdir()
  os.symlink(str(tmp_path / "elsewhere" / "model.safetensors"),
             str(folder / "link.safetensors"))
  path = _write(folder / "model.safetensors.index.json",
                {"weight_map": {"w": name}})
  with pytest.raises(ValueError) as info:
    convert_files.read_hf_weights(str(folder))
  assert "expected a file inside" in _one_line(info, path)


def test_shard_links_of_a_hub_cache_snapshot_are_followed(tmp_path):
  blobs = tmp_path / "models--x" / "blobs"
  snapshot = tmp_path / "models--x" / "snapshots" / "abc"
  blobs.mkdir(parents=True)
  snapshot.mkdir(parents=True)
  (blobs / "123").write_bytes(b"x")
  os.symlink("../../blobs/123", str(snapshot / "model-1.safetensors"))
  _write(snapshot / "model.safetensors.index.json",
         {"weight_map": {"w": "model-1.safetensors"}})
  assert convert_files.safetensors_files(str(snapshot)) == [
      str(snapshot / "model-1.safetensors")]


def test_tokenizer_json_without_model_vocab_is_refused(tmp_path):
  path = _write(tmp_path / "tokenizer.json",
                {"model": {"type": "WordPiece"}})
  with pytest.raises(ValueError) as info:
    convert_files.hf_vocab_text(str(tmp_path))
  assert "model has no 'vocab' field (expected an object)" in _one_line(
      info, path)


@pytest.mark.parametrize("config", [
    [1], {k: v for k, v in _tiny_config().items()
          if k != "num_hidden_layers"}])
def test_tf_to_hf_with_a_bad_bert_config_is_one_line(tmp_path, config):
  path = _write(tmp_path / "bert_config.json", config)
  with pytest.raises(ValueError) as info:
    convert_folders.tf_to_hf(fh.tiny_checkpoint(), str(tmp_path / "out"),
                             bert_config_file=path,
                             vocab_file=fh.tiny("vocab.txt"))
  _one_line(info, path)
  assert not os.path.exists(tmp_path / "out")


@pytest.mark.slow
def test_convert_script_prints_one_error_line_for_a_list_config(tmp_path):
  hf_dir = tmp_path / "hf"
  hf_dir.mkdir()
  _write(hf_dir / "config.json", [1])
  result = fh.run("convert_checkpoint.py", fh.flags(
      direction="hf_to_tf", input=hf_dir, output=tmp_path / "out"))
  assert result.returncode == 1, result.stderr
  lines = [l for l in result.stderr.splitlines() if l.strip()]
  assert lines == ["error: %s: the top level is a list, expected an object" %
                   (hf_dir / "config.json")], result.stderr


# ---------------------------------------------------------------------------
# predict_saved_model.py's serving_config.json, and number flags.
# ---------------------------------------------------------------------------


def test_serving_config_with_a_string_max_seq_length_is_refused(tmp_path):
  assets = tmp_path / export_utils.ASSETS_DIR
  assets.mkdir()
  for name in export_utils.ASSET_NAMES:
    _write(assets / name, "{}")
  path = _write(assets / export_utils.SERVING_ASSET, {
      "kind": "classifier", "do_lower_case": True, "max_seq_length": "128",
      "output_keys": ["probabilities"], "label_list": ["0", "1"]})
  with pytest.raises(ValueError) as info:
    serving.read_assets(str(tmp_path))
  assert "max_seq_length is '128', expected an integer" in _one_line(info,
                                                                    path)


@pytest.mark.parametrize("buckets,message", [
    ([16, "32", 64], "bucket_lengths[1] is '32', expected an integer"),
    ([32, 16, 64], "bucket_lengths [32, 16, 64]: expected increasing "
     "lengths ending at max_seq_length=64"),
    ([16, 32], "bucket_lengths [16, 32]: expected increasing lengths "
     "ending at max_seq_length=64"),
])
def test_serving_config_with_bad_bucket_lengths_is_refused(tmp_path, buckets,
                                                           message):
  """An export's `bucket_lengths` (--bucket_by_length) decide how a client
  cuts its batches: a damaged list is one line, not a wrong shape later."""
  config = {"kind": "classifier", "do_lower_case": True,
            "max_seq_length": 64, "output_keys": ["probabilities"],
            "label_list": ["0", "1"], "bucket_lengths": buckets}
  path = str(tmp_path / "serving_config.json")
  with pytest.raises(ValueError) as info:
    serving.check_serving_config(config, path)
  assert message in _one_line(info, path)


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_non_finite_null_score_threshold_is_refused(value):
  flags = type("F", (), {"null_score_diff_threshold": value})()
  assert training_options.number_flag_problems(flags) == [
      "--null_score_diff_threshold=%s: expected a finite number" % value]


def test_disk_full_message_names_the_file_not_the_op():
  text = ("Failed to write save/SaveV2: /tmp/x/model.ckpt-3_temp/part-00000-"
          "of-00001.data-00000-of-00001: No space left on device")
  assert disk.disk_full_message(text).startswith(
      "/tmp/x: saving checkpoint model.ckpt-3 failed: the disk is full")


def test_essential_text_drops_the_python_stack():
  error = ValueError("Graph execution error:\n\nDetected at node 'x' defined "
                     "at (most recent call last):\n  File \"a.py\", line 1, in "
                     "<module>\nRead less bytes than requested")
  assert disk.essential_text(error) == "Read less bytes than requested"


def test_squad_predictions_cut_by_a_full_disk_leave_no_file(tmp_path,
                                                           monkeypatch):
  outputs = [(str(tmp_path / name), {"q": "a"})
             for name in ("predictions.json", "nbest_predictions.json",
                          "null_odds.json")]
  real = json.dumps

  def full_disk_on_the_third(obj, **kwargs):
    if obj is outputs[2][1]:
      raise OSError(28, "No space left on device")
    return real(obj, **kwargs)

  monkeypatch.setattr(squad_predictions.json, "dumps", full_disk_on_the_third)
  with pytest.raises(OSError, match="null_odds.json: write failed"):
    squad_predictions._write_json_files(outputs)  # pylint: disable=protected-access
  assert os.listdir(str(tmp_path)) == []
