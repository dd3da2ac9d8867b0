"""Tests for predict_masked_lm.py: the JSON lines, their agreement with
Hugging Face's BertForMaskedLM on the converted checkpoint, and one-line
errors (a line without [MASK], a checkpoint without the head)."""

import json
import os

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from helpers import data_path
from helpers import import_or_skip
from helpers import read_lines
from helpers import run_script
from helpers import RUNNERS
from helpers import tiny_model_flags

import convert_checkpoint
import predict_masked_lm
import tokenization

_LINES = ["the man went to the [MASK] .",
          "",
          "he was born in [MASK] city and [MASK] there ||| she [MASK] ."]


def _model_dir():
  return os.path.dirname(data_path("conformance", "modeling",
                                   "bert_config.json"))


def _tokenizer():
  return tokenization.FullTokenizer(os.path.join(_model_dir(), "vocab.txt"))


def _write(tmp_path, lines):
  path = tmp_path / "masked.txt"
  path.write_text("\n".join(lines) + "\n", encoding="utf-8")
  return str(path)


def test_masks_stay_one_token_and_pairs_get_segment_one(tmp_path):
  lines = predict_masked_lm.read_masked_lines(
      _write(tmp_path, _LINES), _tokenizer(), 32, 20)
  assert [line.line for line in lines] == [1, 3]  # The blank line skipped.
  assert lines[0].tokens == ["[CLS]", "the", "man", "went", "to", "the",
                             "[MASK]", ".", "[SEP]"]
  assert lines[0].positions == [6]
  second = lines[1]
  assert [second.tokens[p] for p in second.positions] == ["[MASK]"] * 3
  assert second.segment_ids[second.positions[2]] == 1


@pytest.mark.parametrize("lines,message", [
    (["a [MASK] b", "no mask here"],
     ":2: no [MASK] in the line (expected a text with at least one)"),
    (["the " * 40 + "[MASK]"],
     ":1: 41 WordPieces do not fit --max_seq_length=32; a [MASK] would be "
     "cut"),
])
def test_bad_lines_name_file_and_line(tmp_path, lines, message):
  path = _write(tmp_path, lines)
  with pytest.raises(ValueError) as e:
    predict_masked_lm.read_masked_lines(path, _tokenizer(), 32, 20)
  assert str(e.value) == path + message


def _predict(tmp_path, runner, checkpoint_flags=None, lines=_LINES):
  output = str(tmp_path / "out.jsonl")
  result = run_script("predict_masked_lm.py", [
      "--runner=" + runner, "--input_file=" + _write(tmp_path, lines),
      "--output_file=" + output, "--top_k=5", "--max_seq_length=32",
      "--predict_batch_size=1"] + (checkpoint_flags or tiny_model_flags()),
                      timeout=180)
  return result, output


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.parametrize("runner", RUNNERS)
def test_top_k_match_bert_for_masked_lm_on_the_converted_checkpoint(
    tmp_path, runner):
  torch = import_or_skip("torch", "./setup.sh --test")
  transformers = import_or_skip("transformers", "./setup.sh --test")
  torch.set_num_threads(1)
  result, output = _predict(tmp_path, runner)
  assert result.returncode == 0, result.stderr[-3000:]
  got = [json.loads(line) for line in read_lines(output)]
  assert [g["line"] for g in got] == [1, 3]
  assert [len(g["masks"]) for g in got] == [1, 3]

  hf_dir = str(tmp_path / "hf")
  convert_checkpoint.tf_to_hf(os.path.join(_model_dir(), "bert_model.ckpt"),
                              hf_dir)
  model = transformers.BertForMaskedLM.from_pretrained(hf_dir).eval()
  tokenizer = _tokenizer()
  lines = predict_masked_lm.read_masked_lines(
      _write(tmp_path, _LINES), tokenizer, 32, 20)
  for line, want in zip(lines, got):
    with torch.no_grad():
      logits = model(
          input_ids=torch.tensor([line.input_ids]),
          attention_mask=torch.tensor([line.input_mask]),
          token_type_ids=torch.tensor([line.segment_ids])).logits[0]
    probabilities = torch.softmax(logits, dim=-1).numpy()
    for position, mask in zip(line.positions, want["masks"]):
      assert mask["position"] == position
      top = np.argsort(-probabilities[position], kind="stable")[:5]
      assert mask["tokens"] == tokenizer.convert_ids_to_tokens(top.tolist())
      np.testing.assert_allclose(mask["probabilities"],
                                 probabilities[position][top], atol=1e-5)
      assert mask["probabilities"] == sorted(mask["probabilities"],
                                             reverse=True)


@pytest.mark.slow
def test_line_without_mask_is_one_line(tmp_path):
  result, output = _predict(tmp_path, RUNNERS[0],
                            lines=["a [MASK] b", "no mask here"])
  assert result.returncode == 1
  assert result.stderr.strip().splitlines()[-1] == (
      "error: %s:2: no [MASK] in the line (expected a text with at least "
      "one)" % (tmp_path / "masked.txt"))
  assert not os.path.exists(output)


@pytest.mark.slow
def test_checkpoint_without_the_head_is_one_line(tmp_path):
  reader = tf.train.load_checkpoint(os.path.join(_model_dir(),
                                                 "bert_model.ckpt"))
  weights = {n: reader.get_tensor(n) for n in
             reader.get_variable_to_shape_map() if not n.startswith("cls/")}
  prefix = str(tmp_path / "fine_tuned" / "model.ckpt-1")
  os.makedirs(os.path.dirname(prefix))
  convert_checkpoint.write_tf_checkpoint(weights, prefix)
  flags = [f for f in tiny_model_flags() if "init_checkpoint" not in f]
  result, _ = _predict(tmp_path, RUNNERS[0],
                       checkpoint_flags=flags + ["--init_checkpoint=" +
                                                 prefix])
  assert result.returncode == 1
  last = result.stderr.strip().splitlines()[-1]
  assert last.startswith("error: --init_checkpoint: %s has no masked-LM "
                         "head (cls/predictions/*)" % prefix), last
