"""Converts BERT checkpoints between the Hugging Face and TF release layouts.

Most BERT-family weights are published today as a Hugging Face folder
(`config.json`, `model.safetensors`, `vocab.txt`); every script of this project
reads Google's release layout (`bert_config.json`, `bert_model.ckpt.*`,
`vocab.txt`). This script converts both ways:

  # Hugging Face folder -> bert_config.json + bert_model.ckpt + vocab.txt
  python convert_checkpoint.py --direction=hf_to_tf --input=HF_DIR \
      --output=TF_DIR
  # this project's checkpoint -> a folder that Hugging Face's BertModel and
  # BertForPreTraining load (BertForSequenceClassification or
  # BertForQuestionAnswering or BertForTokenClassification for fine-tuned
  # heads)
  python convert_checkpoint.py --direction=tf_to_hf --input=CKPT \
      --output=HF_DIR [--bert_config_file=...] [--vocab_file=...]

Tensor names (Hugging Face side as `BertForPreTraining` writes them; reading
also accepts them without the `bert.` prefix and old `LayerNorm.gamma/beta`):

  bert.embeddings.{word,position,token_type}_embeddings.weight
                                       <-> bert/embeddings/{...}_embeddings
  *.LayerNorm.weight, *.LayerNorm.bias <-> */LayerNorm/gamma, */LayerNorm/beta
  *.{query,key,value,dense}.weight [out, in]
                                       <-> */kernel [in, out] (transposed)
  bert.encoder.layer.N.*               <-> bert/encoder/layer_N/*
  cls.predictions.bias                 <-> cls/predictions/output_bias
  cls.predictions.decoder.weight       tied to the word embeddings (checked)
  cls.seq_relationship.weight [2, H]   <-> cls/seq_relationship/output_weights
  classifier.weight [num_labels, H]    <-> output_weights (run_classifier.py)
  qa_outputs.weight [2, H]             <-> cls/squad/output_weights (SQuAD)
  classifier.weight [num_labels, H]    <-> cls/ner/output_weights (run_ner.py),
                                       when config.json's architectures name
                                       BertForTokenClassification

Weights are read with the `safetensors` numpy API: PyTorch pickles
(`pytorch_model.bin`) are never loaded. Activations are mapped by meaning:
Hugging Face `gelu` is the exact erf form (this project's `gelu_exact`),
`gelu_new` / `gelu_pytorch_tanh` are the tanh approximation (this project's
`gelu`). Every output folder is written under a temporary name and renamed
when complete.

Public names: `hf_to_tf`, `tf_to_hf` (the two directions), `tensor_table`,
`hf_to_tf_weights`, `tf_to_hf_weights`, `hf_config_to_bert_config`,
`bert_config_to_hf_config`, `read_hf_weights`, `read_tf_checkpoint`,
`write_tf_checkpoint`, `resolve_tf_checkpoint`.
"""
import bert_tf.cli  # pylint: disable=unused-import  # First: quiets TensorFlow's start-up log.

import contextlib
import json
import math
import os

from absl import flags
from absl import logging
# ml_dtypes (a TensorFlow dependency) registers numpy's bfloat16, so the
# safetensors numpy API can read bf16 checkpoints.
import ml_dtypes
import numpy as np
from safetensors import safe_open
from safetensors.numpy import save_file as save_safetensors
import tensorflow.compat.v1 as tf

from bert_tf import io as io_utils
from bert_tf.cli import runner
from bert_tf.cli import startup

FLAGS = flags.FLAGS

BERT_CONFIG_KEYS = (
    "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
    "intermediate_size", "hidden_act", "hidden_dropout_prob",
    "attention_probs_dropout_prob", "max_position_embeddings",
    "type_vocab_size", "initializer_range")

# Defaults of Hugging Face's BertConfig, used for keys a config.json omits.
_HF_DEFAULTS = {
    "vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12,
    "num_attention_heads": 12, "intermediate_size": 3072, "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
    "max_position_embeddings": 512, "type_vocab_size": 2,
    "initializer_range": 0.02, "layer_norm_eps": 1e-12,
}

# Hugging Face activation name -> this project's name, by meaning.
_HF_TO_TF_ACT = {
    "gelu": "gelu_exact",          # erf form.
    "gelu_python": "gelu_exact",   # erf form, pure Python.
    "gelu_new": "gelu",            # tanh approximation.
    "gelu_pytorch_tanh": "gelu",   # tanh approximation, fused.
    "gelu_fast": "gelu",           # tanh approximation, refactored.
    "relu": "relu", "tanh": "tanh", "linear": "linear",
}
_TF_TO_HF_ACT = {
    "gelu": "gelu_new", "gelu_exact": "gelu", "relu": "relu", "tanh": "tanh",
    "linear": "linear", "": "linear", None: "linear",
}

# Tensor groups: the encoder must be complete; each head is all-or-nothing.
_REQUIRED_GROUPS = ("embeddings", "encoder")
_GROUP_DESCRIPTIONS = {
    "pooler": "pooler (bert/pooler/*; BertModel initialises it randomly)",
    "mlm": "masked-LM head (cls/predictions/*)",
    "nsp": "next-sentence head (cls/seq_relationship/*)",
    "classifier": "classifier head (output_weights, output_bias)",
    "squad": "SQuAD head (cls/squad/*)",
    "ner": "token-classification head (cls/ner/*)",
}
# Hugging Face buffers that are not weights (skipped when reading).
_HF_BUFFERS = ("bert.embeddings.position_ids", "bert.embeddings.token_type_ids")
# TF checkpoint variables that are not weights: optimizer state.
_TF_SKIPPED_SUFFIXES = ("/adam_m", "/adam_v")
_TF_SKIPPED_NAMES = ("global_step",)
_TIED_DECODER = "cls.predictions.decoder.weight"
_DECODER_BIAS = "cls.predictions.decoder.bias"
_PYTORCH_BIN_HINT = (
    "this converter never unpickles PyTorch files; convert it to safetensors "
    "first, e.g. python -c \"import torch, safetensors.torch as s; "
    "s.save_file({k: v.clone().contiguous() for k, v in torch.load("
    "'%s', weights_only=True).items()}, '%s')\"")


class _Tensor(object):
  """One entry of the name table: a TF variable and its Hugging Face tensor."""

  def __init__(self, tf_name, hf_name, shape, group, transpose=False):
    self.tf_name = tf_name
    self.hf_name = hf_name
    self.shape = shape          # TF-side shape; None marks a free dimension.
    self.group = group
    self.transpose = transpose  # Hugging Face Linear weights are [out, in].


def _dense(tf_scope, hf_scope, in_size, out_size, group):
  return [_Tensor(tf_scope + "/kernel", hf_scope + ".weight",
                  (in_size, out_size), group, transpose=True),
          _Tensor(tf_scope + "/bias", hf_scope + ".bias", (out_size,), group)]


def _layer_norm(tf_scope, hf_scope, size, group):
  return [_Tensor(tf_scope + "/gamma", hf_scope + ".weight", (size,), group),
          _Tensor(tf_scope + "/beta", hf_scope + ".bias", (size,), group)]


def tensor_table(bert_config, token_classification=False):
  """Every tensor a BERT checkpoint may hold, with its name in both layouts.

  Args:
    bert_config: dict with this project's `bert_config.json` keys.
    token_classification: bool; Hugging Face's `classifier.*` is then the
      token-classification head `cls/ner/*` (BertForTokenClassification)
      instead of the sequence classifier `output_weights`/`output_bias`.

  Returns:
    List of `_Tensor` (tf_name, hf_name, TF-side shape, group, transpose), in
    the order of the released checkpoints: embeddings, encoder layers,
    pooler, then the heads.
  """
  h = bert_config["hidden_size"]
  inter = bert_config["intermediate_size"]
  vocab = bert_config["vocab_size"]
  table = [
      _Tensor("bert/embeddings/word_embeddings",
              "bert.embeddings.word_embeddings.weight", (vocab, h),
              "embeddings"),
      _Tensor("bert/embeddings/token_type_embeddings",
              "bert.embeddings.token_type_embeddings.weight",
              (bert_config["type_vocab_size"], h), "embeddings"),
      _Tensor("bert/embeddings/position_embeddings",
              "bert.embeddings.position_embeddings.weight",
              (bert_config["max_position_embeddings"], h), "embeddings"),
  ]
  table += _layer_norm("bert/embeddings/LayerNorm", "bert.embeddings.LayerNorm",
                       h, "embeddings")
  for i in range(bert_config["num_hidden_layers"]):
    tf_layer = "bert/encoder/layer_%d/" % i
    hf_layer = "bert.encoder.layer.%d." % i
    for sub, n_in, n_out in (("attention/self/query", h, h),
                             ("attention/self/key", h, h),
                             ("attention/self/value", h, h),
                             ("attention/output/dense", h, h),
                             ("intermediate/dense", h, inter),
                             ("output/dense", inter, h)):
      table += _dense(tf_layer + sub, hf_layer + sub.replace("/", "."),
                      n_in, n_out, "encoder")
    for sub in ("attention/output/LayerNorm", "output/LayerNorm"):
      table += _layer_norm(tf_layer + sub, hf_layer + sub.replace("/", "."), h,
                           "encoder")
  table += _dense("bert/pooler/dense", "bert.pooler.dense", h, h, "pooler")
  return table + _head_table(h, vocab, token_classification)


def _head_table(h, vocab, token_classification=False):
  """The pre-training, classifier, SQuAD and NER heads (see `tensor_table`)."""
  table = _dense("cls/predictions/transform/dense",
                 "cls.predictions.transform.dense", h, h, "mlm")
  table += _layer_norm("cls/predictions/transform/LayerNorm",
                       "cls.predictions.transform.LayerNorm", h, "mlm")
  table += [
      _Tensor("cls/predictions/output_bias", "cls.predictions.bias", (vocab,),
              "mlm"),
      # [num_classes, hidden] in both layouts (TF multiplies with transpose_b).
      _Tensor("cls/seq_relationship/output_weights",
              "cls.seq_relationship.weight", (2, h), "nsp"),
      _Tensor("cls/seq_relationship/output_bias", "cls.seq_relationship.bias",
              (2,), "nsp"),
      _Tensor("cls/squad/output_weights", "qa_outputs.weight", (2, h), "squad"),
      _Tensor("cls/squad/output_bias", "qa_outputs.bias", (2,), "squad"),
  ]
  # Both fine-tuned classifiers are `classifier.*` in Hugging Face; which one
  # a folder holds is told by its config's architectures.
  scope, group = (("cls/ner/", "ner") if token_classification
                  else ("", "classifier"))
  table += [
      _Tensor(scope + "output_weights", "classifier.weight", (None, h), group),
      _Tensor(scope + "output_bias", "classifier.bias", (None,), group),
  ]
  return table


def is_token_classification(hf_config):
  """Whether a Hugging Face `config.json` dict is a token classifier."""
  return any(str(name).endswith("ForTokenClassification")
             for name in hf_config.get("architectures") or ())


# ---------------------------------------------------------------------------
# Configs.


def hf_config_to_bert_config(hf_config, source="config.json"):
  """Maps a Hugging Face BERT `config.json` dict to a `bert_config.json` dict.

  Args:
    hf_config: dict read from a Hugging Face `config.json`.
    source: file name used in error messages.

  Returns:
    dict with the eleven `BERT_CONFIG_KEYS`, `hidden_act` mapped by meaning.

  Raises:
    ValueError: naming the key, when the model is not a BERT this project can
      run: another `model_type` (RoBERTa's position offset, ALBERT, ...),
      `layer_norm_eps` other than 1e-12, relative position embeddings, a
      decoder, a factorized embedding size, or an unknown activation.
  """
  def fail(key, expected):
    raise ValueError("%s: %s = %r, expected %s" %
                     (source, key, hf_config.get(key), expected))

  model_type = hf_config.get("model_type", "bert")
  if model_type != "bert":
    fail("model_type", "'bert' (this project runs BERT only; e.g. RoBERTa "
         "offsets its position ids by the padding id)")
  eps = hf_config.get("layer_norm_eps", _HF_DEFAULTS["layer_norm_eps"])
  if not math.isclose(eps, 1e-12, rel_tol=1e-6):
    fail("layer_norm_eps", "1e-12 (this project's layer norm epsilon)")
  if hf_config.get("position_embedding_type", "absolute") != "absolute":
    fail("position_embedding_type", "'absolute'")
  for key in ("is_decoder", "add_cross_attention"):
    if hf_config.get(key):
      fail(key, "false (an encoder)")
  if hf_config.get("embedding_size", hf_config.get("hidden_size")) != (
      hf_config.get("hidden_size")):
    fail("embedding_size", "hidden_size (no factorized embeddings)")
  config = {key: hf_config.get(key, _HF_DEFAULTS[key])
            for key in BERT_CONFIG_KEYS}
  if config["hidden_act"] not in _HF_TO_TF_ACT:
    fail("hidden_act", "one of %s" % ", ".join(sorted(_HF_TO_TF_ACT)))
  config["hidden_act"] = _HF_TO_TF_ACT[config["hidden_act"]]
  return config


def bert_config_to_hf_config(bert_config, architectures, num_labels=None):
  """Maps a `bert_config.json` dict to a Hugging Face `config.json` dict.

  Args:
    bert_config: dict with this project's `bert_config.json` keys.
    architectures: list of Hugging Face class names (["BertForPreTraining"]).
    num_labels: optional int, classes of a classifier head.

  Returns:
    dict for `config.json` (model_type "bert", layer_norm_eps 1e-12).

  Raises:
    ValueError: if `hidden_act` has no Hugging Face equivalent.
  """
  act = bert_config.get("hidden_act", "gelu")
  if act not in _TF_TO_HF_ACT:
    raise ValueError("bert_config: hidden_act = %r, expected one of %s" %
                     (act, ", ".join(sorted(k for k in _TF_TO_HF_ACT if k))))
  config = {"architectures": list(architectures), "model_type": "bert"}
  for key in BERT_CONFIG_KEYS:
    config[key] = bert_config.get(key, _HF_DEFAULTS[key])
  config["hidden_act"] = _TF_TO_HF_ACT[act]
  config.update({"layer_norm_eps": 1e-12, "pad_token_id": 0,
                 "position_embedding_type": "absolute",
                 "tie_word_embeddings": True, "torch_dtype": "float32"})
  if num_labels is not None:
    config["id2label"] = {str(i): "LABEL_%d" % i for i in range(num_labels)}
    config["label2id"] = {"LABEL_%d" % i: i for i in range(num_labels)}
  return config


# ---------------------------------------------------------------------------
# Weights.


def _architectures(groups):
  """Hugging Face class names for the heads present, most specific first."""
  if "squad" in groups:
    return ["BertForQuestionAnswering"]
  if "ner" in groups:
    return ["BertForTokenClassification"]
  if "classifier" in groups:
    return ["BertForSequenceClassification"]
  if "mlm" in groups and "nsp" in groups:
    return ["BertForPreTraining"]
  if "mlm" in groups:
    return ["BertForMaskedLM"]
  if "nsp" in groups:
    return ["BertForNextSentencePrediction"]
  return ["BertModel"]


def _canonical_hf_name(name):
  """`bert.`-prefixed name with `.weight`/`.bias` layer-norm suffixes."""
  if name.startswith(("embeddings.", "encoder.", "pooler.")):
    name = "bert." + name
  if ".LayerNorm." in name:
    # Old checkpoints name layer-norm parameters gamma/beta.
    name = name.replace(".LayerNorm.gamma", ".LayerNorm.weight")
    name = name.replace(".LayerNorm.beta", ".LayerNorm.bias")
  return name


def _as_float32(name, value):
  """float32 copy of a float array; integer weights are an error."""
  if value.dtype == np.float32:
    return value
  if value.dtype.kind == "f" or value.dtype == ml_dtypes.bfloat16:
    return value.astype(np.float32)
  raise ValueError("tensor %r has dtype %s, expected a float type" %
                   (name, value.dtype))


def _untie_decoder(tensors, source):
  """Removes the tied masked-LM decoder tensors after checking the tie.

  This project's layout ties the masked-LM output weights to the word
  embeddings; an untied decoder cannot be represented.
  """
  word_name = "bert.embeddings.word_embeddings.weight"
  decoder = tensors.pop(_TIED_DECODER, None)
  if decoder is not None and word_name in tensors and not np.array_equal(
      decoder, tensors[word_name]):
    raise ValueError("%s: tensor %r differs from %r; this project ties the "
                     "masked-LM output weights to the word embeddings" %
                     (source, _TIED_DECODER, word_name))
  bias = tensors.pop(_DECODER_BIAS, None)
  if bias is not None:
    own = tensors.setdefault("cls.predictions.bias", bias)
    if own.shape != bias.shape or not np.array_equal(own, bias):
      raise ValueError("%s: tensor %r differs from 'cls.predictions.bias'" %
                       (source, _DECODER_BIAS))


def _map_tensors(tensors, table, to_tf, source):
  """Renames, transposes and checks tensors along `table` (either direction).

  Returns:
    (mapped, groups): dict of converted float32 arrays keyed by target name,
    and the set of groups present (each complete).

  Raises:
    ValueError: naming the tensor, for a shape mismatch, an unknown tensor, a
      partial group or a missing required group.
  """
  mapped, present = {}, {}
  for entry in table:
    src, dst = ((entry.hf_name, entry.tf_name) if to_tf
                else (entry.tf_name, entry.hf_name))
    if src not in tensors:
      continue
    value = _as_float32(src, tensors[src])
    expected = entry.shape[::-1] if (to_tf and entry.transpose) else entry.shape
    if len(value.shape) != len(expected) or any(
        e is not None and e != g for e, g in zip(expected, value.shape)):
      raise ValueError("%s: tensor %r has shape %s, expected %s" %
                       (source, src, list(value.shape),
                        [("num_labels" if e is None else e) for e in expected]))
    mapped[dst] = np.ascontiguousarray(value.T if entry.transpose else value)
    present.setdefault(entry.group, []).append(entry)
  unknown = sorted(set(tensors) - {e.hf_name if to_tf else e.tf_name
                                   for e in table})
  if unknown:
    raise ValueError("%s: unknown tensor %r (%d unknown in all; not a weight "
                     "of BertModel or of a supported head)" %
                     (source, unknown[0], len(unknown)))
  _check_groups(present, table, to_tf, source)
  _check_num_labels(mapped, to_tf, source)
  return mapped, set(present)


def _check_groups(present, table, to_tf, source):
  """Raises ValueError naming the first missing tensor of a used group."""
  for group in sorted(set(_REQUIRED_GROUPS) | set(present)):
    found = {id(e) for e in present.get(group, [])}
    for entry in table:
      if entry.group == group and id(entry) not in found:
        raise ValueError("%s: missing tensor %r" %
                         (source, entry.hf_name if to_tf else entry.tf_name))


def _check_num_labels(mapped, to_tf, source):
  """The classifier's weights and bias agree on the number of classes."""
  for tf_scope in ("", "cls/ner/"):
    tf_names = (tf_scope + "output_weights", tf_scope + "output_bias")
    hf_names = ("classifier.weight", "classifier.bias")
    names, src_bias = ((tf_names, hf_names[1]) if to_tf
                       else (hf_names, tf_names[1]))
    if names[0] in mapped and (
        mapped[names[1]].shape[0] != mapped[names[0]].shape[0]):
      raise ValueError("%s: tensor %r has shape %s, expected [%d] (one per "
                       "row of the classifier weights)" %
                       (source, src_bias, list(mapped[names[1]].shape),
                        mapped[names[0]].shape[0]))


def hf_to_tf_weights(hf_tensors, bert_config, source="model.safetensors",
                     token_classification=False):
  """Converts Hugging Face BERT tensors to this project's variables.

  Args:
    hf_tensors: dict name -> numpy array, Hugging Face names with or without
      the `bert.` prefix; buffers (`embeddings.position_ids`) are skipped.
    bert_config: dict with this project's `bert_config.json` keys.
    source: file name used in error messages.
    token_classification: bool, `classifier.*` is a BertForTokenClassification
      head (becomes `cls/ner/*`).

  Returns:
    (tf_tensors, groups): dict TF variable name -> float32 array (kernels
    `[in, out]`), and the set of groups present ("embeddings", "encoder",
    "pooler", "mlm", "nsp", "classifier", "squad", "ner").

  Raises:
    ValueError: naming the tensor: unknown, missing, duplicated, wrong shape,
      or a decoder not tied to the word embeddings.
  """
  tensors = {}
  for name, value in hf_tensors.items():
    canonical = _canonical_hf_name(name)
    if canonical in _HF_BUFFERS:
      continue
    if canonical in tensors:
      raise ValueError("%s: tensor %r appears twice (with and without a "
                       "prefix)" % (source, name))
    tensors[canonical] = value
  _untie_decoder(tensors, source)
  tf_tensors, groups = _map_tensors(
      tensors, tensor_table(bert_config, token_classification), True, source)
  return tf_tensors, groups


def tf_to_hf_weights(tf_tensors, bert_config, source="checkpoint"):
  """Converts this project's variables to Hugging Face BertForPreTraining names.

  Args:
    tf_tensors: dict TF variable name -> numpy array (optimizer slots removed).
    bert_config: dict with this project's `bert_config.json` keys.
    source: checkpoint path used in error messages.

  Returns:
    (hf_tensors, groups) as in `hf_to_tf_weights`; with the masked-LM head,
    `cls.predictions.decoder.weight` (a copy of the word embeddings) and
    `cls.predictions.decoder.bias` are added, as Hugging Face ties them.

  Raises:
    ValueError: naming the variable: unknown, missing or wrong shape.
  """
  token_classification = any(name.startswith("cls/ner/")
                             for name in tf_tensors)
  hf_tensors, groups = _map_tensors(
      tf_tensors, tensor_table(bert_config, token_classification), False,
      source)
  if "mlm" in groups:
    hf_tensors[_TIED_DECODER] = hf_tensors[
        "bert.embeddings.word_embeddings.weight"].copy()
    hf_tensors[_DECODER_BIAS] = hf_tensors["cls.predictions.bias"].copy()
  return hf_tensors, groups



# ---------------------------------------------------------------------------
# Files.


def _read_json(path):
  if not os.path.isfile(path):
    raise FileNotFoundError("%s not found" % path)
  with open(path, encoding="utf-8") as f:
    try:
      return json.load(f)
    except json.JSONDecodeError as e:
      raise ValueError("%s: not valid JSON (%s)" % (path, e)) from None


def _safetensors_files(hf_dir):
  """The folder's safetensors files (one, or the shards of an index).

  Raises:
    FileNotFoundError: when there is none; a folder holding only
      `pytorch_model.bin` gets the command that converts it.
  """
  single = os.path.join(hf_dir, "model.safetensors")
  if os.path.isfile(single):
    return [single]
  index = os.path.join(hf_dir, "model.safetensors.index.json")
  if os.path.isfile(index):
    weight_map = _read_json(index).get("weight_map", {})
    return [os.path.join(hf_dir, name)
            for name in sorted(set(weight_map.values()))]
  pickle_path = os.path.join(hf_dir, "pytorch_model.bin")
  if os.path.exists(pickle_path) or os.path.exists(pickle_path + ".index.json"):
    raise FileNotFoundError(
        "%s has pytorch_model.bin but no model.safetensors: " % hf_dir +
        _PYTORCH_BIN_HINT % (pickle_path, single))
  raise FileNotFoundError("%s: no model.safetensors (found: %s)" %
                          (hf_dir, ", ".join(sorted(os.listdir(hf_dir))) or
                           "nothing"))


def read_hf_weights(hf_dir):
  """Reads every tensor of a Hugging Face folder with safetensors' numpy API.

  Returns:
    dict name -> numpy array, names as stored.

  Raises:
    FileNotFoundError: no safetensors file (see `_safetensors_files`).
    ValueError: a tensor stored in two shards.
  """
  tensors = {}
  for path in _safetensors_files(hf_dir):
    if not os.path.isfile(path):
      raise FileNotFoundError("%s not found (listed in the shard index)" % path)
    with safe_open(path, framework="np") as f:
      for name in f.keys():
        if name in tensors:
          raise ValueError("%s: tensor %r is stored twice" % (path, name))
        tensors[name] = f.get_tensor(name)
  return tensors


def _hf_vocab_text(hf_dir):
  """vocab.txt's text, or the WordPiece vocab of tokenizer.json in id order."""
  vocab_path = os.path.join(hf_dir, "vocab.txt")
  if os.path.isfile(vocab_path):
    with open(vocab_path, "rb") as f:
      return f.read()
  tokenizer_path = os.path.join(hf_dir, "tokenizer.json")
  if os.path.isfile(tokenizer_path):
    model = _read_json(tokenizer_path).get("model", {})
    if model.get("type") == "WordPiece":
      by_id = sorted(model["vocab"].items(), key=lambda item: item[1])
      if [i for _, i in by_id] != list(range(len(by_id))):
        raise ValueError("%s: WordPiece vocab ids are not 0..n-1" %
                         tokenizer_path)
      logging.info("No vocab.txt: writing the WordPiece vocab of %s",
                   tokenizer_path)
      return "".join(token + "\n" for token, _ in by_id).encode("utf-8")
  raise FileNotFoundError("%s: no vocab.txt (nor a WordPiece tokenizer.json)" %
                          hf_dir)


def _log_lower_case(hf_dir):
  """Tells which --do_lower_case the converted model needs, when known."""
  path = os.path.join(hf_dir, "tokenizer_config.json")
  if os.path.isfile(path):
    lower = _read_json(path).get("do_lower_case")
    if lower is not None:
      logging.info("%s says do_lower_case=%s: pass --do_lower_case=%s to the "
                   "scripts", path, lower, bool(lower))


def write_tf_checkpoint(tf_tensors, checkpoint_prefix):
  """Writes arrays as a TF checkpoint whose variable names are the dict keys.

  Uses plain tf.compat.v1 variables and a Saver in a fresh graph, so the names
  are exactly those of the released checkpoints (no object-graph prefixes).
  Values are fed through placeholders, so large embeddings never become graph
  constants (the 2 GB GraphDef limit).

  Args:
    tf_tensors: dict variable name -> numpy array.
    checkpoint_prefix: path prefix, e.g. `out/bert_model.ckpt`.
  """
  with tf.Graph().as_default():
    feeds, variables = {}, {}
    for name, value in sorted(tf_tensors.items()):
      placeholder = tf.placeholder(tf.as_dtype(value.dtype), value.shape)
      variables[name] = tf.Variable(placeholder, name=name, trainable=False)
      feeds[placeholder] = value
    saver = tf.train.Saver(var_list=variables)
    with tf.Session() as sess:
      sess.run([v.initializer for v in variables.values()], feed_dict=feeds)
      saver.save(sess, checkpoint_prefix, write_meta_graph=False,
                 write_state=False)


def resolve_tf_checkpoint(path):
  """Checkpoint prefix for a folder, a prefix, or a prefix's `.index` file.

  The same rule as every script's `--init_checkpoint`
  (`startup.resolve_init_checkpoint`): a folder means its `bert_model.ckpt`,
  else its latest checkpoint (a training `output_dir`).

  Raises:
    ValueError: naming `--input` and the path, when no checkpoint is there.
  """
  return startup.resolve_init_checkpoint(path, flag_name="input")


def read_tf_checkpoint(checkpoint_prefix):
  """Reads a checkpoint's weights, skipping optimizer slots and global_step.

  Returns:
    dict variable name -> numpy array.
  """
  reader = tf.train.load_checkpoint(checkpoint_prefix)
  tensors, skipped = {}, 0
  for name in sorted(reader.get_variable_to_shape_map()):
    if name in _TF_SKIPPED_NAMES or name.endswith(_TF_SKIPPED_SUFFIXES):
      skipped += 1
      continue
    tensors[name] = reader.get_tensor(name)
  if skipped:
    logging.info("Skipped %d optimizer variables (adam_m, adam_v, global_step)",
                 skipped)
  return tensors


@contextlib.contextmanager
def _atomic_output_dir(output_dir):
  """Yields a new temporary folder that becomes `output_dir` on success.

  Built on `io_utils.atomic_path`; the folder and its files get the modes
  of newly created ones.
  """
  _check_output_dir(output_dir)
  with io_utils.atomic_path(os.path.abspath(output_dir)) as tmp:
    os.makedirs(tmp)
    yield tmp
    _give_default_permissions(tmp)


def _give_default_permissions(folder):
  """Gives `folder` and its files the modes of newly created ones (umask).

  `mkdtemp` makes the folder private, safetensors writes its file 0600 and a
  copied vocabulary keeps its source's (possibly read-only) mode; results
  meant to be handed on should be readable like any other new file.
  """
  umask = os.umask(0)
  os.umask(umask)
  os.chmod(folder, 0o777 & ~umask)
  for name in os.listdir(folder):
    os.chmod(os.path.join(folder, name), 0o666 & ~umask)


def _check_output_dir(output_dir):
  if os.path.exists(output_dir) and (not os.path.isdir(output_dir) or
                                     os.listdir(output_dir)):
    raise ValueError("--output: %s already exists and is not an empty folder"
                     % output_dir)


def _log_groups(groups, source):
  """Logs what was converted and, clearly, what the source lacks."""
  logging.info("Converted %s: %s", source, ", ".join(sorted(groups)))
  for group in ("pooler", "mlm", "nsp"):
    if group not in groups:
      logging.warning("The source has no %s", _GROUP_DESCRIPTIONS[group])


# ---------------------------------------------------------------------------
# The two directions.


def hf_to_tf(hf_dir, output_dir):
  """Converts a Hugging Face BERT folder to the TF release layout.

  Args:
    hf_dir: folder with `config.json`, `model.safetensors` (or shards with
      `model.safetensors.index.json`) and `vocab.txt` (or a WordPiece
      `tokenizer.json`).
    output_dir: new (or empty) folder; receives `bert_config.json`,
      `bert_model.ckpt.{index,data-00000-of-00001}` and `vocab.txt`.

  Returns:
    The set of tensor groups converted (see `hf_to_tf_weights`).

  Raises:
    FileNotFoundError: a missing file (a `pytorch_model.bin`-only folder is
      told how to make safetensors).
    ValueError: a config that is not BERT, or unknown, missing or misshapen
      tensors, each naming the key or tensor.
  """
  _check_output_dir(output_dir)
  config_path = os.path.join(hf_dir, "config.json")
  hf_config = _read_json(config_path)
  bert_config = hf_config_to_bert_config(hf_config, config_path)
  files = _safetensors_files(hf_dir)
  source = files[0] if len(files) == 1 else os.path.join(
      hf_dir, "model.safetensors.index.json")
  tf_tensors, groups = hf_to_tf_weights(
      read_hf_weights(hf_dir), bert_config, source,
      token_classification=is_token_classification(hf_config))
  vocab = _hf_vocab_text(hf_dir)
  _log_lower_case(hf_dir)
  with _atomic_output_dir(output_dir) as tmp:
    with open(os.path.join(tmp, "bert_config.json"), "w",
              encoding="utf-8") as f:
      f.write(json.dumps(bert_config, indent=2) + "\n")
    write_tf_checkpoint(tf_tensors, os.path.join(tmp, "bert_model.ckpt"))
    with open(os.path.join(tmp, "vocab.txt"), "wb") as f:
      f.write(vocab)
  _log_groups(groups, source)
  logging.info("Wrote %d variables to %s (hidden_act %s)", len(tf_tensors),
               output_dir, bert_config["hidden_act"])
  return groups


def tf_to_hf(checkpoint, output_dir, bert_config_file=None, vocab_file=None,
             do_lower_case=True):
  """Converts this project's checkpoint to a Hugging Face BERT folder.

  Args:
    checkpoint: a checkpoint prefix (`.../bert_model.ckpt`,
      `.../model.ckpt-1000`), its `.index` file, or a folder (its
      `bert_model.ckpt`, else its latest checkpoint).
    output_dir: new (or empty) folder; receives `config.json`,
      `model.safetensors`, `vocab.txt` and `tokenizer_config.json`.
    bert_config_file: optional; default `bert_config.json` beside the
      checkpoint.
    vocab_file: optional; default `vocab.txt` beside the checkpoint.
    do_lower_case: bool, written to `tokenizer_config.json`.

  Returns:
    The set of tensor groups converted (see `tf_to_hf_weights`).

  Raises:
    FileNotFoundError: missing checkpoint, config or vocab, naming the path.
    ValueError: unknown, missing or misshapen variables, naming them.
  """
  _check_output_dir(output_dir)
  prefix = resolve_tf_checkpoint(checkpoint)
  folder = os.path.dirname(prefix)
  bert_config_file = bert_config_file or os.path.join(folder,
                                                      "bert_config.json")
  vocab_file = vocab_file or os.path.join(folder, "vocab.txt")
  for path, flag in ((bert_config_file, "bert_config_file"),
                     (vocab_file, "vocab_file")):
    if not tf.io.gfile.exists(path):
      raise FileNotFoundError("%s not found: pass --%s" % (path, flag))
  bert_config = _read_json(bert_config_file)
  hf_tensors, groups = tf_to_hf_weights(read_tf_checkpoint(prefix), bert_config,
                                        prefix)
  num_labels = (hf_tensors["classifier.weight"].shape[0]
                if groups & {"classifier", "ner"} else None)
  hf_config = bert_config_to_hf_config(bert_config, _architectures(groups),
                                       num_labels)
  if "ner" in groups:
    _name_ner_labels(hf_config, os.path.join(folder, "label_list.txt"))
  tokenizer_config = {"do_lower_case": bool(do_lower_case),
                      "tokenizer_class": "BertTokenizer",
                      "model_max_length": bert_config.get(
                          "max_position_embeddings", 512)}
  with _atomic_output_dir(output_dir) as tmp:
    for name, content in (("config.json", hf_config),
                          ("tokenizer_config.json", tokenizer_config)):
      with open(os.path.join(tmp, name), "w", encoding="utf-8") as f:
        f.write(json.dumps(content, indent=2) + "\n")
    save_safetensors(hf_tensors, os.path.join(tmp, "model.safetensors"),
                     metadata={"format": "pt"})
    tf.io.gfile.copy(vocab_file, os.path.join(tmp, "vocab.txt"))
  _log_groups(groups, prefix)
  logging.info("Wrote %d tensors to %s (%s, hidden_act %s)", len(hf_tensors),
               output_dir, hf_config["architectures"][0],
               hf_config["hidden_act"])
  return groups


def _name_ner_labels(hf_config, label_file):
  """Puts run_ner.py's label names (its `label_list.txt`) in id2label."""
  if not tf.io.gfile.exists(label_file):
    return
  with tf.io.gfile.GFile(label_file, "r") as f:
    labels = [line.rstrip("\r\n") for line in f if line.strip()]
  if len(labels) != len(hf_config["id2label"]):
    logging.warning("%s has %d labels, the head %d; labels stay LABEL_<i>",
                    label_file, len(labels), len(hf_config["id2label"]))
    return
  hf_config["id2label"] = {str(i): label for i, label in enumerate(labels)}
  hf_config["label2id"] = {label: i for i, label in enumerate(labels)}


def define_flags():
  """Defines the command-line flags (only when run as a script)."""
  flags.DEFINE_enum("direction", None, ["hf_to_tf", "tf_to_hf"],
                    "hf_to_tf: Hugging Face folder -> bert_config.json + "
                    "bert_model.ckpt + vocab.txt; tf_to_hf: the reverse.")
  flags.DEFINE_string("input", None,
                      "hf_to_tf: the Hugging Face folder. tf_to_hf: a "
                      "checkpoint prefix, or a folder (its bert_model.ckpt, "
                      "else its latest checkpoint).")
  flags.DEFINE_string("output", None, "Output folder (new or empty).")
  flags.DEFINE_string("bert_config_file", None,
                      "tf_to_hf only: default bert_config.json beside the "
                      "checkpoint.")
  flags.DEFINE_string("vocab_file", None,
                      "tf_to_hf only: default vocab.txt beside the checkpoint.")
  flags.DEFINE_bool("do_lower_case", True,
                    "tf_to_hf only: written to tokenizer_config.json.")
  flags.mark_flags_as_required(["direction", "input", "output"])


def main(_):
  if FLAGS.direction == "hf_to_tf":
    for flag in ("bert_config_file", "vocab_file"):
      if FLAGS[flag].present:
        raise ValueError("--%s applies to --direction=tf_to_hf only" % flag)
    hf_to_tf(FLAGS.input, FLAGS.output)
  else:
    tf_to_hf(FLAGS.input, FLAGS.output, bert_config_file=FLAGS.bert_config_file,
             vocab_file=FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case)


def cli():
  """Command-line entry point: defines the flags, then runs `main`."""
  define_flags()
  runner.run_main(main)


if __name__ == "__main__":
  cli()
