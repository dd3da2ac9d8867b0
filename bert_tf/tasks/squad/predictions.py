"""SQuAD predictions: the reference's n-best span search over each
question's spans (where the token has its max context), `get_final_text`,
SQuAD 2.0's null answer; and, beyond it, the official scores
(`score_predictions`) when the predicted file carries answers."""

import collections
import contextlib
import functools
import json
import math
import os
import unicodedata

from absl import logging
import tensorflow.compat.v1 as tf

from bert_tf import io as io_utils
from bert_tf.tasks.squad import data as squad_data
from bert_tf.tasks.squad import metrics as squad_metrics
import tokenization

__all__ = [
    "RawResult", "FeatureMetadata", "WrittenPredictions", "write_predictions",
    "get_final_text", "score_predictions",
]


# ----------------------------------------------------------------------------
# Predictions
# ----------------------------------------------------------------------------

RawResult = collections.namedtuple("RawResult",
                                   ["unique_id", "start_logits", "end_logits"])

# What `write_predictions` wrote: question id -> text, -> n-best list of
# dicts, and (SQuAD 2.0, else empty) -> null odds.
WrittenPredictions = collections.namedtuple(
    "WrittenPredictions", ["predictions", "nbest", "null_odds"])

_Candidate = collections.namedtuple(
    "_Candidate",
    ["feature_index", "start_index", "end_index", "start_logit", "end_logit"])
_NbestEntry = collections.namedtuple("_NbestEntry",
                                     ["text", "start_logit", "end_logit"])


def write_predictions(all_examples, all_features, all_results, n_best_size,
                      max_answer_length, do_lower_case, output_prediction_file,
                      output_nbest_file, output_null_log_odds_file,
                      version_2_with_negative=False,
                      null_score_diff_threshold=0.0, verbose_logging=False):
  """Picks each question's answer from the logits and writes the JSON files.

  `output_prediction_file` (id -> text, "" = no answer), `output_nbest_file`
  (id -> list of {text, probability, start_logit, end_logit}) and, for 2.0,
  `output_null_log_odds_file` (id -> null score minus best non-null);
  each `json.dumps(obj, indent=4)` plus a newline, atomically.
  `all_features`: objects with `unique_id`, `example_index`, `tokens`,
  `token_to_orig_map`, `token_is_max_context`; `all_results`: one
  `RawResult` each. `max_answer_length` counts sub-tokens; "" is predicted
  when the null odds exceed `null_score_diff_threshold`.

  Returns:
    `WrittenPredictions` holding the three dicts.
  """
  logging.info("Writing predictions to %s and %s", output_prediction_file,
               output_nbest_file)
  features_by_example = collections.defaultdict(list)
  for feature in all_features:
    features_by_example[feature.example_index].append(feature)
  results_by_id = {result.unique_id: result for result in all_results}
  predictions = collections.OrderedDict()
  nbest_json = collections.OrderedDict()
  null_odds = collections.OrderedDict()
  for example_index, example in enumerate(all_examples):
    features = features_by_example[example_index]
    candidates, null = _span_candidates(features, results_by_id, n_best_size,
                                        max_answer_length,
                                        version_2_with_negative)
    nbest = _nbest_entries(example, features, candidates, null, n_best_size,
                           do_lower_case, verbose_logging)
    nbest_json[example.qas_id] = _nbest_to_json(nbest)
    if not version_2_with_negative:
      predictions[example.qas_id] = nbest[0].text
    else:
      odds, text = _decide_null(null, nbest, null_score_diff_threshold)
      null_odds[example.qas_id] = odds
      predictions[example.qas_id] = text
  outputs = [(output_prediction_file, predictions),
             (output_nbest_file, nbest_json)]
  if version_2_with_negative:
    outputs.append((output_null_log_odds_file, null_odds))
  _write_json_files(outputs)
  return WrittenPredictions(predictions, nbest_json, null_odds)


def _best_indexes(logits, n_best_size):
  """Positions of the `n_best_size` largest logits (ties: lower first)."""
  # A stable sort: reverse=True keeps equal logits in position order.
  ranked = sorted(range(len(logits)), key=logits.__getitem__, reverse=True)
  return ranked[:n_best_size]


def _feature_spans(feature, result, n_best_size, max_answer_length):
  """(start, end) pairs of one feature, in start-rank then end-rank order:
  document tokens of this feature, start at its max context, at most
  `max_answer_length` long, end not before start."""
  num_tokens = len(feature.tokens)
  starts = [i for i in _best_indexes(result.start_logits, n_best_size)
            if i < num_tokens and i in feature.token_to_orig_map and
            feature.token_is_max_context.get(i, False)]
  ends = [i for i in _best_indexes(result.end_logits, n_best_size)
          if i < num_tokens and i in feature.token_to_orig_map]
  return [(start, end) for start in starts for end in ends
          if start <= end and end - start + 1 <= max_answer_length]


def _span_candidates(features, results_by_id, n_best_size, max_answer_length,
                     version_2_with_negative):
  """(candidates, null) of an example: `_Candidate`s by start + end logit
  (stable: ties keep feature, start-rank, end-rank order, null last), and
  the lowest `[CLS]` score's (score, `_Candidate`) (None for 1.1)."""
  candidates = []
  null = None
  for feature_index, feature in enumerate(features):
    result = results_by_id[feature.unique_id]
    if version_2_with_negative:
      null_score = result.start_logits[0] + result.end_logits[0]
      if null is None or null_score < null[0]:
        null = (null_score, _Candidate(feature_index, 0, 0,
                                       result.start_logits[0],
                                       result.end_logits[0]))
    for start, end in _feature_spans(feature, result, n_best_size,
                                     max_answer_length):
      candidates.append(_Candidate(feature_index, start, end,
                                   result.start_logits[start],
                                   result.end_logits[end]))
  if null is not None:
    candidates.append(null[1])
  candidates.sort(key=lambda c: c.start_logit + c.end_logit, reverse=True)
  return candidates, null


def _nbest_entries(example, features, candidates, null, n_best_size,
                   do_lower_case, verbose_logging):
  """The first `n_best_size` distinct answer texts, plus the null entry."""
  nbest = []
  seen = set()
  for candidate in candidates:
    if len(nbest) >= n_best_size:
      break
    text = ""
    if candidate.start_index > 0:
      text = _candidate_text(example, features[candidate.feature_index],
                             candidate, do_lower_case, verbose_logging)
    if text in seen:
      continue
    seen.add(text)
    nbest.append(_NbestEntry(text, candidate.start_logit,
                             candidate.end_logit))
  if null is not None and "" not in seen:
    nbest.append(_NbestEntry("", null[1].start_logit, null[1].end_logit))
  if not nbest:
    nbest.append(_NbestEntry("empty", 0.0, 0.0))
  return nbest


def _candidate_text(example, feature, candidate, do_lower_case,
                    verbose_logging):
  """The original-text answer of one sub-token span."""
  tok_tokens = feature.tokens[candidate.start_index:candidate.end_index + 1]
  orig_start = feature.token_to_orig_map[candidate.start_index]
  orig_end = feature.token_to_orig_map[candidate.end_index]
  orig_text = " ".join(example.doc_tokens[orig_start:orig_end + 1])
  tok_text = " ".join(tok_tokens).replace(" ##", "").replace("##", "")
  tok_text = " ".join(tok_text.split())
  return get_final_text(tok_text, orig_text, do_lower_case, verbose_logging)


def _nbest_to_json(nbest):
  """n-best entries as JSON-ready dicts with softmax probabilities."""
  probs = _softmax([entry.start_logit + entry.end_logit for entry in nbest])
  return [collections.OrderedDict([("text", entry.text),
                                   ("probability", prob),
                                   ("start_logit", entry.start_logit),
                                   ("end_logit", entry.end_logit)])
          for entry, prob in zip(nbest, probs)]


def _softmax(scores):
  """Softmax in Python floats (a plain left-to-right sum, kept for parity)."""
  if not scores:
    return []
  max_score = max(scores)
  exps = [math.exp(score - max_score) for score in scores]
  total = 0.0
  for value in exps:
    total += value
  return [value / total for value in exps]


def _decide_null(null, nbest, threshold):
  """SQuAD 2.0: (null odds, predicted text): the null score minus the best
  non-null entry's logits ("" against zero logits when there is none)."""
  score_null = null[0] if null is not None else 0.0
  best = next((entry for entry in nbest if entry.text), None)
  if best is None:
    return score_null, ""
  odds = score_null - best.start_logit - best.end_logit
  return odds, ("" if odds > threshold else best.text)


def _write_json(path, obj):
  _write_json_files([(path, obj)])


def _write_json_files(outputs):
  """Writes each `(path, obj)` as indented JSON, all or none: every file
  is written under its temporary name first and renamed only when all are
  complete (a full disk on the last one leaves none of them)."""
  with contextlib.ExitStack() as stack:
    for path, obj in outputs:
      temp = stack.enter_context(io_utils.atomic_path(path))
      with tf.io.gfile.GFile(temp, "w") as f:
        f.write(json.dumps(obj, indent=4) + "\n")


def get_final_text(pred_text, orig_text, do_lower_case, verbose_logging=False):
  """Maps a normalized predicted answer back onto the original text.

  `pred_text` ("steve smith") is found in `orig_text` ("Steve Smith's")
  through `BasicTokenizer`, and its characters carried back ("Steve
  Smith"); all of `orig_text` when no mapping is found. Unlike the
  reference, which aligns by removing U+0020 only, every character is
  aligned with what the tokenizer makes of it, so other spaces, controls,
  dropped accents and split Hangul no longer return the whole text; other
  texts give the reference's result.
  """
  tokenizer = tokenization.BasicTokenizer(do_lower_case=do_lower_case)
  tok_text = " ".join(tokenizer.tokenize(orig_text))
  start = tok_text.find(pred_text)
  if start == -1:
    if verbose_logging:
      logging.info("Unable to find text: %r in %r", pred_text, orig_text)
    return orig_text
  end = start + len(pred_text) - 1
  # Non-space characters of tok_text <-> the original character each comes
  # from; the two lists line up when the tokenizer kept the text's length.
  tok_positions = [i for i, char in enumerate(tok_text) if char != " "]
  orig_positions = _normalized_char_origins(orig_text, tokenizer)
  if len(tok_positions) != len(orig_positions):
    if verbose_logging:
      logging.info("Length not equal after stripping spaces: %r vs %r",
                   orig_text, tok_text)
    return orig_text
  tok_to_ns = {pos: ns for ns, pos in enumerate(tok_positions)}
  if start not in tok_to_ns or end not in tok_to_ns:
    if verbose_logging:
      logging.info("Couldn't map the start or end position of %r", pred_text)
    return orig_text
  orig_end = _extend_over_dropped_marks(
      orig_text, orig_positions[tok_to_ns[end]], orig_positions)
  return orig_text[orig_positions[tok_to_ns[start]]:orig_end + 1]


def _extend_over_dropped_marks(text, end, origins):
  """Moves `end` past combining marks the tokenizer dropped ("Cafe" +
  U+0301 keeps its accent)."""
  produced = set(origins)  # characters that left something after tokenizing
  while (end + 1 < len(text) and end + 1 not in produced and
         unicodedata.category(text[end + 1]) == "Mn"):
    end += 1
  return end


@functools.lru_cache(maxsize=1 << 16)
def _normalized_length(char, do_lower_case):
  """How many non-space characters `BasicTokenizer` makes of `char` (a pure
  function of its arguments, memoized: answers repeat the same letters)."""
  tokenizer = tokenization.BasicTokenizer(do_lower_case=do_lower_case)
  return len("".join(tokenizer.tokenize(char)))


def _normalized_char_origins(text, tokenizer):
  """The index in `text` of each non-space character the tokenizer makes of
  it (each character normalized alone; lengths add up over a word)."""
  lower = bool(tokenizer.do_lower_case)
  origins = []
  for index, char in enumerate(text):
    origins.extend([index] * _normalized_length(char, lower))
  return origins


# The parts of a feature that `write_predictions` needs (no padded ids), so
# that a prediction run keeps them, not the whole features, in memory.
FeatureMetadata = collections.namedtuple(
    "FeatureMetadata", ["unique_id", "example_index", "doc_span_index",
                         "tokens", "token_to_orig_map",
                         "token_is_max_context"])


def score_predictions(predict_file, written, version_2_with_negative,
                      output_dir):
  """Official SQuAD scores of `written` against `predict_file`'s answers.

  Writes `eval_results.json` to `output_dir` and, for 2.0,
  `predictions_best_threshold.json` (re-decided at the best-F1 threshold).
  Questions without gold answers are left out. Returns an OrderedDict of
  scores, or None when the file carries no answers.
  """
  gold = squad_metrics.gold_answers(
      squad_data.load_squad_data(predict_file), predict_file)
  scorable = collections.OrderedDict(
      (q, answers) for q, answers in gold.items()
      if answers is not None and (answers or version_2_with_negative))
  if not scorable:
    logging.info("%s carries no answers; no scores computed", predict_file)
    return None
  if len(scorable) < len(gold):
    logging.warning("%d of %d questions have no gold answers and are left "
                    "out of the scores", len(gold) - len(scorable), len(gold))
  if version_2_with_negative:
    best_non_null = collections.OrderedDict(
        (q, next((e["text"] for e in nbest if e["text"]), ""))
        for q, nbest in written.nbest.items())
    results = squad_metrics.evaluate_v2(scorable, written.predictions,
                                        written.null_odds, best_non_null)
    best_predictions, _ = squad_metrics.best_f1_predictions(
        scorable, written.null_odds, best_non_null)
    _write_json(os.path.join(output_dir, "predictions_best_threshold.json"),
                best_predictions)
  else:
    results = squad_metrics.evaluate_v1(scorable, written.predictions)
  _write_json(os.path.join(output_dir, "eval_results.json"), results)
  logging.info("***** SQuAD scores (%s) *****", predict_file)
  for key, value in results.items():
    logging.info("  %s = %s", key, value)
  return results
