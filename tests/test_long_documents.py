"""Tests for run_classifier.py --doc_stride: windows over a long text_a,
training on every window, one test_results.tsv line per document."""

import os

import numpy as np
import pytest

from helpers import data_path
from helpers import read_lines
from helpers import run_script
from helpers import RUNNERS
from helpers import tiny_model_flags
from helpers import write_tsv

from bert_tf import io as io_utils
from bert_tf.tasks.classifier import features as features_lib
from bert_tf.tasks.classifier import windows as windows_lib
from bert_tf.tasks.classifier.data import InputExample
import tokenization

# Fourteen words (of the conformance vocabulary) that say nothing, then the
# word that decides, three times: a 17-token text, whose deciding words lie
# past the 14 places of --max_seq_length=16.
_FILLER = ("the a is of and in to was he for on as with by").split()
_CUE = {"0": "john", "1": "city"}


def _write_documents(folder):
  for split, count in (("train", 24), ("dev", 8), ("test", 8)):
    write_tsv(os.path.join(folder, split + ".tsv"),
              [[" ".join(_FILLER + [_CUE[str(i % 2)]] * 3), str(i % 2)]
               for i in range(count)])


def _tokenizer():
  return tokenization.FullTokenizer(
      data_path("conformance", "modeling", "vocab.txt"))


@pytest.mark.parametrize("label", [1, 0.5])
def test_window_records_have_the_classifier_records_bytes(label):
  # The same bytes as the reference's records, on every protobuf release.
  ids, mask, segments = [101, 7, 102, 0], [1, 1, 1, 0], [0, 0, 0, 0]
  expected = io_utils.serialize_example(
      features_lib._feature_record(features_lib.InputFeatures(
          ids, mask, segments, label, True)), features_lib._WIRE_ORDER)
  assert windows_lib._record(ids, mask, segments, [label], True) == expected


def test_windows_cover_the_text_with_the_stride():
  tokenizer = _tokenizer()
  example = InputExample("d-0", " ".join(_FILLER + ["john"]))
  windows = windows_lib.encode_windows(example, tokenizer, 16, doc_stride=7)
  tokens = [tokenizer.convert_ids_to_tokens(ids[:sum(mask)])
            for ids, mask, _ in windows]
  assert tokens == [["[CLS]"] + _FILLER + ["[SEP]"],
                    ["[CLS]"] + _FILLER[7:] + ["john", "[SEP]"]]
  # Without a stride: the reference's single, truncated input.
  [(ids, mask, _)] = windows_lib.encode_windows(example, tokenizer, 16)
  assert tokenizer.convert_ids_to_tokens(ids[:sum(mask)]) == tokens[0]


def test_pair_keeps_text_b_whole_in_every_window():
  tokenizer = _tokenizer()
  example = InputExample("d-0", " ".join(_FILLER), text_b="john city")
  windows = windows_lib.encode_windows(example, tokenizer, 16, doc_stride=5)
  assert len(windows) == 2  # 11 places for text_a: starts 0 and 5.
  for ids, mask, segments in windows:
    tokens = tokenizer.convert_ids_to_tokens(ids[:sum(mask)])
    assert tokens[-3:] == ["john", "city", "[SEP]"]
    assert segments[:sum(mask)][-3:] == [1, 1, 1]


def test_aggregate_mean_and_max_per_document():
  predictions = [{"probabilities": p} for p in
                 ([0.6, 0.4], [0.2, 0.8], [0.9, 0.1], [0.5, 0.5])]
  owners = [0, 0, 1, -1]  # The last record is padding.
  mean = windows_lib.aggregate(predictions, owners, 2, "mean")
  np.testing.assert_allclose(mean, [[0.4, 0.6], [0.9, 0.1]])
  top = windows_lib.aggregate(predictions, owners, 2, "max")
  np.testing.assert_allclose(top, [[0.6, 0.8], [0.9, 0.1]])
  with pytest.raises(ValueError, match="got 2 predictions for 4 records"):
    windows_lib.aggregate(predictions[:2], owners, 2)


def _classify(tmp_path, extra):
  data_dir, output_dir = str(tmp_path / "data"), str(tmp_path / "out")
  _write_documents(data_dir)
  result = run_script("run_classifier.py", [
      "--task_name=tsv", "--do_train", "--do_predict",
      "--data_dir=" + data_dir, "--output_dir=" + output_dir,
      "--max_seq_length=16", "--train_batch_size=8",
      "--num_train_epochs=20", "--learning_rate=2e-3",
      "--warmup_proportion=0", "--random_seed=1"] + extra +
                      tiny_model_flags())
  assert result.returncode == 0, result.stderr[-3000:]
  lines = read_lines(os.path.join(output_dir, "test_results.tsv"))
  return result, np.array([[float(x) for x in line.split("\t")]
                           for line in lines])


@pytest.mark.slow
@pytest.mark.parametrize("runner,distribute", [
    (runner, []) for runner in RUNNERS] + [
        (RUNNERS[0], ["--distribution_strategy=mirrored",
                      "--num_cpu_devices=2", "--num_gpus=0"])])
def test_deciding_word_past_max_seq_length_is_found_only_with_windows(
    tmp_path, runner, distribute):
  export = [] if distribute else ["--export_dir=" + str(tmp_path / "export"),
                                  "--window_aggregation=max"]
  result, probabilities = _classify(
      tmp_path, ["--runner=" + runner, "--doc_stride=7"] + distribute +
      export)
  assert "Num examples = 24 (48 records)" in result.stderr  # 2 windows each.
  assert probabilities.shape == (8, 2)  # One line per document.
  np.testing.assert_array_equal(np.argmax(probabilities, axis=1),
                                [0, 1] * 4)
  if distribute:
    assert "Training on 2 replicas" in result.stderr
    return
  # The export windows the test file as the run did: the same lines.
  served = run_script("predict_saved_model.py", [
      "--model_dir=" + str(tmp_path / "export"),
      "--input_file=" + str(tmp_path / "data" / "test.tsv"),
      "--output_dir=" + str(tmp_path / "served")])
  assert served.returncode == 0, served.stderr[-3000:]
  assert "16 windows of 8 examples (doc_stride=7)" in served.stderr
  lines = read_lines(str(tmp_path / "served" / "test_results.tsv"))
  np.testing.assert_allclose(
      [[float(x) for x in line.split("\t")] for line in lines],
      probabilities, atol=1e-5, rtol=0)


@pytest.mark.slow
def test_without_windows_the_deciding_word_is_cut_off(tmp_path):
  _, probabilities = _classify(tmp_path / "cut", [])
  # Every input is the same 14 filler words: one answer for all.
  assert probabilities.shape == (8, 2)
  assert np.ptp(probabilities, axis=0).max() < 1e-6
