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

`--dynamic_masking` reads the unmasked records of
`create_pretraining_data.py --dynamic_masking` and masks them as they are
read, anew each epoch (`masking.Masker`); `--next_sentence=false` trains
the masked LM alone (no next-sentence head, loss or metrics).

Records of `create_pretraining_data.py --pack_sequences` (several
instances a row) are found by their features and read as rows: the
next-sentence loss is the mean over each row's real instances, the
masked-LM loss the mean over the masked words as without packing, and
`--train_batch_size` counts instances, max(1, round(train_batch_size /
instances a row)) rows a batch (`inputs.packed_rows`); the eval batch
counts rows. Steps still count updates: `--num_train_steps` and
`--num_warmup_steps` keep their meaning.
"""

from bert_tf.cli import quiet  # First: TensorFlow's start-up lines off.
quiet.when_run_as_command(__name__)

from absl import flags

from bert_tf.cli import flags as cli_flags
from bert_tf.cli import flags_first


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
      "iterations_per_loop", "dynamic_masking", "next_sentence",
      "vocab_file", "masked_lm_prob", "do_whole_word_mask",
      "do_chinese_whole_word_mask", cli_flags.TRAINING_FLAGS,
      cli_flags.TPU_FLAGS, cli_flags.DISTRIBUTE_FLAGS)
  flags.DEFINE_integer("max_eval_steps", 100,
                       "Evaluate on at most this many batches.")


# Run as a command: --help and flag errors answer here, before the
# imports below load TensorFlow.
flags_first.parse_when_run_as_command(__name__, define_flags)

from absl import logging
import tensorflow.compat.v1 as tf

from bert_tf import io as io_utils
from bert_tf.cli import entry
from bert_tf.cli import startup
from bert_tf.runner import loop
# The reference's public names of this module live in the package.
from bert_tf.tasks.pretraining.heads import gather_indexes
from bert_tf.tasks.pretraining.heads import get_masked_lm_output
from bert_tf.tasks.pretraining.heads import get_next_sentence_output
from bert_tf.tasks.pretraining.heads import pretraining_head
from bert_tf.tasks.pretraining.inputs import check_record_lengths
from bert_tf.tasks.pretraining.inputs import input_fn_builder
from bert_tf.tasks.pretraining.inputs import packed_rows
from bert_tf.tasks.pretraining import masking
from bert_tf.train import accumulation
from bert_tf.train import model_fn as model_fn_utils
from bert_tf.train import packing


def model_fn_builder(bert_config, init_checkpoint, learning_rate,
                     num_train_steps, num_warmup_steps, use_tpu,
                     use_one_hot_embeddings, options=None,
                     compute_dtype=tf.float32, next_sentence=True,
                     dropout_seed=None):
  """Returns the `model_fn` for `TPUEstimator` (TRAIN and EVAL modes).

  The encoder and `heads.pretraining_head`: the masked LM and the next
  sentence, trained on the sum of their losses (the masked LM alone when
  `next_sentence` is False).

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
    next_sentence: bool, train the next-sentence head too.
    dropout_seed: (optional) int, stateless dropout (--deterministic).
  """
  return model_fn_utils.build_model_fn(
      pretraining_head(bert_config, next_sentence), bert_config,
      init_checkpoint, use_tpu, use_one_hot_embeddings,
      schedule=model_fn_utils.TrainingSchedule(
          learning_rate, num_train_steps, num_warmup_steps, options,
          dropout_seed),
      compute_dtype=compute_dtype)


def check_inputs(bert_config_file, input_file, output_dir, init_checkpoint,
                 max_seq_length, max_predictions_per_seq, do_train, do_eval,
                 num_train_steps=1, *, problems, run=None, use_tpu=False,
                 **layout):
  """Checks the flags and the input records before any graph is built.

  Every problem found is added to `problems` (`checks.problems.Problems`),
  which the caller reports together with its other start-up checks; `run`
  (its `RunOptions`, optional) lets the memory check count training's
  optimizer slots; `use_tpu` refuses `--dynamic_masking` (Python in the input
  pipeline); `layout` the records' kind (`dynamic_masking`,
  `next_sentence`, `word_marks`).

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
  if layout.get("dynamic_masking") and use_tpu:
    problems.add("--dynamic_masking masks in Python inside the input "
                 "pipeline, which a TPU host cannot run: for --use_tpu, write "
                 "masked records (create_pretraining_data.py without "
                 "--dynamic_masking)")
  if input_files is not None:
    problems.attempt(
        lambda: check_record_lengths(input_files, max_seq_length,
                                     max_predictions_per_seq, **layout))
  model = startup.prepare_model(
      bert_config_file, max_seq_length, init_checkpoint, do_lower_case=None,
      output_dir=output_dir, problems=problems, run=run)
  return model.bert_config, input_files, model.init_checkpoint


def _layout():
  """The records' kind the flags ask for (`check_record_lengths`)."""
  return dict(dynamic_masking=FLAGS.dynamic_masking,
              next_sentence=FLAGS.next_sentence,
              word_marks=FLAGS.dynamic_masking and
              FLAGS.do_chinese_whole_word_mask)


def _prepare(problems, run):
  """`check_inputs` on the flags, and --dynamic_masking's vocabulary."""
  if FLAGS.dynamic_masking:
    problems.attempt(startup.load_tokenizer, FLAGS.vocab_file, True)
    if not 0.0 < FLAGS.masked_lm_prob <= 1.0:
      problems.add("--masked_lm_prob is %r; expected a probability in (0, 1]"
                   % FLAGS.masked_lm_prob)
  return check_inputs(
      FLAGS.bert_config_file, FLAGS.input_file, FLAGS.output_dir,
      FLAGS.init_checkpoint, FLAGS.max_seq_length,
      FLAGS.max_predictions_per_seq, FLAGS.do_train, FLAGS.do_eval,
      FLAGS.num_train_steps, problems=problems, run=run,
      use_tpu=run is not None and run.tpu.use_tpu, **_layout())


def _masker():
  """The `masking.Masker` of --dynamic_masking, else None."""
  if not FLAGS.dynamic_masking:
    return None
  return masking.Masker(
      startup.load_tokenizer(FLAGS.vocab_file, do_lower_case=True),
      FLAGS.max_predictions_per_seq, FLAGS.masked_lm_prob,
      FLAGS.do_whole_word_mask, FLAGS.do_chinese_whole_word_mask)


def main(_):
  # 1. The run's options; config, checkpoint and input records: all checked
  # before any work, then the devices (before TensorFlow makes any).
  run, (bert_config, input_files, init_checkpoint) = startup.start(
      FLAGS, prepare=_prepare)
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
      compute_dtype=run.training.compute_dtype,
      next_sentence=FLAGS.next_sentence,
      dropout_seed=run.training.dropout_seed)
  masker = _masker()
  packed = packed_rows(input_files)
  max_per_row = packed and packed.max_per_row
  train_input_fn = input_fn_builder(
      input_files, FLAGS.max_seq_length, FLAGS.max_predictions_per_seq,
      is_training=True, masker=masker, next_sentence=FLAGS.next_sentence,
      max_per_row=max_per_row)
  if packed:  # The batch counts instances, on average.
    logging.info("Packed records: %.2f instances a row (of %d)",
                 packed.instances_per_row, packed.max_per_row)
    train_input_fn = packing.scale_batch_size(train_input_fn,
                                              packed.instances_per_row)

  # 3. Train (the masked-LM loss a mean over each update's tokens; of
  # packed rows, the next sentence's over its real slots), evaluate:
  # eval_results.txt.
  token_weights = lambda batch: batch["masked_lm_weights"]
  if packed:
    token_weights = lambda batch: {
        accumulation.UPDATE_SHARE_KEY: batch["masked_lm_weights"],
        accumulation.SLOT_SHARE_KEY: batch["is_real_example"]}
  training = loop.Training(
      input_fn=train_input_fn,
      num_train_steps=FLAGS.num_train_steps,
      num_warmup_steps=FLAGS.num_warmup_steps,
      learning_rate=FLAGS.learning_rate, records=input_files,
      token_weights=token_weights,
      progress_every=min(100, run.iterations_per_loop))

  def evaluate(steps):
    logging.info("  Batch size = %d, at most %d steps", FLAGS.eval_batch_size,
                 FLAGS.max_eval_steps)
    return steps.evaluate(
        input_fn_builder(input_files, FLAGS.max_seq_length,
                         FLAGS.max_predictions_per_seq, is_training=False,
                         use_tpu=use_tpu, masker=masker,
                         next_sentence=FLAGS.next_sentence,
                         max_per_row=max_per_row),
        records=input_files, steps=FLAGS.max_eval_steps)

  with loop.output_dir(FLAGS.output_dir, run, FLAGS.init_checkpoint):
    loop.run(model_fn, run, FLAGS.output_dir, training=training,
             evaluate=evaluate, eval_batch_size=FLAGS.eval_batch_size)

def cli():
  """Command-line entry point: `main`, with the flags defined here or, run
  as a command, above."""
  entry.run_main(main, define_flags)

if __name__ == "__main__":
  cli()
