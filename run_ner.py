"""Fine-tunes BERT for named-entity recognition (token classification).

The BERT paper's CoNLL-2003 setup (Devlin et al. 2019, section 5.3): the
final hidden state of each word's first WordPiece goes through a dense layer
to the word's tag, trained with cross-entropy; no CRF. Any CoNLL-format task
works: one word per line with the label in `--label_column`, a blank line
between sentences, optional `-DOCSTART-` lines between documents; IOB1, IOB2
(BIO) and IOBES tags. `bert_tf/tasks/ner/` holds the task: the reader, the
tag schemes, the features, the metrics, the head (`model.py`) and `NerTask`
(`task.py`), which reads the files and writes the outputs.

Outputs in `--output_dir`: `label_list.txt` (the sorted labels of the
training file, read back when predicting without training),
`eval_results.txt` (sorted `key = value` lines, 0-1 scale: eval_precision,
eval_recall, eval_f1, eval_f1_<TYPE>, eval_accuracy, eval_loss, global_step,
loss), `dev_predictions.txt` and `test_predictions.txt` (`token gold pred`
lines for conlleval.pl), each written atomically. `--export_dir` writes a
SavedModel serving each token's label probabilities (with
`--pack_sequences`, a packed signature beside it), from which
predict_saved_model.py writes the same `test_predictions.txt`.

Usage (see docs/finetuning.md):
  python run_ner.py --do_train --do_eval --do_predict \
    --data_dir=$CONLL_DIR --vocab_file=$BERT_DIR/vocab.txt \
    --bert_config_file=$BERT_DIR/bert_config.json \
    --init_checkpoint=$BERT_DIR/bert_model.ckpt --output_dir=/tmp/ner
"""

from bert_tf.cli import quiet  # First: TensorFlow's start-up lines off.
quiet.when_run_as_command(__name__)

from absl import flags
from bert_tf.cli import flags as cli_flags
from bert_tf.cli import flags_first

__all__ = ["define_flags", "create_model", "metric_fn", "model_fn_builder",
           "main", "cli"]

FLAGS = flags.FLAGS


def define_flags():
  """Defines the script's flags: the shared ones and the CoNLL reader's."""
  flags.DEFINE_string("train_file", "eng.train",
                      "Training file in --data_dir (CoNLL-2003: eng.train).")
  flags.DEFINE_string("dev_file", "eng.testa",
                      "File evaluated by --do_eval, in --data_dir "
                      "(CoNLL-2003 dev: eng.testa).")
  flags.DEFINE_string("test_file", "eng.testb",
                      "File predicted by --do_predict, in --data_dir "
                      "(CoNLL-2003 test: eng.testb). It may have the token "
                      "column only.")
  flags.DEFINE_enum(
      "tag_scheme", "auto", ["auto", "IOB1", "IOB2", "IOBES"],
      "Tag scheme of the labels; auto detects it from the gold tags. Tag "
      "sequences invalid in it are counted and warned about; entities are "
      "always read with conlleval's chunking, valid for all three.")
  flags.DEFINE_bool(
      "document_context", False,
      "Encode each sentence with the words of the neighbouring sentences of "
      "its document around it, up to --max_seq_length (the paper's "
      "'maximal document context'); only the sentence's own words are "
      "labelled. False: each sentence alone.")
  cli_flags.define_flags(
      "data_dir", "label_column", cli_flags.MODEL_FLAGS, "max_seq_length",
      "bucket_by_length", "doc_stride", "do_eval", "eval_batch_size", cli_flags.FINE_TUNING_FLAGS,
      "export_dir", cli_flags.TRAINING_FLAGS, cli_flags.TPU_FLAGS,
      cli_flags.DISTRIBUTE_FLAGS, cli_flags.BEST_CHECKPOINT_FLAGS,
      "pack_sequences", "max_examples_per_row", doc_stride=64)
  # --vocab_file and --bert_config_file may come from a Hugging Face folder
  # given as --init_checkpoint; startup.prepare_model requires them.
  for name in ("data_dir", "output_dir"):
    flags.mark_flag_as_required(name)


# Run as a command: --help and flag errors answer here, before the
# imports below load TensorFlow.
flags_first.parse_when_run_as_command(__name__, define_flags)

from bert_tf.cli import entry
from bert_tf.cli import startup
from bert_tf.export import saved_model as export_utils
from bert_tf.cli import fine_tuning
from bert_tf.runner import loop
# The script's public names (`run_ner.create_model`, ...) live in the package.
from bert_tf.tasks.ner.model import create_model
from bert_tf.tasks.ner.model import label_weights as _label_weights
from bert_tf.tasks.ner.model import metric_fn
from bert_tf.tasks.ner.model import model_fn_builder
from bert_tf.tasks.ner.task import NerOptions
from bert_tf.tasks.ner.task import NerTask
from bert_tf.train import best as best_lib


# ----------------------------------------------------------------------------
# main.
# ----------------------------------------------------------------------------


def _flag_problems(flag_values):
  """This script's flag problems (the model's are `startup.prepare_model`'s)."""
  return startup.fine_tuning_flag_problems(flag_values, ("doc_stride",))


def _options(f, use_tpu):
  """The task's `NerOptions`, from the flags of the same names."""
  return NerOptions(
      data_dir=f.data_dir, train_file=f.train_file, dev_file=f.dev_file,
      test_file=f.test_file, label_column=f.label_column,
      tag_scheme=f.tag_scheme, max_seq_length=f.max_seq_length,
      doc_stride=f.doc_stride, document_context=f.document_context,
      output_dir=f.output_dir, bucket_by_length=f.bucket_by_length,
      eval_batch_size=f.eval_batch_size,
      predict_batch_size=f.predict_batch_size, use_tpu=use_tpu,
      max_examples_per_row=(f.max_examples_per_row if f.pack_sequences
                            else None))


def _serving(f, label_list):
  """What the export serves: the probabilities of each token's labels."""
  return fine_tuning.Serving(
      kind=export_utils.NER, output_keys=["probabilities"],
      features=export_utils.NER_FEATURES, label_list=label_list,
      config={"doc_stride": f.doc_stride,
              "document_context": f.document_context})


def _model_files(f):
  return fine_tuning.ModelFiles(
      vocab_file=f.vocab_file, bert_config_file=f.bert_config_file,
      do_lower_case=f.do_lower_case, max_seq_length=f.max_seq_length,
      output_dir=f.output_dir, export_dir=f.export_dir,
      bucket_by_length=f.bucket_by_length,
      max_examples_per_row=(f.max_examples_per_row if f.pack_sequences
                            else None))


def main(_):
  # 1. Flags, options, config, checkpoint, vocabulary: every problem
  # reported together, before any work; then the devices.
  run, model = startup.start(
      FLAGS, _flag_problems(FLAGS),
      export_now=bool(FLAGS.export_dir) and not FLAGS.do_train)
  use_tpu = run.tpu.use_tpu

  # 2. Every input the run needs, read and checked up front.
  task = NerTask(_options(FLAGS, use_tpu), run, model.tokenizer)
  if run.evaluation.keep_best_by:
    best_lib.check_key(run.evaluation.keep_best_by, task.eval_keys())

  with loop.output_dir(FLAGS.output_dir, run, FLAGS.init_checkpoint):
    # 3. The training records (the loss a mean over each update's labelled
    # tokens), and the model.
    training = (fine_tuning.training(
        *task.training_records(), run.examples_per_update,
        FLAGS.num_train_epochs, FLAGS.warmup_proportion, FLAGS.learning_rate,
        token_weights=_label_weights) if run.do_train else None)
    model_fn = fine_tuning.model_fn(task.head, model, run,
                                    FLAGS.learning_rate, training)
    # 4. Train (evaluating on the way), evaluate, predict, export.
    loop.run(
        model_fn, run, FLAGS.output_dir, training=training,
        evaluate=task.evaluate if run.do_eval else None,
        predict=task.predict,
        export=(fine_tuning.exporter(task.head, model.bert_config,
                                     _serving(FLAGS, task.label_list),
                                     _model_files(FLAGS),
                                     model.init_checkpoint)
                if FLAGS.export_dir else None),
        eval_batch_size=FLAGS.eval_batch_size,
        predict_batch_size=FLAGS.predict_batch_size)


def cli():
  """Command-line entry point: `main`, with the flags defined here or, run
  as a command, above."""
  entry.run_main(main, define_flags)


if __name__ == "__main__":
  cli()
