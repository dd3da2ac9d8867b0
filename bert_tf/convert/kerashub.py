"""KerasHub BERT presets <-> the TF release layout.

A preset (Kaggle's `keras/bert/...`): `config.json` (a Keras-serialized
`BertBackbone`), `model.weights.h5`, `tokenizer.json`,
`assets/tokenizer/vocabulary.txt` and, for a classifier, `task.json`
(`BertTextClassifier`) with `task.weights.h5`. Weights go through
`keras-hub` itself (Keras 3: the TF 2.21 stack's `./setup.sh --kerashub`;
TF 2.15 cannot); checking a folder needs no keras-hub.

Names (`H = A * D`; this project's are the reference's, SPEC section 3):

  token_embedding/embeddings [V, H]    <-> bert/embeddings/word_embeddings
  position_embedding/embeddings [P, H] <-> bert/embeddings/position_embeddings
  segment_embedding/embeddings [T, H]  <-> bert/embeddings/token_type_embeddings
  embeddings_layer_norm/{gamma,beta}   <-> bert/embeddings/LayerNorm/*
  transformer_layer_N/self_attention_layer/{query,key,value}/kernel [H, A, D]
                                       <-> .../layer_N/attention/self/*/kernel
                                           [H, H] (reshaped; bias [A, D] <-> [H])
  .../self_attention_layer/attention_output/kernel [A, D, H]
                                       <-> .../attention/output/dense/kernel
  .../self_attention_layer_norm        <-> .../attention/output/LayerNorm
  .../feedforward_intermediate_dense   <-> .../intermediate/dense
  .../feedforward_output_dense         <-> .../output/dense
  .../feedforward_layer_norm           <-> .../output/LayerNorm
  pooled_dense/{kernel,bias}           <-> bert/pooler/dense/*
  logits/kernel [H, C] (classifier)    <-> output_weights [C, H] (transposed),
  logits/bias [C]                      <-> output_bias (run_classifier.py)

`BertBackbone` uses the tanh GELU (this project's `gelu`), layer-norm
epsilon 1e-12 and one dropout rate for both of the reference's.
"""

import dataclasses
import json
import os
import shutil
import sys
import tempfile

from absl import logging
import numpy as np
import tensorflow.compat.v1 as tf

from bert_tf import json_file
from bert_tf.checks import config as config_checks
from bert_tf.convert import files
from bert_tf.convert.config import BERT_CONFIG_KEYS
from bert_tf.convert.weights import tf_to_hf_weights

__all__ = ["BACKBONE_CLASS", "CLASSIFIER_CLASS", "VOCABULARY_PATH",
           "Converted", "looks_like_preset", "preset_source_files",
           "read_lower_case", "read_backbone_config",
           "backbone_config_to_bert_config", "bert_config_to_backbone_config",
           "backbone_to_tf", "keras_table", "preset_to_checkpoint", "kerashub_to_tf",
           "checkpoint_to_preset", "import_keras_hub", "KerasHubUnavailable"]

BACKBONE_CLASS = "BertBackbone"
CLASSIFIER_CLASS = "BertTextClassifier"
WEIGHTS_FILE = "model.weights.h5"
TASK_FILE = "task.json"
# Where KerasHub's tokenizers keep their vocabulary inside a preset.
VOCABULARY_PATH = os.path.join("assets", "tokenizer", "vocabulary.txt")
_INSTALL_HINT = ("./setup.sh --kerashub, or pip install -r "
                 "requirements-kerashub.txt")
# Integer keys of a BertBackbone config and their bert_config.json names.
_BACKBONE_KEYS = (
    ("vocabulary_size", "vocab_size"), ("num_layers", "num_hidden_layers"),
    ("num_heads", "num_attention_heads"), ("hidden_dim", "hidden_size"),
    ("intermediate_dim", "intermediate_size"),
    ("max_sequence_length", "max_position_embeddings"),
    ("num_segments", "type_vocab_size"))
_BACKBONE_DEFAULTS = {"max_sequence_length": 512, "num_segments": 2,
                      "dropout": 0.1}
_GROUP_NOTES = {
    "mlm": "masked-LM head (cls/predictions/*)",
    "nsp": "next-sentence head (cls/seq_relationship/*)",
    "squad": "SQuAD head (cls/squad/*)",
    "ner": "token-classification head (cls/ner/*)",
}


class KerasHubUnavailable(ImportError):
  """keras-hub cannot be imported here; the message says how to get it."""


@dataclasses.dataclass(frozen=True)
class Converted:
  """What a preset conversion produced: `bert_config` (dict of
  `bert_config.json` keys), `groups` (set of "embeddings", "encoder",
  "pooler", "classifier") and `lower_case` (the tokenizer's `lowercase`;
  None without `tokenizer.json`)."""

  bert_config: dict
  groups: frozenset
  lower_case: object = None


def import_keras_hub():
  """Returns the `keras_hub` module.

  Raises:
    KerasHubUnavailable: one line: missing, or impossible on this stack.
  """
  if sys.version_info < (3, 12):
    raise KerasHubUnavailable(
        "KerasHub presets need keras-hub, which needs Keras 3: the "
        "TensorFlow 2.15 stack (Python %d.%d) cannot have it; convert on the "
        "TensorFlow 2.21 stack (Python 3.12-3.13) with %s" %
        (sys.version_info[0], sys.version_info[1], _INSTALL_HINT))
  try:
    # An optional extra: imported only when a preset is read or written.
    import keras_hub  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise KerasHubUnavailable("KerasHub presets need keras-hub (%s): install it with "
                      "%s" % (e, _INSTALL_HINT)) from e
  return keras_hub


def _read_serialized(path, expected_class):
  """The `config` object of a Keras-serialized file of `expected_class`.

  Raises:
    FileNotFoundError: `path` is not a file.
    ValueError: naming the file: not a Keras-serialized `expected_class`.
  """
  obj = files.read_json(path)
  class_name = json_file.field(obj, "class_name", "string", path)
  if class_name != expected_class:
    raise ValueError("%s: class_name is %r, expected %r (this converter "
                     "reads KerasHub BERT presets only)" %
                     (path, class_name, expected_class))
  return json_file.field(obj, "config", "object", path)


def looks_like_preset(folder):
  """Whether `folder`'s `config.json` is Keras-serialized (`class_name`,
  `config`), of any architecture (so that the conversion can say what is
  wrong); Hugging Face and release folders are not. Never raises."""
  path = os.path.join(folder, "config.json")
  if not os.path.isfile(path):
    return False
  try:
    obj = json_file.load(path)
  except (OSError, ValueError):
    return False
  return (isinstance(obj, dict) and isinstance(obj.get("class_name"), str)
          and isinstance(obj.get("config"), dict))


def read_backbone_config(preset_dir):
  """The `BertBackbone` config of a preset folder, checked.

  Raises:
    FileNotFoundError: no folder, `config.json` or `model.weights.h5`.
    ValueError: another architecture, or a key of the wrong kind; naming
      the file and the key.
  """
  if not os.path.isdir(preset_dir):
    raise FileNotFoundError("%s is not a folder (expected a KerasHub preset "
                            "folder: config.json, %s, %s)" %
                            (preset_dir, WEIGHTS_FILE, VOCABULARY_PATH))
  path = os.path.join(preset_dir, "config.json")
  if not os.path.isfile(path):
    raise FileNotFoundError("%s: no config.json (expected a KerasHub preset "
                            "folder: config.json, %s, %s)" %
                            (preset_dir, WEIGHTS_FILE, VOCABULARY_PATH))
  config = _read_serialized(path, BACKBONE_CLASS)
  for key, _ in _BACKBONE_KEYS:
    json_file.field(config, key, "integer", path, "config", minimum=1,
                    default=_BACKBONE_DEFAULTS.get(key, json_file.MISSING))
  json_file.field(config, "dropout", "number", path, "config", minimum=0,
                  maximum=1, default=0.1)
  weights = os.path.join(preset_dir, WEIGHTS_FILE)
  if not os.path.isfile(weights):
    raise FileNotFoundError("%s: no %s (the backbone's weights; found: %s)" %
                            (preset_dir, WEIGHTS_FILE,
                             ", ".join(sorted(os.listdir(preset_dir)))))
  return config


def backbone_config_to_bert_config(config, source="config.json"):
  """Maps a `BertBackbone` config to `bert_config.json`'s eleven keys:
  `hidden_act` "gelu" (tanh form), both dropouts the backbone's `dropout`,
  `initializer_range` 0.02 (a preset does not record it).

  Raises:
    ValueError: sizes that make no BERT, naming `source`.
  """
  bert_config = {name: config.get(key, _BACKBONE_DEFAULTS.get(key))
                 for key, name in _BACKBONE_KEYS}
  dropout = config.get("dropout", _BACKBONE_DEFAULTS["dropout"])
  bert_config.update({"hidden_act": "gelu", "hidden_dropout_prob": dropout,
                      "attention_probs_dropout_prob": dropout,
                      "initializer_range": 0.02})
  bert_config = {key: bert_config[key] for key in BERT_CONFIG_KEYS}
  config_checks.check_bert_config_json(bert_config, source, flag_name=None)
  return bert_config


def bert_config_to_backbone_config(bert_config, source="bert_config.json"):
  """Maps a `bert_config.json` dict to `BertBackbone` keyword arguments.

  Raises:
    ValueError: an activation other than "gelu", naming `source`.
  """
  act = bert_config.get("hidden_act", "gelu")
  if act != "gelu":
    raise ValueError("%s: hidden_act = %r, expected 'gelu' (KerasHub's "
                     "BertBackbone uses the tanh approximation of GELU only)"
                     % (source, act))
  hidden, attention = (bert_config.get("hidden_dropout_prob", 0.1),
                       bert_config.get("attention_probs_dropout_prob", 0.1))
  if hidden != attention:
    logging.warning("%s: hidden_dropout_prob %s and "
                    "attention_probs_dropout_prob %s differ; KerasHub has one "
                    "dropout rate: %s", source, hidden, attention, hidden)
  config = {key: bert_config[name] for key, name in _BACKBONE_KEYS}
  config["dropout"] = hidden
  return config


def keras_table(bert_config):
  """Every backbone weight as (KerasHub path, TF name, KerasHub shape, TF
  shape), in the released checkpoints' order."""
  h = bert_config["hidden_size"]
  heads = bert_config["num_attention_heads"]
  per_head = h // heads
  inter = bert_config["intermediate_size"]

  def same(keras_path, tf_name, shape):
    return [(keras_path, tf_name, shape, shape)]

  def norm(keras_scope, tf_scope):
    return (same(keras_scope + "/gamma", tf_scope + "/gamma", (h,)) +
            same(keras_scope + "/beta", tf_scope + "/beta", (h,)))

  def dense(keras_scope, tf_scope, n_in, n_out):
    return (same(keras_scope + "/kernel", tf_scope + "/kernel", (n_in, n_out))
            + same(keras_scope + "/bias", tf_scope + "/bias", (n_out,)))

  table = (same("token_embedding/embeddings",
                "bert/embeddings/word_embeddings",
                (bert_config["vocab_size"], h)) +
           same("position_embedding/embeddings",
                "bert/embeddings/position_embeddings",
                (bert_config["max_position_embeddings"], h)) +
           same("segment_embedding/embeddings",
                "bert/embeddings/token_type_embeddings",
                (bert_config["type_vocab_size"], h)) +
           norm("embeddings_layer_norm", "bert/embeddings/LayerNorm"))
  for i in range(bert_config["num_hidden_layers"]):
    keras_layer = "transformer_layer_%d/" % i
    tf_layer = "bert/encoder/layer_%d/" % i
    attention = keras_layer + "self_attention_layer/"
    for part in ("query", "key", "value"):
      table += [(attention + part + "/kernel",
                 tf_layer + "attention/self/%s/kernel" % part,
                 (h, heads, per_head), (h, h)),
                (attention + part + "/bias",
                 tf_layer + "attention/self/%s/bias" % part,
                 (heads, per_head), (h,))]
    table += [(attention + "attention_output/kernel",
               tf_layer + "attention/output/dense/kernel",
               (heads, per_head, h), (h, h))]
    table += same(attention + "attention_output/bias",
                  tf_layer + "attention/output/dense/bias", (h,))
    table += norm(keras_layer + "self_attention_layer_norm",
                  tf_layer + "attention/output/LayerNorm")
    table += dense(keras_layer + "feedforward_intermediate_dense",
                   tf_layer + "intermediate/dense", h, inter)
    table += dense(keras_layer + "feedforward_output_dense",
                   tf_layer + "output/dense", inter, h)
    table += norm(keras_layer + "feedforward_layer_norm",
                  tf_layer + "output/LayerNorm")
  return table + dense("pooled_dense", "bert/pooler/dense", h, h)


def backbone_to_tf(keras_values, bert_config, source):
  """Renames and reshapes backbone arrays (keyed by KerasHub path) to TF.

  Raises:
    ValueError: a missing or misshapen weight, naming `source` and shapes.
  """
  tf_tensors = {}
  for keras_path, tf_name, keras_shape, tf_shape in keras_table(bert_config):
    if keras_path not in keras_values:
      raise ValueError("%s: no weight %r" % (source, keras_path))
    value = np.asarray(keras_values[keras_path], dtype=np.float32)
    if tuple(value.shape) != tuple(keras_shape):
      raise ValueError("%s: weight %r has shape %s, expected %s" %
                       (source, keras_path, list(value.shape),
                        list(keras_shape)))
    tf_tensors[tf_name] = np.ascontiguousarray(value.reshape(tf_shape))
  return tf_tensors


def _weights_h5_shapes(path):
  """{layer path: [shapes]} of a Keras `.weights.h5` (each layer's `vars`
  group; nested layers nest), for messages; {} when unreadable."""
  # h5py comes with TensorFlow; only this diagnosis reads the file itself.
  import h5py  # pylint: disable=g-import-not-at-top
  found = {}
  try:
    with h5py.File(path, "r") as f:
      def visit(name, obj):
        if not (isinstance(obj, h5py.Group) and name.endswith("/vars")):
          return
        parts, group = [], name[:-len("/vars")]
        while group:
          layer_name = f[group + "/vars"].attrs.get("name") if (
              group + "/vars") in f else None
          if layer_name is not None:
            parts.insert(0, str(layer_name))
          group = group.rpartition("/")[0]
        shapes = [list(obj[key].shape) for key in sorted(obj, key=int)]
        if shapes:
          found["/".join(parts)] = shapes
      f.visititems(visit)
  except (OSError, ValueError, KeyError):
    return {}
  return found


def _load_failure(preset_dir, model, weights_path, error):
  """One line for weights Keras could not load into `model`: the layer
  whose saved shapes differ, else Keras's message, naming `weights_path`."""
  saved = _weights_h5_shapes(os.path.join(preset_dir, WEIGHTS_FILE))
  expected = {}
  for variable in model.weights:
    layer = variable.path.rpartition("/")[0]
    expected.setdefault(layer, []).append(list(variable.shape))
  for layer, shapes in expected.items():
    if layer in saved and saved[layer] != shapes:
      return ValueError("%s: layer %r holds weights of shapes %s, expected %s "
                        "(from %s)" % (os.path.join(preset_dir, WEIGHTS_FILE),
                                       layer, saved[layer], shapes,
                                       os.path.join(preset_dir,
                                                    "config.json")))
  return ValueError("%s: not Keras weights that fit %s (%s)" %
                    (weights_path, os.path.join(preset_dir, "config.json"),
                     " ".join(str(error).split())[:300]))


def _load_model(cls, preset_dir, weights_path):
  """`cls.from_preset(preset_dir)` in float32.

  Raises:
    ValueError: the weights do not load (`_load_failure`).
  """
  try:
    return cls.from_preset(preset_dir, dtype="float32")
  except (ValueError, OSError) as e:
    bare = cls.from_preset(preset_dir, dtype="float32", load_weights=False)
    raise _load_failure(preset_dir, bare, weights_path, e) from e


def _read_classifier(keras_hub, preset_dir, bert_config):
  """(TF head tensors, backbone) of a preset's `BertTextClassifier`."""
  task_path = os.path.join(preset_dir, TASK_FILE)
  task_config = _read_serialized(task_path, CLASSIFIER_CLASS)
  num_classes = json_file.field(task_config, "num_classes", "integer",
                                task_path, "config", minimum=1)
  activation = task_config.get("activation")
  if activation not in (None, "linear"):
    logging.warning("%s: activation %r: this project's classifier head "
                    "gives logits (its probabilities are their softmax)",
                    task_path, activation)
  weights_path = os.path.join(preset_dir, "task.weights.h5")
  if not os.path.isfile(weights_path):
    raise FileNotFoundError("%s: no task.weights.h5 (the classifier's "
                            "weights, which %s names)" % (preset_dir,
                                                          TASK_FILE))
  task = _load_model(keras_hub.models.BertTextClassifier, preset_dir,
                     weights_path)
  values = {v.path: v.numpy() for v in task.output_dense.weights}
  kernel = np.asarray(values.get("logits/kernel"), np.float32)
  bias = np.asarray(values.get("logits/bias"), np.float32)
  if kernel.shape != (bert_config["hidden_size"], num_classes) or (
      bias.shape != (num_classes,)):
    raise ValueError("%s: classifier weights of shapes %s and %s, expected "
                     "[%d, %d] and [%d]" %
                     (weights_path, list(kernel.shape), list(bias.shape),
                      bert_config["hidden_size"], num_classes, num_classes))
  head = {"output_weights": np.ascontiguousarray(kernel.T),
          "output_bias": bias}
  return head, task.backbone


def preset_source_files(preset_dir):
  """The files of a preset that a conversion reads (those present).

  Raises:
    FileNotFoundError: no `model.weights.h5`, naming the folder.
  """
  weights = os.path.join(preset_dir, WEIGHTS_FILE)
  if not os.path.isfile(weights):
    raise FileNotFoundError("%s: no %s (a KerasHub preset's weights)" %
                            (preset_dir, WEIGHTS_FILE))
  names = ("config.json", WEIGHTS_FILE, TASK_FILE, "task.weights.h5",
           "tokenizer.json", VOCABULARY_PATH)
  return [os.path.join(preset_dir, name) for name in names
          if os.path.isfile(os.path.join(preset_dir, name))]


def read_lower_case(preset_dir):
  """The preset tokenizer's `lowercase`, or None without tokenizer.json."""
  path = os.path.join(preset_dir, "tokenizer.json")
  if not os.path.isfile(path):
    return None
  config = json_file.field(files.read_json(path), "config", "object", path)
  lower = json_file.field(config, "lowercase", "boolean", path, "config",
                          default=False)
  strip = json_file.field(config, "strip_accents", "boolean", path, "config",
                          default=False)
  if lower != strip:
    logging.warning("%s: lowercase=%s but strip_accents=%s; this project's "
                    "--do_lower_case does both or neither", path, lower,
                    strip)
  return lower


def _read_preset(preset_dir):
  """(TF tensors, bert_config, groups) of a preset folder."""
  config = read_backbone_config(preset_dir)
  source = os.path.join(preset_dir, "config.json")
  bert_config = backbone_config_to_bert_config(config, source)
  keras_hub = import_keras_hub()
  weights_path = os.path.join(preset_dir, WEIGHTS_FILE)
  head = {}
  if os.path.isfile(os.path.join(preset_dir, TASK_FILE)):
    head, backbone = _read_classifier(keras_hub, preset_dir, bert_config)
  else:
    backbone = _load_model(keras_hub.models.BertBackbone, preset_dir,
                           weights_path)
  values = {v.path: v.numpy() for v in backbone.weights}
  tf_tensors = backbone_to_tf(values, bert_config, weights_path)
  tf_tensors.update(head)
  groups = {"embeddings", "encoder", "pooler"} | (
      {"classifier"} if head else set())
  return tf_tensors, bert_config, frozenset(groups)


def preset_to_checkpoint(preset_dir, output_prefix):
  """Converts a KerasHub BERT preset to a TF checkpoint at `output_prefix`.

  The reference's variable names, plus `output_weights`/`output_bias` for
  a `BertTextClassifier`; written data first, index last. Returns
  `Converted`.

  Raises:
    FileNotFoundError: a missing folder or file, named.
    ValueError: another architecture, a bad config key or weights that do
      not fit the config, naming the file and what was expected.
    KerasHubUnavailable: no keras-hub here.
  """
  tf_tensors, bert_config, groups = _read_preset(preset_dir)
  folder = os.path.dirname(os.path.abspath(output_prefix))
  os.makedirs(folder, exist_ok=True)
  tmp = tempfile.mkdtemp(prefix=".preset-", dir=folder)
  try:
    name = os.path.basename(output_prefix)
    files.write_tf_checkpoint(tf_tensors, os.path.join(tmp, name))
    written = sorted(os.listdir(tmp), key=lambda n: n.endswith(".index"))
    for part in written:
      os.replace(os.path.join(tmp, part), os.path.join(folder, part))
  finally:
    shutil.rmtree(tmp, ignore_errors=True)
  return Converted(bert_config, groups, read_lower_case(preset_dir))


def kerashub_to_tf(preset_dir, output_dir):
  """Converts a preset folder into `output_dir` (new or empty):
  `bert_config.json`, `bert_model.ckpt.*` and `vocab.txt`. Returns
  `Converted`.

  Raises:
    As `preset_to_checkpoint`; FileNotFoundError: no vocabulary.
  """
  files.check_output_dir(output_dir)
  backbone_config_to_bert_config(read_backbone_config(preset_dir),
                                 os.path.join(preset_dir, "config.json"))
  vocab_path = os.path.join(preset_dir, VOCABULARY_PATH)
  if not os.path.isfile(vocab_path):
    raise FileNotFoundError("%s: no %s (the tokenizer's vocabulary, which "
                            "becomes vocab.txt)" % (preset_dir,
                                                    VOCABULARY_PATH))
  with files.atomic_output_dir(output_dir) as tmp:
    converted = preset_to_checkpoint(preset_dir,
                                     os.path.join(tmp, "bert_model.ckpt"))
    with open(os.path.join(tmp, "bert_config.json"), "w",
              encoding="utf-8") as f:
      f.write(json.dumps(converted.bert_config, indent=2) + "\n")
    shutil.copyfile(vocab_path, os.path.join(tmp, "vocab.txt"))
  logging.info("Converted %s: %s", preset_dir,
               ", ".join(sorted(converted.groups)))
  if converted.lower_case is not None:
    logging.info("The preset's tokenizer has lowercase=%s: pass "
                 "--do_lower_case=%s to the scripts", converted.lower_case,
                 converted.lower_case)
  return converted


def checkpoint_to_preset(checkpoint, output_dir, bert_config_file=None,
                         vocab_file=None, do_lower_case=True):
  """Converts this project's checkpoint to a KerasHub BERT preset.

  It loads with `BertBackbone.from_preset` (and, with `output_weights`,
  `BertTextClassifier.from_preset`). KerasHub has no next-sentence, SQuAD
  or NER head and its `BertMaskedLM` differs (exact GELU, epsilon 1e-5):
  those are left out, with a warning. `checkpoint`: a prefix, its `.index`
  or a folder; config and vocabulary default to the files beside it.
  Returns the set of groups converted.

  Raises:
    FileNotFoundError: missing checkpoint, config or vocabulary, named.
    ValueError: unknown, missing or misshapen variables, or an activation
      KerasHub's BERT lacks, naming them.
    KerasHubUnavailable: no keras-hub here.
  """
  files.check_output_dir(output_dir)
  prefix = files.resolve_tf_checkpoint(checkpoint)
  folder = os.path.dirname(prefix)
  bert_config_file = bert_config_file or os.path.join(folder,
                                                      "bert_config.json")
  vocab_file = vocab_file or os.path.join(folder, "vocab.txt")
  for path, flag in ((bert_config_file, "bert_config_file"),
                     (vocab_file, "vocab_file")):
    if not tf.io.gfile.exists(path):
      raise FileNotFoundError("%s not found: pass --%s" % (path, flag))
  bert_config = files.read_json(bert_config_file)
  config_checks.check_bert_config_json(bert_config, bert_config_file,
                                       flag_name=None)
  backbone_config = bert_config_to_backbone_config(bert_config,
                                                   bert_config_file)
  tf_tensors = files.read_tf_checkpoint(prefix)
  # The Hugging Face name table checks every variable: unknown, missing
  # and misshapen ones are named, each head is complete or absent.
  _, groups = tf_to_hf_weights(tf_tensors, bert_config, prefix)
  for group in sorted(groups & set(_GROUP_NOTES)):
    logging.warning("%s: the %s is left out (a preset gets the backbone and "
                    "a classifier head only)", prefix, _GROUP_NOTES[group])
  keras_hub = import_keras_hub()
  backbone = keras_hub.models.BertBackbone(dtype="float32", **backbone_config)
  _assign(backbone.weights, _tf_to_keras(tf_tensors, bert_config), prefix)
  tokenizer = keras_hub.models.BertTokenizer(
      vocabulary=vocab_file, lowercase=bool(do_lower_case),
      strip_accents=bool(do_lower_case))
  with files.atomic_output_dir(output_dir) as tmp:
    if "classifier" in groups:
      _save_classifier(keras_hub, backbone, tokenizer, tf_tensors,
                       bert_config, tmp)
    else:
      backbone.save_to_preset(tmp)
      tokenizer.save_to_preset(tmp)
  converted = {"embeddings", "encoder", "pooler"} | (groups & {"classifier"})
  logging.info("Wrote a KerasHub preset (%s) to %s", ", ".join(
      sorted(converted)), output_dir)
  return converted


def _tf_to_keras(tf_tensors, bert_config):
  """{KerasHub path: array} of the backbone, reshaped from the TF names."""
  return {keras_path: np.reshape(tf_tensors[tf_name], keras_shape)
          for keras_path, tf_name, keras_shape, _ in keras_table(bert_config)}


def _assign(variables, values, source):
  """Assigns `values` (by variable path) to every one of `variables`.

  Raises:
    ValueError: a missing or misshapen value, naming `source` and it.
  """
  for variable in variables:
    value = values.get(variable.path)
    if value is None or tuple(value.shape) != tuple(variable.shape):
      raise ValueError("%s: nothing of shape %s for KerasHub's %r" %
                       (source, list(variable.shape), variable.path))
    variable.assign(value)


def _save_classifier(keras_hub, backbone, tokenizer, tf_tensors, bert_config,
                     folder):
  """Saves a `BertTextClassifier` preset with the checkpoint's head."""
  weights = tf_tensors["output_weights"]
  num_classes = weights.shape[0]
  preprocessor = keras_hub.models.BertTextClassifierPreprocessor(
      tokenizer,
      sequence_length=min(512, bert_config["max_position_embeddings"]))
  classifier = keras_hub.models.BertTextClassifier(
      backbone, num_classes, preprocessor=preprocessor,
      dropout=bert_config.get("hidden_dropout_prob", 0.1))
  _assign(classifier.output_dense.weights,
          {"logits/kernel": np.ascontiguousarray(weights.T),
           "logits/bias": tf_tensors["output_bias"]}, "output_weights")
  classifier.save_to_preset(folder)
