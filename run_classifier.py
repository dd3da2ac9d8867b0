"""Fine-tunes BERT on a sentence or sentence-pair classification task.

Matches the reference release's `run_classifier.py`: the task processors
(XNLI, MNLI, MRPC, CoLA) and their file layouts, the `[CLS] a [SEP] b [SEP]`
features, the classifier head on the pooled output (`output_weights`,
`output_bias`), the `--init_checkpoint` assignment map, the `model_fn` run
by `TPUEstimator` on TensorFlow 2.15 or by this project's session runner
(`--runner`; the only one on TensorFlow 2.21), and the outputs
`eval_results.txt` and `test_results.tsv`. Beyond it: the rest of GLUE and a `tsv` task
(`bert_tf/tasks/classifier/data.py`), each task's standard metric
(`bert_tf/tasks/classifier/metrics.py`), one-line errors for bad input, and
behind flags whose defaults keep the reference's behaviour: multi-label
`tsv` tasks (`--multi_label`, `bert_tf/tasks/classifier/multi_label.py`),
windows over long texts (`--doc_stride`, `--window_aggregation`,
`bert_tf/tasks/classifier/windows.py`) and evaluation during training with
the best checkpoint kept (`--eval_every_steps`, `--keep_best_by`,
`--early_stopping_patience`, `bert_tf/train/best.py`).

Usage (see docs/finetuning.md):
  python run_classifier.py --task_name=mrpc --do_train --do_eval --do_predict \
    --data_dir=$GLUE_DIR/MRPC --vocab_file=$BERT_DIR/vocab.txt \
    --bert_config_file=$BERT_DIR/bert_config.json \
    --init_checkpoint=$BERT_DIR --output_dir=/tmp/mrpc

The reference's public names (`InputExample`, the processors,
`convert_single_example`, `create_model`, `model_fn_builder`, ...) are
imported from `bert_tf.tasks.classifier` (`data`, `features`, `model`); see
`__all__`.
"""

from bert_tf.cli import quiet  # First: TensorFlow's start-up lines off.
quiet.when_run_as_command(__name__)

from absl import flags

from bert_tf.cli import flags as cli_flags
from bert_tf.cli import flags_first
from bert_tf.tasks.classifier.data import AGGREGATIONS
from bert_tf.tasks.classifier.data import PROCESSORS

__all__ = [
    "InputExample", "PaddingInputExample", "InputFeatures", "DataProcessor",
    "XnliProcessor", "MnliProcessor", "MrpcProcessor", "ColaProcessor",
    "get_processor", "convert_single_example", "convert_examples_to_features",
    "file_based_convert_examples_to_features", "file_based_input_fn_builder",
    "input_fn_builder", "pad_to_batch_multiple", "create_model",
    "model_fn_builder", "write_test_results", "define_flags", "main", "cli",
]

FLAGS = flags.FLAGS


def define_flags():
  """Defines the script's flags: the reference's, plus the `tsv` task's."""
  flags.DEFINE_string(
      "task_name", None,
      "Which task's files and labels to use (any case): " +
      ", ".join(sorted(PROCESSORS)) + ".")
  cli_flags.define_flags(
      "data_dir", cli_flags.MODEL_FLAGS, "max_seq_length", "bucket_by_length",
      "do_eval",
      "eval_batch_size", cli_flags.FINE_TUNING_FLAGS, "export_dir",
      "label_column", cli_flags.TRAINING_FLAGS, cli_flags.TPU_FLAGS,
      cli_flags.DISTRIBUTE_FLAGS, cli_flags.BEST_CHECKPOINT_FLAGS,
      "doc_stride", "pack_sequences", "max_examples_per_row",
      doc_stride=None)
  # The `tsv` task (a user's own files); column numbers are 0-based and may
  # be negative (counted from the end, as in Python).
  flags.DEFINE_integer("text_a_column", 0,
                       "task tsv: column of the first (or only) text.")
  flags.DEFINE_integer(
      "text_b_column", None,
      "task tsv: column of the second text; unset for single-text tasks.")
  flags.DEFINE_bool("skip_header", False,
                    "task tsv: whether the first line of every file is a "
                    "header.")
  # A set of labels per line (task tsv).
  flags.DEFINE_bool(
      "multi_label", False,
      "task tsv: the label column holds a set of labels (joined by "
      "--label_separator; empty: none); one sigmoid per label, binary "
      "cross-entropy.")
  flags.DEFINE_string("label_separator", ",",
                      "With --multi_label: what joins the labels of a set.")
  flags.DEFINE_float(
      "multi_label_threshold", 0.5,
      "With --multi_label: a label is predicted when its probability is at "
      "least this, in (0, 1) (the eval F1 scores and exact-set accuracy).")
  # Long texts (unset: the reference's truncation).
  flags.DEFINE_enum(
      "window_aggregation", "mean", list(AGGREGATIONS),
      "With --doc_stride: how the windows' probabilities make the line of "
      "their text in test_results.tsv: their mean or their maximum.")
  # --vocab_file and --bert_config_file may come from a Hugging Face folder
  # given as --init_checkpoint; startup.prepare_model requires them.
  for name in ("data_dir", "task_name", "output_dir"):
    flags.mark_flag_as_required(name)


# Run as a command: --help and flag errors answer here, before the imports
# below load TensorFlow.
flags_first.parse_when_run_as_command(__name__, define_flags)

import functools

from absl import logging

from bert_tf.checks.problems import Problems
from bert_tf.cli import entry
from bert_tf.cli import startup
from bert_tf.export import saved_model as export_utils
# The reference's public names of this module (`run_classifier.InputExample`,
# `run_classifier.model_fn_builder`, ...) live in the package.
from bert_tf.tasks.classifier.data import ColaProcessor
from bert_tf.tasks.classifier.data import DataProcessor
from bert_tf.tasks.classifier.data import get_processor
from bert_tf.tasks.classifier.data import InputExample
from bert_tf.tasks.classifier.data import MnliProcessor
from bert_tf.tasks.classifier.data import MrpcProcessor
from bert_tf.tasks.classifier.data import PaddingInputExample
from bert_tf.tasks.classifier.data import XnliProcessor
from bert_tf.tasks.classifier.multi_label import MultiLabelTsvProcessor
from bert_tf.tasks.classifier.features import convert_examples_to_features
from bert_tf.tasks.classifier.features import convert_single_example
from bert_tf.tasks.classifier.features import file_based_convert_examples_to_features
from bert_tf.tasks.classifier.features import file_based_input_fn_builder
from bert_tf.tasks.classifier.features import input_fn_builder
from bert_tf.tasks.classifier.features import InputFeatures
from bert_tf.tasks.classifier.features import pad_to_batch_multiple
from bert_tf.tasks.classifier.model import create_model
from bert_tf.tasks.classifier.model import head_for
from bert_tf.tasks.classifier.model import MultiLabelHead
from bert_tf.tasks.classifier.model import model_fn_builder
from bert_tf.tasks.classifier.model import write_test_results
from bert_tf.tasks.classifier.task import ClassifierTask
from bert_tf.runner import loop
from bert_tf.train import best as best_lib
from bert_tf.train import checkpoints
from bert_tf.train import model_fn as model_fn_utils
from bert_tf.train import options as training_options
# `run_classifier.modeling` and `.tokenization`, as in the reference.
import modeling  # pylint: disable=unused-import
import tokenization  # pylint: disable=unused-import


# ----------------------------------------------------------------------------
# main.
# ----------------------------------------------------------------------------


def _flag_problems(flag_values):
  """This script's flag problems (the model's are `startup.prepare_model`'s)."""
  problems = startup.fine_tuning_flag_problems(flag_values)
  if flag_values.multi_label:
    if flag_values.task_name.lower() != "tsv":
      problems.append("--multi_label needs --task_name=tsv (a label column "
                      "of label sets), got --task_name=%s" %
                      flag_values.task_name)
    if not 0.0 < flag_values.multi_label_threshold < 1.0:
      problems.append("--multi_label_threshold: got %s, expected a number "
                      "in (0, 1)" % flag_values.multi_label_threshold)
    if not flag_values.label_separator:
      problems.append("--label_separator: expected a non-empty string")
  if flag_values.doc_stride is not None and flag_values.doc_stride < 1:
    problems.append("--doc_stride: got %d, expected at least 1 token" %
                    flag_values.doc_stride)
  return problems


def _task(flag_values, tokenizer, use_tpu):
  """The task the flags name: its processor, labels and head."""
  columns = {name: flag_values[name].value for name in (
      "data_dir", "text_a_column", "text_b_column", "label_column",
      "skip_header")}
  if flag_values.multi_label:  # A set of labels per line (task tsv).
    processor = MultiLabelTsvProcessor(
        separator=flag_values.label_separator, **columns)
    label_list = processor.get_labels()
    head = MultiLabelHead(label_list, flag_values.multi_label_threshold)
  else:
    processor = get_processor(flag_values.task_name, **columns)
    label_list = processor.get_labels()
    head = head_for(processor, label_list)
  if flag_values.doc_stride is not None:
    head = head.windowed(flag_values.doc_stride,
                         flag_values.window_aggregation)
  return ClassifierTask(flag_values.task_name.lower(), processor, label_list,
                        head, tokenizer,
                        flag_values.max_seq_length, flag_values.output_dir,
                        use_tpu=use_tpu,
                        bucket_by_length=flag_values.bucket_by_length,
                        max_examples_per_row=(
                            flag_values.max_examples_per_row
                            if flag_values.pack_sequences else None))


def _export(flag_values, task, bert_config, init_checkpoint, checkpoint=None):
  """Exports the task's model under --export_dir (`export_utils`):
  `checkpoint` (the kept best), else the latest."""
  return export_utils.export_saved_model(
      checkpoint_path=checkpoint or checkpoints.checkpoint_to_export(
          flag_values.output_dir, init_checkpoint),
      export_dir=flag_values.export_dir, vocab_file=flag_values.vocab_file,
      bert_config_file=flag_values.bert_config_file,
      do_lower_case=flag_values.do_lower_case,
      **task.export_spec(bert_config))


def main(_):
  logging.set_verbosity(logging.INFO)
  # 1. Flags, options, config, checkpoint, vocabulary: every problem
  # reported together, before any work; then the devices.
  problems = Problems(_flag_problems(FLAGS))
  run = training_options.from_flags(FLAGS, problems)
  model = startup.prepare_model(
      FLAGS.bert_config_file, FLAGS.max_seq_length, FLAGS.init_checkpoint,
      FLAGS.do_lower_case, FLAGS.vocab_file, FLAGS.output_dir,
      problems=problems, run=run,
      export_now=bool(FLAGS.export_dir) and not FLAGS.do_train)
  problems.raise_if_any()
  loop.setup_devices(run)

  # 2. The task and every split the run needs, read (and checked) up front.
  task = _task(FLAGS, model.tokenizer, run.tpu.use_tpu)
  if run.evaluation.keep_best_by:
    best_lib.check_key(run.evaluation.keep_best_by, task.head.eval_keys())
  examples = task.read_examples(FLAGS.data_dir, [
      split for split, wanted in (("train", run.do_train),
                                  ("dev", run.do_eval),
                                  ("test", run.do_predict)) if wanted])

  with loop.output_dir(FLAGS.output_dir, run, FLAGS.init_checkpoint):
    # 3. The training records and the model.
    training = (task.training(examples["train"], run.examples_per_update,
                              FLAGS.num_train_epochs, FLAGS.warmup_proportion,
                              FLAGS.learning_rate) if run.do_train else None)
    model_fn = task.model_fn(
        model.bert_config, model.init_checkpoint,
        model_fn_utils.TrainingSchedule(
            FLAGS.learning_rate, training and training.num_train_steps,
            training and training.num_warmup_steps,
            run.training.optimizer_options,
            dropout_seed=run.training.dropout_seed),
        compute_dtype=run.training.compute_dtype)
    # 4. Train (evaluating on the way), evaluate, predict, export.
    loop.run(
        model_fn, run, FLAGS.output_dir, training=training,
        evaluate=(task.evaluate(examples["dev"], FLAGS.eval_batch_size)
                  if run.do_eval else None),
        predict=functools.partial(task.predict, examples.get("test"),
                                  FLAGS.predict_batch_size),
        export=(functools.partial(_export, FLAGS, task, model.bert_config,
                                  model.init_checkpoint)
                if FLAGS.export_dir else None),
        eval_batch_size=FLAGS.eval_batch_size,
        predict_batch_size=FLAGS.predict_batch_size)


def cli():
  """Command-line entry point: defines the flags, then runs `main`."""
  entry.run_main(main, define_flags)


if __name__ == "__main__":
  cli()
