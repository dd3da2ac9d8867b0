"""Config mapping between `bert_config.json` and Hugging Face `config.json`:
keys by name (Hugging Face's defaults fill omitted ones), `hidden_act` by
meaning (`gelu` is the exact erf form, our `gelu_exact`; `gelu_new`,
`gelu_pytorch_tanh`, `gelu_fast` are the tanh form, our `gelu`)."""

import math

from bert_tf.checks import config as config_checks
from bert_tf import json_file

__all__ = ["BERT_CONFIG_KEYS", "hf_config_to_bert_config",
           "bert_config_to_hf_config"]

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


def hf_config_to_bert_config(hf_config, source="config.json"):
  """The eleven `BERT_CONFIG_KEYS` of a Hugging Face BERT `config.json`
  dict, `hidden_act` mapped by meaning.

  Raises:
    ValueError: naming the key (and `source`), when the model is not a BERT
      this project can run: another `model_type` or architecture,
      `layer_norm_eps` other than 1e-12, relative positions, a decoder, a
      factorized embedding, or an unknown activation.
  """
  def fail(key, expected):
    raise ValueError("%s: %s = %r, expected %s" %
                     (source, key, hf_config.get(key), expected))

  _check_hf_types(hf_config, source)
  model_type = hf_config.get("model_type", "bert")
  if model_type != "bert":
    fail("model_type", "'bert' (this project runs BERT only; e.g. RoBERTa "
         "offsets its position ids by the padding id)")
  if any(not name.startswith(("Bert", "TFBert"))
         for name in hf_config.get("architectures") or ()):
    fail("architectures", "BERT classes (BertModel, BertFor...)")
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
  config_checks.check_bert_config_json(config, source, flag_name=None)
  return config


# Keys of a Hugging Face config.json read here, and the JSON kinds they
# must have (sizes and rates are checked as a bert_config.json after the
# mapping).
_HF_KINDS = {
    "model_type": "string", "layer_norm_eps": "number",
    "position_embedding_type": "string", "is_decoder": "boolean",
    "add_cross_attention": "boolean", "embedding_size": ("integer", "null"),
    "hidden_act": "string", "architectures": ("list", "null"),
    "problem_type": ("string", "null"), "id2label": ("object", "null"),
}


def _check_hf_types(hf_config, source):
  """Refuses a config.json that is not an object or has a key of the
  wrong JSON type (`_HF_KINDS`), naming the file and the key.

  Raises:
    ValueError: one line.
  """
  json_file.require(hf_config, "object", source, "")
  for key, kind in _HF_KINDS.items():
    json_file.field(hf_config, key, kind, source, default=None)
  for i, name in enumerate(hf_config.get("architectures") or ()):
    json_file.require(name, "string", source,
                      json_file.index_path("architectures", i))
  for key in hf_config.get("id2label") or ():
    if not key.isdigit():
      raise ValueError("%s: id2label has key %r, expected label ids 0, 1, "
                       "..." % (source, key))


def bert_config_to_hf_config(bert_config, architectures, num_labels=None):
  """A Hugging Face `config.json` dict (model_type "bert", layer_norm_eps
  1e-12, `architectures`, optional `num_labels`) of a `bert_config.json`.

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
