"""Every use of TensorFlow's private API, in one place.

Private names are what break between TensorFlow minor versions, and the
project spans 2.15 to 2.21. Each function below says what it uses and why
no public API does the job; each was checked on TensorFlow 2.15.1 and
2.21.0 (the two pinned stacks). `missing()` lists the names a TensorFlow
lacks, and tests/test_tf_private.py fails on such a TensorFlow, naming
them. Nothing here runs at import.
"""

import tensorflow.compat.v1 as tf
# The coordinator that runs the Estimator's multi-worker training
# (independent-worker mode); there is no public equivalent for graph-mode
# training. Checked on TF 2.15.1 and 2.21.0.
from tensorflow.python.distribute import distribute_coordinator
# Where a MultiDeviceIterator makes its per-replica datasets. Checked on TF
# 2.15.1 and 2.21.0.
from tensorflow.python.data.ops import multi_device_iterator_ops
# The base class of what a graph-mode Saver saves besides variables.
# Checked on TF 2.15.1 and 2.21.0.
from tensorflow.python.training.saving import saveable_object
# The switches of the compat.v1 deprecation notices. Checked on TF 2.15.1
# and 2.21.0.
from tensorflow.python.util import deprecation
from tensorflow.python.util import module_wrapper

__all__ = ["REQUIRED", "missing", "in_multi_worker_mode",
           "run_distribute_coordinator", "estimator_in_coordinator_mode",
           "keep_out_of_xla", "quiet_deprecation_notices",
           "per_replica_input_without_autotune", "iterator_saveable"]

# (object, private attribute) pairs this module uses, for `missing()`.
REQUIRED = (
    (distribute_coordinator, "run_distribute_coordinator"),
    (distribute_coordinator, "CoordinatorMode"),
    (multi_device_iterator_ops, "_create_device_dataset"),
    (deprecation, "_PRINT_DEPRECATION_WARNINGS"),
    (module_wrapper, "_PER_MODULE_WARNING_LIMIT"),
    (tf.Operation, "_set_attr"),
    (saveable_object, "SaveableObject"),
    (saveable_object, "SaveSpec"),
    (tf.distribute.StrategyExtended, "_in_multi_worker_mode"),
)


def missing():
  """The private names of `REQUIRED` that this TensorFlow lacks.

  Returns:
    list of str, "module.name" each; empty on the pinned stacks.
  """
  return ["%s.%s" % (getattr(owner, "__name__", owner), name)
          for owner, name in REQUIRED if not hasattr(owner, name)]


def in_multi_worker_mode(strategy):
  """Whether `strategy` spans several workers (TF_CONFIG with a cluster).

  `StrategyExtended._in_multi_worker_mode()`: the public
  `experimental_between_graph` is also True for a one-worker
  `MultiWorkerMirroredStrategy`, which trains like a local one.
  Checked on TF 2.15.1 and 2.21.0.
  """
  return strategy.extended._in_multi_worker_mode()  # pylint: disable=protected-access


def run_distribute_coordinator(worker_fn, strategy, session_config):
  """Runs `worker_fn(worker_strategy)` as this task of a multi-worker run.

  The path the Estimator's multi-worker training takes: the coordinator
  starts this task's server and configures the strategy for the cluster
  (`distribute_coordinator.run_distribute_coordinator`, independent-worker
  mode). Checked on TF 2.15.1 and 2.21.0.
  """
  return distribute_coordinator.run_distribute_coordinator(
      worker_fn, strategy,
      mode=distribute_coordinator.CoordinatorMode.INDEPENDENT_WORKER,
      session_config=session_config)


def estimator_in_coordinator_mode(run_config):
  """Whether a `tf.estimator.RunConfig` runs multi-worker (its private
  `_distribute_coordinator_mode`, set from TF_CONFIG). Checked on
  TensorFlow Estimator 2.15.0."""
  return bool(getattr(run_config, "_distribute_coordinator_mode", None))


def keep_out_of_xla(ops):
  """Marks `ops` never to be compiled by XLA's auto-clustering.

  `Operation._set_attr("_XlaCompile", False)`: the attribute that
  `tf.xla.experimental.jit_scope(compile_ops=False)` sets on the ops made
  inside it, for ops that exist already. Checked on TF 2.15.1 and 2.21.0.
  """
  not_compiled = tf.AttrValue(b=False)
  for op in ops:
    op._set_attr("_XlaCompile", not_compiled)  # pylint: disable=protected-access


def quiet_deprecation_notices():
  """Turns off the deprecation notices of tf.compat.v1 APIs (a dozen lines
  before a script's first own line). Checked on TF 2.15.1 and 2.21.0."""
  deprecation._PRINT_DEPRECATION_WARNINGS = False  # pylint: disable=protected-access
  module_wrapper._PER_MODULE_WARNING_LIMIT = 0  # pylint: disable=protected-access


def per_replica_input_without_autotune(without_autotune):
  """Applies `without_autotune` to tf.distribute's per-replica pipelines.

  Under a strategy a `MultiDeviceIterator` feeds each replica through a
  small pipeline of its own, made by
  `multi_device_iterator_ops._create_device_dataset`, whose options the
  input's do not reach (see `input_fn.without_autotune` for why autotuning
  must be off). This wraps that function, for the whole process;
  idempotent. Checked on TF 2.15.1 and 2.21.0 (same arguments).

  Args:
    without_autotune: function(dataset) -> dataset.

  Returns:
    bool, False when this TensorFlow lacks the function (nothing changed).
  """
  create = getattr(multi_device_iterator_ops, "_create_device_dataset", None)
  if create is None:
    return False
  if getattr(create, "without_autotune", False):
    return True

  def create_device_dataset(*args, **kwargs):
    return without_autotune(create(*args, **kwargs))

  create_device_dataset.without_autotune = True
  multi_device_iterator_ops._create_device_dataset = create_device_dataset  # pylint: disable=protected-access
  return True


def iterator_saveable(iterator, name):
  """What a `tf.train.Saver` saves as `iterator`'s position: entry `name`,
  a string scalar (the iterator's serialized state); restoring it
  initializes the iterator, then puts the state back.

  A `saveable_object.SaveableObject` on the iterator's resource
  (`iterator._iterator_resource`). The public
  `tf.data.experimental.make_saveable_from_iterator` saves a variant
  tensor, which `tf.train.load_checkpoint` cannot read back into numpy
  (every tool listing a checkpoint's tensors would fail), and restores
  only into an iterator initialized beforehand, which a restoring
  `Scaffold` never does. Checked on TF 2.15.1 and 2.21.0.

  Args:
    iterator: an initializable `tf.data` iterator of the default graph.
    name: str, the checkpoint entry.
  """
  resource = iterator._iterator_resource  # pylint: disable=protected-access
  policy = tf.data.experimental.ExternalStatePolicy.WARN.value
  state = tf.io.serialize_tensor(tf.raw_ops.SerializeIterator(
      resource_handle=resource, external_state_policy=policy))

  class _Position(saveable_object.SaveableObject):

    def restore(self, restored_tensors, restored_shapes):
      del restored_shapes
      with tf.control_dependencies([iterator.initializer]):
        return tf.raw_ops.DeserializeIterator(
            resource_handle=resource,
            serialized=tf.io.parse_tensor(restored_tensors[0], tf.variant))

  spec = saveable_object.SaveSpec(state, "", name, device=resource.device)
  return _Position(resource, [spec], name)
