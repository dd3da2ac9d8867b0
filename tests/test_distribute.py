"""Data-parallel training on tf.distribute (issue #14), on CPU replicas.

(a) two logical CPU replicas vs one device through run_pretraining.py;
(b) two worker processes over loopback (TF_CONFIG on 127.0.0.1), a kill and
a resume; (c) bad input, each a one-line error.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

from absl import flags
import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from conftest import REPO_ROOT
from conftest import shared_path
import distribute_utils
import startup
from test_run_pretraining import _write_records

_SEQ, _PREDS = 16, 4

# run_pretraining's main with a hook that dumps, at the end of training,
# every copy (one per replica) of every global variable.
_DUMPING_MAIN = textwrap.dedent("""
    import os, sys
    import numpy as np
    import tensorflow.compat.v1 as tf
    import estimator_utils, run_pretraining, startup

    class DumpHook(estimator_utils.ProgressHook):
      def end(self, session):
        out = {}
        for v in tf.global_variables():
          copies = getattr(v, "values", None) or (v,)
          for i, copy in enumerate(copies):
            out["%s@%d" % (v.name.split(":")[0], i)] = session.run(copy)
        np.savez(os.environ["DUMP_PATH"], **out)

    estimator_utils.ProgressHook = DumpHook
    run_pretraining.define_flags()
    startup.run_main(run_pretraining.main)
    """)


def _free_port():
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _env(**extra):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="",
             PYTHONPATH=REPO_ROOT)
  env.pop("BERT_DEBUG", None)
  env.pop("TF_CONFIG", None)
  env.update(extra)
  return env


def _setup(tmp_path):
  """Records and a dropout-free copy of the tiny conformance config."""
  data = _write_records(str(tmp_path / "data.tfrecord"), 16)
  with open(shared_path("conformance", "modeling", "bert_config.json")) as f:
    config = json.load(f)
  config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
  config_path = str(tmp_path / "bert_config.json")
  with open(config_path, "w") as f:
    json.dump(config, f)
  return data, config_path


def _args(data, config, output_dir, **overrides):
  values = dict(
      bert_config_file=config, input_file=data, output_dir=output_dir,
      init_checkpoint=shared_path("conformance", "modeling",
                                  "bert_model.ckpt.index")[:-len(".index")],
      max_seq_length=_SEQ, max_predictions_per_seq=_PREDS,
      train_batch_size=4, eval_batch_size=4, learning_rate=0.05,
      num_warmup_steps=0, save_checkpoints_steps=2, num_train_steps=3,
      do_train=True, max_eval_steps=3, random_seed=1)
  values.update(overrides)
  return ["--%s=%s" % item for item in values.items()]


def _start(args, dump, tf_config=None, log=None):
  env = _env(DUMP_PATH=dump)
  if tf_config is not None:
    env["TF_CONFIG"] = json.dumps(tf_config)
  return subprocess.Popen([sys.executable, "-c", _DUMPING_MAIN] + args,
                          cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL,
                          stderr=log or subprocess.PIPE, text=True)


def _load(path):
  data = np.load(path)
  return {k: data[k] for k in data.files}


def _replicas(dump):
  """name -> {replica index: value}."""
  out = {}
  for key, value in dump.items():
    name, index = key.rsplit("@", 1)
    out.setdefault(name, {})[int(index)] = value
  return out


def _eval_results(output_dir):
  with open(os.path.join(output_dir, "eval_results.txt")) as f:
    return {k: float(v) for k, v in
            (line.split(" = ") for line in f.read().splitlines())}


# ---------------------------------------------------------------------------
# (a) Two CPU replicas vs one device, through run_pretraining.py.
# ---------------------------------------------------------------------------


@pytest.mark.slow
def test_two_cpu_replicas_match_one_device_through_run_pretraining(tmp_path):
  data, config = _setup(tmp_path)
  runs = {}
  for name, extra in (("single", {}),
                      ("mirrored", dict(distribution_strategy="mirrored",
                                        num_gpus=0, num_cpu_devices=2))):
    out = str(tmp_path / name)
    dump = str(tmp_path / (name + ".npz"))
    proc = _start(_args(data, config, out, do_eval=True, **extra), dump)
    _, stderr = proc.communicate(timeout=400)
    assert proc.returncode == 0, stderr[-3000:]
    runs[name] = (_replicas(_load(dump)), _eval_results(out))
  single, single_eval = runs["single"]
  mirrored, mirrored_eval = runs["mirrored"]
  reader = tf.train.load_checkpoint(
      shared_path("conformance", "modeling", "bert_model.ckpt.index")[:-6])
  assert set(mirrored) == set(single)
  assert single["global_step"][0] == 3 and mirrored["global_step"][0] == 3
  trained = 0
  for name, copies in mirrored.items():
    # Every variable lives on both replicas, and the copies are identical:
    # the optimizer applies one all-reduced update to each.
    assert sorted(copies) == [0, 1], name
    np.testing.assert_array_equal(copies[0], copies[1], err_msg=name)
    if name.startswith(("bert/", "cls/")) and reader.has_tensor(name):
      init = reader.get_tensor(name)
      moved = np.abs(single[name][0] - init).max()
      error = np.abs(copies[0] - single[name][0]).max()
      trained += moved > 1e-4
      # Two half-batch gradients averaged vs one full batch: float32 sums
      # in another order.
      # (The key biases get a zero gradient and barely move.)
      assert error <= max(2e-3 * moved, 1e-5), (name, error, moved)
    else:
      np.testing.assert_allclose(copies[0], single[name][0], rtol=1e-3,
                                 atol=1e-6, err_msg=name)
  assert trained > 20  # The runs did train.
  assert set(mirrored_eval) == set(single_eval)
  for key, value in single_eval.items():
    assert mirrored_eval[key] == pytest.approx(value, rel=1e-3), key


# ---------------------------------------------------------------------------
# (b) Two workers over loopback.
# ---------------------------------------------------------------------------


def _cluster():
  return ["127.0.0.1:%d" % _free_port() for _ in range(2)]


def _worker_config(addresses, index):
  return {"cluster": {"worker": addresses},
          "task": {"type": "worker", "index": index}}


def _run_workers(tmp_path, tag, args, addresses, kill_chief_at=None,
                 timeout=400):
  """Runs both workers; with `kill_chief_at`, kills both at that checkpoint."""
  procs, logs = [], []
  for index in range(2):
    log = open(str(tmp_path / ("%s_%d.log" % (tag, index))), "w")
    logs.append(log)
    procs.append(_start(args, str(tmp_path / ("%s_%d.npz" % (tag, index))),
                        _worker_config(addresses, index), log=log))
  deadline = time.time() + timeout
  try:
    while any(p.poll() is None for p in procs):
      if time.time() > deadline:
        raise AssertionError("workers still running after %ds" % timeout)
      if kill_chief_at and os.path.exists(kill_chief_at):
        procs[0].send_signal(signal.SIGKILL)
        procs[0].wait()
        # The other worker now waits on a dead peer; it is killed too (as a
        # cluster manager would restart the job).
        procs[1].send_signal(signal.SIGKILL)
        procs[1].wait()
        break
      time.sleep(0.5)
  finally:
    for p in procs:
      if p.poll() is None:
        p.kill()
        p.wait()
    for log in logs:
      log.close()
  return [p.returncode for p in procs]


def _log(tmp_path, tag, index):
  with open(str(tmp_path / ("%s_%d.log" % (tag, index)))) as f:
    return f.read()


@pytest.mark.slow
def test_two_workers_over_loopback_train_identically_and_resume(tmp_path):
  data, config = _setup(tmp_path)
  out = str(tmp_path / "out")
  args = _args(data, config, out, num_train_steps=6,
               distribution_strategy="multi_worker_mirrored", num_gpus=0,
               worker_timeout_secs=120)
  # First run: killed (SIGKILL, both workers) once checkpoint 2 exists.
  codes = _run_workers(tmp_path, "first", args, _cluster(),
                       kill_chief_at=os.path.join(out, "model.ckpt-2.index"))
  assert codes[0] == -signal.SIGKILL, _log(tmp_path, "first", 0)[-3000:]
  assert tf.train.latest_checkpoint(out) is not None
  # Same commands again (new ports: the old ones may linger): resumes.
  codes = _run_workers(tmp_path, "second", args, _cluster())
  logs = [_log(tmp_path, "second", i) for i in range(2)]
  assert codes == [0, 0], logs[0][-3000:] + logs[1][-3000:]
  assert "Restoring parameters from %s/model.ckpt-" % out in logs[0]
  assert "Restoring parameters from %s/model.ckpt-0" % out not in logs[0]
  assert tf.train.latest_checkpoint(out).endswith("model.ckpt-6")
  # One checkpoint series, the chief's; the other worker writes none there.
  worker_files = [f for f in os.listdir(out) if f.startswith("model.ckpt")]
  assert all(f.startswith(("model.ckpt-2", "model.ckpt-4", "model.ckpt-6",
                           "model.ckpt-0")) for f in worker_files)
  dumps = [_replicas(_load(str(tmp_path / ("second_%d.npz" % i))))
           for i in range(2)]
  assert set(dumps[0]) == set(dumps[1])
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(out))
  for name, copies in dumps[0].items():
    np.testing.assert_array_equal(copies[0], dumps[1][name][0], err_msg=name)
    if reader.has_tensor(name):
      np.testing.assert_array_equal(copies[0], reader.get_tensor(name),
                                    err_msg=name)
  assert dumps[0]["global_step"][0] == 6


# ---------------------------------------------------------------------------
# (c) Bad input: one-line errors.
# ---------------------------------------------------------------------------


def _flag_values(**values):
  fv = flags.FlagValues()
  for name in startup.DISTRIBUTE_FLAGS + ("use_tpu",):
    define, default, help_text = startup.SHARED_FLAGS[name]
    define(name, default, help_text, flag_values=fv)
  fv(["prog"] + ["--%s=%s" % item for item in values.items()])
  return fv


def test_more_gpus_than_present_is_refused():
  fv = _flag_values(distribution_strategy="mirrored", num_gpus=4)
  with pytest.raises(ValueError, match=r"^--num_gpus=4 but 0 GPUs are "
                     r"visible[^\n]*$"):
    distribute_utils._check_flags(fv, 0)  # pylint: disable=protected-access


def test_num_gpus_with_use_tpu_is_refused():
  fv = _flag_values(use_tpu=True, num_gpus=2)
  with pytest.raises(ValueError, match=r"--use_tpu .* --num_gpus"):
    distribute_utils._check_flags(fv, 8)  # pylint: disable=protected-access
  fv = _flag_values(use_tpu=True, distribution_strategy="mirrored")
  with pytest.raises(ValueError, match=r"distribution_strategy=mirrored"):
    distribute_utils._check_flags(fv, 0)  # pylint: disable=protected-access
  # The defaults pass with --use_tpu (the TPU path is unchanged).
  distribute_utils._check_flags(_flag_values(use_tpu=True), 0)  # pylint: disable=protected-access


def test_unknown_strategy_is_refused():
  fv = _flag_values(distribution_strategy="parameter_server")
  with pytest.raises(ValueError, match="expected one of none, mirrored"):
    distribute_utils._check_flags(fv, 0)  # pylint: disable=protected-access


def test_global_batch_not_divisible_by_replicas_is_refused():
  assert distribute_utils.check_global_batch(8, 2, "train_batch_size") == 4
  with pytest.raises(ValueError, match=r"^--train_batch_size=5 is the global "
                     r"batch .* multiple of the 2 replicas$"):
    distribute_utils.check_global_batch(5, 2, "train_batch_size")
  with pytest.raises(ValueError, match="multiple of the 4 replicas"):
    distribute_utils.check_global_batch(2, 4, "train_batch_size")


@pytest.mark.parametrize("text,key", [
    ("", "TF_CONFIG is not set"),
    ("{not json", "not valid JSON"),
    ('{"task": {"type": "worker", "index": 0}}', "key 'cluster'"),
    ('{"cluster": {"worker": ["a:1"]}}', "key 'task'"),
    ('{"cluster": {"worker": "a:1"}, "task": {"type": "worker", "index": 0}}',
     "cluster.worker"),
    ('{"cluster": {"worker": ["nohost"]}, "task": {"type": "worker", '
     '"index": 0}}', r"cluster.worker\[0\]='nohost'"),
    ('{"cluster": {"ps": ["a:1"]}, "task": {"type": "ps", "index": 0}}',
     "cluster.ps"),
    ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "chief", '
     '"index": 0}}', "task.type='chief'"),
    ('{"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", '
     '"index": 2}}', "task.index=2"),
])
def test_malformed_tf_config_names_the_key(text, key):
  with pytest.raises(ValueError, match=key) as info:
    distribute_utils.parse_tf_config(text)
  assert "\n" not in str(info.value)


def test_chief_is_the_chief_task_or_worker_0(monkeypatch):
  monkeypatch.delenv("TF_CONFIG", raising=False)
  assert distribute_utils.is_chief()
  for cluster, task, chief in [
      ({"worker": ["a:1", "b:1"]}, ("worker", 0), True),
      ({"worker": ["a:1", "b:1"]}, ("worker", 1), False),
      ({"chief": ["c:1"], "worker": ["a:1"]}, ("worker", 0), False),
      ({"chief": ["c:1"], "worker": ["a:1"]}, ("chief", 0), True)]:
    monkeypatch.setenv("TF_CONFIG", json.dumps(
        {"cluster": cluster, "task": {"type": task[0], "index": task[1]}}))
    assert distribute_utils.is_chief() == chief, (cluster, task)


def _run_script(args, tf_config, timeout=300):
  env = _env()
  if tf_config is not None:
    env["TF_CONFIG"] = tf_config
  return subprocess.run(
      [sys.executable, os.path.join(REPO_ROOT, "run_pretraining.py")] + args,
      cwd=REPO_ROOT, env=env, capture_output=True, text=True,
      timeout=timeout)


@pytest.mark.slow
def test_script_errors_are_one_line(tmp_path):
  data, config = _setup(tmp_path)
  # Malformed TF_CONFIG, before any work.
  result = _run_script(
      _args(data, config, str(tmp_path / "a"),
            distribution_strategy="multi_worker_mirrored", num_gpus=0),
      '{"cluster": {"worker": ["127.0.0.1:1"]}, "task": {"index": 0}}')
  assert result.returncode == 1
  assert result.stderr.strip().splitlines()[-1] == (
      "error: TF_CONFIG: task.type=None is not a job of cluster (worker)")
  # Global batch 5 on two CPU replicas.
  result = _run_script(
      _args(data, config, str(tmp_path / "b"), train_batch_size=5,
            distribution_strategy="mirrored", num_gpus=0, num_cpu_devices=2),
      None)
  assert result.returncode == 1
  assert result.stderr.strip().splitlines()[-1] == (
      "error: --train_batch_size=5 is the global batch (all replicas "
      "together) and must be a multiple of the 2 replicas")
  # More GPUs than this (GPU-less) machine has.
  result = _run_script(
      _args(data, config, str(tmp_path / "c"),
            distribution_strategy="mirrored", num_gpus=2), None)
  assert result.returncode == 1
  assert result.stderr.strip().splitlines()[-1].startswith(
      "error: --num_gpus=2 but 0 GPUs are visible")


@pytest.mark.slow
def test_unreachable_worker_fails_within_the_timeout_naming_it(tmp_path):
  data, config = _setup(tmp_path)
  addresses = _cluster()  # Nobody listens on worker 1's port.
  start = time.time()
  result = _run_script(
      _args(data, config, str(tmp_path / "out"),
            distribution_strategy="multi_worker_mirrored", num_gpus=0,
            worker_timeout_secs=5),
      json.dumps(_worker_config(addresses, 0)), timeout=200)
  assert result.returncode == 1, result.stderr[-3000:]
  last = result.stderr.strip().splitlines()[-1]
  assert last.startswith("error: --distribution_strategy=multi_worker_mirrored"
                         ": worker %s (TF_CONFIG cluster.worker[1]) not "
                         "reachable within 5s" % addresses[1]), last
  assert time.time() - start < 200


@pytest.mark.slow
def test_two_workers_accumulate_gradients_and_stay_identical(tmp_path):
  # Accumulation under multi_worker_mirrored: each worker sums its own
  # micro-batch gradients and the sums are all-reduced once per update,
  # inside the update branch that every worker takes together.
  data, config = _setup(tmp_path)
  out = str(tmp_path / "out")
  args = _args(data, config, out, num_train_steps=2,
               gradient_accumulation_steps=2,
               distribution_strategy="multi_worker_mirrored", num_gpus=0,
               worker_timeout_secs=120)
  codes = _run_workers(tmp_path, "acc", args, _cluster())
  logs = [_log(tmp_path, "acc", i) for i in range(2)]
  assert codes == [0, 0], logs[0][-3000:] + logs[1][-3000:]
  dumps = [_replicas(_load(str(tmp_path / ("acc_%d.npz" % i))))
           for i in range(2)]
  assert set(dumps[0]) == set(dumps[1])
  assert not any("gradient_accumulat" in name for name in dumps[0])
  assert dumps[0]["global_step"][0] == 2  # 2 updates of 2 micro-batches.
  init = tf.train.load_checkpoint(
      shared_path("conformance", "modeling", "bert_model.ckpt.index")[:-6])
  final = tf.train.load_checkpoint(tf.train.latest_checkpoint(out))
  moved = 0
  for name, copies in dumps[0].items():
    np.testing.assert_array_equal(copies[0], dumps[1][name][0], err_msg=name)
    if final.has_tensor(name):
      np.testing.assert_array_equal(copies[0], final.get_tensor(name),
                                    err_msg=name)
    if name.startswith("bert/") and init.has_tensor(name):
      moved += np.abs(copies[0] - init.get_tensor(name)).max() > 1e-4
  assert moved > 20  # The updates were applied.
