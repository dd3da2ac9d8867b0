"""Exporting fine-tuned models as SavedModels for serving.

Not in the reference release, which stops at checkpoints. An export is a
folder `<export_dir>/<version>/` (the version is a Unix timestamp in seconds,
the layout TensorFlow Serving's `--model_base_path` expects) holding:

* `saved_model.pb` and `variables/`: the PREDICT graph of a script's own
  `model_fn`, with the `serve` tag and one `serving_default` signature whose
  inputs are `input_ids`, `input_mask` and `segment_ids`, int32 Tensors of
  shape [batch_size, max_seq_length], and whose outputs are the task's
  (`probabilities` [batch_size, num_labels] for classification,
  `predictions` [batch_size] for regression, `start_logits` and `end_logits`
  [batch_size, max_seq_length] for SQuAD, `probabilities` [batch_size,
  max_seq_length, num_labels] for tagging);
* `assets.extra/vocab.txt`, `assets.extra/bert_config.json` and
  `assets.extra/serving_config.json` (kind, `do_lower_case`,
  `max_seq_length`, label list, output names and the task's own settings),
  everything needed to turn raw text into the model's inputs.

An existing version is never overwritten: each export is a new version.

The export runs through a plain `tf.estimator.Estimator` (not
`TPUEstimator`, whose exports carry TPU tags), so the SavedModel loads with
the default `serve` tag on CPU and GPU.
"""

import json
import os
import shutil
import tempfile
import types

from absl import logging
import tensorflow.compat.v1 as tf

__all__ = [
    "CLASSIFIER", "REGRESSION", "SQUAD", "NER", "KINDS", "INPUT_NAMES",
    "ASSETS_DIR", "VOCAB_ASSET", "CONFIG_ASSET", "SERVING_ASSET",
    "ASSET_NAMES", "CLASSIFIER_FEATURES", "REGRESSION_FEATURES",
    "SQUAD_FEATURES", "ner_features", "serving_input_fn_builder",
    "checkpoint_to_export", "export_saved_model",
]

# Kinds of export (`serving_config.json`'s "kind").
CLASSIFIER = "classifier"
REGRESSION = "regression"
SQUAD = "squad"
NER = "ner"
KINDS = (CLASSIFIER, REGRESSION, SQUAD, NER)

INPUT_NAMES = ("input_ids", "input_mask", "segment_ids")
ASSETS_DIR = "assets.extra"
VOCAB_ASSET = "vocab.txt"
CONFIG_ASSET = "bert_config.json"
SERVING_ASSET = "serving_config.json"
ASSET_NAMES = (VOCAB_ASSET, CONFIG_ASSET, SERVING_ASSET)

# Features the scripts' model_fns read besides the three inputs, filled in
# by the serving graph: name -> (dtype, shape after the batch dimension,
# value). Classification reads a label and a real-example flag (unused in
# PREDICT mode); SQuAD echoes a unique id. Read-only.
CLASSIFIER_FEATURES = types.MappingProxyType(
    {"label_ids": (tf.int32, (), 0), "is_real_example": (tf.int32, (), 1)})
REGRESSION_FEATURES = types.MappingProxyType(
    {"label_ids": (tf.float32, (), 0.0), "is_real_example": (tf.int32, (), 1)})
SQUAD_FEATURES = types.MappingProxyType({"unique_ids": (tf.int32, (), 0)})


def ner_features(max_seq_length):
  """The features a NER model_fn reads besides the three inputs."""
  return {"unique_ids": (tf.int32, [], 0),
          "label_ids": (tf.int32, [max_seq_length], 0),
          "label_weights": (tf.int32, [max_seq_length], 0),
          "is_real_example": (tf.int32, [], 1)}


def serving_input_fn_builder(max_seq_length, extra_features=None):
  """Builds the `serving_input_receiver_fn` of an export.

  Args:
    max_seq_length: int, the sequence length the model was fine-tuned with.
    extra_features: dict name -> (dtype, shape after the batch dimension,
      fill value) of features the model_fn reads that a client does not
      send (e.g. `CLASSIFIER_FEATURES`), or None.

  Returns:
    A function returning a `tf.estimator.export.ServingInputReceiver` whose
    receiver tensors are int32 placeholders `input_ids`, `input_mask` and
    `segment_ids` of shape [None, max_seq_length].
  """
  extra_features = dict(extra_features or {})

  def serving_input_fn():
    receivers = {name: tf.placeholder(tf.int32, [None, max_seq_length],
                                      name=name) for name in INPUT_NAMES}
    features = dict(receivers)
    batch_size = tf.shape(receivers["input_ids"])[0]
    for name, (dtype, shape, value) in sorted(extra_features.items()):
      features[name] = tf.fill(
          tf.concat([[batch_size], tf.constant(shape, tf.int32)], axis=0),
          tf.constant(value, dtype))
    return tf.estimator.export.ServingInputReceiver(features, receivers)

  return serving_input_fn


def _checkpoint_variables(checkpoint_path):
  return {name for name, _ in tf.train.list_variables(checkpoint_path)}


def _serving_model_fn(model_fn, output_keys, checkpoint_path):
  """Wraps a script's model_fn as a plain-Estimator PREDICT model_fn.

  A `TPUEstimatorSpec` is turned into an `EstimatorSpec`; only
  `output_keys` are kept, as the `serving_default` outputs. Every variable
  except the global step must be in the checkpoint; a checkpoint without
  a global step (a converted or pre-trained one) is still exported.
  """
  in_checkpoint = _checkpoint_variables(checkpoint_path)

  def serving_model_fn(features, labels, mode, params):
    spec = model_fn(features, labels, mode, params)
    if hasattr(spec, "as_estimator_spec"):
      spec = spec.as_estimator_spec()
    missing_keys = [k for k in output_keys if k not in spec.predictions]
    if missing_keys:
      raise ValueError("export: the model_fn predicts %s, not %s" %
                       (sorted(spec.predictions), missing_keys))
    outputs = {key: spec.predictions[key] for key in output_keys}
    global_step = tf.train.get_global_step()
    variables = [v for v in tf.global_variables() if v is not global_step]
    missing = [v.op.name for v in variables
               if v.op.name not in in_checkpoint]
    if missing:
      raise ValueError(
          "export: checkpoint %s lacks %d of the model's %d variables (%s%s):"
          " export a fine-tuned checkpoint (the --output_dir of a --do_train "
          "run), not a pre-trained one" %
          (checkpoint_path, len(missing), len(variables),
           ", ".join(missing[:3]), ", ..." if len(missing) > 3 else ""))
    scaffold = None
    if global_step is not None and global_step.op.name not in in_checkpoint:
      # Restore everything else; the step is set to 0 when loading.
      scaffold = tf.train.Scaffold(
          saver=tf.train.Saver(var_list=variables, sharded=True),
          local_init_op=tf.group(tf.train.Scaffold.default_local_init_op(),
                                 global_step.initializer))
    return tf.estimator.EstimatorSpec(
        mode=mode, predictions=outputs, scaffold=scaffold,
        export_outputs={"serving_default":
                        tf.estimator.export.PredictOutput(outputs)})

  return serving_model_fn


def checkpoint_to_export(output_dir, init_checkpoint):
  """The checkpoint an `--export_dir` run exports.

  Args:
    output_dir: str or None, the run's model directory; its latest
      checkpoint (what `Estimator.predict` uses) wins.
    init_checkpoint: str or None, a checkpoint prefix or directory, used
      when `output_dir` has no checkpoint.

  Returns:
    str, a checkpoint prefix.

  Raises:
    ValueError: when neither holds a checkpoint.
  """
  if output_dir and tf.io.gfile.isdir(output_dir):
    latest = tf.train.latest_checkpoint(output_dir)
    if latest:
      return latest
  if init_checkpoint:
    if tf.io.gfile.isdir(init_checkpoint):
      latest = tf.train.latest_checkpoint(init_checkpoint)
      if latest:
        return latest
    elif tf.io.gfile.exists(init_checkpoint + ".index"):
      return init_checkpoint
  raise ValueError(
      "--export_dir: no checkpoint to export: --output_dir=%s holds none and "
      "--init_checkpoint=%s is not a checkpoint (train first, or point "
      "--init_checkpoint at a fine-tuned checkpoint)" %
      (output_dir, init_checkpoint))


def export_saved_model(model_fn, checkpoint_path, export_dir, max_seq_length,
                       kind, output_keys, vocab_file, bert_config_file,
                       do_lower_case, label_list=None, extra_features=None,
                       extra_config=None):
  """Exports a fine-tuned model as a new SavedModel version.

  Args:
    model_fn: a script's `model_fn(features, labels, mode, params)` that
      supports PREDICT mode (returning an `EstimatorSpec` or a
      `TPUEstimatorSpec`). Build it without TPU options and without an
      init checkpoint: the weights come from `checkpoint_path`.
    checkpoint_path: str, the checkpoint prefix to export; it must hold
      every variable of the model (the global step may be absent).
    export_dir: str, the export base folder; created when absent.
    max_seq_length: int, the input length of the serving signature.
    kind: one of `KINDS`.
    output_keys: list of str, the model_fn predictions to serve.
    vocab_file: str, the WordPiece vocabulary, copied to the assets.
    bert_config_file: str, the model's config JSON, copied to the assets.
    do_lower_case: bool, how the text is tokenized.
    label_list: list of str or None (regression, SQuAD), in label-id order.
    extra_features: see `serving_input_fn_builder`.
    extra_config: dict of JSON values added to `serving_config.json`
      (e.g. the task name, SQuAD's `doc_stride`).

  Returns:
    str, the new version folder.

  Raises:
    ValueError: an unknown kind, a checkpoint missing variables of the
      model, or a model_fn that does not predict `output_keys`.
  """
  if kind not in KINDS:
    raise ValueError("export: kind %r is not one of %s" % (kind, KINDS))
  config = {"kind": kind, "do_lower_case": bool(do_lower_case),
            "max_seq_length": int(max_seq_length),
            "label_list": None if label_list is None else list(label_list),
            "output_keys": list(output_keys)}
  config.update(extra_config or {})
  work_dir = tempfile.mkdtemp(prefix="bert_export_")
  try:
    serving_config = os.path.join(work_dir, SERVING_ASSET)
    with open(serving_config, "w", encoding="utf-8") as f:
      json.dump(config, f, indent=2, sort_keys=True)
      f.write("\n")
    estimator = tf.estimator.Estimator(
        model_fn=_serving_model_fn(model_fn, list(output_keys),
                                   checkpoint_path),
        model_dir=os.path.join(work_dir, "model"))
    tf.io.gfile.makedirs(export_dir)
    logging.info("Exporting %s (%s, outputs %s) to %s", checkpoint_path,
                 kind, ", ".join(output_keys), export_dir)
    path = estimator.export_saved_model(
        export_dir,
        serving_input_fn_builder(max_seq_length, extra_features),
        assets_extra={VOCAB_ASSET: vocab_file,
                      CONFIG_ASSET: bert_config_file,
                      SERVING_ASSET: serving_config},
        checkpoint_path=checkpoint_path)
  finally:
    shutil.rmtree(work_dir, ignore_errors=True)
  path = path.decode("utf-8") if isinstance(path, bytes) else path
  logging.info("Exported SavedModel version %s", path)
  return path
