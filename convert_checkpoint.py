"""Converts BERT checkpoints between the Hugging Face and TF release layouts.

Hugging Face folders (`config.json`, `model.safetensors`, `vocab.txt`) and
KerasHub presets <-> Google's release layout (`bert_config.json`,
`bert_model.ckpt.*`, `vocab.txt`) that every script reads:

  python convert_checkpoint.py --direction=hf_to_tf --input=HF_DIR \
      --output=TF_DIR
  # Fine-tuned heads become BertForSequenceClassification,
  # BertForQuestionAnswering, BertForTokenClassification or
  # BertForMultipleChoice, with id2label, problem_type,
  # tokenizer_config.json and a model card (task and labels from
  # --task/--labels, the run's --export, or its label files).
  python convert_checkpoint.py --direction=tf_to_hf --input=CKPT \
      --output=HF_DIR [--bert_config_file=...] [--vocab_file=...] \
      [--export=EXPORT_DIR] [--task=...] [--labels=a,b,c]
  # KerasHub presets (the TensorFlow 2.21 stack's kerashub extra).
  python convert_checkpoint.py --direction=kerashub_to_tf --input=PRESET_DIR \
      --output=TF_DIR
  python convert_checkpoint.py --direction=tf_to_kerashub --input=CKPT \
      --output=PRESET_DIR [--bert_config_file=...] [--vocab_file=...]

Names (`bert_tf/convert/weights.py`, `kerashub.py`): Hugging Face's as
`BertForPreTraining` writes them (`bert.encoder.layer.N.*` <->
`bert/encoder/layer_N/*`, `Linear` weights transposed; `classifier.*` <->
`output_weights`, `cls/ner/*` or `cls/multiple_choice/*` by
`architectures`; `qa_outputs.*` <-> `cls/squad/*`; the decoder tied to the
word embeddings, checked). Weights are read with safetensors' numpy API
(never PyTorch pickles); Hugging Face `gelu` is `gelu_exact` here,
`gelu_new`/`gelu_pytorch_tanh` are `gelu`. Outputs are written under a
temporary name and renamed when complete. The library is
`bert_tf.convert`; its public names are re-exported here (`__all__`).
"""
from bert_tf.cli import quiet  # First: TensorFlow's start-up lines off.
quiet.when_run_as_command(__name__)

from absl import flags

from bert_tf import convert as convert_package
from bert_tf.cli import flags_first

__all__ = [
    "hf_to_tf", "tf_to_hf", "kerashub_to_tf", "checkpoint_to_preset",
    "tensor_table", "is_token_classification",
    "hf_to_tf_weights", "tf_to_hf_weights", "hf_config_to_bert_config",
    "bert_config_to_hf_config", "BERT_CONFIG_KEYS", "read_hf_weights",
    "read_tf_checkpoint", "write_tf_checkpoint", "resolve_tf_checkpoint",
    "define_flags", "main", "cli",
]

FLAGS = flags.FLAGS
_DIRECTIONS = ["hf_to_tf", "tf_to_hf", "kerashub_to_tf", "tf_to_kerashub"]
# The flags of the tf_to_* directions alone; the last five of tf_to_hf alone.
_TF_TO_FLAGS = ("bert_config_file", "vocab_file")
_TF_TO_HF_FLAGS = ("task", "labels", "export", "base_model", "dataset")


def define_flags():
  """Defines the command-line flags (only when run as a script)."""
  flags.DEFINE_enum("direction", None, _DIRECTIONS,
                    "hf_to_tf: Hugging Face folder -> bert_config.json + "
                    "bert_model.ckpt + vocab.txt; tf_to_hf: the reverse. "
                    "kerashub_to_tf, tf_to_kerashub: the same with a KerasHub "
                    "BERT preset (needs keras-hub: ./setup.sh --kerashub on "
                    "the TensorFlow 2.21 stack).")
  flags.DEFINE_string("input", None,
                      "hf_to_tf / kerashub_to_tf: the Hugging Face folder or "
                      "KerasHub preset folder (or the SavedModel folder of "
                      "a KerasHub BertBackbone's export, read without "
                      "keras-hub). tf_to_hf / tf_to_kerashub: a "
                      "checkpoint prefix, or a folder (its bert_model.ckpt, "
                      "else its latest checkpoint).")
  flags.DEFINE_string("output", None, "Output folder (new or empty).")
  flags.DEFINE_string("bert_config_file", None,
                      "tf_to_* only: default bert_config.json beside the "
                      "checkpoint.")
  flags.DEFINE_string("vocab_file", None,
                      "tf_to_* only: default vocab.txt beside the checkpoint.")
  flags.DEFINE_bool("do_lower_case", True,
                    "tf_to_* only: tf_to_hf writes it to "
                    "tokenizer_config.json (unset: the --export's, else "
                    "True); tf_to_kerashub makes the preset's tokenizer "
                    "lowercase and strip accents (or neither).")
  # tf_to_hf of a fine-tuned model: what its Hugging Face users need.
  flags.DEFINE_enum("task", None, list(convert_package.FINE_TUNED_TASKS),
                    "tf_to_hf only: the fine-tuned task (unset: from "
                    "--export, the run's label files, else the heads).")
  flags.DEFINE_list("labels", None,
                    "tf_to_hf only: the label names in id order, "
                    "comma-separated (unset: from --export or the run's "
                    "label files, else LABEL_<i>).")
  flags.DEFINE_string("export", None,
                      "tf_to_hf only: the run's --export_dir (or a version "
                      "folder): task, labels, do_lower_case and settings "
                      "from its serving_config.json.")
  flags.DEFINE_string("base_model", None,
                      "tf_to_hf only: what fine-tuning started from, for "
                      "the model card (README.md); unset: the training "
                      "run's --init_checkpoint, when it recorded one.")
  flags.DEFINE_string("dataset", None,
                      "tf_to_hf only: the training data, for the model card "
                      "(unset: the export's task name).")
  flags.mark_flags_as_required(["direction", "input", "output"])


# Run as a command: --help and flag errors answer here, before the
# imports below load TensorFlow.
flags_first.parse_when_run_as_command(__name__, define_flags)

from bert_tf.cli import entry
# The library lives in bert_tf.convert; these are the script's public names,
# as before the split.
from bert_tf.convert.config import BERT_CONFIG_KEYS
from bert_tf.convert.config import bert_config_to_hf_config
from bert_tf.convert.config import hf_config_to_bert_config
from bert_tf.convert.files import read_hf_weights
from bert_tf.convert.files import read_tf_checkpoint
from bert_tf.convert.files import resolve_tf_checkpoint
from bert_tf.convert.files import write_tf_checkpoint
from bert_tf.convert.folders import hf_to_tf
from bert_tf.convert.folders import tf_to_hf
from bert_tf.convert import keras_saved_model
from bert_tf.convert.kerashub import checkpoint_to_preset
from bert_tf.convert.kerashub import KerasHubUnavailable
from bert_tf.convert.kerashub import kerashub_to_tf
from bert_tf.convert.weights import hf_to_tf_weights
from bert_tf.convert.weights import is_token_classification
from bert_tf.convert.weights import tensor_table
from bert_tf.convert.weights import tf_to_hf_weights


def main(_):
  not_for_this = ((_TF_TO_FLAGS + _TF_TO_HF_FLAGS)
                  if FLAGS.direction in ("hf_to_tf", "kerashub_to_tf") else
                  _TF_TO_HF_FLAGS if FLAGS.direction == "tf_to_kerashub"
                  else ())
  for flag in not_for_this:
    if FLAGS[flag].present:
      raise ValueError("--%s applies to --direction=%s only" % (
          flag, "tf_to_hf" if flag in _TF_TO_HF_FLAGS else
          "tf_to_hf or tf_to_kerashub"))
  try:
    if FLAGS.direction == "hf_to_tf":
      hf_to_tf(FLAGS.input, FLAGS.output)
    elif FLAGS.direction == "kerashub_to_tf":
      (keras_saved_model.saved_model_to_tf
       if keras_saved_model.looks_like_saved_model(FLAGS.input)
       else kerashub_to_tf)(FLAGS.input, FLAGS.output)
    elif FLAGS.direction == "tf_to_kerashub":
      checkpoint_to_preset(FLAGS.input, FLAGS.output,
                           bert_config_file=FLAGS.bert_config_file,
                           vocab_file=FLAGS.vocab_file,
                           do_lower_case=FLAGS.do_lower_case)
    else:
      tf_to_hf(FLAGS.input, FLAGS.output,
               bert_config_file=FLAGS.bert_config_file,
               vocab_file=FLAGS.vocab_file,
               do_lower_case=(FLAGS.do_lower_case
                              if FLAGS["do_lower_case"].present else None),
               task=FLAGS.task, labels=FLAGS.labels, export=FLAGS.export,
               base_model=FLAGS.base_model, dataset=FLAGS.dataset)
  except KerasHubUnavailable as e:
    raise ValueError("--direction=%s: %s" % (FLAGS.direction, e)) from e


def cli():
  """Command-line entry point: `main`, with the flags defined here or, run
  as a command, above."""
  entry.run_main(main, define_flags)


if __name__ == "__main__":
  cli()
