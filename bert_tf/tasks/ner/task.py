"""Named-entity recognition as one task: its files, records, head, outputs.

`NerTask` reads and checks the CoNLL files a run needs (`reader.py`,
`tags.py`), makes their windowed features (`features.py`) and records,
trains `model.TokenHead`, evaluates (the in-graph loss, then the entity
scores of the predictions, `metrics.py`) and writes `dev_predictions.txt`
and `test_predictions.txt`. `run_ner.py` reads its flags into `NerOptions`
and calls it; nothing here reads flags. `window_features` and
`write_test_predictions` are also predict_saved_model.py's, for NER
exports.
"""

import dataclasses
import math
import os
from typing import Optional

from absl import logging

from bert_tf.tasks.ner import features as ner_features
from bert_tf.tasks.ner import metrics as ner_metrics
from bert_tf.tasks.ner import model as ner_model
from bert_tf.tasks.ner import reader as ner_reader
from bert_tf.tasks.ner import tags as ner_tags
from bert_tf.train import hooks as train_hooks
from bert_tf.train import input_fn as input_utils
from bert_tf.train import lengths as lengths_lib
from bert_tf.train import packing

__all__ = ["NerOptions", "NerTask", "window_features",
           "write_test_predictions"]


@dataclasses.dataclass(frozen=True)
class NerOptions:
  """A NER run's files and sizes (`run_ner.py`'s flags of the same names).

  Attributes:
    data_dir: str, the folder of the CoNLL files.
    train_file, dev_file, test_file: str, file names in `data_dir`.
    label_column: int, the column of the labels.
    tag_scheme: "auto", "IOB1", "IOB2" or "IOBES".
    max_seq_length, doc_stride: int, window length and stride in tokens.
    document_context: bool, neighbouring sentences around each sentence.
    output_dir: str, where records, labels and predictions go.
    bucket_by_length: bool, batches of similar lengths.
    eval_batch_size, predict_batch_size: int.
    use_tpu: bool; TPU batches are whole, so the files are padded.
    max_examples_per_row: int, or None: records are packed rows of up to
      this many windows (`packing`).
  """

  data_dir: str
  train_file: str
  dev_file: str
  test_file: str
  label_column: int
  tag_scheme: str
  max_seq_length: int
  doc_stride: int
  document_context: bool
  output_dir: str
  bucket_by_length: bool = False
  eval_batch_size: int = 8
  predict_batch_size: int = 8
  use_tpu: bool = False
  max_examples_per_row: Optional[int] = None


class NerTask:
  """A NER run's data, head and outputs.

  Made once the start-up checks passed: reads and checks every file the
  run needs (raising `ValueError` naming the file and line) and makes the
  dev and test features up front.

  Attributes:
    label_list: the sorted labels of the training file (or of the label
      list written by the training run).
    head: `model.TokenHead` over them.
  """

  def __init__(self, options: NerOptions, run, tokenizer):
    """Args: `NerOptions`, checked `options.RunOptions`, a FullTokenizer."""
    self.options = options
    self.tokenizer = tokenizer
    self.files, self.label_list = self._read_inputs(run)
    self.head = ner_model.TokenHead(len(self.label_list))
    # The dev features are both evaluated and predicted: on TPU they fill
    # whole batches of both sizes.
    self.features = {}
    for split, pad_to in (
        ("dev", math.lcm(options.eval_batch_size,
                         options.predict_batch_size)),
        ("test", options.predict_batch_size)):
      if split in self.files:
        self.features[split] = self._features(
            split, pad_to if options.use_tpu else None)

  def eval_keys(self):
    """The keys of eval_results.txt (for --keep_best_by)."""
    return {"eval_loss", "loss", "global_step", "eval_precision",
            "eval_recall", "eval_f1", "eval_accuracy"} | {
                "eval_f1_%s" % t for t in ner_tags.entity_types(
                    self.label_list)}

  def _read_inputs(self, run):
    """(files, label_list): split -> (path, list of `Sentence`) for
    "train", "dev", "test" as `run` asks; the sorted training labels."""
    o = self.options
    files = {}
    for split, wanted, name in (("train", run.do_train, o.train_file),
                                ("dev", run.do_eval, o.dev_file),
                                ("test", run.do_predict, o.test_file)):
      if wanted:
        path = os.path.join(o.data_dir, name)
        files[split] = (path, ner_reader.read_conll_file(path,
                                                         o.label_column))
        logging.info("Read %d sentences from %s", len(files[split][1]), path)
    label_file = os.path.join(o.output_dir, ner_reader.LABEL_LIST_FILE)
    if run.do_train:
      label_list = ner_reader.label_list_from(files["train"][1],
                                              files["train"][0])
      what = "the training file %s" % files["train"][0]
    else:
      label_list = ner_reader.read_label_list(label_file)
      what = "the label list %s" % label_file
    if "dev" in files and files["dev"][1][0].labels is None:
      raise ValueError("%s: no label column; --do_eval needs gold labels" %
                       files["dev"][0])
    for path, sentences in files.values():
      ner_reader.check_labels(sentences, label_list, path, what)
    scheme = o.tag_scheme
    if scheme == "auto":
      gold = [s.labels for _, sentences in files.values() for s in sentences
              if s.labels is not None]
      scheme = ner_tags.detect_tag_scheme(gold)
      logging.info("Tag scheme: %s (detected)", scheme)
    for path, sentences in files.values():
      ner_tags.warn_invalid_tags(sentences, scheme, path)
    return files, label_list

  def _features(self, split, pad_to=None):
    """Features of one file; TPU runs pad them to a multiple of `pad_to`."""
    o = self.options
    features = window_features(
        *self.files[split], self.label_list, self.tokenizer,
        o.max_seq_length, o.doc_stride, o.document_context)
    if pad_to:
      while len(features) % pad_to:
        features.append(ner_features.padding_feature(len(features),
                                                     o.max_seq_length))
    return features

  def _record_file(self, name):
    return os.path.join(self.options.output_dir, name + ".tf_record")

  def _input_fn(self, features, name, is_training):
    """Writes `<output_dir>/<name>.tf_record`; the input_fn over it and
    its number of records."""
    o = self.options
    if o.max_examples_per_row:
      return self._packed_input_fn(features, name, is_training)
    ner_features.write_features(features, self._record_file(name))
    return input_utils.tfrecord_input_fn_builder(
        [self._record_file(name)],
        ner_features.name_to_features(o.max_seq_length),
        is_training=is_training, drop_remainder=is_training or o.use_tpu,
        length_buckets=(lengths_lib.bucket_lengths(o.max_seq_length)
                        if o.bucket_by_length else None),
        sequence_keys=ner_features.SEQUENCE_KEYS), len(features)

  def _packed_input_fn(self, features, name, is_training):
    """`_input_fn` over packed rows of the real features (TPU: whole
    batches of both sizes); training keeps the features' order
    (`packing.training_input_fn`) and its batches count features."""
    o = self.options
    real = [f for f in features if f.is_real_example]
    rows = packing.pack([{key: getattr(f, key)[:sum(f.input_mask)] for key in (
        "input_ids", "segment_ids", "label_ids", "label_weights")}
                         for f in real], o.max_seq_length,
                        o.max_examples_per_row,
                        window=packing.TRAINING_SPAN if is_training else None)
    pad_to = math.lcm(o.eval_batch_size, o.predict_batch_size)
    while o.use_tpu and not is_training and len(rows) % pad_to:
      rows.append(packing.empty_row(o.max_seq_length,
                                    o.max_examples_per_row))
    packing.write_rows(self._record_file(name), rows)
    logging.info("Packed %d features into %d rows", len(real), len(rows))
    schema = packing.input_features(o.max_seq_length, o.max_examples_per_row)
    for key in ("label_ids", "label_weights"):
      schema[key] = schema["input_ids"]
    if is_training:
      return packing.training_input_fn(
          self._record_file(name), schema,
          len(real) / max(1, len(rows))), len(rows)
    return input_utils.tfrecord_input_fn_builder(
        [self._record_file(name)], schema, is_training=False,
        drop_remainder=o.use_tpu), len(rows)

  def _predict_words(self, steps, split, name, checkpoint_path=None):
    """Each word's predicted label (see `metrics.word_predictions`)."""
    features = self.features[split]
    batch_size = self.options.predict_batch_size
    input_fn, num_records = self._input_fn(features, name, is_training=False)
    predictions = steps.predict(
        input_fn, records=[self._record_file(name)],
        num_batches=-(-num_records // batch_size),
        checkpoint_path=checkpoint_path, batch_size=batch_size)
    if self.options.max_examples_per_row:  # In feature order.
      real = sum(f.is_real_example for f in features)
      predictions = packing.unpack(predictions, real, token_keys=(
          "probabilities", "predictions")) + [{}] * (len(features) - real)
      for feature, prediction in zip(features, predictions):
        prediction["unique_ids"] = feature.unique_id
    return ner_metrics.word_predictions(self.files[split][1], features,
                                        predictions, self.label_list)

  def training_records(self):
    """Writes the label list and the training records.

    Returns:
      (input_fn, records, num_features): the training `input_fn`, the
      record files it reads and their number of features.

    Raises:
      ValueError: no word of the training file has a WordPiece.
    """
    ner_reader.write_label_list(
        os.path.join(self.options.output_dir, ner_reader.LABEL_LIST_FILE),
        self.label_list)
    features = self._features("train")
    if not features:
      raise ValueError("%s: no word of any sentence has a WordPiece; "
                       "nothing to train on" % self.files["train"][0])
    logging.info("Training on %d features", len(features))
    return (self._input_fn(features, "train", is_training=True)[0],
            [self._record_file("train")], len(features))

  def evaluate(self, steps):
    """The `loop.run` evaluation of the dev file: the in-graph loss, then
    the entity scores of its predictions (also in TensorBoard), and
    dev_predictions.txt."""
    o = self.options
    features = self.features["dev"]
    sentences = self.files["dev"][1]
    logging.info("***** Running evaluation: %d features *****",
                 len(features))
    input_fn, num_records = self._input_fn(features, "eval",
                                           is_training=False)
    result = steps.evaluate(
        input_fn, records=[self._record_file("eval")],
        steps=num_records // o.eval_batch_size if o.use_tpu else None)
    predicted = self._predict_words(steps, "dev", "eval")
    scores = ner_metrics.entity_scores(
        [s.labels for s in sentences], predicted,
        ner_tags.entity_types(self.label_list))
    entity_results = ner_metrics.eval_results_entries(scores)
    result.update(entity_results)
    train_hooks.write_eval_summaries(o.output_dir, entity_results,
                                     result["global_step"])
    ner_metrics.write_conll_predictions(
        os.path.join(o.output_dir, "dev_predictions.txt"), sentences,
        predicted)
    return result

  def predict(self, steps, checkpoint: Optional[str] = None):
    """Writes test_predictions.txt (`checkpoint`, the kept best, else the
    latest); logs the scores when the file has labels."""
    path, sentences = self.files["test"]
    logging.info("  %d features", len(self.features["test"]))
    predicted = self._predict_words(steps, "test", "predict",
                                    checkpoint_path=checkpoint)
    write_test_predictions(self.options.output_dir, path, sentences,
                           predicted, self.label_list)


def window_features(path, sentences, label_list, tokenizer, max_seq_length,
                    doc_stride, document_context):
  """The windowed `features.NerFeature`s of the sentences read from `path`
  (`features.convert_sentences_to_features`); logs their number and warns
  of words without a WordPiece."""
  features, num_empty = ner_features.convert_sentences_to_features(
      sentences, label_list, tokenizer, max_seq_length, doc_stride,
      document_context)
  if num_empty:
    logging.warning("%s: %d words became no WordPiece (control characters "
                    "only); they are predicted O", path, num_empty)
  logging.info("%s: %d sentences -> %d features", path, len(sentences),
               len(features))
  return features


def write_test_predictions(output_dir, path, sentences, predicted,
                           label_list):
  """Writes `output_dir/test_predictions.txt` (`token gold pred` lines) of
  the sentences read from `path`, each word's predicted label in
  `predicted`; logs the entity scores when the file has labels."""
  ner_metrics.write_conll_predictions(
      os.path.join(output_dir, "test_predictions.txt"), sentences, predicted)
  if sentences[0].labels is not None:
    scores = ner_metrics.entity_scores(
        [s.labels for s in sentences], predicted,
        ner_tags.entity_types(label_list))
    logging.info("Test set (%s): precision %.4f, recall %.4f, F1 %.4f, "
                 "token accuracy %.4f", path, scores["precision"],
                 scores["recall"], scores["f1"], scores["accuracy"])
