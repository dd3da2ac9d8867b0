"""Shared test helpers: locating the test data and ../shared, running the scripts.

The conformance vectors (golden outputs of the BERT research release) and the
bug-report cases live in the repo under ``tests/data`` (``data_path``), so a
fresh clone checks itself. Real data sets (GLUE, XNLI, SQuAD, CoNLL-2003,
WNUT-17, the released vocabularies) are read from the team's shared folder
``$BERT_SHARED_DIR`` (default ``../shared`` next to the checkout;
``shared_path``). Outside CI a missing shared folder skips the tests that need
it, with a message saying how to provide it; under CI (``CI=true``) it is a
failure. The same rule holds for every other skip (an optional package, a
Python or Unicode version, a platform feature): tests call ``skip_or_fail`` or
``import_or_skip`` rather than ``pytest.skip``, so a CI run never passes with
tests silently left out.

Tests that take more than about ten seconds carry ``@pytest.mark.slow``;
``pytest tests`` runs the quick ones and the ``e2e`` run of each script
(tests/conftest.py), ``-m slow`` the slow ones; CI runs every test on
TensorFlow 2.15 (docs/testing.md).
"""
import importlib
import json
import os
import subprocess
import sys

import pytest

__all__ = ["REPO_ROOT", "DATA_DIR", "READ_FROM_SHARED", "in_ci",
           "skip_or_fail", "import_or_skip", "data_path", "shared_dir",
           "shared_path", "write_tsv", "write_json", "read_lines",
           "script_env", "script_command", "run_script", "tiny_model_flags",
           "write_corpus", "HAS_ESTIMATOR", "RUNNERS", "needs_estimator",
           "checked_run_options", "checked_model", "extract_features_twice"]

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
  sys.path.insert(0, REPO_ROOT)
DATA_DIR = os.path.join(REPO_ROOT, "tests", "data")

# The stack: TensorFlow 2.15 has tf.estimator (both runners run), newer ones
# only the session runner. A test of the Estimator itself is skipped on the
# newer stack (it cannot run there; that is not missing data).
from bert_tf.train import spec as _spec  # pylint: disable=wrong-import-position
HAS_ESTIMATOR = _spec.estimator_available()
RUNNERS = ("estimator", "session") if HAS_ESTIMATOR else ("session",)


def runner_pairs(cases):
  """(runner, case) pairs: each case once, the runners taken in turn, so
  every runner of this stack runs some case. For a case whose code is the
  same on both runners (the runner's part is tested on each elsewhere)."""
  return [(RUNNERS[i % len(RUNNERS)], case) for i, case in enumerate(cases)]


needs_estimator = pytest.mark.skipif(
    not HAS_ESTIMATOR, reason="needs tf.estimator (the TensorFlow 2.15 stack)")
# Conformance inputs that are byte-identical to a real data file of the shared
# folder are not committed (no copy of shared/data may be): data_path reads
# them from there. tests/data path -> parts under $BERT_SHARED_DIR.
READ_FROM_SHARED = {
    os.path.join("conformance", "pretraining_data", "sample_text.txt"):
        ("data", "pretrain", "sample_text.txt"),
}


def in_ci():
  """True under CI (``CI=true``), where nothing may be skipped."""
  return os.environ.get("CI", "").lower() == "true"


def skip_or_fail(msg):
  """Skips the current test with `msg`, or fails it under CI."""
  if in_ci():
    pytest.fail("%s (CI=true: a skip here is a failure)" % msg)
  pytest.skip(msg)


def import_or_skip(name, hint=None):
  """Imports and returns module `name`; skips (fails under CI) when missing.

  `hint` says how to install it, e.g. "./setup.sh --test". A module named in
  ``BERT_TESTS_WITHOUT`` (comma-separated) skips under CI too: .ci/run names
  torch on a stack where setup.sh found no CPU build of it.
  """
  try:
    return importlib.import_module(name)
  except ImportError as e:
    allowed = os.environ.get("BERT_TESTS_WITHOUT", "").split(",")
    if name in allowed:
      pytest.skip("%s is not importable (%s); BERT_TESTS_WITHOUT=%s" %
                  (name, e, os.environ["BERT_TESTS_WITHOUT"]))
    skip_or_fail("%s is not importable (%s)%s" %
                 (name, e, "; install it with " + hint if hint else ""))


def data_path(*parts):
  """Path of the in-repo test data ``tests/data/<parts>``.

  ``conformance/`` holds the golden vectors, ``cases/`` the bug-report cases
  (see tests/data/README.md). An input that is a copy of a real data file
  (``READ_FROM_SHARED``) comes from the shared folder, as ``shared_path``.

  Raises:
    FileNotFoundError: the path does not exist (the checkout is incomplete).
  """
  relative = os.path.join(*parts)
  if relative in READ_FROM_SHARED:
    return shared_path(*READ_FROM_SHARED[relative])
  path = os.path.join(DATA_DIR, relative)
  if not os.path.exists(path):
    raise FileNotFoundError("%s not found: it is part of the repo's test data "
                            "(tests/data)" % path)
  return path


def shared_dir():
  """Absolute path of the shared folder (may not exist)."""
  return os.path.abspath(
      os.environ.get("BERT_SHARED_DIR", os.path.join(REPO_ROOT, "..", "shared")))


def shared_path(*parts):
  """Path under the shared folder; skips (or fails under CI) when it is absent.

  For the real data sets only, e.g. ``shared_path("data", "glue", "MRPC")``;
  the conformance vectors and cases are in the repo (``data_path``).
  """
  path = os.path.join(shared_dir(), *parts)
  if not os.path.exists(path):
    skip_or_fail("%s not found: set BERT_SHARED_DIR to the team's shared "
                 "folder (default ../shared beside the checkout)." % path)
  return path


def write_tsv(path, lines):
  """Writes `lines` (lists of cells, or strings) as a UTF-8 TSV file.

  Missing parent folders are created. Returns `path`.
  """
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    for line in lines:
      f.write((line if isinstance(line, str) else "\t".join(line)) + "\n")
  return path


def write_json(folder, obj, name):
  """Writes `obj` as JSON (a str as it is) to folder/name; returns the path."""
  path = os.path.join(str(folder), name)
  with open(path, "w", encoding="utf-8") as f:
    f.write(obj if isinstance(obj, str) else json.dumps(obj))
  return path


def read_lines(path):
  """The lines of the UTF-8 text file `path`, without line endings."""
  with open(path, encoding="utf-8") as f:
    return f.read().splitlines()


def script_env(**extra):
  """os.environ plus `extra`, without BERT_DEBUG (errors stay one line)."""
  env = dict(os.environ, **extra)
  env.pop("BERT_DEBUG", None)
  return env


def script_command(name, args=()):
  """argv running the repo-root script `name` with this interpreter."""
  return [sys.executable, os.path.join(REPO_ROOT, name)] + list(args)


def run_script(name, args, timeout=300, env=None):
  """Runs the repo-root script `name` (e.g. "run_classifier.py") with `args`.

  It runs with this interpreter in the repo root, BERT_DEBUG dropped from the
  environment and `env` (a dict) added to it; stdout and stderr are captured
  as text. Returns the `subprocess.CompletedProcess`.
  """
  return subprocess.run(script_command(name, args), cwd=REPO_ROOT,
                        env=script_env(**(env or {})), capture_output=True,
                        text=True, timeout=timeout)


def tiny_model_flags(folder=("conformance", "modeling"), checkpoint=True,
                     do_lower_case=None):
  """--vocab_file, --bert_config_file (and --init_checkpoint) of a tiny model.

  `folder` (parts under tests/data) holds vocab.txt, bert_config.json and
  bert_model.ckpt (the 2-layer, 32-wide conformance model by default).
  """
  model_dir = data_path(*folder)
  flags = ["--vocab_file=%s" % os.path.join(model_dir, "vocab.txt"),
           "--bert_config_file=%s" % os.path.join(model_dir,
                                                   "bert_config.json")]
  if checkpoint:
    flags.append("--init_checkpoint=%s" % os.path.join(model_dir,
                                                       "bert_model.ckpt"))
  if do_lower_case is not None:
    flags.append("--do_lower_case=%s" % do_lower_case)
  return flags


def write_corpus(tmp_path):
  """A pre-training corpus of three files; a document spans the first two (no blank line between)."""
  files = []
  texts = ["alpha one\nalpha two\n\nbeta one\nbeta two\n",
           "beta three\n\ngamma one\n\n\ndelta one\ndelta two\n",
           "\nepsilon one\n\nzeta one\nzeta two\n\n"]
  for k, text in enumerate(texts):
    path = tmp_path / ("corpus%d.txt" % k)
    path.write_text(text, encoding="utf-8")
    files.append(str(path))
  return files


def write_three_documents(path):
  """Three documents of 4%, 28% and 68% of the bytes (the shape of the
  reference's sample_text.txt: no blank line after the middle); the third
  shares no word with the others."""
  first, last = ["one", "two", "three", "four"], ["five", "six", "seven"]
  docs = [["alpha one two", "alpha three four"],
          ["beta %s %s %s" % (a, b, a) for a in first for b in first[:3]],
          ["gamma %s %s %s" % (a, b, c) for a in last for b in last
           for c in last]]
  path.write_text("\n\n".join("\n".join(doc) for doc in docs) + "\n",
                  encoding="utf-8")
  return [str(path)]


def sgd_train_spec(loss):
  """The TRAIN spec of a test model_fn: one SGD step (rate 0.01) on `loss`
  and the global step's increment."""
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  train_op = tf.group(
      tf.train.GradientDescentOptimizer(0.01).minimize(loss),
      tf.assign_add(tf.train.get_global_step(), 1))
  return _spec.model_spec(mode=_spec.ModeKeys.TRAIN, loss=loss,
                          train_op=train_op)


def checked_run_options(flag_values):
  """`options.from_flags` as a script uses it: the `RunOptions`, or one
  `ValueError` holding every problem of the options."""
  from bert_tf.checks.problems import Problems  # pylint: disable=g-import-not-at-top
  from bert_tf.train import options as training_options  # pylint: disable=g-import-not-at-top
  problems = Problems()
  run = training_options.from_flags(flag_values, problems)
  problems.raise_if_any()
  return run


def checked_model(*args, problems=(), **kwargs):
  """`startup.prepare_model` as a script uses it: the `Model`, or one
  `ValueError` holding `problems` (the script's own, found before) and
  every problem of the model's checks."""
  from bert_tf.checks.problems import Problems  # pylint: disable=g-import-not-at-top
  from bert_tf.cli import startup  # pylint: disable=g-import-not-at-top
  found = Problems(problems)
  model = startup.prepare_model(*args, problems=found, **kwargs)
  found.raise_if_any()
  return model


def extract_features_twice(tmp_path, folder, checkpoint_dir):
  """`extract_features.py` outputs (JSON lines text) with `--init_checkpoint`
  a folder of another layout alone, then its converted release folder with
  explicit config and vocabulary; conversions cached in `tmp_path/cache`.

  Returns:
    (output on the folder, output on the release folder, stderr of the
    first run).
  """
  text = tmp_path / "input.txt"
  text.write_text("the cat ||| a dog\n")
  outputs, first_stderr = [], None
  for model_flags in (
      ["--init_checkpoint=%s" % folder],
      ["--init_checkpoint=%s" % checkpoint_dir,
       "--bert_config_file=%s" % os.path.join(checkpoint_dir,
                                              "bert_config.json"),
       "--vocab_file=%s" % os.path.join(checkpoint_dir, "vocab.txt")]):
    out = tmp_path / ("out%d.jsonl" % len(outputs))
    result = run_script("extract_features.py", [
        "--input_file=%s" % text, "--output_file=%s" % out,
        "--max_seq_length=16", "--layers=-1"] + model_flags,
                        env={"BERT_TF_CACHE": str(tmp_path / "cache")})
    assert result.returncode == 0, result.stderr[-2000:]
    outputs.append(out.read_text())
    first_stderr = first_stderr or result.stderr
  return outputs[0], outputs[1], first_stderr
