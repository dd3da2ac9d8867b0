"""TensorFlow Lite and ONNX files made from a SavedModel export; their runners.

Not in the reference release. `predict_saved_model.py --convert_to=FORMATS
--output_dir=DIR` turns an export version (see `bert_tf.export.saved_model`)
into one folder per format:

    <output_dir>/tflite/model.tflite       TensorFlow Lite, float32
    <output_dir>/tflite_int8/model.tflite  TensorFlow Lite, dynamic-range int8
    <output_dir>/onnx/model.onnx           ONNX (opset 13), float32
    <output_dir>/onnx_int8/model.onnx      ONNX, int8 weights (dynamic)

(an export with a packed signature adds `model_packed.onnx` to the ONNX
folders: `OnnxRunner.run_packed`)

each with the export's `assets.extra/` (vocab.txt, bert_config.json and
serving_config.json, the latter with a `portable` entry added: the format,
the weights, the source export and the threading settings measured best on
CPU). A folder's model file tells which format it is (`model_format`), and
`RUNNERS` maps the format to the class that runs it, so
`serving.BertServingModel` and `predict_saved_model.py` serve any of them
as they serve the SavedModel: same inputs (`input_ids`, `input_mask`,
`segment_ids`, int32 [batch_size, max_seq_length]), same output names.

Int8 here is dynamic-range quantization: the weights of the dense layers
(query, key, value, attention output, both feed-forward layers, pooler and
head; in ONNX also the one-hot token-type product) and the word-embedding
table are stored as int8 with a scale (ONNX's dense layers: one per
output channel, the more accurate choice on fine-tuned models, see
docs/extract-and-serve.md);
the activations entering a dense layer are quantized on the fly per
batch. What stays float32 (checked by
counting the converted ops): layer normalization, softmax, GELU, tanh, the
residual additions, the position and token-type embeddings (TensorFlow
Lite), the two attention products (query x key, probabilities x value: both
operands are activations), and TensorFlow Lite leaves weights of fewer
than 1,024 values (a tiny head) float.

The ONNX runner needs `onnxruntime` and numpy only: this module imports no
TensorFlow at module level (the asset names of `saved_model.py` are
repeated below for that reason; a test checks they agree), so
`OnnxRunner` and `read_config` serve an ONNX folder in a process without
TensorFlow. The TensorFlow Lite runner uses TensorFlow's own interpreter.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from bert_tf import io as io_utils
from bert_tf import json_file

__all__ = ["FORMATS", "MODEL_FILES", "PACKED_MODEL_FILE", "DEFAULT_THREADS",
           "model_format",
           "read_config", "convert", "TfliteRunner", "OnnxRunner",
           "RUNNERS"]

# `bert_tf.export.saved_model`'s names, repeated so that this module needs
# no TensorFlow (tests/test_portable.py checks they agree).
_ASSETS_DIR = "assets.extra"
_ASSET_NAMES = ("vocab.txt", "bert_config.json", "serving_config.json")
_SERVING_ASSET = "serving_config.json"
_INPUT_NAMES = ("input_ids", "input_mask", "segment_ids")

# Format (a sub-folder of --convert_to's --output_dir) -> (runtime,
# weights).
FORMATS = {"tflite": ("tflite", "float32"),
           "tflite_int8": ("tflite", "int8"),
           "onnx": ("onnx", "float32"),
           "onnx_int8": ("onnx", "int8")}
# Runtime -> the model file a folder of that runtime holds.
MODEL_FILES = {"tflite": "model.tflite", "onnx": "model.onnx"}
# An export's packed signature (`saved_model.PACKED_SIGNATURE`), and the
# ONNX file made from it where the export has one (`max_examples_per_row`
# in its config).
_PACKED_SIGNATURE = "serving_packed"
PACKED_MODEL_FILE = "model_packed.onnx"
# The threading recorded in each folder (bench/bench_portable_serving.py,
# docs/performance.md): one thread per core (None), rather than TensorFlow
# Lite's implementation-defined default, and, for ONNX Runtime, its worker
# threads not spinning while they wait (faster on a 2-core AVX-512 VNNI
# machine, no different on an AVX2 one: spinning threads take cores from
# the ones that work).
DEFAULT_THREADS = {"tflite": {"num_threads": None},
                   "onnx": {"intra_op_num_threads": None,
                            "allow_spinning": False}}
_ONNX_OPSET = 13


def model_format(folder):
  """The runtime of the model in `folder`: "tflite", "onnx" or None (a
  SavedModel folder, or no model at all)."""
  for runtime, name in sorted(MODEL_FILES.items()):
    if os.path.isfile(os.path.join(folder, name)):
      return runtime
  return None


def read_config(folder):
  """The `serving_config.json` of a portable folder, as parsed JSON.

  Only its `portable` entry is checked here; `serving.check_serving_config`
  checks the rest (what a SavedModel export's config holds).

  Raises:
    ValueError: one line naming the missing asset files or the bad entry.
  """
  assets = os.path.join(folder, _ASSETS_DIR)
  missing = [os.path.join(_ASSETS_DIR, name) for name in _ASSET_NAMES
             if not os.path.isfile(os.path.join(assets, name))]
  if missing:
    raise ValueError("--model_dir: %s is missing %s (expected a folder "
                     "written by predict_saved_model.py --convert_to)" %
                     (folder, ", ".join(missing)))
  path = os.path.join(assets, _SERVING_ASSET)
  config = json_file.load(path, max_bytes=2 ** 24)
  json_file.require(config, "object", path, "")
  portable = json_file.field(config, "portable", ("object", "null"), path,
                             default=None)
  if portable is not None:
    json_file.field(portable, "format", "string", path, "portable")
    json_file.field(portable, "threads", ("object", "null"), path,
                    "portable", default=None)
  return config


def _threads(config, runtime):
  """The threading settings of `config`'s `portable` entry (or the
  defaults) for `runtime`."""
  threads = dict(DEFAULT_THREADS[runtime])
  threads.update((config.get("portable") or {}).get("threads") or {})
  return threads


def _model_error(path, runtime, error):
  return ValueError(
      "--model_dir: %s cannot be loaded by %s (%s: %s); the file is "
      "damaged or not a model: make it again with predict_saved_model.py "
      "--convert_to" %
      (path, runtime, type(error).__name__,
       str(error).strip().splitlines()[0] if str(error).strip() else ""))


class TfliteRunner(object):
  """Runs a folder's `model.tflite` through its `serving_default` signature.

  Args:
    folder: str, a folder written by `convert` (format tflite or
      tflite_int8).
    config: dict, its `serving_config.json`.

  Attributes:
    outputs: dict output name -> shape (list of int or None), as the
      SavedModel's signature reports them.

  Raises:
    ValueError: TensorFlow missing, or a file that is not a TensorFlow Lite
      model with that signature.
  """

  def __init__(self, folder, config):
    try:
      # Function-level: TensorFlow only for TensorFlow Lite folders (the
      # ONNX path runs without it).
      import tensorflow as tf  # pylint: disable=g-import-not-at-top
    except ImportError as e:
      raise ValueError("--model_dir: %s is a TensorFlow Lite model and "
                       "TensorFlow is not importable (%s): install the "
                       "project's requirements (./setup.sh)" % (folder, e))
    path = os.path.join(folder, MODEL_FILES["tflite"])
    threads = _threads(config, "tflite")
    try:
      self._interpreter = tf.lite.Interpreter(
          model_path=path,
          num_threads=threads.get("num_threads") or os.cpu_count())
      self._signature = self._interpreter.get_signature_runner(
          "serving_default")
      details = self._signature.get_output_details()
    except (ValueError, RuntimeError) as e:
      raise _model_error(path, "TensorFlow Lite", e) from None
    self.outputs = {name: [None] + [int(d) for d in detail["shape"][1:]]
                    for name, detail in details.items()}

  def run(self, input_ids, input_mask, segment_ids):
    """Runs a batch: int32 arrays [batch_size, length] -> dict name ->
    float32 array."""
    inputs = dict(zip(_INPUT_NAMES, (np.ascontiguousarray(a, np.int32) for a
                                     in (input_ids, input_mask,
                                         segment_ids))))
    return {name: np.array(value)
            for name, value in self._signature(**inputs).items()}


class OnnxRunner(object):
  """Runs a folder's `model.onnx` with ONNX Runtime on CPU.

  Args:
    folder: str, a folder written by `convert` (format onnx or onnx_int8).
    config: dict, its `serving_config.json`.

  Attributes:
    outputs: dict output name -> shape (list of int or None).

  Raises:
    ValueError: onnxruntime not installed, or a file ONNX Runtime cannot
      load.
  """

  def __init__(self, folder, config):
    try:
      # Function-level: onnxruntime is the optional `onnx` extra.
      import onnxruntime  # pylint: disable=g-import-not-at-top
    except ImportError as e:
      raise ValueError("--model_dir: %s is an ONNX model and onnxruntime is "
                       "not importable (%s): install the onnx extra "
                       "(./setup.sh --onnx)" % (folder, e))
    threads = _threads(config, "onnx")
    options = onnxruntime.SessionOptions()
    if threads.get("intra_op_num_threads"):
      options.intra_op_num_threads = int(threads["intra_op_num_threads"])
    if threads.get("allow_spinning") is False:
      options.add_session_config_entry("session.intra_op.allow_spinning",
                                       "0")

    def session(path):
      try:
        return onnxruntime.InferenceSession(
            path, sess_options=options, providers=["CPUExecutionProvider"])
      except Exception as e:  # pylint: disable=broad-except
        # onnxruntime raises its own classes (Fail, InvalidGraph,
        # InvalidProtobuf, ...), not importable under one name.
        raise _model_error(path, "ONNX Runtime", e) from None

    self._session = session(os.path.join(folder, MODEL_FILES["onnx"]))
    packed = os.path.join(folder, PACKED_MODEL_FILE)
    self._packed = session(packed) if os.path.isfile(packed) else None
    self.outputs = {
        out.name: [None] + [d if isinstance(d, int) else None
                            for d in out.shape[1:]]
        for out in self._session.get_outputs()}
    self._inputs = [i.name for i in self._session.get_inputs()]

  def run(self, input_ids, input_mask, segment_ids):
    """Runs a batch: int32 arrays [batch_size, length] -> dict name ->
    float32 array."""
    arrays = dict(zip(_INPUT_NAMES, (np.ascontiguousarray(a, np.int32) for a
                                     in (input_ids, input_mask,
                                         segment_ids))))
    names = list(self.outputs)
    values = self._session.run(names, {name: arrays[name]
                                       for name in self._inputs})
    return dict(zip(names, values))

  def run_packed(self, arrays):
    """Runs packed rows (`model_packed.onnx`, made from the export's packed
    signature): dict input name -> int32 array -> dict name -> array."""
    names = list(self.outputs)
    return dict(zip(names, self._packed.run(names, {
        name: np.ascontiguousarray(value, np.int32)
        for name, value in arrays.items()})))


# Runtime (`model_format`) -> the class that runs its folders; a SavedModel
# folder (None) is served by `serving.BertServingModel` itself.
RUNNERS = {"tflite": TfliteRunner, "onnx": OnnxRunner}


def _write_tflite(version_dir, path, int8):
  """Converts the SavedModel at `version_dir` to `path` (builtin ops only)."""
  # Function-level: conversion needs TensorFlow; serving ONNX does not.
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  converter = tf.lite.TFLiteConverter.from_saved_model(
      version_dir, signature_keys=["serving_default"])
  converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
  if int8:
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
  with io_utils.atomic_write(path, "wb") as f:
    f.write(converter.convert())


def _write_onnx(version_dir, path, int8, scratch,
                signature="serving_default"):
  """Converts the `signature` of the SavedModel at `version_dir` to `path`
  with tf2onnx (in a child process: its converter changes TensorFlow's
  global state), then quantizes the weights for int8. The float model is
  kept in `scratch`, so that onnx and onnx_int8 in one call convert
  once."""
  float_path = os.path.join(scratch, "%s.onnx" % signature)
  if not os.path.isfile(float_path):
    command = [sys.executable, "-m", "tf2onnx.convert", "--saved-model",
               version_dir, "--tag", "serve", "--signature_def",
               signature, "--opset", str(_ONNX_OPSET), "--output",
               float_path]
    done = subprocess.run(command, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, check=False)
    if done.returncode != 0 or not os.path.isfile(float_path):
      last = [line for line in done.stdout.splitlines() if line.strip()]
      raise ValueError("--convert_to: tf2onnx could not convert %s (%s)" %
                       (version_dir, last[-1] if last else "no output"))
  with io_utils.atomic_path(path) as temp:
    if int8:
      # Function-level: the optional `onnx` extra.
      from onnxruntime import quantization  # pylint: disable=g-import-not-at-top
      quantization.quantize_dynamic(float_path, temp, per_channel=True,
                                    weight_type=quantization.QuantType.QInt8)
    else:
      shutil.copyfile(float_path, temp)


def _check_runtimes(formats):
  """Refuses, in one line, formats whose converter is not installed."""
  needed = {"onnx": ("tf2onnx", "onnx", "onnxruntime")}
  missing = []
  for runtime in sorted({FORMATS[name][0] for name in formats}):
    for module in needed.get(runtime, ()):
      try:
        __import__(module)
      except ImportError:
        missing.append(module)
  if missing:
    raise ValueError("--convert_to: %s needs %s, which is not installed: "
                     "install the onnx extra (./setup.sh --onnx)" %
                     (",".join(formats), ", ".join(missing)))


def convert(version_dir, output_dir, formats, config, threads=None):
  """Writes `output_dir/<format>/` for each of `formats`.

  Args:
    version_dir: str, a SavedModel export version (its assets checked).
    output_dir: str, the folder of the format folders; created when absent.
    formats: list of keys of `FORMATS`.
    config: dict, the export's checked `serving_config.json`.
    threads: dict runtime -> threading settings to record, or None for
      `DEFAULT_THREADS`.

  Returns:
    dict format -> the folder written (each is written beside it and
    renamed into place whole).

  Raises:
    ValueError: an unknown format, a format folder that already holds
      files, a converter not installed, or a model the converter refuses
      (one line each).
  """
  unknown = [name for name in formats if name not in FORMATS]
  if unknown or not formats:
    raise ValueError("--convert_to: %s, expected a comma-separated list of %s"
                     % (",".join(formats) or "(empty)",
                        ", ".join(sorted(FORMATS))))
  taken = [os.path.join(output_dir, name) for name in formats
           if os.path.isdir(os.path.join(output_dir, name)) and
           os.listdir(os.path.join(output_dir, name))]
  if taken:
    raise ValueError("--output_dir: %s already exists and is not empty "
                     "(remove it, or name another --output_dir)" % taken[0])
  _check_runtimes(formats)
  threads = dict(DEFAULT_THREADS, **(threads or {}))
  os.makedirs(output_dir, exist_ok=True)
  written = {}
  with tempfile.TemporaryDirectory(dir=output_dir) as scratch:
    for name in formats:
      written[name] = _write_format(version_dir, output_dir, name, config,
                                    threads, scratch)
  return written


def _write_format(version_dir, output_dir, name, config, threads, scratch):
  """Writes `output_dir/name/` whole (see `convert`); returns its path."""
  runtime, weights = FORMATS[name]
  folder = os.path.join(output_dir, name)
  with io_utils.atomic_path(folder) as temp:
    os.makedirs(os.path.join(temp, _ASSETS_DIR))
    model_path = os.path.join(temp, MODEL_FILES[runtime])
    if runtime == "tflite":
      _write_tflite(version_dir, model_path, weights == "int8")
    else:
      _write_onnx(version_dir, model_path, weights == "int8", scratch)
      if config.get("max_examples_per_row"):
        _write_onnx(version_dir, os.path.join(temp, PACKED_MODEL_FILE),
                    weights == "int8", scratch, _PACKED_SIGNATURE)
    for asset in _ASSET_NAMES[:2]:
      with open(os.path.join(version_dir, _ASSETS_DIR, asset), "rb") as f:
        data = f.read()
      with open(os.path.join(temp, _ASSETS_DIR, asset), "wb") as f:
        f.write(data)
    served = dict(config, portable={
        "format": name, "runtime": runtime, "weights": weights,
        "source": os.path.abspath(version_dir),
        "threads": threads[runtime]})
    with open(os.path.join(temp, _ASSETS_DIR, _SERVING_ASSET), "w") as f:
      f.write(json.dumps(served, indent=2, sort_keys=True) + "\n")
  return folder
