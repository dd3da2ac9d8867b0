"""Exporting fine-tuned models as SavedModels for serving (beyond the
reference, which stops at checkpoints).

An export is `<export_dir>/<version>/` (a Unix timestamp, as TensorFlow
Serving expects): `saved_model.pb` and `variables/` with the `serve` tag and
a `serving_default` signature (inputs `input_ids`, `input_mask`,
`segment_ids`, int32 [batch_size, max_seq_length]; outputs `probabilities`
[batch_size, num_labels] for classification, `predictions` [batch_size] for
regression, `start_logits`/`end_logits` [batch_size, max_seq_length] for
SQuAD, `probabilities` [batch_size, max_seq_length, num_labels] for
tagging; multiple choice takes [batch_size, num_choices, max_seq_length]
and serves `probabilities` and `logits` [batch_size, num_choices]), and
`assets.extra/` with `vocab.txt`, `bert_config.json` and
`serving_config.json`. A classifier, regression or NER export made with
`max_examples_per_row=K` (`--pack_sequences`) adds a `serving_packed`
signature for packed rows (`bert_tf.train.packing`: `input_ids`,
`input_mask` holding slots 1..K, `segment_ids`, `position_ids` [batch_size,
max_seq_length]; classifier and regression also `cls_positions`
[batch_size, K] and outputs with a slot dimension: `probabilities`
[batch_size, K, num_labels], `predictions` [batch_size, K]; NER serves
`probabilities` [batch_size, max_seq_length, num_labels], one per token,
which a client gives back to each example by `input_mask`'s slot, so it
needs no `[CLS]` positions) and `max_examples_per_row` to its config; the
default signature and an export without packing are unchanged. A version
is never overwritten: it is built in a hidden `.temp-...` folder and
renamed into place whole. Written with `SavedModelBuilder`, the same on
every stack and runner.
"""

import contextlib
import json
import os
import re
import shutil
import socket
import time
import types
import uuid

from absl import logging
import tensorflow.compat.v1 as tf

from bert_tf import io as io_utils
from bert_tf.checks import checkpoint as checkpoint_checks
from bert_tf.tasks.classifier import model as classifier_model
from bert_tf.train import checkpoints
from bert_tf.train import lengths as lengths_lib
from bert_tf.train import spec as spec_lib

__all__ = [
    "CLASSIFIER", "REGRESSION", "SQUAD", "NER", "MULTIPLE_CHOICE", "KINDS",
    "INPUT_NAMES", "PACKED_INPUT_NAMES", "PACKED_SIGNATURE", "PACKED_KINDS",
    "packed_input_names",
    "ASSETS_DIR", "VOCAB_ASSET", "CONFIG_ASSET", "SERVING_ASSET",
    "ASSET_NAMES", "CLASSIFIER_FEATURES", "REGRESSION_FEATURES",
    "SQUAD_FEATURES", "NER_FEATURES", "serving_input_fn_builder",
    "export_saved_model", "check_task_head",
    "remove_killed_exports",
]

# Kinds of export (`serving_config.json`'s "kind").
CLASSIFIER = "classifier"
REGRESSION = "regression"
SQUAD = "squad"
NER = "ner"
MULTIPLE_CHOICE = "multiple_choice"
KINDS = (CLASSIFIER, REGRESSION, SQUAD, NER, MULTIPLE_CHOICE)

INPUT_NAMES = ("input_ids", "input_mask", "segment_ids")
# The packed rows' signature and its inputs (`bert_tf.train.packing`).
PACKED_SIGNATURE = "serving_packed"
PACKED_INPUT_NAMES = INPUT_NAMES + ("position_ids", "cls_positions")
# The kinds that export a packed signature.
PACKED_KINDS = (CLASSIFIER, REGRESSION, NER)

ASSETS_DIR = "assets.extra"
VOCAB_ASSET = "vocab.txt"
CONFIG_ASSET = "bert_config.json"
SERVING_ASSET = "serving_config.json"
ASSET_NAMES = (VOCAB_ASSET, CONFIG_ASSET, SERVING_ASSET)

# Features the scripts' model_fns read besides the three inputs, filled in
# by the serving graph: name -> (dtype, shape after the batch dimension,
# value). Classification reads a label and a real-example flag (unused in
# PREDICT mode; the heads' own, `classifier_model`); SQuAD echoes a unique
# id. Read-only.
CLASSIFIER_FEATURES = classifier_model.CLASSIFIER_FEATURES
REGRESSION_FEATURES = classifier_model.REGRESSION_FEATURES
SQUAD_FEATURES = types.MappingProxyType({"unique_ids": (tf.int32, (), 0)})


# A NER model_fn reads these besides the three inputs; a None dimension is
# the inputs' sequence length.
NER_FEATURES = types.MappingProxyType(
    {"unique_ids": (tf.int32, (), 0),
     "label_ids": (tf.int32, (None,), 0),
     "label_weights": (tf.int32, (None,), 0),
     "is_real_example": (tf.int32, (), 1)})


def packed_input_names(kind):
  """The packed signature's inputs for `kind`: per-token outputs (NER) need
  no `cls_positions`."""
  return PACKED_INPUT_NAMES[:4] if kind == NER else PACKED_INPUT_NAMES


def serving_input_fn_builder(max_seq_length, extra_features=None,
                             bucket_by_length=False, choices=False,
                             slots=None, kind=CLASSIFIER):
  """The `serving_input_receiver_fn` of an export: returns (features,
  receivers), `receivers` the int32 placeholders `input_ids`, `input_mask`,
  `segment_ids` ([None, max_seq_length], or [None, None] with
  `bucket_by_length`; `choices` adds a dimension of any size after the
  batch's, multiple choice's), `features` those plus `extra_features`
  (name -> (dtype, shape after the batch, fill value); None: the sequence
  length) filled in. `slots=K`: packed rows' receivers
  (`packed_input_names(kind)`, `cls_positions` [None, K]), each extra
  feature filled per slot ([K] + its shape; one of the sequence length,
  per token, stays [max_seq_length]) and `example_index` [None, K]."""
  extra_features = dict(extra_features or {})
  if slots:
    extra_features["example_index"] = (tf.int32, (), -1)

  def serving_input_fn():
    shapes = {name: [None] * (1 + choices) +
              [None if bucket_by_length else max_seq_length]
              for name in (packed_input_names(kind) if slots else
                           INPUT_NAMES)}
    if "cls_positions" in shapes:
      shapes["cls_positions"] = [None, slots]
    receivers = {name: tf.placeholder(tf.int32, shape, name=name)
                 for name, shape in shapes.items()}
    features = dict(receivers)
    batch_size, seq_length = (tf.shape(receivers["input_ids"])[i]
                              for i in (0, 1))
    if not bucket_by_length:
      seq_length = max_seq_length
    for name, (dtype, shape, value) in sorted(extra_features.items()):
      dims = [slots] * bool(slots and None not in shape) + [
          seq_length if dim is None else dim for dim in shape]
      features[name] = tf.fill(
          tf.stack([batch_size] + dims) if dims else [batch_size],
          tf.constant(value, dtype))
    return features, receivers

  return serving_input_fn


def _checkpoint_variables(checkpoint_path):
  return {name for name, _ in tf.train.list_variables(
      checkpoint_checks.readable_prefix(checkpoint_path))}


def _serving_graph(model_fn, output_keys, checkpoint_path, inputs):
  """Builds the PREDICT graph; returns (outputs of `output_keys`, the
  `Saver` restoring `checkpoint_path`), whose global step may be absent.

  Raises:
    ValueError: a model_fn that does not predict `output_keys`, or a
      checkpoint that lacks some of the model's variables.
  """
  in_checkpoint = _checkpoint_variables(checkpoint_path)
  features, _ = inputs
  global_step = tf.train.get_or_create_global_step()
  spec = model_fn(features, None, spec_lib.ModeKeys.PREDICT, {})
  missing_keys = [k for k in output_keys if k not in spec.predictions]
  if missing_keys:
    raise ValueError("export: the model_fn predicts %s, not %s" %
                     (sorted(spec.predictions), missing_keys))
  outputs = {key: spec.predictions[key] for key in output_keys}
  variables = [v for v in tf.global_variables() if v is not global_step]
  missing = [v.op.name for v in variables if v.op.name not in in_checkpoint]
  if missing:
    raise ValueError(
        "export: checkpoint %s lacks %d of the model's %d variables (%s%s): "
        "export a fine-tuned checkpoint (the --output_dir of a --do_train "
        "run), not a pre-trained one" %
        (checkpoint_path, len(missing), len(variables),
         ", ".join(missing[:3]), ", ..." if len(missing) > 3 else ""))
  if global_step.op.name in in_checkpoint:
    variables.append(global_step)
  return outputs, checkpoints.Saver(var_list=variables, sharded=True)


def _claim_version(export_dir, work_dir):
  """Renames `work_dir` to the first free version at or after now; returns
  the version folder."""
  version = int(time.time())
  while True:
    path = os.path.join(export_dir, str(version))
    if not tf.io.gfile.exists(path):
      try:
        tf.io.gfile.rename(work_dir, path)
        return path
      except (tf.errors.AlreadyExistsError, tf.errors.FailedPreconditionError,
              OSError):
        if not tf.io.gfile.exists(path):
          raise
    version += 1


# Variables of the pre-trained model and its pre-training heads; a task head
# (classifier, NER, SQuAD) is a weight or bias outside them.
_PRETRAINED_SCOPES = ("bert/", "cls/predictions/", "cls/seq_relationship/")
_HEAD_NAMES = ("output_weights", "output_bias", "kernel", "bias")


def check_task_head(checkpoint_path):
  """Refuses a checkpoint without a task head (a pre-trained one), before
  any work.

  Raises:
    ValueError: `--export_dir: checkpoint <path> has no task head ...`.
  """
  names = _checkpoint_variables(checkpoint_path)
  heads = [n for n in names if not n.startswith(_PRETRAINED_SCOPES)
           and n.rsplit("/", 1)[-1] in _HEAD_NAMES]
  if not heads:
    raise ValueError(
        "--export_dir: checkpoint %s has no task head (only the pre-trained "
        "model's %d variables): export a fine-tuned checkpoint (the "
        "--output_dir of a --do_train run), not a pre-trained one" %
        (checkpoint_path, len(names)))


# `.temp-<time>-<host>.<pid>.<random>`: this module's work folders; and
# `temp-<time>`, those of the Estimator exporter earlier versions used.
_WORK_DIR = re.compile(r"\.temp-\d+-(.+)$")
_OLD_WORK_DIR = re.compile(r"temp-\d+$")


def remove_killed_exports(export_dir):
  """Removes the work folders of exports whose process is gone; returns
  them."""
  if "://" in export_dir or not os.path.isdir(export_dir):
    return []
  removed = []
  for name in sorted(os.listdir(export_dir)):
    path = os.path.join(export_dir, name)
    match = _WORK_DIR.match(name)
    if not os.path.isdir(path):
      continue
    if match:
      # The owner's host and pid: removed only when it no longer runs.
      if io_utils.writer_may_run(match.group(1)):
        continue
    elif not _OLD_WORK_DIR.match(name):
      continue
    logging.info("Removing %s, left by an export that did not finish", path)
    shutil.rmtree(path, ignore_errors=True)
    removed.append(path)
  return removed


def export_saved_model(model_fn, checkpoint_path, export_dir, max_seq_length,
                       kind, output_keys, vocab_file, bert_config_file,
                       do_lower_case, label_list=None, extra_features=None,
                       extra_config=None, bucket_by_length=False,
                       max_examples_per_row=None):
  """Exports a fine-tuned model as a new SavedModel version; returns its
  folder.

  `model_fn` supports PREDICT and is built without TPU options or init
  checkpoint: the weights come from `checkpoint_path`. `kind`: one of
  `KINDS`; `output_keys`: the predictions served; `vocab_file` and
  `bert_config_file` are copied to the assets; `label_list` in label-id
  order (None: regression, SQuAD); `extra_features`: see
  `serving_input_fn_builder`; `extra_config`: JSON values added to
  `serving_config.json`; `bucket_by_length`: a signature of any length up
  to `max_seq_length`, with the `bucket_lengths` a client pads to;
  `max_examples_per_row`: K, adds the `PACKED_SIGNATURE` of rows of K slots
  (`PACKED_KINDS`; `model_fn` reads packed features).

  Raises:
    ValueError: an unknown kind, a checkpoint missing variables of the
      model, a model_fn that does not predict `output_keys`, or packing
      asked of another kind.
  """
  if kind not in KINDS:
    raise ValueError("export: kind %r is not one of %s" % (kind, KINDS))
  if max_examples_per_row and kind not in PACKED_KINDS:
    raise ValueError("export: a %s export has no packed signature (only "
                     "classifier, regression and NER exports)" % kind)
  config = {"kind": kind, "do_lower_case": bool(do_lower_case),
            "max_seq_length": int(max_seq_length),
            "label_list": None if label_list is None else list(label_list),
            "output_keys": list(output_keys)}
  config.update(extra_config or {})
  if max_examples_per_row:
    config["max_examples_per_row"] = int(max_examples_per_row)
  if bucket_by_length:
    config["bucket_lengths"] = list(lengths_lib.bucket_lengths(
        max_seq_length))
  logging.info("Exporting %s (%s, outputs %s) to %s", checkpoint_path,
               kind, ", ".join(output_keys), export_dir)
  remove_killed_exports(export_dir)
  work_dir = os.path.join(export_dir, ".temp-%d-%s.%d.%s" % (
      int(time.time()), socket.gethostname(), os.getpid(),
      uuid.uuid4().hex[:8]))
  try:
    with tf.Graph().as_default() as graph:
      # Every variable is restored; a seed only lets the initializers be
      # built under --deterministic's op determinism.
      graph.seed = 0
      inputs = serving_input_fn_builder(
          max_seq_length, extra_features, bucket_by_length,
          choices=kind == MULTIPLE_CHOICE)()
      signatures = {}
      # Packed: a second model on the same variables (re-entering the root
      # scope lets the encoder's scopes be named again, reused).
      root = tf.get_variable_scope()
      with tf.variable_scope(root) if max_examples_per_row else (
          contextlib.nullcontext()):
        outputs, saver = _serving_graph(model_fn, list(output_keys),
                                        checkpoint_path, inputs)
      signatures["serving_default"] = (inputs[1], outputs)
      if max_examples_per_row:
        packed = serving_input_fn_builder(max_seq_length, extra_features,
                                          slots=max_examples_per_row,
                                          kind=kind)()
        with tf.variable_scope(root, reuse=True):
          signatures[PACKED_SIGNATURE] = (packed[1], _serving_graph(
              model_fn, list(output_keys), checkpoint_path, packed)[0])
      # Checked: the folder is made only now (a refusal leaves nothing).
      tf.io.gfile.makedirs(export_dir)
      with tf.Session() as session:
        session.run(tf.train.get_global_step().initializer)
        saver.restore(session, checkpoint_path)
        builder = tf.saved_model.builder.SavedModelBuilder(work_dir)
        builder.add_meta_graph_and_variables(
            session, [tf.saved_model.tag_constants.SERVING],
            signature_def_map={
                name: tf.saved_model.signature_def_utils.predict_signature_def(
                    inputs=receivers, outputs=served)
                for name, (receivers, served) in signatures.items()},
            strip_default_attrs=True)
        builder.save()
    assets = os.path.join(work_dir, ASSETS_DIR)
    tf.io.gfile.makedirs(assets)
    tf.io.gfile.copy(vocab_file, os.path.join(assets, VOCAB_ASSET))
    tf.io.gfile.copy(bert_config_file, os.path.join(assets, CONFIG_ASSET))
    with tf.io.gfile.GFile(os.path.join(assets, SERVING_ASSET), "w") as f:
      f.write(json.dumps(config, indent=2, sort_keys=True) + "\n")
    # Durable before it is visible under its version: the folder's files
    # flushed to disk, then the rename (local file systems).
    io_utils.sync_to_disk(work_dir)
    path = _claim_version(export_dir, work_dir)
    io_utils.sync_folder(export_dir)
  finally:
    if tf.io.gfile.exists(work_dir):
      tf.io.gfile.rmtree(work_dir)
  logging.info("Exported SavedModel version %s", path)
  return path
