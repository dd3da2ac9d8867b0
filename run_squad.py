"""Fine-tunes BERT for SQuAD 1.1 / 2.0 question answering and predicts answers.

The reference release's `run_squad.py` (Devlin et al. 2018, sections 4.2
and 4.3); the task (`bert_tf/tasks/squad/task.py`: `SquadTask`) reads the
SQuAD JSON, writes the windowed features, trains the span head and writes
predictions.json, nbest_predictions.json, null_odds.json (2.0) and, when
--predict_file carries answers, the official scores (eval_results.json).

Example (SQuAD 1.1):
  python run_squad.py --vocab_file=$BERT_DIR/vocab.txt \
    --bert_config_file=$BERT_DIR/bert_config.json \
    --init_checkpoint=$BERT_DIR --do_train=True \
    --train_file=$SQUAD_DIR/train-v1.1.json --do_predict=True \
    --predict_file=$SQUAD_DIR/dev-v1.1.json --train_batch_size=12 \
    --learning_rate=3e-5 --num_train_epochs=2.0 --max_seq_length=384 \
    --doc_stride=128 --output_dir=/tmp/squad_base/

The reference's public names (`SquadExample`, `read_squad_examples`,
`write_predictions`, `create_model`, `model_fn_builder`, ...) are imported
from `bert_tf.tasks.squad` (`data`, `model`, `predictions`); see `__all__`.
"""

from bert_tf.cli import quiet  # First: TensorFlow's start-up lines off.
quiet.when_run_as_command(__name__)

from absl import flags

from bert_tf.cli import flags as cli_flags
from bert_tf.cli import flags_first


__all__ = [
    "SquadExample", "InputFeatures", "read_squad_examples",
    "convert_examples_to_features", "FeatureWriter", "RawResult",
    "write_predictions", "get_final_text", "score_predictions",
    "create_model", "model_fn_builder", "input_fn_builder",
    "validate_flags_or_throw", "define_flags", "main", "cli",
]

FLAGS = flags.FLAGS


def define_flags():
  """Defines the script's flags (the reference's names and defaults)."""
  flags.DEFINE_string("train_file", None,
                      "SQuAD JSON to train on, such as train-v1.1.json.")
  flags.DEFINE_string("predict_file", None,
                      "SQuAD JSON to answer, such as dev-v1.1.json; when it "
                      "holds answers, the official scores are computed too.")
  flags.DEFINE_integer("max_query_length", 64,
                       "Questions longer than this many tokens are cut.")
  cli_flags.define_flags(
      cli_flags.MODEL_FLAGS, "max_seq_length", "doc_stride",
      cli_flags.FINE_TUNING_FLAGS, "export_dir", cli_flags.TRAINING_FLAGS,
      cli_flags.TPU_FLAGS, cli_flags.DISTRIBUTE_FLAGS, max_seq_length=384)
  flags.DEFINE_integer("n_best_size", 20,
                       "How many candidate answers per question go to "
                       "nbest_predictions.json.")
  flags.DEFINE_integer("max_answer_length", 30,
                       "The longest answer considered, in WordPiece tokens.")
  flags.DEFINE_bool("verbose_logging", False,
                    "Log each predicted span that cannot be mapped back onto "
                    "the original text.")
  flags.DEFINE_bool("version_2_with_negative", False,
                    "SQuAD 2.0: some questions have no answer in the text.")
  flags.DEFINE_float("null_score_diff_threshold", 0.0,
                     "SQuAD 2.0: answer nothing when the no-answer score "
                     "beats the best answer's score by more than this.")


# Run as a command: --help and flag errors answer here, before the
# imports below load TensorFlow.
flags_first.parse_when_run_as_command(__name__, define_flags)

import dataclasses


from bert_tf.checks.problems import Problems
from bert_tf.cli import entry
from bert_tf.cli import startup
from bert_tf.export import saved_model as export_utils
# The reference's public names of this module (`run_squad.read_squad_examples`,
# `run_squad.model_fn_builder`, ...) live in the package.
from bert_tf.tasks.squad.data import check_span_lengths
from bert_tf.tasks.squad.data import convert_examples_to_features
from bert_tf.tasks.squad.data import FeatureWriter
from bert_tf.tasks.squad.data import InputFeatures
from bert_tf.tasks.squad.data import read_squad_examples
from bert_tf.tasks.squad.data import SquadExample
from bert_tf.tasks.squad.model import create_model
from bert_tf.tasks.squad.model import input_fn_builder
from bert_tf.tasks.squad.model import model_fn_builder
from bert_tf.tasks.squad.model import span_loss as _span_loss
from bert_tf.tasks.squad.predictions import FeatureMetadata
from bert_tf.tasks.squad.predictions import get_final_text
from bert_tf.tasks.squad.predictions import RawResult
from bert_tf.tasks.squad.predictions import score_predictions
from bert_tf.tasks.squad.predictions import write_predictions
from bert_tf.tasks.squad.task import SquadOptions
from bert_tf.tasks.squad.task import SquadTask
from bert_tf.cli import fine_tuning
from bert_tf.runner import loop
from bert_tf.train import options as training_options
# `run_squad.modeling` and `.tokenization`, as in the reference.
import modeling  # pylint: disable=unused-import
import tokenization


# ----------------------------------------------------------------------------
# main
# ----------------------------------------------------------------------------


def _flag_problems(flag_values):
  """This script's own flag problems, as a list of messages."""
  problems = []
  if not (flag_values.do_train or flag_values.do_predict or
          flag_values.export_dir):
    problems.append("At least one of --do_train or --do_predict must be "
                    "True. (--export_dir alone exports only.)")
  if flag_values.do_train and not flag_values.train_file:
    problems.append("--do_train needs --train_file (a SQuAD JSON file)")
  if flag_values.do_predict and not flag_values.predict_file:
    problems.append("--do_predict needs --predict_file (a SQuAD JSON file)")
  try:
    check_span_lengths(flag_values.max_seq_length, flag_values.doc_stride,
                       flag_values.max_query_length)
  except ValueError as e:
    problems.append("--" + str(e))
  problems += startup.positive_flag_problems(
      flag_values, ("n_best_size", "max_answer_length", "train_batch_size",
                    "predict_batch_size"))
  return problems


def validate_flags_or_throw(bert_config, flag_values=None):
  """Checks the flags of a SQuAD run (the reference's public name; `main`
  runs the same checks through `startup.start`).

  Args:
    bert_config: `modeling.BertConfig` of the model.
    flag_values: parsed flags (default: `absl.flags.FLAGS`).

  Raises:
    ValueError: naming every flag at fault: no --do_train/--do_predict, a
      missing input file, a casing that contradicts a released checkpoint,
      --max_seq_length beyond the model's positions or too short for
      --max_query_length, a window stride or sizes out of range, a
      training or distribution option that does not fit.
  """
  flag_values = FLAGS if flag_values is None else flag_values
  problems = Problems(_flag_problems(flag_values))
  problems.extend(training_options.check(
      training_options.read_flags(flag_values)))
  problems.attempt(startup.check_max_seq_length, flag_values.max_seq_length,
                   bert_config)
  problems.attempt(tokenization.validate_case_matches_checkpoint,
                   flag_values.do_lower_case, flag_values.init_checkpoint)
  problems.raise_if_any()


def _options(f):
  """The task's `SquadOptions`, from the flags of the same names."""
  return SquadOptions(**{field.name: f[field.name].value
                         for field in dataclasses.fields(SquadOptions)})


def main(_):
  # 1. Flags, options, config, checkpoint, vocabulary: every problem
  # reported together, before any work; then the devices.
  run, model = startup.start(
      FLAGS, _flag_problems(FLAGS),
      export_now=bool(FLAGS.export_dir) and not FLAGS.do_train)
  task = SquadTask(_options(FLAGS), model.tokenizer)

  with loop.output_dir(FLAGS.output_dir, run, FLAGS.init_checkpoint):
    # 2. The training questions, and the model.
    training = (fine_tuning.training(
        *task.training_records(), run.examples_per_update,
        FLAGS.num_train_epochs, FLAGS.warmup_proportion, FLAGS.learning_rate)
                if run.do_train else None)
    model_fn = fine_tuning.model_fn(task.head, model, run,
                                    FLAGS.learning_rate, training)
    # 3. Train, predict and score, export: each token's start and end logits.
    loop.run(
        model_fn, run, FLAGS.output_dir, training=training,
        predict=task.predict,
        export=(fine_tuning.exporter(
            task.head, model.bert_config, fine_tuning.Serving(
                kind=export_utils.SQUAD,
                output_keys=["start_logits", "end_logits"],
                features=export_utils.SQUAD_FEATURES,
                config=task.serving_config()),
            fine_tuning.ModelFiles(
                FLAGS.vocab_file, FLAGS.bert_config_file, FLAGS.do_lower_case,
                FLAGS.max_seq_length, FLAGS.output_dir, FLAGS.export_dir),
            model.init_checkpoint) if FLAGS.export_dir else None),
        predict_batch_size=FLAGS.predict_batch_size)


def cli():
  """Command-line entry point: `main`, with the flags defined here or, run
  as a command, above."""
  entry.run_main(main, define_flags)


if __name__ == "__main__":
  cli()
