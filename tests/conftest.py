"""pytest's set-up for this suite: the repo root and tests/ on sys.path, and
the default selection.

The default selection: without `-m`, pytest runs the tests a contributor runs
before each commit, `-m "not slow or e2e"` (the quick tests and one
end-to-end run per script). `-m slow` runs the slow ones, `-m "slow or not
slow"` everything (docs/testing.md; CI runs every test on TensorFlow
2.15, and the default selection plus `-m both_stacks` on 2.21). A test
named by its node id (`tests/test_x.py::test_y`) always runs.

`-n auto` (pytest-xdist, installed by `setup.sh --test`) runs the tests
in one worker per CPU (at most 4), each test file whole on one worker.

`--cpu-durations=N` lists the N tests that used the most CPU time, this
process's and its subprocesses' (set-up and tear-down included), and the
total: unlike `--durations` (wall time), a figure that a busy machine
changes little.

The helpers themselves are in `helpers.py`, imported by the tests; the test
data is under `data/` (see data/README.md).
"""
import importlib
import importlib.util
import os
import resource
import sys
import tempfile

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
_CPU = pytest.StashKey[dict]()


def pytest_configure(config):
  """Applies `DEFAULT_SELECTION` when no `-m` is given and no test is named
  by its node id."""
  _spread_by_file(config)
  if config.option.markexpr or any("::" in arg for arg in config.args):
    return
  config.option.markexpr = DEFAULT_SELECTION
  config.stash[_DEFAULTED] = True


# `-n auto` (pytest-xdist): one worker per CPU, at most this many (each
# worker's tests start TensorFlow processes of 1-2 GB).
MAX_AUTO_WORKERS = 4


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
  """`-n auto`: the CPUs this process may use, at most `MAX_AUTO_WORKERS`."""
  del config  # The hook's signature.
  return max(1, min(len(os.sched_getaffinity(0)), MAX_AUTO_WORKERS))


def _spread_by_file(config):
  """With `-n` and no `--dist`, each test file runs whole on one worker
  (`--dist loadfile`), so its module fixtures are made once."""
  if (getattr(config.option, "dist", "no") == "load" and
      not any(arg == "--dist" or arg.startswith("--dist=")
              for arg in config.invocation_params.args)):
    config.option.dist = "loadfile"


def pytest_report_header(config):
  """One line saying that the default selection runs, and the others."""
  if config.stash.get(_DEFAULTED, False):
    return ('default selection -m "%s" (quick tests and one end-to-end run '
            'per script); -m slow: the slow ones; -m "slow or not slow": '
            'all' % DEFAULT_SELECTION)
  return None


def pytest_addoption(parser):
  """Adds `--cpu-durations=N`."""
  parser.addoption("--cpu-durations", type=int, default=None, metavar="N",
                   help="list the N tests that used the most CPU time "
                   "(subprocesses included; 0: all) and the total")


def _cpu_seconds():
  """CPU seconds (user + system) of this process and its waited-for
  children so far."""
  return sum(usage.ru_utime + usage.ru_stime for usage in (
      resource.getrusage(resource.RUSAGE_SELF),
      resource.getrusage(resource.RUSAGE_CHILDREN)))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
  """With `--cpu-durations`, records each test's CPU seconds."""
  del nextitem  # The hook's signature.
  if item.config.getoption("cpu_durations") is None:
    yield
    return
  start = _cpu_seconds()
  yield
  item.config.stash.setdefault(_CPU, {})[item.nodeid] = _cpu_seconds() - start


def pytest_terminal_summary(terminalreporter, config):
  """With `--cpu-durations=N`, lists the N costliest tests and the total."""
  count = config.getoption("cpu_durations")
  if count is None:
    return
  seconds = config.stash.get(_CPU, {})
  slowest = sorted(seconds.items(), key=lambda item: -item[1])
  terminalreporter.write_sep("=", "CPU time of %s (s, subprocesses "
                             "included)" % ("the slowest %d tests" % count
                                            if count else "every test"))
  for nodeid, cpu in slowest[:count or None]:
    terminalreporter.write_line("%8.1f  %s" % (cpu, nodeid))
  terminalreporter.write_line("%8.1f  total over %d tests" %
                              (sum(seconds.values()), len(seconds)))


# transformers' TensorFlow classes and `pipeline` set TF_USE_LEGACY_KERAS=1
# in os.environ when imported; a script started by a later test inherits it
# and fails inside TensorFlow. Each test leaves the variable as it found it.
_LEGACY_KERAS = "TF_USE_LEGACY_KERAS"


@pytest.fixture(autouse=True)
def _legacy_keras_variable_kept():
  before = os.environ.get(_LEGACY_KERAS)
  yield
  if before is None:
    os.environ.pop(_LEGACY_KERAS, None)
  else:
    os.environ[_LEGACY_KERAS] = before


@pytest.fixture(scope="session", autouse=True)
def _temporary_files_under_pytests_folder(tmp_path_factory):
  """Temporary files made in this process (Beam's pipelines run in process
  make a `beam-temp*` folder each) go under pytest's own folder, which
  pytest prunes, not into the system's temporary folder."""
  before = tempfile.tempdir
  tempfile.tempdir = str(tmp_path_factory.mktemp("tempfile"))
  yield
  tempfile.tempdir = before
