"""Tests for bert_tf/tasks/squad/data.py: reading SQuAD JSON into examples, the
features of both span settings and train.tf_record against
tests/data/conformance/squad, streaming conversion, and one test per bad-input
branch."""

import os

import pytest
import tensorflow.compat.v1 as tf

from helpers import write_json
from squad_conformance import CONFIGS
from squad_conformance import convert_features
from squad_conformance import make_tokenizer
from squad_conformance import read_examples
from squad_conformance import read_jsonl
from squad_conformance import squad_path
from squad_conformance import VERSIONS

from bert_tf.tasks.squad import data as squad_data


@pytest.fixture(scope="module")
def tokenizer():
  return make_tokenizer()


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


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("is_training", [True, False])
def test_examples_equal_conformance(version, is_training):
  name = "examples_train.jsonl" if is_training else "examples_eval.jsonl"
  expected = read_jsonl(squad_path(version, name))
  got = [{"example_index": i, "qas_id": e.qas_id,
          "question_text": e.question_text, "doc_tokens": e.doc_tokens,
          "orig_answer_text": e.orig_answer_text,
          "start_position": e.start_position, "end_position": e.end_position,
          "is_impossible": e.is_impossible}
         for i, e in enumerate(read_examples(version, is_training))]
  assert got == expected


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("is_training", [True, False])
def test_features_equal_conformance(tokenizer, version, config, is_training):
  name = "features_train.jsonl" if is_training else "features_eval.jsonl"
  expected = read_jsonl(squad_path(version, config, name))
  features = convert_features(read_examples(version, is_training), tokenizer,
                              config, is_training)
  assert len(features) == len(expected)
  for feature, want in zip(features, expected):
    assert _feature_dict(feature) == want


def _raw_records(path):
  return [r.numpy() for r in tf.data.TFRecordDataset(path)]


def _parse_records(path):
  return [tf.train.Example.FromString(r.numpy())
          for r in tf.data.TFRecordDataset(path)]


@pytest.mark.parametrize("version", VERSIONS)
def test_train_tf_record_equals_conformance(tokenizer, version, tmp_path):
  config = "seq384_stride128_query64"
  path = str(tmp_path / "train.tf_record")
  with squad_data.FeatureWriter(path, is_training=True) as writer:
    for feature in convert_features(read_examples(version, True), tokenizer,
                                    config, True):
      writer.process_feature(feature)
  expected = _parse_records(squad_path(version, config, "train.tf_record"))
  got = _parse_records(path)
  assert writer.num_features == len(expected) == len(got)
  for got_example, want in zip(got, expected):
    assert got_example == want
  # Same insertion order of the keys, so the very same bytes.
  assert _raw_records(path) == _raw_records(
      squad_path(version, config, "train.tf_record"))
  assert sorted(os.listdir(tmp_path)) == ["train.tf_record"]


def test_conversion_streams_features_before_reading_all_examples(tokenizer):
  examples = read_examples("v1.1", False)
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

  count = squad_data.convert_examples_to_features(
      lazy_examples(), tokenizer, 96, 32, 24, False, output_fn)
  assert first_seen_after == [1]
  assert count == 204


def test_conversion_logs_progress(tokenizer, caplog):
  caplog.set_level("INFO")
  convert_features(read_examples("v1.1", False), tokenizer,
                   "seq96_stride32_query24", False)
  assert "Converted 65 examples into 204 features" in caplog.text


def _squad_json(**qa_overrides):
  qa = {"id": "q1", "question": "Who?",
        "answers": [{"text": "Ann", "answer_start": 0}]}
  qa.update(qa_overrides)
  return {"data": [{"paragraphs": [{"context": "Ann came.", "qas": [qa]}]}]}


def test_missing_file_is_refused(tmp_path):
  with pytest.raises(FileNotFoundError, match="nope.json: no such file"):
    squad_data.read_squad_examples(str(tmp_path / "nope.json"), False)


def test_malformed_json_is_refused_naming_the_file(tmp_path):
  path = write_json(tmp_path, '{"data": [', "bad.json")
  with pytest.raises(ValueError, match=r"bad\.json: not valid JSON"):
    squad_data.read_squad_examples(path, False)


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
    ({"data": "oops"}, r"data is 'oops', expected a list"),
])
def test_non_squad_shape_is_refused_naming_the_field(tmp_path, obj, message):
  path = write_json(tmp_path, obj, "bad.json")
  with pytest.raises(ValueError, match=r"bad\.json: " + message):
    squad_data.read_squad_examples(path, False)


@pytest.mark.parametrize("qa,message", [
    ({"answers": None}, r"qas\[0\]\.answers is None, expected a list"),
    ({"answers": [{"text": "Ann"}]},
     r"qas\[0\]\.answers\[0\] has no 'answer_start' field"),
    ({"answers": [{"text": "Ann", "answer_start": "0"}]},
     r"answer_start is '0', expected an integer"),
])
def test_training_answer_fields_are_checked(tmp_path, qa, message):
  path = write_json(tmp_path, _squad_json(**qa), "bad.json")
  with pytest.raises(ValueError, match=message):
    squad_data.read_squad_examples(path, True)


def test_answers_not_found_are_skipped_and_counted(tmp_path, caplog):
  caplog.set_level("INFO")
  data = _squad_json()
  qas = data["data"][0]["paragraphs"][0]["qas"]
  qas.append({"id": "q2", "question": "?",
              "answers": [{"text": "came", "answer_start": 0}]})
  qas.append({"id": "q3", "question": "?",
              "answers": [{"text": "came", "answer_start": 400}]})
  examples = squad_data.read_squad_examples(
      write_json(tmp_path, data, "bad.json"), True)
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
  path = write_json(tmp_path, data, "bad.json")
  examples = squad_data.read_squad_examples(path, True)
  assert [e.qas_id for e in examples] == ["q1"]
  assert "answer_start 1 is not on a word of the context (0 words)" in (
      caplog.text)
  assert "skipped 1 training answer(s)" in caplog.text
  assert len(squad_data.read_squad_examples(path, False)) == 2


@pytest.mark.parametrize("is_training", [True, False])
def test_duplicate_question_ids_are_refused(tmp_path, is_training):
  data = _squad_json()
  data["data"].append(_squad_json()["data"][0])
  with pytest.raises(ValueError, match=r"bad\.json: question id 'q1' appears "
                     r"twice \(data\[0\]\.paragraphs\[0\]\.qas\[0\] and "
                     r"data\[1\]\.paragraphs\[0\]\.qas\[0\]\)"):
    squad_data.read_squad_examples(write_json(tmp_path, data, "bad.json"),
                                   is_training)


@pytest.mark.parametrize("max_seq_length,doc_stride,message", [
    (67, 10, r"max_seq_length=67 is too small: it must hold "
             r"max_query_length=64 query tokens \+ 3 special tokens \+ at "
             r"least 1 document token = 68"),
    (68, 0, r"doc_stride=0: expected at least 1"),
])
def test_span_settings_without_room_are_refused(tokenizer, max_seq_length,
                                                doc_stride, message):
  with pytest.raises(ValueError, match=message):
    squad_data.convert_examples_to_features(
        [], tokenizer, max_seq_length, doc_stride, 64, False, print)


def test_feature_writer_leaves_nothing_on_error(tmp_path):
  path = str(tmp_path / "train.tf_record")
  with pytest.raises(RuntimeError):
    with squad_data.FeatureWriter(path, is_training=False):
      raise RuntimeError("boom")
  assert not os.listdir(tmp_path)


# ----------------------------------------------------------------------------
# Records
# ----------------------------------------------------------------------------


def test_squad_example_keeps_its_constructor_attributes_and_repr():
  example = squad_data.SquadExample("q1", "Who?", ["The", "cat", "sat."],
                                    "cat", 1, 1)
  assert (example.qas_id, example.question_text, example.doc_tokens,
          example.orig_answer_text, example.start_position,
          example.end_position, example.is_impossible) == (
              "q1", "Who?", ["The", "cat", "sat."], "cat", 1, 1, False)
  want = ("SquadExample(qas_id='q1', question_text='Who?', doc_tokens=[The "
          "cat sat.], start_position=1, end_position=1, is_impossible=False)")
  assert repr(example) == str(example) == want
  predicting = squad_data.SquadExample(qas_id=7, question_text="Q",
                                       doc_tokens=["a"])
  assert repr(predicting) == (
      "SquadExample(qas_id=7, question_text='Q', doc_tokens=[a], "
      "start_position=None, end_position=None, is_impossible=False)")
  # Identity, as in the reference (no field-wise equality): examples stay
  # hashable and two equal questions stay two examples.
  twin = squad_data.SquadExample("q1", "Who?", ["The", "cat", "sat."], "cat",
                                 1, 1)
  assert example != twin and len({example, twin}) == 2


def test_input_features_keep_the_reference_signature():
  feature = squad_data.InputFeatures(1000000000, 0, 0, ["[CLS]"], {}, {},
                                     [101], [1], [0])
  assert (feature.start_position, feature.end_position,
          feature.is_impossible) == (None, None, None)
  feature = squad_data.InputFeatures(
      unique_id=1, example_index=2, doc_span_index=3, tokens=["a"],
      token_to_orig_map={1: 0}, token_is_max_context={1: True},
      input_ids=[5], input_mask=[1], segment_ids=[1], start_position=4,
      end_position=5, is_impossible=False)
  assert (feature.unique_id, feature.example_index, feature.doc_span_index,
          feature.start_position, feature.end_position,
          feature.is_impossible) == (1, 2, 3, 4, 5, False)
