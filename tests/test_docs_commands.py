"""The README and docs/ as a newcomer reads them: the README is at most 400
lines, every relative link (and its #anchor) resolves, and the commands
run as shown.

Slow (each runs TensorFlow in subprocesses): the quick start in its
documented tiny variant (`NUM_TRAIN_STEPS`, `OUT_DIR`), then every example
of the README's script table in order, on that run's model; and the docs/
blocks marked `<!-- docs-test: NAME -->`, with /tmp/ moved into the test's
folder and, for a long run, the smaller sizes of `_TINY[NAME]`.
"""

import glob
import importlib.util
import os
import re
import shutil
import subprocess
import sys

import pytest

from helpers import import_or_skip
from helpers import REPO_ROOT
from helpers import script_env
from helpers import shared_dir
from helpers import shared_path
from helpers import skip_or_fail

_README = os.path.join(REPO_ROOT, "README.md")
_TEST_COMMAND = ("./setup.sh --test && .venv/bin/python -m pytest tests -q "
                 "-n auto")
# The docs/ blocks marked `<!-- docs-test: NAME -->`.
_DOCS_BLOCKS = ("sample-two-workers", "multi-label", "long-documents",
                "best-checkpoint", "masked-lm", "from-tfbert", "swag-sample",
                "masked-lm-only", "from-kerashub")
# docs/ blocks that would run for minutes: the same commands on less data.
_TINY = {
    "multi-label": [("head -4000 ", "head -64 "),
                    ("cp /tmp/conll_types/dev.tsv /tmp/conll_types_4k/",
                     "head -64 /tmp/conll_types/dev.tsv > "
                     "/tmp/conll_types_4k/dev.tsv")],
}


def _pages():
  return [_README] + sorted(glob.glob(os.path.join(REPO_ROOT, "docs",
                                                   "*.md")))


def _read(path):
  with open(path, encoding="utf-8") as f:
    return f.read()


def _outside_code(text):
  """`text` without fenced blocks and inline code (links there are not
  links)."""
  text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
  return re.sub(r"`[^`\n]*`", "", text)


def _anchors(path):
  """GitHub's anchors of a Markdown file's headings."""
  found = set()
  for heading in re.findall(r"^#+ (.*)$", re.sub(r"^```.*?^```", "",
                                                  _read(path),
                                                  flags=re.S | re.M), re.M):
    slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
    while slug in found:
      slug += "-1"
    found.add(slug)
  return found


def test_readme_is_at_most_400_lines_and_keeps_the_two_commands():
  text = _read(_README)
  assert text.count("\n") <= 400
  assert "\n./quickstart.sh\n" in text and _TEST_COMMAND in text


def test_every_relative_link_resolves():
  broken = []
  for page in _pages():
    for target in re.findall(r"\]\(([^)\s]+)\)", _outside_code(_read(page))):
      if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
        continue
      path, _, anchor = target.partition("#")
      full = (os.path.normpath(os.path.join(os.path.dirname(page), path))
              if path else page)
      where = "%s: %s" % (os.path.relpath(page, REPO_ROOT), target)
      if not os.path.exists(full):
        broken.append(where + " (no such file)")
      elif anchor and anchor not in _anchors(full):
        broken.append(where + " (no such heading)")
  assert not broken, broken


def _script_examples():
  """(script, command) of each row of the README's script table."""
  text = _read(_README)
  table = re.search(r"<!-- script-examples:start -->\n(.*?)"
                    r"<!-- script-examples:end -->", text, re.S)
  assert table, "README.md has no script-examples table"
  rows = []
  for line in table.group(1).splitlines()[2:]:
    cells = [cell.strip() for cell in line.strip("|").split(" | ")]
    rows.append((cells[0].strip("`"), cells[-1].strip("`")))
  return rows


def test_script_table_has_every_root_script_once():
  scripts = [script for script, _ in _script_examples()]
  root = sorted(os.path.basename(path) for path in
                glob.glob(os.path.join(REPO_ROOT, "*.py")))
  assert sorted(scripts) == root
  for script, command in _script_examples():
    assert script[:-3] in command, script


def _bash(command, tmp_path, timeout=900, env=None):
  """Runs `command` with bash in the repo root, `python` being this
  interpreter."""
  path = os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]
  return subprocess.run(
      [shutil.which("bash"), "-euo", "pipefail", "-c", command],
      cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout,
      env=script_env(PATH=path, TMPDIR=str(tmp_path), **(env or {})))


def _venv():
  """The virtual environment this interpreter runs in (quickstart.sh's
  VENV), or a skip."""
  if not os.path.exists(os.path.join(sys.prefix, "bin", "python")) or (
      sys.prefix == sys.base_prefix):
    skip_or_fail("the quick start needs the tests to run in a venv "
                 "(./setup.sh --test)")
  return sys.prefix


def _local(command, tmp_path):
  """The command with its outputs and the shared folder where the test
  keeps them."""
  return (command.replace("runs/", str(tmp_path / "runs") + "/")
          .replace("../shared/", shared_dir() + "/"))


@pytest.mark.slow
def test_quick_start_and_every_script_example_run_as_shown(tmp_path):
  quickstart = tmp_path / "runs" / "quickstart"
  result = _bash("./quickstart.sh", tmp_path, env={
      "VENV": _venv(), "OUT_DIR": str(quickstart), "NUM_TRAIN_STEPS": "3"})
  assert result.returncode == 0, result.stderr[-3000:]
  assert "Eval results (%s/model/eval_results.txt):" % quickstart in (
      result.stdout)
  assert "global_step = 3\n" in result.stdout
  for key in ("masked_lm_accuracy", "next_sentence_loss"):
    assert "\n%s = " % key in result.stdout
  failed = []
  for script, command in _script_examples():
    if "../shared/" in command:
      shared_path("data")
    if script in ("prepare_corpus.py", "learn_vocab.py"):
      import_or_skip("apache_beam", "./setup.sh --beam")
    result = _bash(_local(command, tmp_path), tmp_path)
    outputs = re.findall(r"--output(?:_file|_dir)?=(\S+)", command)
    missing = [path for path in outputs
               if not glob.glob(_local(path, tmp_path) + "*")]
    if result.returncode != 0 or missing or (
        "python -c" in command and not result.stdout.strip()):
      failed.append("%s: status %d, missing %s: %s" % (
          script, result.returncode, missing, result.stderr[-1500:]))
  assert not failed, "\n".join(failed)


def _docs_blocks():
  """(name, page, bash block) of each docs/ block marked for this test."""
  blocks = []
  for page in _pages()[1:]:
    for name, block in re.findall(r"<!-- docs-test: ([\w-]+) -->\n```bash\n"
                                  r"(.*?)^```", _read(page), re.S | re.M):
      blocks.append((name, os.path.relpath(page, REPO_ROOT), block))
  return blocks


def test_docs_blocks_are_found():
  assert {name for name, _, _ in _docs_blocks()} == set(_DOCS_BLOCKS)


@pytest.mark.slow
@pytest.mark.parametrize("name", _DOCS_BLOCKS)
def test_docs_block_runs_as_shown(tmp_path, name):
  (page, block), = [(page, block) for found, page, block in _docs_blocks()
                    if found == name]
  if "../shared/" in block:
    shared_path("data")
  if "from transformers import" in block:
    if importlib.util.find_spec("torch") is None and "torch" in (
        os.environ.get("BERT_TESTS_WITHOUT", "").split(",")):
      # A stack without PyTorch: every command but those of transformers.
      block = "\n".join(line for line in block.splitlines()
                        if "from transformers import" not in line)
    else:
      import_or_skip("torch", "./setup.sh --test")
      import_or_skip("transformers", "./setup.sh --test")
  if "import keras_hub" in block:
    if sys.version_info < (3, 12):
      # Not an install left out: Keras 3 does not exist for TensorFlow 2.15.
      pytest.skip("keras-hub needs Keras 3: the TensorFlow 2.21 stack only")
    import_or_skip("keras_hub", "./setup.sh --kerashub")
  for before, after in _TINY.get(name, []):
    assert before in block, (page, before)
    block = block.replace(before, after)
  block = _local(block.replace("/tmp/", str(tmp_path) + "/"), tmp_path)
  # Hugging Face folders given as --init_checkpoint are converted into
  # the test's folder, not the user's cache.
  result = _bash(block, tmp_path,
                 env={"BERT_TF_CACHE": str(tmp_path / "bert_tf_cache")})
  assert result.returncode == 0, (page, result.stderr[-3000:])
  assert "Traceback" not in result.stderr
