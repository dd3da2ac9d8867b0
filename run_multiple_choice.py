"""Fine-tunes BERT on multiple choice: SWAG, or any N-ending task alike.

The BERT paper's SWAG setup (Devlin et al. 2018, section 4.4; the reference
release has no code for it): each of a question's endings makes one
`[CLS] context [SEP] start + ending [SEP]` input, one learned vector scores
each input's pooled `[CLS]` output, and softmax cross-entropy over the
scores picks the right ending. The task (`bert_tf/tasks/multiple_choice/`)
reads `train`, `val` and `test` files from `--data_dir` (SWAG's CSV, or
Hugging Face's JSON lines; `--train_file`, `--dev_file`, `--test_file` name
others), with any number of endings from 2 up.

Outputs in `--output_dir`: `eval_results.txt` (`eval_accuracy`,
`eval_loss`, `global_step`, `loss`) and `test_results.tsv` (per test
question: the probability of each ending, then the chosen ending's index,
tab-separated), each written atomically; `--export_dir`: a SavedModel
that `predict_saved_model.py` serves (the same `test_results.tsv`). The
defaults are the paper's SWAG hyper-parameters: 3 epochs, learning rate
2e-5, batch size 16.

Usage (see docs/finetuning.md):
  python run_multiple_choice.py --do_train --do_eval --do_predict \
    --data_dir=$SWAG_DIR --vocab_file=$BERT_DIR/vocab.txt \
    --bert_config_file=$BERT_DIR/bert_config.json \
    --init_checkpoint=$BERT_DIR --output_dir=/tmp/swag
"""

from bert_tf.cli import quiet  # First: TensorFlow's start-up lines off.
quiet.when_run_as_command(__name__)

from absl import flags

from bert_tf.cli import flags as cli_flags
from bert_tf.cli import flags_first


__all__ = ["define_flags", "main", "cli"]

FLAGS = flags.FLAGS


def define_flags():
  """Defines the script's flags: the shared ones, with SWAG's defaults."""
  cli_flags.define_flags(
      "data_dir", cli_flags.MODEL_FLAGS, "max_seq_length", "do_eval",
      "eval_batch_size", "export_dir", cli_flags.FINE_TUNING_FLAGS,
      cli_flags.TRAINING_FLAGS, cli_flags.TPU_FLAGS,
      cli_flags.DISTRIBUTE_FLAGS, cli_flags.BEST_CHECKPOINT_FLAGS,
      # The BERT paper's SWAG fine-tuning (section 4.4).
      learning_rate=2e-5, train_batch_size=16, num_train_epochs=3.0)
  for split, standard in (("train", "train"), ("dev", "val"),
                          ("test", "test")):
    flags.DEFINE_string(
        "%s_file" % split, None,
        "The %s split's file in --data_dir (or a path): .csv (SWAG's "
        "layout) or .json/.jsonl (JSON lines); default %s.csv, %s.json or "
        "%s.jsonl, whichever is there." % (split, standard, standard,
                                           standard))
  for name in ("data_dir", "vocab_file", "bert_config_file", "output_dir"):
    flags.mark_flag_as_required(name)


# Run as a command: --help and flag errors answer here, before the
# imports below load TensorFlow.
flags_first.parse_when_run_as_command(__name__, define_flags)

from absl import logging
import tensorflow.compat.v1 as tf

from bert_tf.checks.problems import Problems
from bert_tf.export import saved_model as export_utils
from bert_tf.cli import entry
from bert_tf.cli import fine_tuning
from bert_tf.cli import startup
from bert_tf.runner import loop
from bert_tf.tasks.multiple_choice import head as mc_head
from bert_tf.tasks.multiple_choice import task as mc_task
from bert_tf.train import best as best_lib
from bert_tf.train import model_fn as model_fn_utils
from bert_tf.train import options as training_options


def _flag_problems(flag_values):
  """This script's flag problems (the model's are `startup.prepare_model`'s)."""
  problems = []
  if not (flag_values.do_train or flag_values.do_eval or
          flag_values.do_predict or flag_values.export_dir):
    problems.append("At least one of --do_train, --do_eval or --do_predict "
                    "must be set. (--export_dir alone exports only.)")
  if flag_values.max_seq_length < 3:
    problems.append("--max_seq_length: got %d, expected at least 3 ([CLS] "
                    "and two [SEP])" % flag_values.max_seq_length)
  problems += startup.positive_flag_problems(
      flag_values, ("train_batch_size", "eval_batch_size",
                    "predict_batch_size"))
  if not tf.io.gfile.isdir(flag_values.data_dir):
    problems.append("--data_dir: %s is not a directory" %
                    flag_values.data_dir)
  return problems


def main(_):
  logging.set_verbosity(logging.INFO)
  # 1. Flags, options, config, checkpoint, vocabulary: every problem
  # reported together, before any work; then the devices.
  problems = Problems(_flag_problems(FLAGS))
  run = training_options.from_flags(FLAGS, problems)
  model = startup.prepare_model(
      FLAGS.bert_config_file, FLAGS.max_seq_length, FLAGS.init_checkpoint,
      FLAGS.do_lower_case, FLAGS.vocab_file, FLAGS.output_dir,
      problems=problems,
      export_now=bool(FLAGS.export_dir) and not FLAGS.do_train)
  problems.raise_if_any()
  loop.setup_devices(run)
  use_tpu = run.tpu.use_tpu

  # 2. The task, and every split the run needs, read (and checked) first.
  task = mc_task.MultipleChoiceTask(
      mc_task.MultipleChoiceOptions(
          data_dir=FLAGS.data_dir, output_dir=FLAGS.output_dir,
          max_seq_length=FLAGS.max_seq_length, use_tpu=use_tpu,
          eval_batch_size=FLAGS.eval_batch_size,
          predict_batch_size=FLAGS.predict_batch_size,
          split_files={split: (FLAGS["%s_file" % split].value,
                               "--%s_file" % split)
                       for split in ("train", "dev", "test")}),
      model.tokenizer, mc_head.MultipleChoiceHead())
  if run.evaluation.keep_best_by:
    best_lib.check_key(run.evaluation.keep_best_by, task.eval_keys)
  task.read([split for split, wanted in (("train", run.do_train),
                                         ("dev", run.do_eval),
                                         ("test", run.do_predict))
             if wanted])

  with loop.output_dir(FLAGS.output_dir, run, FLAGS.init_checkpoint):
    # 3. The training records and the model.
    training = (task.training(run.examples_per_update,
                              FLAGS.num_train_epochs,
                              FLAGS.warmup_proportion, FLAGS.learning_rate)
                if run.do_train else None)
    model_fn = model_fn_utils.build_model_fn(
        task.head, model.bert_config, model.init_checkpoint, use_tpu,
        use_one_hot_embeddings=use_tpu,
        schedule=model_fn_utils.TrainingSchedule(
            learning_rate=FLAGS.learning_rate,
            num_train_steps=training and training.num_train_steps,
            num_warmup_steps=training and training.num_warmup_steps,
            options=run.training.optimizer_options,
            dropout_seed=run.training.dropout_seed),
        compute_dtype=run.training.compute_dtype,
        encoder=mc_head.encoder_fn(model.bert_config, use_tpu, use_tpu,
                                   run.training.compute_dtype))
    # 4. Train (evaluating on the way), evaluate, predict.
    loop.run(model_fn, run, FLAGS.output_dir, training=training,
             evaluate=task.evaluate() if run.do_eval else None,
             predict=task.predict,
             export=_exporter(task, model) if FLAGS.export_dir else None,
             eval_batch_size=FLAGS.eval_batch_size,
             predict_batch_size=FLAGS.predict_batch_size)


def _exporter(task, model):
  """The run's SavedModel export: each question's choices in, their
  `probabilities` and `logits` out."""
  return fine_tuning.exporter(
      task.head, model.bert_config,
      fine_tuning.Serving(kind=export_utils.MULTIPLE_CHOICE,
                          output_keys=["probabilities", "logits"]),
      fine_tuning.ModelFiles(
          vocab_file=FLAGS.vocab_file,
          bert_config_file=FLAGS.bert_config_file,
          do_lower_case=FLAGS.do_lower_case,
          max_seq_length=FLAGS.max_seq_length, output_dir=FLAGS.output_dir,
          export_dir=FLAGS.export_dir),
      model.init_checkpoint,
      encoder=mc_head.encoder_fn(model.bert_config, False, False))


def cli():
  """Command-line entry point: `main`, with the flags defined here or, run
  as a command, above."""
  entry.run_main(main, define_flags)


if __name__ == "__main__":
  cli()
