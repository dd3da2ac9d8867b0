"""Issue #34: what a killed run leaves outside its output folder.

A command's temporary files (autograph's generated modules, Beam's
folders) go to a folder the run owns, removed at exit or, after SIGKILL,
at the next start; `create_pretraining_data.py --num_workers` workers end
without tracebacks on Ctrl-C and end with their parent.
"""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from bert_tf.cli import leftovers
from bert_tf.tasks.pretraining import processes
from helpers import REPO_ROOT


def _python(code, tmp_path, **env):
  """Runs `code` in a fresh Python whose system temp folder is
  `tmp_path/system`; returns the CompletedProcess."""
  system = tmp_path / "system"
  system.mkdir(exist_ok=True)
  # A file, not -c: autograph converts only code whose source it can read.
  script = tmp_path / "script.py"
  script.write_text(textwrap.dedent(code))
  return subprocess.run(
      [sys.executable, str(script)], cwd=REPO_ROOT,
      env=dict(os.environ, TMPDIR=str(system), CUDA_VISIBLE_DEVICES="",
               PYTHONPATH=REPO_ROOT,
               TF_CPP_MIN_LOG_LEVEL="3", **env),
      capture_output=True, text=True, timeout=300)


def test_autograph_files_of_a_killed_run_are_removed_at_the_next_start(
    tmp_path):
  killed = _python("""
      import os, tempfile
      from bert_tf.cli import leftovers
      own = leftovers.use_own_temp_dir()
      import tensorflow as tf
      @tf.function
      def f(x):
        if x > 0:
          return x
        return -x
      f(tf.constant(1))
      print(own, sorted(os.listdir(own)), flush=True)
      os.kill(os.getpid(), 9)
      """, tmp_path)
  assert killed.returncode == -9, killed.stderr
  system = tmp_path / "system"
  left = os.listdir(str(system))
  assert len(left) == 1 and left[0].startswith(leftovers.PREFIX), left
  assert any(name.startswith("__autograph_generated_file")
             for name in os.listdir(str(system / left[0]))), killed.stdout
  clean = _python("""
      from bert_tf.cli import leftovers
      leftovers.use_own_temp_dir()
      """, tmp_path)
  assert clean.returncode == 0, clean.stderr
  assert os.listdir(str(system)) == []


def test_temp_folder_of_a_live_process_is_kept(tmp_path):
  live = tmp_path / ("%shost.%d.abc" % (leftovers.PREFIX, os.getppid()))
  dead = tmp_path / ("%s%s.999999999.abc" % (leftovers.PREFIX,
                                            os.uname().nodename))
  live.mkdir()
  dead.mkdir()
  assert leftovers.remove_dead_temp_dirs(str(tmp_path)) == [str(dead)]
  assert live.exists()


def _interrupted(*_):
  raise KeyboardInterrupt


def test_ctrl_c_in_a_worker_is_no_traceback(capfd):
  with pytest.raises(KeyboardInterrupt):
    processes._run_processes(_interrupted, [(0,), (1,)])  # pylint: disable=protected-access
  assert "Traceback" not in capfd.readouterr().err


_SLEEPING_PARENT = """
    import os, sys, time
    from bert_tf.tasks.pretraining import processes

    def sleep(k, folder):
      open(os.path.join(folder, "worker-%d" % os.getpid()), "w").close()
      time.sleep(120)
      return {}

    processes._run_processes(sleep, [(0, sys.argv[1]), (1, sys.argv[1])])
    """


def _worker_pids(folder, timeout=120):
  deadline = time.time() + timeout
  while time.time() < deadline:
    names = [n for n in os.listdir(folder) if n.startswith("worker-")]
    if len(names) == 2:
      return [int(n.split("-")[1]) for n in names]
    time.sleep(0.2)
  raise AssertionError("the workers did not start")


def _gone(pid, timeout=20):
  deadline = time.time() + timeout
  while time.time() < deadline:
    try:
      os.kill(pid, 0)
    except ProcessLookupError:
      return True
    # A zombie of an ended worker still answers; its state says so.
    try:
      with open("/proc/%d/stat" % pid) as f:
        if f.read().split(")")[-1].split()[0] == "Z":
          return True
    except OSError:
      return True
    time.sleep(0.2)
  return False


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT])
def test_workers_end_when_the_parent_is_killed_or_interrupted(tmp_path, how):
  parent = subprocess.Popen(
      [sys.executable, "-c", textwrap.dedent(_SLEEPING_PARENT),
       str(tmp_path)], cwd=REPO_ROOT, stderr=subprocess.PIPE, text=True,
      env=dict(os.environ, CUDA_VISIBLE_DEVICES="",
               TF_CPP_MIN_LOG_LEVEL="3"))
  try:
    pids = _worker_pids(str(tmp_path))
    os.kill(parent.pid, how)
    parent.wait(timeout=60)
    for pid in pids:
      assert _gone(pid), "worker %d still runs" % pid
  finally:
    if parent.poll() is None:
      parent.kill()
      parent.wait()
