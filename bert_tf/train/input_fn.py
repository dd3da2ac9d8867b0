"""The TFRecord input pipeline of the scripts' `input_fn`s.

An `input_fn(params, config=None, input_context=None)` returns a
`tf.data.Dataset` of batched feature dicts, `params["batch_size"]` per
batch, as the reference's do; both runners call it the same way.

Every pipeline runs without tf.data's autotuning (`without_autotune`), and
so do the per-replica pipelines a strategy makes
(`per_replica_input_without_autotune`): its background thread could hold up
`Session.close`, so the exit, by tens of seconds.
"""

import inspect

from absl import logging

import tensorflow.compat.v1 as tf

from bert_tf import tf_private
from bert_tf.train import distribute as distribute_utils
from bert_tf.train import lengths as lengths_lib

__all__ = ["decode_record", "tfrecord_input_fn_builder", "with_batch_size",
           "positioned",
           "features_and_labels", "without_autotune",
           "per_replica_input_without_autotune"]


def _no_autotune_options():
  options = tf.data.Options()
  options.autotune.enabled = False
  return options


def without_autotune(dataset):
  """`dataset` with tf.data's autotuning off (its elements unchanged).

  With autotuning on, each iterator runs a "model" thread that sleeps
  between tuning rounds, for a period that doubles as the iterator lives
  (10 ms, 20 ms, ... 10.24 s, 20.48 s, ...). When the iterator is destroyed
  (at `Session.close`, after training, evaluation or prediction), the
  cancellation often fails to wake that thread (a race in TensorFlow 2.15
  and 2.21 alike: it is woken before it can see the cancellation, and
  sleeps again), and the destructor waits out the rest of its period:
  measured 8-11 s after 12-30 s of training, on both runners, and the wait
  grows with the run. The scripts' pipelines fix every parallelism and
  buffer size themselves, so autotuning has nothing to tune.

  Args:
    dataset: a `tf.data.Dataset`.

  Returns:
    The dataset with `options().autotune.enabled` False; the options carry
    over to the datasets made from it.
  """
  return dataset.with_options(_no_autotune_options())


def per_replica_input_without_autotune():
  """Turns autotuning off in the per-replica pipelines of tf.distribute.

  Under a strategy a `MultiDeviceIterator` feeds each replica through a
  small pipeline of its own, whose iterator has the same shutdown race
  (`without_autotune`) and which the input's options do not reach:
  `tf_private.per_replica_input_without_autotune` wraps the private
  function that makes those pipelines, for the whole process. Called where
  a run sets up its strategy (`distribute.setup`); idempotent.
  """
  if not tf_private.per_replica_input_without_autotune(without_autotune):
    # Another TensorFlow: training runs as before, its exit maybe slower.
    logging.warning("tf.data's per-replica pipelines keep autotuning (this "
                    "TensorFlow lacks what tf_private wraps): the exit may "
                    "wait for it")


def with_batch_size(input_fn, batch_size):
  """`input_fn` called with `params["batch_size"] = batch_size`.

  The result takes `(params, config, input_context=None)`, as the Estimator
  calls an input_fn, and passes `config` and `input_context` on where
  `input_fn` takes them; it keeps `positioned`'s `makes_iterator`.
  """
  names = inspect.signature(input_fn).parameters

  def wrapped(params, config, input_context=None):
    kwargs = {"params": dict(params, batch_size=batch_size)}
    if "config" in names:
      kwargs["config"] = config
    if "input_context" in names:
      kwargs["input_context"] = input_context
    return input_fn(**kwargs)

  wrapped.makes_iterator = getattr(input_fn, "makes_iterator", False)
  return wrapped


def positioned(input_fn, saving):
  """`input_fn` as one device, or one worker's replicas, train on it, its
  position saved.

  The result, called as `with_batch_size`'s, reads the dataset through an
  initializable iterator whose state `saving` (a
  `checkpoints.Saving`) writes into every checkpoint and restores from it,
  so a resumed run reads on from where the saved run was: the same
  batches, the same shuffle buffer, no epoch restarted. Given an
  `input_context` of N replicas, in a strategy's scope, it reads N batches
  a step, one after the other, the i-th for replica i (as a strategy's
  own input hands them out), and returns per-replica values.

  Returns:
    `input_fn(params, config=None, input_context=None)` -> (features,
    labels or None): Tensors, or per-replica values. Its attribute
    `makes_iterator` is True (the runner takes these, not a dataset).
  """

  def wrapped(params, config=None, input_context=None):
    call = with_batch_size(input_fn, params["batch_size"])
    dataset = without_autotune(call(params=params, config=config,
                                    input_context=input_context))
    iterator = tf.data.make_initializable_iterator(dataset)
    saving.track(iterator)
    if input_context is None:
      return features_and_labels(iterator.get_next())
    elements = []
    for _ in range(input_context.num_replicas_in_sync //
                   input_context.num_input_pipelines):
      with tf.control_dependencies(tf.nest.flatten(elements[-1:])):
        elements.append(iterator.get_next())
    return features_and_labels(
        tf_private.per_replica(tf.distribute.get_strategy(), elements))

  wrapped.makes_iterator = True
  return wrapped


def features_and_labels(element):
  """(features, labels) of a dataset element: a (features, labels) pair, or
  the features alone (labels None), as the Estimator reads them."""
  if isinstance(element, (tuple, list)) and len(element) == 2:
    return element[0], element[1]
  return element, None


def decode_record(record, name_to_features):
  """Parses one serialized `tf.train.Example`, casting int64 to int32.

  TPUs support only int32 integers, so every int64 feature is cast; float
  features are left as they are.

  Args:
    record: scalar string Tensor, one serialized Example.
    name_to_features: dict name -> `tf.io.FixedLenFeature`.

  Returns:
    dict name -> Tensor.
  """
  example = tf.parse_single_example(record, name_to_features)
  for name in list(example.keys()):
    if example[name].dtype == tf.int64:
      example[name] = tf.cast(example[name], tf.int32)
  return example


def tfrecord_input_fn_builder(input_files, name_to_features, is_training,
                              drop_remainder, num_cpu_threads=4,
                              shuffle_buffer=100, length_buckets=None,
                              sequence_keys=lengths_lib.BASE_KEYS,
                              transform=None):
  """Builds an `input_fn(params)` over TFRecord files of Examples.

  Training reads the files in parallel in shuffled order, repeats forever and
  shuffles records with a buffer of `shuffle_buffer`. Evaluation and
  prediction read the files in the given order, once.

  Args:
    input_files: list of str paths.
    name_to_features: dict name -> `tf.io.FixedLenFeature`.
    is_training: bool.
    drop_remainder: bool; True gives fixed batch shapes (needed on TPU).
    num_cpu_threads: int, parallel readers and parsers when training.
    shuffle_buffer: int, records in the shuffle buffer when training.
    length_buckets: None (every batch at the records' length, the
      reference's), or `lengths.bucket_lengths(seq_length)`: each batch is
      cut to its longest input rounded up to one of them, and training
      batches group inputs of similar length (`lengths.group_by_length`).
    sequence_keys: the [seq_length] features that `length_buckets` cuts.
    transform: None, or `transform(features, index, seed)` -> features,
      applied to each parsed record: `index` (int64 scalar tensor) is the
      record's place in the stream read, before the shuffle of records and
      counting on across epochs; `seed` the pipeline's (int or None).

  Under a multi-worker `tf.distribute` strategy (an `input_context` with
  several input pipelines), each worker trains on its own share: whole files
  when there are at least as many files as workers, else every N-th record;
  so no example is read twice per epoch across workers. A
  `config.tf_random_seed` seeds the shuffles (plus the worker's index).

  Returns:
    A function `input_fn(params, config=None, input_context=None)` ->
    `tf.data.Dataset` of batched feature dicts; the batch size is
    `params["batch_size"]`.
  """
  input_files = list(input_files)

  def input_fn(params, config=None, input_context=None):
    batch_size = params["batch_size"]
    # One worker of several (tf.distribute): its own share, its own seed.
    num_shards, index = distribute_utils.input_shard(input_context)
    seed = getattr(config, "tf_random_seed", None)
    if seed is not None:
      seed += index
    if is_training:
      if num_shards > 1 and len(input_files) < num_shards:
        # Fewer files than workers: every worker reads all files in order
        # and keeps every num_shards-th record.
        d = tf.data.TFRecordDataset(input_files).shard(num_shards, index)
        d = d.repeat()
      else:
        files = tf.data.Dataset.from_tensor_slices(tf.constant(input_files))
        if num_shards > 1:
          files = files.shard(num_shards, index)
        num_files = len(input_files[index::num_shards])
        files = files.repeat().shuffle(buffer_size=num_files, seed=seed)
        cycle_length = min(num_cpu_threads, num_files)
        d = files.interleave(
            tf.data.TFRecordDataset,
            cycle_length=cycle_length,
            num_parallel_calls=cycle_length,
            deterministic=seed is not None)
    else:
      d = tf.data.TFRecordDataset(input_files)
    if transform is None:
      parse = lambda record: decode_record(record, name_to_features)
    else:
      d = d.enumerate()
      parse = lambda index, record: transform(
          decode_record(record, name_to_features), index, seed)
    if is_training:
      d = d.shuffle(buffer_size=shuffle_buffer, seed=seed)
    d = d.map(parse,
              num_parallel_calls=num_cpu_threads if is_training else None)
    if length_buckets is None:
      d = d.batch(batch_size, drop_remainder=drop_remainder)
    else:
      if is_training:
        d = lengths_lib.group_by_length(d, batch_size, length_buckets,
                                        drop_remainder)
      else:
        d = d.batch(batch_size, drop_remainder=drop_remainder)
      d = lengths_lib.cut_batches(d, length_buckets, sequence_keys)
    return without_autotune(d.prefetch(1))

  return input_fn
