"""What a `model_fn` returns, whichever runner calls it.

A script's `model_fn(features, labels, mode, params)` returns
`model_spec(...)`: on a stack that has `tf.estimator` (TensorFlow 2.15) a
`tf.estimator.tpu.TPUEstimatorSpec`, so the reference's users can still
hand a script's `model_fn_builder(...)` to their own TPUEstimator; without
it (TensorFlow 2.16 on) a `ModelSpec` with the same fields. Both runners
read only these fields.
"""

import collections

import tensorflow.compat.v1 as tf

__all__ = ["ModeKeys", "ModelSpec", "estimator_available", "model_spec"]


class ModeKeys(object):
  """The modes a `model_fn` is called in: `tf.estimator.ModeKeys`' values."""

  TRAIN = "train"
  EVAL = "eval"
  PREDICT = "infer"


ModelSpec = collections.namedtuple(
    "ModelSpec", ["mode", "loss", "train_op", "eval_metrics", "predictions",
                  "scaffold_fn", "training_hooks"])
ModelSpec.__doc__ = """A `model_fn`'s result without `tf.estimator`.

  Fields (as `TPUEstimatorSpec`'s): mode, one of `ModeKeys`; loss, a float32
  scalar Tensor (TRAIN, EVAL); train_op (TRAIN); eval_metrics, a pair
  (metric_fn, list or dict of Tensors) whose metric_fn returns name ->
  (value, update_op) (EVAL); predictions, dict name -> Tensor with the batch
  first (PREDICT); scaffold_fn, None or a function returning a `Scaffold`
  (TPU only); training_hooks, list of `tf.train.SessionRunHook` or None.
"""


def estimator_available():
  """Whether this TensorFlow has `tf.estimator` (2.15 and older)."""
  try:
    return hasattr(tf.estimator, "tpu")
  except (AttributeError, ImportError):
    return False


def model_spec(mode, loss=None, train_op=None, eval_metrics=None,
               predictions=None, scaffold_fn=None, training_hooks=None):
  """A `TPUEstimatorSpec` where `tf.estimator` exists, else a `ModelSpec`.

  Args: the fields of `ModelSpec`.
  """
  if estimator_available():
    return tf.estimator.tpu.TPUEstimatorSpec(
        mode=mode, loss=loss, train_op=train_op, eval_metrics=eval_metrics,
        predictions=predictions, scaffold_fn=scaffold_fn,
        training_hooks=training_hooks)
  return ModelSpec(mode=mode, loss=loss, train_op=train_op,
                   eval_metrics=eval_metrics, predictions=predictions,
                   scaffold_fn=scaffold_fn, training_hooks=training_hooks)
