"""Every use of TensorFlow's private API, in one place (what breaks between
minor versions): each function says what it uses and why no public API
does, checked on TensorFlow 2.15.1 and 2.21.0; `missing()` lists the names
a TensorFlow lacks (tests/test_tf_private.py). Nothing runs at import."""

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
# The SavedModel proto, whose object graph names a Keras export's variables.
# Checked on TF 2.15.1 and 2.21.0.
from tensorflow.core.protobuf import saved_model_pb2

__all__ = ["REQUIRED", "missing", "in_multi_worker_mode",
           "run_distribute_coordinator", "estimator_in_coordinator_mode",
           "keep_out_of_xla", "quiet_deprecation_notices",
           "per_replica_input_without_autotune", "saved_variable_names",
           "iterator_saveable", "per_replica", "estimator_taking_inputs"]

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
    (tf.distribute.StrategyExtended,
     "_experimental_distribute_values_from_function"),
    (saved_model_pb2, "SavedModel"),
)


def missing():
  """The private names of `REQUIRED` that this TensorFlow lacks.

  Returns:
    list of str, "module.name" each; empty on the pinned stacks.
  """
  return ["%s.%s" % (getattr(owner, "__name__", owner), name)
          for owner, name in REQUIRED if not hasattr(owner, name)]


def in_multi_worker_mode(strategy):
  """Whether `strategy` spans several workers: the private
  `_in_multi_worker_mode()` (the public `experimental_between_graph` is
  True for a one-worker strategy too)."""
  return strategy.extended._in_multi_worker_mode()  # pylint: disable=protected-access


def run_distribute_coordinator(worker_fn, strategy, session_config):
  """Runs `worker_fn(worker_strategy)` as this task of a multi-worker run,
  as the Estimator does (`distribute_coordinator`, independent-worker
  mode: the task's server, the strategy configured for the cluster)."""
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
  """Marks existing `ops` never to be compiled by XLA auto-clustering
  (`_set_attr("_XlaCompile", False)`, what `jit_scope(compile_ops=False)`
  sets on new ops)."""
  not_compiled = tf.AttrValue(b=False)
  for op in ops:
    op._set_attr("_XlaCompile", not_compiled)  # pylint: disable=protected-access


def quiet_deprecation_notices():
  """Turns off the deprecation notices of tf.compat.v1 APIs (a dozen lines
  before a script's first own line). Checked on TF 2.15.1 and 2.21.0."""
  deprecation._PRINT_DEPRECATION_WARNINGS = False  # pylint: disable=protected-access
  module_wrapper._PER_MODULE_WARNING_LIMIT = 0  # pylint: disable=protected-access


def per_replica_input_without_autotune(without_autotune):
  """Wraps tf.distribute's per-replica pipelines
  (`multi_device_iterator_ops._create_device_dataset`, which the input's
  options do not reach) with `without_autotune`, for the whole process;
  idempotent. Returns False when this TensorFlow lacks the function."""
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


def saved_variable_names(saved_model_file, list_name):
  """{checkpoint key: variable name} of the variables that the root object
  of a SavedModel lists under `list_name` (Keras 3's export:
  "_all_variables").

  Reads `saved_model.pb`'s object graph (`SavedModel` proto): the only
  place that keeps each variable's name; the checkpoint's keys are object
  paths, and `tf.saved_model.load` gives no public way back to the list.
  Checked on TF 2.15.1 and 2.21.0.
  """
  saved = saved_model_pb2.SavedModel()
  with tf.io.gfile.GFile(saved_model_file, "rb") as f:
    saved.ParseFromString(f.read())
  graph = saved.meta_graphs[0].object_graph_def
  names = {}
  for child in graph.nodes[0].children:
    if child.local_name == list_name:
      for item in graph.nodes[child.node_id].children:
        node = graph.nodes[item.node_id]
        if node.WhichOneof("kind") == "variable":
          key = "%s/%s/.ATTRIBUTES/VARIABLE_VALUE" % (list_name,
                                                      item.local_name)
          names[key] = node.variable.name
  return names


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


def per_replica(strategy, values):
  """`values` (a list, one nest per replica of this worker, in replica
  order) as the per-replica value `call_for_each_replica` hands out, each
  replica its own. The extended's private
  `_experimental_distribute_values_from_function`: graph mode's
  `StrategyV1` lacks the public method."""
  return strategy.extended._experimental_distribute_values_from_function(  # pylint: disable=protected-access
      lambda context: values[context.replica_id_in_sync_group])


def estimator_taking_inputs(**kwargs):
  """A `tf.estimator.Estimator(**kwargs)` whose distributed training takes
  what an input_fn marked `makes_iterator` (`input_fn.positioned`) returns,
  (features, labels) per replica, instead of making the strategy's own
  iterator over a dataset, which it gives no way to save. Replaces the
  private `Estimator._get_iterator_from_input_fn` on the instance (the
  Estimator refuses subclasses that override it): no public hook reaches
  a strategy's input. Checked on TensorFlow Estimator 2.15.0."""
  estimator = tf.estimator.Estimator(**kwargs)
  own = estimator._get_iterator_from_input_fn  # pylint: disable=protected-access

  class _Inputs(object):

    def __init__(self, result):
      self._result = result

    def get_next(self):
      return self._result

  def get_iterator(input_fn, mode, distribution=None):
    if distribution is None or not getattr(input_fn, "makes_iterator",
                                           False):
      return own(input_fn, mode, distribution)
    context = tf.distribute.InputContext(
        num_replicas_in_sync=distribution.num_replicas_in_sync)
    return _Inputs(estimator._call_input_fn(input_fn, mode, context)), []  # pylint: disable=protected-access

  estimator._get_iterator_from_input_fn = get_iterator  # pylint: disable=protected-access
  return estimator
