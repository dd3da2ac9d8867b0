"""A TF SavedModel of a KerasHub `BertBackbone` -> the TF release layout.

KerasHub's `backbone.export(path)` (Keras 3's `tf_saved_model` format)
writes an object-based checkpoint: its keys are `_all_variables/<i>/...`,
and the SavedModel's object graph gives each variable its Keras path
(`transformer_layer_0/self_attention_layer/query/kernel`, an EinsumDense
kernel [H, A, D]). Those paths are `kerashub.keras_table`'s, so the same
renames and reshapes make the reference's variables; the config is read
from the shapes. Reading needs TensorFlow alone (no keras-hub), on both
stacks. Model Garden's and TF Hub's SavedModels name their variables
otherwise and are not read (docs/migrating.md says why).
"""

import json
import os
import re

import tensorflow.compat.v1 as tf

from bert_tf import tf_private
from bert_tf.convert import files
from bert_tf.convert import kerashub

__all__ = ["looks_like_saved_model", "read_variables", "read_backbone",
           "saved_model_to_tf"]

_SAVED_MODEL = "saved_model.pb"
_LAYER = re.compile(r"^transformer_layer_(\d+)/")


def looks_like_saved_model(folder):
  """Whether `folder` holds a SavedModel (`saved_model.pb`)."""
  return os.path.isfile(os.path.join(folder, _SAVED_MODEL))


def read_variables(folder):
  """{variable name: float32 array} of the SavedModel in `folder`.

  Raises:
    ValueError: a SavedModel whose object graph lists no named variables
      (not a Keras 3 export), naming the file.
  """
  path = os.path.join(folder, _SAVED_MODEL)
  reader = tf.train.load_checkpoint(os.path.join(folder, "variables",
                                                 "variables"))
  values = {name: reader.get_tensor(key) for key, name in
            tf_private.saved_variable_names(path, "_all_variables").items()}
  if not values:
    raise ValueError("%s: no _all_variables with names in the object graph; "
                     "expected the export of a KerasHub BertBackbone "
                     "(backbone.export)" % path)
  return values


def read_backbone(folder):
  """(TF tensors, bert_config) of a KerasHub BertBackbone's SavedModel.

  Raises:
    ValueError: variables that are not a BertBackbone's, naming the file
      and the weight (`kerashub.backbone_to_tf`).
  """
  values = read_variables(folder)
  source = os.path.join(folder, _SAVED_MODEL)
  first = "transformer_layer_0/"
  for name in ("token_embedding/embeddings", "position_embedding/embeddings",
               "segment_embedding/embeddings",
               first + "self_attention_layer/query/kernel",
               first + "feedforward_intermediate_dense/kernel"):
    if name not in values:
      raise ValueError("%s: no variable %s; expected a KerasHub "
                       "BertBackbone's" % (source, name))
  vocab, hidden = values["token_embedding/embeddings"].shape
  config = {
      "vocabulary_size": vocab, "hidden_dim": hidden,
      "num_layers": len({m.group(1) for m in map(_LAYER.match, values) if m}),
      "num_heads": values[first + "self_attention_layer/query/kernel"]
                   .shape[1],
      "intermediate_dim": values[
          first + "feedforward_intermediate_dense/kernel"].shape[1],
      "max_sequence_length": values[
          "position_embedding/embeddings"].shape[0],
      "num_segments": values["segment_embedding/embeddings"].shape[0]}
  bert_config = kerashub.backbone_config_to_bert_config(
      {key: int(value) for key, value in config.items()}, source)
  return kerashub.backbone_to_tf(values, bert_config, source), bert_config


def saved_model_to_tf(folder, output_dir):
  """Writes `bert_config.json` and `bert_model.ckpt` of the backbone whose
  SavedModel is `folder` into the new (or empty) `output_dir`; the
  vocabulary is not in the export (give the preset's as --vocab_file).

  Returns:
    dict, the bert_config written.
  """
  files.check_output_dir(output_dir)
  tf_tensors, bert_config = read_backbone(folder)
  with files.atomic_output_dir(output_dir) as tmp:
    files.write_tf_checkpoint(tf_tensors, os.path.join(tmp, "bert_model.ckpt"))
    with open(os.path.join(tmp, "bert_config.json"), "w",
              encoding="utf-8") as f:
      f.write(json.dumps(bert_config, indent=2) + "\n")
  return bert_config
