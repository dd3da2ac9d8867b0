"""Tests for bert_tf/tasks/classifier/metrics.py: F1, MCC, Pearson and Spearman
against hand-computed values, and the in-graph metric_fns ignoring padding."""

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from bert_tf.tasks.classifier import metrics as glue_metrics

# ----------------------------------------------------------------------------
# Metrics against hand-computed values.
# ----------------------------------------------------------------------------


def test_f1_hand_computed():
  # tp=3, fp=1, fn=2: precision 3/4, recall 3/5, F1 = 6/9.
  assert glue_metrics.f1_from_counts(3, 1, 2) == pytest.approx(2 / 3)
  assert glue_metrics.f1_from_counts(0, 0, 0) == 0.0


def test_matthews_hand_computed():
  # (3*4 - 1*2) / sqrt(4 * 5 * 5 * 6) = 10 / sqrt(600).
  assert glue_metrics.matthews_from_counts(3, 1, 2, 4) == pytest.approx(
      10 / 600 ** 0.5)
  assert glue_metrics.matthews_from_counts(5, 0, 0, 5) == pytest.approx(1.0)
  assert glue_metrics.matthews_from_counts(0, 0, 5, 5) == 0.0  # Undefined.


def test_pearson_hand_computed():
  # dx = [-1.5, -.5, .5, 1.5], dy = [-3, -1, 0, 4]: 11 / sqrt(5 * 26).
  assert glue_metrics.pearson_correlation(
      [1, 2, 3, 4], [2, 4, 5, 9]) == pytest.approx(11 / 130 ** 0.5, rel=1e-6)
  assert np.isnan(glue_metrics.pearson_correlation([1, 1, 1], [1, 2, 3]))


def test_spearman_hand_computed_with_ties():
  # Ranks [1, 2.5, 2.5, 4] and [1, 3, 2, 4]: 4.5 / sqrt(4.5 * 5).
  assert glue_metrics.spearman_correlation(
      [1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(4.5 / 22.5 ** 0.5,
                                                   rel=1e-6)
  assert glue_metrics.spearman_correlation(
      [1, 2, 3, 4, 5], [1, 4, 9, 16, 100]) == pytest.approx(1.0)
  assert glue_metrics.spearman_correlation(
      [3, 2, 1], [1, 2, 3]) == pytest.approx(-1.0)


def _run_streaming(metric_fn, batches):
  """Feeds `batches` (lists of arrays) through a metric_fn; final values."""
  with tf.Graph().as_default():
    placeholders = [tf.placeholder(tf.as_dtype(a.dtype),
                                   [None] + list(a.shape[1:]))
                    for a in batches[0]]
    metrics = metric_fn(*placeholders)
    with tf.Session() as sess:
      sess.run(tf.local_variables_initializer())
      for batch in batches:
        sess.run([update for _, update in metrics.values()],
                 dict(zip(placeholders, batch)))
      return sess.run({k: value for k, (value, _) in metrics.items()})


def test_classification_metrics_in_graph_ignore_padding():
  labels = np.array([1, 1, 1, 0, 0, 0, 1], np.int32)
  predicted = np.array([1, 1, 0, 1, 0, 0, 0])
  logits = np.eye(2, dtype=np.float32)[predicted]
  loss = np.arange(1, 8, dtype=np.float32)
  real = np.array([1, 1, 1, 1, 1, 1, 0], np.float32)  # The last: padding.

  def metric_fn(*args):
    return glue_metrics.classification_metric_fn(
        *args, metric_names=("f1", "mcc"))

  batches = [(loss[:4], labels[:4], logits[:4], real[:4]),
             (loss[4:], labels[4:], logits[4:], real[4:])]
  results = _run_streaming(metric_fn, batches)
  # Real examples: tp=2, fn=1, fp=1, tn=2.
  assert results["eval_accuracy"] == pytest.approx(4 / 6)
  assert results["eval_loss"] == pytest.approx(3.5)
  assert results["eval_f1"] == pytest.approx(4 / 6)
  assert results["eval_mcc"] == pytest.approx(3 / 9)


def test_regression_metrics_in_graph_ignore_padding():
  preds = np.array([1, 2, 3, 4, 100], np.float32)
  labels = np.array([2, 4, 5, 9, -50], np.float32)
  loss = np.square(preds - labels)
  real = np.array([1, 1, 1, 1, 0], np.float32)
  batches = [(loss[:3], labels[:3], preds[:3], real[:3]),
             (loss[3:], labels[3:], preds[3:], real[3:])]
  results = _run_streaming(glue_metrics.regression_metric_fn, batches)
  assert sorted(results) == ["eval_loss", "eval_pearson", "eval_spearman"]
  assert results["eval_loss"] == pytest.approx((1 + 4 + 4 + 25) / 4)
  assert results["eval_pearson"] == pytest.approx(11 / 130 ** 0.5, rel=1e-6)
  assert results["eval_spearman"] == pytest.approx(1.0)
