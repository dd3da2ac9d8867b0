"""Fine-tunes BERT on a sentence or sentence-pair classification task.

Matches the reference release's `run_classifier.py`: the task processors
(XNLI, MNLI, MRPC, CoLA) and their file layouts, the `[CLS] a [SEP] b [SEP]`
features, the classifier head on the pooled output (`output_weights`,
`output_bias`), the `--init_checkpoint` assignment map, `TPUEstimator` with
`use_tpu=False` on CPU/GPU, and the outputs `eval_results.txt` and
`test_results.tsv`. Beyond it: the rest of GLUE and a `tsv` task
(`classifier_data.py`), each task's standard metric (`glue_metrics.py`), and
one-line errors for bad input.

Usage (see README.md):
  python run_classifier.py --task_name=mrpc --do_train --do_eval --do_predict \
    --data_dir=$GLUE_DIR/MRPC --vocab_file=$BERT_DIR/vocab.txt \
    --bert_config_file=$BERT_DIR/bert_config.json \
    --init_checkpoint=$BERT_DIR --output_dir=/tmp/mrpc

Public names: `InputFeatures`, `convert_single_example`,
`convert_examples_to_features`, `file_based_convert_examples_to_features`,
`file_based_input_fn_builder`, `input_fn_builder`, `pad_to_batch_multiple`,
`create_model`, `model_fn_builder`, `write_test_results`, and (from
`classifier_data`) `InputExample`, `DataProcessor`, `XnliProcessor`,
`MnliProcessor`, `MrpcProcessor`, `ColaProcessor`, `get_processor`.
"""

import bert_tf.cli  # pylint: disable=unused-import  # First: quiets TensorFlow's start-up log.

import collections
import functools
import os

from absl import flags
from absl import logging
import numpy as np
import tensorflow.compat.v1 as tf

# The reference's public names of this module (`run_classifier.InputExample`,
# `run_classifier.MrpcProcessor`, ...) live in classifier_data.
from bert_tf.tasks.classifier.data import ColaProcessor  # pylint: disable=unused-import
from bert_tf.tasks.classifier.data import DataProcessor  # pylint: disable=unused-import
from bert_tf.tasks.classifier.data import get_processor
from bert_tf.tasks.classifier.data import InputExample  # pylint: disable=unused-import
from bert_tf.tasks.classifier.data import MnliProcessor  # pylint: disable=unused-import
from bert_tf.tasks.classifier.data import MrpcProcessor  # pylint: disable=unused-import
from bert_tf.tasks.classifier.data import PaddingInputExample
from bert_tf.tasks.classifier.data import PROCESSORS
from bert_tf.tasks.classifier.data import XnliProcessor  # pylint: disable=unused-import
from bert_tf.train import estimator as estimator_utils
from bert_tf.export import saved_model as export_utils
from bert_tf.tasks import features as feature_utils
from bert_tf.tasks.classifier import metrics as glue_metrics
from bert_tf import io as io_utils
import modeling
from bert_tf.checks import reliability
from bert_tf.cli import flags as cli_flags
from bert_tf.cli import runner
from bert_tf.cli import startup
from bert_tf.train import distribute as distribute_utils
from bert_tf.train import options as training_options
import tokenization

FLAGS = flags.FLAGS


def define_flags():
  """Defines the script's flags: the reference's, plus the `tsv` task's."""
  flags.DEFINE_string(
      "task_name", None,
      "Which task's files and labels to use (any case): " +
      ", ".join(sorted(PROCESSORS)) + ".")
  cli_flags.define_flags(
      "data_dir", cli_flags.MODEL_FLAGS, "max_seq_length", "do_eval",
      "eval_batch_size", cli_flags.FINE_TUNING_FLAGS, "export_dir",
      "label_column", cli_flags.TRAINING_FLAGS, cli_flags.TPU_FLAGS,
      cli_flags.DISTRIBUTE_FLAGS)
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
  for name in ("data_dir", "task_name", "vocab_file", "bert_config_file",
               "output_dir"):
    flags.mark_flag_as_required(name)


# ----------------------------------------------------------------------------
# Features.
# ----------------------------------------------------------------------------


class InputFeatures(object):
  """A single set of features of data."""

  def __init__(self, input_ids, input_mask, segment_ids, label_id,
               is_real_example=True):
    self.input_ids = input_ids
    self.input_mask = input_mask
    self.segment_ids = segment_ids
    self.label_id = label_id
    self.is_real_example = is_real_example


# ----------------------------------------------------------------------------
# Feature conversion.
# ----------------------------------------------------------------------------


def _label_id(example, label_list):
  """The example's label as an int index, or a float for regression."""
  if label_list is None:
    return float(example.label)
  label_map = {label: i for i, label in enumerate(label_list)}
  if example.label not in label_map:
    raise ValueError("example %s: label %r is not one of %s" %
                     (example.guid, example.label, label_list))
  return label_map[example.label]


def convert_single_example(ex_index, example, label_list, max_seq_length,
                           tokenizer):
  """Converts a single `InputExample` into a single `InputFeatures`.

  Layout `[CLS] a [SEP] b [SEP]`, segment ids 0 for `[CLS] a [SEP]` and 1 for
  `b [SEP]`, padded with 0 to `max_seq_length`. A pair longer than
  `max_seq_length - 3` tokens is truncated longest-first; a single text is cut
  to `max_seq_length - 2`. A `PaddingInputExample` gives all-zero features with
  label id 0 and `is_real_example=False`.

  Args:
    ex_index: int, the example's position (the first 5 are logged).
    example: `InputExample` or `PaddingInputExample`.
    label_list: list of label strings; None for a regression task (the label
      id is then `float(example.label)`).
    max_seq_length: int, the padded length.
    tokenizer: `tokenization.FullTokenizer`.

  Returns:
    An `InputFeatures`.

  Raises:
    ValueError: if the label is not in `label_list`.
  """
  if isinstance(example, PaddingInputExample):
    return InputFeatures(
        input_ids=[0] * max_seq_length,
        input_mask=[0] * max_seq_length,
        segment_ids=[0] * max_seq_length,
        label_id=0.0 if label_list is None else 0,
        is_real_example=False)

  tokens_a = tokenizer.tokenize(example.text_a)
  tokens_b = None
  if example.text_b is not None:
    tokens_b = tokenizer.tokenize(example.text_b)
  tokens, segment_ids = feature_utils.pack_tokens(tokens_a, tokens_b,
                                                  max_seq_length)
  input_ids, input_mask, segment_ids = feature_utils.pad_input(
      tokenizer.convert_tokens_to_ids(tokens), segment_ids, max_seq_length)

  label_id = _label_id(example, label_list)
  if ex_index < 5:
    _log_example(example, tokens, input_ids, input_mask, segment_ids,
                 label_id)
  return InputFeatures(input_ids=input_ids, input_mask=input_mask,
                       segment_ids=segment_ids, label_id=label_id,
                       is_real_example=True)


def _log_example(example, tokens, input_ids, input_mask, segment_ids,
                 label_id):
  """Logs one converted example, as the reference does for the first five."""
  logging.info("*** Example ***")
  logging.info("guid: %s", example.guid)
  logging.info("tokens: %s",
               " ".join(tokenization.printable_text(t) for t in tokens))
  logging.info("input_ids: %s", " ".join(str(x) for x in input_ids))
  logging.info("input_mask: %s", " ".join(str(x) for x in input_mask))
  logging.info("segment_ids: %s", " ".join(str(x) for x in segment_ids))
  logging.info("label: %s (id = %s)", example.label, label_id)


def convert_examples_to_features(examples, label_list, max_seq_length,
                                 tokenizer):
  """Converts a list of `InputExample`s into a list of `InputFeatures`."""
  features = []
  for ex_index, example in enumerate(examples):
    if ex_index % 10000 == 0:
      logging.info("Writing example %d of %d", ex_index, len(examples))
    features.append(convert_single_example(ex_index, example, label_list,
                                           max_seq_length, tokenizer))
  return features


def _feature_to_tf_example(feature):
  """Serializable `tf.train.Example` of an `InputFeatures`."""
  if isinstance(feature.label_id, float):
    label_feature = io_utils.float_feature([feature.label_id])
  else:
    label_feature = io_utils.int64_feature([feature.label_id])
  # Insertion order fixes the serialized bytes (same as the reference).
  record = collections.OrderedDict()
  record["input_ids"] = io_utils.int64_feature(feature.input_ids)
  record["input_mask"] = io_utils.int64_feature(feature.input_mask)
  record["segment_ids"] = io_utils.int64_feature(feature.segment_ids)
  record["label_ids"] = label_feature
  record["is_real_example"] = io_utils.int64_feature(
      [int(feature.is_real_example)])
  return tf.train.Example(features=tf.train.Features(feature=record))


def file_based_convert_examples_to_features(examples, label_list,
                                            max_seq_length, tokenizer,
                                            output_file):
  """Converts `examples` to features and writes them to a TFRecord file.

  Keys: `input_ids`, `input_mask`, `segment_ids` (int64, `max_seq_length`),
  `label_ids` (int64, 1; float for regression) and `is_real_example` (int64,
  1), in that order. The file appears under its name only when complete.
  """
  with io_utils.atomic_path(output_file) as temp, \
      tf.io.TFRecordWriter(temp) as writer:
    for ex_index, example in enumerate(examples):
      if ex_index % 10000 == 0:
        logging.info("Writing example %d of %d", ex_index, len(examples))
      feature = convert_single_example(ex_index, example, label_list,
                                       max_seq_length, tokenizer)
      writer.write(_feature_to_tf_example(feature).SerializeToString())


def file_based_input_fn_builder(input_file, seq_length, is_training,
                                drop_remainder, is_regression=False):
  """Creates an `input_fn` over a file written by
  `file_based_convert_examples_to_features`.

  Args:
    input_file: path of the TFRecord file.
    seq_length: int, the `max_seq_length` it was written with.
    is_training: bool; training repeats and shuffles.
    drop_remainder: bool, whether to drop the last partial batch (TPU only).
    is_regression: bool, whether `label_ids` is a float (regression task).

  Returns:
    `input_fn(params)` for the Estimator; the batch size is
    `params["batch_size"]`.
  """
  name_to_features = {
      "input_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
      "input_mask": tf.io.FixedLenFeature([seq_length], tf.int64),
      "segment_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
      "label_ids": tf.io.FixedLenFeature(
          [], tf.float32 if is_regression else tf.int64),
      "is_real_example": tf.io.FixedLenFeature([], tf.int64),
  }
  return estimator_utils.tfrecord_input_fn_builder(
      [input_file], name_to_features, is_training=is_training,
      drop_remainder=drop_remainder)


def input_fn_builder(features, seq_length, is_training, drop_remainder):
  """Creates an `input_fn` over `InputFeatures` held in memory.

  The reference's in-memory input, for notebooks and small data sets; it
  embeds every feature in the graph as a constant, so use
  `file_based_input_fn_builder` for large ones.

  Args:
    features: list of `InputFeatures`.
    seq_length: int, their `max_seq_length`.
    is_training: bool; training repeats and shuffles (buffer 100).
    drop_remainder: bool, whether to drop the last partial batch (TPU).

  Returns:
    `input_fn(params)` for the Estimator, batch size `params["batch_size"]`;
    the batches hold int32 `input_ids`, `input_mask`, `segment_ids`
    ([batch_size, seq_length]), `label_ids` ([batch_size]; float32 when the
    labels are floats, for regression) and `is_real_example`.
  """
  num_examples = len(features)
  regression = bool(features) and isinstance(features[0].label_id, float)

  def column(name, dtype=tf.int32, width=seq_length):
    values = [getattr(f, name) for f in features]
    shape = [num_examples, width] if width else [num_examples]
    return tf.constant(values, shape=shape, dtype=dtype)

  def input_fn(params):
    d = tf.data.Dataset.from_tensor_slices({
        "input_ids": column("input_ids"),
        "input_mask": column("input_mask"),
        "segment_ids": column("segment_ids"),
        "label_ids": column("label_id",
                            tf.float32 if regression else tf.int32, None),
        "is_real_example": column("is_real_example", tf.int32, None),
    })
    if is_training:
      d = d.repeat().shuffle(buffer_size=100)
    return d.batch(params["batch_size"], drop_remainder=drop_remainder)

  return input_fn


def pad_to_batch_multiple(examples, batch_size):
  """Appends `PaddingInputExample`s until `len(examples)` is a multiple of
  `batch_size` (what TPU evaluation and prediction need).

  Returns:
    A new list; `examples` itself is unchanged.
  """
  padded = list(examples)
  while len(padded) % batch_size != 0:
    padded.append(PaddingInputExample())
  return padded


# ----------------------------------------------------------------------------
# The model.
# ----------------------------------------------------------------------------


def create_model(bert_config, is_training, input_ids, input_mask, segment_ids,
                 labels, num_labels, use_one_hot_embeddings,
                 is_regression=False, compute_dtype=tf.float32):
  """Creates a classification model: a dense layer on the pooled output.

  Args:
    bert_config: `modeling.BertConfig`.
    is_training: bool; dropout (probability 0.1) on the pooled output only
      when training, as in the reference.
    input_ids: int32 Tensor of shape [batch_size, seq_length].
    input_mask: int32 Tensor of shape [batch_size, seq_length].
    segment_ids: int32 Tensor of shape [batch_size, seq_length].
    labels: int32 Tensor of shape [batch_size] (float32 for regression).
    num_labels: int, the number of classes (1 for regression).
    use_one_hot_embeddings: bool, one-hot matmul embeddings (faster on TPU).
    is_regression: bool; one output trained with the squared error.
    compute_dtype: the encoder's compute dtype (see `modeling.BertModel`);
      the head and the loss are float32.

  Returns:
    `(loss, per_example_loss, logits, probabilities)`: scalar, [batch_size],
    [batch_size, num_labels] and [batch_size, num_labels] float32 Tensors.
    For regression `probabilities` is the predicted value, [batch_size].
  """
  model = modeling.BertModel(
      config=bert_config, is_training=is_training, input_ids=input_ids,
      input_mask=input_mask, token_type_ids=segment_ids,
      use_one_hot_embeddings=use_one_hot_embeddings,
      compute_dtype=compute_dtype)
  output_layer = model.get_pooled_output()  # [B, H]
  hidden_size = modeling.get_shape_list(output_layer, expected_rank=2)[1]

  output_weights = tf.get_variable(
      "output_weights", [num_labels, hidden_size],
      initializer=tf.truncated_normal_initializer(stddev=0.02))
  output_bias = tf.get_variable(
      "output_bias", [num_labels], initializer=tf.zeros_initializer())

  # Holds no variables. Not named "loss" as in the reference: that name would
  # push the Estimator's TensorBoard `loss` summary to `loss_1`.
  with tf.variable_scope("classifier"):
    if is_training:
      output_layer = modeling.dropout(output_layer, 0.1)
    logits = tf.matmul(output_layer, output_weights, transpose_b=True)
    logits = tf.nn.bias_add(logits, output_bias)  # [B, num_labels]
    if is_regression:
      predictions = tf.squeeze(logits, axis=-1)  # [B]
      per_example_loss = tf.square(predictions - tf.cast(labels, tf.float32))
      return (tf.reduce_mean(per_example_loss), per_example_loss, logits,
              predictions)
    probabilities = tf.nn.softmax(logits, axis=-1)
    log_probs = tf.nn.log_softmax(logits, axis=-1)
    one_hot_labels = tf.one_hot(labels, depth=num_labels, dtype=tf.float32)
    per_example_loss = -tf.reduce_sum(one_hot_labels * log_probs, axis=-1)
    # The mean includes TPU padding examples (kept for parity).
    loss = tf.reduce_mean(per_example_loss)
    return loss, per_example_loss, logits, probabilities


def model_fn_builder(bert_config, num_labels, init_checkpoint, learning_rate,
                     num_train_steps, num_warmup_steps, use_tpu,
                     use_one_hot_embeddings, is_regression=False,
                     metric_names=(), options=None,
                     compute_dtype=tf.float32):
  """Returns a `model_fn` for `TPUEstimator`.

  Args:
    bert_config: `modeling.BertConfig`.
    num_labels: int, the number of classes (1 for regression).
    init_checkpoint: (Optional) checkpoint to initialize from; the classifier
      head is new, every `bert/...` variable found in it is loaded.
    learning_rate: float, the peak learning rate.
    num_train_steps: int, steps of the linear decay.
    num_warmup_steps: int, steps of linear warmup.
    use_tpu: bool.
    use_one_hot_embeddings: bool.
    is_regression: bool, a one-output regression task (STS-B).
    metric_names: extra eval metrics ("f1", "mcc") of a classification task.
    options: (optional) `optimization.OptimizerOptions`: the optimizer;
      default the reference's.
    compute_dtype: the encoder's arithmetic (weights stay float32).

  Returns:
    `model_fn(features, labels, mode, params)`. Predictions are
    `{"probabilities": [batch_size, num_labels]}`, or for regression
    `{"predictions": [batch_size]}`.
  """

  def model_fn(features, labels, mode, params):
    del labels, params  # Unused.
    logging.info("*** Features ***")
    for name in sorted(features):
      logging.info("  name = %s, shape = %s", name, features[name].shape)
    label_ids = features["label_ids"]
    if "is_real_example" in features:
      is_real_example = tf.cast(features["is_real_example"], tf.float32)
    else:  # Inputs written for the reference may lack it.
      is_real_example = tf.ones(tf.shape(label_ids), dtype=tf.float32)
    is_training = mode == tf.estimator.ModeKeys.TRAIN

    total_loss, per_example_loss, logits, outputs = create_model(
        bert_config, is_training, features["input_ids"],
        features["input_mask"], features["segment_ids"], label_ids,
        num_labels, use_one_hot_embeddings, is_regression=is_regression,
        compute_dtype=compute_dtype)
    scaffold_fn = estimator_utils.init_from_checkpoint(init_checkpoint,
                                                       use_tpu)

    if mode == tf.estimator.ModeKeys.TRAIN:
      return estimator_utils.train_spec(
          total_loss, learning_rate, num_train_steps, num_warmup_steps,
          use_tpu, scaffold_fn, options=options)
    if mode == tf.estimator.ModeKeys.EVAL:
      if is_regression:
        eval_metrics = (glue_metrics.regression_metric_fn,
                        [per_example_loss, label_ids, outputs,
                         is_real_example])
      else:
        # TPUEstimator matches the tensors to the metric_fn's arguments.
        eval_metrics = (functools.partial(glue_metrics.classification_metric_fn,
                                          metric_names=metric_names),
                        [per_example_loss, label_ids, logits,
                         is_real_example])
      return tf.estimator.tpu.TPUEstimatorSpec(
          mode=mode, loss=total_loss, eval_metrics=eval_metrics,
          scaffold_fn=scaffold_fn)
    key = "predictions" if is_regression else "probabilities"
    return tf.estimator.tpu.TPUEstimatorSpec(
        mode=mode, predictions={key: outputs}, scaffold_fn=scaffold_fn)

  return model_fn


# ----------------------------------------------------------------------------
# Outputs.
# ----------------------------------------------------------------------------


def write_test_results(output_file, predictions, num_examples):
  """Writes `test_results.tsv` atomically: one line per real test example.

  Args:
    output_file: path to write.
    predictions: iterable of prediction dicts in input order, with
      `probabilities` (a line of tab-separated class probabilities) or
      `predictions` (regression: the predicted value). Entries after the
      first `num_examples` (TPU padding) are not written.
    num_examples: int, the number of real test examples.

  Returns:
    The number of lines written (`num_examples`).

  Raises:
    ValueError: if fewer than `num_examples` predictions arrive.
  """
  written = 0
  with io_utils.atomic_write(output_file) as writer:
    for prediction in predictions:
      if written >= num_examples:
        break  # The rest are PaddingInputExamples.
      if "probabilities" in prediction:
        values = np.reshape(prediction["probabilities"], [-1])
      else:
        values = np.reshape(prediction["predictions"], [-1])
      writer.write("\t".join(str(value) for value in values) + "\n")
      written += 1
    if written != num_examples:
      raise ValueError("%s: got %d predictions for %d test examples" %
                       (output_file, written, num_examples))
  return written


# ----------------------------------------------------------------------------
# main.
# ----------------------------------------------------------------------------


def _flag_problems(flag_values):
  """This script's flag problems (the model's are `startup.prepare_model`'s)."""
  return startup.fine_tuning_flag_problems(flag_values)


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
            init_checkpoint):
  """Exports the fine-tuned model under --export_dir (see export_utils)."""
  model_fn = model_fn_builder(
      bert_config=bert_config,
      num_labels=1 if is_regression else len(label_list),
      init_checkpoint=None, learning_rate=0.0, num_train_steps=None,
      num_warmup_steps=None, use_tpu=False, use_one_hot_embeddings=False,
      is_regression=is_regression)
  tsv_columns = None
  if flag_values.task_name.lower() == "tsv":
    tsv_columns = {"text_a_column": flag_values.text_a_column,
                   "text_b_column": flag_values.text_b_column,
                   "skip_header": flag_values.skip_header}
  export_utils.export_saved_model(
      model_fn, export_utils.checkpoint_to_export(flag_values.output_dir,
                                                  init_checkpoint),
      flag_values.export_dir, flag_values.max_seq_length,
      kind=(export_utils.REGRESSION if is_regression else
            export_utils.CLASSIFIER),
      output_keys=["predictions" if is_regression else "probabilities"],
      vocab_file=flag_values.vocab_file,
      bert_config_file=flag_values.bert_config_file,
      do_lower_case=flag_values.do_lower_case, label_list=label_list,
      extra_features=(export_utils.REGRESSION_FEATURES if is_regression else
                      export_utils.CLASSIFIER_FEATURES),
      extra_config={"task_name": flag_values.task_name.lower(),
                    "tsv_columns": tsv_columns})


def main(_):
  logging.set_verbosity(logging.INFO)
  # 1. The run's options and their devices (before TensorFlow makes any);
  # flags, config, checkpoint, vocabulary: all checked before any work.
  run = training_options.from_flags(FLAGS)
  distribute_utils.setup(run.distribute)
  use_tpu = run.tpu.use_tpu
  model = startup.prepare_model(
      FLAGS.bert_config_file, FLAGS.max_seq_length, FLAGS.init_checkpoint,
      FLAGS.do_lower_case, FLAGS.vocab_file, FLAGS.output_dir,
      problems=_flag_problems(FLAGS))
  processor = get_processor(
      FLAGS.task_name, data_dir=FLAGS.data_dir,
      text_a_column=FLAGS.text_a_column, text_b_column=FLAGS.text_b_column,
      label_column=FLAGS.label_column, skip_header=FLAGS.skip_header)
  label_list = processor.get_labels()
  is_regression = processor.is_regression
  tokenizer, output_dir, seq_length = (model.tokenizer, FLAGS.output_dir,
                                       FLAGS.max_seq_length)

  # 2. Every input the run needs, read (and checked) up front.
  splits = [split for split, wanted in (("train", run.do_train),
                                        ("dev", run.do_eval),
                                        ("test", run.do_predict)) if wanted]
  examples = _read_examples(processor, FLAGS.data_dir, splits)
  tf.io.gfile.makedirs(output_dir)
  if run.do_train:
    reliability.start_training(output_dir)

  # 3. The estimator. Steps count updates, of --train_batch_size times
  # --gradient_accumulation_steps examples each.
  update_size = run.examples_per_update
  num_train_steps, num_warmup_steps = None, None
  if run.do_train:
    num_train_steps, num_warmup_steps = estimator_utils.fine_tuning_steps(
        len(examples["train"]), update_size, FLAGS.num_train_epochs,
        FLAGS.warmup_proportion)
  model_fn = model_fn_builder(
      bert_config=model.bert_config,
      num_labels=1 if is_regression else len(label_list),
      init_checkpoint=model.init_checkpoint,
      learning_rate=FLAGS.learning_rate, num_train_steps=num_train_steps,
      num_warmup_steps=num_warmup_steps, use_tpu=use_tpu,
      use_one_hot_embeddings=use_tpu, is_regression=is_regression,
      metric_names=processor.metric_names,
      options=run.training.optimizer_options,
      compute_dtype=run.training.compute_dtype)
  estimator = estimator_utils.estimator_from_options(
      model_fn, run, output_dir,
      eval_batch_size=FLAGS.eval_batch_size,
      predict_batch_size=FLAGS.predict_batch_size)

  # 4. Train, evaluate, predict.
  if run.do_train:
    train_file = os.path.join(output_dir, "train.tf_record")
    file_based_convert_examples_to_features(
        examples["train"], label_list, seq_length, tokenizer, train_file)
    logging.info("***** Running training *****")
    logging.info("  Num examples = %d, batch size = %d, steps = %d",
                 len(examples["train"]), run.train_batch_size,
                 num_train_steps)
    estimator.train(
        input_fn=file_based_input_fn_builder(
            train_file, seq_length, is_training=True, drop_remainder=True,
            is_regression=is_regression),
        max_steps=num_train_steps,
        # Progress (examples/sec, ETA) about ten times a run, at most every
        # 100 steps.
        hooks=[estimator_utils.ProgressHook(
            update_size, total_steps=num_train_steps,
            every_n_steps=min(100, max(1, num_train_steps // 10)))] +
        reliability.training_hooks(
            output_dir, num_train_steps, run.save_checkpoints_steps,
            run.save_checkpoints_secs, use_tpu))
    reliability.exit_if_preempted(output_dir)
  if run.do_eval:
    logging.info("***** Running evaluation *****")
    eval_file = os.path.join(output_dir, "eval.tf_record")
    num_written, _ = _features_file(
        eval_file, examples["dev"], label_list, seq_length, tokenizer,
        FLAGS.eval_batch_size, use_tpu)
    # On TPU every batch is whole; elsewhere the last partial batch is kept
    # and evaluation runs until the data is exhausted.
    result = estimator.evaluate(
        input_fn=file_based_input_fn_builder(
            eval_file, seq_length, is_training=False,
            drop_remainder=use_tpu, is_regression=is_regression),
        steps=(num_written // FLAGS.eval_batch_size if use_tpu
               else None))
    io_utils.write_eval_results(os.path.join(output_dir, "eval_results.txt"),
                                result)
  if run.do_predict:
    logging.info("***** Running prediction *****")
    predict_file = os.path.join(output_dir, "predict.tf_record")
    num_written, num_actual = _features_file(
        predict_file, examples["test"], label_list, seq_length, tokenizer,
        FLAGS.predict_batch_size, use_tpu)
    predictions = estimator.predict(
        input_fn=file_based_input_fn_builder(
            predict_file, seq_length, is_training=False,
            drop_remainder=use_tpu, is_regression=is_regression),
        hooks=[estimator_utils.ProgressHook(
            FLAGS.predict_batch_size,
            total_steps=-(-num_written // FLAGS.predict_batch_size))])
    output_file = os.path.join(output_dir, "test_results.tsv")
    write_test_results(output_file, predictions, num_actual)
    logging.info("Wrote %d lines to %s", num_actual, output_file)
  if FLAGS.export_dir:
    _export(FLAGS, model.bert_config, label_list, is_regression,
            model.init_checkpoint)


def cli():
  """Command-line entry point: defines the flags, then runs `main`."""
  define_flags()
  runner.run_main(main)


if __name__ == "__main__":
  cli()
