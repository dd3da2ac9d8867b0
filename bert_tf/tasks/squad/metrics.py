"""Official SQuAD scores (exact match and token F1), computed in-process
when the predicted file carries answers (the reference leaves them to
`evaluate-v1.1.py` and `evaluate-v2.0.py`); the official keys, 0-100.

* 1.1: `exact_match`, `f1`, each question's best over its gold answers.
* 2.0: `exact`, `f1`, `total`, the same for `HasAns_*` and `NoAns_*` (for
  groups not empty), and `best_exact`, `best_f1` with their thresholds
  over the null odds.

Normalization: lowercase, no ASCII punctuation, no a/an/the, collapsed
whitespace. As the official scripts, an empty prediction against an empty
gold has F1 0 in 1.1 and 1 in 2.0.
"""

import collections
import re
import string

from bert_tf import json_file

__all__ = [
    "normalize_answer", "exact_match", "token_f1", "gold_answers",
    "evaluate_v1", "evaluate_v2", "best_threshold", "best_f1_predictions",
]

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)

V1_KEYS = ("exact_match", "f1")
V2_KEYS = ("exact", "f1", "total", "HasAns_exact", "HasAns_f1",
           "HasAns_total", "NoAns_exact", "NoAns_f1", "NoAns_total",
           "best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh")


def normalize_answer(text):
  """Lowercases, removes punctuation, articles and extra whitespace."""
  text = text.lower()
  text = "".join(ch for ch in text if ch not in _PUNCTUATION)
  text = _ARTICLES.sub(" ", text)
  return " ".join(text.split())


def exact_match(prediction, gold):
  """1 when the normalized strings are equal, else 0."""
  return int(normalize_answer(prediction) == normalize_answer(gold))


def token_f1(prediction, gold, empty_matches_empty=True):
  """Token F1 (in [0, 1]) of `prediction` against one `gold` answer after
  normalization; an empty side scores 0, or with `empty_matches_empty`
  (2.0) 1 when both are empty."""
  pred_tokens = normalize_answer(prediction).split()
  gold_tokens = normalize_answer(gold).split()
  if empty_matches_empty and (not pred_tokens or not gold_tokens):
    return float(pred_tokens == gold_tokens)
  common = collections.Counter(pred_tokens) & collections.Counter(gold_tokens)
  num_same = sum(common.values())
  if num_same == 0:
    return 0.0
  precision = num_same / len(pred_tokens)
  recall = num_same / len(gold_tokens)
  return 2 * precision * recall / (precision + recall)


def gold_answers(dataset, source="the SQuAD file"):
  """OrderedDict qas_id -> gold answer texts (None: no "answers" field) of
  a SQuAD JSON's "data" list.

  Raises:
    ValueError: a value of the wrong type, naming `source` and key path.
  """
  gold = collections.OrderedDict()
  for a, article in enumerate(dataset):
    a_where = "data[%d]" % a
    paragraphs = json_file.field(article, "paragraphs", "list", source,
                                 a_where, default=[])
    for p, paragraph in enumerate(paragraphs):
      p_where = "%s.paragraphs[%d]" % (a_where, p)
      qas = json_file.field(paragraph, "qas", "list", source, p_where,
                            default=[])
      for q, qa in enumerate(qas):
        q_where = "%s.qas[%d]" % (p_where, q)
        qas_id = json_file.field(qa, "id", "string", source, q_where)
        answers = json_file.field(qa, "answers", ("list", "null"), source,
                                  q_where, default=None)
        gold[qas_id] = None if answers is None else [
            json_file.field(answer, "text", "string", source,
                            "%s.answers[%d]" % (q_where, i), default="")
            for i, answer in enumerate(answers)]
  return gold


def evaluate_v1(gold, predictions):
  """`exact_match` and `f1` (0-100) as `evaluate-v1.1.py`: `gold` qas_id
  -> texts, `predictions` qas_id -> text (a missing one scores 0)."""
  exact = f1 = 0.0
  for qas_id, answers in gold.items():
    prediction = predictions.get(qas_id)
    if prediction is None:
      continue
    exact += max(exact_match(prediction, a) for a in answers)
    f1 += max(token_f1(prediction, a, empty_matches_empty=False)
              for a in answers)
  total = max(len(gold), 1)
  return collections.OrderedDict([("exact_match", 100.0 * exact / total),
                                  ("f1", 100.0 * f1 / total)])


def _v2_raw_scores(gold, predictions):
  """Per-question exact and F1 (0/1 scale) against non-empty gold answers."""
  exact, f1 = {}, {}
  for qas_id, answers in gold.items():
    answers = [a for a in answers if normalize_answer(a)] or [""]
    prediction = predictions.get(qas_id, "")
    exact[qas_id] = max(exact_match(prediction, a) for a in answers)
    f1[qas_id] = max(token_f1(prediction, a) for a in answers)
  return exact, f1


def _mean_dict(exact, f1, qas_ids):
  total = len(qas_ids)
  return collections.OrderedDict([
      ("exact", 100.0 * sum(exact[q] for q in qas_ids) / total),
      ("f1", 100.0 * sum(f1[q] for q in qas_ids) / total),
      ("total", total)])


def best_threshold(scores, null_odds, has_answer, answers):
  """(best score 0-100, threshold, all_null) over null thresholds, as the
  official 2.0 script: questions visited in increasing `null_odds`;
  predicting "no answer" everywhere reports the threshold 0.0 and
  `all_null` True. `scores` (0/1) are of `answers`, the non-null texts."""
  current = best = sum(1 for q in scores if not has_answer[q])
  threshold, all_null = 0.0, True
  for qas_id in sorted(null_odds, key=lambda q: null_odds[q]):
    if qas_id not in scores:
      continue
    if has_answer[qas_id]:
      current += scores[qas_id]
    elif answers[qas_id]:
      current -= 1
    if current > best:
      best, threshold, all_null = current, null_odds[qas_id], False
  return 100.0 * best / max(len(scores), 1), threshold, all_null


def evaluate_v2(gold, predictions, null_odds, best_non_null):
  """SQuAD 2.0 scores, as `evaluate-v2.0.py --na-prob-file`.

  `exact`/`f1` score `predictions` ("" = no answer) against `gold` ([] for
  unanswerable); `best_*` sweep the threshold over `null_odds`, answering
  with `best_non_null`, so the threshold suits
  `--null_score_diff_threshold`. Returns an OrderedDict of `V2_KEYS`.
  """
  has_answer = {q: any(normalize_answer(a) for a in answers)
                for q, answers in gold.items()}
  exact, f1 = _v2_raw_scores(gold, predictions)
  results = _mean_dict(exact, f1, list(gold))
  for prefix, wanted in (("HasAns", True), ("NoAns", False)):
    group = [q for q in gold if has_answer[q] == wanted]
    if group:
      for key, value in _mean_dict(exact, f1, group).items():
        results["%s_%s" % (prefix, key)] = value
  best_exact_raw, best_f1_raw = _v2_raw_scores(gold, best_non_null)
  odds = {q: null_odds[q] for q in gold if q in null_odds}
  for name, raw in (("exact", best_exact_raw), ("f1", best_f1_raw)):
    score, threshold, _ = best_threshold(raw, odds, has_answer,
                                         best_non_null)
    results["best_%s" % name] = score
    results["best_%s_thresh" % name] = threshold
  return results


def best_f1_predictions(gold, null_odds, best_non_null):
  """(qas_id -> text, threshold or None) re-decided at the `best_f1`
  threshold: "" where the null odds exceed it (everywhere when "no answer"
  everywhere is best), else the best non-null text."""
  has_answer = {q: any(normalize_answer(a) for a in answers)
                for q, answers in gold.items()}
  _, f1 = _v2_raw_scores(gold, best_non_null)
  odds = {q: null_odds[q] for q in gold if q in null_odds}
  _, threshold, all_null = best_threshold(f1, odds, has_answer, best_non_null)
  if all_null:
    threshold = None
  return collections.OrderedDict(
      (q, "" if threshold is None or null_odds[q] > threshold else text)
      for q, text in best_non_null.items()), threshold
