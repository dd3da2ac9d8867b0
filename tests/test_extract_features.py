"""Tests for extract_features.py: input parsing, features, and the JSON output."""

import json
import os

import pytest

from helpers import data_path
from helpers import run_script
from helpers import tiny_model_flags

import extract_features
import tokenization


def _conformance(name):
  return data_path("conformance", "extract_features", name)


def _read_jsonl(path):
  with open(path, encoding="utf-8") as f:
    return [json.loads(line) for line in f]


def _run_script(args, timeout=240):
  return run_script("extract_features.py", args, timeout=timeout)


def _model_flags():
  return tiny_model_flags(("conformance", "extract_features"),
                          do_lower_case=True)


@pytest.fixture(scope="module")
def tokenizer():
  return tokenization.FullTokenizer(_conformance("vocab.txt"),
                                    do_lower_case=True)


def test_features_equal_conformance(tokenizer):
  expected = _read_jsonl(_conformance("features.jsonl"))
  examples = extract_features.read_examples(_conformance("input.txt"))
  features = extract_features.convert_examples_to_features(
      examples, 16, tokenizer)
  assert len(features) == len(expected)
  for example, feature, want in zip(examples, features, expected):
    assert example.unique_id == want["unique_id"]
    assert example.text_a == want["text_a"]
    assert example.text_b == want["text_b"]
    assert feature.tokens == want["tokens"]
    assert feature.input_ids == want["input_ids"]
    assert feature.input_mask == want["input_mask"]
    assert feature.input_type_ids == want["input_type_ids"]


def test_pair_and_single_lines_are_parsed(tmp_path):
  path = tmp_path / "in.txt"
  path.write_text("one sentence\nleft ||| right\nleft|||right\n\n",
                  encoding="utf-8")
  examples = extract_features.read_examples(str(path))
  assert [(e.unique_id, e.text_a, e.text_b) for e in examples] == [
      (0, "one sentence", None), (1, "left", "right"),
      (2, "left|||right", None), (3, "", None)]


def test_single_sentence_is_cut_to_seq_length_minus_two(tokenizer):
  example = extract_features.InputExample(0, "a b c d e f g h i j", None)
  feature = extract_features.convert_single_example(example, 6, tokenizer)
  assert feature.tokens == ["[CLS]", "a", "b", "c", "d", "[SEP]"]
  assert feature.input_mask == [1] * 6


@pytest.mark.parametrize("layers,message", [
    ("-3", "index -3 is outside the model's 2 layers"),
    ("2", "index 2 is outside the model's 2 layers"),
    ("-1,x", "'x' is not an integer"),
])
def test_layer_index_outside_model_is_refused(layers, message):
  with pytest.raises(ValueError, match=message):
    extract_features.parse_layer_indexes(layers, 2)


def test_layer_indexes_inside_model_are_accepted():
  assert extract_features.parse_layer_indexes("-1,-2,0,1", 2) == [-1, -2, 0, 1]


@pytest.mark.e2e
@pytest.mark.slow
def test_output_equals_conformance_and_keeps_every_line(tmp_path):
  # 5 conformance lines + 6 more = 11 lines: not a multiple of batch_size 4.
  with open(_conformance("input.txt"), encoding="utf-8") as f:
    lines = f.read().splitlines()
  extra = ["line number %d ||| pair %d" % (i, i) for i in range(6)]
  input_file = tmp_path / "input.txt"
  input_file.write_text("\n".join(lines + extra) + "\n", encoding="utf-8")
  output_file = tmp_path / "out.jsonl"
  result = _run_script(["--input_file=%s" % input_file,
                        "--output_file=%s" % output_file,
                        "--layers=-1,-2", "--max_seq_length=16",
                        "--batch_size=4"] + _model_flags())
  assert result.returncode == 0, result.stderr[-3000:]
  got = _read_jsonl(output_file)
  assert [row["linex_index"] for row in got] == list(range(11))
  assert not [p for p in os.listdir(tmp_path) if ".tmp-" in p]
  for row, want in zip(got, _read_jsonl(_conformance("output.jsonl"))):
    assert list(row.keys()) == ["linex_index", "features"]
    assert [f["token"] for f in row["features"]] == [
        f["token"] for f in want["features"]]
    for f_got, f_want in zip(row["features"], want["features"]):
      assert [l["index"] for l in f_got["layers"]] == [-1, -2]
      for l_got, l_want in zip(f_got["layers"], f_want["layers"]):
        assert len(l_got["values"]) == 32
        assert max(abs(a - b) for a, b in zip(
            l_got["values"], l_want["values"])) <= 2e-6
  assert got[10]["features"][1]["token"] == "line"


@pytest.mark.slow
@pytest.mark.parametrize("case", ["empty_input", "missing_checkpoint",
                                  "bad_layer", "l2_without_pooling",
                                  "pooling_with_layers"])
def test_bad_input_gives_one_line_error(tmp_path, case):
  input_file = tmp_path / "input.txt"
  input_file.write_text("" if case == "empty_input" else "hello\n",
                        encoding="utf-8")
  args = ["--input_file=%s" % input_file,
          "--output_file=%s" % (tmp_path / "out.jsonl"),
          "--max_seq_length=16", "--layers=-1,-2"] + _model_flags()
  expected = {"empty_input": "is empty",
              "missing_checkpoint": "--init_checkpoint: no TensorFlow "
                                    "checkpoint",
              "bad_layer": "--layers: index 5",
              "l2_without_pooling": "--l2_normalize needs --pooling=mean, "
                                    "first_token or cls",
              "pooling_with_layers": "--layers=-1,-2 with --pooling=mean: "
                                     "pooling uses the last layer only"}[case]
  if case == "missing_checkpoint":
    args.append("--init_checkpoint=%s" % (tmp_path / "nope.ckpt"))
  if case == "bad_layer":
    args.append("--layers=5")
  if case == "l2_without_pooling":
    args.append("--l2_normalize")
  if case == "pooling_with_layers":
    args.append("--pooling=mean")
  result = _run_script(args)
  assert result.returncode == 1
  error_lines = [l for l in result.stderr.splitlines()
                 if l.startswith("error: ")]
  assert len(error_lines) == 1 and expected in error_lines[0], result.stderr
  assert "Traceback" not in result.stderr
  assert not (tmp_path / "out.jsonl").exists()


def test_pending_features_hand_out_in_order_and_check_ids(tokenizer):
  examples = [extract_features.InputExample(i, "word %d" % i, None)
              for i in range(3)]
  pending = extract_features._PendingFeatures(
      extract_features.iter_features(examples, 8, tokenizer))
  assert [f.unique_id for f in pending] == [0, 1, 2]  # All queued.
  assert pending.pop(0).tokens == ["[CLS]", "word", "0", "[SEP]"]
  with pytest.raises(RuntimeError, match="prediction for example 2 arrived "
                     "when 1 was expected"):
    pending.pop(2)
