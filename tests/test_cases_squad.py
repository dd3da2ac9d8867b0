"""Bug-report cases on run_squad, and their neighbours.

Answer offsets (a wrong offset or an NBSP mismatch is skipped), doc-stride
windows, SQuAD 2.0 impossible questions, and mapping the predicted text back
onto the original words (the reference's NBSP bug is fixed here for
every character the tokenizer drops or treats as a space).
"""

import collections
import json
import sys
import unicodedata

import pytest

from helpers import data_path

import run_squad
from bert_tf.tasks.squad import data as squad_data
import tokenization


def _case(name):
  with open(data_path("cases", name + ".json"), encoding="utf-8") as f:
    return json.load(f)


@pytest.fixture(scope="module")
def tokenizer():
  return tokenization.FullTokenizer(
      data_path("conformance", "tokenization", "vocab.txt"),
      do_lower_case=True)


def _write_json(tmp_path, obj, name="input.json"):
  path = tmp_path / name
  path.write_text(json.dumps(obj), encoding="utf-8")
  return str(path)


def _one_question(context, answer_text, answer_start, qid="q"):
  return {"version": "1.1", "data": [{"title": "t", "paragraphs": [{
      "context": context, "qas": [{
          "id": qid, "question": "What?",
          "answers": [{"text": answer_text, "answer_start": answer_start}]}]}
  ]}]}


def _convert(examples, tokenizer, inputs, is_training):
  features = []
  run_squad.convert_examples_to_features(
      examples, tokenizer, inputs["max_seq_length"], inputs["doc_stride"],
      inputs["max_query_length"], is_training, features.append)
  return features


# ----------------------------------------------------------------------------
# Answer offsets
# ----------------------------------------------------------------------------


def test_offset_case(tokenizer, tmp_path, caplog):
  case = _case("squad_answer_offset_mismatch")
  inputs, expected = case["input"], case["expected"]
  path = _write_json(tmp_path, inputs["squad_json"])
  caplog.set_level("INFO")
  examples = run_squad.read_squad_examples(path, is_training=True)
  assert [{"qas_id": e.qas_id,
           "doc_words": e.doc_tokens[e.start_position:e.end_position + 1],
           "start_word": e.start_position, "end_word": e.end_position}
          for e in examples] == expected["kept_examples"]
  kept = {e.qas_id for e in examples}
  assert sorted({"q1", "q2", "q3", "q4"} - kept) == expected["skipped"]
  assert "skipped 2 training answer(s)" in caplog.text
  features = _convert(examples, tokenizer, inputs, True)
  assert [{"ex": f.example_index, "tokens": f.tokens,
           "start": f.start_position, "end": f.end_position}
          for f in features] == expected["features"]
  assert len(run_squad.read_squad_examples(path, is_training=False)) == (
      expected["predict_mode_example_count"])


_CATEGORY_CHARS = collections.defaultdict(list)
for _cp in range(sys.maxunicode + 1):
  _CATEGORY_CHARS[unicodedata.category(chr(_cp))].append(chr(_cp))


def _unicode_spaces():
  """Every Zs character (Python's Unicode tables)."""
  return list(_CATEGORY_CHARS["Zs"])


_SPLIT_SPACES = " \u202f"  # the only Zs characters that split document words


@pytest.mark.parametrize("space", _unicode_spaces(), ids=lambda c: "U+%04X" %
                         ord(c))
def test_offset_answer_inside_a_word_with_any_unicode_space(
    tokenizer, tmp_path, space):
  context = "The trail is 10%skm long." % space
  path = _write_json(tmp_path, _one_question(context, "km", 16))
  examples = run_squad.read_squad_examples(path, is_training=True)
  assert len(examples) == 1
  example = examples[0]
  if space in _SPLIT_SPACES:
    assert example.doc_tokens[3:5] == ["10", "km"]
    assert (example.start_position, example.end_position) == (4, 4)
  else:
    assert example.doc_tokens[3] == "10%skm" % space
    assert (example.start_position, example.end_position) == (3, 3)
  # Whatever the space, the features point at the sub-token "km".
  features = _convert(examples, tokenizer, {
      "max_seq_length": 32, "doc_stride": 16, "max_query_length": 8}, True)
  assert len(features) == 1
  feature = features[0]
  assert feature.tokens[feature.start_position] == "km"
  assert feature.start_position == feature.end_position


@pytest.mark.parametrize("space", _unicode_spaces(), ids=lambda c: "U+%04X" %
                         ord(c))
def test_offset_answer_written_with_plain_space(tmp_path, space):
  """'10 km' is found only where the context's space splits words."""
  context = "The trail is 10%skm long." % space
  path = _write_json(tmp_path, _one_question(context, "10 km", 13))
  examples = run_squad.read_squad_examples(path, is_training=True)
  if space in _SPLIT_SPACES:
    assert [(e.start_position, e.end_position) for e in examples] == [(3, 4)]
  else:
    assert not examples  # skipped with a warning, as the reference does


@pytest.mark.parametrize("separator", ["\t", "\n", "\r", "\u202f"])
def test_offset_other_word_separators_split_the_document(tmp_path, separator):
  context = "The trail is 10%skm long." % separator
  path = _write_json(tmp_path, _one_question(context, "10 km", 13))
  examples = run_squad.read_squad_examples(path, is_training=True)
  assert examples[0].doc_tokens == ["The", "trail", "is", "10", "km",
                                    "long."]
  assert (examples[0].start_position, examples[0].end_position) == (3, 4)


def test_offset_answer_text_whitespace_is_normalized(tmp_path):
  context = "The quick brown fox jumps."
  path = _write_json(tmp_path, _one_question(context, "brown\t fox", 10))
  examples = run_squad.read_squad_examples(path, is_training=True)
  assert (examples[0].start_position, examples[0].end_position) == (2, 3)


def test_offset_past_the_context_is_skipped_not_a_crash(tmp_path):
  path = _write_json(tmp_path, _one_question("Short.", "Short.", 3))
  assert run_squad.read_squad_examples(path, is_training=True) == []


# ----------------------------------------------------------------------------
# doc_stride windows
# ----------------------------------------------------------------------------


def _features_as_case(features, is_training):
  rows = []
  for f in features:
    row = {"doc_span_index": f.doc_span_index, "tokens": f.tokens,
           "is_max_context": {str(k): v
                              for k, v in f.token_is_max_context.items()}}
    if is_training:
      row.update(start=f.start_position, end=f.end_position)
    rows.append(row)
  return rows


def test_windows_case(tokenizer, tmp_path):
  case = _case("squad_doc_stride_windows")
  inputs, expected = case["input"], case["expected"]
  path = _write_json(tmp_path, inputs["squad_json"])
  train = _convert(run_squad.read_squad_examples(path, True), tokenizer,
                   inputs, True)
  predict = _convert(run_squad.read_squad_examples(path, False), tokenizer,
                     inputs, False)
  assert len(train) == expected["n_features_train"]
  assert len(predict) == expected["n_features_predict"]
  assert _features_as_case(train, True) == [
      {k: row[k] for k in ("doc_span_index", "tokens", "is_max_context",
                           "start", "end")}
      for row in expected["features"]]
  assert [dict(row, start=None, end=None) for row in _features_as_case(
      predict, False)] == [dict(row, start=None, end=None)
                           for row in expected["features"]]
  assert all(f.is_impossible is False for f in train)


@pytest.mark.parametrize("num_tokens,max_tokens,stride,starts", [
    (10, 4, 2, [(0, 4), (2, 4), (4, 4), (6, 4)]),
    (10, 4, 10, [(0, 4), (4, 4), (8, 2)]),   # stride > window: no gap
    (10, 4, 4, [(0, 4), (4, 4), (8, 2)]),
    (4, 4, 1, [(0, 4)]),                      # fits exactly: one window
    (5, 4, 1, [(0, 4), (1, 4)]),              # one token more: two
    (5, 4, 3, [(0, 4), (3, 2)]),
    (1, 1, 1, [(0, 1)]),
    (0, 4, 2, []),
])
def test_windows_doc_spans(num_tokens, max_tokens, stride, starts):
  spans = squad_data.doc_spans(
      num_tokens, max_tokens, stride)
  assert [(s.start, s.length) for s in spans] == starts


def test_windows_max_context_tie_goes_to_the_earlier_span():
  span = squad_data.DocSpan  # pylint: disable=protected-access
  spans = [span(0, 5), span(2, 5)]
  is_max = squad_data.is_max_context
  # Token 3: min(3, 1) + .05 in span 0 equals min(1, 3) + .05 in span 1.
  assert is_max(spans, 0, 3) and not is_max(spans, 1, 3)


@pytest.mark.parametrize("stride", [1, 2, 3, 5, 8, 100])
def test_windows_every_token_has_exactly_one_max_context_window(
    tokenizer, tmp_path, stride):
  context = ("alpha beta gamma delta epsilon zeta eta theta iota kappa "
             "lambda mu nu xi omicron pi rho sigma tau upsilon")
  path = _write_json(tmp_path, _one_question(context, "sigma",
                                             context.index("sigma")))
  examples = run_squad.read_squad_examples(path, True)
  inputs = {"max_seq_length": 16, "doc_stride": stride,
            "max_query_length": 4}
  features = _convert(examples, tokenizer, inputs, True)
  doc_tokens = [t for word in context.split() for t in tokenizer.tokenize(word)]
  query_length = len(tokenizer.tokenize("What?"))
  spans = squad_data.doc_spans(
      len(doc_tokens), 16 - query_length - 3, stride)
  assert len(spans) == len(features)
  owners = {}
  for feature, span in zip(features, spans):
    doc_offset = query_length + 2
    assert feature.tokens[doc_offset:-1] == doc_tokens[
        span.start:span.start + span.length]
    for position, is_max in feature.token_is_max_context.items():
      if is_max:
        owners.setdefault(span.start + position - doc_offset, []).append(
            feature.doc_span_index)
  assert sorted(owners) == list(range(len(doc_tokens)))
  assert all(len(spans) == 1 for spans in owners.values())
  # The answer positions: only windows holding all of "sigma".
  holding = [f for f in features if f.start_position]
  assert holding and all(f.tokens[f.start_position] == "sigma"
                         for f in holding)
  assert all((f.start_position, f.end_position) == (0, 0)
             for f in features if f not in holding)


def test_windows_answer_straddling_windows_is_labelled_only_where_whole(
    tokenizer, tmp_path):
  context = "one two three four five six seven eight nine ten"
  path = _write_json(tmp_path, _one_question(context, "four five six", 14))
  examples = run_squad.read_squad_examples(path, True)
  # Query "what ?" = 2 tokens, so 11 - 5 = 6 document tokens per window.
  features = _convert(examples, tokenizer, {
      "max_seq_length": 11, "doc_stride": 2, "max_query_length": 4}, True)
  labels = [(f.doc_span_index, f.start_position, f.end_position)
            for f in features]
  # Windows start at 0, 2, 4: [one..six] holds it, [three..eight] holds it,
  # [five..ten] cuts it.
  assert labels == [(0, 7, 9), (1, 5, 7), (2, 0, 0)]


# ----------------------------------------------------------------------------
# SQuAD 2.0 impossible questions
# ----------------------------------------------------------------------------


def test_impossible_case(tokenizer, tmp_path):
  case = _case("squad_v2_impossible_questions")
  inputs, expected = case["input"], case["expected"]
  path = _write_json(tmp_path, inputs["squad_json"])
  with pytest.raises(ValueError) as error:
    run_squad.read_squad_examples(path, True, version_2_with_negative=False)
  want = expected["version_2_with_negative=false"]
  assert want.startswith("ValueError: ")
  assert str(error.value).startswith(want[len("ValueError: "):])
  examples = run_squad.read_squad_examples(path, True,
                                           version_2_with_negative=True)
  want = expected["version_2_with_negative=true"]
  assert [[e.qas_id, e.start_position, e.end_position, e.is_impossible,
           e.orig_answer_text] for e in examples] == want["examples"]
  features = _convert(examples, tokenizer, inputs, True)
  assert [{"ex": f.example_index, "tokens": f.tokens,
           "start": f.start_position, "end": f.end_position,
           "is_impossible": f.is_impossible}
          for f in features] == want["features"]


@pytest.mark.parametrize("flag", [False, True])
def test_impossible_questions_read_in_prediction_mode_either_way(
    tmp_path, flag):
  path = _write_json(
      tmp_path, _case("squad_v2_impossible_questions")["input"]["squad_json"])
  examples = run_squad.read_squad_examples(path, False,
                                           version_2_with_negative=flag)
  assert [(e.qas_id, e.is_impossible, e.start_position, e.orig_answer_text)
          for e in examples] == [("i1", False, None, None),
                                 ("i2", False, None, None)]


def test_impossible_v1_data_under_the_v2_flag_is_all_answerable(tmp_path):
  path = _write_json(tmp_path, _one_question("Paris is big.", "Paris", 0))
  examples = run_squad.read_squad_examples(path, True,
                                           version_2_with_negative=True)
  assert [(e.start_position, e.is_impossible) for e in examples] == [
      (0, False)]


def test_impossible_answerable_training_question_with_two_answers_is_refused(
    tmp_path):
  data = _case("squad_v2_impossible_questions")["input"]["squad_json"]
  qa = data["data"][0]["paragraphs"][0]["qas"][0]
  qa["answers"].append({"text": "Paris", "answer_start": 0})
  path = _write_json(tmp_path, data)
  with pytest.raises(ValueError, match="exactly 1 answer.*has 2"):
    run_squad.read_squad_examples(path, True, version_2_with_negative=True)


def test_impossible_question_ignores_plausible_answers_and_spans(
    tokenizer, tmp_path):
  context = " ".join("word%d" % i for i in range(30))
  data = {"data": [{"paragraphs": [{"context": context, "qas": [{
      "id": "x", "question": "Why?", "is_impossible": True, "answers": [],
      "plausible_answers": [{"text": "word3", "answer_start": 18}]}]}]}]}
  examples = run_squad.read_squad_examples(_write_json(tmp_path, data), True,
                                           version_2_with_negative=True)
  features = _convert(examples, tokenizer, {
      "max_seq_length": 16, "doc_stride": 4, "max_query_length": 4}, True)
  assert len(features) > 3
  assert all((f.start_position, f.end_position, f.is_impossible) ==
             (0, 0, True) for f in features)


def _predict_one(tokenizer, tmp_path, context, question, span_token,
                 version_2, cls_logit):
  """Predicts one question with logits peaked at `span_token` (and [CLS])."""
  data = {"data": [{"paragraphs": [{"context": context, "qas": [
      {"id": "q", "question": question}]}]}]}
  examples = run_squad.read_squad_examples(_write_json(tmp_path, data), False,
                                           version_2_with_negative=version_2)
  features = _convert(examples, tokenizer, {
      "max_seq_length": 32, "doc_stride": 16, "max_query_length": 8}, False)
  assert len(features) == 1
  logits = [0.0] * 32
  logits[features[0].tokens.index(span_token)] = 5.0
  logits[0] = cls_logit
  result = run_squad.RawResult(features[0].unique_id, logits, logits)
  return run_squad.write_predictions(
      examples, features, [result], 20, 30, True, str(tmp_path / "p.json"),
      str(tmp_path / "n.json"), str(tmp_path / "o.json"),
      version_2_with_negative=version_2)


@pytest.mark.parametrize("version_2,cls_logit,text,odds", [
    (True, 8.0, "", 16.0 - 10.0),       # null wins: odds > 0
    (True, 1.0, "Paris", 2.0 - 10.0),   # answer wins
    (False, 8.0, "Paris", None),        # 1.1: never null
])
def test_impossible_null_answer_decision(tokenizer, tmp_path, version_2,
                                         cls_logit, text, odds):
  written = _predict_one(tokenizer, tmp_path, "Paris is the capital.",
                         "Capital of Mars?", "paris", version_2, cls_logit)
  assert written.predictions == {"q": text}
  if odds is None:
    assert written.null_odds == {} and not (tmp_path / "o.json").exists()
  else:
    assert written.null_odds["q"] == pytest.approx(odds)
    texts = [entry["text"] for entry in written.nbest["q"]]
    assert "" in texts and "Paris" in texts


# ----------------------------------------------------------------------------
# Mapping the predicted text back onto the original words
# ----------------------------------------------------------------------------


def _reference_final_text(pred_text, orig_text, do_lower_case):
  """The reference algorithm as SPEC 6.2 describes it (U+0020 only)."""
  basic = tokenization.BasicTokenizer(do_lower_case=do_lower_case)
  tok_text = " ".join(basic.tokenize(orig_text))
  start = tok_text.find(pred_text)
  if start == -1:
    return orig_text
  end = start + len(pred_text) - 1

  def strip(text):
    kept = [(i, c) for i, c in enumerate(text) if c != " "]
    return "".join(c for _, c in kept), [i for i, _ in kept]

  orig_ns, orig_map = strip(orig_text)
  tok_ns, tok_map = strip(tok_text)
  if len(orig_ns) != len(tok_ns):
    return orig_text
  tok_inverse = {pos: ns for ns, pos in enumerate(tok_map)}
  if start not in tok_inverse or end not in tok_inverse:
    return orig_text
  return orig_text[orig_map[tok_inverse[start]]:orig_map[tok_inverse[end]] + 1]


def _final_text_rows():
  case = _case("squad_final_text_alignment")
  rows = []
  for pred, orig, lower in case["input"]["cases"]:
    key = "%s|%s|%s" % (pred, orig, lower)
    rows.append((pred, orig, lower == "True", case["expected"]["right"][key],
                 case["expected"]["original"][key]))
  return rows


def test_final_text_case_right_values():
  for pred, orig, lower, right, _ in _final_text_rows():
    assert run_squad.get_final_text(pred, orig, lower) == right, (pred, orig)


def test_final_text_only_the_nbsp_row_differs_from_the_reference():
  for pred, orig, lower, right, original in _final_text_rows():
    assert _reference_final_text(pred, orig, lower) == original
    assert (right != original) == ("\u00a0" in orig and pred == "km")


def _chars_in(categories):
  return [c for category in categories for c in _CATEGORY_CHARS[category]]


# Everything BasicTokenizer drops (U+0000, U+FFFD, Cc, Cf) or turns into a
# separator (Zs, and U+2028/U+2029 through str.split()).
_INVISIBLE = sorted(set(_chars_in({"Zs", "Zl", "Zp", "Cc", "Cf"}) +
                        ["\u0000", "\ufffd"]))


def test_final_text_neighbour_character_classes_are_covered():
  assert len(_INVISIBLE) >= 240  # 17 Zs, 2 Zl/Zp, 65 Cc, 160+ Cf, U+FFFD
  for char in "\u00a0\u2007\u202f\u3000\u2028\u200b\u200d\u00ad\ufeff\x85":
    assert char in _INVISIBLE


@pytest.mark.parametrize("lower", [True, False])
def test_final_text_every_invisible_character_inside_a_word(lower):
  failures = []
  for char in _INVISIBLE:
    orig = "10%skm" % char
    for pred, want in (("km", "km"), ("10", "10")):
      got = run_squad.get_final_text(pred, orig, lower)
      if got != want:
        failures.append((hex(ord(char)), pred, got))
  assert not failures


@pytest.mark.parametrize("lower", [True, False])
def test_final_text_invisible_character_between_words_keeps_the_span(lower):
  basic = tokenization.BasicTokenizer(do_lower_case=lower)
  failures = []
  for char in _INVISIBLE:
    phrase = "Tour%sEiffel" % char
    pred = " ".join(basic.tokenize(phrase))
    got = run_squad.get_final_text(pred, phrase + ",", lower)
    if got != phrase:
      failures.append((hex(ord(char)), got))
  assert not failures


@pytest.mark.parametrize("pred,orig,lower,want", [
    ("cafe", "Cafe\u0301,", True, "Cafe\u0301"),   # combining accent dropped
    ("Cafe\u0301", "Cafe\u0301,", False, "Cafe\u0301"),
    (unicodedata.normalize("NFD", "\uc11c\uc6b8"), "\uc11c\uc6b8,", True,
     "\uc11c\uc6b8"),                                # Hangul -> 5 jamo
    ("smith", "Steve\u00a0Smith's", True, "Smith"),
    ("smith", "Steve\u2009\u200bSmith's", True, "Smith"),
    ("steve", "\u200bSteve", True, "Steve"),
    ("Paris", "Paris.", False, "Paris"),              # as the reference
    ("paris", "Paris.", False, "Paris."),             # not found: all
    ("bogus", "Paris\u00a0France", True, "Paris\u00a0France"),  # not found
])
def test_final_text_other_length_changing_normalizations(pred, orig, lower,
                                                         want):
  assert run_squad.get_final_text(pred, orig, lower) == want


def test_final_text_same_as_reference_on_texts_without_such_characters(
    tokenizer):
  """On real SQuAD words, every sub-span maps exactly as the reference."""
  path = data_path("conformance", "squad", "v1.1", "input_dev.json")
  examples = run_squad.read_squad_examples(path, False)
  basic = tokenization.BasicTokenizer(do_lower_case=True)
  checked = 0
  for example in examples[::5]:
    words = example.doc_tokens
    for start in range(0, len(words) - 3, 7):
      orig = " ".join(words[start:start + 3])
      tokens = basic.tokenize(orig)
      for i in range(len(tokens)):
        for j in (i, min(i + 2, len(tokens) - 1)):
          pred = " ".join(tokens[i:j + 1])
          assert run_squad.get_final_text(pred, orig, True) == (
              _reference_final_text(pred, orig, True)), (pred, orig)
          checked += 1
  assert checked > 1000


def test_final_text_prediction_of_a_word_with_nbsp_end_to_end(tokenizer,
                                                              tmp_path):
  written = _predict_one(tokenizer, tmp_path, "The trail is 10\u00a0km long.",
                         "Which unit?", "km", False, 0.0)
  assert written.predictions == {"q": "km"}
