"""Helpers of the tf.distribute tests (test_distribute*.py).

A script runs in a subprocess through `dumping_command`, whose main is the
script's own with one change: the `train_hooks.ProgressHook` of the
training run dumps, when training ends, every copy (one per replica) of
every global variable to the `.npz` file named by the DUMP_PATH environment
variable. Dropout is
off (`modeling.dropout` keeps everything, the fixed 0.1 of the fine-tuning
heads included), so a run on two replicas can be compared with a run on
one device.
"""

import collections
import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from helpers import data_path
from helpers import REPO_ROOT
from helpers import script_env

# `{script}`: the module of a repo-root script (run_classifier, ...).
_DUMPING_MAIN = textwrap.dedent("""
    import os
    import numpy as np
    import tensorflow.compat.v1 as tf
    import modeling
    from bert_tf.train import hooks as train_hooks
    from bert_tf.cli import entry
    import {script} as script

    class DumpHook(train_hooks.ProgressHook):
      def end(self, session):
        super().end(session)
        path = os.environ["DUMP_PATH"]
        if os.path.exists(path):  # Training's hook comes first; it alone dumps.
          return
        fetches = {{}}
        for v in tf.global_variables():
          copies = getattr(v, "values", None) or (v,)
          for i, copy in enumerate(copies):
            fetches["%s@%d" % (v.name.split(":")[0], i)] = copy
        np.savez(path, **session.run(fetches))  # One run: one executor.

    train_hooks.ProgressHook = DumpHook
    _dropout = modeling.dropout
    modeling.dropout = lambda tensor, prob, seed=None: _dropout(tensor, 0.0)
    script.define_flags()
    entry.run_main(script.main)
    """)


def tiny_checkpoint():
  """Prefix of the tiny conformance model's bert_model.ckpt."""
  return data_path("conformance", "modeling",
                   "bert_model.ckpt.index")[:-len(".index")]


# One CPU replica vs two logical CPU replicas of one machine.
ONE_DEVICE = {}
TWO_CPU_REPLICAS = dict(distribution_strategy="mirrored", num_gpus=0,
                        num_cpu_devices=2)


def env(**extra):
  """The environment of a script run: CPU only, no TF_CONFIG, quiet TF."""
  out = script_env(TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="",
                   PYTHONPATH=REPO_ROOT)
  out.pop("TF_CONFIG", None)
  out.update(extra)
  return out


def flag_args(values):
  """["--name=value", ...] of a dict."""
  return ["--%s=%s" % item for item in values.items()]


def dumping_command(script, args):
  """argv running `script` ("run_classifier.py") with the dumping hook."""
  main = _DUMPING_MAIN.format(script=os.path.splitext(script)[0])
  return [sys.executable, "-c", main] + list(args)


def start(script, args, dump, tf_config=None, log=None):
  """Starts `script` with the dumping hook (dump to `dump`); a Popen."""
  extra = {"DUMP_PATH": dump}
  if tf_config is not None:
    extra["TF_CONFIG"] = json.dumps(tf_config)
  return subprocess.Popen(dumping_command(script, args), cwd=REPO_ROOT,
                          env=env(**extra), stdout=subprocess.DEVNULL,
                          stderr=log or subprocess.PIPE, text=True)


def run_dumping(script, args, dump, timeout=400):
  """Runs `script` to the end; returns its stderr (asserts status 0)."""
  proc = start(script, args, dump)
  _, stderr = proc.communicate(timeout=timeout)
  assert proc.returncode == 0, stderr[-3000:]
  return stderr


def load_dump(path):
  """name -> {replica index: value}, from a dump."""
  data = np.load(path)
  replicas = {}
  for key in data.files:
    name, index = key.rsplit("@", 1)
    replicas.setdefault(name, {})[int(index)] = data[key]
  return replicas


# One run: name -> {replica: value} (`load_dump`), its output_dir, stderr.
Run = collections.namedtuple("Run", ["replicas", "output_dir", "log"])


def run_one_and_two_replicas(tmp_path, script, args_for):
  """Runs `script` on one device, then on two CPU replicas.

  Args:
    tmp_path: the test's folder; runs write to tmp_path/single and
      tmp_path/mirrored.
    script: e.g. "run_classifier.py".
    args_for: function (output_dir, strategy flags dict) -> argv list.

  Returns:
    (single, mirrored): two `Run`s.
  """
  runs = []
  for name, strategy in (("single", ONE_DEVICE),
                         ("mirrored", TWO_CPU_REPLICAS)):
    out = str(tmp_path / name)
    dump = str(tmp_path / (name + ".npz"))
    log = run_dumping(script, args_for(out, strategy), dump)
    runs.append(Run(load_dump(dump), out, log))
  return tuple(runs)


def final_loss(log):
  """The training loss of the last step, from the Estimator's log line."""
  return float(re.findall(r"Loss for final step: (\S+)\.\n", log)[-1])


# The attention key bias adds the same q.b to every score of a query, which
# the softmax ignores: its gradient is zero but for float noise, and where
# the optimizer normalizes the update (LAMB's trust ratio scales it to the
# variable's norm) that noise moves it by 1e-2, differently in each run.
# Its replica copies are still compared.
_NOISE_ONLY = ("attention/self/key/bias",)


def assert_replicas_match(mirrored, single, init_reader, num_replicas=2):
  """Every copy identical, and equal to the one-device run within tolerance.

  Args:
    mirrored: name -> {replica: value} of the run on `num_replicas`.
    single: the same of the one-device run.
    init_reader: a `tf.train.load_checkpoint` reader of the initial
      checkpoint: its variables are compared relative to how far the
      one-device run moved them.

  Returns:
    How many of the checkpoint's variables moved (by more than 1e-4).
  """
  # One device checkpoints the gradient accumulators; under a strategy they
  # are local variables, which are not dumped.
  assert set(mirrored) == {name for name in single
                           if "gradient_accumulat" not in name}
  moved_count = 0
  for name, copies in mirrored.items():
    # The optimizer applies one all-reduced update to every copy.
    assert sorted(copies) == list(range(num_replicas)), name
    for i in range(1, num_replicas):
      np.testing.assert_array_equal(copies[0], copies[i], err_msg=name)
    if name.endswith(_NOISE_ONLY):
      continue
    if init_reader.has_tensor(name) and name != "global_step":
      moved = np.abs(single[name][0] - init_reader.get_tensor(name)).max()
      error = np.abs(copies[0] - single[name][0]).max()
      moved_count += moved > 1e-4
      # Two half-batch gradients averaged vs one full batch: float32 sums
      # in another order.
      assert error <= max(2e-3 * moved, 1e-5), (name, error, moved)
    else:
      np.testing.assert_allclose(copies[0], single[name][0], rtol=1e-3,
                                 atol=1e-6, err_msg=name)
  return moved_count


def assert_matches_one_device(single, mirrored, init_reader, steps):
  """A two-replica run against the one-device run of the same command.

  Both ended at global step `steps`; every copy is identical and within
  tolerance of the one-device run (`assert_replicas_match`); more than 20
  variables trained; and the logged final loss (the mean over replicas) is
  within 1e-3 of the one-device loss.
  """
  assert single.replicas["global_step"][0] == steps
  assert mirrored.replicas["global_step"][0] == steps
  trained = assert_replicas_match(mirrored.replicas, single.replicas,
                                  init_reader)
  assert trained > 20  # The runs did train.
  assert final_loss(mirrored.log) == pytest.approx(final_loss(single.log),
                                                   rel=1e-3)


def read_eval_results(output_dir):
  """output_dir/eval_results.txt as {key: float}."""
  with open(os.path.join(output_dir, "eval_results.txt")) as f:
    return {k: float(v) for k, v in
            (line.split(" = ") for line in f.read().splitlines())}


def assert_eval_results_match(output_dir, expected_dir, rel=1e-3):
  """eval_results.txt of two runs: the same keys, values within `rel`.

  Returns the first run's results.
  """
  got, want = (read_eval_results(output_dir),
               read_eval_results(expected_dir))
  assert sorted(got) == sorted(want)
  for key, value in want.items():
    assert got[key] == pytest.approx(value, rel=rel), key
  return got


def run_plain(script, args, tf_config=None, timeout=300):
  """Runs `script` as it is (no dumping); the CompletedProcess."""
  extra = {} if tf_config is None else {"TF_CONFIG": tf_config}
  return subprocess.run([sys.executable, os.path.join(REPO_ROOT, script)] +
                        list(args), cwd=REPO_ROOT, env=env(**extra),
                        capture_output=True, text=True, timeout=timeout)


def assert_one_line_error(proc, expected):
  """Status 1 and `expected` as the last stderr line, without a traceback."""
  assert proc.returncode == 1, proc.stderr[-3000:]
  assert "Traceback" not in proc.stderr
  assert proc.stderr.strip().splitlines()[-1] == expected


# ---------------------------------------------------------------------------
# Workers over loopback.
# ---------------------------------------------------------------------------


def free_port():
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def cluster(num_workers=2):
  """["127.0.0.1:PORT", ...], ports free now."""
  return ["127.0.0.1:%d" % free_port() for _ in range(num_workers)]


def worker_config(addresses, index):
  return {"cluster": {"worker": addresses},
          "task": {"type": "worker", "index": index}}


def run_workers(tmp_path, tag, script, args, addresses, kill_at=None,
                kill=None, timeout=400):
  """Runs one worker per address until all have exited.

  Once `kill_at()` is true, SIGKILLs the workers whose indices are in `kill`
  (all when None) and waits for the others.

  Worker i logs to tmp_path/TAG_i.log (see `read_log`) and dumps to
  tmp_path/TAG_i.npz. Returns the exit statuses.
  """
  procs, logs = [], []
  for index in range(len(addresses)):
    log = open(str(tmp_path / ("%s_%d.log" % (tag, index))), "w")
    logs.append(log)
    procs.append(start(script, args,
                       str(tmp_path / ("%s_%d.npz" % (tag, index))),
                       worker_config(addresses, index), log=log))
  deadline = time.time() + timeout
  try:
    while any(p.poll() is None for p in procs):
      if time.time() > deadline:
        raise AssertionError("workers still running after %ds" % timeout)
      if kill_at and kill_at():
        kill_at = None
        for index in (range(len(procs)) if kill is None else kill):
          procs[index].send_signal(signal.SIGKILL)
          procs[index].wait()
      time.sleep(0.1)
  finally:
    for p in procs:
      if p.poll() is None:
        p.kill()
        p.wait()
    for log in logs:
      log.close()
  return [p.returncode for p in procs]


def assert_workers_match_the_chiefs_checkpoint(tmp_path, tag, output_dir,
                                              step):
  """Both workers' dumps bit-identical, and equal to the chief's last one.

  Args:
    tmp_path, tag: as given to `run_workers` (dumps at tmp_path/TAG_i.npz).
    output_dir: the shared --output_dir, whose latest checkpoint must be
      model.ckpt-`step`.
    step: int, the global step both workers ended at.

  Returns:
    (dumps, compared): the two dumps (`load_dump`), and how many variables
    were compared with the checkpoint.
  """
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  dumps = [load_dump(str(tmp_path / ("%s_%d.npz" % (tag, i))))
           for i in range(2)]
  latest = tf.train.latest_checkpoint(output_dir)
  assert latest.endswith("model.ckpt-%d" % step), latest
  checkpoint = tf.train.load_checkpoint(latest)
  assert dumps[0]["global_step"][0] == step
  assert set(dumps[0]) == set(dumps[1])
  compared = 0
  for name, copies in dumps[0].items():
    np.testing.assert_array_equal(copies[0], dumps[1][name][0], err_msg=name)
    if checkpoint.has_tensor(name):
      np.testing.assert_array_equal(copies[0], checkpoint.get_tensor(name),
                                    err_msg=name)
      compared += 1
  return dumps, compared


def read_log(tmp_path, tag, index):
  with open(str(tmp_path / ("%s_%d.log" % (tag, index)))) as f:
    return f.read()
