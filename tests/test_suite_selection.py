"""The suite's selections: what the README's test command runs (pytest's
default selection, tests/conftest.py), that it runs every script end to end
once, and that CI runs it on both stacks, every slow test on 2.15 and those
marked both_stacks on 2.21."""

import ast
import os
import types

import pytest

from helpers import REPO_ROOT

import conftest

# Each root script with a console command -> the test (file::function,
# marked e2e) that runs it end to end on a tiny config.
E2E_RUNS = {
    "convert_checkpoint.py": "test_convert_checkpoint.py::"
                             "test_fine_tuned_classifier_converts_for_"
                             "sequence_classification",
    "create_pretraining_data.py": "test_create_pretraining_data.py::"
                                  "test_cli_two_workers_one_output_path",
    "extract_features.py": "test_extract_features.py::"
                           "test_output_equals_conformance_and_keeps_every_"
                           "line",
    "learn_vocab.py": "test_corpus_vocab.py::"
                      "test_cli_extra_tokens_keeps_ids_and_tokenizer_uses_"
                      "the_words",
    "predict_masked_lm.py": "test_predict_masked_lm.py::"
                            "test_top_k_match_bert_for_masked_lm_on_the_"
                            "converted_checkpoint",
    "predict_saved_model.py": "test_export.py::"
                              "test_classifier_end_to_end_predictions_equal_"
                              "run_classifier",
    "prepare_corpus.py": "test_corpus_prepare.py::test_cli_dump_to_shards",
    "run_multiple_choice.py": "test_run_multiple_choice.py::"
                              "test_swag_sample_train_eval_predict_export_"
                              "end_to_end",
    "run_classifier.py": "test_run_classifier.py::"
                         "test_mrpc_train_eval_predict_end_to_end",
    "run_ner.py": "test_run_ner.py::"
                  "test_end_to_end_train_eval_predict_writes_every_output",
    "run_pretraining.py": "test_run_pretraining.py::test_train_eval_then_resume",
    "run_squad.py": "test_run_squad.py::"
                    "test_train_and_predict_squad_v2_end_to_end",
}


def _marks(decorators):
  """Names of the pytest.mark.<name> decorators (or list) in `decorators`."""
  names = set()
  for node in decorators:
    for sub in ast.walk(node):
      if (isinstance(sub, ast.Attribute) and isinstance(sub.value,
                                                        ast.Attribute)
          and sub.value.attr == "mark"):
        names.add(sub.attr)
  return names


def _test_marks(test_file, function):
  """The marks of tests/test_file::function, its module's pytestmark too."""
  path = os.path.join(REPO_ROOT, "tests", test_file)
  with open(path, encoding="utf-8") as f:
    tree = ast.parse(f.read())
  module_marks = set()
  for node in tree.body:
    if isinstance(node, ast.Assign) and any(
        getattr(t, "id", None) == "pytestmark" for t in node.targets):
      module_marks = _marks([node.value])
  for node in tree.body:
    if isinstance(node, ast.FunctionDef) and node.name == function:
      return _marks(node.decorator_list) | module_marks
  raise AssertionError("%s has no function %s" % (test_file, function))


def test_every_script_has_one_end_to_end_test_marked_e2e():
  with open(os.path.join(REPO_ROOT, "pyproject.toml"), encoding="utf-8") as f:
    scripts = {line.split('"')[1].split(":")[0] + ".py"
               for line in f if line.startswith("bert-")}
  assert sorted(E2E_RUNS) == sorted(scripts)
  for script, test in E2E_RUNS.items():
    test_file, function = test.split("::")
    assert "e2e" in _test_marks(test_file, function), test
    with open(os.path.join(REPO_ROOT, "tests", test_file),
              encoding="utf-8") as f:
      assert script in f.read(), (script, test)


def _configured(args, markexpr=""):
  config = types.SimpleNamespace(option=types.SimpleNamespace(
      markexpr=markexpr), args=args, stash={})
  conftest.pytest_configure(config)
  return config


@pytest.mark.parametrize("args,markexpr,want", [
    (["tests"], "", "not slow or e2e"),
    ([], "", "not slow or e2e"),
    (["tests"], "slow", "slow"),
    (["tests"], "slow or not slow", "slow or not slow"),
    (["tests/test_stacks.py::test_the_other_stacks_checkpoint_resumes_here"],
     "", ""),
])
def test_default_selection_is_quick_plus_e2e_unless_told(args, markexpr,
                                                         want):
  config = _configured(args, markexpr)
  assert config.option.markexpr == want
  header = conftest.pytest_report_header(config)
  assert (header is not None) == (want == "not slow or e2e" and not markexpr)


def test_ci_runs_the_readme_command_on_both_stacks_and_the_slow_ones():
  with open(os.path.join(REPO_ROOT, ".ci", "run"), encoding="utf-8") as f:
    ci = f.read()
  with open(os.path.join(REPO_ROOT, "README.md"), encoding="utf-8") as f:
    assert ("./setup.sh --test && .venv/bin/python -m pytest tests -q -n auto"
            in f.read())
  # The README's test command, the default selection, on each stack:
  assert ('"tf2.15 quick + e2e" .venv/bin/python -m pytest tests -q -n auto '
          "||" in ci)
  assert ('"tf2.21 quick + e2e" .venv-tf2.21/bin/python -m pytest tests -q '
          "-n auto ||" in ci)
  # ... then on 2.15 the slow tests it leaves out, so every test runs there,
  # and on 2.21 those marked both_stacks.
  assert ('.venv/bin/python -m pytest tests -q -n auto -m "slow and not e2e"'
          in ci)
  assert ('.venv-tf2.21/bin/python -m pytest tests -q -n auto -m '
          '"both_stacks and not e2e"' in ci)
  assert conftest.DEFAULT_SELECTION == "not slow or e2e"
  assert 'PYTHON="${PYTHON_TF215:-python3.11}" ./setup.sh --test' in ci
  assert ('PYTHON="${PYTHON_TF221:-python3.12}" VENV=.venv-tf2.21 '
          "./setup.sh --test") in ci
  for line in ("\"$stack total: ", "\"  all: "):
    assert line in ci
  with open(os.path.join(REPO_ROOT, "pyproject.toml"), encoding="utf-8") as f:
    pyproject = f.read()
  for mark in ("slow", "e2e", "both_stacks"):  # Registered (--strict-markers).
    assert '"%s: ' % mark in pyproject


@pytest.mark.parametrize("dist,args,want", [
    ("load", ["tests", "-n", "2"], "loadfile"),
    ("load", ["tests", "-n", "2", "--dist", "load"], "load"),
    ("load", ["tests", "-n", "2", "--dist=load"], "load"),
    ("no", ["tests"], "no"),
])
def test_workers_take_whole_files_unless_told(dist, args, want):
  config = types.SimpleNamespace(
      option=types.SimpleNamespace(markexpr="", dist=dist), args=args,
      stash={}, invocation_params=types.SimpleNamespace(args=tuple(args)))
  conftest.pytest_configure(config)
  assert config.option.dist == want


def test_auto_workers_follow_the_cpus_up_to_the_cap(monkeypatch):
  monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)))
  assert conftest.pytest_xdist_auto_num_workers(None) == (
      conftest.MAX_AUTO_WORKERS)
  monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
  assert conftest.pytest_xdist_auto_num_workers(None) == 1
