# coding=utf-8
"""Tests of `create_pretraining_data.py --num_shards` (Apache Beam).

Shard k is byte-identical to part k of `--num_workers` (in-process DirectRunner
and, slow, the command line on the multi-process DirectRunner); a failing
shard leaves no output; a rerun after a killed run (leftovers made by hand,
and, slow, a real SIGKILL) removes its leftovers and writes the same bytes; the flags' one-line errors, with and without Beam.
The Beam tests skip when the `beam` extra is not installed (fail under CI).
"""

import os
import random
import signal
import subprocess
import time
import types

import pytest
import tensorflow.compat.v1 as tf

from helpers import data_path
from helpers import import_or_skip
from helpers import REPO_ROOT
from helpers import script_command
from helpers import script_env
from helpers import write_corpus
from helpers import write_three_documents
import create_pretraining_data as cpd
from bert_tf.corpus import beam_support
from bert_tf.corpus import instances as beam_instances
import tokenization

_HINT = "pip install .[beam] (or ./setup.sh --beam)"
_IN_PROCESS = "--runner=DirectRunner,--direct_running_mode=in_memory"
_OPTIONS = {"max_seq_length": 16, "dupe_factor": 3, "short_seq_prob": 0.1,
            "masked_lm_prob": 0.15, "max_predictions_per_seq": 3,
            "do_whole_word_mask": False}


def _beam():
  return import_or_skip("apache_beam", _HINT)


def _tokenizer():
  return tokenization.FullTokenizer(
      data_path("conformance", "pretraining_data", "vocab.txt"),
      do_lower_case=True)


def _flags(num_shards, pipeline_options=_IN_PROCESS, num_workers=1):
  return types.SimpleNamespace(num_shards=num_shards, num_workers=num_workers,
                               pipeline_options=pipeline_options)


def _read(path):
  with open(path, "rb") as f:
    return f.read()


def _worker_parts(files, out, num_parts, seed=7):
  cpd._run_workers(files, _tokenizer(), _OPTIONS, seed, num_parts, [out])
  return [_read("%s-%05d-of-%05d" % (out, k, num_parts))
          for k in range(num_parts)]


@pytest.mark.parametrize("num_parts", [1, 2, 3])
def test_shard_k_is_byte_identical_to_part_k_of_num_workers(tmp_path,
                                                            num_parts):
  _beam()
  files = write_corpus(tmp_path)
  (tmp_path / "workers").mkdir()
  (tmp_path / "beam").mkdir()
  if num_parts == 1:  # One part: the reference run itself (seed unchanged).
    expected = [_read_reference(files, tmp_path / "workers" / "o")]
  else:
    expected = _worker_parts(files, str(tmp_path / "workers" / "o"), num_parts)
  out = str(tmp_path / "beam" / "o")
  total = beam_instances.run_shards(files, [out], cpd._run_part,
                                    _flags(num_parts), _tokenizer(), _OPTIONS,
                                    7)
  names = ([os.path.basename(out)] if num_parts == 1 else
           ["o-%05d-of-%05d" % (k, num_parts) for k in range(num_parts)])
  assert sorted(os.listdir(tmp_path / "beam")) == names  # No temporary left.
  got = [_read(str(tmp_path / "beam" / name)) for name in names]
  assert got == expected
  assert all(got)
  assert total == sum(_count(tmp_path / "beam" / name) for name in names)


def test_three_documents_make_two_shards_identical_to_two_workers(tmp_path):
  """A shard of one document (random next segments from the other shard's
  documents) is byte-identical to that part of `--num_workers=2`."""
  _beam()
  files = write_three_documents(tmp_path / "three.txt")
  (tmp_path / "workers").mkdir()
  (tmp_path / "beam").mkdir()
  expected = _worker_parts(files, str(tmp_path / "workers" / "o"), 2)
  out = str(tmp_path / "beam" / "o")
  beam_instances.run_shards(files, [out], cpd._run_part, _flags(2),
                            _tokenizer(), _OPTIONS, 7)
  got = [_read("%s-%05d-of-00002" % (out, k)) for k in range(2)]
  assert got == expected and all(got)


def _read_reference(files, out):
  tokenizer = _tokenizer()
  instances = cpd.create_training_instances(
      files, tokenizer, 16, 3, 0.1, 0.15, 3, random.Random(7))
  cpd.write_instance_to_example_files(instances, tokenizer, 16, 3, [str(out)])
  return _read(str(out))


def _count(path):
  return sum(1 for _ in tf.io.tf_record_iterator(str(path)))


def test_failing_shard_leaves_no_outputs(tmp_path):
  """Shard 1's second document tokenizes to nothing: one ValueError line
  naming the part, and shard 0's finished file is not kept either."""
  _beam()
  path = tmp_path / "corpus.txt"
  path.write_text("alpha one\n\nbeta two\n\ngamma three\n\n\x07\n",
                  encoding="utf-8")
  with pytest.raises(ValueError, match=r"^--num_shards=2: part 1 of the "
                     r"corpus .* holds only 1 document.*per line\)$"):
    beam_instances.run_shards([str(path)], [str(tmp_path / "out")],
                              cpd._run_part, _flags(2), _tokenizer(),
                              dict(_OPTIONS, parts_flag="num_shards"), 1)
  assert os.listdir(tmp_path) == ["corpus.txt"]


def test_rerun_after_a_killed_run_removes_leftovers_and_writes_same_bytes(
    tmp_path):
  _beam()
  files = write_corpus(tmp_path)
  out_dir = tmp_path / "out"
  out_dir.mkdir()
  # What a killed run leaves: temporary names of a process that is gone.
  dead = ".o-00000-of-00002.tmp-%s.999999999.abcdef01" % os.uname().nodename
  stale = [dead, dead + ".attempt-0123abcd"]
  for name in stale:
    (out_dir / name).write_bytes(b"partial")
  out = str(out_dir / "o")
  beam_instances.run_shards(files, [out], cpd._run_part, _flags(2),
                            _tokenizer(), _OPTIONS, 7)
  first = [_read(out + "-%05d-of-00002" % k) for k in range(2)]
  assert sorted(os.listdir(out_dir)) == ["o-00000-of-00002",
                                         "o-00001-of-00002"]
  beam_instances.run_shards(files, [out], cpd._run_part, _flags(2),
                            _tokenizer(), _OPTIONS, 7)
  assert [_read(out + "-%05d-of-00002" % k) for k in range(2)] == first


def test_flag_conflicts_are_refused_before_any_work():
  with pytest.raises(ValueError, match="--pipeline_options: needs "
                     "--num_shards"):
    beam_instances.parts_from_flags(_flags(0, "--runner=DirectRunner"))
  with pytest.raises(ValueError, match="--num_shards is -1"):
    beam_instances.parts_from_flags(_flags(-1))
  with pytest.raises(ValueError, match="--num_shards=2 and --num_workers=3"):
    beam_instances.parts_from_flags(_flags(2, num_workers=3))
  assert beam_instances.parts_from_flags(_flags(0, "", 4)) == (4,
                                                                "num_workers")


def test_num_shards_names_itself_in_part_errors(tmp_path):
  _beam()
  path = tmp_path / "three.txt"
  path.write_text("one a\n\ntwo b\n\nthree c\n", encoding="utf-8")
  with pytest.raises(ValueError, match=r"--num_shards=4: part 1 of the "
                     r"corpus .* holds no document; the corpus has 3"):
    beam_instances.run_shards([str(path)], [str(tmp_path / "o")],
                              cpd._run_part, _flags(4), _tokenizer(),
                              _OPTIONS, 1)
  with pytest.raises(ValueError, match="with --num_shards=3 give one path"):
    cpd.pretraining_processes.check_output_paths(
        [str(path)], ["a", "b"], 3, "num_shards")


def test_workers_log_warnings_only_unless_the_options_say_otherwise():
  _beam()
  options = beam_support.pipeline_options("", 2).get_all_options()
  assert options["default_sdk_harness_log_level"] == "WARNING"
  assert options["sdk_harness_log_level_overrides"] == {
      "apache_beam": "ERROR", "__main__": "ERROR"}
  options = beam_support.pipeline_options(
      "--runner=DirectRunner,--default_sdk_harness_log_level=INFO", 2)
  assert options.get_all_options()["default_sdk_harness_log_level"] == "INFO"


def test_pipeline_options_split_at_commas_before_dashes():
  assert beam_support.split_pipeline_options(
      "--runner=DirectRunner, --experiments=a,b,--direct_num_workers=2") == [
          "--runner=DirectRunner", "--experiments=a,b",
          "--direct_num_workers=2"]
  assert beam_support.split_pipeline_options("") == []
  with pytest.raises(ValueError, match="'runner=X' is not an option"):
    beam_support.split_pipeline_options("runner=X")


def test_unknown_pipeline_options_are_refused():
  _beam()
  with pytest.raises(ValueError,
                     match="unknown Beam option.*--direct_nm_workers"):
    beam_support.pipeline_options("--direct_nm_workers=2", 2)
  options = beam_support.pipeline_options("", 3).get_all_options()
  assert options["direct_num_workers"] == min(3, os.cpu_count())
  assert options["direct_running_mode"] == "multi_processing"


def test_missing_beam_is_one_error_naming_the_install():
  with pytest.raises(ValueError) as e:
    beam_support.import_module("bert_tf_not_a_module", "num_shards")
  assert str(e.value).startswith("--num_shards: needs bert_tf_not_a_module")
  assert _HINT in str(e.value)
  with pytest.raises(ValueError, match="^prepare_corpus.py: needs "
                     "bert_tf_not_a_module"):
    beam_support.import_module("bert_tf_not_a_module", "prepare_corpus.py")


def _run_cli(args, env=None):
  return subprocess.run(script_command("create_pretraining_data.py", args),
                        cwd=REPO_ROOT, capture_output=True, text=True,
                        env=script_env(TF_CPP_MIN_LOG_LEVEL="3", **(env or {})),
                        timeout=600)


def _conf(name):
  return data_path("conformance", "pretraining_data", name)


@pytest.mark.slow
def test_cli_without_beam_gives_one_line_naming_the_extra(tmp_path):
  """A stand-in `apache_beam` that fails to import, as a missing install."""
  shim = tmp_path / "shim" / "apache_beam"
  shim.mkdir(parents=True)
  (shim / "__init__.py").write_text("raise ImportError('not installed')\n")
  proc = _run_cli(["--input_file=" + _conf("sample_text.txt"),
                   "--vocab_file=" + _conf("vocab.txt"),
                   "--output_file=" + str(tmp_path / "o"), "--num_shards=2"],
                  env={"PYTHONPATH": str(tmp_path / "shim")})
  assert proc.returncode == 1
  errors = [l for l in proc.stderr.splitlines() if l.startswith("error: ")]
  assert errors == ["error: --num_shards: needs apache_beam, which is not "
                    "installed (not installed); install the extra with " +
                    _HINT], proc.stderr[-2000:]
  assert not (tmp_path / "o-00000-of-00002").exists()


@pytest.mark.slow
def test_cli_shards_on_two_processes_match_two_workers(tmp_path):
  _beam()
  corpus = tmp_path / "corpus.txt"
  text = _read(_conf("sample_text.txt")).decode("utf-8").strip()
  corpus.write_text((text + "\n\n") * 2, encoding="utf-8")
  common = ["--input_file=" + str(corpus),
            "--vocab_file=" + _conf("vocab.txt"), "--dupe_factor=2",
            "--max_seq_length=64", "--max_predictions_per_seq=10"]
  workers = _run_cli(common + ["--num_workers=2",
                               "--output_file=" + str(tmp_path / "w")])
  assert workers.returncode == 0, workers.stderr[-3000:]
  shards = _run_cli(common + [
      "--num_shards=2", "--output_file=" + str(tmp_path / "b"),
      "--pipeline_options=--runner=DirectRunner,--direct_num_workers=2,"
      "--direct_running_mode=multi_processing"])
  assert shards.returncode == 0, shards.stderr[-3000:]
  for k in range(2):
    suffix = "-%05d-of-00002" % k
    assert _read(str(tmp_path / ("b" + suffix))) == _read(
        str(tmp_path / ("w" + suffix)))
  assert "shard 1/2:" in shards.stderr
  assert sorted(os.listdir(tmp_path)) == sorted(
      ["corpus.txt", "b-00000-of-00002", "b-00001-of-00002", "w-00000-of-00002",
       "w-00001-of-00002"])


@pytest.mark.slow
def test_cli_killed_run_leaves_no_shard_and_rerun_writes_the_same(tmp_path):
  """SIGKILL to the whole process tree once a worker has begun writing:
  nothing under a final name; the rerun removes the leftovers and writes
  the bytes of --num_workers=2."""
  _beam()
  corpus = tmp_path / "corpus.txt"
  text = _read(_conf("sample_text.txt")).decode("utf-8").strip()
  # Large enough that the workers write for a while: with 40 copies a run
  # on a loaded machine once wrote and renamed its shards between two polls.
  corpus.write_text((text + "\n\n") * 160, encoding="utf-8")
  out_dir = tmp_path / "out"
  out_dir.mkdir()
  common = ["--input_file=" + str(corpus),
            "--vocab_file=" + _conf("vocab.txt"), "--dupe_factor=10",
            "--max_seq_length=64", "--max_predictions_per_seq=10"]
  shards = common + [
      "--num_shards=2", "--output_file=" + str(out_dir / "b"),
      "--pipeline_options=--runner=DirectRunner,--direct_num_workers=2,"
      "--direct_running_mode=multi_processing"]
  proc = subprocess.Popen(script_command("create_pretraining_data.py",
                                         shards),
                          cwd=REPO_ROOT, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL,
                          env=script_env(TF_CPP_MIN_LOG_LEVEL="3"),
                          start_new_session=True)
  try:
    deadline = time.time() + 300
    while (time.time() < deadline and proc.poll() is None and
           not any(".attempt-" in n for n in os.listdir(out_dir))):
      time.sleep(0.01)
    assert proc.poll() is None, "the run ended before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
  finally:
    proc.wait(timeout=60)
  left = os.listdir(out_dir)
  assert left and all(name.startswith(".") for name in left), left
  rerun = _run_cli(shards)
  assert rerun.returncode == 0, rerun.stderr[-3000:]
  assert sorted(os.listdir(out_dir)) == ["b-00000-of-00002",
                                         "b-00001-of-00002"]
  workers = _run_cli(common + ["--num_workers=2",
                               "--output_file=" + str(tmp_path / "w")])
  assert workers.returncode == 0, workers.stderr[-3000:]
  for k in range(2):
    suffix = "-%05d-of-00002" % k
    assert _read(str(out_dir / ("b" + suffix))) == _read(
        str(tmp_path / ("w" + suffix)))
