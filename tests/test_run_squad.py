"""Tests for run_squad.py and squad_metrics.py.

Conformance (shared/conformance/squad): examples, features for both span
settings, train.tf_record, and every predict_v2_* folder. Scores: hand-worked
cases. Bad input: one test per error branch. One end-to-end run (train two
steps and predict SQuAD 2.0 with the tiny conformance checkpoint).
"""

import collections
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from conftest import REPO_ROOT, shared_path

import run_squad
import squad_data
import squad_metrics
import squad_predictions
import tokenization

_CONFIGS = {"seq384_stride128_query64": (384, 128, 64),
            "seq96_stride32_query24": (96, 32, 24)}
_VERSIONS = ("v1.1", "v2.0")


def _squad(*parts):
  return shared_path("conformance", "squad", *parts)


def _read_jsonl(path):
  with open(path, encoding="utf-8") as f:
    return [json.loads(line) for line in f]


@pytest.fixture(scope="module")
def tokenizer():
  return tokenization.FullTokenizer(_squad("vocab.txt"), do_lower_case=True)


def _examples(version, is_training):
  name = "input_train.json" if is_training else "input_dev.json"
  return run_squad.read_squad_examples(
      _squad(version, name), is_training,
      version_2_with_negative=(version == "v2.0"))


def _features(examples, tokenizer, config, is_training):
  max_seq_length, doc_stride, max_query_length = _CONFIGS[config]
  features = []
  count = run_squad.convert_examples_to_features(
      examples, tokenizer, max_seq_length, doc_stride, max_query_length,
      is_training, features.append)
  assert count == len(features)
  return features


def _feature_dict(f):
  return {"unique_id": f.unique_id, "example_index": f.example_index,
          "doc_span_index": f.doc_span_index, "tokens": f.tokens,
          "token_to_orig_map": {str(k): v
                                for k, v in f.token_to_orig_map.items()},
          "token_is_max_context": {str(k): v for k, v in
                                   f.token_is_max_context.items()},
          "input_ids": f.input_ids, "input_mask": f.input_mask,
          "segment_ids": f.segment_ids, "start_position": f.start_position,
          "end_position": f.end_position, "is_impossible": f.is_impossible}


# ----------------------------------------------------------------------------
# Conformance
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("version", _VERSIONS)
@pytest.mark.parametrize("is_training", [True, False])
def test_examples_equal_conformance(version, is_training):
  name = "examples_train.jsonl" if is_training else "examples_eval.jsonl"
  expected = _read_jsonl(_squad(version, name))
  got = [{"example_index": i, "qas_id": e.qas_id,
          "question_text": e.question_text, "doc_tokens": e.doc_tokens,
          "orig_answer_text": e.orig_answer_text,
          "start_position": e.start_position, "end_position": e.end_position,
          "is_impossible": e.is_impossible}
         for i, e in enumerate(_examples(version, is_training))]
  assert got == expected


@pytest.mark.parametrize("version", _VERSIONS)
@pytest.mark.parametrize("config", sorted(_CONFIGS))
@pytest.mark.parametrize("is_training", [True, False])
def test_features_equal_conformance(tokenizer, version, config, is_training):
  name = "features_train.jsonl" if is_training else "features_eval.jsonl"
  expected = _read_jsonl(_squad(version, config, name))
  features = _features(_examples(version, is_training), tokenizer, config,
                       is_training)
  assert len(features) == len(expected)
  for feature, want in zip(features, expected):
    assert _feature_dict(feature) == want


def _raw_records(path):
  return [r.numpy() for r in tf.data.TFRecordDataset(path)]


def _parse_records(path):
  return [tf.train.Example.FromString(r.numpy())
          for r in tf.data.TFRecordDataset(path)]


@pytest.mark.parametrize("version", _VERSIONS)
def test_train_tf_record_equals_conformance(tokenizer, version, tmp_path):
  config = "seq384_stride128_query64"
  path = str(tmp_path / "train.tf_record")
  with run_squad.FeatureWriter(path, is_training=True) as writer:
    for feature in _features(_examples(version, True), tokenizer, config,
                             True):
      writer.process_feature(feature)
  expected = _parse_records(_squad(version, config, "train.tf_record"))
  got = _parse_records(path)
  assert writer.num_features == len(expected) == len(got)
  for got_example, want in zip(got, expected):
    assert got_example == want
  # Same insertion order of the keys, so the very same bytes.
  assert _raw_records(path) == _raw_records(
      _squad(version, config, "train.tf_record"))
  assert sorted(os.listdir(tmp_path)) == ["train.tf_record"]


def _predict_cases():
  cases = []
  for version in _VERSIONS:
    for config in sorted(_CONFIGS):
      for flag in ("false", "true"):
        if version == "v1.1" and flag == "true":
          continue
        cases.append((version, config, flag))
  return cases


def _results_from_logits(path):
  with open(path, encoding="utf-8") as f:
    logits = json.load(f)
  return [run_squad.RawResult(int(uid), v["start_logits"], v["end_logits"])
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
  folder = _squad(version, config, "predict_v2_" + flag)
  examples = _examples(version, False)
  features = _features(examples, tokenizer, config, False)
  results = _results_from_logits(_squad(version, config, "logits.json"))
  out = {name: str(tmp_path / name) for name in
         ("predictions.json", "nbest_predictions.json", "null_odds.json")}
  written = run_squad.write_predictions(
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
  examples = _examples("v2.0", False)
  features = _features(examples, tokenizer, config, False)
  slim = [run_squad.FeatureMetadata(
      f.unique_id, f.example_index, f.doc_span_index, f.tokens,
      f.token_to_orig_map, f.token_is_max_context) for f in features]
  results = _results_from_logits(_squad("v2.0", config, "logits.json"))
  outputs = []
  for name, feats in (("full", features), ("slim", slim)):
    d = tmp_path / name
    d.mkdir()
    outputs.append(run_squad.write_predictions(
        examples, feats, results, 20, 30, True, str(d / "p.json"),
        str(d / "n.json"), str(d / "o.json"), version_2_with_negative=True))
  assert outputs[0] == outputs[1]


def test_conversion_streams_features_before_reading_all_examples(tokenizer):
  examples = _examples("v1.1", False)
  pulled = []

  def lazy_examples():
    for example in examples:
      pulled.append(example)
      yield example

  first_seen_after = []

  def output_fn(feature):
    if not first_seen_after:
      first_seen_after.append(len(pulled))
    del feature  # nothing is kept

  count = run_squad.convert_examples_to_features(
      lazy_examples(), tokenizer, 96, 32, 24, False, output_fn)
  assert first_seen_after == [1]
  assert count == 204


def test_conversion_logs_progress(tokenizer, caplog):
  caplog.set_level("INFO")
  _features(_examples("v1.1", False), tokenizer, "seq96_stride32_query24",
            False)
  assert "Converted 65 examples into 204 features" in caplog.text


# ----------------------------------------------------------------------------
# Model
# ----------------------------------------------------------------------------


def test_create_model_variables_and_shapes():
  config = run_squad.modeling.BertConfig(
      vocab_size=99, hidden_size=32, num_hidden_layers=1,
      num_attention_heads=4, intermediate_size=37)
  with tf.Graph().as_default():
    ids = tf.zeros([3, 7], tf.int32)
    start, end = run_squad.create_model(config, False, ids, tf.ones_like(ids),
                                        ids, False)
    assert start.shape.as_list() == [3, 7] == end.shape.as_list()
    shapes = {v.name: v.shape.as_list() for v in tf.trainable_variables()}
  assert shapes["cls/squad/output_weights:0"] == [2, 32]
  assert shapes["cls/squad/output_bias:0"] == [2]


def test_span_loss_is_mean_of_start_and_end_cross_entropy():
  rng = np.random.RandomState(0)
  start = rng.randn(2, 5).astype(np.float32)
  end = rng.randn(2, 5).astype(np.float32)
  starts, ends = np.array([1, 0]), np.array([3, 4])

  def xent(logits, positions):
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    return -log_probs[np.arange(2), positions].mean()

  with tf.Graph().as_default(), tf.Session() as sess:
    loss = run_squad._span_loss(  # pylint: disable=protected-access
        tf.constant(start), tf.constant(end), tf.constant(starts, tf.int32),
        tf.constant(ends, tf.int32))
    value = sess.run(loss)
  assert value == pytest.approx((xent(start, starts) + xent(end, ends)) / 2,
                                abs=1e-5)


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


def test_score_predictions_writes_eval_results_v1(tokenizer, tmp_path):
  config = "seq384_stride128_query64"
  examples = _examples("v1.1", False)
  features = _features(examples, tokenizer, config, False)
  results = _results_from_logits(_squad("v1.1", config, "logits.json"))
  written = run_squad.write_predictions(
      examples, features, results, 20, 30, True, str(tmp_path / "p.json"),
      str(tmp_path / "n.json"), str(tmp_path / "o.json"))
  scores = run_squad.score_predictions(_squad("v1.1", "input_dev.json"),
                                       written, False, str(tmp_path))
  with open(tmp_path / "eval_results.json", encoding="utf-8") as f:
    assert json.load(f) == scores
  assert list(scores) == ["exact_match", "f1"]
  # Recompute directly from the gold answers of the input file.
  data = squad_data.load_squad_data(_squad("v1.1", "input_dev.json"))
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
  assert run_squad.score_predictions(str(path), written, False,
                                     str(tmp_path)) is None
  assert not (tmp_path / "eval_results.json").exists()


# ----------------------------------------------------------------------------
# Bad input
# ----------------------------------------------------------------------------


def _write(tmp_path, obj, name="bad.json"):
  path = tmp_path / name
  path.write_text(obj if isinstance(obj, str) else json.dumps(obj),
                  encoding="utf-8")
  return str(path)


def _squad_json(**qa_overrides):
  qa = {"id": "q1", "question": "Who?",
        "answers": [{"text": "Ann", "answer_start": 0}]}
  qa.update(qa_overrides)
  return {"data": [{"paragraphs": [{"context": "Ann came.", "qas": [qa]}]}]}


def test_missing_file_is_refused(tmp_path):
  with pytest.raises(FileNotFoundError, match="nope.json: no such file"):
    run_squad.read_squad_examples(str(tmp_path / "nope.json"), False)


def test_malformed_json_is_refused_naming_the_file(tmp_path):
  path = _write(tmp_path, '{"data": [')
  with pytest.raises(ValueError, match=r"bad\.json: not valid JSON"):
    run_squad.read_squad_examples(path, False)


@pytest.mark.parametrize("obj,message", [
    ({"version": "1.1"}, r"the top level has no 'data' field"),
    ({"data": [{"title": "t"}]}, r"data\[0\] has no 'paragraphs' field"),
    ({"data": [{"paragraphs": [{"qas": []}]}]},
     r"data\[0\]\.paragraphs\[0\] has no 'context' field"),
    ({"data": [{"paragraphs": [{"context": "x"}]}]},
     r"data\[0\]\.paragraphs\[0\] has no 'qas' field"),
    (_squad_json(question=None),
     r"data\[0\]\.paragraphs\[0\]\.qas\[0\]\.question is None, expected a "
     r"string"),
    ({"data": [{"paragraphs": [{"context": "x", "qas": [{"question": "?"}]}]}
              ]},
     r"data\[0\]\.paragraphs\[0\]\.qas\[0\] has no 'id' field"),
    ({"data": "oops"}, r"the top level\.data is 'oops', expected a list"),
])
def test_non_squad_shape_is_refused_naming_the_field(tmp_path, obj, message):
  path = _write(tmp_path, obj)
  with pytest.raises(ValueError, match=r"bad\.json: " + message):
    run_squad.read_squad_examples(path, False)


@pytest.mark.parametrize("qa,message", [
    ({"answers": None}, r"qas\[0\]\.answers is None, expected a list"),
    ({"answers": [{"text": "Ann"}]},
     r"qas\[0\]\.answers\[0\] has no 'answer_start' field"),
    ({"answers": [{"text": "Ann", "answer_start": "0"}]},
     r"answer_start is '0', expected an integer"),
])
def test_training_answer_fields_are_checked(tmp_path, qa, message):
  path = _write(tmp_path, _squad_json(**qa))
  with pytest.raises(ValueError, match=message):
    run_squad.read_squad_examples(path, True)


def test_answers_not_found_are_skipped_and_counted(tmp_path, caplog):
  caplog.set_level("INFO")
  data = _squad_json()
  qas = data["data"][0]["paragraphs"][0]["qas"]
  qas.append({"id": "q2", "question": "?",
              "answers": [{"text": "came", "answer_start": 0}]})
  qas.append({"id": "q3", "question": "?",
              "answers": [{"text": "came", "answer_start": 400}]})
  examples = run_squad.read_squad_examples(_write(tmp_path, data), True)
  assert [e.qas_id for e in examples] == ["q1"]
  assert "could not find answer 'came' at answer_start 0" in caplog.text
  assert "answer_start 400 is outside the context" in caplog.text
  assert "skipped 2 training answer(s)" in caplog.text


def test_answers_on_no_word_are_skipped_and_counted(tmp_path, caplog):
  caplog.set_level("INFO")
  data = _squad_json()
  data["data"][0]["paragraphs"].append({"context": "   \n  ", "qas": [
      {"id": "q2", "question": "?",
       "answers": [{"text": " ", "answer_start": 1}]}]})
  path = _write(tmp_path, data)
  examples = run_squad.read_squad_examples(path, True)
  assert [e.qas_id for e in examples] == ["q1"]
  assert "answer_start 1 is not on a word of the context (0 words)" in (
      caplog.text)
  assert "skipped 1 training answer(s)" in caplog.text
  assert len(run_squad.read_squad_examples(path, False)) == 2


@pytest.mark.parametrize("is_training", [True, False])
def test_duplicate_question_ids_are_refused(tmp_path, is_training):
  data = _squad_json()
  data["data"].append(_squad_json()["data"][0])
  with pytest.raises(ValueError, match=r"bad\.json: question id 'q1' appears "
                     r"twice \(data\[0\]\.paragraphs\[0\]\.qas\[0\] and "
                     r"data\[1\]\.paragraphs\[0\]\.qas\[0\]\)"):
    run_squad.read_squad_examples(_write(tmp_path, data), is_training)


@pytest.mark.parametrize("max_seq_length,doc_stride,message", [
    (67, 10, r"max_seq_length=67 is too small: it must hold "
             r"max_query_length=64 query tokens \+ 3 special tokens \+ at "
             r"least 1 document token = 68"),
    (68, 0, r"doc_stride=0: expected at least 1"),
])
def test_span_settings_without_room_are_refused(tokenizer, max_seq_length,
                                                doc_stride, message):
  with pytest.raises(ValueError, match=message):
    run_squad.convert_examples_to_features(
        [], tokenizer, max_seq_length, doc_stride, 64, False, print)


def test_feature_writer_leaves_nothing_on_error(tmp_path):
  path = str(tmp_path / "train.tf_record")
  with pytest.raises(RuntimeError):
    with run_squad.FeatureWriter(path, is_training=False):
      raise RuntimeError("boom")
  assert not os.listdir(tmp_path)


def _run_script(args, timeout=300):
  env = dict(os.environ)
  env.pop("BERT_DEBUG", None)
  return subprocess.run(
      [sys.executable, os.path.join(REPO_ROOT, "run_squad.py")] + args,
      cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def _model_flags():
  model = shared_path("conformance", "modeling")
  return ["--vocab_file=%s" % os.path.join(model, "vocab.txt"),
          "--bert_config_file=%s" % os.path.join(model, "bert_config.json"),
          "--init_checkpoint=%s" % os.path.join(model, "bert_model.ckpt")]


def test_script_refuses_too_small_max_seq_length_in_one_line(tmp_path):
  proc = _run_script(_model_flags() + [
      "--output_dir=%s" % tmp_path, "--do_predict",
      "--predict_file=%s" % _squad("v1.1", "input_dev.json"),
      "--max_seq_length=64", "--max_query_length=64"])
  assert proc.returncode == 1
  assert proc.stderr.strip().splitlines()[-1] == (
      "error: --max_seq_length=64 is too small: it must hold "
      "max_query_length=64 query tokens + 3 special tokens + at least 1 "
      "document token = 68")


_FLAG_CHECKS = r"""
import json, sys
from absl import flags
import run_squad
import startup
run_squad.define_flags()
messages = []
for args in json.loads(sys.argv[1]):
  flags.FLAGS.unparse_flags()
  flags.FLAGS(["run_squad.py"] + args)
  try:
    run_squad.validate_flags_or_throw(
        startup.load_bert_config(flags.FLAGS.bert_config_file))
    messages.append(None)
  except ValueError as e:
    messages.append(str(e))
print(json.dumps(messages))
"""


def test_flag_checks_name_the_flag():
  model = _model_flags()[:2] + ["--output_dir=/tmp/unused"]
  cases = [
      ([], "At least one of --do_train or --do_predict must be True."),
      (["--do_train"], "--do_train needs --train_file"),
      (["--do_predict"], "--do_predict needs --predict_file"),
      (["--do_predict", "--predict_file=x", "--max_seq_length=128"],
       "--max_seq_length=128 is longer than the model's "
       "max_position_embeddings=64"),
      (["--do_predict", "--predict_file=x", "--max_seq_length=64",
        "--max_query_length=24", "--doc_stride=0"],
       "--doc_stride=0: expected at least 1 token"),
      (["--do_predict", "--predict_file=x", "--max_seq_length=64",
        "--max_query_length=24", "--n_best_size=0"],
       "--n_best_size=0: expected at least 1"),
      (["--do_predict", "--predict_file=x", "--max_seq_length=64",
        "--max_query_length=24"], None),
  ]
  args = [model + extra for extra, _ in cases]
  proc = subprocess.run(
      [sys.executable, "-c", _FLAG_CHECKS, json.dumps(args)], cwd=REPO_ROOT,
      capture_output=True, text=True, timeout=120)
  assert proc.returncode == 0, proc.stderr[-2000:]
  messages = json.loads(proc.stdout.strip().splitlines()[-1])
  for (_, want), got in zip(cases, messages):
    if want is None:
      assert got is None
    else:
      assert got is not None and got.startswith(want), (want, got)


# ----------------------------------------------------------------------------
# End to end
# ----------------------------------------------------------------------------


def _real_squad_subset(tmp_path):
  """8 real SQuAD 2.0 dev questions (2 paragraphs); train copy: 1 answer."""
  path = shared_path("data", "squad", "haystack_dev_v2.0_small", "small.json")
  with open(path, encoding="utf-8") as f:
    article = json.load(f)["data"][0]
  article["paragraphs"] = article["paragraphs"][:2]
  for paragraph in article["paragraphs"]:
    paragraph["qas"] = paragraph["qas"][:4]
  predict = {"version": "v2.0", "data": [article]}
  train = json.loads(json.dumps(predict))
  for paragraph in train["data"][0]["paragraphs"]:
    for qa in paragraph["qas"]:
      qa["answers"] = qa["answers"][:1]
  return _write(tmp_path, train, "train.json"), _write(tmp_path, predict,
                                                       "dev.json")


def test_train_and_predict_squad_v2_end_to_end(tmp_path):
  train_file, predict_file = _real_squad_subset(tmp_path)
  out = tmp_path / "out"
  proc = _run_script(_model_flags() + [
      "--output_dir=%s" % out, "--do_train", "--do_predict",
      "--train_file=%s" % train_file, "--predict_file=%s" % predict_file,
      "--version_2_with_negative", "--max_seq_length=64", "--doc_stride=32",
      "--max_query_length=16", "--train_batch_size=4",
      "--num_train_epochs=1.0", "--predict_batch_size=16",
      "--save_checkpoints_steps=100", "--iterations_per_loop=2"])
  assert proc.returncode == 0, proc.stderr[-3000:]
  files = set(os.listdir(out))
  assert {"train.tf_record", "eval.tf_record", "predictions.json",
          "nbest_predictions.json", "null_odds.json", "eval_results.json",
          "predictions_best_threshold.json",
          "model.ckpt-2.index"} <= files
  assert not [name for name in files if ".tmp-" in name]
  with open(predict_file, encoding="utf-8") as f:
    qids = [qa["id"] for p in json.load(f)["data"][0]["paragraphs"]
            for qa in p["qas"]]
  loaded = {}
  for name in ("predictions.json", "nbest_predictions.json", "null_odds.json",
               "eval_results.json", "predictions_best_threshold.json"):
    with open(out / name, encoding="utf-8") as f:
      loaded[name] = json.load(f)
  assert list(loaded["predictions.json"]) == qids
  assert list(loaded["predictions_best_threshold.json"]) == qids
  for qid in qids:
    nbest = loaded["nbest_predictions.json"][qid]
    assert 1 <= len(nbest) <= 21
    assert "" in [e["text"] for e in nbest]
    assert sum(e["probability"] for e in nbest) == pytest.approx(1.0)
    odds = loaded["null_odds.json"][qid]
    assert (loaded["predictions.json"][qid] == "") == (odds > 0.0)
  assert list(loaded["eval_results.json"]) == list(squad_metrics.V2_KEYS)
  assert loaded["eval_results.json"]["total"] == 8
  assert "39 of 41 trainable variables initialized" in proc.stderr
  assert "best_f1_thresh = " in proc.stderr


def test_script_refuses_training_file_without_questions(tmp_path):
  # Training on nothing used to loop forever over an empty dataset.
  train_file = _write(tmp_path, {"version": "1.1", "data": []}, "empty.json")
  proc = _run_script(_model_flags() + [
      "--output_dir=%s" % (tmp_path / "out"), "--do_train",
      "--train_file=%s" % train_file, "--max_seq_length=64",
      "--max_query_length=24"], timeout=120)
  assert proc.returncode == 1, proc.stderr[-2000:]
  assert proc.stderr.strip().splitlines()[-1] == (
      "error: --train_file: %s holds no usable training question (none, or "
      "all skipped)" % train_file)
