"""Tests for bert_tf/tasks/squad/predictions.py: predictions.json,
nbest_predictions.json and null_odds.json against every
tests/data/conformance/squad predict_v2_* folder, and score_predictions'
eval_results.json."""

import json
import os

import pytest

from squad_conformance import CONFIGS
from squad_conformance import convert_features
from squad_conformance import make_tokenizer
from squad_conformance import read_examples
from squad_conformance import squad_path
from squad_conformance import VERSIONS

import run_squad
from bert_tf.tasks.squad import data as squad_data
from bert_tf.tasks.squad import metrics as squad_metrics
from bert_tf.tasks.squad import predictions as squad_predictions


@pytest.fixture(scope="module")
def tokenizer():
  return make_tokenizer()


def _predict_cases():
  cases = []
  for version in VERSIONS:
    for config in sorted(CONFIGS):
      for flag in ("false", "true"):
        if version == "v1.1" and flag == "true":
          continue
        cases.append((version, config, flag))
  return cases


def _results_from_logits(path):
  with open(path, encoding="utf-8") as f:
    logits = json.load(f)
  return [squad_predictions.RawResult(int(uid), v["start_logits"],
                                      v["end_logits"])
          for uid, v in logits.items()]


def _assert_close_json(got, want, path=""):
  if isinstance(want, dict):
    assert list(got) == list(want), path
    for key in want:
      _assert_close_json(got[key], want[key], path + "/" + key)
  elif isinstance(want, list):
    assert len(got) == len(want), path
    for i, (g, w) in enumerate(zip(got, want)):
      _assert_close_json(g, w, "%s[%d]" % (path, i))
  elif isinstance(want, float):
    assert abs(got - want) <= 1e-9, path
  else:
    assert got == want, path


@pytest.mark.parametrize("version,config,flag", _predict_cases())
def test_prediction_files_equal_conformance(tokenizer, version, config, flag,
                                            tmp_path):
  folder = squad_path(version, config, "predict_v2_" + flag)
  examples = read_examples(version, False)
  features = convert_features(examples, tokenizer, config, False)
  results = _results_from_logits(squad_path(version, config, "logits.json"))
  out = {name: str(tmp_path / name) for name in
         ("predictions.json", "nbest_predictions.json", "null_odds.json")}
  written = squad_predictions.write_predictions(
      examples, features, results, 20, 30, True, out["predictions.json"],
      out["nbest_predictions.json"], out["null_odds.json"],
      version_2_with_negative=(flag == "true"),
      null_score_diff_threshold=0.0, verbose_logging=False)
  names = sorted(os.listdir(folder))
  assert sorted(os.listdir(tmp_path)) == names
  for name in names:
    with open(os.path.join(folder, name), encoding="utf-8") as f:
      want = json.load(f)
    with open(out[name], encoding="utf-8") as f:
      got = json.load(f)
    _assert_close_json(got, want, name)
  with open(os.path.join(folder, "predictions.json"), encoding="utf-8") as f:
    assert written.predictions == json.load(f)


def test_write_predictions_needs_only_feature_metadata(tokenizer, tmp_path):
  """main() keeps slim metadata, not padded ids; the output is the same."""
  config = "seq96_stride32_query24"
  examples = read_examples("v2.0", False)
  features = convert_features(examples, tokenizer, config, False)
  slim = [run_squad.FeatureMetadata(
      f.unique_id, f.example_index, f.doc_span_index, f.tokens,
      f.token_to_orig_map, f.token_is_max_context) for f in features]
  results = _results_from_logits(squad_path("v2.0", config, "logits.json"))
  outputs = []
  for name, feats in (("full", features), ("slim", slim)):
    d = tmp_path / name
    d.mkdir()
    outputs.append(squad_predictions.write_predictions(
        examples, feats, results, 20, 30, True, str(d / "p.json"),
        str(d / "n.json"), str(d / "o.json"), version_2_with_negative=True))
  assert outputs[0] == outputs[1]


def test_score_predictions_writes_eval_results_v1(tokenizer, tmp_path):
  config = "seq384_stride128_query64"
  examples = read_examples("v1.1", False)
  features = convert_features(examples, tokenizer, config, False)
  results = _results_from_logits(squad_path("v1.1", config, "logits.json"))
  written = squad_predictions.write_predictions(
      examples, features, results, 20, 30, True, str(tmp_path / "p.json"),
      str(tmp_path / "n.json"), str(tmp_path / "o.json"))
  scores = squad_predictions.score_predictions(
      squad_path("v1.1", "input_dev.json"), written, False, str(tmp_path))
  with open(tmp_path / "eval_results.json", encoding="utf-8") as f:
    assert json.load(f) == scores
  assert list(scores) == ["exact_match", "f1"]
  # Recompute directly from the gold answers of the input file.
  data = squad_data.load_squad_data(squad_path("v1.1", "input_dev.json"))
  gold = squad_metrics.gold_answers(data)
  em = sum(max(squad_metrics.exact_match(written.predictions[q], a)
               for a in answers) for q, answers in gold.items())
  assert scores["exact_match"] == pytest.approx(100.0 * em / len(gold))
  assert 0 <= scores["exact_match"] <= scores["f1"] < 100


def test_score_predictions_skips_files_without_answers(tmp_path):
  path = tmp_path / "test.json"
  path.write_text(json.dumps({"data": [{"paragraphs": [
      {"context": "a b", "qas": [{"id": "q", "question": "?"}]}]}]}))
  written = squad_predictions.WrittenPredictions({"q": "a"}, {"q": []}, {})
  assert squad_predictions.score_predictions(str(path), written, False,
                                             str(tmp_path)) is None
  assert not (tmp_path / "eval_results.json").exists()
