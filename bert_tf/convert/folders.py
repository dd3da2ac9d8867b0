"""The two conversions of whole folders: a Hugging Face BERT folder to the
TF release layout every script reads (`hf_to_tf`), and this project's
checkpoints to a folder Hugging Face's classes load (`tf_to_hf`)."""

import json
import os

from absl import logging
from safetensors.numpy import save_file as save_safetensors
import tensorflow.compat.v1 as tf

from bert_tf.checks import config as config_checks
from bert_tf.convert import files
from bert_tf.convert.config import bert_config_to_hf_config
from bert_tf.convert.config import hf_config_to_bert_config
from bert_tf.convert.weights import architectures
from bert_tf.convert.weights import hf_to_tf_weights
from bert_tf.convert.weights import is_multiple_choice
from bert_tf.convert.weights import is_token_classification
from bert_tf.convert.weights import tf_to_hf_weights
from bert_tf.convert import fine_tuned
from bert_tf.export import saved_model as export_utils
from bert_tf.tasks.classifier import multi_label as multi_label_lib

__all__ = ["hf_to_tf", "tf_to_hf"]

_GROUP_DESCRIPTIONS = {
    "pooler": "pooler (bert/pooler/*; BertModel initialises it randomly)",
    "mlm": "masked-LM head (cls/predictions/*)",
    "nsp": "next-sentence head (cls/seq_relationship/*)",
    "classifier": "classifier head (output_weights, output_bias)",
    "squad": "SQuAD head (cls/squad/*)",
    "ner": "token-classification head (cls/ner/*)",
    "multiple_choice": "multiple-choice head (cls/multiple_choice/*)",
}


def _log_groups(groups, source):
  """Logs what was converted and, clearly, what the source lacks."""
  logging.info("Converted %s: %s", source, ", ".join(sorted(groups)))
  for group in ("pooler", "mlm", "nsp"):
    if group not in groups:
      logging.warning("The source has no %s", _GROUP_DESCRIPTIONS[group])


def hf_to_tf(hf_dir, output_dir, log_casing=True):
  """Converts a Hugging Face BERT folder (`config.json`, safetensors or
  `tf_model.h5`, `vocab.txt` or `tokenizer.json`) into `output_dir` (new or
  empty): `bert_config.json`, `bert_model.ckpt.*`, `vocab.txt`.
  `log_casing` logs the `--do_lower_case` the scripts need. Returns the
  set of groups converted.

  Raises:
    FileNotFoundError: a missing file (a `pytorch_model.bin`-only folder is
      told how to make safetensors).
    ValueError: a config that is not BERT, or unknown, missing or misshapen
      tensors, each naming the key or tensor.
  """
  files.check_output_dir(output_dir)
  config_path = os.path.join(hf_dir, "config.json")
  hf_config = files.read_json(config_path)
  bert_config = hf_config_to_bert_config(hf_config, config_path)
  weight_files = files.weight_files(hf_dir)
  source = weight_files[0] if len(weight_files) == 1 else os.path.join(
      hf_dir, "model.safetensors.index.json")
  tf_tensors, groups = hf_to_tf_weights(
      files.read_hf_weights(hf_dir), bert_config, source,
      token_classification=is_token_classification(hf_config),
      multiple_choice=is_multiple_choice(hf_config),
      config_source=config_path)
  vocab = files.hf_vocab_text(hf_dir)
  if log_casing:
    files.log_lower_case(hf_dir)
  with files.atomic_output_dir(output_dir) as tmp:
    with open(os.path.join(tmp, "bert_config.json"), "w",
              encoding="utf-8") as f:
      f.write(json.dumps(bert_config, indent=2) + "\n")
    files.write_tf_checkpoint(tf_tensors,
                              os.path.join(tmp, "bert_model.ckpt"))
    with open(os.path.join(tmp, "vocab.txt"), "wb") as f:
      f.write(vocab)
    if hf_config.get("problem_type") == multi_label_lib.PROBLEM_TYPE:
      multi_label_lib.write_labels_file(tmp, _hf_label_names(hf_config))
  _log_groups(groups, source)
  logging.info("Wrote %d variables to %s (hidden_act %s)", len(tf_tensors),
               output_dir, bert_config["hidden_act"])
  return groups


def tf_to_hf(checkpoint, output_dir, bert_config_file=None, vocab_file=None,
             do_lower_case=None, task=None, labels=None, export=None,
             base_model=None, dataset=None):
  """Converts this project's checkpoint to a Hugging Face BERT folder.

  `output_dir` (new or empty) receives `config.json` (with a fine-tuned
  task's class, `id2label`/`label2id`, `problem_type`), `model.safetensors`,
  `vocab.txt`, `tokenizer_config.json` and `README.md`. `checkpoint`: a
  prefix, its `.index` or a folder; the config and vocabulary default to
  the files beside it, else the export's; `do_lower_case` None: the
  export's, else True; `task`, `labels`: found when None (`fine_tuned`);
  `base_model` (None: the run's recorded --init_checkpoint), `dataset`:
  for the card. Returns the set of groups.

  Raises:
    FileNotFoundError: missing checkpoint, config or vocab, naming the path.
    ValueError: unknown, missing or misshapen variables, naming them; a
      task or labels that do not fit the checkpoint's head.
  """
  files.check_output_dir(output_dir)
  prefix = files.resolve_tf_checkpoint(checkpoint)
  folder = os.path.dirname(prefix)
  info = fine_tuned.read_export(export) if export else None
  bert_config_file = bert_config_file or _beside_or_exported(
      folder, "bert_config.json", info, export_utils.CONFIG_ASSET)
  vocab_file = vocab_file or _beside_or_exported(
      folder, "vocab.txt", info, export_utils.VOCAB_ASSET)
  for path, flag in ((bert_config_file, "bert_config_file"),
                     (vocab_file, "vocab_file")):
    if not tf.io.gfile.exists(path):
      raise FileNotFoundError("%s not found: pass --%s" % (path, flag))
  bert_config = files.read_json(bert_config_file)
  config_checks.check_bert_config_json(bert_config, bert_config_file,
                                       flag_name=None)
  hf_tensors, groups = tf_to_hf_weights(files.read_tf_checkpoint(prefix),
                                        bert_config, prefix)
  num_labels = (hf_tensors["classifier.weight"].shape[0]
                if groups & {"classifier", "ner"} else None)
  task_info = fine_tuned.task_info(groups, num_labels, folder, task, labels,
                                   export)
  hf_config = bert_config_to_hf_config(bert_config, architectures(groups),
                                       num_labels)
  fine_tuned.apply_to_hf_config(hf_config, task_info, num_labels)
  if do_lower_case is None:
    do_lower_case = (task_info.export or {}).get("do_lower_case", True)
  tokenizer_config = {"do_lower_case": bool(do_lower_case),
                      "tokenizer_class": "BertTokenizer",
                      "model_max_length": bert_config.get(
                          "max_position_embeddings", 512)}
  card = fine_tuned.model_card(
      task_info, hf_config, bert_config, prefix, do_lower_case,
      fine_tuned.read_eval_results(folder),
      base_model or fine_tuned.recorded_base_model(folder), dataset)
  with files.atomic_output_dir(output_dir) as tmp:
    for name, content in (("config.json", hf_config),
                          ("tokenizer_config.json", tokenizer_config)):
      with open(os.path.join(tmp, name), "w", encoding="utf-8") as f:
        f.write(json.dumps(content, indent=2) + "\n")
    with open(os.path.join(tmp, "README.md"), "w", encoding="utf-8") as f:
      f.write(card)
    save_safetensors(hf_tensors, os.path.join(tmp, "model.safetensors"),
                     metadata={"format": "pt"})
    tf.io.gfile.copy(vocab_file, os.path.join(tmp, "vocab.txt"))
  _log_groups(groups, prefix)
  logging.info("Wrote %d tensors to %s (%s, hidden_act %s, task %s from %s)",
               len(hf_tensors), output_dir, hf_config["architectures"][0],
               hf_config["hidden_act"], task_info.task, task_info.found_in)
  return groups


def _beside_or_exported(folder, name, export, asset):
  """`folder/name` when it exists, else the export's asset, else the
  former (for the message)."""
  beside = os.path.join(folder, name)
  if export is not None and not tf.io.gfile.exists(beside):
    return os.path.join(export[0], export_utils.ASSETS_DIR, asset)
  return beside


def _hf_label_names(hf_config):
  """The label names of a Hugging Face config, in id order."""
  id2label = hf_config.get("id2label") or {}
  return [str(id2label[key]) for key in sorted(id2label, key=int)]
