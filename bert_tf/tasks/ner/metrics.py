"""Word labels from the model's predictions, and entity-level scores.

`word_predictions` takes each word's label from the window where it has the
most context; `entity_scores` computes entity-level precision, recall and
F1 with conlleval's chunking (seqeval's default mode) and token accuracy;
`write_conll_predictions` writes the `token gold pred` lines conlleval.pl
reads.
"""

import numpy as np
from seqeval import metrics as seqeval_metrics

from bert_tf import io as io_utils
from bert_tf.tasks.ner import tags as ner_tags

__all__ = ["word_predictions", "entity_scores", "eval_results_entries",
           "write_conll_predictions"]


def word_predictions(sentences, features, predictions, label_list):
  """Each word's predicted label, from the window with its most context.

  Args:
    sentences: list of `reader.Sentence` the features were made from.
    features: list of `features.NerFeature` (TPU padding included), in input order.
    predictions: iterable of dicts with `unique_ids` and `probabilities`
      ([max_seq_length, num_labels]), one per feature, in the same order.
    label_list: list of str.

  Returns:
    list (one per sentence) of lists of str labels; words with no WordPiece
    are "O".

  Raises:
    ValueError: when predictions and features do not pair up.
  """
  result = [[None] * len(s.words) for s in sentences]
  count = 0
  for feature, prediction in zip(features, predictions):
    count += 1
    if int(prediction["unique_ids"]) != feature.unique_id:
      raise ValueError("prediction %d has unique id %d, expected %d" %
                       (count - 1, int(prediction["unique_ids"]),
                        feature.unique_id))
    if not feature.is_real_example:
      continue
    ids = np.argmax(prediction["probabilities"], axis=-1)
    words = result[feature.sentence_index]
    for position, word in enumerate(feature.word_index):
      if word >= 0 and feature.is_max_context[position]:
        words[word] = label_list[int(ids[position])]
  if count != len(features):
    raise ValueError("got %d predictions for %d features" %
                     (count, len(features)))
  return [[label if label is not None else "O" for label in words]
          for words in result]


def entity_scores(gold, predicted, types=()):
  """Entity-level precision, recall and F1, and token accuracy.

  Entities are chunks as conlleval reads them (seqeval's default mode): a
  chunk starts at B-X, S-X, or at I-X/E-X after O or another type, and ends
  before O, B-, S- or another type. This is right for IOB1, IOB2 and IOBES
  alike. Scores are micro-averaged, on the 0-1 scale, 0 where undefined.

  Args:
    gold: list of lists of str tags.
    predicted: list of lists of str tags, same shapes.
    types: entity types to report even when absent (e.g. the training set's).

  Returns:
    dict: "precision", "recall", "f1", "accuracy" (floats) and "types":
    {type: {"precision", "recall", "f1", "support"}} for every type in
    `types`, the gold tags or the predictions.
  """
  if [len(g) for g in gold] != [len(p) for p in predicted]:
    raise ValueError("gold and predicted tags differ in shape")
  scores = {
      "precision": float(seqeval_metrics.precision_score(
          gold, predicted, zero_division=0)),
      "recall": float(seqeval_metrics.recall_score(
          gold, predicted, zero_division=0)),
      "f1": float(seqeval_metrics.f1_score(gold, predicted, zero_division=0)),
  }
  num_tokens = sum(len(g) for g in gold)
  correct = sum(a == b for g, p in zip(gold, predicted)
                for a, b in zip(g, p))
  scores["accuracy"] = correct / num_tokens if num_tokens else 0.0
  report = {}
  if any(ner_tags.parse_tag(t)[1] for s in gold + predicted for t in s):
    report = seqeval_metrics.classification_report(
        gold, predicted, output_dict=True, zero_division=0)
  per_type = {}
  for name in sorted(set(types) | {k for k in report if " avg" not in k}):
    row = report.get(name, {})
    per_type[name] = {"precision": float(row.get("precision", 0.0)),
                      "recall": float(row.get("recall", 0.0)),
                      "f1": float(row.get("f1-score", 0.0)),
                      "support": int(row.get("support", 0))}
  scores["types"] = per_type
  return scores


def eval_results_entries(scores):
  """`eval_results.txt` keys from `entity_scores`: eval_precision,
  eval_recall, eval_f1, eval_accuracy and eval_f1_<TYPE>."""
  entries = {"eval_precision": scores["precision"],
             "eval_recall": scores["recall"], "eval_f1": scores["f1"],
             "eval_accuracy": scores["accuracy"]}
  for name, row in scores["types"].items():
    entries["eval_f1_%s" % name] = row["f1"]
  return entries


def write_conll_predictions(path, sentences, predicted):
  """Writes `token gold pred` lines (`token pred` without gold labels),
  space-separated, a blank line between sentences, atomically; the format
  conlleval.pl reads. -DOCSTART- lines are not written.
  """
  with io_utils.atomic_write(path) as f:
    for index, (sentence, labels) in enumerate(zip(sentences, predicted)):
      if index:
        f.write("\n")
      gold = sentence.labels or [None] * len(sentence.words)
      for word, gold_label, label in zip(sentence.words, gold, labels):
        cells = [word] if gold_label is None else [word, gold_label]
        f.write(" ".join(cells + [label]) + "\n")
