"""SQuAD 1.1/2.0 as one task: its files, records, head and predictions.

`SquadTask` reads the SQuAD JSON files (`data.py`), writes their windowed
features, trains `model.SpanHead` and writes the predictions
(`predictions.py`): predictions.json, nbest_predictions.json, null_odds.json
(2.0) and, when the predicted file has answers, eval_results.json.
`run_squad.py` reads its flags into `SquadOptions`; nothing here reads flags.
"""

import dataclasses
import os
import random

from absl import logging

from bert_tf.tasks.squad import data as squad_data
from bert_tf.tasks.squad import model as squad_model
from bert_tf.tasks.squad import predictions as squad_predictions

__all__ = ["SquadOptions", "SquadTask"]


@dataclasses.dataclass(frozen=True)
class SquadOptions:
  """A SQuAD run's files and sizes (`run_squad.py`'s flags of the same names).

  Attributes:
    train_file, predict_file: str or None, SQuAD JSON files.
    output_dir: str, where records and predictions go.
    max_seq_length, doc_stride, max_query_length: int, in tokens.
    version_2_with_negative: bool, SQuAD 2.0.
    n_best_size, max_answer_length: int, the n-best search.
    do_lower_case, verbose_logging: bool.
    null_score_diff_threshold: float, SQuAD 2.0's no-answer margin.
    predict_batch_size: int.
  """

  train_file: str
  predict_file: str
  output_dir: str
  max_seq_length: int = 384
  doc_stride: int = 128
  max_query_length: int = 64
  version_2_with_negative: bool = False
  n_best_size: int = 20
  max_answer_length: int = 30
  do_lower_case: bool = True
  verbose_logging: bool = False
  null_score_diff_threshold: float = 0.0
  predict_batch_size: int = 8


class SquadTask:
  """A SQuAD run's data, head (`model.SpanHead`) and outputs."""

  def __init__(self, options: SquadOptions, tokenizer):
    self.options = options
    self.tokenizer = tokenizer
    self.head = squad_model.SpanHead()

  def _read(self, path, is_training):
    return squad_data.read_squad_examples(
        path, is_training=is_training,
        version_2_with_negative=self.options.version_2_with_negative)

  def _write_features(self, name, examples, is_training):
    """Writes `<output_dir>/<name>.tf_record`.

    Returns:
      (path, number of features, list of `FeatureMetadata`; empty when
      training).
    """
    o = self.options
    path = os.path.join(o.output_dir, name + ".tf_record")
    metadata = []
    with squad_data.FeatureWriter(path, is_training=is_training) as writer:

      def keep_and_write(feature):
        if not is_training:
          metadata.append(squad_predictions.FeatureMetadata(
              feature.unique_id, feature.example_index,
              feature.doc_span_index, feature.tokens,
              feature.token_to_orig_map, feature.token_is_max_context))
        writer.process_feature(feature)

      squad_data.convert_examples_to_features(
          examples, self.tokenizer, o.max_seq_length, o.doc_stride,
          o.max_query_length, is_training=is_training,
          output_fn=keep_and_write)
    return path, writer.num_features, metadata

  def _input_fn(self, path, is_training):
    return squad_model.input_fn_builder(
        path, self.options.max_seq_length, is_training=is_training,
        drop_remainder=is_training)

  def training_records(self):
    """Reads the training questions, shuffled with the reference's seed,
    and writes their features.

    Returns:
      (input_fn, records, num_examples): the training `input_fn`, the
      record files it reads and the number of questions (an epoch).

    Raises:
      ValueError: the training file holds no usable question.
    """
    o = self.options
    examples = self._read(o.train_file, is_training=True)
    if not examples:
      # Training on nothing would loop forever over an empty dataset.
      raise ValueError("--train_file: %s holds no usable training question "
                       "(none, or all skipped)" % o.train_file)
    random.Random(12345).shuffle(examples)
    path, num_features, _ = self._write_features("train", examples, True)
    logging.info("Training on %d examples, %d features", len(examples),
                 num_features)
    return self._input_fn(path, True), [path], len(examples)

  def predict(self, steps, checkpoint=None):
    """The `loop.run` prediction: answers the questions of the predict
    file and writes the predictions, scored when it has answers."""
    o = self.options
    examples = self._read(o.predict_file, is_training=False)
    path, num_features, metadata = self._write_features("eval", examples,
                                                        False)
    batch_size = o.predict_batch_size
    logging.info("  %d examples, %d features, batch size %d", len(examples),
                 num_features, batch_size)
    results = []
    for prediction in steps.predict(
        self._input_fn(path, False), records=[path],
        num_batches=-(-num_features // batch_size),
        checkpoint_path=checkpoint, batch_size=batch_size):
      results.append(squad_predictions.RawResult(
          unique_id=int(prediction["unique_ids"]),
          start_logits=[float(x) for x in prediction["start_logits"].flat],
          end_logits=[float(x) for x in prediction["end_logits"].flat]))
      if len(results) % 1000 == 0:
        logging.info("Predicted %d of %d features", len(results),
                     num_features)
    out = o.output_dir
    written = squad_predictions.write_predictions(
        examples, metadata, results, o.n_best_size, o.max_answer_length,
        o.do_lower_case, os.path.join(out, "predictions.json"),
        os.path.join(out, "nbest_predictions.json"),
        os.path.join(out, "null_odds.json"),
        version_2_with_negative=o.version_2_with_negative,
        null_score_diff_threshold=o.null_score_diff_threshold,
        verbose_logging=o.verbose_logging)
    squad_predictions.score_predictions(
        o.predict_file, written, o.version_2_with_negative, out)

  def serving_config(self):
    """The keys an export adds to serving_config.json."""
    o = self.options
    return {"doc_stride": o.doc_stride,
            "max_query_length": o.max_query_length,
            "version_2_with_negative": o.version_2_with_negative}
