"""BERT weights between Hugging Face and TF: `tensor_table` (every tensor
with its name in both layouts: the reference's, SPEC section 3, and
`BertForPreTraining`'s) and the in-memory renaming, transposing (`Linear`
[out, in], kernels [in, out]) and checking along it."""

import dataclasses
from typing import Optional, Tuple

import ml_dtypes  # numpy's bfloat16 (a TensorFlow dependency).
import numpy as np

__all__ = ["TableEntry", "tensor_table", "is_token_classification",
           "is_multiple_choice", "architectures", "hf_to_tf_weights",
           "tf_to_hf_weights"]

# Tensor groups: the encoder must be complete; each head is all-or-nothing.
_REQUIRED_GROUPS = ("embeddings", "encoder")
# Hugging Face buffers that are not weights (skipped when reading).
_HF_BUFFERS = ("bert.embeddings.position_ids",
               "bert.embeddings.token_type_ids")
# The masked-LM decoder, tied to the word embeddings in this project.
_TIED_DECODER = "cls.predictions.decoder.weight"
_DECODER_BIAS = "cls.predictions.decoder.bias"


@dataclasses.dataclass(frozen=True, eq=False)
class TableEntry:
  """One tensor: `tf_name`, `hf_name`, the TF-side `shape` (None: a free
  dimension), its `group` ("embeddings", "encoder", "pooler", "mlm", "nsp",
  "classifier", "squad", "ner", "multiple_choice") and `transpose`."""

  tf_name: str
  hf_name: str
  shape: Tuple[Optional[int], ...]
  group: str
  transpose: bool = False


def _dense(tf_scope, hf_scope, in_size, out_size, group):
  return [TableEntry(tf_scope + "/kernel", hf_scope + ".weight",
                  (in_size, out_size), group, transpose=True),
          TableEntry(tf_scope + "/bias", hf_scope + ".bias", (out_size,),
                     group)]


def _layer_norm(tf_scope, hf_scope, size, group):
  return [TableEntry(tf_scope + "/gamma", hf_scope + ".weight", (size,), group),
          TableEntry(tf_scope + "/beta", hf_scope + ".bias", (size,), group)]


def tensor_table(bert_config, token_classification=False,
                 multiple_choice=False):
  """Every tensor a BERT checkpoint may hold as `TableEntry`s, in the
  released order (embeddings, layers, pooler, heads); Hugging Face's
  `classifier.*` is the token-classification (`cls/ner/*`) or
  multiple-choice (`cls/multiple_choice/*`) head when asked, else
  `output_weights`/`output_bias`."""
  h = bert_config["hidden_size"]
  inter = bert_config["intermediate_size"]
  vocab = bert_config["vocab_size"]
  table = [
      TableEntry("bert/embeddings/word_embeddings",
              "bert.embeddings.word_embeddings.weight", (vocab, h),
              "embeddings"),
      TableEntry("bert/embeddings/token_type_embeddings",
              "bert.embeddings.token_type_embeddings.weight",
              (bert_config["type_vocab_size"], h), "embeddings"),
      TableEntry("bert/embeddings/position_embeddings",
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
  if multiple_choice:
    return table + [e for e in _head_table(h, vocab)
                    if e.group != "classifier"] + _multiple_choice(h)
  return table + _head_table(h, vocab, token_classification)


def _head_table(h, vocab, token_classification=False):
  """The pre-training, classifier, SQuAD and NER heads (see `tensor_table`)."""
  table = _dense("cls/predictions/transform/dense",
                 "cls.predictions.transform.dense", h, h, "mlm")
  table += _layer_norm("cls/predictions/transform/LayerNorm",
                       "cls.predictions.transform.LayerNorm", h, "mlm")
  table += [
      TableEntry("cls/predictions/output_bias", "cls.predictions.bias",
                 (vocab,),
              "mlm"),
      # [num_classes, hidden] in both layouts (TF multiplies with transpose_b).
      TableEntry("cls/seq_relationship/output_weights",
              "cls.seq_relationship.weight", (2, h), "nsp"),
      TableEntry("cls/seq_relationship/output_bias",
                 "cls.seq_relationship.bias",
              (2,), "nsp"),
      TableEntry("cls/squad/output_weights", "qa_outputs.weight", (2, h),
                 "squad"),
      TableEntry("cls/squad/output_bias", "qa_outputs.bias", (2,), "squad"),
  ]
  # Both fine-tuned classifiers are `classifier.*` in Hugging Face; which one
  # a folder holds is told by its config's architectures.
  scope, group = (("cls/ner/", "ner") if token_classification
                  else ("", "classifier"))
  table += [
      TableEntry(scope + "output_weights", "classifier.weight", (None, h),
                 group),
      TableEntry(scope + "output_bias", "classifier.bias", (None,), group),
  ]
  return table


def _multiple_choice(h):
  """run_multiple_choice.py's head, BertForMultipleChoice's `classifier.*`:
  one score per choice ([1, hidden_size] and [1])."""
  return [TableEntry("cls/multiple_choice/output_weights", "classifier.weight",
                     (1, h), "multiple_choice"),
          TableEntry("cls/multiple_choice/output_bias", "classifier.bias",
                     (1,), "multiple_choice")]


def is_multiple_choice(hf_config):
  """Whether a Hugging Face `config.json` dict is a multiple-choice model."""
  return "BertForMultipleChoice" in (hf_config.get("architectures") or ())


def is_token_classification(hf_config):
  """Whether a Hugging Face `config.json` dict is a token classifier."""
  return any(str(name).endswith("ForTokenClassification")
             for name in hf_config.get("architectures") or ())


def architectures(groups):
  """Hugging Face class names for the heads present, most specific first."""
  if "multiple_choice" in groups:
    return ["BertForMultipleChoice"]
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
  """Removes the tied masked-LM decoder tensors after checking the tie (an
  untied decoder cannot be represented)."""
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


def _map_tensors(tensors, table, to_tf, source, config_source=None):
  """(mapped float32 arrays by target name, groups present) along `table`.

  Raises:
    ValueError: naming the tensor: a shape mismatch, an unknown tensor, a
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
      raise ValueError("%s: tensor %r has shape %s, expected %s%s" %
                       (source, src, list(value.shape),
                        [("num_labels" if e is None else e) for e in expected],
                        " (the shape %s gives it)" % config_source
                        if config_source else ""))
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
                     token_classification=False, multiple_choice=False,
                     config_source=None):
  """(tf_tensors, groups) of Hugging Face BERT tensors (with or without
  `bert.`; buffers skipped): float32, kernels [in, out]; `classifier.*` as
  in `tensor_table`; `source`, `config_source` named in errors.

  Raises:
    ValueError: naming the tensor: unknown, missing, duplicated, wrong
      shape, or a decoder not tied to the word embeddings.
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
      tensors, tensor_table(bert_config, token_classification,
                            multiple_choice), True, source, config_source)
  return tf_tensors, groups


def tf_to_hf_weights(tf_tensors, bert_config, source="checkpoint"):
  """(hf_tensors, groups) in `BertForPreTraining` names of this project's
  variables (no optimizer slots); with the masked-LM head, the tied
  `cls.predictions.decoder.weight` and `.bias` are added.

  Raises:
    ValueError: naming the variable: unknown, missing or wrong shape.
  """
  token_classification = any(name.startswith("cls/ner/")
                             for name in tf_tensors)
  multiple_choice = any(name.startswith("cls/multiple_choice/")
                        for name in tf_tensors)
  hf_tensors, groups = _map_tensors(
      tf_tensors, tensor_table(bert_config, token_classification,
                               multiple_choice), False, source)
  if "mlm" in groups:
    hf_tensors[_TIED_DECODER] = hf_tensors[
        "bert.embeddings.word_embeddings.weight"].copy()
    hf_tensors[_DECODER_BIAS] = hf_tensors["cls.predictions.bias"].copy()
  return hf_tensors, groups
