"""A multi-worker task ended by a lost peer removes its temporary folder.

The watchdog ends the process with `os._exit` (TensorFlow may hold the
interpreter), which skips the `atexit` clean-up of the command's own
temporary folder (`bert_tf.cli.leftovers`); it removes the folder itself.
"""

import os
import subprocess
import sys

from helpers import REPO_ROOT

_LOSING_A_PEER = """
import json, os, socket, sys, time
from bert_tf.cli import leftovers
own = leftovers.use_own_temp_dir()
open(os.path.join(own, "__autograph_generated_file1.py"), "w").close()
peer = socket.socket()
peer.bind(("127.0.0.1", 0))
peer.listen(64)
os.environ["TF_CONFIG"] = json.dumps({
    "cluster": {"worker": ["127.0.0.1:%d" % peer.getsockname()[1],
                           "127.0.0.1:1"]},
    "task": {"type": "worker", "index": 1}})
from bert_tf.train import distribute
distribute.start_peer_watchdog(1, poll_secs=0.2)
time.sleep(1)
peer.close()  # The peer is gone.
time.sleep(30)
"""


def test_a_task_ended_by_a_lost_peer_removes_its_temporary_folder(tmp_path):
  system = tmp_path / "system"
  system.mkdir()
  result = subprocess.run(
      [sys.executable, "-c", _LOSING_A_PEER], cwd=REPO_ROOT,
      capture_output=True, text=True, timeout=120,
      env=dict(os.environ, CUDA_VISIBLE_DEVICES="", TF_CPP_MIN_LOG_LEVEL="3",
               TMPDIR=str(system)))
  assert result.returncode == 1, result.stderr
  assert "stopped answering" in result.stderr.strip().splitlines()[-1]
  assert os.listdir(str(system)) == []
