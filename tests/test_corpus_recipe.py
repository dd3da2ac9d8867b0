# coding=utf-8
"""The corpus recipe of docs/pretraining.md runs end to end: dump ->
corpus -> vocab -> instances -> run_pretraining.py, on the small test dump.

Runs the block between the `corpus-recipe` markers with bash, its
`python` being this interpreter. Needs the `beam` extra (skips without it,
fails under CI).
"""

import os
import re
import subprocess
import sys

import pytest

from helpers import import_or_skip
from helpers import REPO_ROOT
from helpers import script_env


def _recipe():
  with open(os.path.join(REPO_ROOT, "docs", "pretraining.md"),
            encoding="utf-8") as f:
    text = f.read()
  found = re.search(r"<!-- corpus-recipe:start -->\n```bash\n(.*?)```\n"
                    r"<!-- corpus-recipe:end -->", text, re.DOTALL)
  assert found, "docs/pretraining.md has no corpus-recipe block"
  return found.group(1)


def test_recipe_uses_every_step():
  recipe = _recipe()
  for step in ("tests/corpus_dump.py", "prepare_corpus.py", "learn_vocab.py",
               "create_pretraining_data.py", "--num_shards=",
               "run_pretraining.py"):
    assert step in recipe, step


@pytest.mark.slow
def test_readme_recipe_runs_end_to_end(tmp_path):
  for name in ("apache_beam", "mwxml", "mwparserfromhell", "sentencex",
               "tokenizers"):
    import_or_skip(name, "pip install .[beam] (or ./setup.sh --beam)")
  bin_dir = tmp_path / "bin"
  bin_dir.mkdir()
  # A wrapper, not a symlink: a venv's python is found by its own path.
  wrapper = bin_dir / "python"
  wrapper.write_text('#!/bin/sh\nexec "%s" "$@"\n' % sys.executable)
  wrapper.chmod(0o755)
  work = tmp_path / "work"
  env = script_env(WORK=str(work), TF_CPP_MIN_LOG_LEVEL="2",
                   CUDA_VISIBLE_DEVICES="",
                   PATH=str(bin_dir) + os.pathsep + os.environ["PATH"])
  proc = subprocess.run(["bash", "-euo", "pipefail", "-c", _recipe()],
                        cwd=REPO_ROOT, env=env, capture_output=True,
                        text=True, timeout=1200)
  assert proc.returncode == 0, proc.stderr[-4000:]
  shards = sorted(os.listdir(work / "corpus"))
  assert shards == ["wiki.txt-00000-of-00002", "wiki.txt-00001-of-00002"]
  with open(work / "vocab.txt", encoding="utf-8") as f:
    vocab = f.read().splitlines()
  assert len(vocab) == 1200 and vocab[100:104] == ["[UNK]", "[CLS]", "[SEP]",
                                                    "[MASK]"]
  assert "pieces/word" in proc.stdout
  assert sorted(os.listdir(work / "records")) == [
      "wiki.tfrecord-00000-of-00002", "wiki.tfrecord-00001-of-00002"]
  results = dict(line.split(" = ") for line in proc.stdout.splitlines()
                 if " = " in line)
  assert int(results["global_step"]) == 20
  assert 0.0 < float(results["masked_lm_loss"]) < 20.0
