"""Faults found by attacking the scripts: bad inputs end in one line naming
the file or flag, before any work, with nothing left behind; what killed
runs leave is removed at the next start; the console prints each line once.
"""

import json
import os
import pickle
import re
import socket
import struct
import subprocess
import sys

from absl import flags as absl_flags
import numpy as np
import pytest
from safetensors.numpy import save_file
import tensorflow.compat.v1 as tf

from helpers import data_path
from helpers import checked_model
from helpers import checked_run_options
from helpers import REPO_ROOT
from helpers import run_script
from helpers import script_command
from helpers import script_env
from helpers import tiny_model_flags
from helpers import write_json
from bert_tf.checks import disk
from bert_tf.cli import flags as cli_flags
from bert_tf.checks.problems import Problems
from bert_tf.cli import startup
from bert_tf.export import saved_model
from bert_tf.export import serving
from bert_tf.train import checkpoints
from bert_tf.train import options as training_options
import convert_checkpoint
import tokenization


def _hf_folder(tmp_path):
  folder = tmp_path / "hf"
  folder.mkdir()
  conformance = data_path("conformance", "modeling")
  with open(os.path.join(conformance, "bert_config.json")) as f:
    config = convert_checkpoint.bert_config_to_hf_config(
        json.load(f), ["BertForPreTraining"])
  (folder / "config.json").write_text(json.dumps(config))
  with open(os.path.join(conformance, "vocab.txt"), "rb") as f:
    (folder / "vocab.txt").write_bytes(f.read())
  return folder


def _truncated(path):
  save_file({"a": np.zeros([64, 64], np.float32)}, str(path))
  data = path.read_bytes()
  path.write_bytes(data[:len(data) // 2])  # Offsets past the end.


def _huge_header(path):
  path.write_bytes(struct.pack("<Q", 1 << 60) + b"{}")


def _pickled(path):
  path.write_bytes(pickle.dumps({"bert.embeddings": [1.0, 2.0]}))


def _not_json(path):
  path.write_bytes(struct.pack("<Q", 5) + b"{oops")


@pytest.mark.parametrize("damage,expected", [
    (_truncated, "not a valid safetensors file"),
    (_huge_header, "not a valid safetensors file"),
    (_pickled, "not a safetensors file but a PyTorch pickle"),
    (_not_json, "not a valid safetensors file"),
])
def test_damaged_safetensors_is_one_line_naming_the_file(tmp_path, damage,
                                                         expected):
  folder = _hf_folder(tmp_path)
  weights = folder / "model.safetensors"
  damage(weights)
  with pytest.raises(ValueError) as info:
    convert_checkpoint.hf_to_tf(str(folder), str(tmp_path / "tf"))
  message = str(info.value)
  assert message.startswith(str(weights) + ": " + expected), message
  assert "\n" not in message
  assert not (tmp_path / "tf").exists()


# ---------------------------------------------------------------------------
# Start-up: the vocabulary's special tokens, hidden_act, an export without a
# task head; every script that takes them, before any work.


def _model_file(name):
  return os.path.join(data_path("conformance", "modeling"), name)


def _vocab_without(tmp_path, *dropped):
  with open(_model_file("vocab.txt"), encoding="utf-8") as f:
    kept = [line for line in f if line.strip() not in dropped]
  path = tmp_path / "vocab.txt"
  path.write_text("".join(kept), encoding="utf-8")
  return str(path)


def test_vocab_without_special_tokens_is_refused_at_start_up(tmp_path):
  vocab = _vocab_without(tmp_path, "[CLS]", "[UNK]")
  with pytest.raises(ValueError) as info:
    checked_model(_model_file("bert_config.json"), 64, None, True,
                          vocab, str(tmp_path / "out"))
  assert str(info.value) == (
      "--vocab_file: %s lacks [CLS], [UNK]; expected a BERT WordPiece "
      "vocabulary with [CLS], [SEP], [UNK]" % vocab)


def test_unknown_hidden_act_is_a_config_problem(tmp_path):
  with open(_model_file("bert_config.json")) as f:
    config = dict(json.load(f), hidden_act="swish")
  path = write_json(tmp_path, config, "bert_config.json")
  with pytest.raises(ValueError) as info:
    checked_model(path, 64, None, None, None, str(tmp_path / "out"),
                          problems=["--other=0: expected at least 1"])
  message = str(info.value)
  # Named with the flag and the file, reported with the other problems.
  assert message.startswith("--other=0: expected at least 1; "
                            "--bert_config_file: %s: 'hidden_act': "
                            "Unsupported activation: 'swish'" % path), message


def test_export_of_a_checkpoint_without_task_head_is_refused_at_start_up(
    tmp_path):
  with pytest.raises(ValueError, match=r"--export_dir: checkpoint \S+"
                     r"bert_model\.ckpt has no task head"):
    checked_model(_model_file("bert_config.json"), 64,
                          _model_file("bert_model.ckpt"), True,
                          _model_file("vocab.txt"), str(tmp_path / "out"),
                          export_now=True)
  assert not (tmp_path / "out").exists()


def _classifier_data(tmp_path):
  data_dir = tmp_path / "data"
  data_dir.mkdir()
  for split in ("train", "dev", "test"):
    (data_dir / (split + ".tsv")).write_text(
        "a good film\tpos\nan unknown zyzzyva\tneg\n", encoding="utf-8")
  return str(data_dir)


def _ner_data(tmp_path):
  data_dir = tmp_path / "ner"
  data_dir.mkdir()
  for split in ("train", "dev", "test"):
    (data_dir / (split + ".txt")).write_text(
        "John B-PER\nzyzzyva O\n\n", encoding="utf-8")
  return str(data_dir)


_SCRIPT_ARGS = {
    "run_classifier.py": lambda tmp: [
        "--task_name=tsv", "--data_dir=" + _classifier_data(tmp),
        "--do_train=True", "--max_seq_length=16"],
    "run_ner.py": lambda tmp: [
        "--data_dir=" + _ner_data(tmp), "--do_train=True",
        "--max_seq_length=16"],
    "run_squad.py": lambda tmp: [
        "--train_file=" + str(tmp / "missing.json"), "--do_train=True",
        "--max_seq_length=32"],
    "extract_features.py": lambda tmp: [
        "--input_file=" + str(tmp / "in.txt"), "--layers=-1",
        "--output_file=" + str(tmp / "out.jsonl"), "--max_seq_length=16"],
}


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(_SCRIPT_ARGS))
def test_every_vocab_script_refuses_a_vocab_without_specials(tmp_path,
                                                             script):
  (tmp_path / "in.txt").write_text("hello zyzzyva\n", encoding="utf-8")
  vocab = _vocab_without(tmp_path, "[CLS]")
  flags = [f for f in tiny_model_flags() if not f.startswith("--vocab_file")]
  if script != "extract_features.py":
    flags.append("--output_dir=" + str(tmp_path / "out"))
  result = run_script(script, flags + _SCRIPT_ARGS[script](tmp_path) + [
      "--vocab_file=" + vocab])
  assert result.returncode == 1, result.stderr[-2000:]
  assert "Traceback" not in result.stderr
  assert ("--vocab_file: %s lacks [CLS]" % vocab) in (
      result.stderr.strip().splitlines()[-1])


# ---------------------------------------------------------------------------
# What killed runs leave: removed at the next start; export versions.


def test_saves_cut_by_a_kill_are_removed_when_training_starts(tmp_path):
  output_dir = tmp_path / "out"
  for name in ("model.ckpt-5_temp", "model.ckpt-9_temp_0a1b2c"):
    (output_dir / name).mkdir(parents=True)
    (output_dir / name / "part-00000-of-00001.data-00000-of-00001").write_bytes(
        b"\0" * 100)
  (output_dir / "my_temp").mkdir()  # Not a save's: kept.
  (output_dir / "model.ckpt-5_temp.txt").write_text("a file: kept")
  held = checkpoints.start_training(str(output_dir))
  try:
    assert sorted(os.listdir(output_dir)) == sorted(
        ["my_temp", "model.ckpt-5_temp.txt"] +
        [n for n in os.listdir(output_dir) if n.startswith(".")])
  finally:
    if held is not None:
      held.release()


def _dead_pid():
  proc = subprocess.Popen([sys.executable, "-c", "pass"])
  proc.wait()
  return proc.pid


def test_work_folders_of_killed_exports_are_removed(tmp_path):
  host = socket.gethostname()
  names = {
      ".temp-100-%s.%d.0a1b2c3d" % (host, _dead_pid()): False,
      ".temp-100-%s.%d.0a1b2c3d" % (host, os.getppid()): True,  # Alive.
      ".temp-100-elsewhere.1.0a1b2c3d": True,  # Another host's: unknown.
      "temp-1700000000": False,  # The Estimator exporter's, earlier.
      "1700000000": True,  # A version.
  }
  for name in names:
    (tmp_path / name).mkdir()
    (tmp_path / name / "saved_model.pb").write_bytes(b"x")
  removed = saved_model.remove_killed_exports(str(tmp_path))
  assert sorted(os.path.basename(p) for p in removed) == sorted(
      n for n, kept in names.items() if not kept)
  assert sorted(os.listdir(tmp_path)) == sorted(
      n for n, kept in names.items() if kept)


def test_two_exports_in_one_second_take_the_next_free_versions(
    tmp_path, monkeypatch):
  export_dir = tmp_path / "export"
  (export_dir / "1000").mkdir(parents=True)
  (export_dir / "1000" / "saved_model.pb").write_bytes(b"first")
  monkeypatch.setattr(saved_model.time, "time", lambda: 1000.5)
  real_exists = tf.io.gfile.exists
  lies = {"left": 1}

  def racing_exists(path):
    # Another export claims 1000 between the check and the rename.
    if path.endswith("1000") and lies["left"]:
      lies["left"] -= 1
      return False
    return real_exists(path)

  monkeypatch.setattr(tf.io.gfile, "exists", racing_exists)
  claimed = []
  for k in range(2):
    work = export_dir / (".temp-1000-h.1.%d" % k)
    work.mkdir()
    (work / "saved_model.pb").write_bytes(b"new %d" % k)
    claimed.append(saved_model._claim_version(str(export_dir), str(work)))  # pylint: disable=protected-access
  assert [os.path.basename(p) for p in claimed] == ["1001", "1002"]
  assert (export_dir / "1000" / "saved_model.pb").read_bytes() == b"first"
  assert sorted(os.listdir(export_dir)) == ["1000", "1001", "1002"]


# ---------------------------------------------------------------------------
# A full disk names the final file.


@pytest.mark.parametrize("text,start", [
    ("/out/model.ckpt-4_temp/part-00000-of-00001.data-00000-of-00001"
     ".tempstate1234; File too large",
     "/out: saving checkpoint model.ckpt-4 failed"),
    ("Failed to flush 12 bytes to file /out/model.ckpt-4_temp_0a9f3c/"
     "part-00000-of-00001.index (No space left on device)",
     "/out: saving checkpoint model.ckpt-4 failed"),
    ("/out/graph.pbtxt.tmp6a1f0e2c3b; File too large",
     "/out/graph.pbtxt: write failed"),
    ("/out/.train.tf_record.tmp-host.12.0a1b2c3d; Disk quota exceeded",
     "/out/train.tf_record: write failed"),
    ("gs://b/out/events.out.tfevents.1.h; No space left on device",
     "gs://b/out/events.out.tfevents.1.h: write failed"),
])
def test_full_disk_message_names_the_final_file(text, start):
  message = disk.disk_full_message(text)
  assert message.startswith(start + ": the disk is full"), message


# ---------------------------------------------------------------------------
# Console: each line once; TensorFlow's C++ start-up noise off.


def test_the_serving_command_prints_nothing_before_its_own_lines():
  # Importing the serving client changes nothing in a user's process (so
  # TensorFlow prints what it prints); its command quiets TensorFlow.
  env = script_env()
  env.pop("TF_CPP_MIN_LOG_LEVEL", None)
  result = subprocess.run(
      [sys.executable, "predict_saved_model.py", "--helpshort"],
      capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=120)
  assert "--input_file" in result.stdout, result.stderr[-2000:]  # absl's
  # help, which exits with status 1.
  if tuple(int(p) for p in tf.__version__.split(".")[:2]) <= (2, 15):
    assert result.stderr == ""
  else:
    # TensorFlow 2.16+ prints its first C++ lines (oneDNN, CUDA drivers)
    # before it reads TF_CPP_MIN_LOG_LEVEL; the registration errors are off.
    assert not [line for line in result.stderr.splitlines()
                if line.startswith("E") or "Unable to register" in line]


@pytest.mark.slow
def test_each_tensorflow_log_line_is_printed_once(tmp_path):
  text = tmp_path / "in.txt"
  text.write_text("hello world ||| the cat\n", encoding="utf-8")
  env = script_env()
  env.pop("TF_CPP_MIN_LOG_LEVEL", None)
  result = subprocess.run(script_command("extract_features.py", [
      "--input_file=%s" % text, "--output_file=%s" % (tmp_path / "o.jsonl"),
      "--max_seq_length=16", "--layers=-1"] + tiny_model_flags()),
                          capture_output=True, text=True, env=env,
                          cwd=REPO_ROOT, timeout=300)
  assert result.returncode == 0, result.stderr[-2000:]
  lines = result.stderr.splitlines()
  assert not [l for l in lines if l.startswith(("INFO:tensorflow:",
                                                "WARNING:tensorflow:"))]
  # A line of TensorFlow's own log, once, in absl's format.
  assert len([l for l in lines if l.endswith("] Graph was finalized.")]) == 1


# ---------------------------------------------------------------------------
# Start-up options: the default GPUs, every problem reported.


def _parsed(*argv):
  values = absl_flags.FlagValues()
  for group in (cli_flags.TRAINING_FLAGS, cli_flags.DISTRIBUTE_FLAGS,
                cli_flags.TPU_FLAGS):
    for name in group:
      define, default, help_text = cli_flags.SHARED_FLAGS[name]
      define(name, default, help_text, flag_values=values)
  values(["prog"] + list(argv))
  return values


def test_num_cpu_devices_alone_needs_no_gpu_flag():
  run = checked_run_options(_parsed(
      "--distribution_strategy=mirrored", "--num_cpu_devices=2"))
  assert (run.distribute.num_gpus, run.distribute.num_cpu_devices) == (0, 2)
  # The default uses the GPUs TensorFlow sees (none here: the CPU).
  visible = len(tf.config.list_physical_devices("GPU"))
  run = checked_run_options(_parsed(
      "--distribution_strategy=mirrored"))
  assert run.distribute.num_gpus == visible
  # Given, it is taken as it is (and checked).
  with pytest.raises(ValueError, match="--num_gpus=%d but" % (visible + 1)):
    checked_run_options(_parsed(
        "--distribution_strategy=mirrored", "--num_gpus=%d" % (visible + 1)))


def test_a_distribution_problem_is_reported_with_the_others():
  problems = Problems(["--max_seq_length=0: expected at least 1"])
  training_options.from_flags(_parsed(
      "--distribution_strategy=mirrored", "--num_gpus=99",
      "--gradient_accumulation_steps=0"), problems)
  lines = problems.lines
  assert lines[0] == "--max_seq_length=0: expected at least 1"
  assert lines[1].startswith("--num_gpus=99 but")
  assert lines[2].startswith("--gradient_accumulation_steps=0")
  # Added, not raised: the script reports them with the rest, before it
  # sets up any device.
  with pytest.raises(ValueError) as info:
    problems.raise_if_any()
  assert str(info.value).count("; ") == 2


def test_readme_encode_text_example_unpacks_what_it_returns():
  with open(os.path.join(REPO_ROOT, "docs", "extract-and-serve.md"),
            encoding="utf-8") as f:
    readme = f.read()
  targets = re.findall(r"^(.+?) = serving\.encode_text\(", readme, re.M)
  assert targets, "docs/extract-and-serve.md has no serving.encode_text example"
  tokenizer = tokenization.FullTokenizer(_model_file("vocab.txt"), True)
  returned = serving.encode_text(tokenizer, "the cat", "a dog", 16)
  for target in targets:
    assert len(target.split(",")) == len(returned), target
