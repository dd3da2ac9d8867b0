"""The shared flags: one table, each flag defined once, by its script.

`SHARED_FLAGS` maps every flag that more than one script takes to its
define function, default and help text; `define_flags` defines the ones a
script names (`TPU_FLAGS`, `TRAINING_FLAGS`, ... name groups of them). An
enum flag's values are those its option lists once
(`bert_tf.train.choices`; --optimizer's are the optimizer table's,
`optimizers.REGISTRY`, read when the flag is defined); the training, TPU
and distribution groups are the fields of `training_options`' dataclasses,
which the flags fill by name (`tests/test_training_options.py` checks that
the groups here name them). A new option is one field there, one row here,
and the code that uses it. Importing this module loads no TensorFlow, so
that a script answers `--help` and bad flags before it does.
"""

import collections
import sys
import types

from absl import flags

from bert_tf.train import choices
from bert_tf.train import optimizers

__all__ = ["SHARED_FLAGS", "TPU_FLAGS", "MODEL_FLAGS", "TRAINING_FLAGS",
           "DISTRIBUTE_FLAGS", "FINE_TUNING_FLAGS", "BEST_CHECKPOINT_FLAGS",
           "define_flags"]

_S, _B, _I, _F = (flags.DEFINE_string, flags.DEFINE_bool,
                  flags.DEFINE_integer, flags.DEFINE_float)


def _enum(*values):
  """A define function for an enum flag with `values`."""

  def define(name, default, help_text, **kwargs):
    return flags.DEFINE_enum(name, default, list(values), help_text,
                             **kwargs)

  return define


def _define_optimizer(name, default, help_text, **kwargs):
  """Defines --optimizer from the optimizer table as it is when defined:
  its names are the values, their summaries end the help."""
  table = optimizers.REGISTRY
  summaries = " ".join("%s: %s" % (key, entry.summary)
                       for key, entry in table.items())
  return flags.DEFINE_enum(name, default, list(table),
                           "%s %s" % (help_text, summaries), **kwargs)

# Every flag that more than one script takes: name -> (define, default,
# help), read-only. Names and defaults are the reference release's.
SHARED_FLAGS = types.MappingProxyType(collections.OrderedDict([
    # The model.
    ("bert_config_file", (_S, None,
                          "bert_config.json of the BERT model: its layer "
                          "count, sizes and vocabulary size.")),
    ("vocab_file", (_S, None,
                    "vocab.txt the model was pre-trained with: one WordPiece "
                    "token per line.")),
    ("init_checkpoint", (_S, None,
                         "Weights to start from: a released model folder "
                         "(its bert_model.ckpt), a checkpoint prefix such as "
                         ".../bert_model.ckpt, or a training output_dir (its "
                         "latest checkpoint).")),
    ("do_lower_case", (_B, True,
                       "Lower-case and strip accents before WordPiece: True "
                       "for uncased models, False for cased ones.")),
    ("output_dir", (_S, None,
                    "Folder for checkpoints, summaries and result files; a "
                    "second run with the same folder resumes training.")),
    ("max_seq_length", (_I, 128,
                        "Length of every input in WordPiece tokens, [CLS] "
                        "and [SEP] included: longer inputs are cut, shorter "
                        "ones padded.")),
    ("bucket_by_length", (_B, False,
                          "Cut each batch to its longest input, rounded up "
                          "to one of a few lengths (16, 24, 32, 48, 64, 96, "
                          "128, ... up to --max_seq_length), rather than "
                          "compute --max_seq_length for every input; "
                          "training batches inputs of similar length "
                          "together. Outputs equal the padded run's within "
                          "float32 rounding. Not with --use_tpu.")),
    ("pack_sequences", (_B, False,
                        "Put several whole examples into each row of "
                        "--max_seq_length (first-fit decreasing), each "
                        "attending only to itself with its own positions: "
                        "less padding computed on one static shape (TPU "
                        "too). Outputs equal the unpacked run's within "
                        "float32 rounding; --train_batch_size still counts "
                        "examples (on average), the eval and predict batch "
                        "sizes count rows. Not with --bucket_by_length.")),
    ("max_examples_per_row", (_I, 16,
                              "With --pack_sequences: examples a row holds "
                              "at most.")),
    ("doc_stride", (_I, 128,
                    "How far, in WordPiece tokens, each window over a text "
                    "longer than one input starts after the previous one.")),
    ("max_predictions_per_seq", (_I, 20,
                                 "Masked positions per sequence (the length "
                                 "of the masked_lm_* features).")),
    # Pre-training data and masking.
    ("masked_lm_prob", (_F, 0.15,
                        "Share of each sequence's tokens chosen for the "
                        "masked LM task.")),
    ("do_whole_word_mask", (_B, False,
                            "Mask every WordPiece of a chosen word together, "
                            "not pieces on their own.")),
    ("do_chinese_whole_word_mask", (
        _B, False,
        "--do_whole_word_mask, and the characters of a Chinese word (cut by "
        "the jieba segmenter: the chinese extra) are masked together; tokens "
        "and ids are unchanged.")),
    ("dynamic_masking", (
        _B, False,
        "Mask in run_pretraining.py's input pipeline, with new masks each "
        "time a sequence is read (RoBERTa's dynamic masking), instead of "
        "once in the records. create_pretraining_data.py then writes "
        "unmasked records (input_ids, input_mask, segment_ids, and "
        "next_sentence_labels with --next_sentence): --dupe_factor=1 is "
        "enough, as more passes only draw other chunks and next-sentence "
        "pairs. run_pretraining.py masks them by the reference's rule with "
        "--masked_lm_prob, --max_predictions_per_seq and the whole-word "
        "flags, and needs --vocab_file.")),
    ("next_sentence", (
        _B, True,
        "Next-sentence prediction (the reference). False: "
        "create_pretraining_data.py writes each instance as one span of a "
        "document, [CLS] text [SEP] (unmasked records without "
        "next_sentence_labels; masked ones keep the label, 0); "
        "run_pretraining.py trains without the next-sentence head, loss and "
        "metrics.")),
    # Data.
    ("data_dir", (_S, None,
                  "Folder holding the task's data files.")),
    ("label_column", (_I, -1,
                      "Column of the label (0-based; negative counts from "
                      "the end). run_classifier.py: train.tsv and dev.tsv "
                      "of the tsv task; run_ner.py: every CoNLL file.")),
    # What to run.
    ("do_train", (_B, False, "Train the model.")),
    ("do_eval", (_B, False, "Evaluate on the evaluation data.")),
    ("do_predict", (_B, False, "Write predictions for the test data.")),
    # Training.
    ("train_batch_size", (_I, 32, "Examples per training step.")),
    ("eval_batch_size", (_I, 8, "Examples per evaluation step.")),
    ("predict_batch_size", (_I, 8, "Examples per prediction step.")),
    ("learning_rate", (_F, 5e-5,
                       "Peak learning rate, reached after the warmup and "
                       "then decayed linearly to 0.")),
    ("num_train_epochs", (_F, 3.0, "Passes over the training data.")),
    ("warmup_proportion", (_F, 0.1,
                           "Share of the training steps spent raising the "
                           "learning rate linearly from 0 (0.1 = 10%).")),
    ("num_train_steps", (_I, 100000, "Training steps (optimizer updates).")),
    ("num_warmup_steps", (_I, 10000,
                          "Steps that raise the learning rate linearly from "
                          "0 to its peak.")),
    ("save_checkpoints_steps", (_I, 1000,
                                "Write a checkpoint every this many steps.")),
    ("save_checkpoints_secs", (_I, 600,
                               "Also write a checkpoint every this many "
                               "seconds of training (0: by steps only), so "
                               "a killed run loses little work.")),
    ("iterations_per_loop", (_I, 1000,
                             "Steps the TPU runs per call from the host "
                             "(ignored off TPU).")),
    # Training at scale (`training_options.TrainingOptions`).
    ("precision", (_enum(*choices.PRECISIONS), "fp32",
                   "Arithmetic of the encoder's matmuls: fp32 (as released), "
                   "bf16 (bfloat16; fast on CPUs with AMX or AVX512-BF16, on "
                   "TPUs and on Ampere or newer GPUs) or fp16 (float16 with "
                   "dynamic loss scaling; GPU only). Weights, checkpoints, "
                   "layer norm, softmax and losses stay float32.")),
    ("gradient_accumulation_steps", (_I, 1,
                                     "Batches of --train_batch_size examples "
                                     "whose mean gradient makes one update; "
                                     "steps, warmup and --num_train_steps "
                                     "count updates.")),
    ("optimizer", (_define_optimizer, "adamw", "The update rule.")),
    ("poly_power", (_F, 1.0,
                    "Power of the polynomial learning-rate decay after the "
                    "warmup (1.0 = linear, as released).")),
    ("use_xla", (_B, False,
                 "Compile clusters of ops with XLA (just in time, on CPU and "
                 "GPU). Under a distribution strategy the optimizer's update "
                 "is left uncompiled, so that every replica's copy gets the "
                 "same update.")),
    ("deterministic", (_B, False,
                       "Reruns give the same weights on the same machine and "
                       "software: deterministic kernels, fixed seeds and a "
                       "fixed input order. Slower.")),
    # Evaluation during fine-tuning (`bert_tf/train/best.py`).
    ("eval_every_steps", (_I, None,
                          "Evaluate the dev set after every this many "
                          "training steps (needs --do_train and --do_eval; "
                          "default: once, after training).")),
    ("keep_best_by", (_S, None,
                      "Keep the checkpoint with the best value of this "
                      "eval_results.txt key (e.g. eval_accuracy; a key "
                      "ending in loss is better lower), with its "
                      "eval_results.txt, in <output_dir>/best/; prediction "
                      "and --export_dir then use it. Needs "
                      "--eval_every_steps.")),
    ("early_stopping_patience", (_I, None,
                                 "Stop training after this many evaluations "
                                 "in a row without a better --keep_best_by "
                                 "value.")),
    # Serving.
    ("export_dir", (_S, None,
                    "Also write a SavedModel for serving under this folder, "
                    "in a new timestamped version sub-folder, after the other "
                    "steps. Alone (no --do_* step), it exports the latest "
                    "checkpoint of --output_dir, else --init_checkpoint.")),
    # The runner, then the TPU.
    ("runner", (
        _enum(*choices.RUNNERS), "auto",
        "What runs the model: estimator, the TPUEstimator of TensorFlow "
        "2.15 (needed on TPU); session, this project's runner on core "
        "TensorFlow (any version from 2.15 on; same graph, same numbers); "
        "auto, the Estimator where this TensorFlow has it, else session.")),
    ("use_tpu", (_B, False, "Run on a Cloud TPU (False: CPU or GPU).")),
    ("tpu_name", (_S, None,
                  "The Cloud TPU: its name, or a grpc://ip:port address.")),
    ("tpu_zone", (_S, None,
                  "GCE zone of the Cloud TPU (found from its name when "
                  "unset).")),
    ("gcp_project", (_S, None,
                     "GCP project of the Cloud TPU (found from its name when "
                     "unset).")),
    ("master", (_S, None, "Address of the TensorFlow master.")),
    ("num_tpu_cores", (_I, 8,
                       "TPU cores to use; with --use_tpu only.")),
    # tf.distribute (several GPUs or machines); not with --use_tpu.
    ("distribution_strategy", (
        _enum(*choices.STRATEGIES), "none",
        "none: one device (the reference's path). "
        "mirrored: data-parallel over --num_gpus GPUs "
        "of this machine (or --num_cpu_devices CPU "
        "replicas). multi_worker_mirrored: over the "
        "machines that the TF_CONFIG environment "
        "variable lists, --num_gpus GPUs each. Batch "
        "sizes stay global (all replicas together); "
        "--train_batch_size must be a multiple of the "
        "replica count.")),
    ("num_gpus", (_I, 1,
                  "GPUs per machine for --distribution_strategy (0: the "
                  "CPU). With none, more than 1 is refused.")),
    ("num_cpu_devices", (_I, 0,
                         "With --distribution_strategy=mirrored and "
                         "--num_gpus=0: split the CPU into this many "
                         "replicas (0: no split). For testing.")),
    ("worker_timeout_secs", (_I, 300,
                             "With multi_worker_mirrored: seconds to wait "
                             "for every other TF_CONFIG task to be "
                             "reachable before failing.")),
    ("random_seed", (_I, None,
                     "Seed of the graph's random operations and of the "
                     "training input's shuffling (each worker adds its "
                     "index); default unseeded, a new order every run.")),
    # Apache Beam pipelines (the beam extra).
    ("num_shards", (_I, 0,
                    "Output shards, written by an Apache Beam pipeline "
                    "(needs pip install .[beam]). create_pretraining_data.py: "
                    "0 (default) runs without Beam; N cuts the corpus as "
                    "--num_workers=N does, and shard k is byte-identical to "
                    "part k of --num_workers=N.")),
    ("pipeline_options", (_S, "",
                          "Comma-separated Apache Beam pipeline options, e.g. "
                          "--runner=DirectRunner,--direct_num_workers=2,"
                          "--direct_running_mode=multi_processing (default: "
                          "the DirectRunner, one process a shard, at most "
                          "one a CPU core).")),
]))

# The groups of the options' dataclasses: their fields, by name
# (`training_options.field_names` of TpuOptions, TrainingOptions and
# DistributeOptions).
TPU_FLAGS = ("runner", "use_tpu", "tpu_name", "tpu_zone", "gcp_project",
             "master", "num_tpu_cores")
MODEL_FLAGS = ("bert_config_file", "vocab_file", "init_checkpoint",
               "do_lower_case", "output_dir")
TRAINING_FLAGS = ("precision", "optimizer", "gradient_accumulation_steps",
                  "poly_power", "use_xla", "deterministic")
DISTRIBUTE_FLAGS = ("distribution_strategy", "num_gpus", "num_cpu_devices",
                    "worker_timeout_secs", "random_seed")
FINE_TUNING_FLAGS = ("do_train", "do_predict", "train_batch_size",
                     "predict_batch_size", "learning_rate", "num_train_epochs",
                     "warmup_proportion", "save_checkpoints_steps",
                     "save_checkpoints_secs", "iterations_per_loop")
BEST_CHECKPOINT_FLAGS = ("eval_every_steps", "keep_best_by",
                         "early_stopping_patience")


def define_flags(*names, **defaults):
  """Defines the named shared flags, with the script's own defaults.

  Args:
    *names: str names from `SHARED_FLAGS` (or tuples of them, such as
      `TPU_FLAGS`).
    **defaults: name -> default, where a script's reference default differs
      from the table's (`max_seq_length=384` for SQuAD).

  Raises:
    KeyError: a name that is not in `SHARED_FLAGS`.
    absl.flags.DuplicateFlagError: a flag that is already defined: each
      flag has one definition in a process.
  """
  flat = []
  for name in names:
    flat.extend([name] if isinstance(name, str) else name)
  for name in defaults:
    if name not in flat:
      raise KeyError("default given for %r, which is not defined here" % name)
  # The flags belong to the calling script, so that its --help lists them.
  module = sys._getframe(1).f_globals.get("__name__")  # pylint: disable=protected-access
  if module == "__main__":
    module = sys.argv[0]
  for name in flat:
    define, default, help_text = SHARED_FLAGS[name]
    define(name, defaults.get(name, default), help_text, module_name=module)
