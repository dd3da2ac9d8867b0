"""Keeping the optimizer update out of XLA's auto-clustering under a strategy.

With `--use_xla` every replica's ops are clustered and compiled on their
own, and the clusters differ from one replica to the next (the devices
differ), so the same update computed on two copies from the same
all-reduced gradient came out different in the last bit (3e-8 after two
steps, on two CPU replicas): the copies drifted apart. XLA never clusters
an op whose `_XlaCompile` attribute is false, so the update runs as
TensorFlow kernels, the same on every copy, which stay bit-identical; the
forward and backward passes are still compiled. Nothing here has an effect
without a strategy.
"""

import contextlib

import tensorflow.compat.v1 as tf

from bert_tf import tf_private

__all__ = ["kept_out_of_xla", "cond"]


@contextlib.contextmanager
def kept_out_of_xla():
  """Under a strategy, keeps the ops built inside out of XLA's auto-clustering.

  The ops are marked (`_XlaCompile` = false) when the block ends, not
  through `jit_scope`: the attribute scope is graph state shared by the
  replicas' threads, and a scope left open across a `merge_call` would mark
  the forward pass of the replicas that run meanwhile. Enter the block after
  the gradients are all-reduced: every op created from then on (by any
  replica) belongs to the update, and a few ops another replica's model
  function builds after its update may be marked too, which only keeps them
  out of XLA. No effect without a strategy.

  Yields:
    None.
  """
  if not tf.distribute.has_strategy():
    yield
    return
  graph = tf.get_default_graph()
  first = len(graph.get_operations())
  yield
  tf_private.keep_out_of_xla(graph.get_operations()[first:])


def cond(pred, true_fn, false_fn):
  """`tf.cond` whose branches are kept out of XLA too (`kept_out_of_xla`).

  Each branch is a function graph of its own, which the marking of the
  graph around it does not reach; so each is marked while it is built.
  Plain `tf.cond` without a strategy.

  Args:
    pred: bool scalar Tensor.
    true_fn, false_fn: callables building each branch (as for `tf.cond`).

  Returns:
    The output of `tf.cond`.
  """

  def kept_out(fn):
    def branch():
      with kept_out_of_xla():
        return fn()
    return branch

  return tf.cond(pred, kept_out(true_fn), kept_out(false_fn))
