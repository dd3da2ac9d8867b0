"""The classifier's heads: BERT's pooled output and one dense layer.

The reference release's `run_classifier.py` head (`output_weights`
[num_labels, hidden_size], `output_bias`, dropout 0.1 when training, softmax
cross-entropy; Devlin et al. 2018, section 4.1) and, beyond it, a
one-output regression head (STS-B) and a multi-label head (one sigmoid per
label, binary cross-entropy), any of them over windows of long texts
(`windowed`). Each is a `model_fn.Head` value holding all that differs
between them: loss and outputs, eval metrics and their keys, the records'
label, how predictions become lines, and what an export serves
(`export_spec`). A script chooses the head once; the reference's
`create_model` and `model_fn_builder` are thin wrappers over the heads.
"""

import copy
import functools
import types

import numpy as np
import tensorflow.compat.v1 as tf

from bert_tf import io as io_utils
from bert_tf.tasks.classifier import metrics as glue_metrics
from bert_tf.tasks.classifier import multi_label as multi_label_lib
from bert_tf.tasks.classifier import windows as windows_lib
from bert_tf.train import model_fn as model_fn_utils
from bert_tf.train import packing
from bert_tf.train import spec as spec_lib
import modeling

__all__ = ["CLASSIFIER_FEATURES", "REGRESSION_FEATURES", "SingleLabelHead", "RegressionHead",
           "MultiLabelHead", "head_for", "create_model",
           "model_fn_builder", "write_test_results"]


# What the heads read besides the three inputs, for a serving graph to fill
# in (`bert_tf/export/saved_model.py`): name -> (dtype, shape after the
# batch dimension, value); unused in PREDICT mode. Read-only.
CLASSIFIER_FEATURES = types.MappingProxyType(
    {"label_ids": (tf.int32, (), 0), "is_real_example": (tf.int32, (), 1)})
REGRESSION_FEATURES = types.MappingProxyType(
    {"label_ids": (tf.float32, (), 0.0), "is_real_example": (tf.int32, (), 1)})


class SingleLabelHead(model_fn_utils.Head):
  """One label per example: softmax cross-entropy (the reference's head).

  Args:
    label_list: list of str, the labels in id order.
    metric_names: the task's extra eval metrics ("f1", "mcc"; see
      `metrics.classification_metric_fn`).

  Predictions: `{"probabilities": float32 [batch_size, num_labels]}`.
  """

  output_key = "probabilities"
  # Records: `label_ids` as the reference writes it.
  label_feature = tf.io.FixedLenFeature([], tf.int64)
  # Tokens between two windows' starts, and how a text's windows make its
  # prediction (`windowed`); None: one input a text.
  doc_stride = None
  aggregation = "mean"
  # The reference's records (`features.file_based_convert_examples_to_
  # features`); False: `windows.write_features`, with `label_ids(example)`
  # and `padding_label`, the label of a padding record.
  reference_records = True
  padding_label = (0,)

  def __init__(self, label_list, metric_names=()):
    self.label_list = list(label_list)
    self.metric_names = tuple(metric_names)

  @property
  def num_outputs(self):
    return len(self.label_list)

  def prepare(self, features, mode):
    """`is_real_example` as float32 (ones where the records lack it)."""
    del mode  # The same in every mode.
    if "is_real_example" in features:
      is_real = tf.cast(features["is_real_example"], tf.float32)
    else:  # Inputs written for the reference may lack it.
      is_real = tf.ones(tf.shape(features["label_ids"])[:1], dtype=tf.float32)
    return dict(features, is_real_example=is_real)

  def layer(self, output_layer, labels, is_training, dropout_seed=None):
    """The dense layer on the pooled output [batch_size, hidden]; `loss`'s
    values for `labels` (the `label_ids` feature). `dropout_seed`: see
    `modeling.dropout`."""
    hidden_size = modeling.get_shape_list(output_layer, expected_rank=2)[1]
    output_weights = tf.get_variable(
        "output_weights", [self.num_outputs, hidden_size],
        initializer=tf.truncated_normal_initializer(stddev=0.02))
    output_bias = tf.get_variable(
        "output_bias", [self.num_outputs], initializer=tf.zeros_initializer())
    # Holds no variables. Not named "loss" as in the reference: that name
    # would push the runner's TensorBoard `loss` summary to `loss_1`.
    with tf.variable_scope("classifier"):
      if is_training:
        output_layer = modeling.dropout(output_layer, 0.1, dropout_seed)
      logits = tf.matmul(output_layer, output_weights, transpose_b=True)
      logits = tf.nn.bias_add(logits, output_bias)  # [B, num_outputs]
      return self.loss(logits, labels)

  def loss(self, logits, labels):
    """(loss, per_example_loss, logits, predictions) of the logits
    [batch_size, num_outputs]: scalar, [batch_size], the logits and the
    predictions (here softmax probabilities), float32."""
    probabilities = tf.nn.softmax(logits, axis=-1)
    log_probs = tf.nn.log_softmax(logits, axis=-1)
    one_hot_labels = tf.one_hot(labels, depth=self.num_outputs,
                                dtype=tf.float32)
    per_example_loss = -tf.reduce_sum(one_hot_labels * log_probs, axis=-1)
    # The mean includes TPU padding examples (kept for parity).
    return (tf.reduce_mean(per_example_loss), per_example_loss, logits,
            probabilities)

  def build(self, model, features, mode, update_share=None):
    pooled = model.get_pooled_output()
    label_ids, is_real = features["label_ids"], features["is_real_example"]
    packed = pooled.shape.ndims == 3  # [B, K, W]: K examples a row.
    if packed:
      pooled, label_ids, is_real = (packing.slots(tensor) for tensor in (
          pooled, label_ids, is_real))
    loss, per_example_loss, logits, outputs = self.layer(
        pooled, label_ids, mode == spec_lib.ModeKeys.TRAIN,
        model.dropout_seed)
    predictions = {self.output_key: outputs}
    # Unpacked: the reference's mean over each (equal) micro-batch.
    if packed:  # The mean over the update's real examples; rows' outputs.
      loss = model_fn_utils.weighted_mean_loss(per_example_loss, is_real,
                                               update_share)
      num_slots = modeling.get_shape_list(features["example_index"])[1]
      predictions = {self.output_key: packing.unslot(outputs, num_slots),
                     "example_index": features["example_index"]}
    eval_metrics = None
    if mode == spec_lib.ModeKeys.EVAL:
      # The runner matches the tensors to the metric_fn's arguments.
      eval_metrics = self.metrics(per_example_loss, label_ids, logits,
                                  outputs, is_real)
    return model_fn_utils.HeadOutput(
        loss=loss, eval_metrics=eval_metrics, predictions=predictions)

  def metrics(self, per_example_loss, label_ids, logits, outputs, is_real):
    del outputs  # Accuracy and F1 come from the logits.
    return (functools.partial(glue_metrics.classification_metric_fn,
                              metric_names=self.metric_names),
            [per_example_loss, label_ids, logits, is_real])

  def eval_keys(self):
    """The keys of `eval_results.txt` (what `--keep_best_by` may name)."""
    return ({"eval_loss", "loss", "global_step", "eval_accuracy"} |
            {"eval_%s" % name for name in self.metric_names})

  def label_ids(self, example):
    """An example's `label_ids` feature (`windows.write_features`).

    Raises:
      ValueError: a label not in the label list, naming the example.
    """
    if example.label not in self.label_list:
      raise ValueError("example %s: label %r is not one of %s" %
                       (example.guid, example.label, self.label_list))
    return [self.label_list.index(example.label)]

  def write_training_files(self, output_dir):
    """Writes what the head keeps beside the checkpoints (nothing here)."""
    del output_dir  # Unused.

  def windowed(self, doc_stride, aggregation="mean"):
    """This head over texts longer than one input: a copy whose records
    are windows `doc_stride` tokens apart, each with its text's label
    (`windows.write_features`), and whose prediction of a text is the
    `aggregation` ("mean" or "max") of its windows' (`aggregate`)."""
    head = copy.copy(self)
    head.doc_stride, head.aggregation = doc_stride, aggregation
    head.reference_records = False
    return head

  def aggregate(self, predictions, owners, num_examples):
    """One prediction per example from the predictions of its records."""
    return ({"probabilities": value} for value in windows_lib.aggregate(
        predictions, owners, num_examples, self.aggregation))

  def export_spec(self):
    """What an export serves: `saved_model.export_saved_model`'s `kind`
    (`serving_config.json`'s), `output_keys`, `extra_features` and the
    head's `extra_config`."""
    return {"kind": "classifier", "output_keys": [self.output_key],
            "extra_features": dict(CLASSIFIER_FEATURES),
            "extra_config": {}}


class RegressionHead(SingleLabelHead):
  """One output trained with the squared error (STS-B).

  Predictions: `{"predictions": float32 [batch_size]}`.
  """

  output_key = "predictions"
  label_feature = tf.io.FixedLenFeature([], tf.float32)
  padding_label = (0.0,)
  num_outputs = 1

  def __init__(self):
    super().__init__([])

  def loss(self, logits, labels):
    predictions = tf.squeeze(logits, axis=-1)  # [B]
    per_example_loss = tf.square(predictions - tf.cast(labels, tf.float32))
    return (tf.reduce_mean(per_example_loss), per_example_loss, logits,
            predictions)

  def metrics(self, per_example_loss, label_ids, logits, outputs, is_real):
    del logits  # The correlations come from the predictions.
    return (glue_metrics.regression_metric_fn,
            [per_example_loss, label_ids, outputs, is_real])

  def eval_keys(self):
    return {"eval_loss", "loss", "global_step", "eval_pearson",
            "eval_spearman"}

  def label_ids(self, example):
    return [float(example.label)]

  def export_spec(self):
    return {"kind": "regression", "output_keys": [self.output_key],
            "extra_features": dict(REGRESSION_FEATURES),
            "extra_config": {}}


class MultiLabelHead(SingleLabelHead):
  """A set of labels per example: one sigmoid per label and the binary
  cross-entropy averaged over the labels (the mean over the batch is then
  Hugging Face's `BCEWithLogitsLoss` of `problem_type=
  "multi_label_classification"`).

  Args:
    label_list: list of str, the labels in output order (the per-label F1
      keys).
    threshold: float in (0, 1): a label is predicted when its probability
      is at least this (evaluation; written to the export's config).

  Records: `label_ids` is a 0/1 vector [num_labels]. Predictions:
  `{"probabilities": float32 [batch_size, num_labels]}`.
  """

  def __init__(self, label_list, threshold=0.5):
    super().__init__(label_list)
    self.threshold = threshold
    self.label_feature = tf.io.FixedLenFeature([len(self.label_list)],
                                               tf.int64)
    self.reference_records = False
    self.padding_label = (0,) * len(self.label_list)

  def loss(self, logits, labels):
    per_example_loss = tf.reduce_mean(
        tf.nn.sigmoid_cross_entropy_with_logits(
            labels=tf.cast(labels, tf.float32), logits=logits), axis=-1)
    return (tf.reduce_mean(per_example_loss), per_example_loss, logits,
            tf.sigmoid(logits))

  def metrics(self, per_example_loss, label_ids, logits, outputs, is_real):
    del logits  # The scores come from the thresholded probabilities.
    return (functools.partial(glue_metrics.multi_label_metric_fn,
                              label_names=self.label_list,
                              threshold=self.threshold),
            [per_example_loss, label_ids, outputs, is_real])

  def eval_keys(self):
    return ({"eval_loss", "loss", "global_step", "eval_exact_match",
             "eval_micro_f1", "eval_macro_f1"} |
            {"eval_f1_%s" % label for label in self.label_list})

  def label_ids(self, example):
    try:
      return multi_label_lib.multi_hot(example.label, self.label_list)
    except ValueError as e:
      raise ValueError("example %s: %s" % (example.guid, e))

  def write_training_files(self, output_dir):
    """The labels file that `convert_checkpoint.py` reads (its problem
    type and label names)."""
    multi_label_lib.write_labels_file(output_dir, self.label_list)

  def export_spec(self):
    spec = super().export_spec()  # label_ids: a 0/1 vector.
    spec["extra_features"]["label_ids"] = (tf.int32, (self.num_outputs,), 0)
    spec["extra_config"] = {"problem_type": multi_label_lib.PROBLEM_TYPE,
                            "multi_label_threshold": self.threshold}
    return spec


def head_for(processor, label_list):
  """The head of a task's `DataProcessor`: `RegressionHead` where it is a
  regression, else `SingleLabelHead` with the task's extra metrics."""
  if processor.is_regression:
    return RegressionHead()
  return SingleLabelHead(label_list, processor.metric_names)


def _head(num_labels, is_regression, multi_label, metric_names=(),
          label_names=None, threshold=0.5):
  """The head the reference-style boolean arguments describe."""
  if is_regression:
    return RegressionHead()
  labels = label_names or [str(i) for i in range(num_labels)]
  if multi_label:
    return MultiLabelHead(labels, threshold)
  return SingleLabelHead(labels, metric_names)


def create_model(bert_config, is_training, input_ids, input_mask, segment_ids,
                 labels, num_labels, use_one_hot_embeddings,
                 is_regression=False, compute_dtype=tf.float32,
                 multi_label=False, cast_weights_once=False):
  """Creates a classification model: a dense layer on the pooled output.

  The reference's function over the heads: `SingleLabelHead` (labels
  int32 [batch_size]), `RegressionHead` with `is_regression` (float32
  labels), `MultiLabelHead` with `multi_label` (0/1 labels [batch_size,
  num_labels]). Dropout (0.1) on the pooled output only when training;
  `compute_dtype` and `cast_weights_once` as `modeling.BertModel`'s (the
  head and the loss are float32). Inputs: int32 [batch_size, seq_length].

  Returns:
    `(loss, per_example_loss, logits, probabilities)`: scalar, [batch_size],
    [batch_size, num_labels] and [batch_size, num_labels] float32 Tensors.
    For regression `probabilities` is the predicted value, [batch_size].
  """
  model = modeling.BertModel(
      config=bert_config, is_training=is_training, input_ids=input_ids,
      input_mask=input_mask, token_type_ids=segment_ids,
      use_one_hot_embeddings=use_one_hot_embeddings,
      compute_dtype=compute_dtype, cast_weights_once=cast_weights_once)
  return _head(num_labels, is_regression, multi_label).layer(
      model.get_pooled_output(), labels, is_training)


def model_fn_builder(bert_config, num_labels, init_checkpoint, learning_rate,
                     num_train_steps, num_warmup_steps, use_tpu,
                     use_one_hot_embeddings, is_regression=False,
                     metric_names=(), options=None,
                     compute_dtype=tf.float32, multi_label=False,
                     label_names=None, threshold=0.5, head=None):
  """Returns a `model_fn` for `TPUEstimator` (`model_fn.build_model_fn`).

  The reference's function: `init_checkpoint` (or None) initializes every
  `bert/...` variable it holds, the head is new; the learning rate decays
  linearly over `num_train_steps` after `num_warmup_steps` of warmup;
  `options` (`OptimizerOptions`, or None: the reference's optimizer).
  The head is `head`, or the one `is_regression`, `metric_names`,
  `multi_label`, `label_names` and `threshold` describe (see the heads).

  Returns:
    `model_fn(features, labels, mode, params)`. Predictions are
    `{"probabilities": [batch_size, num_labels]}`, or for regression
    `{"predictions": [batch_size]}`.
  """
  head = head or _head(num_labels, is_regression, multi_label, metric_names,
                       label_names, threshold)
  return model_fn_utils.build_model_fn(
      head, bert_config, init_checkpoint, use_tpu, use_one_hot_embeddings,
      model_fn_utils.TrainingSchedule(learning_rate, num_train_steps,
                                      num_warmup_steps, options),
      compute_dtype=compute_dtype)


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
      values = np.reshape(prediction.get("probabilities",
                                         prediction.get("predictions")), [-1])
      writer.write("\t".join(io_utils.number_str(value) for value in values) +
                   "\n")
      written += 1
    if written != num_examples:
      raise ValueError("%s: got %d predictions for %d test examples" %
                       (output_file, written, num_examples))
  return written
