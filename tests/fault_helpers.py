"""Small helpers shared by the fault tests (test_faults_*.py, test_fuzz_*).

Tiny inputs for every script, a subprocess runner that can set a file-size
limit, and an output-folder watcher.
"""

import json
import os
import random
import re
import resource
import signal
import subprocess
import sys
import threading
import time

import numpy as np

from helpers import data_path
from helpers import REPO_ROOT

SEQ = 16
PREDS = 4


def tiny(name):
  """A file of the tiny 2-layer, 32-wide conformance model."""
  return data_path("conformance", "modeling", name)


def tiny_checkpoint():
  return os.path.join(os.path.dirname(tiny("bert_config.json")),
                      "bert_model.ckpt")


def script(name):
  return os.path.join(REPO_ROOT, name)


def env(**extra):
  """The scripts' environment: CPU only, no BERT_DEBUG, no TF log level."""
  result = dict(os.environ, CUDA_VISIBLE_DEVICES="")
  for name in ("BERT_DEBUG", "TF_CPP_MIN_LOG_LEVEL"):
    result.pop(name, None)
  result.update(extra)
  return result


def _limit_file_size(limit):
  def preexec():
    # Ignored SIGXFSZ: a write past the limit fails with EFBIG instead of
    # killing the process.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
  return preexec


def run(name, args, timeout=300, file_size_limit=None, **extra_env):
  """Runs a script to completion; returns the CompletedProcess."""
  return subprocess.run(
      [sys.executable, script(name)] + list(args), cwd=REPO_ROOT,
      env=env(**extra_env), capture_output=True, text=True, timeout=timeout,
      preexec_fn=(_limit_file_size(file_size_limit)
                  if file_size_limit else None))


def start(name, args, **extra_env):
  """Starts a script; stderr goes to a pipe (text), stdout is dropped."""
  return subprocess.Popen(
      [sys.executable, script(name)] + list(args), cwd=REPO_ROOT,
      env=env(**extra_env), stdout=subprocess.DEVNULL,
      stderr=subprocess.PIPE, text=True)


def last_line(stderr):
  lines = [line for line in stderr.strip().splitlines() if line.strip()]
  return lines[-1] if lines else ""


def flags(**values):
  return ["--%s=%s" % item for item in values.items()]


# ----------------------------------------------------------------------------
# Inputs
# ----------------------------------------------------------------------------


def write_records(path, num_examples, seed=0):
  """Random pre-training records in create_pretraining_data.py's layout."""
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  from bert_tf import io as io_utils  # pylint: disable=g-import-not-at-top
  rng = np.random.RandomState(seed)
  with tf.io.TFRecordWriter(path) as writer:
    for _ in range(num_examples):
      length = rng.randint(6, SEQ + 1)
      ids = [101] + list(rng.randint(104, 1000, size=length - 2)) + [102]
      ids += [0] * (SEQ - length)
      mask = [1] * length + [0] * (SEQ - length)
      positions = sorted(rng.choice(range(1, length - 1), size=PREDS - 1,
                                    replace=False))
      features = {
          "input_ids": io_utils.int64_feature(ids),
          "input_mask": io_utils.int64_feature(mask),
          "segment_ids": io_utils.int64_feature([0] * SEQ),
          "masked_lm_positions": io_utils.int64_feature(
              list(positions) + [0]),
          "masked_lm_ids": io_utils.int64_feature(
              [ids[p] for p in positions] + [0]),
          "masked_lm_weights": io_utils.float_feature(
              [1.0] * (PREDS - 1) + [0.0]),
          "next_sentence_labels": io_utils.int64_feature([rng.randint(0, 2)]),
      }
      example = tf.train.Example(features=tf.train.Features(feature=features))
      writer.write(example.SerializeToString())
  return path


def pretraining_flags(data, output_dir, **overrides):
  values = dict(bert_config_file=tiny("bert_config.json"), input_file=data,
                output_dir=output_dir, init_checkpoint=tiny_checkpoint(),
                max_seq_length=SEQ, max_predictions_per_seq=PREDS,
                train_batch_size=2, eval_batch_size=2, learning_rate=0.01,
                num_warmup_steps=0, save_checkpoints_steps=1000,
                iterations_per_loop=1, do_train=True, num_train_steps=4)
  values.update(overrides)
  return flags(**values)


def vocab_words():
  with open(tiny("vocab.txt"), encoding="utf-8") as f:
    words = [w.strip() for w in f]
  return [w for w in words if w.isalpha() and w.islower() and len(w) > 2]


def write_corpus(path, num_documents=6, seed=0):
  """A small pre-training corpus of words the tiny vocabulary knows."""
  rng = random.Random(seed)
  words = vocab_words()
  with open(path, "w", encoding="utf-8") as f:
    for _ in range(num_documents):
      for _ in range(rng.randint(3, 6)):
        f.write(" ".join(rng.choice(words) for _ in range(rng.randint(4, 12)))
                + ".\n")
      f.write("\n")
  return path


def write_tsv_task(data_dir, rows=24, seed=0):
  """train/dev/test.tsv for run_classifier's `tsv` task: text \\t label."""
  rng = random.Random(seed)
  words = vocab_words()
  os.makedirs(data_dir, exist_ok=True)
  for name in ("train", "dev", "test"):
    with open(os.path.join(data_dir, name + ".tsv"), "w",
              encoding="utf-8") as f:
      for _ in range(rows):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(3, 8)))
        f.write("%s\t%s\n" % (text, rng.choice("ab")))
  return data_dir


def classifier_flags(data_dir, output_dir, **overrides):
  values = dict(task_name="tsv", data_dir=data_dir, output_dir=output_dir,
                vocab_file=tiny("vocab.txt"),
                bert_config_file=tiny("bert_config.json"),
                init_checkpoint=tiny_checkpoint(), max_seq_length=SEQ,
                train_batch_size=4, learning_rate=0.01, num_train_epochs=1.0,
                save_checkpoints_steps=1000, iterations_per_loop=1,
                do_train=True)
  values.update(overrides)
  return flags(**values)


def write_squad(path, num_questions=12, seed=0, version_2=False):
  rng = random.Random(seed)
  words = vocab_words()
  paragraphs = []
  for p in range(max(1, num_questions // 3)):
    context_words = [rng.choice(words) for _ in range(30)]
    context = " ".join(context_words)
    qas = []
    for q in range(3):
      start = rng.randint(0, 25)
      answer = " ".join(context_words[start:start + 2])
      offset = len(" ".join(context_words[:start])) + (1 if start else 0)
      qa = {"id": "q%d_%d" % (p, q),
            "question": " ".join(rng.choice(words) for _ in range(5)) + "?",
            "answers": [{"text": answer, "answer_start": offset}]}
      if version_2:
        qa["is_impossible"] = False
      qas.append(qa)
    paragraphs.append({"context": context, "qas": qas})
  with open(path, "w", encoding="utf-8") as f:
    json.dump({"version": "1.1", "data": [{"title": "t",
                                            "paragraphs": paragraphs}]}, f)
  return path


def squad_flags(train_file, output_dir, **overrides):
  values = dict(train_file=train_file, output_dir=output_dir,
                vocab_file=tiny("vocab.txt"),
                bert_config_file=tiny("bert_config.json"),
                init_checkpoint=tiny_checkpoint(), max_seq_length=48,
                doc_stride=16, max_query_length=12, train_batch_size=4,
                learning_rate=0.01, num_train_epochs=1.0,
                save_checkpoints_steps=1000, iterations_per_loop=1,
                do_train=True)
  values.update(overrides)
  return flags(**values)


# ----------------------------------------------------------------------------
# Watching an output folder
# ----------------------------------------------------------------------------


class FolderWatcher(object):
  """Polls a folder (recursively) while a process runs.

  `check(path, data)` is called for each file whose name passes `watch`
  each time its size or mtime changes; it returns an error string or None.
  Errors are collected in `errors`.
  """

  def __init__(self, folder, watch, check, interval=0.005):
    self.folder = folder
    self.watch = watch
    self.check = check
    self.interval = interval
    self.errors = []
    self.seen = set()
    self._stop = threading.Event()
    self._thread = threading.Thread(target=self._loop, daemon=True)
    self._stamps = {}

  def __enter__(self):
    self._thread.start()
    return self

  def __exit__(self, *exc):
    self._stop.set()
    self._thread.join()
    return False

  def _loop(self):
    while not self._stop.is_set():
      for root, _, names in os.walk(self.folder):
        for name in names:
          path = os.path.join(root, name)
          if not self.watch(path):
            continue
          try:
            stat = os.stat(path)
            stamp = (stat.st_size, stat.st_mtime_ns)
            if self._stamps.get(path) == stamp:
              continue
            with open(path, "rb") as f:
              data = f.read()
          except OSError:
            continue  # Renamed or removed meanwhile.
          self._stamps[path] = stamp
          self.seen.add(path)
          error = self.check(path, data)
          if error:
            self.errors.append(error)
      time.sleep(self.interval)


class Lines(object):
  """Collects a process's stderr lines in a thread; waits for a pattern."""

  def __init__(self, proc):
    self.proc = proc
    self.lines = []
    self._cond = threading.Condition()
    self._thread = threading.Thread(target=self._read, daemon=True)
    self._thread.start()

  def _read(self):
    for line in self.proc.stderr:
      with self._cond:
        self.lines.append(line.rstrip("\n"))
        self._cond.notify_all()
    with self._cond:
      self.lines.append(None)
      self._cond.notify_all()

  def wait_for(self, pattern, timeout=240):
    deadline = time.time() + timeout
    with self._cond:
      while True:
        for line in self.lines:
          if line is not None and re.search(pattern, line):
            return line
        if None in self.lines or time.time() > deadline:
          raise AssertionError("no line matching %r in:\n%s" % (
              pattern, "\n".join(l for l in self.lines[-30:] if l)))
        self._cond.wait(1.0)

  def text(self):
    self._thread.join(timeout=60)
    return "\n".join(l for l in self.lines if l is not None)


def autotune_enabled(dataset_op):
  """Whether the dataset made by graph op `dataset_op` autotunes.

  Reads the options set by `with_options` on it or any dataset it is made
  from (their `OptionsDataset` ops); autotuning is on unless one turns it
  off (nearest to `dataset_op` wins where two set it).
  """
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  from tensorflow.core.framework import dataset_options_pb2  # pylint: disable=g-import-not-at-top
  seen = set()
  queue = [dataset_op]
  while queue:
    op = queue.pop(0)
    if op.name in seen:
      continue
    seen.add(op.name)
    if op.type == "OptionsDataset":
      options = dataset_options_pb2.Options()
      options.ParseFromString(op.get_attr("serialized_options"))
      autotune = options.autotune_options
      if autotune.WhichOneof("optional_enabled") is not None:
        return autotune.enabled
    queue.extend(t.op for t in op.inputs if t.dtype == tf.variant)
  return True
