"""The package layout holds: where code lives, and which way imports point.

Checked by reading the source (no imports, no TensorFlow): the root keeps
the reference's files and the entry points only; every folder of the
package says what lives there; every module lists its public names in
`__all__`; no package module imports a root script and no script imports
another; imports sit at the top of modules unless a comment says why; no
module but `modeling.py` is over ~700 lines, and no root script over 450.
"""

import ast
import os

import pytest

from helpers import REPO_ROOT

PACKAGE = "bert_tf"
# The reference release's eight files, then this project's own entry points.
REFERENCE_FILES = ("modeling", "tokenization", "optimization",
                   "create_pretraining_data", "run_pretraining",
                   "run_classifier", "run_squad", "extract_features")
ENTRY_POINTS = ("run_ner", "convert_checkpoint", "predict_saved_model",
                "prepare_corpus", "learn_vocab",
                "predict_masked_lm", "run_multiple_choice")
# Root modules that are libraries, not scripts: anything may import them.
ROOT_LIBRARIES = ("modeling", "tokenization", "optimization")
ROOT_SCRIPTS = tuple(m for m in REFERENCE_FILES + ENTRY_POINTS
                     if m not in ROOT_LIBRARIES)
MAX_LINES = 700
# A root script is the command line over the package: its code beyond that
# belongs in the package. The scripts still over the limit, with the most
# lines each may keep until it is cut down.
MAX_SCRIPT_LINES = 450
# The four training scripts together: flags, checks, the task, the call
# that trains and the outputs; the rest lives in the package.
MAX_TRAINING_SCRIPTS_LINES = 1000
_TRAINING_SCRIPTS = ("run_pretraining", "run_classifier", "run_ner",
                     "run_squad")


def _package_modules():
  """(dotted name, path) of every module of the package."""
  found = []
  for folder, _, files in os.walk(os.path.join(REPO_ROOT, PACKAGE)):
    for name in sorted(files):
      if name.endswith(".py"):
        path = os.path.join(folder, name)
        rel = os.path.relpath(path, REPO_ROOT)[:-3].replace(os.sep, ".")
        found.append((rel[:-len(".__init__")] if rel.endswith("__init__")
                      else rel, path))
  return sorted(found)


def _root_modules():
  return sorted((name[:-3], os.path.join(REPO_ROOT, name))
                for name in os.listdir(REPO_ROOT) if name.endswith(".py"))


def _all_modules():
  return _root_modules() + _package_modules()


def _tree(path):
  with open(path, encoding="utf-8") as f:
    return ast.parse(f.read(), path)


def _imported_modules(tree):
  """(line, top-level-or-dotted module name, node) of every import."""
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      for alias in node.names:
        yield node.lineno, alias.name, node
    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
      yield node.lineno, node.module, node
      for alias in node.names:
        yield node.lineno, node.module + "." + alias.name, node


def test_root_holds_the_reference_files_and_entry_points_only():
  assert {m for m, _ in _root_modules()} == set(REFERENCE_FILES +
                                                ENTRY_POINTS)


def test_every_package_folder_says_what_lives_there():
  for folder, dirs, _ in os.walk(os.path.join(REPO_ROOT, PACKAGE)):
    dirs[:] = [d for d in dirs if d != "__pycache__"]
    init = os.path.join(folder, "__init__.py")
    assert os.path.exists(init), folder
    assert ast.get_docstring(_tree(init)), init


@pytest.mark.parametrize("module,path", _all_modules(),
                         ids=[m for m, _ in _all_modules()])
def test_module_lists_its_public_names_in_all(module, path):
  tree = _tree(path)
  if module.endswith("__init__") or os.path.basename(path) == "__init__.py":
    return
  declared = [node for node in tree.body if isinstance(node, ast.Assign)
              and any(getattr(t, "id", None) == "__all__"
                      for t in node.targets)]
  assert declared, "%s has no __all__" % path
  names = ast.literal_eval(declared[0].value)
  defined = set()
  for node in tree.body:
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
      defined.add(node.name)
    elif isinstance(node, ast.Assign):
      defined.update(getattr(t, "id", None) for t in node.targets)
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
      defined.update((a.asname or a.name).split(".")[0] for a in node.names)
  missing = [name for name in names if name not in defined]
  assert not missing, "%s: __all__ names undefined %s" % (path, missing)


def test_package_modules_import_no_script():
  for module, path in _package_modules():
    for line, name, _ in _imported_modules(_tree(path)):
      assert name.split(".")[0] not in ROOT_SCRIPTS, (
          "%s:%d imports the script %s" % (path, line, name))


def test_scripts_import_no_other_script():
  for module, path in _root_modules():
    for line, name, _ in _imported_modules(_tree(path)):
      top = name.split(".")[0]
      assert top == module or top not in ROOT_SCRIPTS, (
          "%s:%d imports the script %s" % (path, line, name))


def test_tokenization_imports_only_the_standard_library_six_and_tensorflow():
  path = os.path.join(REPO_ROOT, "tokenization.py")
  own = {m for m, _ in _root_modules()} | {PACKAGE}
  for line, name, _ in _imported_modules(_tree(path)):
    assert name.split(".")[0] not in own, "tokenization.py:%d imports %s" % (
        line, name)


def _function_level_imports(path):
  """Imports inside functions whose line (or the line above) has no comment."""
  with open(path, encoding="utf-8") as f:
    lines = f.read().splitlines()
  tree = ast.parse("\n".join(lines), path)
  bare = []
  for func in ast.walk(tree):
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
      continue
    for node in ast.walk(func):
      if isinstance(node, (ast.Import, ast.ImportFrom)):
        here = lines[node.lineno - 1]
        above = lines[node.lineno - 2].strip() if node.lineno > 1 else ""
        comment = here.split("#", 1)[1] if "#" in here else ""
        # A pylint pragma alone says nothing about why.
        reason = comment.replace("pylint: disable=g-import-not-at-top",
                                 "").strip(" #")
        if not reason and not above.startswith("#"):
          bare.append("%s:%d" % (path, node.lineno))
  return bare


def test_imports_sit_at_the_top_unless_a_comment_says_why():
  bare = []
  for _, path in _all_modules():
    bare += _function_level_imports(path)
  assert not bare, "imports inside functions without a reason: %s" % bare


def test_no_module_but_modeling_is_over_the_line_limit():
  long = []
  for module, path in _all_modules():
    with open(path, encoding="utf-8") as f:
      count = sum(1 for _ in f)
    if module != "modeling" and count > MAX_LINES:
      long.append("%s (%d lines)" % (path, count))
  assert not long, long


def test_no_root_script_is_over_the_script_line_limit():
  long = []
  for module, path in _root_modules():
    if module in ROOT_SCRIPTS:
      with open(path, encoding="utf-8") as f:
        count = sum(1 for _ in f)
      if count > MAX_SCRIPT_LINES:
        long.append("%s (%d lines)" % (path, count))
  assert not long, long


def test_the_training_scripts_are_short_together():
  counts = {}
  for module, path in _root_modules():
    if module in _TRAINING_SCRIPTS:
      with open(path, encoding="utf-8") as f:
        counts[module] = sum(1 for _ in f)
  assert len(counts) == len(_TRAINING_SCRIPTS), counts
  assert sum(counts.values()) <= MAX_TRAINING_SCRIPTS_LINES, counts


def test_dependencies_point_down_to_the_package_not_up_to_optimization():
  # The root optimization.py is the reference's face over bert_tf.train:
  # nothing in the package imports it (nor any other root module but the
  # two libraries the encoder and the tokenizer are).
  for module, path in _package_modules():
    for line, name, _ in _imported_modules(_tree(path)):
      assert name.split(".")[0] != "optimization", (
          "%s:%d imports the root optimization.py" % (path, line))


# What only bert_tf/tf_private.py may name: TensorFlow's private modules and
# private attributes (they break between minor versions).
_PRIVATE_TENSORFLOW = ("tensorflow.python", "tensorflow.core", "_set_attr",
                       "_in_multi_worker_mode", "_create_device_dataset",
                       "_PRINT_DEPRECATION_WARNINGS",
                       "_PER_MODULE_WARNING_LIMIT",
                       "_distribute_coordinator_mode")


def test_private_tensorflow_is_named_in_one_module():
  found = []
  for module, path in _all_modules():
    if module == PACKAGE + ".tf_private":
      continue
    with open(path, encoding="utf-8") as f:
      for number, line in enumerate(f, 1):
        code = line.split("#", 1)[0]
        if any(name in code for name in _PRIVATE_TENSORFLOW):
          found.append("%s:%d" % (path, number))
  assert not found, "private TensorFlow outside tf_private.py: %s" % found


def test_every_scripts_main_is_short():
  # Scripts read top-down: flags, data, model_fn, the call that trains
  # (bert_tf/runner/loop.py), outputs. Docstrings aside.
  long = []
  for module, path in _root_modules():
    for node in _tree(path).body:
      if isinstance(node, ast.FunctionDef) and node.name == "main":
        first = node.body[0]
        start = (first.end_lineno + 1 if isinstance(first, ast.Expr) and
                 isinstance(first.value, ast.Constant) else first.lineno)
        if node.end_lineno - start + 1 > 80:
          long.append("%s (%d lines)" % (path, node.end_lineno - start + 1))
  assert not long, long


# The tasks' and exports' code reads no flags: a script reads its flags
# into values and passes them (`NerOptions`, `fine_tuning.ModelFiles`, ...);
# only the scripts, bert_tf/cli/ and bert_tf/train/options.py read flags.
_FLAG_FREE = (os.path.join(PACKAGE, "tasks"), os.path.join(PACKAGE, "export"))
_FLAG_NAMES = ("FLAGS", "flag_values", "flags")


def test_tasks_and_exports_define_and_read_no_flags():
  found = []
  for module, path in _package_modules():
    if not os.path.relpath(path, REPO_ROOT).startswith(_FLAG_FREE):
      continue
    tree = _tree(path)
    for line, name, _ in _imported_modules(tree):
      if name in ("absl.flags", "bert_tf.cli.flags"):
        found.append("%s:%d imports %s" % (path, line, name))
    for node in ast.walk(tree):
      if isinstance(node, ast.Name) and node.id in _FLAG_NAMES:
        found.append("%s:%d names %s" % (path, node.lineno, node.id))
      elif isinstance(node, ast.arg) and node.arg in _FLAG_NAMES:
        found.append("%s:%d takes %s" % (path, node.lineno, node.arg))
  assert not found, found


# Every model_fn of these scripts and tasks is `model_fn.build_model_fn`
# over a `Head`; they define none of their own, and their `main` starts
# with the one start-up call.
_ONE_SKELETON = ("run_ner", "run_squad", "run_pretraining", "extract_features",
                 "predict_masked_lm", PACKAGE + ".tasks.ner",
                 PACKAGE + ".tasks.squad", PACKAGE + ".tasks.pretraining",
                 PACKAGE + ".cli.fine_tuning")


def test_these_scripts_and_tasks_build_model_fns_on_the_one_skeleton():
  own, not_started = [], []
  for module, path in _all_modules():
    if not any(module == m or module.startswith(m + ".")
               for m in _ONE_SKELETON):
      continue
    for node in ast.walk(_tree(path)):
      if not isinstance(node, ast.FunctionDef):
        continue
      if [a.arg for a in node.args.args] == ["features", "labels", "mode",
                                              "params"]:
        own.append("%s:%d" % (path, node.lineno))
      if node.name == "main" and "." not in module:
        calls = [n for n in ast.walk(node) if isinstance(n, ast.Call) and
                 isinstance(n.func, ast.Attribute) and
                 n.func.attr == "start"]
        if not calls:
          not_started.append(path)
  assert not own, "a model_fn of its own: %s" % own
  assert not not_started, "main without startup.start: %s" % not_started


# A classifier head is a value (bert_tf/tasks/classifier/model.py): no
# public function of the classifier task, the exports or the serving client
# takes its kind as a boolean. The reference's `create_model` and
# `model_fn_builder` keep their keyword arguments for their callers (they
# turn them into a head at once).
_HEAD_KIND_FLAGS = ("is_regression", "multi_label")
_HEAD_KIND_FREE = (os.path.join(PACKAGE, "tasks", "classifier"),
                   os.path.join(PACKAGE, "export"), "predict_saved_model.py",
                   "run_classifier.py")
_REFERENCE_WRAPPERS = ("create_model", "model_fn_builder")


def test_no_public_function_takes_a_head_kind_as_a_boolean():
  found = []
  for module, path in _all_modules():
    if not os.path.relpath(path, REPO_ROOT).startswith(_HEAD_KIND_FREE):
      continue
    for node in ast.walk(_tree(path)):
      if (not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or
          node.name.startswith("_") and node.name != "__init__" or
          node.name in _REFERENCE_WRAPPERS):
        continue
      arguments = node.args.args + node.args.kwonlyargs
      found += ["%s:%d %s(%s=...)" % (path, node.lineno, node.name, a.arg)
                for a in arguments if a.arg in _HEAD_KIND_FLAGS]
  assert not found, found
