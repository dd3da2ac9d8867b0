"""Bug-report case: test_results.tsv has one line per test example (the
CoLA test header is skipped, TPU padding examples are never written), and its
neighbours: test sets of 1, 7, 8, 9 and 0 examples against batch 8, with and
without TPU padding."""

import json
import os

import pytest
import tensorflow.compat.v1 as tf

from helpers import data_path
from helpers import run_script

from bert_tf.tasks.classifier import data as classifier_data
import run_classifier
import tokenization

_COLA_TEST_HEADER = "index\tsentence"


@pytest.fixture(scope="module")
def case():
  with open(data_path("cases", "classifier_one_line_per_test_example.json"),
            encoding="utf-8") as f:
    return json.load(f)


@pytest.fixture(scope="module")
def vocab_file():
  return data_path("conformance", "tokenization", "vocab.txt")


@pytest.fixture(scope="module")
def tokenizer(vocab_file):
  return tokenization.FullTokenizer(vocab_file, do_lower_case=True)


def _write_cola(data_dir, num_test, dev_lines):
  """CoLA files as in the case: test has a header, train/dev do not."""
  os.makedirs(data_dir, exist_ok=True)
  with open(os.path.join(data_dir, "test.tsv"), "w", encoding="utf-8") as f:
    f.write(_COLA_TEST_HEADER + "\n")
    for i in range(num_test):
      f.write("%d\tsentence number %d is here.\n" % (i, i))
  with open(os.path.join(data_dir, "dev.tsv"), "w", encoding="utf-8") as f:
    f.write("".join(line + "\n" for line in dev_lines))
  return data_dir


def _predict_lines(examples, tokenizer, tmp_path, batch_size, use_tpu,
                   max_seq_length=16):
  """Runs the predict path without a model and returns test_results lines.

  Examples are padded as `main` does on TPU, written to a TFRecord, read back
  through the predict `input_fn` (partial last batch kept on CPU/GPU), and
  each record's (is_real_example, the id of its 3rd word: the number in
  "sentence number i is here.") stands in for the probabilities, so the
  output shows which records were written.
  """
  num_actual = len(examples)
  if use_tpu:
    examples = run_classifier.pad_to_batch_multiple(examples, batch_size)
  record_file = str(tmp_path / "predict.tf_record")
  run_classifier.file_based_convert_examples_to_features(
      examples, ["0", "1"], max_seq_length, tokenizer, record_file)
  input_fn = run_classifier.file_based_input_fn_builder(
      record_file, max_seq_length, is_training=False, drop_remainder=use_tpu)
  predictions = []
  with tf.Graph().as_default():
    batch = tf.data.make_one_shot_iterator(
        input_fn({"batch_size": batch_size})).get_next()
    with tf.Session() as sess:
      while True:
        try:
          values = sess.run(batch)
        except tf.errors.OutOfRangeError:
          break
        assert len(values["input_ids"]) in (
            (batch_size,) if use_tpu else range(1, batch_size + 1))
        for real, ids in zip(values["is_real_example"], values["input_ids"]):
          predictions.append({"probabilities": [float(real), float(ids[3])]})
  output_file = str(tmp_path / "test_results.tsv")
  run_classifier.write_test_results(output_file, predictions, num_actual)
  with open(output_file, encoding="utf-8") as f:
    return len(examples), f.read().splitlines()


def test_case_cola_header_skip_and_dev_rows(case, tmp_path):
  inputs, expected = case["input"], case["expected"]
  data_dir = _write_cola(str(tmp_path), 10, inputs["dev.tsv"])
  processor = run_classifier.get_processor(inputs["flags"]["task_name"])
  test = processor.get_test_examples(data_dir)
  dev = processor.get_dev_examples(data_dir)
  assert len(test) == expected["cola_test_examples"]
  assert len(dev) == expected["cola_dev_examples"]
  assert {e.label for e in test} == {expected["cola_test_example_label"]}
  assert test[0].text_a == "sentence number 0 is here."
  assert [e.label for e in dev] == ["1", "0", "1"]


def test_case_tpu_padding_at_function_level(case, tokenizer, tmp_path):
  padding_case = case["input"]["padding_case"]
  want = case["expected"]["with_tpu_padding"]
  data_dir = _write_cola(str(tmp_path / "data"), padding_case["n_examples"],
                         case["input"]["dev.tsv"])
  examples = classifier_data.ColaProcessor().get_test_examples(data_dir)
  padded = run_classifier.pad_to_batch_multiple(
      examples, padding_case["predict_batch_size"])
  assert len(padded) == want["total_examples"]
  assert sum(isinstance(e, classifier_data.PaddingInputExample)
             for e in padded) == want["padding"]
  assert len(examples) == padding_case["n_examples"]  # Input untouched.

  total, lines = _predict_lines(examples, tokenizer, tmp_path,
                                padding_case["predict_batch_size"],
                                use_tpu=padding_case["use_tpu"])
  assert total == want["total_examples"]
  assert len(lines) == want["lines_written"]
  assert all(line.split("\t")[0] == "1.0" for line in lines)  # All real.


@pytest.mark.parametrize("max_seq_length", [8, 16])
def test_case_padding_feature_is_all_zero(case, tokenizer, max_seq_length):
  want = case["expected"]["padding_feature"]
  feature = run_classifier.convert_single_example(
      0, classifier_data.PaddingInputExample(), ["0", "1"], max_seq_length,
      tokenizer)
  assert feature.input_ids == [0] * max_seq_length
  assert feature.input_mask == [0] * max_seq_length
  assert feature.segment_ids == [0] * max_seq_length
  if max_seq_length == len(want["input_ids"]):
    assert feature.input_ids == want["input_ids"]
    assert feature.input_mask == want["input_mask"]
    assert feature.segment_ids == want["segment_ids"]
  assert feature.label_id == want["label_id"]
  assert feature.is_real_example == want["is_real_example"]


@pytest.mark.slow
def test_case_end_to_end_random_init(case, vocab_file, tmp_path):
  inputs, expected = case["input"], case["expected"]
  data_dir = _write_cola(str(tmp_path / "data"), 10, inputs["dev.tsv"])
  config_file = str(tmp_path / "bert_config.json")
  with open(config_file, "w", encoding="utf-8") as f:
    json.dump(inputs["bert_config"], f)
  output_dir = str(tmp_path / "out")
  flag_args = ["--%s=%s" % (k, v) for k, v in inputs["flags"].items()]
  result = run_script(
      "run_classifier.py",
      flag_args + ["--data_dir=%s" % data_dir, "--output_dir=%s" % output_dir,
                   "--vocab_file=%s" % vocab_file,
                   "--bert_config_file=%s" % config_file], timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]
  with open(os.path.join(output_dir, "test_results.tsv"),
            encoding="utf-8") as f:
    lines = f.read().splitlines()
  assert len(lines) == expected["test_results_lines"]
  assert {len(line.split("\t")) for line in lines} == {
      expected["test_results_columns"]}
  with open(os.path.join(output_dir, "eval_results.txt"),
            encoding="utf-8") as f:
    keys = [line.split(" = ")[0] for line in f.read().splitlines()]
  assert keys == ["eval_accuracy", "eval_loss", "eval_mcc", "global_step",
                  "loss"]


@pytest.mark.parametrize("use_tpu", [False, True])
@pytest.mark.parametrize("num_test", [1, 7, 8, 9])
def test_one_line_per_test_example_around_batch_size(tokenizer, tmp_path,
                                                     num_test, use_tpu):
  data_dir = _write_cola(str(tmp_path / "data"), num_test, [])
  examples = classifier_data.ColaProcessor().get_test_examples(data_dir)
  assert len(examples) == num_test
  total, lines = _predict_lines(examples, tokenizer, tmp_path, 8, use_tpu)
  assert total == (-(-num_test // 8) * 8 if use_tpu else num_test)
  assert len(lines) == num_test
  assert all(line.split("\t")[0] == "1.0" for line in lines)
  # In input order: "sentence number i is here." is the i-th line.
  number_ids = tokenizer.convert_tokens_to_ids(
      [str(i) for i in range(num_test)])
  assert [int(float(line.split("\t")[1])) for line in lines] == number_ids


@pytest.mark.parametrize("use_tpu", [False, True])
def test_header_only_test_file_gives_empty_results(tokenizer, tmp_path,
                                                   use_tpu):
  data_dir = _write_cola(str(tmp_path / "data"), 0, [])
  examples = classifier_data.ColaProcessor().get_test_examples(data_dir)
  assert not examples
  total, lines = _predict_lines(examples, tokenizer, tmp_path, 8, use_tpu)
  assert (total, lines) == (0, [])


def test_missing_predictions_are_an_error_not_a_short_file(tmp_path):
  output_file = str(tmp_path / "test_results.tsv")
  with pytest.raises(ValueError, match="got 2 predictions for 3 test "
                     "examples"):
    run_classifier.write_test_results(
        output_file, [{"probabilities": [0.5, 0.5]}] * 2, 3)
  assert not os.path.exists(output_file)  # Atomic: nothing half-written.
