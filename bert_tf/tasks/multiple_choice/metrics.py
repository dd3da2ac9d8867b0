"""Eval metrics of multiple choice: accuracy and mean loss per question."""

import tensorflow.compat.v1 as tf

__all__ = ["EVAL_KEYS", "metric_fn"]

# The keys of eval_results.txt (what --keep_best_by may name).
EVAL_KEYS = frozenset({"eval_accuracy", "eval_loss", "global_step", "loss"})


def metric_fn(per_example_loss, label_ids, logits, is_real_example):
  """`eval_accuracy` and `eval_loss` over the real questions.

  Args:
    per_example_loss: float32 Tensor [batch_size], each question's
      cross-entropy.
    label_ids: int32 Tensor [batch_size], the right ending's index.
    logits: float32 Tensor [batch_size, num_choices], the choices' scores.
    is_real_example: float32 Tensor [batch_size]; 0 for TPU padding.

  Returns:
    dict of `(value, update_op)`: `eval_accuracy` (the share of questions
    whose highest score is the right ending, 0-1) and `eval_loss`.
  """
  predictions = tf.argmax(logits, axis=-1, output_type=tf.int32)
  return {
      "eval_accuracy": tf.metrics.accuracy(
          labels=label_ids, predictions=predictions, weights=is_real_example),
      "eval_loss": tf.metrics.mean(values=per_example_loss,
                                   weights=is_real_example),
  }
