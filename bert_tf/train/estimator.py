"""Estimator and TPU set-up, the input pipeline and the training spec.

The reference release repeats these pieces in each `run_*.py`; here they
live once: the steps of a number of epochs, the estimator and its
`RunConfig` (from a run's `options.RunOptions`), the checkpoint
initialization (with the reference's `*INIT_FROM_CKPT*` log), the training
spec, a progress hook (examples/sec and ETA), a weighted mean loss that
holds under a strategy, and the TFRecord input pipeline.

Flags are in `bert_tf/cli/`; files and formats in `bert_tf/io.py`.
"""

import time

from absl import logging
import tensorflow.compat.v1 as tf

from bert_tf.train import distribute as distribute_utils
from bert_tf.train import options as training_options
import modeling
import optimization

__all__ = ["fine_tuning_steps", "make_run_config", "run_config_from_options",
           "make_estimator", "estimator_from_options", "init_from_checkpoint",
           "weighted_mean_loss", "train_spec", "ProgressHook", "decode_record",
           "tfrecord_input_fn_builder"]


# ----------------------------------------------------------------------------
# Estimator
# ----------------------------------------------------------------------------


def fine_tuning_steps(num_examples, train_batch_size, num_train_epochs,
                      warmup_proportion):
  """Training and warmup steps for a number of epochs, as the reference.

  Args:
    num_examples: int, training examples (one epoch).
    train_batch_size: int, examples per step.
    num_train_epochs: float, epochs.
    warmup_proportion: float, fraction of the steps spent warming up.

  Returns:
    (num_train_steps, num_warmup_steps); at least one training step, where
    the reference failed on a training set smaller than a batch.
  """
  num_train_steps = int(num_examples / train_batch_size * num_train_epochs)
  if num_train_steps < 1:
    logging.warning("%d examples / batch size %d * %s epochs is under one "
                    "step; training 1 step", num_examples, train_batch_size,
                    num_train_epochs)
    num_train_steps = 1
  return num_train_steps, int(num_train_steps * warmup_proportion)


def make_run_config(output_dir, save_checkpoints_steps, iterations_per_loop,
                    use_tpu=False, tpu_name=None, tpu_zone=None,
                    gcp_project=None, master=None, num_tpu_cores=8,
                    keep_checkpoint_max=5, tf_random_seed=None):
  """Builds the `tf.estimator.tpu.RunConfig` every script uses.

  With `use_tpu` and `tpu_name`, the TPU is resolved through
  `TPUClusterResolver` (this replaces the reference's `tf.contrib` resolver).
  Without a TPU the same config runs the TPUEstimator on CPU or GPU.

  Args:
    output_dir: str, where checkpoints and summaries go.
    save_checkpoints_steps: int, steps between checkpoints.
    iterations_per_loop: int, steps per TPU loop (not used off TPU).
    use_tpu, tpu_name, tpu_zone, gcp_project, master, num_tpu_cores: the TPU
      flags.
    keep_checkpoint_max: int, how many recent checkpoints to keep.
    tf_random_seed: int or None, the graph seed (and the training input's
      shuffle seed in `tfrecord_input_fn_builder`).

  Returns:
    A `tf.estimator.tpu.RunConfig`.
  """
  cluster = None
  if use_tpu and tpu_name:
    cluster = tf.distribute.cluster_resolver.TPUClusterResolver(
        tpu_name, zone=tpu_zone, project=gcp_project)
  # Off TPU, iterations_per_loop only scales TPUEstimator's step-counting
  # hook, which then logs examples/sec on every step; 1 makes it log every
  # `log_step_count_steps` (100) steps instead.
  tpu_config = tf.estimator.tpu.TPUConfig(
      iterations_per_loop=iterations_per_loop if use_tpu else 1,
      num_shards=num_tpu_cores,
      per_host_input_for_training=(
          tf.estimator.tpu.InputPipelineConfig.PER_HOST_V2))
  return tf.estimator.tpu.RunConfig(
      cluster=cluster,
      master=master,
      model_dir=output_dir,
      save_checkpoints_steps=save_checkpoints_steps,
      keep_checkpoint_max=keep_checkpoint_max,
      tf_random_seed=tf_random_seed,
      tpu_config=tpu_config)


def run_config_from_options(run, output_dir):
  """The `RunConfig` of a run's options (`options.RunOptions`).

  `make_run_config` from the TPU and checkpoint options; with a
  `distribution_strategy` other than none, a `tf.estimator.RunConfig` whose
  `train_distribute` is the strategy instead (`distribute_utils.
  make_strategy`; evaluation and prediction then run on one device). Then
  `training_options.configure_run_config` applies `use_xla` and
  `deterministic` (the session config and the seed).

  Args:
    run: `options.RunOptions`.
    output_dir: str or None (a temporary directory), the model directory.
  """
  tpu, seed = run.tpu, run.distribute.random_seed
  strategy = distribute_utils.make_strategy(run.distribute, tpu.use_tpu)
  if strategy is not None:
    # Runs a plain Estimator (`make_estimator`); TF_CONFIG is read here.
    config = tf.estimator.RunConfig(
        model_dir=output_dir,
        save_checkpoints_steps=run.save_checkpoints_steps,
        keep_checkpoint_max=5, tf_random_seed=seed,
        train_distribute=strategy,
        session_config=distribute_utils.session_config(
            run.distribute.num_cpu_devices))
  else:
    config = make_run_config(
        output_dir, save_checkpoints_steps=run.save_checkpoints_steps,
        iterations_per_loop=run.iterations_per_loop, use_tpu=tpu.use_tpu,
        tpu_name=tpu.tpu_name, tpu_zone=tpu.tpu_zone,
        gcp_project=tpu.gcp_project, master=tpu.master,
        num_tpu_cores=tpu.num_tpu_cores, tf_random_seed=seed)
  return training_options.configure_run_config(config, run.training)


def make_estimator(model_fn, run_config, use_tpu, train_batch_size=None,
                   eval_batch_size=None, predict_batch_size=None,
                   worker_timeout_secs=300):
  """Wraps `model_fn` in a `TPUEstimator` (CPU/GPU when `use_tpu` is False).

  When `run_config.train_distribute` holds a strategy, a
  `distribute_utils.DistributedEstimator` instead (same model_fn and
  input_fns, global batch sizes; `worker_timeout_secs` for multi-worker).

  Raises:
    ValueError: under a strategy, a `train_batch_size` that is not a
      multiple of the replica count.
  """
  if getattr(run_config, "train_distribute", None) is not None:
    return distribute_utils.make_distributed_estimator(
        model_fn, run_config, train_batch_size=train_batch_size,
        eval_batch_size=eval_batch_size,
        predict_batch_size=predict_batch_size,
        worker_timeout_secs=worker_timeout_secs)
  return tf.estimator.tpu.TPUEstimator(
      use_tpu=use_tpu,
      model_fn=model_fn,
      config=run_config,
      train_batch_size=train_batch_size,
      eval_batch_size=eval_batch_size,
      predict_batch_size=predict_batch_size)


def estimator_from_options(model_fn, run, output_dir, eval_batch_size=None,
                           predict_batch_size=None):
  """`make_estimator` under `run_config_from_options(run, output_dir)`.

  Args:
    model_fn: the script's `model_fn`.
    run: `options.RunOptions`: the TPU, the global training batch, the
      strategy and its worker timeout, the training options.
    output_dir: str or None, the model directory.
    eval_batch_size, predict_batch_size: int or None, global batch sizes.
  """
  return make_estimator(
      model_fn, run_config_from_options(run, output_dir), run.tpu.use_tpu,
      train_batch_size=run.train_batch_size, eval_batch_size=eval_batch_size,
      predict_batch_size=predict_batch_size,
      worker_timeout_secs=run.distribute.worker_timeout_secs)


def init_from_checkpoint(init_checkpoint, use_tpu):
  """Initializes the graph's trainable variables from `init_checkpoint`.

  Call inside a `model_fn`, after the model is built. Variables whose names
  (and shapes) appear in the checkpoint are mapped through
  `modeling.get_assignment_map_from_checkpoint`; every trainable variable is
  logged with its shape, the initialized ones marked `*INIT_FROM_CKPT*`, as
  the reference does.

  Args:
    init_checkpoint: str or None, a checkpoint prefix (`.../bert_model.ckpt`).
    use_tpu: bool; on TPU the initialization runs inside a `Scaffold`.

  Returns:
    A `scaffold_fn` for `TPUEstimatorSpec` on TPU, else None.
  """
  tvars = tf.trainable_variables()
  initialized = {}
  scaffold_fn = None
  if init_checkpoint:
    assignment_map, initialized = modeling.get_assignment_map_from_checkpoint(
        tvars, init_checkpoint)
    if not assignment_map:
      raise ValueError(
          "--init_checkpoint: none of the model's %d variables is in %s; "
          "expected a BERT checkpoint (variables named bert/...)" %
          (len(tvars), init_checkpoint))
    if use_tpu:

      def tpu_scaffold():
        tf.train.init_from_checkpoint(init_checkpoint, assignment_map)
        return tf.train.Scaffold()

      scaffold_fn = tpu_scaffold
    else:
      tf.train.init_from_checkpoint(init_checkpoint, assignment_map)
  logging.info("**** Trainable Variables ****")
  for var in tvars:
    note = ", *INIT_FROM_CKPT*" if var.name in initialized else ""
    logging.info("  name = %s, shape = %s%s", var.name, var.shape, note)
  if init_checkpoint:
    logging.info("%d of %d trainable variables initialized from %s",
                 sum(1 for v in tvars if v.name in initialized), len(tvars),
                 init_checkpoint)
  return scaffold_fn


def weighted_mean_loss(values, weights):
  """sum(weights * values) / (sum(weights) + 1e-5), over the global batch.

  On one device (or TPU, per core) this is the plain weighted mean of the
  batch. In the replica context of a `tf.distribute` strategy, each replica
  sees only its share of the batch, and the optimizer averages the replicas'
  gradients (`optimization.create_optimizer`): a per-replica weighted mean
  would weigh every replica's share alike, whatever its total weight (with
  token weights: its number of labelled tokens). So the denominator is the
  sum of the weights over all replicas (one scalar all-reduce, no gradient)
  and the numerator is scaled by the number of replicas: the mean of the
  replicas' losses and gradients is that of the global batch's weighted
  mean, as on one device.

  Args:
    values: float32 Tensor, e.g. per-token losses [batch_size, seq_length].
    weights: float32 Tensor of the same shape (0 leaves a value out).

  Returns:
    A float32 scalar Tensor; 0 when every weight is 0.
  """
  numerator = tf.reduce_sum(values * weights)
  denominator = tf.reduce_sum(weights)
  if (tf.distribute.has_strategy() and
      not tf.distribute.in_cross_replica_context()):
    context = tf.distribute.get_replica_context()
    total = context.merge_call(
        lambda strategy, value: strategy.reduce(
            tf.distribute.ReduceOp.SUM, value, axis=None),
        args=(tf.stop_gradient(denominator),))
    return numerator * float(context.num_replicas_in_sync) / (total + 1e-5)
  return numerator / (denominator + 1e-5)


def train_spec(total_loss, learning_rate, num_train_steps, num_warmup_steps,
               use_tpu, scaffold_fn=None, options=None):
  """The `TPUEstimatorSpec` of a training step, as every script builds it.

  Args:
    total_loss: float32 scalar Tensor to minimize.
    learning_rate: float, peak learning rate.
    num_train_steps: int, steps (updates) of the learning-rate decay.
    num_warmup_steps: int, steps (updates) of linear warmup.
    use_tpu: bool; on TPU gradients are averaged across shards.
    scaffold_fn: from `init_from_checkpoint`, or None.
    options: (optional) `optimization.OptimizerOptions` (optimizer,
      accumulation, fp16 loss scaling); default the reference's training.

  Returns:
    A `tf.estimator.tpu.TPUEstimatorSpec` in TRAIN mode whose train op
    applies `optimization.create_optimizer` (and increments the global step).
    With fp16 loss scaling off TPU, a hook logs the loss scale and the
    skipped updates every 100 steps.
  """
  train_op = optimization.create_optimizer(
      total_loss, learning_rate, num_train_steps, num_warmup_steps, use_tpu,
      options=options)
  hooks = []
  if options is not None and options.loss_scaling and not use_tpu:
    hooks.append(tf.estimator.LoggingTensorHook(
        {"loss_scale": tf.get_collection(optimization.LOSS_SCALE_COLLECTION)[0],
         "skipped_updates": tf.get_collection(
             optimization.SKIPPED_UPDATES_COLLECTION)[0]},
        every_n_iter=100))
  return tf.estimator.tpu.TPUEstimatorSpec(
      mode=tf.estimator.ModeKeys.TRAIN, loss=total_loss, train_op=train_op,
      scaffold_fn=scaffold_fn, training_hooks=hooks or None)


class ProgressHook(tf.estimator.SessionRunHook):
  """Logs the global step, examples/sec and the estimated time left.

  A line at the first step of a run (a fresh start or a resume), every
  `every_n_steps` steps or `every_n_secs` seconds, whichever comes first,
  and at `total_steps`. In prediction, where the global step does not
  advance, it counts batches.

  Args:
    batch_size: int, examples per step.
    total_steps: int or None, the step at which the run ends (for the ETA).
    every_n_steps: int, how often to log, in steps.
    every_n_secs: float, how often to log at least, in seconds.
  """

  def __init__(self, batch_size, total_steps=None, every_n_steps=100,
               every_n_secs=60.0):
    self._batch_size = batch_size
    self._total_steps = total_steps
    self._every_n_steps = max(1, int(every_n_steps))
    self._every_n_secs = every_n_secs
    self._global_step = None
    self._last_time = None
    self._last_step = None
    self._calls = 0
    self._unit = None  # "step" (training) or "batch" (prediction).
    self._first = None  # (global step before the first call, its time).

  def begin(self):
    self._global_step = tf.train.get_global_step()

  def before_run(self, run_context):
    del run_context
    if self._global_step is None:
      return None
    return tf.train.SessionRunArgs(self._global_step)

  def _first_line(self, step):
    logging.info("%s %d: first %s of this run%s", self._unit, step,
                 self._unit,
                 " (resumed)" if self._unit == "step" and step > 1 else "")

  def after_run(self, run_context, run_values):
    del run_context
    self._calls += 1
    now = time.time()
    raw = run_values.results if self._global_step is not None else None
    if self._unit is None:
      # Training advances the global step; prediction does not (then the
      # hook counts batches). Which one shows at the second call (or at the
      # end, for a run of one call).
      if raw is None:
        self._unit = "batch"
        self._first_line(1)
        self._last_time, self._last_step = now, 1
        return
      if self._first is None:
        self._first = (raw, now)
        return
      self._unit = "step" if raw != self._first[0] else "batch"
      first_step = self._first[0] + 1 if self._unit == "step" else 1
      self._first_line(first_step)
      self._last_time, self._last_step = self._first[1], first_step
    # The global step read with the train op is the value before it.
    step = raw + 1 if self._unit == "step" else self._calls
    final = self._total_steps is not None and step >= self._total_steps
    if (step - self._last_step < self._every_n_steps and not final
        and now - self._last_time < self._every_n_secs):
      return
    if step == self._last_step:
      return
    elapsed = max(now - self._last_time, 1e-9)
    steps_per_sec = (step - self._last_step) / elapsed
    message = "%s %d: %.2f examples/sec" % (
        self._unit, step, steps_per_sec * self._batch_size)
    if self._total_steps and steps_per_sec > 0:
      left = max(self._total_steps - step, 0) / steps_per_sec
      message += ", ETA %s" % _format_seconds(left)
    logging.info(message)
    self._last_time, self._last_step = now, step

  def end(self, session):
    if self._unit is None and self._first is not None:
      if session.run(self._global_step) != self._first[0]:
        self._unit = "step"
        self._first_line(self._first[0] + 1)


def _format_seconds(seconds):
  seconds = int(round(seconds))
  hours, rest = divmod(seconds, 3600)
  minutes, secs = divmod(rest, 60)
  return "%d:%02d:%02d" % (hours, minutes, secs)


# ----------------------------------------------------------------------------
# Records
# ----------------------------------------------------------------------------


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
                              shuffle_buffer=100):
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
      d = d.shuffle(buffer_size=shuffle_buffer, seed=seed)
    else:
      d = tf.data.TFRecordDataset(input_files)
    d = d.map(lambda record: decode_record(record, name_to_features),
              num_parallel_calls=num_cpu_threads if is_training else None)
    d = d.batch(batch_size, drop_remainder=drop_remainder)
    return d.prefetch(1)

  return input_fn
