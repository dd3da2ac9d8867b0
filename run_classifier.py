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

import functools
import os

from absl import flags
from absl import logging
import tensorflow.compat.v1 as tf

from bert_tf.checks.problems import Problems
from bert_tf.cli import flags as cli_flags
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
from bert_tf.tasks.classifier.data import PROCESSORS
from bert_tf.tasks.classifier.data import XnliProcessor
from bert_tf.tasks.classifier import multi_label as multi_label_lib
from bert_tf.tasks.classifier import windows as windows_lib
from bert_tf.tasks.classifier.features import convert_examples_to_features
from bert_tf.tasks.classifier.features import convert_single_example
from bert_tf.tasks.classifier.features import file_based_convert_examples_to_features
from bert_tf.tasks.classifier.features import file_based_input_fn_builder
from bert_tf.tasks.classifier.features import input_fn_builder
from bert_tf.tasks.classifier.features import InputFeatures
from bert_tf.tasks.classifier.features import pad_to_batch_multiple
from bert_tf.tasks.classifier.model import create_model
from bert_tf.tasks.classifier.model import eval_keys
from bert_tf.tasks.classifier.model import model_fn_builder
from bert_tf.tasks.classifier.model import write_test_results
from bert_tf.runner import loop
from bert_tf.train import best as best_lib
from bert_tf.train import checkpoints
from bert_tf.train import model_fn as model_fn_utils
from bert_tf.train import options as training_options
# `run_classifier.modeling` and `.tokenization`, as in the reference.
import modeling  # pylint: disable=unused-import
import tokenization  # pylint: disable=unused-import

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
      "doc_stride", doc_stride=None)
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
      "window_aggregation", "mean", list(windows_lib.AGGREGATIONS),
      "With --doc_stride: how the windows' probabilities make the line of "
      "their text in test_results.tsv: their mean or their maximum.")
  for name in ("data_dir", "task_name", "vocab_file", "bert_config_file",
               "output_dir"):
    flags.mark_flag_as_required(name)


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


def _read_examples(processor, data_dir, splits):
  """Reads every split that the run needs, so bad input fails up front.

  Args:
    processor: a `DataProcessor`.
    data_dir: str, the `--data_dir` flag.
    splits: the split names to read, among "train", "dev" and "test".

  Returns:
    Dict split name -> list of `InputExample`s.

  Raises:
    ValueError: when the training or dev split is empty.
  """
  readers = {"train": processor.get_train_examples,
             "dev": processor.get_dev_examples,
             "test": processor.get_test_examples}
  examples = {}
  for split in splits:
    examples[split] = readers[split](data_dir)
    logging.info("Read %d %s examples from %s", len(examples[split]), split,
                 data_dir)
    # An empty test set is fine (it gives an empty test_results.tsv), but
    # training on nothing would loop forever and evaluating nothing means
    # nothing.
    if not examples[split] and split != "test":
      raise ValueError("--data_dir=%s: no %s examples were read; --do_%s "
                       "needs at least one" %
                       (data_dir, split,
                        "train" if split == "train" else "eval"))
  return examples


def _features_file(path, examples, label_list, max_seq_length, tokenizer,
                   batch_size, use_tpu):
  """Writes `examples` to `path` for evaluation or prediction.

  On TPU the examples are padded to whole batches with
  `PaddingInputExample`s.

  Returns:
    (num_written, num_actual).
  """
  num_actual = len(examples)
  if use_tpu:
    examples = pad_to_batch_multiple(examples, batch_size)
  file_based_convert_examples_to_features(examples, label_list,
                                          max_seq_length, tokenizer, path)
  logging.info("  Num examples = %d (%d actual, %d padding)", len(examples),
               num_actual, len(examples) - num_actual)
  logging.info("  Batch size = %d", batch_size)
  return len(examples), num_actual


def _export(flag_values, bert_config, label_list, is_regression,
            init_checkpoint, checkpoint=None):
  """Exports the fine-tuned model under --export_dir (see export_utils).

  `checkpoint` (the kept best) replaces the latest one when given.
  """
  multi_label = flag_values.multi_label
  model_fn = model_fn_builder(
      bert_config=bert_config,
      num_labels=1 if is_regression else len(label_list),
      init_checkpoint=None, learning_rate=0.0, num_train_steps=None,
      num_warmup_steps=None, use_tpu=False, use_one_hot_embeddings=False,
      is_regression=is_regression, multi_label=multi_label)
  tsv_columns = None
  if flag_values.task_name.lower() == "tsv":
    tsv_columns = {"text_a_column": flag_values.text_a_column,
                   "text_b_column": flag_values.text_b_column,
                   "skip_header": flag_values.skip_header}
  features = (export_utils.REGRESSION_FEATURES if is_regression else
              export_utils.CLASSIFIER_FEATURES)
  extra_config = {"task_name": flag_values.task_name.lower(),
                  "tsv_columns": tsv_columns}
  if multi_label:  # label_ids: a 0/1 vector; outputs: one sigmoid each.
    features = dict(features, label_ids=(tf.int32, (len(label_list),), 0))
    extra_config.update(problem_type=multi_label_lib.PROBLEM_TYPE,
                        multi_label_threshold=(
                            flag_values.multi_label_threshold))
  export_utils.export_saved_model(
      model_fn, checkpoint or checkpoints.checkpoint_to_export(
          flag_values.output_dir, init_checkpoint),
      flag_values.export_dir, flag_values.max_seq_length,
      kind=(export_utils.REGRESSION if is_regression else
            export_utils.CLASSIFIER),
      output_keys=["predictions" if is_regression else "probabilities"],
      vocab_file=flag_values.vocab_file,
      bert_config_file=flag_values.bert_config_file,
      do_lower_case=flag_values.do_lower_case, label_list=label_list,
      extra_features=features, extra_config=extra_config,
      bucket_by_length=flag_values.bucket_by_length)


class _Records(object):
  """Writes a split's records: the reference's, or (multi-label, windows)
  `windows_lib.write_features`'; remembers each record's example."""

  def __init__(self, flag_values, label_list, tokenizer, use_tpu):
    self.extended = (flag_values.multi_label or
                     flag_values.doc_stride is not None)
    self.flag_values = flag_values
    self.label_list = label_list
    self.tokenizer = tokenizer
    self.use_tpu = use_tpu

  def write(self, path, examples, batch_size=None):
    """Writes `examples` to `path`; padded to `batch_size` on TPU (not for
    training: `batch_size` None). Returns the number of records."""
    seq_length = self.flag_values.max_seq_length
    if not self.extended:
      if batch_size is None:
        file_based_convert_examples_to_features(
            examples, self.label_list, seq_length, self.tokenizer, path)
        return len(examples)
      return _features_file(path, examples, self.label_list, seq_length,
                            self.tokenizer, batch_size, self.use_tpu)[0]
    self.owners = windows_lib.write_features(
        examples, self.label_list, seq_length, self.tokenizer, path,
        multi_label=self.flag_values.multi_label,
        doc_stride=self.flag_values.doc_stride,
        batch_multiple=batch_size if self.use_tpu else None)
    return len(self.owners)

  def per_example(self, predictions, num_examples):
    """The predictions of the examples just written, one per example."""
    if not self.extended:
      return predictions
    return ({"probabilities": value} for value in windows_lib.aggregate(
        predictions, self.owners, num_examples,
        self.flag_values.window_aggregation))


def _processor(flag_values):
  """The task's `DataProcessor` (a multi-label tsv task's with
  `--multi_label`)."""
  tsv_columns = dict(
      data_dir=flag_values.data_dir, text_a_column=flag_values.text_a_column,
      text_b_column=flag_values.text_b_column,
      label_column=flag_values.label_column,
      skip_header=flag_values.skip_header)
  if flag_values.multi_label:
    return multi_label_lib.MultiLabelTsvProcessor(
        separator=flag_values.label_separator, **tsv_columns)
  return get_processor(flag_values.task_name, **tsv_columns)


def _input_fn(flag_values, path, is_training, is_regression, label_list,
              use_tpu):
  """The `input_fn` over a records file `_Records` wrote."""
  return file_based_input_fn_builder(
      path, flag_values.max_seq_length, is_training=is_training,
      drop_remainder=is_training or use_tpu, is_regression=is_regression,
      num_labels=len(label_list) if flag_values.multi_label else None,
      bucket_by_length=flag_values.bucket_by_length)


def _training(flag_values, run, records, examples, label_list, is_regression):
  """Writes the training records; their `loop.Training` (steps count
  updates, of --train_batch_size times --gradient_accumulation_steps)."""
  output_dir = flag_values.output_dir
  if flag_values.multi_label:
    multi_label_lib.write_labels_file(output_dir, label_list)
  train_file = os.path.join(output_dir, "train.tf_record")
  # With windows, every window is a training example.
  num_records = records.write(train_file, examples)
  num_train_steps, num_warmup_steps = model_fn_utils.fine_tuning_steps(
      num_records, run.examples_per_update, flag_values.num_train_epochs,
      flag_values.warmup_proportion)
  logging.info("  Num examples = %d (%d records)", len(examples),
               num_records)
  return loop.Training(
      input_fn=_input_fn(flag_values, train_file, True, is_regression,
                         label_list, run.tpu.use_tpu),
      num_train_steps=num_train_steps, num_warmup_steps=num_warmup_steps,
      learning_rate=flag_values.learning_rate, records=[train_file],
      # Progress about ten times a run, at most every 100 steps.
      progress_every=min(100, max(1, num_train_steps // 10)))


def _evaluate(flag_values, records, examples, eval_input_fn, use_tpu):
  """Writes the dev records; the `loop.run` evaluation over them."""
  eval_file = os.path.join(flag_values.output_dir, "eval.tf_record")
  batch_size = flag_values.eval_batch_size
  num_written = records.write(eval_file, examples, batch_size)

  def evaluate(steps):
    # On TPU every batch is whole; elsewhere the last partial batch is kept
    # and evaluation runs until the data is exhausted.
    return steps.evaluate(eval_input_fn(eval_file), records=[eval_file],
                          steps=num_written // batch_size if use_tpu else None)

  return evaluate


def _predict(flag_values, records, examples, predict_input_fn, steps,
             checkpoint):
  """Writes test_results.tsv: a line of probabilities per test example."""
  predict_file = os.path.join(flag_values.output_dir, "predict.tf_record")
  batch_size = flag_values.predict_batch_size
  num_written = records.write(predict_file, examples, batch_size)
  predictions = steps.predict(
      predict_input_fn(predict_file), records=[predict_file],
      num_batches=-(-num_written // batch_size), checkpoint_path=checkpoint,
      batch_size=batch_size)
  output_file = os.path.join(flag_values.output_dir, "test_results.tsv")
  write_test_results(output_file,
                     records.per_example(predictions, len(examples)),
                     len(examples))
  logging.info("Wrote %d lines to %s", len(examples), output_file)


def main(_):
  logging.set_verbosity(logging.INFO)
  # 1. Flags, options, config, checkpoint, vocabulary: every problem
  # reported together, before any work; then the devices.
  problems = Problems(_flag_problems(FLAGS))
  run = training_options.from_flags(FLAGS, problems)
  model = startup.prepare_model(
      FLAGS.bert_config_file, FLAGS.max_seq_length, FLAGS.init_checkpoint,
      FLAGS.do_lower_case, FLAGS.vocab_file, FLAGS.output_dir,
      problems=problems,
      export_now=bool(FLAGS.export_dir) and not FLAGS.do_train)
  problems.raise_if_any()
  loop.setup_devices(run)
  use_tpu = run.tpu.use_tpu

  # 2. The task and every split the run needs, read (and checked) up front.
  processor = _processor(FLAGS)
  label_list, is_regression = processor.get_labels(), processor.is_regression
  if run.evaluation.keep_best_by:
    best_lib.check_key(run.evaluation.keep_best_by,
                       eval_keys(processor, label_list, FLAGS.multi_label))
  examples = _read_examples(processor, FLAGS.data_dir, [
      split for split, wanted in (("train", run.do_train),
                                  ("dev", run.do_eval),
                                  ("test", run.do_predict)) if wanted])
  records = _Records(FLAGS, label_list, model.tokenizer, use_tpu)
  input_fn = functools.partial(_input_fn, FLAGS, is_training=False,
                               is_regression=is_regression,
                               label_list=label_list, use_tpu=use_tpu)

  with loop.output_dir(FLAGS.output_dir, run):
    # 3. The training records and the model.
    training = (_training(FLAGS, run, records, examples["train"], label_list,
                          is_regression) if run.do_train else None)
    model_fn = model_fn_builder(
        bert_config=model.bert_config,
        num_labels=1 if is_regression else len(label_list),
        init_checkpoint=model.init_checkpoint,
        learning_rate=FLAGS.learning_rate,
        num_train_steps=training and training.num_train_steps,
        num_warmup_steps=training and training.num_warmup_steps,
        use_tpu=use_tpu, use_one_hot_embeddings=use_tpu,
        is_regression=is_regression, metric_names=processor.metric_names,
        options=run.training.optimizer_options,
        compute_dtype=run.training.compute_dtype,
        multi_label=FLAGS.multi_label, label_names=label_list,
        threshold=FLAGS.multi_label_threshold)
    # 4. Train (evaluating on the way), evaluate, predict, export.
    loop.run(
        model_fn, run, FLAGS.output_dir, training=training,
        evaluate=(_evaluate(FLAGS, records, examples["dev"], input_fn,
                            use_tpu) if run.do_eval else None),
        predict=functools.partial(_predict, FLAGS, records,
                                  examples.get("test"), input_fn),
        export=(functools.partial(_export, FLAGS, model.bert_config,
                                  label_list, is_regression,
                                  model.init_checkpoint)
                if FLAGS.export_dir else None),
        eval_batch_size=FLAGS.eval_batch_size,
        predict_batch_size=FLAGS.predict_batch_size)


def cli():
  """Command-line entry point: defines the flags, then runs `main`."""
  define_flags()
  entry.run_main(main)


if __name__ == "__main__":
  cli()
