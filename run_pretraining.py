"""Pre-trains BERT on masked LM and next sentence prediction.

Reads the TFRecords written by `create_pretraining_data.py`, trains the
encoder with both pre-training heads (Devlin et al. 2018, section 3.1 and
appendix A.1/A.2) through the runner `--runner` selects (a `TPUEstimator`
on TensorFlow 2.15: CPU, GPU or TPU; this project's session runner on any
TensorFlow: CPU or GPU), and with `--do_eval` writes
`output_dir/eval_results.txt`.

Example:

  python run_pretraining.py \
    --input_file=/tmp/tf_examples.tfrecord --output_dir=/tmp/pretraining \
    --do_train=True --do_eval=True \
    --bert_config_file=$BERT_BASE_DIR/bert_config.json \
    --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt \
    --train_batch_size=32 --max_seq_length=128 --max_predictions_per_seq=20 \
    --num_train_steps=20 --num_warmup_steps=10 --learning_rate=2e-5

A run restarted with the same `--output_dir` continues from the last
checkpoint there (`--init_checkpoint` only initializes a fresh run).
"""

from bert_tf.cli import quiet  # First: TensorFlow's start-up lines off.
quiet.when_run_as_command(__name__)

from absl import flags
from absl import logging
import tensorflow.compat.v1 as tf

from bert_tf import io as io_utils
from bert_tf.checks.problems import Problems
from bert_tf.cli import flags as cli_flags
from bert_tf.cli import entry
from bert_tf.cli import startup
from bert_tf.runner import loop
from bert_tf.tasks.pretraining.heads import gather_indexes
from bert_tf.tasks.pretraining.heads import get_masked_lm_output
from bert_tf.train import accumulation
from bert_tf.train import input_fn as input_utils
from bert_tf.train import model_fn as model_fn_utils
from bert_tf.train import options as training_options
from bert_tf.train import spec as spec_lib
import modeling

__all__ = ["define_flags", "gather_indexes", "get_masked_lm_output",
           "get_next_sentence_output", "model_fn_builder", "input_fn_builder",
           "check_record_lengths", "check_inputs", "main", "cli"]

FLAGS = flags.FLAGS

def define_flags():
  """Defines the script's flags (the reference's names and defaults)."""
  flags.DEFINE_string(
      "input_file", None,
      "TFRecord files that create_pretraining_data.py wrote: comma-separated "
      "names or globs.")
  cli_flags.define_flags(
      "bert_config_file", "output_dir", "init_checkpoint", "max_seq_length",
      "max_predictions_per_seq", "do_train", "do_eval", "train_batch_size",
      "eval_batch_size", "learning_rate", "num_train_steps",
      "num_warmup_steps", "save_checkpoints_steps", "save_checkpoints_secs",
      "iterations_per_loop", cli_flags.TRAINING_FLAGS, cli_flags.TPU_FLAGS,
      cli_flags.DISTRIBUTE_FLAGS)
  flags.DEFINE_integer("max_eval_steps", 100,
                       "Evaluate on at most this many batches.")

# ----------------------------------------------------------------------------
# Heads
# ----------------------------------------------------------------------------

def get_next_sentence_output(bert_config, input_tensor, labels):
  """Next sentence head: is segment B the real continuation (0) or random (1)?

  Variables `cls/seq_relationship/output_weights` [2, hidden_size] and
  `cls/seq_relationship/output_bias` [2].

  Args:
    bert_config: `modeling.BertConfig`.
    input_tensor: float Tensor of shape [batch_size, hidden_size], the
      pooled output.
    labels: int32 Tensor of shape [batch_size] or [batch_size, 1].

  Returns:
    (loss, per_example_loss, log_probs): float32 scalar mean loss, float32
    Tensor [batch_size], float32 Tensor [batch_size, 2].
  """
  with tf.variable_scope("cls/seq_relationship"):
    output_weights = tf.get_variable(
        "output_weights", shape=[2, bert_config.hidden_size],
        initializer=modeling.create_initializer(bert_config.initializer_range))
    output_bias = tf.get_variable(
        "output_bias", shape=[2], initializer=tf.zeros_initializer())
    logits = tf.matmul(input_tensor, output_weights, transpose_b=True)
    logits = tf.nn.bias_add(logits, output_bias)  # [B, 2]
    log_probs = tf.nn.log_softmax(logits, axis=-1)
    labels = tf.reshape(labels, [-1])
    one_hot_labels = tf.one_hot(labels, depth=2, dtype=tf.float32)
    per_example_loss = -tf.reduce_sum(one_hot_labels * log_probs, axis=-1)
    loss = tf.reduce_mean(per_example_loss)
  return loss, per_example_loss, log_probs

# ----------------------------------------------------------------------------
# The model_fn and input_fn
# ----------------------------------------------------------------------------

def _metric_fn(masked_lm_example_loss, masked_lm_log_probs, masked_lm_ids,
               masked_lm_weights, next_sentence_example_loss,
               next_sentence_log_probs, next_sentence_labels):
  """Eval metrics: weighted masked LM accuracy/loss, next sentence ones."""
  masked_lm_predictions = tf.argmax(masked_lm_log_probs, axis=-1,
                                    output_type=tf.int32)
  masked_lm_ids = tf.reshape(masked_lm_ids, [-1])
  masked_lm_weights = tf.reshape(masked_lm_weights, [-1])
  next_sentence_predictions = tf.argmax(next_sentence_log_probs, axis=-1,
                                        output_type=tf.int32)
  next_sentence_labels = tf.reshape(next_sentence_labels, [-1])
  return {
      "masked_lm_accuracy": tf.metrics.accuracy(
          labels=masked_lm_ids, predictions=masked_lm_predictions,
          weights=masked_lm_weights),
      "masked_lm_loss": tf.metrics.mean(
          values=tf.reshape(masked_lm_example_loss, [-1]),
          weights=masked_lm_weights),
      "next_sentence_accuracy": tf.metrics.accuracy(
          labels=next_sentence_labels, predictions=next_sentence_predictions),
      "next_sentence_loss": tf.metrics.mean(values=next_sentence_example_loss),
  }

def model_fn_builder(bert_config, init_checkpoint, learning_rate,
                     num_train_steps, num_warmup_steps, use_tpu,
                     use_one_hot_embeddings, options=None,
                     compute_dtype=tf.float32):
  """Returns the `model_fn` for `TPUEstimator` (TRAIN and EVAL modes).

  Args:
    bert_config: `modeling.BertConfig`.
    init_checkpoint: str or None, checkpoint to initialize a fresh run from.
    learning_rate: float, peak learning rate.
    num_train_steps: int, total training steps (learning rate reaches 0).
    num_warmup_steps: int, linear warmup steps.
    use_tpu: bool.
    use_one_hot_embeddings: bool, one-hot word embedding lookup (TPU).
    options: (optional) `optimization.OptimizerOptions`: the optimizer;
      default the reference's.
    compute_dtype: the encoder's arithmetic (weights stay float32).
  """

  def model_fn(features, labels, mode, params):
    """Builds the encoder, both heads and the train op or eval metrics."""
    del labels, params  # Labels come in `features`; batch size unused here.
    logging.info("*** Features ***")
    for name in sorted(features):
      logging.info("  name = %s, shape = %s", name, features[name].shape)

    is_training = mode == spec_lib.ModeKeys.TRAIN
    model = modeling.BertModel(
        config=bert_config,
        is_training=is_training,
        input_ids=features["input_ids"],
        input_mask=features["input_mask"],
        token_type_ids=features["segment_ids"],
        use_one_hot_embeddings=use_one_hot_embeddings,
        compute_dtype=compute_dtype,
        cast_weights_once=model_fn_utils.cast_weights_once(
            mode, use_tpu))
    masked_lm_loss, masked_lm_example_loss, masked_lm_log_probs = (
        get_masked_lm_output(
            bert_config, model.get_sequence_output(),
            model.get_embedding_table(), features["masked_lm_positions"],
            features["masked_lm_ids"], features["masked_lm_weights"],
            update_share=accumulation.update_share(features, options, mode,
                                                   use_tpu)))
    next_sentence_loss, next_sentence_example_loss, next_sentence_log_probs = (
        get_next_sentence_output(bert_config, model.get_pooled_output(),
                                 features["next_sentence_labels"]))
    total_loss = masked_lm_loss + next_sentence_loss

    scaffold_fn = model_fn_utils.init_from_checkpoint(init_checkpoint,
                                                       use_tpu)
    if mode == spec_lib.ModeKeys.TRAIN:
      return model_fn_utils.train_spec(
          total_loss, learning_rate, num_train_steps, num_warmup_steps,
          use_tpu, scaffold_fn, options=options)
    if mode == spec_lib.ModeKeys.EVAL:
      eval_metrics = (_metric_fn, [
          masked_lm_example_loss, masked_lm_log_probs,
          features["masked_lm_ids"], features["masked_lm_weights"],
          next_sentence_example_loss, next_sentence_log_probs,
          features["next_sentence_labels"]
      ])
      return spec_lib.model_spec(
          mode=mode, loss=total_loss, eval_metrics=eval_metrics,
          scaffold_fn=scaffold_fn)
    raise ValueError("run_pretraining supports TRAIN and EVAL modes, got %s" %
                     mode)

  return model_fn

def _name_to_features(max_seq_length, max_predictions_per_seq):
  """The record layout written by create_pretraining_data.py."""
  return {
      "input_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
      "input_mask": tf.io.FixedLenFeature([max_seq_length], tf.int64),
      "segment_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
      "masked_lm_positions":
          tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
      "masked_lm_ids":
          tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
      "masked_lm_weights":
          tf.io.FixedLenFeature([max_predictions_per_seq], tf.float32),
      "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
  }

def input_fn_builder(input_files, max_seq_length, max_predictions_per_seq,
                     is_training, num_cpu_threads=4, use_tpu=False):
  """Returns an `input_fn(params)` over pre-training TFRecords.

  Training reads the files in parallel, shuffled, repeated forever, in
  batches of a fixed size. Evaluation reads them in order: on TPU repeated
  in fixed-size batches as in the reference (a TPU evaluation runs a fixed
  number of steps); on CPU/GPU once, keeping the last partial batch, so each
  example counts once (up to --max_eval_steps batches). int64 features become
  int32.

  Args:
    input_files: list of str, TFRecord paths.
    max_seq_length: int, length of `input_ids`, `input_mask`, `segment_ids`.
    max_predictions_per_seq: int, length of the `masked_lm_*` features.
    is_training: bool.
    num_cpu_threads: int, parallel readers and parsers when training.
    use_tpu: bool, whether the model runs on TPU (an addition to the
      reference's signature; only evaluation depends on it).
  """
  fixed_batches = is_training or use_tpu
  base_input_fn = input_utils.tfrecord_input_fn_builder(
      input_files, _name_to_features(max_seq_length, max_predictions_per_seq),
      is_training=is_training, drop_remainder=fixed_batches,
      num_cpu_threads=num_cpu_threads)

  def input_fn(params, config=None, input_context=None):
    dataset = base_input_fn(params, config, input_context)
    if not is_training and use_tpu:
      dataset = dataset.repeat()
    return dataset

  return input_fn

# ----------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------

def check_record_lengths(input_files, max_seq_length, max_predictions_per_seq):
  """Checks the first record of every file against the expected lengths.

  Cheap (one record per file) and catches data made with another
  --max_seq_length or --max_predictions_per_seq before training starts.

  Raises:
    ValueError: naming the file, the feature, its length and the expected
      length; or when a file is not a TFRecord of Examples.
  """
  expected = {
      "input_ids": (max_seq_length, "max_seq_length"),
      "input_mask": (max_seq_length, "max_seq_length"),
      "segment_ids": (max_seq_length, "max_seq_length"),
      "masked_lm_positions": (max_predictions_per_seq,
                              "max_predictions_per_seq"),
      "masked_lm_ids": (max_predictions_per_seq, "max_predictions_per_seq"),
      "masked_lm_weights": (max_predictions_per_seq,
                            "max_predictions_per_seq"),
      "next_sentence_labels": (1, None),
  }
  empty = []
  for path in input_files:
    example = _first_example(path)
    if example is None:
      logging.warning("Input file %s holds no records", path)
      empty.append(path)
      continue
    for name, (length, flag_name) in expected.items():
      if name not in example.features.feature:
        raise ValueError("%s: record 0 has no feature %r; expected the output "
                         "of create_pretraining_data.py" % (path, name))
      feature = example.features.feature[name]
      values = feature.float_list.value or feature.int64_list.value
      if len(values) != length:
        where = ("--%s=%d" % (flag_name, length) if flag_name
                 else "%d" % length)
        raise ValueError(
            "%s: record 0 has %s of length %d, but %s; create the data with "
            "the same value or change the flag" %
            (path, name, len(values), where))
  if len(empty) == len(input_files):
    # Training would loop forever over an empty dataset.
    raise ValueError("--input_file: %s hold%s no records; expected the "
                     "output of create_pretraining_data.py" %
                     (", ".join(empty), "s" if len(empty) == 1 else ""))

def _first_example(path):
  """The first `tf.train.Example` of a TFRecord file, or None when empty."""
  try:
    for record in tf.io.tf_record_iterator(path):
      return tf.train.Example.FromString(record)
  except (tf.errors.DataLossError, ValueError) as e:
    raise ValueError("%s is not a TFRecord file of tf.train.Examples (%s)" %
                     (path, " ".join(str(e).split()))) from None
  return None

def check_inputs(bert_config_file, input_file, output_dir, init_checkpoint,
                 max_seq_length, max_predictions_per_seq, do_train, do_eval,
                 num_train_steps=1, *, problems, run=None):
  """Checks the flags and the input records before any graph is built.

  Every problem found is added to `problems` (`checks.problems.Problems`),
  which the caller reports together with its other start-up checks; `run`
  (its `RunOptions`, optional) lets the memory check count training's
  optimizer slots.

  Returns:
    (bert_config, input_files, init_checkpoint): the `BertConfig`, the
    expanded input paths and the resolved checkpoint prefix (or None);
    None where that check failed.
  """
  if not do_train and not do_eval:
    problems.add("At least one of --do_train or --do_eval must be True")
  if do_train and num_train_steps < 1:
    problems.add("--num_train_steps=%d: expected at least 1 with --do_train"
                 % num_train_steps)
  input_files = problems.attempt(io_utils.expand_file_patterns, input_file,
                                 "input_file")
  if input_files is not None:
    problems.attempt(check_record_lengths, input_files, max_seq_length,
                     max_predictions_per_seq)
  model = startup.prepare_model(
      bert_config_file, max_seq_length, init_checkpoint, do_lower_case=None,
      output_dir=output_dir, problems=problems, run=run)
  return model.bert_config, input_files, model.init_checkpoint

def main(_):
  logging.set_verbosity(logging.INFO)
  # 1. The run's options; config, checkpoint and input records: all checked
  # before any work, then the devices (before TensorFlow makes any).
  problems = Problems()
  run = training_options.from_flags(FLAGS, problems)
  bert_config, input_files, init_checkpoint = check_inputs(
      FLAGS.bert_config_file, FLAGS.input_file, FLAGS.output_dir,
      FLAGS.init_checkpoint, FLAGS.max_seq_length,
      FLAGS.max_predictions_per_seq, FLAGS.do_train, FLAGS.do_eval,
      FLAGS.num_train_steps, problems=problems, run=run)
  problems.raise_if_any()
  loop.setup_devices(run)
  use_tpu = run.tpu.use_tpu
  logging.info("*** Input files (%d) ***", len(input_files))
  for path in input_files:
    logging.info("  %s", path)

  # 2. The model. Steps count updates.
  model_fn = model_fn_builder(
      bert_config=bert_config,
      init_checkpoint=init_checkpoint,
      learning_rate=FLAGS.learning_rate,
      num_train_steps=FLAGS.num_train_steps,
      num_warmup_steps=FLAGS.num_warmup_steps,
      use_tpu=use_tpu,
      use_one_hot_embeddings=use_tpu,
      options=run.training.optimizer_options,
      compute_dtype=run.training.compute_dtype)

  # 3. Train (the masked-LM loss a mean over each update's tokens),
  # evaluate: eval_results.txt.
  training = loop.Training(
      input_fn=input_fn_builder(input_files, FLAGS.max_seq_length,
                                FLAGS.max_predictions_per_seq,
                                is_training=True),
      num_train_steps=FLAGS.num_train_steps,
      num_warmup_steps=FLAGS.num_warmup_steps,
      learning_rate=FLAGS.learning_rate, records=input_files,
      token_weights=lambda batch: batch["masked_lm_weights"],
      progress_every=min(100, run.iterations_per_loop))

  def evaluate(steps):
    logging.info("  Batch size = %d, at most %d steps", FLAGS.eval_batch_size,
                 FLAGS.max_eval_steps)
    return steps.evaluate(
        input_fn_builder(input_files, FLAGS.max_seq_length,
                         FLAGS.max_predictions_per_seq, is_training=False,
                         use_tpu=use_tpu),
        records=input_files, steps=FLAGS.max_eval_steps)

  with loop.output_dir(FLAGS.output_dir, run):
    loop.run(model_fn, run, FLAGS.output_dir, training=training,
             evaluate=evaluate, eval_batch_size=FLAGS.eval_batch_size)

def cli():
  """Command-line entry point: defines the flags, then runs `main`."""
  define_flags()
  entry.run_main(main)

if __name__ == "__main__":
  cli()
