"""pytest's set-up for this suite: the repo root and tests/ on sys.path, and
the default selection.

The default selection: without `-m`, pytest runs the tests a contributor runs
before each commit, `-m "not slow or e2e"` (the quick tests and one
end-to-end run per script). `-m slow` runs the slow ones, `-m "slow or not
slow"` everything (docs/testing.md). A test named by its node id
(`tests/test_x.py::test_y`) always runs.

The helpers themselves are in `helpers.py`, imported by the tests; the test
data is under `data/` (see data/README.md).
"""
import importlib
import importlib.util
import os
import sys

import pytest

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
for _path in (os.path.dirname(TESTS_DIR), TESTS_DIR):
  if _path not in sys.path:
    sys.path.insert(0, _path)

# TensorFlow 2.20 and later load their library with RTLD_GLOBAL, so a triton
# loaded after TensorFlow binds to TensorFlow's LLVM and crashes the process
# (SIGSEGV); the CUDA builds of torch import triton lazily (transformers'
# BERT does, through torch). Loaded first, where installed, it keeps its own.
if importlib.util.find_spec("triton") is not None:
  importlib.import_module("triton")

DEFAULT_SELECTION = "not slow or e2e"
_DEFAULTED = pytest.StashKey[bool]()


def pytest_configure(config):
  """Applies `DEFAULT_SELECTION` when no `-m` is given and no test is named
  by its node id."""
  if config.option.markexpr or any("::" in arg for arg in config.args):
    return
  config.option.markexpr = DEFAULT_SELECTION
  config.stash[_DEFAULTED] = True


def pytest_report_header(config):
  """One line saying that the default selection runs, and the others."""
  if config.stash.get(_DEFAULTED, False):
    return ('default selection -m "%s" (quick tests and one end-to-end run '
            'per script); -m slow: the slow ones; -m "slow or not slow": '
            'all' % DEFAULT_SELECTION)
  return None
