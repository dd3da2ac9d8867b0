"""Predicts a file with an exported SavedModel (no checkpoint, no Estimator).

Reads the export's assets (vocabulary, `do_lower_case`, `max_seq_length`,
labels, task), converts `--input_file` exactly as the fine-tuning script
does, runs the `serving_default` signature in batches as the input is
converted, and writes what that script's `--do_predict` writes:

* classifier / regression exports: `--input_file` is a TSV in the test
  layout of the task (`--task_name`, default the export's task, e.g. MRPC's
  test.tsv) -> `test_results.tsv`, one line of tab-separated class
  probabilities (or the predicted score) per row; an export of
  `run_classifier.py --doc_stride` splits long texts into its windows and
  combines them as it did (`window_aggregation`); with `--pack_sequences`
  (an export of `run_classifier.py --pack_sequences`) several inputs share
  a row of the export's packed signature, the lines the same;
* SQuAD exports: `--input_file` is SQuAD JSON -> `predictions.json`,
  `nbest_predictions.json` (and `null_odds.json` for SQuAD 2.0); when the
  file carries answers, `eval_results.json` too. Documents longer than one
  window are split into the export's `doc_stride` windows;
* multiple-choice exports: `--input_file` is a file in
  run_multiple_choice.py's layouts (SWAG's CSV, or JSON lines) ->
  `test_results.tsv`, the probability of each ending then the chosen one;
* NER exports: `--input_file` is a CoNLL file as run_ner.py reads it (the
  label column optional) -> `test_predictions.txt`, `token gold pred`
  lines; sentences longer than a window are split with the export's
  `doc_stride`, and the entity scores are logged when the file has labels
  (tag sequences invalid in its scheme counted in one warning, as
  run_ner.py does).
  With `--pack_sequences` (an export of `run_ner.py --pack_sequences`)
  several windows share a row of the packed signature, the lines the same.

`--model_dir` may also be a TensorFlow Lite or ONNX folder that
`--convert_to` wrote: the same files come out (see `bert_tf.export.portable`).

`--convert_to=tflite,tflite_int8,onnx,onnx_int8` (any of them) predicts
nothing: it writes the export as TensorFlow Lite and/or ONNX files, float32
or int8, one folder per format under `--output_dir`, each with the export's
assets (ONNX needs the onnx extra: ./setup.sh --onnx).

Usage:
  python predict_saved_model.py --model_dir=/tmp/mrpc_export \
    --input_file=$GLUE_DIR/MRPC/test.tsv --output_dir=/tmp/mrpc_served
  python predict_saved_model.py --model_dir=/tmp/mrpc_export \
    --convert_to=onnx_int8,tflite_int8 --output_dir=/tmp/mrpc_portable
"""

from bert_tf.cli import quiet  # First: TensorFlow's start-up lines off.
quiet.when_run_as_command(__name__)

from absl import flags

from bert_tf.cli import flags_first
from bert_tf.export import portable


__all__ = ["read_classifier_examples", "predict_classifier", "convert",
           "define_flags", "main", "cli"]

FLAGS = flags.FLAGS


def define_flags():
  """Defines the script's flags."""
  flags.DEFINE_string("model_dir", None,
                      "An export folder (its newest numbered version is "
                      "used), one version folder, or a TensorFlow Lite or "
                      "ONNX folder written by --convert_to.")
  flags.DEFINE_string("input_file", None,
                      "What to predict: a TSV in the task's test layout "
                      "(classifier exports), SQuAD JSON (SQuAD exports), "
                      "a CSV or JSON-lines file of questions and endings "
                      "(multiple-choice exports) or a CoNLL file (NER "
                      "exports).")
  flags.DEFINE_string("output_dir", None, "Where the results are written.")
  flags.DEFINE_string("task_name", None,
                      "Classifier exports: the run_classifier.py task whose "
                      "test layout --input_file has (default: the export's "
                      "task).")
  flags.DEFINE_integer("batch_size", 8, "Inputs per signature call (rows "
                       "with --pack_sequences).")
  flags.DEFINE_bool("pack_sequences", False,
                    "Exports of run_classifier.py or run_ner.py "
                    "--pack_sequences: put several whole inputs into each "
                    "row (first-fit decreasing) and run the export's packed "
                    "signature; the outputs equal the unpacked run's "
                    "within float32 rounding.")
  flags.DEFINE_integer("max_examples_per_row", None,
                       "With --pack_sequences: inputs a row holds at most "
                       "(default and maximum: the export's).")
  flags.DEFINE_integer("label_column", -1,
                       "NER: the column of the gold labels, if any (0-based; "
                       "negative counts from the end).")
  flags.DEFINE_integer("n_best_size", 20,
                       "SQuAD: candidates kept per question.")
  flags.DEFINE_integer("max_answer_length", 30,
                       "SQuAD: longest answer, in WordPiece tokens.")
  flags.DEFINE_float("null_score_diff_threshold", 0.0,
                     "SQuAD 2.0: predict no answer when the null score minus "
                     "the best non-null score exceeds this.")
  flags.DEFINE_list("convert_to", None,
                    "Predict nothing: write the export as these formats "
                    "(%s), one folder each under --output_dir." %
                    ", ".join(sorted(portable.FORMATS)))
  for name in ("model_dir", "output_dir"):
    flags.mark_flag_as_required(name)


# Run as a command: --help and flag errors answer here, before the
# imports below load TensorFlow.
flags_first.parse_when_run_as_command(__name__, define_flags)

import itertools
import math
import os
import time

from absl import logging
import numpy as np

from bert_tf.checks import numbers as number_checks
from bert_tf.cli import entry
from bert_tf.export import saved_model as export_utils
from bert_tf.export import serving
from bert_tf.tasks.classifier import data as classifier_data
from bert_tf.tasks.classifier import model as classifier_model
from bert_tf.tasks.classifier import windows as classifier_windows
from bert_tf.tasks.multiple_choice import data as mc_data
from bert_tf.tasks.multiple_choice import features as mc_features
from bert_tf.tasks.multiple_choice import predictions as mc_predictions
from bert_tf.tasks.ner import metrics as ner_metrics
from bert_tf.tasks.ner import reader as ner_reader
from bert_tf.tasks.ner import tags as ner_tags
from bert_tf.tasks.ner import task as ner_task
from bert_tf.tasks.squad import data as squad_data
from bert_tf.tasks.squad import predictions as squad_predictions


# How an error message names the task of a classifier export's kind.
_TASK_WORDS = {export_utils.CLASSIFIER: "classification",
               export_utils.REGRESSION: "regression"}


def read_classifier_examples(task_name, input_file, config):
  """Reads `input_file` in the test layout of `task_name`.

  Returns:
    list of `bert_tf.tasks.classifier.data.InputExample`.

  Raises:
    ValueError: a row with the wrong number of columns (naming the file and
      line), an unknown task, or a task of another kind than the export.
  """
  processor = classifier_data.get_processor(task_name)
  task_kind = classifier_model.head_for(
      processor, config.get("label_list") or []).export_spec()["kind"]
  if task_kind != config["kind"]:
    raise ValueError("--task_name=%s is a %s task but the export is a %s "
                     "model" % (task_name, _TASK_WORDS[task_kind],
                                config["kind"]))
  if isinstance(processor, classifier_data.TsvProcessor):
    columns = config.get("tsv_columns") or {}
    text_a_column = columns.get("text_a_column", 0)
    text_b_column = columns.get("text_b_column")
    examples = []
    for line_index, cells in classifier_data.read_tsv_rows(
        input_file, None, columns.get("skip_header", False)):
      # pylint: disable=protected-access
      text_a = processor._cell(input_file, line_index, cells, text_a_column)
      text_b = None
      if text_b_column is not None:
        text_b = processor._cell(input_file, line_index, cells,
                                 text_b_column)
      examples.append(classifier_data.InputExample(
          "test-%d" % line_index, text_a, text_b))
    return examples
  _, set_name, layout = processor.SPLITS["test"]
  processor.SPLITS = {"test": ((os.path.basename(input_file),), set_name,
                               layout)}
  return processor.get_test_examples(os.path.dirname(input_file) or ".")


def predict_classifier(model, examples, output_file, batch_size,
                       max_examples_per_row=None, doc_stride=None,
                       window_aggregation="mean"):
  """Runs `examples` through the export; writes `test_results.tsv`.

  The lines are `bert_tf.tasks.classifier.model.write_test_results`', in
  input order. Without `doc_stride`, inputs longer than `max_seq_length`
  are truncated as in training and counted in one log line; with it, each
  text is split into windows `doc_stride` tokens apart and its line is the
  `window_aggregation` ("mean" or "max") of its windows' outputs, as
  `run_classifier.py --doc_stride` writes it. `max_examples_per_row`: pack
  the inputs into rows of at most that many (`packing.pack`), `batch_size`
  rows a call of the export's packed signature (`run_packed`).

  Returns:
    int, the number of lines written.

  Raises:
    ValueError: a `text_b` leaving no room for a window (naming the
      example).
  """
  key = model.config["output_keys"][0]
  truncated = []
  start = time.time()
  if doc_stride is None:
    items, owners = examples, None

    def encode(batch):
      encoded = [serving.encode_text(model.tokenizer, example.text_a,
                                     example.text_b, model.max_seq_length)
                 for example in batch]
      truncated.extend(e[3] for e in encoded if e[3])
      return encoded
  else:
    items, owners = [], []
    for index, example in enumerate(examples):
      for window in classifier_windows.encode_windows(
          example, model.tokenizer, model.max_seq_length, doc_stride):
        items.append(tuple(window) + (False,))
        owners.append(index)
    logging.info("%d windows of %d examples (doc_stride=%d)", len(items),
                 len(examples), doc_stride)
    encode = list

  def predictions():
    for first in range(0, len(items), batch_size):
      encoded = encode(items[first:first + batch_size])
      inputs = (np.array(x) for x in zip(*(e[:3] for e in encoded)))
      for row in model.run(*inputs)[key]:
        yield {key: row}
      if (first // batch_size + 1) % 100 == 0:
        logging.info("Predicted %d of %d inputs (%.1f inputs/sec)",
                     first + len(encoded), len(items),
                     (first + len(encoded)) / max(time.time() - start, 1e-9))

  def packed_predictions():
    return model.predict_packed(
        [{"input_ids": ids[:sum(mask)], "segment_ids": segments[:sum(mask)]}
         for ids, mask, segments, _ in encode(items)],
        max_examples_per_row, batch_size)

  outputs = packed_predictions() if max_examples_per_row else predictions()
  if owners is not None:
    outputs = ({key: value} for value in classifier_windows.aggregate(
        outputs, owners, len(examples), window_aggregation))
  written = classifier_model.write_test_results(output_file, outputs,
                                                len(examples))
  if truncated:
    logging.warning("%d of %d inputs were longer than max_seq_length=%d "
                    "tokens and were truncated (as in training)",
                    len(truncated), len(examples), model.max_seq_length)
  logging.info("Wrote %d lines to %s", written, output_file)
  return written


def convert(model_dir, formats, output_dir):
  """Writes the export at `model_dir` (a SavedModel) as `formats` under
  `output_dir` (`portable.convert`); logs each folder written.

  Raises:
    ValueError: `model_dir` not a SavedModel export, or what
      `portable.convert` refuses.
  """
  version_dir = serving.resolve_version(model_dir)
  if portable.model_format(version_dir):
    raise ValueError("--model_dir: %s is already a %s model; --convert_to "
                     "takes the SavedModel export it was made from" %
                     (version_dir, portable.model_format(version_dir)))
  config, _, _ = serving.read_assets(version_dir)
  for name, folder in portable.convert(version_dir, output_dir, formats,
                                       config).items():
    logging.info("Wrote %s (%s)", folder, name)


def main(_):
  logging.set_verbosity(logging.INFO)
  if FLAGS.convert_to is not None:
    convert(FLAGS.model_dir, FLAGS.convert_to, FLAGS.output_dir)
    return
  if not FLAGS.input_file:
    raise ValueError("--input_file is required (or --convert_to)")
  # 1. The export and its assets.
  for name in ("batch_size", "n_best_size", "max_answer_length"):
    if FLAGS[name].value < 1:
      raise ValueError("--%s: got %d, expected at least 1" %
                       (name, FLAGS[name].value))
  if not math.isfinite(FLAGS.null_score_diff_threshold):
    raise ValueError("--null_score_diff_threshold=%s: expected a finite "
                     "number" % FLAGS.null_score_diff_threshold)
  number_checks.check_flags(FLAGS)
  if os.path.exists(FLAGS.output_dir) and not os.path.isdir(FLAGS.output_dir):
    raise ValueError("--output_dir: %s is a file; expected a directory" %
                     FLAGS.output_dir)
  version_dir = serving.resolve_version(FLAGS.model_dir)
  config, _, _ = serving.read_assets(version_dir)
  kind = config["kind"]

  # 2. The input, read (and checked) before the model is loaded; the model
  # and the outputs.
  if FLAGS.pack_sequences and kind not in export_utils.PACKED_KINDS:
    raise ValueError("--pack_sequences: %s is a %s export; packed rows are "
                     "for classifier, regression and NER exports" %
                     (version_dir, kind))
  _KINDS[kind](version_dir, config, FLAGS)


def _examples_per_row(flag_values, config, version_dir):
  """--pack_sequences' examples a row (None: off), checked against the
  export before it is loaded.

  Raises:
    ValueError: one line: an export without the packed signature (or a
      --convert_to folder), a --max_examples_per_row above the export's.
  """
  if not flag_values.pack_sequences:
    return None
  slots = serving.packed_slots(version_dir, config)
  wanted = flag_values.max_examples_per_row
  if wanted is not None and not 1 <= wanted <= slots:
    raise ValueError("--max_examples_per_row=%d: expected 1..%d, the "
                     "export's max_examples_per_row (%s)" %
                     (wanted, slots, version_dir))
  return wanted or slots


def _classifier(version_dir, config, flag_values):
  task_name = flag_values.task_name or config.get("task_name")
  if not task_name:
    raise ValueError("--task_name is required: the export names no task")
  examples_per_row = _examples_per_row(flag_values, config, version_dir)
  examples = read_classifier_examples(task_name, flag_values.input_file,
                                      config)
  logging.info("Read %d examples from %s", len(examples),
               flag_values.input_file)
  predict_classifier(serving.BertServingModel(version_dir), examples,
                     os.path.join(flag_values.output_dir, "test_results.tsv"),
                     flag_values.batch_size, examples_per_row,
                     config.get("doc_stride"),
                     config.get("window_aggregation") or "mean")


def _squad(version_dir, config, flag_values):
  version_2 = config.get("version_2_with_negative", False)
  examples = squad_data.read_squad_examples(
      flag_values.input_file, is_training=False,
      version_2_with_negative=version_2)
  logging.info("Read %d examples from %s", len(examples),
               flag_values.input_file)
  written = serving.predict_squad(
      serving.BertServingModel(version_dir), examples,
      flag_values.output_dir, flag_values.n_best_size,
      flag_values.max_answer_length, flag_values.null_score_diff_threshold,
      flag_values.batch_size)
  squad_predictions.score_predictions(flag_values.input_file, written,
                                      version_2, flag_values.output_dir)


def _multiple_choice(version_dir, _, flag_values):
  """test_results.tsv of a multiple-choice export, as
  run_multiple_choice.py --do_predict writes it."""
  examples = mc_data.read_examples(flag_values.input_file, labelled=False)
  logging.info("Read %d questions from %s", len(examples),
               flag_values.input_file)
  model = serving.BertServingModel(version_dir)
  features = (mc_features.convert_example(example, model.max_seq_length,
                                          model.tokenizer)
              for example in examples)  # Converted as they are run.
  output_file = os.path.join(flag_values.output_dir, "test_results.tsv")
  written = mc_predictions.write_test_results(
      output_file, _probabilities(model, features, flag_values.batch_size),
      len(examples))
  logging.info("Wrote %d lines to %s", written, output_file)


def _ner(version_dir, config, flag_values):
  """test_predictions.txt of a NER export, as run_ner.py --do_predict
  writes it (and its scores logged)."""
  examples_per_row = _examples_per_row(flag_values, config, version_dir)
  path, label_list = flag_values.input_file, config["label_list"]
  sentences = ner_reader.read_conll_file(path, flag_values.label_column)
  ner_reader.check_labels(sentences, label_list, path,
                          "the export's label_list")
  logging.info("Read %d sentences from %s", len(sentences), path)
  gold = [s.labels for s in sentences if s.labels is not None]
  if gold:  # As run_ner.py --tag_scheme=auto: counted, kept as they are.
    ner_tags.warn_invalid_tags(sentences, ner_tags.detect_tag_scheme(gold),
                               path)
  model = serving.BertServingModel(version_dir)
  features = ner_task.window_features(
      path, sentences, label_list, model.tokenizer, model.max_seq_length,
      config["doc_stride"], config.get("document_context", False))
  if examples_per_row:
    predictions = model.predict_packed(
        [{name: getattr(f, name)[:sum(f.input_mask)] for name in (
            "input_ids", "segment_ids")} for f in features],
        examples_per_row, flag_values.batch_size)
  else:
    predictions = list(_probabilities(model, features,
                                      flag_values.batch_size))
  for feature, prediction in zip(features, predictions):
    prediction["unique_ids"] = feature.unique_id
  ner_task.write_test_predictions(
      flag_values.output_dir, path, sentences, ner_metrics.word_predictions(
          sentences, features, predictions, label_list), label_list)


def _probabilities(model, features, batch_size):
  """{"probabilities": numpy array} of each of `features` (an iterable of
  objects with the `INPUT_NAMES` attributes), `batch_size` a call of the
  export's default signature."""
  features = iter(features)
  while True:
    batch = list(itertools.islice(features, batch_size))
    if not batch:
      return
    outputs = model.run(*(np.array([getattr(feature, name)
                                    for feature in batch])
                          for name in export_utils.INPUT_NAMES))
    for row in outputs["probabilities"]:
      yield {"probabilities": row}


# What this script does with each kind of export: read the input (checked
# before the model is loaded), predict it, write the outputs.
_KINDS = {export_utils.CLASSIFIER: _classifier,
          export_utils.REGRESSION: _classifier,
          export_utils.SQUAD: _squad,
          export_utils.MULTIPLE_CHOICE: _multiple_choice,
          export_utils.NER: _ner}


def cli():
  """Command-line entry point: `main`, with the flags defined here or, run
  as a command, above."""
  entry.run_main(main, define_flags)


if __name__ == "__main__":
  cli()
