"""The classifier model: BERT's pooled output and one dense layer.

The reference release's `run_classifier.py` head (`output_weights`
[num_labels, hidden_size], `output_bias`, dropout 0.1 when training, softmax
cross-entropy; Devlin et al. 2018, section 4.1), its `model_fn` for
`TPUEstimator`, and the `test_results.tsv` writer. Beyond it: a one-output
regression head (STS-B) and each GLUE task's extra eval metrics.
`run_classifier.py` imports every public name from here.
"""

import functools

from absl import logging
import numpy as np
import tensorflow.compat.v1 as tf

from bert_tf import io as io_utils
from bert_tf.tasks.classifier import metrics as glue_metrics
from bert_tf.train import model_fn as model_fn_utils
from bert_tf.train import spec as spec_lib
import modeling

__all__ = ["create_model", "model_fn_builder", "eval_keys",
           "write_test_results"]


def create_model(bert_config, is_training, input_ids, input_mask, segment_ids,
                 labels, num_labels, use_one_hot_embeddings,
                 is_regression=False, compute_dtype=tf.float32,
                 multi_label=False, cast_weights_once=False):
  """Creates a classification model: a dense layer on the pooled output.

  Args:
    bert_config: `modeling.BertConfig`.
    is_training: bool; dropout (probability 0.1) on the pooled output only
      when training, as in the reference.
    input_ids: int32 Tensor of shape [batch_size, seq_length].
    input_mask: int32 Tensor of shape [batch_size, seq_length].
    segment_ids: int32 Tensor of shape [batch_size, seq_length].
    labels: int32 Tensor of shape [batch_size] (float32 for regression;
      [batch_size, num_labels] of 0/1 for multi-label).
    num_labels: int, the number of classes (1 for regression).
    use_one_hot_embeddings: bool, one-hot matmul embeddings (faster on TPU).
    is_regression: bool; one output trained with the squared error.
    compute_dtype: the encoder's compute dtype (see `modeling.BertModel`);
      the head and the loss are float32.
    multi_label: bool; one sigmoid per label and the binary cross-entropy,
      averaged over the labels (the mean over the batch is then Hugging
      Face's `BCEWithLogitsLoss` of `problem_type=
      "multi_label_classification"`).
    cast_weights_once: bool, see `modeling.BertModel`: for prediction and
      evaluation graphs off TPU.

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
  output_layer = model.get_pooled_output()  # [B, H]
  hidden_size = modeling.get_shape_list(output_layer, expected_rank=2)[1]

  output_weights = tf.get_variable(
      "output_weights", [num_labels, hidden_size],
      initializer=tf.truncated_normal_initializer(stddev=0.02))
  output_bias = tf.get_variable(
      "output_bias", [num_labels], initializer=tf.zeros_initializer())

  # Holds no variables. Not named "loss" as in the reference: that name would
  # push the runner's TensorBoard `loss` summary to `loss_1`.
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
    if multi_label:
      per_example_loss = tf.reduce_mean(
          tf.nn.sigmoid_cross_entropy_with_logits(
              labels=tf.cast(labels, tf.float32), logits=logits), axis=-1)
      return (tf.reduce_mean(per_example_loss), per_example_loss, logits,
              tf.sigmoid(logits))
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
                     compute_dtype=tf.float32, multi_label=False,
                     label_names=None, threshold=0.5):
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
    compute_dtype: the encoder's compute dtype (see `modeling.BertModel`).
    multi_label: bool, a set of labels per example (`label_ids`
      [batch_size, num_labels] of 0/1; sigmoid outputs).
    label_names: list of str, the labels' names (multi-label: the per-label
      F1 keys).
    threshold: float in (0, 1), a label is predicted when its probability
      is at least this (multi-label evaluation).

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
      is_real_example = tf.ones(tf.shape(label_ids)[:1], dtype=tf.float32)
    is_training = mode == spec_lib.ModeKeys.TRAIN

    total_loss, per_example_loss, logits, outputs = create_model(
        bert_config, is_training, features["input_ids"],
        features["input_mask"], features["segment_ids"], label_ids,
        num_labels, use_one_hot_embeddings, is_regression=is_regression,
        compute_dtype=compute_dtype, multi_label=multi_label,
        cast_weights_once=model_fn_utils.cast_weights_once(
            mode, use_tpu))
    scaffold_fn = model_fn_utils.init_from_checkpoint(init_checkpoint,
                                                       use_tpu)

    if mode == spec_lib.ModeKeys.TRAIN:
      return model_fn_utils.train_spec(
          total_loss, learning_rate, num_train_steps, num_warmup_steps,
          use_tpu, scaffold_fn, options=options)
    if mode == spec_lib.ModeKeys.EVAL:
      if multi_label:
        eval_metrics = (functools.partial(
            glue_metrics.multi_label_metric_fn, label_names=label_names,
            threshold=threshold),
                        [per_example_loss, label_ids, outputs,
                         is_real_example])
      elif is_regression:
        eval_metrics = (glue_metrics.regression_metric_fn,
                        [per_example_loss, label_ids, outputs,
                         is_real_example])
      else:
        # The runner matches the tensors to the metric_fn's arguments.
        eval_metrics = (functools.partial(glue_metrics.classification_metric_fn,
                                          metric_names=metric_names),
                        [per_example_loss, label_ids, logits,
                         is_real_example])
      return spec_lib.model_spec(
          mode=mode, loss=total_loss, eval_metrics=eval_metrics,
          scaffold_fn=scaffold_fn)
    key = "predictions" if is_regression else "probabilities"
    return spec_lib.model_spec(
        mode=mode, predictions={key: outputs}, scaffold_fn=scaffold_fn)

  return model_fn


def eval_keys(processor, label_list, multi_label=False):
  """The keys of the task's `eval_results.txt` (what `--keep_best_by`
  may name).

  Args:
    processor: the task's `DataProcessor` (its `is_regression` and
      `metric_names`).
    label_list: list of str, the labels (multi-label: per-label F1 keys).
    multi_label: bool.

  Returns:
    Set of str.
  """
  keys = {"eval_loss", "loss", "global_step"}
  if multi_label:
    keys |= {"eval_exact_match", "eval_micro_f1", "eval_macro_f1"}
    keys |= {"eval_f1_%s" % label for label in label_list}
  elif processor.is_regression:
    keys |= {"eval_pearson", "eval_spearman"}
  else:
    keys.add("eval_accuracy")
    keys |= {"eval_%s" % name for name in processor.metric_names}
  return keys


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
      writer.write("\t".join(io_utils.number_str(value) for value in values) +
                   "\n")
      written += 1
    if written != num_examples:
      raise ValueError("%s: got %d predictions for %d test examples" %
                       (output_file, written, num_examples))
  return written
