"""Tests for the helpers in helpers.py (skips become failures under CI) and
for the in-repo test data they locate (tests/data)."""

import glob
import hashlib
import importlib.util
import os
import sys

import pytest

import helpers


@pytest.mark.parametrize("ci,outcome", [("true", pytest.fail.Exception),
                                        ("TRUE", pytest.fail.Exception),
                                        ("", pytest.skip.Exception),
                                        ("false", pytest.skip.Exception)])
def test_skip_or_fail_fails_only_under_ci(monkeypatch, ci, outcome):
  monkeypatch.setenv("CI", ci)
  with pytest.raises(outcome, match="no such thing"):
    helpers.skip_or_fail("no such thing")


def test_import_or_skip_returns_the_module_or_names_the_missing_one(
    monkeypatch):
  monkeypatch.delenv("CI", raising=False)
  assert helpers.import_or_skip("json") is sys.modules["json"]
  with pytest.raises(pytest.skip.Exception,
                     match="no_such_module_xyz is not importable.*setup.sh"):
    helpers.import_or_skip("no_such_module_xyz", "./setup.sh --test")
  monkeypatch.setenv("CI", "true")
  with pytest.raises(pytest.fail.Exception, match="no_such_module_xyz"):
    helpers.import_or_skip("no_such_module_xyz")


def test_a_module_named_in_bert_tests_without_skips_even_under_ci(
    monkeypatch):
  """.ci/run names torch on a stack without a CPU build of it: only the
  named modules skip; any other missing module still fails."""
  monkeypatch.setenv("CI", "true")
  monkeypatch.setenv("BERT_TESTS_WITHOUT", "other,no_such_module_xyz")
  with pytest.raises(pytest.skip.Exception, match="BERT_TESTS_WITHOUT"):
    helpers.import_or_skip("no_such_module_xyz")
  with pytest.raises(pytest.fail.Exception, match="no_such_module_abc"):
    helpers.import_or_skip("no_such_module_abc")


def test_missing_shared_data_fails_under_ci(monkeypatch, tmp_path):
  monkeypatch.setenv("BERT_SHARED_DIR", str(tmp_path))
  monkeypatch.setenv("CI", "true")
  with pytest.raises(pytest.fail.Exception, match="BERT_SHARED_DIR"):
    helpers.shared_path("data")
  monkeypatch.setenv("CI", "false")
  with pytest.raises(pytest.skip.Exception, match="BERT_SHARED_DIR"):
    helpers.shared_path("data")
  (tmp_path / "data").mkdir()
  assert helpers.shared_path("data") == os.path.join(str(tmp_path), "data")


def test_script_env_drops_bert_debug(monkeypatch):
  monkeypatch.setenv("BERT_DEBUG", "1")
  env = helpers.script_env(EXTRA="x")
  assert "BERT_DEBUG" not in env and env["EXTRA"] == "x"
  assert os.environ["BERT_DEBUG"] == "1"


def test_data_path_is_in_the_repo_whatever_the_shared_folder(monkeypatch,
                                                              tmp_path):
  monkeypatch.setenv("BERT_SHARED_DIR", str(tmp_path / "absent"))
  monkeypatch.setenv("CI", "true")
  path = helpers.data_path("conformance", "modeling", "bert_config.json")
  assert path == os.path.join(helpers.REPO_ROOT, "tests", "data",
                              "conformance", "modeling", "bert_config.json")
  assert os.path.isfile(path)
  with pytest.raises(FileNotFoundError,
                     match=r"no_such_case\.json.*tests/data"):
    helpers.data_path("cases", "no_such_case.json")


def test_data_path_reads_copies_of_real_data_from_the_shared_folder(
    monkeypatch, tmp_path):
  monkeypatch.setenv("BERT_SHARED_DIR", str(tmp_path))
  monkeypatch.setenv("CI", "false")
  with pytest.raises(pytest.skip.Exception, match="BERT_SHARED_DIR"):
    helpers.data_path("conformance", "pretraining_data", "sample_text.txt")
  (tmp_path / "data" / "pretrain").mkdir(parents=True)
  (tmp_path / "data" / "pretrain" / "sample_text.txt").write_text("x\n")
  assert helpers.data_path(
      "conformance", "pretraining_data", "sample_text.txt") == str(
          tmp_path / "data" / "pretrain" / "sample_text.txt")


def _sha256(path):
  with open(path, "rb") as f:
    return hashlib.sha256(f.read()).hexdigest()


def test_no_test_data_file_is_a_copy_of_a_real_data_file():
  real = {_sha256(p) for p in glob.glob(os.path.join(
      helpers.shared_path("data"), "**", "*"), recursive=True)
          if os.path.isfile(p)}
  ours = [p for p in glob.glob(os.path.join(helpers.DATA_DIR, "**", "*"),
                               recursive=True) if os.path.isfile(p)]
  assert len(ours) > 100
  assert [p for p in ours if _sha256(p) in real] == []


@pytest.fixture(scope="module")
def vocab_subsets():
  """tests/data/make_vocab_subsets.py, imported as a module."""
  spec = importlib.util.spec_from_file_location(
      "make_vocab_subsets",
      os.path.join(helpers.DATA_DIR, "make_vocab_subsets.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def _lines(path):
  with open(path, encoding="utf-8") as f:
    return f.read().split("\n")


def test_vocab_subsets_keep_the_released_ids(vocab_subsets):
  """Each subset holds, at every id, the released line or its placeholder."""
  for name, subsets in vocab_subsets.VOCAB_SUBSETS.items():
    released = _lines(helpers.shared_path("data", "vocab", name, "vocab.txt"))
    for path in subsets:
      lines = _lines(helpers.data_path(path))
      assert len(lines) == len(released), path
      kept = 0
      for number, (line, want) in enumerate(zip(lines, released)):
        assert line in (want, vocab_subsets.PLACEHOLDER % number), (path,
                                                                    number)
        kept += line == want
      assert kept > len(lines) // 10, path
