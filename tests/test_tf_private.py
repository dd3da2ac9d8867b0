"""bert_tf/tf_private.py: TensorFlow's private names the project uses are
there on this stack, and do what the project relies on."""

import tensorflow.compat.v1 as tf

from helpers import needs_estimator

from bert_tf import tf_private


def test_this_tensorflow_has_every_private_name_the_project_uses():
  missing = tf_private.missing()
  assert not missing, (
      "TensorFlow %s lacks %s, which bert_tf/tf_private.py uses (checked on "
      "2.15.1 and 2.21.0): adapt that module" %
      (tf.version.VERSION, ", ".join(missing)))


def test_missing_names_a_private_name_that_is_gone(monkeypatch):
  monkeypatch.setattr(tf_private, "REQUIRED",
                      tf_private.REQUIRED + ((tf_private, "_gone"),))
  assert tf_private.missing() == ["bert_tf.tf_private._gone"]


def test_keep_out_of_xla_marks_the_ops():
  with tf.Graph().as_default():
    x = tf.constant(1.0) + 1.0
    tf_private.keep_out_of_xla([x.op])
    assert x.op.get_attr("_XlaCompile") is False


def test_a_local_strategy_is_not_multi_worker():
  with tf.Graph().as_default():
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    assert not tf_private.in_multi_worker_mode(strategy)


@needs_estimator
def test_the_estimator_has_the_input_method_estimator_taking_inputs_replaces():
  for name in ("_get_iterator_from_input_fn", "_call_input_fn"):
    assert callable(getattr(tf.estimator.Estimator, name, None)), name
