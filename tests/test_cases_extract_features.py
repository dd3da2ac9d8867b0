"""Bug-report case on extract_features' input format (a line splits into
text_a/text_b only on the last ' ||| '; a blank line is still an example), and
its neighbours."""

import json

import pytest

from helpers import data_path

import extract_features
import tokenization


@pytest.fixture(scope="module")
def case():
  with open(data_path("cases", "extract_features_input_format.json"),
            encoding="utf-8") as f:
    return json.load(f)


@pytest.fixture(scope="module")
def tokenizer():
  return tokenization.FullTokenizer(
      data_path("conformance", "tokenization", "vocab.txt"),
      do_lower_case=True)


def _write_lines(tmp_path, lines):
  path = tmp_path / "input.txt"
  path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
  return str(path)


def test_case_examples_and_features(case, tokenizer, tmp_path):
  inputs = case["input"]
  examples = extract_features.read_examples(
      _write_lines(tmp_path, inputs["input_lines"]))
  assert [{"unique_id": e.unique_id, "text_a": e.text_a, "text_b": e.text_b}
          for e in examples] == case["expected"]["examples"]
  features = extract_features.convert_examples_to_features(
      examples, inputs["max_seq_length"], tokenizer)
  assert [{"unique_id": f.unique_id, "tokens": f.tokens,
           "input_ids": f.input_ids, "input_mask": f.input_mask,
           "input_type_ids": f.input_type_ids}
          for f in features] == case["expected"]["features"]


@pytest.mark.parametrize("line,text_a,text_b", [
    ("a ||| b", "a", "b"),
    ("a|||b", "a|||b", None),            # no spaces: not a separator
    ("a |||  b", "a", " b"),
    ("a  |||  b", "a ", " b"),           # only one space is consumed
    ("||| b", "||| b", None),            # stripped line has no leading space
    ("a ||| b ||| c ||| d", "a ||| b ||| c", "d"),
    ("a\t|||\tb", "a\t|||\tb", None),    # tabs are not the separator
])
def test_pair_separator_neighbours(tmp_path, line, text_a, text_b):
  (example,) = extract_features.read_examples(_write_lines(tmp_path, [line]))
  assert (example.text_a, example.text_b) == (text_a, text_b)


def test_crlf_and_blank_lines_each_give_an_example(tmp_path):
  path = tmp_path / "input.txt"
  path.write_bytes(b"first\r\n\r\nx ||| y\r\n   \nlast")
  examples = extract_features.read_examples(str(path))
  assert [(e.unique_id, e.text_a, e.text_b) for e in examples] == [
      (0, "first", None), (1, "", None), (2, "x", "y"), (3, "", None),
      (4, "last", None)]


def test_unicode_line_separator_does_not_split_a_line(tmp_path, tokenizer):
  path = tmp_path / "input.txt"
  path.write_text("one\u2028two ||| three\n", encoding="utf-8")
  (example,) = extract_features.read_examples(str(path))
  assert (example.text_a, example.text_b) == ("one\u2028two", "three")
  feature = extract_features.convert_single_example(example, 16, tokenizer)
  assert feature.tokens == ["[CLS]", "one", "two", "[SEP]", "three", "[SEP]"]
  assert feature.input_type_ids[:6] == [0, 0, 0, 0, 1, 1]
