"""Tests for bert_tf/io.py: the one reader, atomic outputs, small helpers."""

import gc
import os
import socket
import subprocess
import sys

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from helpers import REPO_ROOT

from bert_tf import io as io_utils


def test_expand_file_patterns_keeps_order_and_sorts_each_glob(tmp_path):
  for name in ("b1.txt", "b0.txt", "a.txt"):
    (tmp_path / name).write_text("x")
  patterns = "%s,%s" % (tmp_path / "b*.txt", tmp_path / "a.txt")
  assert io_utils.expand_file_patterns(patterns) == [
      str(tmp_path / "b0.txt"), str(tmp_path / "b1.txt"),
      str(tmp_path / "a.txt")]


def test_expand_file_patterns_names_flag_and_unmatched_glob(tmp_path):
  pattern = str(tmp_path / "nothing*.txt")
  with pytest.raises(ValueError, match=r"--input_file: .*nothing\*\.txt.* "
                     "matched no files"):
    io_utils.expand_file_patterns(pattern, "input_file")
  with pytest.raises(ValueError, match="--train_file: expected"):
    io_utils.expand_file_patterns(" , ", "train_file")


def test_atomic_write_renames_on_success_and_cleans_up_on_error(tmp_path):
  path = str(tmp_path / "out.txt")
  with io_utils.atomic_write(path) as f:
    f.write("complete\n")
    assert not os.path.exists(path)
  assert open(path).read() == "complete\n"
  with pytest.raises(RuntimeError):
    with io_utils.atomic_write(path) as f:
      f.write("half")
      raise RuntimeError("killed")
  assert open(path).read() == "complete\n"
  assert os.listdir(tmp_path) == ["out.txt"]


def test_atomic_write_of_nothing_leaves_an_empty_file(tmp_path):
  for mode in ("w", "wb"):
    path = str(tmp_path / ("empty-" + mode))
    with io_utils.atomic_write(path, mode):
      pass
    assert os.path.getsize(path) == 0


def test_write_eval_results_sorted_key_value_lines(tmp_path):
  path = str(tmp_path / "eval_results.txt")
  io_utils.write_eval_results(path, {"loss": 1.5, "global_step": 7,
                                            "eval_accuracy": 0.25})
  assert open(path).read() == ("eval_accuracy = 0.25\nglobal_step = 7\n"
                               "loss = 1.5\n")


def test_expand_file_patterns_refuses_a_directory(tmp_path):
  with pytest.raises(ValueError, match="is a directory; expected files"):
    io_utils.expand_file_patterns(str(tmp_path), "input_file")


def test_output_paths_that_are_directories_are_refused(tmp_path):
  with pytest.raises(ValueError, match="--output_file: .* is a directory"):
    io_utils.check_output_file(str(tmp_path))
  with pytest.raises(ValueError, match="--output_file is required"):
    io_utils.check_output_file("")
  io_utils.check_output_file(str(tmp_path / "new.txt"))
  with pytest.raises(ValueError, match="is a directory"):
    with io_utils.atomic_write(str(tmp_path)):
      pass


def test_atomic_write_removes_temp_files_a_killed_run_left(tmp_path):
  path = tmp_path / "out.jsonl"
  stale = tmp_path / ".out.jsonl.tmp-deadbeef"
  stale.write_text("half")
  other = tmp_path / ".other.jsonl.tmp-deadbeef"
  other.write_text("someone else's")
  with io_utils.atomic_write(str(path)) as f:
    f.write("done\n")
  assert sorted(os.listdir(tmp_path)) == sorted([other.name, path.name])


def test_atomic_write_keeps_temp_files_of_writers_still_running(tmp_path):
  # The workers of a multi-worker run write the same cached features into
  # one shared --output_dir at the same time.
  host = socket.gethostname()
  alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
  dead = subprocess.Popen([sys.executable, "-c", "pass"])
  dead.wait()
  try:
    running = tmp_path / (".out.jsonl.tmp-%s.%d.0a1b2c3d" % (host, alive.pid))
    gone = tmp_path / (".out.jsonl.tmp-%s.%d.0a1b2c3d" % (host, dead.pid))
    elsewhere = tmp_path / ".out.jsonl.tmp-other-host.example.1.0a1b2c3d"
    for temp in (running, gone, elsewhere):
      temp.write_text("half")
    with io_utils.atomic_write(str(tmp_path / "out.jsonl")) as f:
      f.write("done\n")
    assert sorted(os.listdir(tmp_path)) == sorted(
        [running.name, elsewhere.name, "out.jsonl"])
  finally:
    alive.kill()
    alive.wait()


def _write(tmp_path, data, name="f.txt"):
  path = tmp_path / name
  path.write_bytes(data)
  return str(path)


def test_read_lines_matches_tf_gfile_readline(tmp_path):
  # The reference reads text with tf.gfile.GFile(path, "r").readline().
  data = ("a\r\nb\u2028c\n\x85d\x0ce\r\rf\n\n \u3000\n\u00e9\r").encode("utf-8")
  path = _write(tmp_path, data)
  want = []
  with tf.io.gfile.GFile(path, "r") as reader:
    while True:
      line = reader.readline()
      if not line:
        break
      want.append(line.rstrip("\n"))
  got = [line for _, line in io_utils.read_lines(path)]
  assert got == want


def test_read_lines_drops_invalid_utf8_or_names_file_and_line(tmp_path):
  path = _write(tmp_path, b"ok\nb\xffad\n")
  assert list(io_utils.read_lines(path)) == [(1, "ok"), (2, "bad")]
  with pytest.raises(ValueError, match=r"f\.txt:2: not valid UTF-8"):
    list(io_utils.read_lines(path, strict=True))


def test_read_lines_final_line_rule(tmp_path):
  # A last line without "\n" that decodes to nothing is not a line; an
  # empty line that a "\n" ends is one.
  assert list(io_utils.read_lines(_write(tmp_path, b"a\n\r"))) == [(1, "a")]
  assert list(io_utils.read_lines(_write(tmp_path, b"a\n\xff"))) == [(1, "a")]
  assert list(io_utils.read_lines(_write(tmp_path, b"a\n\n"))) == [
      (1, "a"), (2, "")]
  assert list(io_utils.read_lines(_write(tmp_path, b""))) == []


def test_read_lines_byte_range_and_errors(tmp_path):
  path = _write(tmp_path, b"one\ntwo\nthree\n")
  assert [t for _, t in io_utils.read_lines(path, 4, 8)] == ["two"]
  assert [t for _, t in io_utils.read_lines(path, 8)] == ["three"]
  with pytest.raises(FileNotFoundError, match="nope.txt: no such file"):
    list(io_utils.read_lines(str(tmp_path / "nope.txt")))
  with pytest.raises(ValueError, match="is a directory"):
    list(io_utils.read_lines(str(tmp_path)))


def test_read_lines_does_not_need_tensorflow(tmp_path):
  path = _write(tmp_path, b"x\n")
  code = ("import sys; sys.path.insert(0, %r); from bert_tf import io as io_utils; "
          "assert list(io_utils.read_lines(%r)) == [(1, 'x')]; "
          "assert 'tensorflow' not in sys.modules" % (REPO_ROOT, path))
  subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_atomic_path_makes_a_folder_appear_whole(tmp_path):
  out = str(tmp_path / "model")
  with io_utils.atomic_path(out) as temp:
    os.makedirs(temp)
    with open(os.path.join(temp, "a"), "w") as f:
      f.write("x")
    assert not os.path.exists(out)
  assert os.listdir(out) == ["a"]
  with pytest.raises(RuntimeError):
    with io_utils.atomic_path(str(tmp_path / "other")) as temp:
      os.makedirs(temp)
      raise RuntimeError("killed")
  assert sorted(os.listdir(tmp_path)) == ["model"]


def test_atomic_path_refuses_a_folder_that_is_not_empty(tmp_path):
  (tmp_path / "out").mkdir()
  (tmp_path / "out" / "keep").write_text("x")
  with pytest.raises(ValueError, match="not an empty folder"):
    with io_utils.atomic_path(str(tmp_path / "out")) as temp:
      os.makedirs(temp)
  assert os.listdir(tmp_path / "out") == ["keep"]
  assert sorted(os.listdir(tmp_path)) == ["out"]


def test_gc_paused_restores_the_collector():
  assert gc.isenabled()
  with io_utils.gc_paused():
    assert not gc.isenabled()
  assert gc.isenabled()

  @io_utils.gc_paused()
  def inside():
    return gc.isenabled()

  assert inside() is False and gc.isenabled()


def test_pad_to():
  assert io_utils.pad_to([1, 2], 4) == [1, 2, 0, 0]
  assert io_utils.pad_to([1.0], 2, 0.5) == [1.0, 0.5]
  with pytest.raises(ValueError, match="3 values do not fit in length 2"):
    io_utils.pad_to([1, 2, 3], 2)


def test_number_str_prints_numpy_floats_as_numpy_1_on_every_numpy(tmp_path):
  """numpy 1's str() of float32/float16 scalars (the reference's outputs);
  numpy 2 prints the large ones as 1.2345678e+06, 1e+07, 5.002e+04."""
  f32, f16 = np.float32, np.float16
  cases = [
      (f32(1234567.8), "1234567.8"), (f32(1e7), "10000000.0"),
      (f32(9999999.0), "9999999.0"), (f32(1e15), "1000000000000000.0"),
      (f32(1e16), "1e+16"), (f32(6.867041), "6.867041"), (f32(0.1), "0.1"),
      (f32(1e-5), "1e-05"), (f32(0.00012345), "0.00012345"),
      (f32(-19427998.0), "-19427998.0"), (f32(0.0), "0.0"),
      (f32(-0.0), "-0.0"), (f32(3.0), "3.0"), (f16(50016.0), "50020.0"),
      (f16(1000.0), "1000.0"), (f16(0.5), "0.5"), (f32(np.nan), "nan"),
      (f32(-np.inf), "-inf"), (np.float64(1234567.8), "1234567.8"),
      (np.int64(300), "300"), (0.25, "0.25"), (7, "7"),
  ]
  for value, want in cases:
    assert io_utils.number_str(value) == want, (value, want)
  path = str(tmp_path / "eval_results.txt")
  io_utils.write_eval_results(path, {"loss": f32(12345678.0),
                                     "global_step": np.int64(300)})
  assert open(path).read() == "global_step = 300\nloss = 12345678.0\n"
