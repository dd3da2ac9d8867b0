"""Tests for run_classifier.py: features, records, the model, command-line
errors and two end-to-end runs (MRPC classification and STS-B regression).

The processors are tested in test_classifier_data.py, the metrics in
test_glue_metrics.py.
"""

import json
import os

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from helpers import data_path
from helpers import read_lines
from helpers import run_script
from helpers import shared_path
from helpers import tiny_model_flags
from helpers import write_tsv
from glue_samples import STSB_PAIRS
from glue_samples import stsb_lines
from glue_samples import write_glue

from bert_tf.tasks.classifier import data as classifier_data
from bert_tf.train import spec as spec_lib
import modeling
import run_classifier
import tokenization

_CONFORMANCE_TASKS = ("MRPC", "CoLA", "MNLI", "XNLI")


def _run_script(args, timeout=300):
  return run_script("run_classifier.py", args, timeout=timeout)


def _eval_results(path):
  results = {}
  for line in read_lines(path):
    key, value = line.split(" = ")
    results[key] = float(value)
  return results


# ----------------------------------------------------------------------------
# Conformance: examples and features equal the reference's exactly.
# ----------------------------------------------------------------------------


def _conformance_examples(task):
  data_dir = data_path("conformance", "classifier", task, "data")
  processor = run_classifier.get_processor(task)
  rows = [("train", e) for e in processor.get_train_examples(data_dir)]
  rows += [("dev", e) for e in processor.get_dev_examples(data_dir)]
  if task != "XNLI":  # The reference's XNLI has no test split.
    rows += [("test", e) for e in processor.get_test_examples(data_dir)]
  rows.append(("padding", run_classifier.PaddingInputExample()))
  return processor.get_labels(), rows


@pytest.mark.parametrize("max_seq_length", [128, 32])
@pytest.mark.parametrize("task", _CONFORMANCE_TASKS)
def test_features_match_reference(task, max_seq_length):
  folder = data_path("conformance", "classifier", task)
  with open(os.path.join(folder, "info.json"), encoding="utf-8") as f:
    info = json.load(f)
  tokenizer = tokenization.FullTokenizer(
      os.path.join(folder, "vocab.txt"), do_lower_case=info["do_lower_case"])
  label_list, rows = _conformance_examples(task)
  assert label_list == info["label_list"]
  with open(os.path.join(folder, "features_%d.jsonl" % max_seq_length),
            encoding="utf-8") as f:
    expected = [json.loads(line) for line in f]
  assert len(rows) == len(expected)
  for ex_index, ((split, example), want) in enumerate(zip(rows, expected)):
    feature = run_classifier.convert_single_example(
        ex_index, example, label_list, max_seq_length, tokenizer)
    got = {"split": split, "label_id": feature.label_id,
           "is_real_example": feature.is_real_example,
           "input_ids": feature.input_ids, "input_mask": feature.input_mask,
           "segment_ids": feature.segment_ids,
           "tokens": tokenizer.convert_ids_to_tokens(
               feature.input_ids[:sum(feature.input_mask)])}
    if split != "padding":
      got.update(guid=example.guid, text_a=example.text_a,
                 text_b=example.text_b, label=example.label)
    assert got == {k: want[k] for k in got}, (task, ex_index)


def test_convert_examples_to_features_matches_single_conversion():
  folder = data_path("conformance", "classifier", "MNLI")
  tokenizer = tokenization.FullTokenizer(os.path.join(folder, "vocab.txt"))
  label_list, rows = _conformance_examples("MNLI")
  examples = [e for _, e in rows]
  features = run_classifier.convert_examples_to_features(
      examples, label_list, 32, tokenizer)
  with open(os.path.join(folder, "features_32.jsonl"), encoding="utf-8") as f:
    expected = [json.loads(line) for line in f]
  assert [f.input_ids for f in features] == [e["input_ids"] for e in expected]
  assert [f.label_id for f in features] == [e["label_id"] for e in expected]


def test_mrpc_train_tf_record_matches_reference(tmp_path):
  folder = data_path("conformance", "classifier", "MRPC")
  tokenizer = tokenization.FullTokenizer(os.path.join(folder, "vocab.txt"))
  processor = classifier_data.MrpcProcessor()
  examples = processor.get_train_examples(os.path.join(folder, "data"))
  output_file = str(tmp_path / "train.tf_record")
  run_classifier.file_based_convert_examples_to_features(
      examples, processor.get_labels(), 128, tokenizer, output_file)

  def parse(path):
    records = []
    for raw in tf.python_io.tf_record_iterator(path):
      example = tf.train.Example.FromString(raw)
      records.append({k: list(v.int64_list.value)
                      for k, v in example.features.feature.items()})
    return records

  got = parse(output_file)
  want = parse(os.path.join(folder, "train_128.tf_record"))
  assert len(got) == len(want) == 20
  assert got == want
  assert sorted(got[0]) == ["input_ids", "input_mask", "is_real_example",
                            "label_ids", "segment_ids"]
  # Same feature order, so the serialized bytes are the reference's too.
  with open(output_file, "rb") as f:
    got_bytes = f.read()
  with open(os.path.join(folder, "train_128.tf_record"), "rb") as f:
    assert got_bytes == f.read()


def test_input_fn_reads_back_the_records(tmp_path):
  folder = data_path("conformance", "classifier", "CoLA")
  tokenizer = tokenization.FullTokenizer(os.path.join(folder, "vocab.txt"))
  processor = classifier_data.ColaProcessor()
  examples = processor.get_dev_examples(os.path.join(folder, "data"))[:5]
  examples.append(run_classifier.PaddingInputExample())
  path = str(tmp_path / "eval.tf_record")
  run_classifier.file_based_convert_examples_to_features(
      examples, processor.get_labels(), 16, tokenizer, path)
  input_fn = run_classifier.file_based_input_fn_builder(
      path, 16, is_training=False, drop_remainder=False)
  with tf.Graph().as_default():
    batch = tf.data.make_one_shot_iterator(
        input_fn({"batch_size": 4})).get_next()
    with tf.Session() as sess:
      first, second = sess.run(batch), sess.run(batch)
  assert first["input_ids"].shape == (4, 16)
  assert first["input_ids"].dtype == np.int32
  assert second["is_real_example"].tolist() == [1, 0]  # Partial batch kept.
  assert second["input_ids"][1].tolist() == [0] * 16


# ----------------------------------------------------------------------------
# The model.
# ----------------------------------------------------------------------------


def test_model_fn_initializes_bert_from_checkpoint_and_adds_head():
  model_dir = data_path("conformance", "modeling")
  config = modeling.BertConfig.from_json_file(
      os.path.join(model_dir, "bert_config.json"))
  checkpoint = os.path.join(model_dir, "bert_model.ckpt")
  model_fn = run_classifier.model_fn_builder(
      config, num_labels=3, init_checkpoint=checkpoint, learning_rate=1e-3,
      num_train_steps=10, num_warmup_steps=1, use_tpu=False,
      use_one_hot_embeddings=False)
  with tf.Graph().as_default():
    features = {
        "input_ids": tf.constant([[101, 500, 102, 0]] * 2, tf.int32),
        "input_mask": tf.constant([[1, 1, 1, 0]] * 2, tf.int32),
        "segment_ids": tf.zeros([2, 4], tf.int32),
        "label_ids": tf.constant([0, 2], tf.int32),
        "is_real_example": tf.constant([1, 1], tf.int32),
    }
    spec = model_fn(features, None, spec_lib.ModeKeys.PREDICT, {})
    shapes = {v.name: v.shape.as_list() for v in tf.trainable_variables()}
    assert shapes["output_weights:0"] == [3, 32]
    assert shapes["output_bias:0"] == [3]
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      probabilities = sess.run(spec.predictions["probabilities"])
      embeddings = sess.run(tf.global_variables(
          "bert/embeddings/word_embeddings")[0])
  np.testing.assert_array_equal(
      embeddings,
      tf.train.load_variable(checkpoint, "bert/embeddings/word_embeddings"))
  assert probabilities.shape == (2, 3)
  np.testing.assert_allclose(probabilities.sum(axis=-1), 1.0, rtol=1e-6)


def test_create_model_regression_has_one_output():
  config = modeling.BertConfig(vocab_size=50, hidden_size=16,
                               num_hidden_layers=1, num_attention_heads=2,
                               intermediate_size=32)
  with tf.Graph().as_default():
    input_ids = tf.constant([[1, 2, 3], [4, 5, 0]], tf.int32)
    loss, per_example_loss, logits, predictions = (
        run_classifier.create_model(
            config, False, input_ids, tf.ones_like(input_ids),
            tf.zeros_like(input_ids), tf.constant([1.0, 4.0]), 1, False,
            is_regression=True))
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      loss, per_example, logits, preds = sess.run(
          [loss, per_example_loss, logits, predictions])
  assert logits.shape == (2, 1) and preds.shape == (2,)
  np.testing.assert_allclose(per_example, np.square(preds - [1.0, 4.0]),
                             rtol=1e-5)
  assert loss == pytest.approx(per_example.mean(), rel=1e-5)


# ----------------------------------------------------------------------------
# Bad input on the command line.
# ----------------------------------------------------------------------------


@pytest.mark.slow
def test_cli_refuses_long_max_seq_length_before_running(tmp_path):
  output_dir = str(tmp_path / "out")
  result = _run_script(
      ["--task_name=mrpc", "--do_train",
       "--data_dir=%s" % shared_path("data", "glue", "MRPC"),
       "--output_dir=%s" % output_dir, "--max_seq_length=128"] +
      tiny_model_flags())
  assert result.returncode == 1
  last = result.stderr.strip().splitlines()[-1]
  assert last.startswith("error: --max_seq_length=128 is longer than the "
                         "model's max_position_embeddings=64")
  assert not os.path.exists(output_dir)


@pytest.mark.slow
def test_cli_reports_a_training_flag_together_with_the_other_problems(
    tmp_path):
  output_dir = str(tmp_path / "out")
  result = _run_script(
      ["--task_name=mrpc", "--do_train",
       "--data_dir=%s" % (tmp_path / "no_such_dir"),
       "--output_dir=%s" % output_dir, "--max_seq_length=128",
       "--gradient_accumulation_steps=0"] + tiny_model_flags())
  assert result.returncode == 1
  last = result.stderr.strip().splitlines()[-1]
  assert last.startswith("error: --data_dir: ")
  assert ("is not a directory; --gradient_accumulation_steps=0: expected an "
          "integer >= 1; --max_seq_length=128 is longer than the model's "
          "max_position_embeddings=64") in last
  assert not os.path.exists(output_dir)


@pytest.mark.slow
def test_cli_refuses_case_contradicting_checkpoint_name(tmp_path):
  model_dir = data_path("conformance", "modeling")
  output_dir = str(tmp_path / "out")
  result = _run_script(
      ["--task_name=mrpc", "--do_predict",
       "--data_dir=%s" % tmp_path, "--output_dir=%s" % output_dir,
       "--vocab_file=%s" % os.path.join(model_dir, "vocab.txt"),
       "--bert_config_file=%s" % os.path.join(model_dir, "bert_config.json"),
       "--init_checkpoint=/models/cased_L-12_H-768_A-12/bert_model.ckpt",
       "--do_lower_case=True"])
  assert result.returncode == 1
  lines = result.stderr.strip().splitlines()
  assert lines[-1].startswith("error: ") and "cased" in lines[-1]
  assert "do_lower_case" in lines[-1]
  assert "Traceback" not in result.stderr
  assert not os.path.exists(output_dir)


@pytest.mark.slow
def test_cli_refuses_vocab_larger_than_the_model(tmp_path):
  model_dir = data_path("conformance", "modeling")
  output_dir = str(tmp_path / "out")
  vocab = data_path("conformance", "tokenization", "vocab_cased.txt")
  result = _run_script(
      ["--task_name=mrpc", "--do_predict", "--do_lower_case=False",
       "--max_seq_length=32",
       "--data_dir=%s" % tmp_path, "--output_dir=%s" % output_dir,
       "--vocab_file=%s" % vocab,
       "--bert_config_file=%s" % os.path.join(model_dir, "bert_config.json")])
  assert result.returncode == 1
  assert "Traceback" not in result.stderr
  assert result.stderr.strip().splitlines()[-1] == (
      "error: --vocab_file has 28996 tokens but the model's vocab_size is "
      "1000: use the vocab.txt that came with the model")
  assert not os.path.exists(output_dir)


# ----------------------------------------------------------------------------
# End to end, with the tiny conformance checkpoint.
# ----------------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.slow
def test_mrpc_train_eval_predict_end_to_end(tmp_path):
  data_dir = str(tmp_path / "data")
  for split, count in (("train", 16), ("dev", 10), ("test", 11)):
    lines = read_lines(shared_path("data", "glue", "MRPC", split + ".tsv"))
    write_tsv(os.path.join(data_dir, split + ".tsv"), lines[:count + 1])
  output_dir = str(tmp_path / "out")
  result = _run_script(
      ["--task_name=MRPC", "--do_train", "--do_eval", "--do_predict",
       "--data_dir=%s" % data_dir, "--output_dir=%s" % output_dir,
       "--max_seq_length=32", "--train_batch_size=8", "--num_train_epochs=1",
       "--predict_batch_size=8", "--eval_batch_size=4"] + tiny_model_flags())
  assert result.returncode == 0, result.stderr[-3000:]
  results = _eval_results(os.path.join(output_dir, "eval_results.txt"))
  assert sorted(results) == ["eval_accuracy", "eval_f1", "eval_loss",
                             "global_step", "loss"]
  assert results["global_step"] == 2
  assert 0.0 <= results["eval_accuracy"] <= 1.0
  lines = read_lines(os.path.join(output_dir, "test_results.tsv"))
  assert len(lines) == 11  # Not a multiple of predict_batch_size.
  for line in lines:
    probabilities = [float(x) for x in line.split("\t")]
    assert len(probabilities) == 2
    assert sum(probabilities) == pytest.approx(1.0, abs=1e-5)
  assert "*INIT_FROM_CKPT*" in result.stderr
  assert "examples/sec" in result.stderr and "ETA" in result.stderr
  tags = set()
  for path in tf.io.gfile.glob(os.path.join(output_dir, "events.*")):
    for event in tf.train.summary_iterator(path):
      tags.update(value.tag for value in event.summary.value)
  assert {"loss", "learning_rate"} <= tags
  assert not [name for name in os.listdir(output_dir) if ".tmp" in name]


@pytest.mark.slow
def test_stsb_regression_end_to_end(tmp_path):
  data_dir = write_glue(str(tmp_path / "data"), stsb_lines(STSB_PAIRS),
                        stsb_lines(STSB_PAIRS[:5], with_score=False),
                        dev=stsb_lines(STSB_PAIRS[1:]))
  output_dir = str(tmp_path / "out")
  result = _run_script(
      ["--task_name=sts-b", "--do_train", "--do_eval", "--do_predict",
       "--data_dir=%s" % data_dir, "--output_dir=%s" % output_dir,
       "--max_seq_length=24", "--train_batch_size=3", "--num_train_epochs=1",
       "--learning_rate=1e-3", "--predict_batch_size=2"] +
      tiny_model_flags())
  assert result.returncode == 0, result.stderr[-3000:]
  results = _eval_results(os.path.join(output_dir, "eval_results.txt"))
  assert sorted(results) == ["eval_loss", "eval_pearson", "eval_spearman",
                             "global_step", "loss"]
  assert -1.0 <= results["eval_spearman"] <= 1.0
  lines = read_lines(os.path.join(output_dir, "test_results.tsv"))
  assert len(lines) == 5
  assert all(len(line.split("\t")) == 1 for line in lines)
  [float(line) for line in lines]  # pylint: disable=expression-not-assigned


@pytest.mark.slow
@pytest.mark.parametrize("flag,empty_file", [("--do_train", "train.tsv"),
                                             ("--do_eval", "dev.tsv")])
def test_cli_refuses_empty_train_or_dev_set(tmp_path, flag, empty_file):
  # Training on nothing used to loop forever over an empty dataset.
  data_dir = tmp_path / "data"
  data_dir.mkdir()
  (data_dir / empty_file).write_text("", encoding="utf-8")
  result = _run_script(
      ["--task_name=cola", flag, "--data_dir=%s" % data_dir,
       "--output_dir=%s" % (tmp_path / "out"), "--max_seq_length=32"] +
      tiny_model_flags(), timeout=120)
  assert result.returncode == 1, result.stderr[-2000:]
  split = "train" if flag == "--do_train" else "dev"
  assert result.stderr.strip().splitlines()[-1] == (
      "error: --data_dir=%s: no %s examples were read; %s needs at least "
      "one" % (data_dir, split, flag))
