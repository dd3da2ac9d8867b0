"""Durable outputs and write failures named once.

Every atomic output (`bert_tf.io.atomic_path`: result files, `best.json`
records, converted folders) is flushed to disk before its rename and its
folder after it; so is an export's version folder. A write that fails
inside nested atomic outputs (SQuAD's three prediction files) is one line
naming the file that failed.
"""

import errno
import json
import os
import re
import tempfile

import pytest

import fault_helpers as fh
from helpers import data_path
from helpers import import_or_skip
from bert_tf import io as io_utils
from bert_tf.tasks.pretraining import whole_words
from bert_tf.tasks.squad import predictions as squad_predictions
import convert_checkpoint


def _record_syncs(monkeypatch, fail=None):
  """Logs `("fsync", path)` and `("replace", src, dst)` in call order;
  `fail(path)` may return an errno for fsync to raise."""
  events = []
  real_fsync, real_replace = os.fsync, os.replace

  def fsync(fd):
    path = os.readlink("/proc/self/fd/%d" % fd)
    events.append(("fsync", path))
    code = fail(path) if fail else None
    if code:
      raise OSError(code, os.strerror(code))
    return real_fsync(fd)

  def replace(src, dst):
    events.append(("replace", str(src), str(dst)))
    return real_replace(src, dst)

  monkeypatch.setattr(os, "fsync", fsync)
  monkeypatch.setattr(os, "replace", replace)
  return events


def test_atomic_write_syncs_the_file_before_the_rename_and_the_folder_after(
    tmp_path, monkeypatch):
  events = _record_syncs(monkeypatch)
  path = str(tmp_path / "test_results.tsv")
  with io_utils.atomic_write(path) as f:
    f.write("0.25\t0.75\n")
  replace = next(i for i, e in enumerate(events) if e[0] == "replace")
  temp = events[replace][1]
  assert events[replace][2] == path
  assert ("fsync", temp) in events[:replace]
  assert ("fsync", str(tmp_path)) in events[replace + 1:]
  with open(path) as f:
    assert f.read() == "0.25\t0.75\n"


def test_an_atomic_folder_syncs_every_file_and_folder_in_it(tmp_path,
                                                           monkeypatch):
  events = _record_syncs(monkeypatch)
  target = str(tmp_path / "converted")
  with io_utils.atomic_path(target) as temp:
    os.makedirs(os.path.join(temp, "sub"))
    for name in ("config.json", os.path.join("sub", "vocab.txt")):
      with open(os.path.join(temp, name), "w") as f:
        f.write("x")
  replace = next(i for i, e in enumerate(events) if e[0] == "replace")
  before = {e[1] for e in events[:replace]}
  assert {os.path.join(temp, "config.json"),
          os.path.join(temp, "sub", "vocab.txt"),
          os.path.join(temp, "sub"), temp} <= before
  assert ("fsync", str(tmp_path)) in events[replace + 1:]


def test_best_record_is_synced(tmp_path, monkeypatch):
  # A record the runs read back (best/best.json), through atomic_write.
  events = _record_syncs(monkeypatch)
  path = str(tmp_path / "best.json")
  with io_utils.atomic_write(path) as f:
    f.write(json.dumps({"best_step": 3}))
  assert [e for e in events if e[0] == "fsync"][-1] == ("fsync",
                                                        str(tmp_path))
  assert json.load(open(path)) == {"best_step": 3}


@pytest.mark.parametrize("code", [errno.EINVAL, errno.ENOTSUP])
def test_a_folder_that_cannot_be_synced_is_skipped(tmp_path, monkeypatch,
                                                   code):
  _record_syncs(monkeypatch,
                fail=lambda path: code if os.path.isdir(path) else None)
  path = str(tmp_path / "eval_results.txt")
  io_utils.write_eval_results(path, {"loss": 1.5})
  assert open(path).read() == "loss = 1.5\n"


def test_a_disk_error_at_the_sync_fails_the_write_and_keeps_no_file(
    tmp_path, monkeypatch):
  _record_syncs(monkeypatch, fail=lambda path: (
      errno.ENOSPC if not os.path.isdir(path) else None))
  path = str(tmp_path / "out.txt")
  with pytest.raises(OSError, match=r"out\.txt: write failed: the disk is "
                     "full"):
    with io_utils.atomic_write(path) as f:
      f.write("data")
  assert os.listdir(str(tmp_path)) == []


def test_remote_paths_are_not_synced(monkeypatch):
  calls = []
  monkeypatch.setattr(os, "fsync", calls.append)
  io_utils.sync_to_disk("gs://bucket/out.txt")
  io_utils.sync_folder("gs://bucket")
  assert calls == []


def test_squad_write_failure_names_the_file_that_failed_once(tmp_path,
                                                            monkeypatch):
  outputs = [(str(tmp_path / name), {"q": name})
             for name in ("predictions.json", "nbest_predictions.json",
                          "null_odds.json")]
  real = json.dumps

  def full_disk_on_the_second(obj, **kwargs):
    if obj is outputs[1][1]:
      raise OSError(errno.ENOSPC, "No space left on device")
    return real(obj, **kwargs)

  monkeypatch.setattr(squad_predictions.json, "dumps", full_disk_on_the_second)
  with pytest.raises(OSError) as raised:
    squad_predictions._write_json_files(outputs)  # pylint: disable=protected-access
  message = str(raised.value)
  assert message.startswith("[Errno 28] %s: write failed" % outputs[1][0])
  assert message.count("write failed") == 1
  assert "predictions.json:" not in message.replace(outputs[1][0], "")
  assert os.listdir(str(tmp_path)) == []


# ---------------------------------------------------------------------------
# Output folders given as symbolic links.


def test_a_link_to_a_folder_is_written_into(tmp_path):
  real = tmp_path / "real"
  real.mkdir()
  link = tmp_path / "link"
  link.symlink_to(real)
  with io_utils.atomic_path(str(link)) as temp:
    os.makedirs(temp)
    (tmp_path / temp / "config.json").write_text("{}")
  assert link.is_symlink() and os.readlink(str(link)) == str(real)
  assert os.listdir(str(real)) == ["config.json"]
  assert sorted(os.listdir(str(tmp_path))) == ["link", "real"]


def _conformance_checkpoint():
  return fh.tiny_checkpoint()


def test_convert_output_a_link_to_a_folder_writes_into_it(tmp_path):
  real = tmp_path / "real"
  real.mkdir()
  (tmp_path / "link").symlink_to(real)
  convert_checkpoint.tf_to_hf(_conformance_checkpoint(),
                              str(tmp_path / "link"))
  assert sorted(os.listdir(str(real))) == [
      "README.md", "config.json", "model.safetensors",
      "tokenizer_config.json", "vocab.txt"]
  assert (tmp_path / "link").is_symlink()


@pytest.mark.parametrize("target, what", [("file.txt", "a file"),
                                          ("gone", "which does not exist")])
def test_convert_output_a_link_to_a_file_or_nothing_is_one_line(
    tmp_path, target, what):
  (tmp_path / "file.txt").write_text("x")
  link = tmp_path / "link"
  link.symlink_to(tmp_path / target)
  with pytest.raises(ValueError) as raised:
    convert_checkpoint.tf_to_hf(_conformance_checkpoint(), str(link))
  assert str(raised.value) == (
      "--output: %s is a symbolic link to %s, %s; expected a new or empty "
      "folder, or a link to one" % (link, tmp_path / target, what))
  assert sorted(os.listdir(str(tmp_path))) == ["file.txt", "link"]


# ---------------------------------------------------------------------------
# jieba's dictionary cache in a full temporary folder.


def test_jieba_cache_write_failure_is_dropped_for_one_warning(
    tmp_path, monkeypatch, capfd):
  import_or_skip("jieba", "./setup.sh --chinese (or pip install .[chinese])")
  monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

  def full(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")

  monkeypatch.setattr(tempfile, "mkstemp", full)
  warned = []
  monkeypatch.setattr(whole_words.logging, "warning",
                      lambda *args: warned.append(args[0] % args[1:]))
  segmenter = whole_words.load_segmenter()
  assert list(segmenter.cut("我爱北京天安门")) == ["我", "爱", "北京", "天安门"]
  assert warned == [
      "--do_chinese_whole_word_mask: jieba could not write its dictionary "
      "cache in %s (OSError: [Errno 28] No space left on device); the "
      "dictionary is parsed again at each start" % tmp_path]
  err = capfd.readouterr().err
  assert "Traceback" not in err and "Dump cache file failed" not in err


@pytest.mark.slow
def test_jieba_cache_that_cannot_be_written_is_one_warning(tmp_path):
  import_or_skip("jieba", "./setup.sh --chinese (or pip install .[chinese])")
  # A 1 MiB file-size limit: the records fit, jieba's cache (megabytes)
  # fails to write as on a full disk.
  output = tmp_path / "zh.tfrecord"
  result = fh.run("create_pretraining_data.py", fh.flags(
      input_file=data_path("conformance", "pretraining_data",
                           "zh_sample.txt"),
      vocab_file=data_path("conformance", "pretraining_data",
                           "vocab_chinese.txt"),
      output_file=output, dupe_factor=1) + ["--do_chinese_whole_word_mask"],
                  file_size_limit=2 ** 20, TMPDIR=str(tmp_path))
  assert result.returncode == 0, result.stderr[-3000:]
  assert "Traceback" not in result.stderr
  assert "Dump cache file failed" not in result.stderr
  warnings = [line for line in result.stderr.splitlines()
              if "could not write its dictionary cache" in line]
  assert len(warnings) == 1, result.stderr[-3000:]
  assert re.search(r"--do_chinese_whole_word_mask: jieba could not write its "
                   r"dictionary cache in .* \(OSError: .*\); the dictionary "
                   r"is parsed again at each start$", warnings[0]), warnings
  assert output.stat().st_size > 0
