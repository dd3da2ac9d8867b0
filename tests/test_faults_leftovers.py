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

from bert_tf.checks import lock as lock_checks
from bert_tf.cli import leftovers
from bert_tf.tasks.pretraining import processes
from bert_tf.train import checkpoints
import fault_helpers as fh
from helpers import import_or_skip
from helpers import REPO_ROOT


def _python(code, tmp_path, args=(), **env):
  """Runs `code` in a fresh Python whose system temp folder is
  `tmp_path/system`; returns the CompletedProcess."""
  system = tmp_path / "system"
  system.mkdir(exist_ok=True)
  # A file, not -c: autograph converts only code whose source it can read.
  script = tmp_path / "script.py"
  script.write_text(textwrap.dedent(code))
  return subprocess.run(
      [sys.executable, str(script)] + list(args), cwd=REPO_ROOT,
      env=dict(os.environ, TMPDIR=str(system), CUDA_VISIBLE_DEVICES="",
               PYTHONPATH=REPO_ROOT,
               TF_CPP_MIN_LOG_LEVEL="3", **env),
      capture_output=True, text=True, timeout=300)


@pytest.mark.slow
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
    processes._run_processes(_interrupted, [((0,), {}), ((1,), {})])  # pylint: disable=protected-access
  assert "Traceback" not in capfd.readouterr().err


_SLEEPING_PARENT = """
    import os, sys, time
    from bert_tf.tasks.pretraining import processes

    def sleep(k, folder):
      open(os.path.join(folder, "worker-%d" % os.getpid()), "w").close()
      time.sleep(120)
      return {}

    processes._run_processes(sleep, [((0, sys.argv[1]), {}), ((1, sys.argv[1]), {})])
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


@pytest.mark.slow
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT])
def test_workers_end_when_the_parent_is_killed_or_interrupted(tmp_path, how):
  parent = subprocess.Popen(
      [sys.executable, "-c", textwrap.dedent(_SLEEPING_PARENT),
       str(tmp_path)], cwd=REPO_ROOT, stderr=subprocess.PIPE, text=True,
      env=dict(os.environ, CUDA_VISIBLE_DEVICES="",
               TF_CPP_MIN_LOG_LEVEL="3"),
      # As from a terminal: a test run started in the background (nohup,
      # `&`) hands its children SIGINT ignored, and Ctrl-C would do nothing.
      preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
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


# ---------------------------------------------------------------------------
# The output folder: its lock, cut saves, SIGTERM outside training.


def test_lock_that_is_a_symlink_is_refused_and_its_target_kept(tmp_path):
  victim = tmp_path / "victim.txt"
  victim.write_text("keep me")
  output_dir = tmp_path / "out"
  output_dir.mkdir()
  os.symlink(str(victim), str(output_dir / ".lock"))
  with pytest.raises(ValueError, match=r"\.lock is a symbolic link"):
    lock_checks.lock_output_dir(str(output_dir))
  assert victim.read_text() == "keep me"


def test_checkpoint_writes_cut_by_a_full_disk_are_removed_at_start(tmp_path):
  output_dir = tmp_path / "out"
  output_dir.mkdir()
  cut = ["model.ckpt-5.meta.tmp" + "0a" * 16, "checkpoint.tmp" + "f" * 32,
         "model.ckpt-5.index.tempstate123456"]
  kept = ["model.ckpt-5.meta", "notes.tmp0a0a0a0a", "model.ckpt-5.txt"]
  for name in cut + kept:
    (output_dir / name).write_bytes(b"x")
  held = checkpoints.start_training(str(output_dir))
  try:
    assert sorted(n for n in os.listdir(str(output_dir))
                  if not n.startswith(".")) == sorted(kept)
  finally:
    if held is not None:
      held.release()


@pytest.mark.slow
def test_sigterm_outside_training_keeps_no_partial_output(tmp_path):
  result = _python("""
      import os, signal, sys, time
      from bert_tf import io as io_utils
      from bert_tf.cli import entry

      def main(_):
        with io_utils.atomic_write(os.path.join(sys.argv[1], "out.txt")) as f:
          f.write("partial")
          f.flush()
          os.kill(os.getpid(), signal.SIGTERM)
          time.sleep(60)

      entry.run_main(main)
      """, tmp_path, args=[str(tmp_path / "data")])
  assert result.returncode == 143, result.stderr
  assert result.stderr.strip().splitlines()[-1] == (
      "error: terminated (SIGTERM); no partial output was kept")
  assert os.listdir(str(tmp_path / "data")) == []
  assert os.listdir(str(tmp_path / "system")) == []


@pytest.mark.slow
def test_beam_folders_of_a_killed_num_shards_run_are_removed_at_next_start(
    tmp_path):
  import_or_skip("apache_beam", "pip install .[beam]")
  system = tmp_path / "system"
  system.mkdir()
  env = dict(TMPDIR=str(system))
  args = fh.flags(input_file=os.path.join(REPO_ROOT, "sample_data",
                                          "pretrain_corpus.txt"),
                  output_file=tmp_path / "out.tfrecord",
                  vocab_file=fh.tiny("vocab.txt"), max_seq_length=32,
                  max_predictions_per_seq=4, dupe_factor=5, num_shards=2)
  proc = fh.start("create_pretraining_data.py", args, **env)
  try:
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None:
      if any(name.startswith("beam-")
             for folder in system.iterdir() for name in os.listdir(folder)):
        break
      time.sleep(0.2)
    else:
      raise AssertionError("the pipeline made no temporary folder")
  finally:
    proc.kill()
    proc.wait()
  assert all(p.name.startswith(leftovers.PREFIX) for p in system.iterdir())
  result = fh.run("create_pretraining_data.py", fh.flags(
      input_file=tmp_path / "missing.txt", output_file=tmp_path / "o",
      vocab_file=fh.tiny("vocab.txt")), **env)
  assert result.returncode == 1, result.stderr
  assert list(system.iterdir()) == []
  assert not [n for n in os.listdir(str(tmp_path)) if ".tmp-" in n]
