"""Tests for the helpers in helpers.py: skips become failures under CI."""

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


def test_missing_shared_data_fails_under_ci(monkeypatch, tmp_path):
  monkeypatch.setenv("BERT_SHARED_DIR", str(tmp_path))
  monkeypatch.setenv("CI", "true")
  with pytest.raises(pytest.fail.Exception, match="BERT_SHARED_DIR"):
    helpers.shared_path("conformance")
  monkeypatch.setenv("CI", "false")
  with pytest.raises(pytest.skip.Exception, match="BERT_SHARED_DIR"):
    helpers.shared_path("conformance")
  (tmp_path / "conformance").mkdir()
  assert helpers.shared_path("conformance") == os.path.join(
      str(tmp_path), "conformance")


def test_script_env_drops_bert_debug(monkeypatch):
  monkeypatch.setenv("BERT_DEBUG", "1")
  env = helpers.script_env(EXTRA="x")
  assert "BERT_DEBUG" not in env and env["EXTRA"] == "x"
  assert os.environ["BERT_DEBUG"] == "1"
