"""Tests for pyproject.toml: what `pip install .` installs, and the console
commands working from a fresh virtual environment without network."""

import ast
import json
import os
import shutil
import subprocess
import sys
import sysconfig

import pytest

from helpers import data_path
from helpers import import_or_skip
from helpers import read_lines
from helpers import REPO_ROOT
from helpers import script_env
from helpers import tiny_model_flags

import tokenization

# Console command -> (module, flags its --help and --helpfull must list).
_COMMANDS = {
    "bert-create-pretraining-data": ("create_pretraining_data",
                                     ["--input_file", "--output_file",
                                      "--dupe_factor"]),
    "bert-run-pretraining": ("run_pretraining",
                             ["--input_file", "--max_predictions_per_seq"]),
    "bert-run-classifier": ("run_classifier", ["--task_name", "--data_dir"]),
    "bert-run-squad": ("run_squad", ["--train_file", "--doc_stride"]),
    "bert-extract-features": ("extract_features", ["--layers",
                                                   "--input_file"]),
    "bert-convert-checkpoint": ("convert_checkpoint", ["--direction"]),
    "bert-run-ner": ("run_ner", ["--tag_scheme", "--doc_stride"]),
    "bert-predict-saved-model": ("predict_saved_model", ["--model_dir"]),
    "bert-prepare-corpus": ("prepare_corpus", ["--input_file", "--num_shards"]),
    "bert-learn-vocab": ("learn_vocab", ["--vocab_size", "--extra_tokens"]),
    "bert-predict-masked-lm": ("predict_masked_lm", ["--top_k",
                                                     "--input_file"]),
    "bert-run-multiple-choice": ("run_multiple_choice", ["--data_dir",
                                                         "--train_file"]),
}
# Kept out of the copy that is installed where git is missing: environments,
# caches, outputs.
_NOT_COPIED = shutil.ignore_patterns(".git", ".venv", ".venv-*", "__pycache__",
                                     "*.pyc", ".pytest_cache", "build", "dist",
                                     "*.egg-info", "runs", "out", "tmp")


def _copy_checkout(root, dest):
  """Copies the files git knows in `root` (tracked, or new and not ignored)
  to `dest`, so that what `pip install .` left in the checkout (build/,
  *.egg-info/) or any other output cannot change what the test installs.
  Without git (an unpacked archive), copies the tree minus `_NOT_COPIED`."""
  try:
    listed = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others",
         "--exclude-standard"], capture_output=True, timeout=120, check=True)
  except (OSError, subprocess.CalledProcessError):
    shutil.copytree(str(root), str(dest), ignore=_NOT_COPIED)
    return
  for name in listed.stdout.decode("utf-8").split("\0"):
    source = os.path.join(str(root), name)
    if name and os.path.isfile(source):  # Not a deleted file or submodule.
      os.makedirs(os.path.dirname(os.path.join(str(dest), name)),
                  exist_ok=True)
      shutil.copy2(source, os.path.join(str(dest), name))


def test_copy_of_the_checkout_leaves_out_what_pip_install_left(tmp_path):
  """`pip install .` in a checkout leaves build/ and bert_tf.egg-info/
  there (ignored by git); the copy the install tests use has neither."""
  root = tmp_path / "checkout"
  root.mkdir()
  shutil.copy2(os.path.join(REPO_ROOT, ".gitignore"), str(root))
  (root / "pkg").mkdir()
  (root / "pkg" / "a.py").write_text("A = 1\n", encoding="utf-8")
  (root / "new.py").write_text("B = 2\n", encoding="utf-8")
  for leftover in ("build/lib/pkg/a.py", "bert_tf.egg-info/SOURCES.txt"):
    (root / leftover).parent.mkdir(parents=True, exist_ok=True)
    (root / leftover).write_text("stale\n", encoding="utf-8")
  git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
  subprocess.run(git + ["init", "-q"], check=True, timeout=60)
  subprocess.run(git + ["add", ".gitignore", "pkg"], check=True, timeout=60)
  subprocess.run(git + ["commit", "-qm", "x"], check=True, timeout=60)
  _copy_checkout(root, tmp_path / "copy")
  copied = sorted(os.path.relpath(os.path.join(folder, name),
                                  str(tmp_path / "copy"))
                  for folder, _, names in os.walk(str(tmp_path / "copy"))
                  for name in names)
  assert copied == [".gitignore", "new.py", os.path.join("pkg", "a.py")]


def _pyproject():
  tomllib = import_or_skip("tomllib")  # Python 3.11+
  with open(os.path.join(REPO_ROOT, "pyproject.toml"), "rb") as f:
    return tomllib.load(f)


def test_py_modules_are_every_top_level_module():
  listed = _pyproject()["tool"]["setuptools"]["py-modules"]
  assert sorted(listed) == _root_modules()


def _root_modules():
  return sorted(name[:-3] for name in os.listdir(REPO_ROOT)
                if name.endswith(".py"))


def _package_files():
  """Every .py file of the bert_tf package, as paths relative to the root."""
  found = []
  for folder, dirs, names in os.walk(os.path.join(REPO_ROOT, "bert_tf")):
    dirs[:] = sorted(d for d in dirs if d != "__pycache__")
    found += [os.path.relpath(os.path.join(folder, name), REPO_ROOT)
              for name in sorted(names) if name.endswith(".py")]
  return found


def test_packages_found_are_every_package_folder():
  setuptools = import_or_skip("setuptools")
  include = _pyproject()["tool"]["setuptools"]["packages"]["find"]["include"]
  found = setuptools.find_packages(where=REPO_ROOT, include=include)
  folders = sorted({os.path.dirname(path).replace(os.sep, ".")
                    for path in _package_files()})
  # A folder of modules without __init__.py would be left out of the wheel.
  assert sorted(found) == folders
  assert {name.split(".")[0] for name in found} == {"bert_tf"}


def test_console_scripts_call_cli_which_main_blocks_call_too():
  scripts = _pyproject()["project"]["scripts"]
  assert scripts == {name: module + ":cli"
                     for name, (module, _) in _COMMANDS.items()}
  for module, _ in _COMMANDS.values():
    with open(os.path.join(REPO_ROOT, module + ".py"), encoding="utf-8") as f:
      source = f.read()
    tree = ast.parse(source)
    functions = {node.name: node for node in tree.body
                 if isinstance(node, ast.FunctionDef)}
    assert "cli" in functions, module
    calls = [ast.unparse(stmt) for stmt in functions["cli"].body
             if isinstance(stmt, ast.Expr)
             and isinstance(stmt.value, ast.Call)]
    assert calls == ["entry.run_main(main, define_flags)"], module
    assert source.endswith('if __name__ == "__main__":\n  cli()\n'), module


def test_dependencies_are_the_requirements_files_and_artefacts_are_ignored():
  project = _pyproject()
  assert "dependencies" in project["project"]["dynamic"]
  dynamic = project["tool"]["setuptools"]["dynamic"]
  assert dynamic["dependencies"] == {
      "file": ["requirements-tf2.15.txt", "requirements-tf2.21.txt"]}
  assert dynamic["optional-dependencies"]["test"] == {
      "file": ["requirements-test.txt", "requirements-torch.txt"]}
  assert dynamic["optional-dependencies"]["beam"] == {
      "file": ["requirements-beam.txt"]}
  assert dynamic["optional-dependencies"]["chinese"] == {
      "file": ["requirements-chinese.txt"]}
  assert dynamic["optional-dependencies"]["kerashub"] == {
      "file": ["requirements-kerashub.txt"]}
  assert dynamic["optional-dependencies"]["onnx"] == {
      "file": ["requirements-onnx.txt"]}
  ignored = read_lines(os.path.join(REPO_ROOT, ".gitignore"))
  assert {"/build/", "*.egg-info/", "/dist/"} <= set(ignored)
  assert "slow" in project["tool"]["pytest"]["ini_options"]["markers"][0]


def _fresh_venv(path):
  """A venv without pip that sees this interpreter's packages (no network).

  Returns its python. A .pth file appends this interpreter's site-packages
  (TensorFlow, pip, setuptools...) after the venv's own, so what gets
  installed into the venv is found first.
  """
  subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)],
                 check=True, timeout=120)
  python = os.path.join(str(path), "bin", "python")
  site = subprocess.run(
      [python, "-c", "import sysconfig; print(sysconfig.get_paths()"
       "['purelib'])"], check=True, capture_output=True, text=True,
      timeout=60).stdout.strip()
  parents = {sysconfig.get_paths()["purelib"],
             sysconfig.get_paths()["platlib"]}
  with open(os.path.join(site, "_parent_site_packages.pth"), "w",
            encoding="utf-8") as f:
    f.write("\n".join(sorted(parents)) + "\n")
  return python


def _pip_install(python, *args):
  env = script_env()
  env.pop("PYTHONPATH", None)
  result = subprocess.run(
      [python, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
       "--no-index", "--disable-pip-version-check", "-q"] + list(args),
      capture_output=True, text=True, env=env, timeout=600)
  assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]


def _module_file(python, module, cwd):
  # Without PYTHONPATH: a Beam pipeline run in this process puts the
  # checkout there for its worker processes.
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  result = subprocess.run(
      [python, "-c", "import %s; print(%s.__file__)" % (module, module)],
      capture_output=True, text=True, cwd=cwd, timeout=300, env=env)
  assert result.returncode == 0, result.stderr[-2000:]
  return result.stdout.strip().splitlines()[-1]


def _installed_top_level_names(python, cwd):
  """The top-level importable names that the installed distribution holds.

  Read from its `RECORD` (every installed file), cross-checked with
  `top_level.txt`; files outside site-packages (console scripts) and the
  dist-info folder itself are not names. Run in `cwd`, not the checkout,
  and without PYTHONPATH: a `bert_tf.egg-info/` that `pip install .` left
  in the checkout would be found first.
  """
  code = ("import importlib.metadata as m, json; d = m.distribution('bert-tf');"
          " print(json.dumps([[str(f) for f in d.files], "
          "d.read_text('top_level.txt')]))")
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  result = subprocess.run([python, "-c", code], capture_output=True,
                          text=True, timeout=300, cwd=cwd, env=env)
  assert result.returncode == 0, result.stderr[-2000:]
  files, top_level = json.loads(result.stdout.strip().splitlines()[-1])
  names = set()
  for path in files:
    first = path.split("/")[0]
    if first in ("..", "__pycache__") or first.endswith(".dist-info"):
      continue
    names.add(first[:-3] if first.endswith(".py") else first)
  assert names == set(top_level.split()), (sorted(names), top_level)
  return names


@pytest.mark.slow
def test_install_into_fresh_venv_gives_working_console_commands(tmp_path):
  source = tmp_path / "checkout"
  _copy_checkout(REPO_ROOT, source)
  built_before = os.path.exists(os.path.join(REPO_ROOT, "build"))
  python = _fresh_venv(tmp_path / "venv")
  _pip_install(python, str(source))
  bin_dir = os.path.dirname(python)
  work = tmp_path / "work"  # Not the checkout: nothing imports from there.
  work.mkdir()
  env = script_env(TF_CPP_MIN_LOG_LEVEL="3")
  env.pop("PYTHONPATH", None)
  # The installed modules, not the checkout's, are what the venv imports.
  assert _module_file(python, "bert_tf", str(work)).startswith(
      str(tmp_path / "venv"))
  # Exactly the package and the root modules are installed: no other
  # top-level name (no tests/, bench/, or a stray helper module).
  assert _installed_top_level_names(python, str(work)) == (
      {"bert_tf"} | set(_root_modules()))

  # --help lists the script's own flags too (absl lists those of the module
  # named sys.argv[0], which a console command is not).
  started = {(name, option): subprocess.Popen(
      [os.path.join(bin_dir, name), option], stdout=subprocess.PIPE,
      stderr=subprocess.PIPE, text=True, env=env, cwd=str(work))
             for name in _COMMANDS for option in ("--helpfull", "--help")}
  for (name, option), proc in started.items():
    stdout, stderr = proc.communicate(timeout=600)
    # absl exits with status 1 after printing --help/--helpfull, the same
    # as `python <script>.py --helpfull`.
    assert proc.returncode == 1, (name, option, stderr[-2000:])
    assert "Traceback" not in stderr, (name, option, stderr[-2000:])
    for flag in _COMMANDS[name][1]:
      assert flag + ":" in stdout, (name, option, flag)

  # One real run: features of a 2-line file with the tiny conformance model.
  input_file = work / "input.txt"
  input_file.write_text("hello world ||| a pair\nsingle line\n",
                        encoding="utf-8")
  output_file = work / "out.jsonl"
  result = subprocess.run(
      [os.path.join(bin_dir, "bert-extract-features"),
       "--input_file=%s" % input_file, "--output_file=%s" % output_file,
       "--layers=-1", "--max_seq_length=16", "--batch_size=2"] +
      tiny_model_flags(("conformance", "extract_features"),
                       do_lower_case=True),
      capture_output=True, text=True, env=env, cwd=str(work), timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  rows = [json.loads(line) for line in read_lines(str(output_file))]
  assert [row["linex_index"] for row in rows] == [0, 1]
  tokenizer = tokenization.FullTokenizer(
      data_path("conformance", "extract_features", "vocab.txt"))
  assert [f["token"] for f in rows[1]["features"]] == (
      ["[CLS]"] + tokenizer.tokenize("single line") + ["[SEP]"])
  assert len(rows[0]["features"][0]["layers"][0]["values"]) == 32
  # The install built in the copy, not in the checkout.
  assert os.path.exists(os.path.join(REPO_ROOT, "build")) == built_before


@pytest.mark.slow
def test_editable_install_imports_from_the_checkout(tmp_path):
  source = tmp_path / "checkout"
  _copy_checkout(REPO_ROOT, source)
  python = _fresh_venv(tmp_path / "venv")
  _pip_install(python, "-e", str(source))
  work = tmp_path / "work"
  work.mkdir()
  assert _module_file(python, "tokenization", str(work)) == str(
      source / "tokenization.py")
  for name in _COMMANDS:
    assert os.access(os.path.join(os.path.dirname(python), name), os.X_OK)
