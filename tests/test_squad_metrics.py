"""Tests for squad_metrics.py: the official SQuAD 1.1 and 2.0 scores on
hand-worked cases."""

import collections

import pytest

from bert_tf.tasks.squad import metrics as squad_metrics


# ----------------------------------------------------------------------------
# Scores (hand-worked)
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("text,normalized", [
    ("The Quick, brown-fox!", "quick brownfox"),
    ("  an   apple\tA day ", "apple day"),
    ("Theatre anthem", "theatre anthem"),
    ("\"Denver Broncos.\"", "denver broncos"),
    ("the", ""),
])
def test_normalize_answer(text, normalized):
  assert squad_metrics.normalize_answer(text) == normalized


def test_token_f1_partial_overlap():
  # pred {cat, sat}, gold {cat, sat, on, mat}: P = 1, R = 1/2, F1 = 2/3.
  assert squad_metrics.token_f1("The cat sat.", "a cat sat on the mat") == (
      pytest.approx(2 / 3))
  # Tokens are counted with multiplicity: P = 2/3, R = 1, F1 = 0.8.
  assert squad_metrics.token_f1("x x y", "x x") == pytest.approx(0.8)


def test_v1_scores_take_the_best_gold_answer_and_count_missing_as_zero():
  gold = collections.OrderedDict([
      ("q1", ["Denver Broncos", "the Broncos"]),   # "Broncos" -> EM via #2
      ("q2", ["Santa Clara, California"]),         # P 1, R 2/3: F1 0.8
      ("q3", ["Levi's Stadium"]),                  # empty prediction: 0
      ("q4", ["Super Bowl"]),                      # missing prediction: 0
  ])
  predictions = {"q1": "Broncos!", "q2": "santa clara", "q3": ""}
  scores = squad_metrics.evaluate_v1(gold, predictions)
  assert list(scores) == ["exact_match", "f1"]
  assert scores["exact_match"] == pytest.approx(100 * 1 / 4)
  assert scores["f1"] == pytest.approx(100 * (1 + 0.8) / 4)


def test_v1_empty_prediction_against_empty_gold_has_f1_zero():
  assert squad_metrics.token_f1("", "", empty_matches_empty=False) == 0
  assert squad_metrics.token_f1("", "") == 1


def _v2_fixture():
  gold = collections.OrderedDict([
      ("a", ["Paris", "the city of Paris"]),  # answerable
      ("b", []),                              # unanswerable
      ("c", ["1066"]),                        # answerable
      ("d", ["a"]),                           # normalizes to "": no answer
  ])
  predictions = {"a": "Paris", "b": "", "c": "", "d": "London"}
  best_non_null = {"a": "Paris", "b": "Lyon", "c": "in 1066", "d": "London"}
  null_odds = {"a": -2.0, "b": 1.0, "c": 3.0, "d": 0.5}
  return gold, predictions, best_non_null, null_odds


def test_v2_scores_with_breakdown_and_best_threshold():
  gold, predictions, best_non_null, null_odds = _v2_fixture()
  scores = squad_metrics.evaluate_v2(gold, predictions, null_odds,
                                     best_non_null)
  assert list(scores) == list(squad_metrics.V2_KEYS)
  # exact: a 1, b 1 ("" vs no answer), c 0, d 0 -> 50; f1 the same.
  assert scores["exact"] == scores["f1"] == pytest.approx(50.0)
  assert scores["total"] == 4
  assert (scores["HasAns_exact"], scores["HasAns_total"]) == (50.0, 2)
  assert (scores["NoAns_exact"], scores["NoAns_total"]) == (50.0, 2)
  # Sweep in odds order a(-2) d(.5) b(1) c(3), starting from 2 no-answers:
  # a +1 -> 3 (thresh -2); d -1 -> 2; b -1 -> 1; c exact +0 / f1 +2/3.
  assert scores["best_exact"] == pytest.approx(75.0)
  assert scores["best_exact_thresh"] == -2.0
  assert scores["best_f1"] == pytest.approx(75.0)
  assert scores["best_f1_thresh"] == -2.0
  best, threshold = squad_metrics.best_f1_predictions(gold, null_odds,
                                                      best_non_null)
  assert threshold == -2.0
  assert best == {"a": "Paris", "b": "", "c": "", "d": ""}


def test_v2_all_null_best_reports_threshold_zero_and_predicts_null():
  gold = collections.OrderedDict([("a", ["x"]), ("b", [])])
  best_non_null = {"a": "wrong", "b": "also wrong"}
  null_odds = {"a": 5.0, "b": -1.0}
  scores = squad_metrics.evaluate_v2(gold, {"a": "", "b": ""}, null_odds,
                                     best_non_null)
  assert scores["best_f1"] == pytest.approx(50.0)
  assert scores["best_f1_thresh"] == 0.0     # as the official script says
  best, threshold = squad_metrics.best_f1_predictions(gold, null_odds,
                                                      best_non_null)
  assert threshold is None and best == {"a": "", "b": ""}


def test_v2_omits_empty_groups_like_the_official_script():
  gold = collections.OrderedDict([("a", ["x"])])
  scores = squad_metrics.evaluate_v2(gold, {"a": "x"}, {"a": -1.0},
                                     {"a": "x"})
  assert "NoAns_total" not in scores and scores["HasAns_total"] == 1
