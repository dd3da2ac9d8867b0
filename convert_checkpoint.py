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
  # BertForQuestionAnswering, BertForTokenClassification or
  # BertForMultipleChoice for fine-tuned heads)
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
  classifier.weight [1, H]             <-> cls/multiple_choice/output_weights
                                       (run_multiple_choice.py), when
                                       config.json's architectures name
                                       BertForMultipleChoice

Weights are read with the `safetensors` numpy API: PyTorch pickles
(`pytorch_model.bin`) are never loaded. Activations are mapped by meaning:
Hugging Face `gelu` is the exact erf form (this project's `gelu_exact`),
`gelu_new` / `gelu_pytorch_tanh` are the tanh approximation (this project's
`gelu`). Every output folder is written under a temporary name and renamed
when complete.

The library (name table, config mapping, safetensors and checkpoint files,
the two directions) is `bert_tf.convert`; this script keeps the flags and
re-exports its public names (`hf_to_tf`, `tf_to_hf`, `tensor_table`, ...; see
`__all__`).
"""
from bert_tf.cli import quiet  # First: TensorFlow's start-up lines off.
quiet.when_run_as_command(__name__)

from absl import flags

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
from bert_tf.convert.weights import hf_to_tf_weights
from bert_tf.convert.weights import is_token_classification
from bert_tf.convert.weights import tensor_table
from bert_tf.convert.weights import tf_to_hf_weights

__all__ = [
    "hf_to_tf", "tf_to_hf", "tensor_table", "is_token_classification",
    "hf_to_tf_weights", "tf_to_hf_weights", "hf_config_to_bert_config",
    "bert_config_to_hf_config", "BERT_CONFIG_KEYS", "read_hf_weights",
    "read_tf_checkpoint", "write_tf_checkpoint", "resolve_tf_checkpoint",
    "define_flags", "main", "cli",
]

FLAGS = flags.FLAGS


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
  entry.run_main(main)


if __name__ == "__main__":
  cli()
