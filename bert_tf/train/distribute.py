"""Data-parallel training on `tf.distribute`, one machine or several.

`MirroredStrategy` (GPUs or logical CPUs of one machine) or
`MultiWorkerMirroredStrategy` (machines of `TF_CONFIG`) in either runner;
TPUs keep the `TPUEstimator`. Batch sizes stay global, as on TPU: each
replica reads `params["batch_size"]`, the global size over the replicas.
"""

import logging as std_logging
import os
import socket
import sys
import threading
import time

from absl import logging
import tensorflow as tf2
import tensorflow.compat.v1 as tf

from bert_tf import io as io_utils
from bert_tf import json_file
from bert_tf.train import choices

__all__ = ["STRATEGIES", "parse_tf_config", "is_chief", "peer_addresses",
           "check_global_batch", "check_options", "setup", "session_config",
           "make_strategy", "start_peer_watchdog", "input_shard",
           "tf_config", "own_address", "explain_server_error",
           "batch_sizes"]

# --distribution_strategy's values.
STRATEGIES = choices.STRATEGIES


# ----------------------------------------------------------------------------
# Checks
# ----------------------------------------------------------------------------


def parse_tf_config(text):
  """The parsed `TF_CONFIG` JSON, checked: `{"cluster": {"worker": [...],
  ("chief": [...])}, "task": {"type": ..., "index": ...}}`.

  Raises:
    ValueError: naming the key at fault (`TF_CONFIG: task.index ...`).
  """
  if not text:
    raise ValueError("TF_CONFIG is not set: --distribution_strategy="
                     "multi_worker_mirrored needs it to name the cluster and "
                     "this task (see docs/scale.md)")
  config = json_file.loads(text, "TF_CONFIG")
  if not isinstance(config, dict):
    raise ValueError("TF_CONFIG: expected a JSON object with keys 'cluster' "
                     "and 'task'")
  cluster = config.get("cluster")
  if not isinstance(cluster, dict) or not cluster:
    raise ValueError("TF_CONFIG: key 'cluster' missing or empty; expected "
                     "{\"worker\": [\"host:port\", ...]}")
  for job, addresses in cluster.items():
    if job not in ("chief", "worker"):
      raise ValueError("TF_CONFIG: cluster.%s: only 'chief' and 'worker' "
                       "jobs are supported" % job)
    if not isinstance(addresses, list) or not addresses:
      raise ValueError("TF_CONFIG: cluster.%s: expected a non-empty list of "
                       "\"host:port\" strings" % job)
    for i, address in enumerate(addresses):
      host, _, port = str(address).rpartition(":")
      if (not isinstance(address, str) or not host or not port.isdigit() or
          not 0 < int(port) < 65536):
        raise ValueError("TF_CONFIG: cluster.%s[%d]=%r: expected "
                         "\"host:port\"" % (job, i, address))
  seen = {}
  for job in sorted(cluster):
    for i, address in enumerate(cluster[job]):
      where = "cluster.%s[%d]" % (job, i)
      if address in seen:
        raise ValueError("TF_CONFIG: %s=%r is also %s: every task needs an "
                         "address of its own" % (where, address,
                                                 seen[address]))
      seen[address] = where
  task = config.get("task")
  if not isinstance(task, dict):
    raise ValueError("TF_CONFIG: key 'task' missing; expected {\"type\": "
                     "\"worker\", \"index\": 0}")
  task_type = task.get("type")
  if not isinstance(task_type, str) or task_type not in cluster:
    raise ValueError("TF_CONFIG: task.type=%r is not a job of cluster (%s)" %
                     (task_type, ", ".join(sorted(cluster))))
  index = task.get("index")
  if (not isinstance(index, int) or isinstance(index, bool) or
      not 0 <= index < len(cluster[task_type])):
    raise ValueError("TF_CONFIG: task.index=%r: expected an integer from 0 "
                     "to %d (cluster.%s has %d addresses)" %
                     (index, len(cluster[task_type]) - 1, task_type,
                      len(cluster[task_type])))
  return config


def tf_config():
  """The parsed `TF_CONFIG` (`parse_tf_config`), or None when unset."""
  text = os.environ.get("TF_CONFIG", "")
  return parse_tf_config(text) if text else None


def is_chief():
  """Whether this process writes checkpoints, summaries and results: no
  `TF_CONFIG`, the `chief` task, or worker 0 without a chief."""
  config = tf_config()
  if config is None:
    return True
  task = config["task"]
  if "chief" in config["cluster"]:
    return task["type"] == "chief"
  return task["type"] == "worker" and task["index"] == 0


def peer_addresses(config):
  """[(label, "host:port")] of every task but this one, from a TF_CONFIG."""
  me = (config["task"]["type"], config["task"]["index"])
  peers = []
  for job in ("chief", "worker"):
    for i, address in enumerate(config["cluster"].get(job, [])):
      if (job, i) != me:
        peers.append(("cluster.%s[%d]" % (job, i), address))
  return peers


def check_global_batch(batch_size, num_replicas, flag_name):
  """Per-replica batch size of a global batch.

  Raises:
    ValueError: `batch_size` is not a positive multiple of `num_replicas`.
  """
  if batch_size < 1:
    raise ValueError("--%s=%d: expected an integer >= 1 (the global batch, "
                     "all replicas together)" % (flag_name, batch_size))
  if batch_size % num_replicas or batch_size < num_replicas:
    raise ValueError(
        "--%s=%d is the global batch (all replicas together) and must be a "
        "multiple of the %d replicas" % (flag_name, batch_size, num_replicas))
  return batch_size // num_replicas


def check_options(run, num_visible_gpus):
  """Checks `run`'s tf.distribute options against `num_visible_gpus`.

  Raises:
    ValueError: the first problem, one line naming the flag or the
      `TF_CONFIG` key at fault.
  """
  options = run.distribute
  name = options.distribution_strategy
  if name not in STRATEGIES:
    raise ValueError("--distribution_strategy=%s: expected one of %s" %
                     (name, ", ".join(STRATEGIES)))
  if run.tpu.use_tpu:
    given = [f for f in ("num_gpus", "num_cpu_devices")
             if f in run.flags_given]
    if name != "none" or given:
      raise ValueError(
          "--use_tpu runs on the TPUEstimator: --%s cannot be combined with "
          "it" % ("distribution_strategy=" + name if name != "none"
                  else given[0]))
    return
  if options.num_gpus < 0 or options.num_cpu_devices < 0:
    raise ValueError("--num_gpus and --num_cpu_devices must be >= 0")
  if options.worker_timeout_secs < 1:
    raise ValueError("--worker_timeout_secs=%d: expected at least 1" %
                     options.worker_timeout_secs)
  if name == "none":
    several = ["--%s=%d" % (f, getattr(options, f))
               for f in ("num_gpus", "num_cpu_devices")
               if getattr(options, f) > 1]
    if several:
      raise ValueError(
          "%s: several devices need --distribution_strategy=mirrored (or "
          "multi_worker_mirrored); with the default, none, training runs on "
          "one device" % " ".join(several))
    return
  if options.num_gpus > num_visible_gpus:
    raise ValueError(
        "--num_gpus=%d but %d GPU%s visible to TensorFlow (check "
        "CUDA_VISIBLE_DEVICES and the CUDA install, or use --num_gpus=0 for "
        "the CPU)" % (options.num_gpus, num_visible_gpus,
                      " is" if num_visible_gpus == 1 else "s are"))
  if options.num_gpus and options.num_cpu_devices:
    raise ValueError("--num_cpu_devices splits the CPU for replicas on the "
                     "CPU; use it with --num_gpus=0")
  if name == "multi_worker_mirrored":
    if options.num_cpu_devices > 1:
      raise ValueError("--num_cpu_devices > 1 is for --distribution_strategy="
                       "mirrored; a multi-worker CPU task has one replica")
    parse_tf_config(os.environ.get("TF_CONFIG", ""))
  if run.do_train and run.train_batch_size is not None:
    # Checked again, on the strategy itself, by the runner.
    check_global_batch(run.train_batch_size, _replica_count(options),
                       "train_batch_size")


def batch_sizes(strategy, train_batch_size, eval_batch_size,
                predict_batch_size):
  """{mode ("train", "eval", "infer"): `params["batch_size"]` or None}:
  training splits the global batch over `strategy`'s replicas (None: one
  device); evaluation and prediction run on one device.

  Raises:
    ValueError: a training batch that the replicas do not divide.
  """
  replicas = strategy.num_replicas_in_sync if strategy is not None else 1
  train = (check_global_batch(train_batch_size, replicas, "train_batch_size")
           if train_batch_size else None)
  if strategy is not None:
    logging.info("Training on %d replicas (%s), %s examples per replica "
                 "per step", replicas, type(strategy).__name__, train)
  return {"train": train, "eval": eval_batch_size,
          "infer": predict_batch_size}


def _replica_count(options):
  """Replicas the `DistributeOptions` ask for (after `check_options`)."""
  per_machine = options.num_gpus or max(1, options.num_cpu_devices)
  if options.distribution_strategy == "mirrored":
    return per_machine
  cluster = parse_tf_config(os.environ.get("TF_CONFIG", ""))["cluster"]
  return per_machine * sum(len(tasks) for tasks in cluster.values())


# ----------------------------------------------------------------------------
# Start-up
# ----------------------------------------------------------------------------


def setup(options):
  """Prepares the runtime for checked `DistributeOptions`, in `main` before
  TensorFlow makes devices: the logical CPU split, and graph mode for
  multi-worker (the estimator's path fails on an eager strategy)."""
  if options.num_cpu_devices > 1:
    cpu = tf2.config.list_physical_devices("CPU")[0]
    tf2.config.set_logical_device_configuration(
        cpu, [tf2.config.LogicalDeviceConfiguration()] *
        options.num_cpu_devices)
  if options.distribution_strategy == "multi_worker_mirrored":
    tf.disable_eager_execution()


def session_config(num_cpu_devices):
  """The estimator's `ConfigProto` under a strategy: the CPU split and at
  least 8 inter-op threads (two CPU replicas on 2 cores deadlocked)."""
  return tf.ConfigProto(
      allow_soft_placement=True,
      inter_op_parallelism_threads=max(8, 2 * (os.cpu_count() or 1)),
      device_count={"CPU": max(1, num_cpu_devices)})


def make_strategy(options, use_tpu=False):
  """The strategy `DistributeOptions` ask for: `MirroredStrategy` over
  GPUs 0..num_gpus-1 or the logical CPUs, `MultiWorkerMirroredStrategy`
  over `TF_CONFIG`; None for `none` and on TPU."""
  name = options.distribution_strategy
  if name == "none" or use_tpu:
    return None
  num_gpus = options.num_gpus
  if name == "mirrored":
    if num_gpus:
      devices = ["/gpu:%d" % i for i in range(num_gpus)]
    else:
      devices = ["/cpu:%d" % i
                 for i in range(max(1, options.num_cpu_devices))]
    return tf.distribute.MirroredStrategy(devices)
  resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
  # Each task's local devices: its GPUs, or its CPU.
  resolver.num_accelerators = lambda *a, **k: {"GPU": num_gpus}
  return tf.distribute.experimental.MultiWorkerMirroredStrategy(
      cluster_resolver=resolver)


# ----------------------------------------------------------------------------
# Reaching the other workers
# ----------------------------------------------------------------------------


def _reachable(address, timeout):
  host, _, port = address.rpartition(":")
  try:
    socket.create_connection((host, int(port)), timeout=timeout).close()
    return True
  except OSError:
    return False


def start_peer_watchdog(timeout_secs, poll_secs=2.0):
  """Ends the process if a peer in `TF_CONFIG` is not reachable in time.

  TensorFlow waits for missing workers forever, so a thread polls every
  other task by TCP: one refusing for `timeout_secs` (at start-up or
  later) prints `error: ...` naming it and how to restart, removes this
  command's temp folder and exits with status 1. Returns a
  `threading.Event` to set when the work is over (None without peers).
  """
  config = tf_config()
  if config is None or not peer_addresses(config):
    return None
  peers = peer_addresses(config)
  stop = threading.Event()

  def fail(label, address, what):
    if stop.is_set():
      return
    # os._exit skips atexit, which would remove the command's temporary
    # folder (autograph's files): removed here, before the message.
    io_utils.remove_own_temp_dir()
    # The training thread goes on logging (a session restoring every
    # second): holding the log handlers keeps the error the last line.
    for handler in std_logging.getLogger().handlers:
      handler.acquire()
    sys.stderr.write("error: --distribution_strategy=multi_worker_mirrored: "
                     "worker %s (TF_CONFIG %s) %s\n" % (address, label, what))
    sys.stderr.flush()
    os._exit(1)  # pylint: disable=protected-access

  def watch():
    deadline = time.time() + timeout_secs
    waiting = list(peers)
    while waiting and not stop.is_set():
      waiting = [(label, address) for label, address in waiting
                 if not _reachable(address, 1.0)]
      if waiting and time.time() > deadline:
        fail(*waiting[0], what="not reachable within %ds; start every task "
             "of the cluster, and check the address and firewall" %
             timeout_secs)
      if waiting:
        time.sleep(1.0)
    if stop.is_set():  # The work ended first (its error may be printing).
      return
    logging.info("All %d other tasks of the cluster are reachable",
                 len(peers))
    lost_since = {}
    while not stop.wait(poll_secs):
      for label, address in peers:
        if _reachable(address, 1.0):
          lost_since.pop(address, None)
          continue
        since = lost_since.setdefault(address, time.time())
        if time.time() - since > timeout_secs:
          fail(label, address, what=(
              "stopped answering %ds ago (--worker_timeout_secs=%d); a lost "
              "task cannot rejoin a running cluster: stop every task and "
              "start them all again with the same flags (training resumes "
              "from the last checkpoint in --output_dir)" %
              (time.time() - since, timeout_secs)))

  thread = threading.Thread(target=watch, name="peer_watchdog", daemon=True)
  thread.start()
  return stop


# ----------------------------------------------------------------------------
# Input
# ----------------------------------------------------------------------------


def input_shard(input_context):
  """(num_shards, shard_index) of this worker's input pipeline; (1, 0) alone."""
  if input_context is None:
    return 1, 0
  return input_context.num_input_pipelines, input_context.input_pipeline_id


def own_address():
  """(label, "host:port") of this task in `TF_CONFIG`, e.g. cluster.worker[0]."""
  config = tf_config()
  task = config["task"]
  return ("cluster.%s[%d]" % (task["type"], task["index"]),
          config["cluster"][task["type"]][task["index"]])


def explain_server_error(error):
  """A one-line ValueError for TensorFlow's failure to start this task's
  gRPC server (its TF_CONFIG address in use, or not this machine's); None
  for any other error."""
  if "Could not start gRPC server" not in str(error):
    return None
  label, address = own_address()
  return ValueError(
      "--distribution_strategy=multi_worker_mirrored: could not listen on %s "
      "(TF_CONFIG %s, this task's own address): is the port in use, or the "
      "host not this machine?" % (address, label))
