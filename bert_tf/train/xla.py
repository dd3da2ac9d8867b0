"""Keeping the optimizer update out of XLA auto-clustering under a strategy:
each replica's clusters differ, so copies of one update drifted by the last
bit (3e-8 after two steps); ops marked `_XlaCompile` false run as the same
kernels everywhere. No effect without a strategy."""

import contextlib

import tensorflow.compat.v1 as tf

from bert_tf import tf_private

__all__ = ["kept_out_of_xla", "cond"]


@contextlib.contextmanager
def kept_out_of_xla():
  """Under a strategy, marks the ops built inside out of XLA (at the block's
  end; not `jit_scope`, whose graph state the replicas' threads share).
  Enter after the all-reduce: later ops belong to the update."""
  if not tf.distribute.has_strategy():
    yield
    return
  graph = tf.get_default_graph()
  first = len(graph.get_operations())
  yield
  tf_private.keep_out_of_xla(graph.get_operations()[first:])


def cond(pred, true_fn, false_fn):
  """`tf.cond` whose branches (function graphs of their own) are kept out of
  XLA too; plain `tf.cond` without a strategy."""

  def kept_out(fn):
    def branch():
      with kept_out_of_xla():
        return fn()
    return branch

  return tf.cond(pred, kept_out(true_fn), kept_out(false_fn))
