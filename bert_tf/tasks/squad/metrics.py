"""Official SQuAD scores (exact match and token F1), computed in-process.

The reference release leaves scoring to the separate official scripts
(`evaluate-v1.1.py`, `evaluate-v2.0.py`). `run_squad.py` calls this module
right after prediction when the prediction file carries answers. The numbers
and key names are the official ones, on the 0-100 scale:

* SQuAD 1.1: `exact_match`, `f1`. Every question with at least one gold answer
  counts; the score of a question is the maximum over its gold answers.
* SQuAD 2.0: `exact`, `f1`, `total`, then the same three for the answerable
  (`HasAns_*`) and unanswerable (`NoAns_*`) questions (each group only when it
  is not empty, as the official script does), and `best_exact`,
  `best_exact_thresh`, `best_f1`, `best_f1_thresh`: the best scores reachable
  by moving the null threshold over the null odds.

Answer normalization (both versions): lowercase, drop ASCII punctuation, drop
the articles a/an/the, collapse whitespace. The two official scripts differ on
one point, kept here: in 1.1 an empty prediction against an empty gold answer
has F1 0, in 2.0 it has F1 1 (that is how a correct "no answer" scores).
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
  """Harmonic mean of token precision and recall after normalization.

  Args:
    prediction: str, the predicted answer.
    gold: str, one gold answer.
    empty_matches_empty: bool; True (SQuAD 2.0) scores an empty side as 1 when
      both are empty and 0 otherwise; False (SQuAD 1.1) scores any empty side
      as 0.

  Returns:
    float in [0, 1].
  """
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
  """Gold answer texts per question of a parsed SQuAD JSON `data` list.

  Args:
    dataset: the list under the file's top-level "data" key.
    source: str, the file, for the messages.

  Returns:
    OrderedDict qas_id -> list of answer texts, or None for a question that
    has no "answers" field (it cannot be scored).

  Raises:
    ValueError: a value of the wrong type, naming the file and key path.
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
  """SQuAD 1.1 scores, as `evaluate-v1.1.py` computes them.

  Args:
    gold: dict qas_id -> list of gold answer texts (questions with none are
      left out by the caller).
    predictions: dict qas_id -> predicted text; a missing one scores 0.

  Returns:
    OrderedDict with `exact_match` and `f1` (0-100).
  """
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
  """Best score over null thresholds, as the official 2.0 script finds it.

  A question is predicted "no answer" when its null odds exceed the threshold.
  Questions are visited in increasing null odds; the threshold that maximises
  the total is kept. When predicting "no answer" everywhere is best, the
  official script reports the threshold 0.0, and so does this function; the
  third value then says that no threshold among the odds does better.

  Args:
    scores: dict qas_id -> score (0/1 scale) of `answers[qas_id]`.
    null_odds: dict qas_id -> float, null score minus best non-null score.
    has_answer: dict qas_id -> bool.
    answers: dict qas_id -> the non-null text predicted when answering.

  Returns:
    (best score on the 0-100 scale, threshold, all_null): `all_null` is True
    when the best score is the one of predicting "no answer" everywhere.
  """
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
  """SQuAD 2.0 scores, as `evaluate-v2.0.py` with `--na-prob-file` computes.

  `exact`/`f1` score `predictions` as decided. The `best_*` entries sweep the
  null threshold over `null_odds`, answering with `best_non_null` (each
  question's best non-null text) wherever the odds do not exceed it, so the
  reported threshold can be passed as `--null_score_diff_threshold`.

  Args:
    gold: dict qas_id -> list of gold texts ([] for unanswerable questions).
    predictions: dict qas_id -> predicted text ("" = no answer).
    null_odds: dict qas_id -> float.
    best_non_null: dict qas_id -> best non-null text ("" if there is none).

  Returns:
    OrderedDict with the keys of `V2_KEYS` (HasAns_*/NoAns_* only for
    non-empty groups).
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
  """Predictions re-decided at the null threshold that gives `best_f1`.

  A question whose null odds exceed the threshold gets "" (no answer), the
  others their best non-null text. When "no answer" everywhere is best (the
  official `best_f1_thresh` then reads 0.0), every prediction is "".

  Args:
    gold, null_odds, best_non_null: as for `evaluate_v2`; every question of
      `best_non_null` is re-decided, scored or not.

  Returns:
    (OrderedDict qas_id -> text, the threshold used or None for all "").
  """
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
