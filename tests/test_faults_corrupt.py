"""Corrupt and unexpected files: each gives one line naming the file.

Damaged TFRecords and checkpoints, bad bert_config.json values, odd
vocabularies, compressed or Latin-1 text, contradictory SQuAD 2.0 answers,
flags that do not parse, a checkpoint that does not fit the config, and a
quiet console before a one-line error.
"""

import gzip
import json
import logging as std_logging
import os
import shutil

import pytest
import tensorflow.compat.v1 as tf

import fault_helpers as fh
from helpers import checked_model
from bert_tf import io as io_utils
import modeling
from bert_tf.checks import checkpoint as checkpoint_checks
from bert_tf.checks import records as record_checks
from bert_tf.tasks.squad import data as squad_data
from bert_tf.cli import startup
from bert_tf.train import checkpoints
import tokenization


@pytest.fixture
def warnings_log(caplog):
  caplog.set_level(std_logging.WARNING)
  return caplog


def _copy_checkpoint(folder):
  os.makedirs(folder, exist_ok=True)
  source = fh.tiny_checkpoint()
  for suffix in (".index", ".data-00000-of-00001"):
    shutil.copy(source + suffix, os.path.join(folder, "bert_model.ckpt" +
                                              suffix))
  return os.path.join(folder, "bert_model.ckpt")


def _truncate(path, keep_fraction=0.5):
  with open(path, "r+b") as f:
    f.truncate(int(os.path.getsize(path) * keep_fraction))


def _prepare(**overrides):
  values = dict(bert_config_file=fh.tiny("bert_config.json"),
                max_seq_length=16, init_checkpoint=None, do_lower_case=True,
                vocab_file=fh.tiny("vocab.txt"), output_dir="/tmp/unused")
  values.update(overrides)
  return checked_model(**values)


# ---------------------------------------------------------------------------
# TFRecords.
# ---------------------------------------------------------------------------


def _read_all(paths):
  with tf.Graph().as_default():
    batch = tf.data.make_one_shot_iterator(
        tf.data.TFRecordDataset(paths)).get_next()
    with tf.Session() as sess:
      while True:
        try:
          sess.run(batch)
        except tf.errors.OutOfRangeError:
          return


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_data_loss_names_the_damaged_tfrecord_file(tmp_path, damage):
  good = fh.write_records(str(tmp_path / "good.tfrecord"), 10, seed=1)
  bad = fh.write_records(str(tmp_path / "bad.tfrecord"), 10, seed=2)
  if damage == "truncate":
    _truncate(bad, 0.9)
  else:
    with open(bad, "r+b") as f:
      f.seek(os.path.getsize(bad) // 2)
      byte = f.read(1)
      f.seek(-1, os.SEEK_CUR)
      f.write(bytes([byte[0] ^ 0xFF]))
  with pytest.raises(tf.errors.DataLossError) as info:
    with record_checks.reading([good, bad]):
      _read_all([good, bad])
  # TensorFlow's own message does not say which file.
  assert "bad.tfrecord" not in info.value.message
  # The files being read go with the error.
  assert record_checks.record_files_of(info.value) == [good, bad]
  message = record_checks.explain_data_loss(
      info.value, record_checks.record_files_of(info.value))
  assert message.startswith(bad + ": ")
  assert "good.tfrecord" not in message
  assert ("truncated" if damage == "truncate" else "corrupted") in message


@pytest.mark.slow
def test_truncated_tfrecord_during_training_is_one_line(tmp_path):
  good = fh.write_records(str(tmp_path / "a.tfrecord"), 8, seed=1)
  bad = fh.write_records(str(tmp_path / "b.tfrecord"), 8, seed=2)
  _truncate(bad, 0.8)
  result = fh.run("run_pretraining.py", fh.pretraining_flags(
      str(tmp_path / "*.tfrecord"), str(tmp_path / "out"),
      num_train_steps=40))
  assert result.returncode == 1, result.stderr[-2000:]
  line = fh.last_line(result.stderr)
  assert line.startswith("error: %s: truncated record at byte" % bad), line
  assert good not in line and "Traceback" not in result.stderr
  assert "deprecated" not in result.stderr


# ---------------------------------------------------------------------------
# Checkpoints.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("part", [".index", ".data-00000-of-00001"])
def test_truncated_init_checkpoint_is_refused_before_any_work(tmp_path, part):
  prefix = _copy_checkpoint(str(tmp_path / "model"))
  _truncate(prefix + part)
  with pytest.raises(ValueError) as info:
    _prepare(init_checkpoint=prefix)
  message = str(info.value)
  assert message.startswith("--init_checkpoint: ") and "\n" not in message
  assert "truncated" in message
  assert (prefix + part) in message


def test_truncated_latest_checkpoint_is_refused_on_resume(tmp_path):
  output_dir = str(tmp_path / "out")
  prefix = _copy_checkpoint(output_dir)
  step_3 = os.path.join(output_dir, "model.ckpt-3")
  for suffix in (".index", ".data-00000-of-00001"):
    os.rename(prefix + suffix, step_3 + suffix)
  tf.train.update_checkpoint_state(output_dir, step_3)
  checkpoints.check_resume(output_dir)  # Whole: accepted.
  _truncate(step_3 + ".data-00000-of-00001")
  with pytest.raises(ValueError, match=r"model\.ckpt-3\.data-00000-of-00001 "
                     "is truncated.*training would resume from it"):
    checkpoints.check_resume(output_dir)


def test_checkpoint_shapes_that_do_not_fit_the_config(tmp_path):
  with open(fh.tiny("bert_config.json")) as f:
    config = json.load(f)
  config["intermediate_size"] = 128
  path = tmp_path / "bert_config.json"
  path.write_text(json.dumps(config))
  with pytest.raises(ValueError) as info:
    _prepare(bert_config_file=str(path),
             init_checkpoint=fh.tiny_checkpoint())
  message = str(info.value)
  assert ("--init_checkpoint: variable bert/encoder/layer_0/intermediate/"
          "dense/bias has shape [64]") in message
  assert "--bert_config_file gives it [128]" in message


def test_checkpoint_with_fewer_layers_than_the_config_warns(tmp_path,
                                                            warnings_log):
  with open(fh.tiny("bert_config.json")) as f:
    config = json.load(f)
  config["num_hidden_layers"] = 3
  path = tmp_path / "bert_config.json"
  path.write_text(json.dumps(config))
  _prepare(bert_config_file=str(path), init_checkpoint=fh.tiny_checkpoint())
  assert "lacks 16 of the model's variables" in warnings_log.text


def test_expected_shapes_match_the_models_variables():
  config = modeling.BertConfig.from_json_file(fh.tiny("bert_config.json"))
  with open(fh.tiny("variables.json")) as f:
    actual = {v["name"]: v["shape"] for v in json.load(f)
              if v["name"].startswith("bert/")}
  assert checkpoint_checks.expected_bert_shapes(config) == actual


# ---------------------------------------------------------------------------
# bert_config.json.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("change, expected", [
    ({"hidden_size": None}, "'hidden_size' is missing"),
    ({"num_hidden_layers": "2"}, "'num_hidden_layers' is '2'; expected a "
     "positive integer"),
    ({"intermediate_size": -64}, "'intermediate_size' is -64"),
    ({"vocab_size": 1000.5}, "'vocab_size' is 1000.5"),
    ({"hidden_dropout_prob": 1.5}, "'hidden_dropout_prob' is 1.5; expected a "
     "probability"),
    ({"num_attention_heads": 5}, "hidden_size=32 is not a multiple of "
     "num_attention_heads=5"),
    ({"hidden_act": 3}, "'hidden_act' is 3"),
])
def test_bad_bert_config_is_one_line_naming_the_key(tmp_path, change,
                                                    expected):
  with open(fh.tiny("bert_config.json")) as f:
    config = json.load(f)
  for key, value in change.items():
    if value is None:
      del config[key]
    else:
      config[key] = value
  path = tmp_path / "bert_config.json"
  path.write_text(json.dumps(config))
  with pytest.raises(ValueError) as info:
    startup.load_bert_config(str(path))
  message = str(info.value)
  assert message.startswith("--bert_config_file: %s: " % path), message
  assert expected in message and "\n" not in message
  # The library entry point still takes any keys, as the reference does.
  modeling.BertConfig.from_dict(config)


def test_bert_config_every_problem_named_together(tmp_path):
  path = tmp_path / "bert_config.json"
  path.write_text(json.dumps({"vocab_size": 0, "hidden_size": True}))
  with pytest.raises(ValueError) as info:
    startup.load_bert_config(str(path))
  message = str(info.value)
  for part in ("'vocab_size' is 0", "'hidden_size' is True",
               "'num_hidden_layers' is missing"):
    assert part in message


# ---------------------------------------------------------------------------
# Vocabularies and text.
# ---------------------------------------------------------------------------


def test_vocab_with_crlf_line_ends_gives_the_same_ids(tmp_path):
  with open(fh.tiny("vocab.txt"), "rb") as f:
    data = f.read()
  crlf = tmp_path / "vocab.txt"
  crlf.write_bytes(data.replace(b"\n", b"\r\n"))
  assert (tokenization.load_vocab(str(crlf)) ==
          tokenization.load_vocab(fh.tiny("vocab.txt")))


def test_vocab_duplicate_tokens_warn_and_keep_reference_ids(tmp_path,
                                                           warnings_log):
  path = tmp_path / "vocab.txt"
  path.write_text("[PAD]\nhello\nworld\nhello\nthere\n")
  vocab = tokenization.load_vocab(str(path))
  assert vocab == {"[PAD]": 0, "hello": 3, "world": 2, "there": 4}
  assert "1 tokens appear twice, such as 'hello' on lines 2 and 4" in (
      warnings_log.text)


@pytest.mark.parametrize("kind", ["gzip", "tfrecord"])
def test_compressed_or_binary_text_input_is_refused(tmp_path, kind):
  path = str(tmp_path / "corpus.txt")
  if kind == "gzip":
    with gzip.open(path, "wt") as f:
      f.write("hello world\n" * 50)
  else:
    fh.write_records(path, 3)
  with pytest.raises(ValueError, match=r"^%s is a (gzip|binary) file" %
                     path.replace(".", r"\.")):
    list(io_utils.read_lines(path))
  with pytest.raises(ValueError, match="corpus.txt is a"):
    tokenization.load_vocab(path)


def test_text_with_a_few_nul_bytes_is_still_read(tmp_path):
  path = tmp_path / "odd.txt"
  path.write_bytes(b"hello\n\x00\x07 there\nworld\n")
  assert [t for _, t in io_utils.read_lines(str(path))] == [
      "hello", "\x00\x07 there", "world"]


def test_latin1_text_is_read_as_the_reference_with_one_warning(tmp_path,
                                                               warnings_log):
  path = tmp_path / "latin1.txt"
  path.write_bytes("café au lait\nnaïve\nplain\r\n".encode("latin-1"))
  lines = [t for _, t in io_utils.read_lines(str(path))]
  assert lines == ["caf au lait", "nave", "plain"]
  warnings = [r for r in warnings_log.records if "not UTF-8" in r.message
              or "not UTF-8" in r.getMessage()]
  assert len(warnings) == 1
  assert "dropped 2 bytes that are not UTF-8, on 2 lines" in (
      warnings[0].getMessage())


@pytest.mark.slow
def test_gzip_corpus_is_one_line_from_create_pretraining_data(tmp_path):
  corpus = str(tmp_path / "corpus.txt.gz")
  with gzip.open(corpus, "wt") as f:
    f.write("hello world\n" * 50)
  result = fh.run("create_pretraining_data.py", fh.flags(
      input_file=corpus, output_file=str(tmp_path / "out.tfrecord"),
      vocab_file=fh.tiny("vocab.txt"), max_seq_length=16,
      max_predictions_per_seq=4))
  assert result.returncode == 1
  assert fh.last_line(result.stderr) == (
      "error: %s is a gzip file, not UTF-8 text; decompress it first" %
      corpus)
  assert not os.path.exists(str(tmp_path / "out.tfrecord"))


# ---------------------------------------------------------------------------
# SQuAD 2.0.
# ---------------------------------------------------------------------------


def test_squad_impossible_question_with_answers(tmp_path, warnings_log):
  path = fh.write_squad(str(tmp_path / "train.json"), version_2=True)
  with open(path) as f:
    data = json.load(f)
  data["data"][0]["paragraphs"][0]["qas"][0]["is_impossible"] = True
  with open(path, "w") as f:
    json.dump(data, f)
  examples = squad_data.read_squad_examples(path, is_training=True,
                                            version_2_with_negative=True)
  first = examples[0]
  assert first.qas_id == "q0_0" and first.is_impossible
  assert (first.start_position, first.end_position) == (-1, -1)
  assert first.orig_answer_text == ""
  assert "'q0_0' is marked is_impossible but has 1 answer(s)" in (
      warnings_log.text)


# ---------------------------------------------------------------------------
# Several bad flags at once.
# ---------------------------------------------------------------------------


def test_several_problems_are_reported_together(tmp_path):
  with pytest.raises(ValueError) as info:
    _prepare(max_seq_length=512, vocab_file=str(tmp_path),
             init_checkpoint=str(tmp_path / "none"))
  message = str(info.value)
  assert "--max_seq_length=512" in message
  assert "--vocab_file: %s is a directory" % tmp_path in message
  assert "--init_checkpoint: no TensorFlow checkpoint" in message
  assert "\n" not in message


# ---------------------------------------------------------------------------
# Flags that do not parse, and a quiet console.
# ---------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name, args, expected", [
    ("create_pretraining_data.py", ["--max_seq_length=abc"],
     "error: flag --max_seq_length=abc: invalid literal for int() with base "
     "10: 'abc'"),
    ("run_pretraining.py", ["--num_train_steps=1.5"],
     "error: flag --num_train_steps=1.5:"),
    ("run_classifier.py", ["--data_dir=x", "--vocab_file=x",
                           "--bert_config_file=x", "--output_dir=x"],
     "error: flag --task_name=None: Flag --task_name must have a value other "
     "than None."),
    ("run_squad.py", ["--do_train=maybe"], "error: flag --do_train=maybe:"),
    ("extract_features.py", ["--batch_size="], "error: flag --batch_size=:"),
    ("convert_checkpoint.py", ["--direction=sideways", "--input=a",
                               "--output=b"],
     "error: flag --direction=sideways: value should be one of "
     "<hf_to_tf|tf_to_hf|kerashub_to_tf|tf_to_kerashub>"),
    ("convert_checkpoint.py", ["--direction=hf_to_tf", "--output=b"],
     "error: flag --input=None: Flag --input must have a value other than "
     "None."),
])
def test_flag_parsing_errors_are_one_line(name, args, expected):
  result = fh.run(name, args, timeout=300)
  assert result.returncode == 1
  lines = result.stderr.strip().splitlines()
  assert len(lines) == 1, result.stderr  # TensorFlow's start-up noise too.
  assert lines[0].startswith(expected), lines[0]


@pytest.mark.slow
def test_console_is_quiet_before_an_error_and_bert_debug_brings_it_back(
    tmp_path):
  # check_record_lengths reads with a deprecated TensorFlow API.
  data = fh.write_records(str(tmp_path / "data.tfrecord"), 2)
  args = fh.pretraining_flags(data, str(tmp_path / "out"),
                              max_predictions_per_seq=7)
  quiet = fh.run("run_pretraining.py", args, timeout=300)
  assert quiet.returncode == 1
  lines = quiet.stderr.strip().splitlines()
  assert len(lines) == 1, quiet.stderr
  assert "--max_predictions_per_seq=7" in lines[0]
  loud = fh.run("run_pretraining.py", args, timeout=300, BERT_DEBUG="1")
  assert loud.returncode == 1
  assert "Traceback" in loud.stderr and "deprecated" in loud.stderr


def test_tf_quiet_keeps_a_level_the_user_set():
  code = ("from bert_tf.cli import quiet; import os; "
          "quiet.when_run_as_command('__main__'); "
          "print(os.environ['TF_CPP_MIN_LOG_LEVEL'])")
  for extra, expected in [({}, "3"), ({"TF_CPP_MIN_LOG_LEVEL": "1"}, "1")]:
    out = fh.subprocess.run([fh.sys.executable, "-c", code],
                            cwd=fh.REPO_ROOT, env=fh.env(**extra),
                            capture_output=True, text=True, check=True)
    assert out.stdout.strip() == expected
  debug = fh.subprocess.run(
      [fh.sys.executable, "-c",
       "from bert_tf.cli import quiet; import os; "
       "quiet.when_run_as_command('__main__'); "
       "print(os.environ.get('TF_CPP_MIN_LOG_LEVEL'))"],
      cwd=fh.REPO_ROOT, env=fh.env(BERT_DEBUG="1"), capture_output=True,
      text=True, check=True)
  assert debug.stdout.strip() == "None"
