"""Evaluation metrics of the GLUE tasks, for `run_classifier.py`.

Each task's standard metric (Wang et al. 2019, "GLUE"), beyond the
reference's accuracy and loss: F1 of the positive class (MRPC, QQP), the
Matthews correlation (CoLA), and Pearson's and Spearman's correlations
(STS-B); for a multi-label task micro and macro F1, each label's F1 and
exact-set accuracy. The scores are numpy functions, testable by hand, and enter the
graph through `tf.numpy_function`.
"""

import math

import numpy as np
import tensorflow.compat.v1 as tf

__all__ = [
    "f1_from_counts", "matthews_from_counts", "pearson_correlation",
    "spearman_correlation", "classification_metric_fn", "regression_metric_fn",
    "multi_label_scores", "multi_label_metric_fn",
]


def f1_from_counts(tp, fp, fn):
  """F1 of the positive class (label id 1): 2tp / (2tp + fp + fn); 0 when
  there are no positives at all."""
  denominator = 2.0 * tp + fp + fn
  return np.float32(2.0 * tp / denominator if denominator else 0.0)


def matthews_from_counts(tp, fp, fn, tn):
  """Matthews correlation coefficient of a binary confusion matrix; 0 when a
  row or column of the matrix is empty (as scikit-learn reports it)."""
  tp, fp, fn, tn = (float(x) for x in (tp, fp, fn, tn))
  denominator = math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
  return np.float32((tp * tn - fp * fn) / denominator if denominator else 0.0)


def _average_ranks(values):
  """1-based ranks of `values`, ties sharing their average rank."""
  values = np.asarray(values, dtype=np.float64)
  order = np.argsort(values, kind="mergesort")
  ranks = np.empty(len(values), dtype=np.float64)
  sorted_values = values[order]
  start = 0
  while start < len(values):
    end = start
    while end + 1 < len(values) and sorted_values[end + 1] == sorted_values[
        start]:
      end += 1
    ranks[order[start:end + 1]] = (start + end) / 2.0 + 1.0
    start = end + 1
  return ranks


def pearson_correlation(x, y):
  """Pearson's r of two equal-length sequences; NaN when either is constant
  (or has fewer than two values), where r is undefined."""
  x = np.asarray(x, dtype=np.float64)
  y = np.asarray(y, dtype=np.float64)
  if len(x) < 2:
    return np.float32(np.nan)
  dx = x - x.mean()
  dy = y - y.mean()
  denominator = math.sqrt(float(np.dot(dx, dx)) * float(np.dot(dy, dy)))
  if not denominator:
    return np.float32(np.nan)
  return np.float32(np.dot(dx, dy) / denominator)


def spearman_correlation(x, y):
  """Spearman's rho: Pearson's r of the average ranks."""
  return pearson_correlation(_average_ranks(x), _average_ranks(y))


def _numpy_metric(fn, inputs):
  """`(value, update_op)`-compatible float32 scalar from a numpy function."""
  value = tf.numpy_function(fn, inputs, tf.float32, stateful=False)
  value.set_shape([])
  return value


def _streaming_concat(values, name):
  """A streaming metric collecting all of `values` (1-D) across batches.

  Returns:
    `(collected, update_op)`; `collected` is a 1-D Tensor of everything the
    update op has seen since the local variables were initialized.
  """
  with tf.variable_scope(None, default_name=name):
    collected = tf.Variable(
        tf.zeros([0], dtype=values.dtype), trainable=False,
        validate_shape=False, shape=tf.TensorShape([None]),
        collections=[tf.GraphKeys.LOCAL_VARIABLES,
                     tf.GraphKeys.METRIC_VARIABLES],
        name="values")
    update_op = collected.assign(tf.concat([collected, values], axis=0),
                                 read_value=False)
  return collected.read_value(), update_op


def classification_metric_fn(per_example_loss, label_ids, logits,
                             is_real_example, metric_names=()):
  """Eval metrics of a classification task.

  Args:
    per_example_loss: float32 Tensor of shape [batch_size].
    label_ids: int32 Tensor of shape [batch_size].
    logits: float32 Tensor of shape [batch_size, num_labels].
    is_real_example: float32 Tensor of shape [batch_size]; 0 for padding.
    metric_names: names of extra metrics: "f1" (positive class: label id 1)
      and/or "mcc" (Matthews correlation), for two-label tasks.

  Returns:
    Dict of `(value, update_op)`: `eval_accuracy`, `eval_loss` and
    `eval_<name>` for each extra metric. Padding examples have weight 0.
  """
  predictions = tf.argmax(logits, axis=-1, output_type=tf.int32)
  metrics = {
      "eval_accuracy": tf.metrics.accuracy(
          labels=label_ids, predictions=predictions, weights=is_real_example),
      "eval_loss": tf.metrics.mean(values=per_example_loss,
                                   weights=is_real_example),
  }
  if metric_names:
    counts, updates = [], []
    for count_fn in (tf.metrics.true_positives, tf.metrics.false_positives,
                     tf.metrics.false_negatives, tf.metrics.true_negatives):
      count, update = count_fn(labels=label_ids, predictions=predictions,
                               weights=is_real_example)
      counts.append(count)
      updates.append(update)
    update_op = tf.group(*updates)
    tp, fp, fn, tn = counts
    if "f1" in metric_names:
      metrics["eval_f1"] = (_numpy_metric(f1_from_counts, [tp, fp, fn]),
                            update_op)
    if "mcc" in metric_names:
      metrics["eval_mcc"] = (
          _numpy_metric(matthews_from_counts, [tp, fp, fn, tn]), update_op)
  return metrics


def regression_metric_fn(per_example_loss, label_ids, predictions,
                         is_real_example):
  """Eval metrics of a regression task (STS-B).

  Args:
    per_example_loss: float32 Tensor of shape [batch_size], squared errors.
    label_ids: float32 Tensor of shape [batch_size], the true scores.
    predictions: float32 Tensor of shape [batch_size].
    is_real_example: float32 Tensor of shape [batch_size]; 0 for padding.

  Returns:
    Dict of `(value, update_op)`: `eval_loss` (mean squared error),
    `eval_pearson` and `eval_spearman` over the real examples. The two
    correlations collect every prediction (on the host, also on TPU) and are
    computed once at the end.
  """
  real = tf.greater(is_real_example, 0)
  labels, labels_update = _streaming_concat(
      tf.boolean_mask(tf.cast(label_ids, tf.float32), real), "labels")
  preds, preds_update = _streaming_concat(
      tf.boolean_mask(predictions, real), "predictions")
  update_op = tf.group(labels_update, preds_update)
  return {
      "eval_loss": tf.metrics.mean(values=per_example_loss,
                                   weights=is_real_example),
      "eval_pearson": (_numpy_metric(pearson_correlation, [preds, labels]),
                       update_op),
      "eval_spearman": (_numpy_metric(spearman_correlation, [preds, labels]),
                        update_op),
  }


def multi_label_scores(tp, fp, fn):
  """Micro F1, macro F1 and per-label F1 from per-label counts.

  Args:
    tp, fp, fn: 1-D arrays [num_labels] of true positives, false positives
      and false negatives.

  Returns:
    `(micro, macro, per_label)`: micro F1 pools the counts of every label,
    macro F1 is the mean of the per-label F1s (each 0 for a label that is
    neither present nor predicted), `per_label` float32 [num_labels].
  """
  tp, fp, fn = (np.asarray(x, np.float64) for x in (tp, fp, fn))
  per_label = np.array([f1_from_counts(*counts) for counts in zip(tp, fp, fn)],
                       np.float32)
  micro = f1_from_counts(tp.sum(), fp.sum(), fn.sum())
  return micro, np.float32(per_label.mean()), per_label


def _streaming_sum(values, name):
  """`(sum, update_op)` of `values` ([batch, n]) over the batch, streamed."""
  with tf.variable_scope(None, default_name=name):
    total = tf.Variable(
        tf.zeros([values.shape[-1]], tf.float32), trainable=False,
        collections=[tf.GraphKeys.LOCAL_VARIABLES,
                     tf.GraphKeys.METRIC_VARIABLES], name="sum")
    update_op = total.assign_add(tf.reduce_sum(values, axis=0),
                                 read_value=False)
  return total.read_value(), update_op


def multi_label_metric_fn(per_example_loss, label_ids, probabilities,
                          is_real_example, label_names=None, threshold=0.5):
  """Eval metrics of a multi-label task.

  Args:
    per_example_loss: float32 Tensor [batch_size], the mean binary
      cross-entropy of each example.
    label_ids: int Tensor [batch_size, num_labels] of 0/1.
    probabilities: float32 Tensor [batch_size, num_labels], the sigmoids.
    is_real_example: float32 Tensor [batch_size]; 0 for padding.
    label_names: list of num_labels str, for the per-label keys (default
      the label ids).
    threshold: a label is predicted when its probability is >= this.

  Returns:
    Dict of `(value, update_op)`: `eval_loss`, `eval_exact_match` (the
    share of examples whose predicted set is exactly the true set),
    `eval_micro_f1`, `eval_macro_f1` and `eval_f1_<label>` for each label.
  """
  num_labels = probabilities.shape[-1]
  names = list(label_names or [str(i) for i in range(num_labels)])
  truth = tf.cast(label_ids, tf.float32)
  predicted = tf.cast(probabilities >= threshold, tf.float32)
  weights = tf.expand_dims(is_real_example, -1)
  counts, updates = [], []
  for values, name in ((truth * predicted, "tp"),
                       ((1.0 - truth) * predicted, "fp"),
                       (truth * (1.0 - predicted), "fn")):
    count, update = _streaming_sum(values * weights, name)
    counts.append(count)
    updates.append(update)
  update_op = tf.group(*updates)
  scores = tf.numpy_function(
      multi_label_scores, counts, [tf.float32, tf.float32, tf.float32],
      stateful=False)
  exact = tf.cast(tf.reduce_all(tf.equal(truth, predicted), axis=-1),
                  tf.float32)
  metrics = {
      "eval_loss": tf.metrics.mean(values=per_example_loss,
                                   weights=is_real_example),
      "eval_exact_match": tf.metrics.mean(values=exact,
                                          weights=is_real_example),
      "eval_micro_f1": (tf.reshape(scores[0], []), update_op),
      "eval_macro_f1": (tf.reshape(scores[1], []), update_op),
  }
  per_label = tf.reshape(scores[2], [num_labels])
  for i, name in enumerate(names):
    metrics["eval_f1_%s" % name] = (per_label[i], update_op)
  return metrics
