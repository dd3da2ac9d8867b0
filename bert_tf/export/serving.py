"""Loading an exported BERT SavedModel and predicting from raw text.

The export carries its vocabulary, config and tokenization settings in
`assets.extra/` (`bert_tf.export.saved_model`):

    model = serving.BertServingModel("/tmp/mrpc_export")  # newest version
    model.classify("The cat sat.", "A cat was sitting.")  # {label: prob}
    model.answer("Who sat?", "The cat sat on the mat.")   # {"text": ...}

Inputs are built as at fine-tuning time (`bert_tf.tasks.features`; SQuAD's
document windows and span search, `bert_tf.tasks.squad`).
"""

import logging as std_logging
import os
import tempfile

from absl import logging
import numpy as np
import tensorflow as tf2

from bert_tf.checks import checkpoint as checkpoint_checks
from bert_tf.checks import disk
from bert_tf import json_file
from bert_tf.export import portable
from bert_tf.export import saved_model as export_utils
from bert_tf.tasks import features as feature_utils
from bert_tf.tasks.classifier import data as classifier_data
from bert_tf.tasks.classifier import windows as classifier_windows
from bert_tf.tasks.squad import data as squad_data
from bert_tf.tasks.squad import predictions as squad_predictions
from bert_tf.train import lengths as lengths_lib
from bert_tf.train import packing
import tokenization

__all__ = ["resolve_version", "read_assets", "check_serving_config",
           "check_served_outputs", "encode_text", "packed_slots",
           "BertServingModel", "predict_squad"]


def resolve_version(model_dir):
  """The SavedModel folder of `model_dir`: a version folder itself, the
  newest (largest number) of an export base, or a --convert_to folder
  (`model.tflite`, `model.onnx`).

  Raises:
    ValueError: when `model_dir` is neither.
  """
  if not model_dir or not tf2.io.gfile.isdir(model_dir):
    raise ValueError("--model_dir: %s is not a directory (expected an export "
                     "folder or one of its version folders)" % model_dir)
  if (tf2.io.gfile.exists(os.path.join(model_dir, "saved_model.pb")) or
      portable.model_format(model_dir)):
    return model_dir
  versions = [name.rstrip("/") for name in tf2.io.gfile.listdir(model_dir)]
  versions = sorted(
      (int(name), name) for name in versions if name.isdigit() and
      tf2.io.gfile.exists(os.path.join(model_dir, name, "saved_model.pb")))
  formats = sorted(name for name in tf2.io.gfile.listdir(model_dir)
                   if portable.model_format(os.path.join(model_dir, name)))
  if not versions and formats:
    raise ValueError("--model_dir: %s holds the --convert_to folders "
                     "%s; expected one of them (e.g. %s)" %
                     (model_dir, ", ".join(f.rstrip("/") for f in formats),
                      os.path.join(model_dir, formats[0].rstrip("/"))))
  if not versions:
    raise ValueError("--model_dir: %s holds no saved_model.pb and no numbered "
                     "version folder with one" % model_dir)
  return os.path.join(model_dir, versions[-1][1])


def read_assets(version_dir):
  """(config dict, vocab path, bert_config path) of an export.

  Raises:
    ValueError: naming the missing asset files, or a bad config.
  """
  assets = os.path.join(version_dir, export_utils.ASSETS_DIR)
  missing = [os.path.join(export_utils.ASSETS_DIR, name)
             for name in export_utils.ASSET_NAMES
             if not tf2.io.gfile.exists(os.path.join(assets, name))]
  if missing:
    raise ValueError("--model_dir: %s is missing %s (expected an export "
                     "written with --export_dir)" %
                     (version_dir, ", ".join(missing)))
  path = os.path.join(assets, export_utils.SERVING_ASSET)
  config = json_file.load(path, max_bytes=2 ** 24)
  check_serving_config(config, path)
  bert_config_path = os.path.join(assets, export_utils.CONFIG_ASSET)
  _check_positions(config, path, json_file.load(bert_config_path,
                                                max_bytes=2 ** 20),
                   bert_config_path)
  return (config, os.path.join(assets, export_utils.VOCAB_ASSET),
          bert_config_path)


def _check_positions(config, path, bert_config, bert_config_path):
  """Refuses a `max_seq_length` beyond the exported model's position
  embeddings (its `bert_config.json`'s `max_position_embeddings`)."""
  positions = json_file.field(bert_config, "max_position_embeddings",
                              "integer", bert_config_path, default=512,
                              minimum=1)
  if config["max_seq_length"] > positions:
    raise ValueError(
        "%s: max_seq_length is %d, expected at most the model's "
        "max_position_embeddings=%d (%s)" %
        (path, config["max_seq_length"], positions, bert_config_path))


# The longest input a sane model takes (`bert_tf.checks.config`'s bound on
# max_position_embeddings); a larger max_seq_length is a damaged file.
_MAX_SEQ_LENGTH = 2 ** 20
# serving_config.json: key -> (JSON kind, minimum) of the keys every export
# has, then of the keys some kinds add.
_SERVING_REQUIRED = {"kind": ("string", None),
                     "do_lower_case": ("boolean", None),
                     "max_seq_length": ("integer", 3),
                     "output_keys": ("list", None)}
# The outputs each kind's client reads (`BertServingModel.classify`,
# `answer`, predict_saved_model.py): its output_keys must name them.
_KIND_OUTPUTS = {export_utils.CLASSIFIER: ("probabilities",),
                 export_utils.REGRESSION: ("predictions",),
                 export_utils.SQUAD: ("start_logits", "end_logits"),
                 export_utils.NER: ("probabilities",),
                 export_utils.MULTIPLE_CHOICE: ("probabilities",)}
_SERVING_OPTIONAL = {"label_list": (("list", "null"), None),
                     "task_name": (("string", "null"), None),
                     "tsv_columns": (("object", "null"), None),
                     "doc_stride": ("integer", 1),
                     "window_aggregation": (("string", "null"), None),
                     "max_query_length": ("integer", 1),
                     "version_2_with_negative": ("boolean", None),
                     "document_context": ("boolean", None),
                     "bucket_lengths": (("list", "null"), None),
                     "max_examples_per_row": (("integer", "null"), None)}
# The most examples a packed row holds (`--max_examples_per_row`'s range).
_MAX_EXAMPLES_PER_ROW = 4096
_TSV_COLUMNS = {"text_a_column": ("integer", 0),
                "text_b_column": (("integer", "null"), 0),
                "skip_header": ("boolean", None)}


def check_serving_config(config, path):
  """Refuses a `serving_config.json` (at `path`) of the wrong shape.

  Raises:
    ValueError: one line naming the file and the key path: a missing or
      mistyped key, a value out of range, an unknown kind, `output_keys`
      without what the kind serves, labels missing, a SQuAD query leaving
      no room for the document, bad `bucket_lengths`, a
      `max_examples_per_row` out of range or on a kind that does not pack.
  """
  json_file.require(config, "object", path, "")
  for table, default in ((_SERVING_REQUIRED, json_file.MISSING),
                         (_SERVING_OPTIONAL, None)):
    for key, (kind, minimum) in table.items():
      json_file.field(config, key, kind, path, default=default,
                      minimum=minimum)
  json_file.field(config, "max_seq_length", "integer", path, minimum=3,
                  maximum=_MAX_SEQ_LENGTH)
  if config.get("max_examples_per_row") is not None:
    json_file.field(config, "max_examples_per_row", "integer", path,
                    minimum=1, maximum=_MAX_EXAMPLES_PER_ROW)
  if config["kind"] not in export_utils.KINDS:
    raise ValueError("%s: kind %r is not one of %s" %
                     (path, config["kind"], export_utils.KINDS))
  for name in ("output_keys", "label_list"):
    for i, value in enumerate(config.get(name) or ()):
      json_file.require(value, "string", path, json_file.index_path(name, i))
  _check_output_keys(config, path)
  if (config["kind"] in (export_utils.CLASSIFIER, export_utils.NER) and
      not config.get("label_list")):
    raise ValueError("%s: label_list is %s, expected the %s export's labels "
                     "(a non-empty list of strings)" %
                     (path, json_file.describe(config.get("label_list")),
                      config["kind"]))
  for key, (kind, minimum) in _TSV_COLUMNS.items():
    json_file.field(config.get("tsv_columns") or {}, key, kind, path,
                    "tsv_columns", default=None, minimum=minimum)
  if config["kind"] in (export_utils.SQUAD, export_utils.NER):
    json_file.field(config, "doc_stride", "integer", path, minimum=1)
  aggregations = classifier_data.AGGREGATIONS
  if config.get("window_aggregation") not in (None,) + aggregations:
    raise ValueError("%s: window_aggregation is %s, expected one of %s "
                     "(how a classifier export with doc_stride combines a "
                     "text's windows)" % (
                         path, json_file.describe(config["window_aggregation"]),
                         ", ".join(aggregations)))
  if config["kind"] == export_utils.SQUAD:
    json_file.field(config, "max_query_length", "integer", path, minimum=1)
    if config["max_query_length"] + 4 > config["max_seq_length"]:
      raise ValueError(
          "%s: max_query_length is %d, expected at most max_seq_length - 4 "
          "= %d (room for [CLS], two [SEP] and a document token)" %
          (path, config["max_query_length"], config["max_seq_length"] - 4))
  _check_bucket_lengths(config, path)
  if (config.get("max_examples_per_row") is not None and
      config["kind"] not in export_utils.PACKED_KINDS):
    raise ValueError("%s: max_examples_per_row is %d, expected null for a %s "
                     "export (only classifier, regression and NER exports "
                     "serve packed rows)" % (path,
                                              config["max_examples_per_row"],
                                              config["kind"]))


def _check_output_keys(config, path):
  """output_keys: distinct names, among them what the kind's client reads."""
  keys = config["output_keys"]
  needed = _KIND_OUTPUTS.get(config["kind"], ())
  if not keys:
    raise ValueError("%s: output_keys is [], expected the names of the "
                     "outputs (%s for a %s export)" %
                     (path, ", ".join(needed), config["kind"]))
  twice = sorted({key for key in keys if keys.count(key) > 1})
  if twice:
    raise ValueError("%s: output_keys names %s twice, expected distinct "
                     "names" % (path, ", ".join(map(repr, twice))))
  missing = [key for key in needed if key not in keys]
  if missing:
    raise ValueError("%s: output_keys is %s, expected it to name %s (what a "
                     "%s export serves)" %
                     (path, keys, ", ".join(map(repr, missing)),
                      config["kind"]))


def _check_bucket_lengths(config, path):
  """bucket_lengths: null, or increasing lengths ending at max_seq_length."""
  buckets = config.get("bucket_lengths")
  if buckets is None:
    return
  expected = ("expected increasing lengths ending at max_seq_length=%d" %
              config["max_seq_length"])
  if not buckets:
    raise ValueError("%s: bucket_lengths is [], %s (or null: no buckets)" %
                     (path, expected))
  for i, value in enumerate(buckets):
    json_file.require(value, "integer", path,
                      json_file.index_path("bucket_lengths", i), minimum=1)
  if (sorted(set(buckets)) != buckets or
      buckets[-1] != config["max_seq_length"]):
    raise ValueError("%s: bucket_lengths %s: %s" % (path, buckets, expected))


def check_served_outputs(config, path, outputs):
  """Refuses output_keys that the loaded signature lacks (`outputs`: name
  -> shape), and a classifier's label_list of another length than its
  probabilities.

  Raises:
    ValueError: one line naming the file, the key and what the export has.
  """
  for i, key in enumerate(config["output_keys"]):
    if key not in outputs:
      raise ValueError(
          "%s: output_keys[%d] is %r, expected one of the export's outputs "
          "(%s)" % (path, i, key, ", ".join(sorted(outputs))))
  shape = outputs.get("probabilities")
  if (config["kind"] == export_utils.CLASSIFIER and shape and
      shape[-1] is not None and shape[-1] != len(config["label_list"])):
    raise ValueError(
        "%s: label_list has %d labels, expected %d (the export's "
        "probabilities have shape %s)" %
        (path, len(config["label_list"]), shape[-1], shape))


def encode_text(tokenizer, text_a, text_b, max_seq_length):
  """(input_ids, input_mask, segment_ids, truncated) of one text or a pair,
  as at fine-tuning time: `max_seq_length` ints each, and whether tokens
  were cut."""
  tokens_a = tokenizer.tokenize(text_a)
  tokens_b = None if text_b is None else tokenizer.tokenize(text_b)
  budget = max_seq_length - (2 if tokens_b is None else 3)
  truncated = len(tokens_a) + len(tokens_b or ()) > budget
  tokens, segment_ids = feature_utils.pack_tokens(tokens_a, tokens_b,
                                                  max_seq_length)
  input_ids, input_mask, segment_ids = feature_utils.pad_input(
      tokenizer.convert_tokens_to_ids(tokens), segment_ids, max_seq_length)
  return input_ids, input_mask, segment_ids, truncated


def packed_slots(version_dir, config):
  """The examples a row of the export's packed signature holds (its
  `serving_config.json`'s `max_examples_per_row`).

  Raises:
    ValueError: one line: the export has no packed signature, or
      `version_dir` is a --convert_to folder without `model_packed.onnx`
      (TensorFlow Lite folders serve unpacked inputs only).
  """
  slots = config.get("max_examples_per_row")
  runtime = portable.model_format(version_dir)
  if not slots or (runtime and not os.path.isfile(
      os.path.join(version_dir, portable.PACKED_MODEL_FILE))):
    raise ValueError(
        "--pack_sequences: %s %s; packed rows need an export of "
        "run_classifier.py or run_ner.py --pack_sequences --export_dir%s" % (
            version_dir, "has no packed signature (no max_examples_per_row "
            "in its serving_config.json)" if not slots else
            "holds %s but no %s" % (portable.MODEL_FILES[runtime],
                                    portable.PACKED_MODEL_FILE),
            ", or its onnx or onnx_int8 form" if runtime else ""))
  return slots


# What TensorFlow logs at each load of a SavedModel without fingerprint.pb.
_FINGERPRINT_NOTES = ("Fingerprint not found",
                      "path_and_singleprint metric could not be logged")


def _no_fingerprint_note(record):
  """Drops TensorFlow's notes that an export has no fingerprint: it is
  written by `SavedModelBuilder`, which writes no fingerprint.pb (a
  checksum for TensorFlow's metrics), and it loads without one."""
  return not record.getMessage().startswith(_FINGERPRINT_NOTES)


# What `classify` returns for each kind of export, from the config and the
# outputs of a batch of one: kind -> function(config, outputs).
_CLASSIFY = {
    export_utils.CLASSIFIER: lambda config, outputs: dict(zip(
        config["label_list"], (float(p) for p in outputs["probabilities"][0]))),
    export_utils.REGRESSION:
        lambda config, outputs: float(outputs["predictions"][0]),
}


class BertServingModel(object):
  """A loaded export: its `serving_default` signature plus its tokenizer.

  `model_dir`: an export folder (newest version), a version folder, or a
  --convert_to folder (run by `portable.RUNNERS`). Attributes:
  `version_dir`, `config` (`serving_config.json`), `tokenizer`.

  Raises:
    ValueError: no export, missing assets, or a SavedModel that does not
      load.
  """

  def __init__(self, model_dir):
    self.version_dir = resolve_version(model_dir)
    self.config, vocab_file, _ = read_assets(self.version_dir)
    self.kind = self.config["kind"]
    self.max_seq_length = self.config["max_seq_length"]
    self.tokenizer = tokenization.FullTokenizer(
        vocab_file=vocab_file, do_lower_case=self.config["do_lower_case"])
    runner_class = portable.RUNNERS.get(portable.model_format(
        self.version_dir))
    self._runner = runner_class and runner_class(self.version_dir,
                                                 self.config)
    self._packed = None  # The packed signature (SavedModel exports).
    if self._runner:
      outputs = self._runner.outputs
    else:
      outputs = self._load_saved_model()
    check_served_outputs(self.config, os.path.join(
        self.version_dir, export_utils.ASSETS_DIR, export_utils.SERVING_ASSET),
                         outputs)

  def _load_saved_model(self):
    """Loads the SavedModel; returns its outputs' names -> shapes."""
    logging.info("Loading SavedModel %s (%s)", self.version_dir, self.kind)
    loggers = [std_logging.getLogger(name) for name in ("absl", "tensorflow")]
    for logger in loggers:
      logger.addFilter(_no_fingerprint_note)
    try:
      # TensorFlow finds the variables by pattern: `[` in a name breaks it.
      self._loaded = tf2.saved_model.load(
          checkpoint_checks.readable_prefix(self.version_dir))
      self._signature = self._loaded.signatures["serving_default"]
      self._packed = self._loaded.signatures.get(
          export_utils.PACKED_SIGNATURE)
      outputs = {name: spec.shape.as_list() for name, spec in
                 self._signature.structured_outputs.items()}
    except (tf2.errors.OpError, ValueError, OSError, KeyError) as e:
      raise ValueError(
          "--model_dir: %s: the SavedModel cannot be loaded (%s: %s); the "
          "export is damaged (a truncated variables/ file?): export it "
          "again" % (self.version_dir, type(e).__name__,
                     disk.essential_text(e))) from None
    finally:
      for logger in loggers:
        logger.removeFilter(_no_fingerprint_note)
    if self.config.get("max_examples_per_row") and self._packed is None:
      raise ValueError(
          "--model_dir: %s: serving_config.json has max_examples_per_row=%d "
          "but the SavedModel has no %s signature: export it again" %
          (self.version_dir, self.config["max_examples_per_row"],
           export_utils.PACKED_SIGNATURE))
    return outputs

  def run(self, input_ids, input_mask, segment_ids):
    """Runs the signature on int arrays [batch_size, max_seq_length]; a
    --bucket_by_length export gets the batch cut to a bucket (per-token
    outputs then have that length). Returns name -> numpy array."""
    arrays = [np.asarray(value, dtype=np.int32)
              for value in (input_ids, input_mask, segment_ids)]
    buckets = self.config.get("bucket_lengths")
    if buckets:
      longest = int(arrays[1].sum(axis=1).max()) if arrays[1].size else 0
      length = lengths_lib.python_bucket_length(buckets, longest)
      arrays = [array[:, :length] for array in arrays]
    if self._runner:
      return self._runner.run(*arrays)
    inputs = {name: tf2.constant(array)
              for name, array in zip(export_utils.INPUT_NAMES, arrays)}
    return {k: v.numpy() for k, v in self._signature(**inputs).items()}

  def run_packed(self, rows):
    """Runs the packed signature on rows of `packing.pack` (dicts of
    `export_utils.PACKED_INPUT_NAMES`: int lists [max_seq_length], and
    `cls_positions` [k], k at most the export's `max_examples_per_row`).

    Returns:
      name -> numpy array [len(rows), k, ...], k the widest row's slots;
      a NER export's [len(rows), max_seq_length, num_labels], per token.

    Raises:
      ValueError: one line: an export or --convert_to folder without the
        packed model (`packed_slots`), rows longer than `max_seq_length` or wider than
        `max_examples_per_row`.
    """
    slots = packed_slots(self.version_dir, self.config)
    width = max(len(row["cls_positions"]) for row in rows)
    length = max(len(row["input_ids"]) for row in rows)
    if width > slots or length > self.max_seq_length:
      raise ValueError(
          "--max_examples_per_row: rows of %d examples and %d tokens, "
          "expected at most the export's max_examples_per_row=%d and "
          "max_seq_length=%d (%s)" % (width, length, slots,
                                      self.max_seq_length, self.version_dir))
    names = export_utils.packed_input_names(self.kind)
    inputs = {name: np.array([
        list(row[name]) + [0] * ((slots if name == "cls_positions" else
                                  self.max_seq_length) - len(row[name]))
        for row in rows], np.int32) for name in names}
    if self._runner:
      outputs = self._runner.run_packed(inputs)
    else:
      outputs = {k: v.numpy() for k, v in self._packed(**{
          k: tf2.constant(v) for k, v in inputs.items()}).items()}
    if "cls_positions" not in names:  # Per-token outputs.
      return outputs
    return {k: v[:, :width] for k, v in outputs.items()}

  def predict_packed(self, sequences, max_examples_per_row, batch_size):
    """Each input's outputs, its inputs packed into rows (`packing.pack`)
    of at most `max_examples_per_row`, `batch_size` rows a `run_packed`.

    Args:
      sequences: list of dicts of `input_ids` and `segment_ids`, each an
        input's unpadded int list ([CLS] first).

    Returns:
      list of dicts name -> numpy array, in input order; a NER export's
      per-token `probabilities` [max_seq_length, num_labels] hold the
      input's own tokens first, then zeros (its unpacked layout).
    """
    rows = packing.pack(sequences, self.max_seq_length, max_examples_per_row)
    logging.info("Packed %d inputs into %d rows of %d tokens", len(sequences),
                 len(rows), self.max_seq_length)
    outputs = []
    for first in range(0, len(rows), batch_size):
      batch = rows[first:first + batch_size]
      served = self.run_packed(batch)
      outputs.extend(dict({k: v[i] for k, v in served.items()}, **{
          k: np.array(row[k]) for k in ("example_index", "input_mask")})
                     for i, row in enumerate(batch))
    return packing.unpack(outputs, len(sequences), token_keys=(
        self.config["output_keys"] if self.kind == export_utils.NER else ()))

  def classify(self, text_a, text_b=None):
    """Classifies one text or pair: {label: probability}, or the predicted
    float of a regression export. An export with `doc_stride`
    (`run_classifier.py --doc_stride`) reads a long `text_a` in its
    windows and combines them by its `window_aggregation`."""
    if self.kind not in _CLASSIFY:
      raise ValueError("classify: %s is a %s export" %
                       (self.version_dir, self.kind))
    doc_stride = self.config.get("doc_stride")
    if doc_stride is None:
      ids, mask, segments, _ = encode_text(self.tokenizer, text_a, text_b,
                                           self.max_seq_length)
      return _CLASSIFY[self.kind](self.config,
                                  self.run([ids], [mask], [segments]))
    windows = classifier_windows.encode_windows(
        classifier_data.InputExample("classify", text_a, text_b),
        self.tokenizer, self.max_seq_length, doc_stride)
    key = self.config["output_keys"][0]
    outputs = self.run(*(np.array(x) for x in zip(*windows)))[key]
    combined, = classifier_windows.aggregate(
        ({key: row} for row in outputs), [0] * len(windows), 1,
        self.config.get("window_aggregation") or "mean")
    return _CLASSIFY[self.kind](self.config, {
        key: np.reshape(combined, (1,) + np.shape(outputs)[1:])})

  def answer(self, question, context, n_best_size=20, max_answer_length=30,
             null_score_diff_threshold=0.0, batch_size=8):
    """Answers a question about a context (SQuAD exports), over windows of
    the export's `doc_stride`: {"text" ("" for no answer), "nbest": list of
    {text, probability, start_logit, end_logit}}."""
    if self.kind != export_utils.SQUAD:
      raise ValueError("answer: %s is a %s export" %
                       (self.version_dir, self.kind))
    doc_tokens, _ = squad_data.split_document(context)
    example = squad_data.SquadExample("q", question, doc_tokens)
    written = predict_squad(self, [example], None, n_best_size,
                            max_answer_length, null_score_diff_threshold,
                            batch_size)
    return {"text": written.predictions["q"], "nbest": written.nbest["q"]}


def predict_squad(model, examples, output_dir, n_best_size, max_answer_length,
                  null_score_diff_threshold, batch_size, log_every=100):
  """Predicts SQuAD examples with a loaded export in batches of
  `batch_size`, writing predictions.json, nbest_predictions.json (and
  null_odds.json for 2.0) in `output_dir` (None: a temporary folder).
  Returns `squad_predictions.WrittenPredictions`."""
  config = model.config
  metadata, results, pending = [], [], []
  truncated_questions = set()
  batches = [0]

  def flush():
    if not pending:
      return
    outputs = model.run([f.input_ids for f in pending],
                        [f.input_mask for f in pending],
                        [f.segment_ids for f in pending])
    for i, feature in enumerate(pending):
      results.append(squad_predictions.RawResult(
          unique_id=feature.unique_id,
          start_logits=[float(x) for x in outputs["start_logits"][i]],
          end_logits=[float(x) for x in outputs["end_logits"][i]]))
    del pending[:]
    batches[0] += 1
    if batches[0] % log_every == 0:
      logging.info("Predicted %d features", len(results))

  def on_feature(feature):
    metadata.append(squad_predictions.FeatureMetadata(
        feature.unique_id, feature.example_index, feature.doc_span_index,
        feature.tokens, feature.token_to_orig_map,
        feature.token_is_max_context))
    pending.append(feature)
    if len(pending) >= batch_size:
      flush()

  def counted(examples):
    for example in examples:
      if (len(model.tokenizer.tokenize(example.question_text)) >
          config["max_query_length"]):
        truncated_questions.add(example.qas_id)
      yield example

  squad_data.convert_examples_to_features(
      counted(examples), model.tokenizer, config["max_seq_length"],
      config["doc_stride"], config["max_query_length"], is_training=False,
      output_fn=on_feature)
  flush()
  if truncated_questions:
    logging.warning("%d of %d questions were longer than max_query_length=%d"
                    " tokens and were truncated (as in training)",
                    len(truncated_questions), len(examples),
                    config["max_query_length"])
  logging.info("Predicted %d features of %d questions", len(results),
               len(examples))
  version_2 = bool(config.get("version_2_with_negative", False))
  with tempfile.TemporaryDirectory() as scratch:
    out = output_dir or scratch
    return squad_predictions.write_predictions(
        examples, metadata, results, n_best_size, max_answer_length,
        config["do_lower_case"], os.path.join(out, "predictions.json"),
        os.path.join(out, "nbest_predictions.json"),
        os.path.join(out, "null_odds.json"),
        version_2_with_negative=version_2,
        null_score_diff_threshold=null_score_diff_threshold)
