"""Tests for --bucket_by_length (bert_tf/train/lengths.py): batches cut to
their longest input, rounded up to a few lengths.

Equivalence: the encoder's outputs on a cut batch, and every script's
outputs with the flag, equal the fixed-padding ones within 1e-5 (float32);
training with the flag runs on one device, under a mirrored strategy
(2 logical CPU devices) and with gradient accumulation whose micro-batches
differ in length.
"""

import json
import os

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from helpers import RUNNERS
from helpers import data_path
from helpers import read_lines
from helpers import run_script
from helpers import shared_path
from helpers import tiny_model_flags
from helpers import write_tsv
from test_run_ner import _head_of_conll

from bert_tf.export import serving
from bert_tf.train import accumulation
from bert_tf.train import lengths
import modeling


def test_bucket_lengths_are_powers_of_two_and_midpoints_up_to_the_maximum():
  assert lengths.bucket_lengths(128) == (16, 24, 32, 48, 64, 96, 128)
  assert lengths.bucket_lengths(384) == (16, 24, 32, 48, 64, 96, 128, 192,
                                         256, 384)
  assert lengths.bucket_lengths(100) == (16, 24, 32, 48, 64, 96, 100)
  assert lengths.bucket_lengths(20) == (16, 20)
  assert lengths.bucket_lengths(16) == (16,)
  assert lengths.bucket_lengths(8) == (8,)


def _mask(real_lengths, seq_length):
  return np.array([[1] * n + [0] * (seq_length - n) for n in real_lengths],
                  np.int32)


def test_the_graph_and_python_bucket_lengths_agree():
  """The input pipeline's (a Tensor) and a serving client's (an int)."""
  buckets = lengths.bucket_lengths(100)
  for longest in (0, 1, 16, 17, 24, 25, 96, 97, 100, 130):
    want = lengths.python_bucket_length(buckets, longest)
    assert int(lengths.bucket_length(buckets, tf.constant(longest))) == want
  got = [lengths.python_bucket_length(buckets, n) for n in (0, 17, 97, 130)]
  assert got == [16, 24, 100, 100]


def test_a_batch_is_cut_to_its_longest_input_rounded_up_to_a_bucket():
  buckets = lengths.bucket_lengths(64)
  for real, cut in (([5, 17, 3], 24), ([16, 2], 16), ([0, 0], 16),
                    ([49, 1], 64), ([64], 64), ([32, 31], 32)):
    mask = _mask(real, 64)
    features = {"input_mask": tf.constant(mask),
                "input_ids": tf.constant(mask * 7),
                "label_ids": tf.constant(np.arange(len(real)), tf.int32)}
    got = lengths.trim_batch(features, buckets, ("input_ids", "input_mask"))
    assert got["input_mask"].shape == (len(real), cut), real
    np.testing.assert_array_equal(got["input_ids"].numpy(), mask[:, :cut] * 7)
    assert got["label_ids"] is features["label_ids"]  # Not a sequence key.


def test_training_batches_group_inputs_of_one_bucket_and_keep_every_input():
  real = [3, 40, 20, 18, 60, 5, 33, 47, 22, 9, 64, 17, 30, 31, 2, 50]
  mask = _mask(real, 64)
  dataset = tf.data.Dataset.from_tensor_slices(
      {"input_mask": mask, "unique_ids": np.arange(len(real))})
  buckets = lengths.bucket_lengths(64)
  grouped = lengths.group_by_length(dataset, 2, buckets, drop_remainder=False)
  seen = []
  for batch in lengths.cut_batches(grouped, buckets, ("input_mask",)):
    sizes = batch["input_mask"].numpy().sum(axis=1)
    cut = batch["input_mask"].shape[1]
    # Every member needs this bucket: none would fit the one below.
    below = max([b for b in buckets if b < cut], default=0)
    assert all(below < n <= cut or (n <= cut == 16) for n in sizes), (
        sizes, cut)
    seen.extend(batch["unique_ids"].numpy().tolist())
  assert sorted(seen) == list(range(len(real)))


def test_the_encoder_gives_equal_outputs_on_a_cut_batch():
  """Padding is masked out of attention, so each real token's outputs (and
  [CLS]'s pooled output) are those of the padded batch within 1e-5."""
  config = modeling.BertConfig.from_json_file(
      data_path("conformance", "modeling", "bert_config.json"))
  rng = np.random.RandomState(0)
  real = [11, 3, 20]
  mask = _mask(real, 64)
  ids = rng.randint(1, config.vocab_size, size=mask.shape) * mask
  types = (rng.rand(*mask.shape) < 0.5).astype(np.int32) * mask
  cut = 24
  with tf.Graph().as_default():
    placeholders = [tf.placeholder(tf.int32, [None, None]) for _ in range(3)]
    model = modeling.BertModel(config, is_training=False,
                               input_ids=placeholders[0],
                               input_mask=placeholders[1],
                               token_type_ids=placeholders[2])
    outputs = [model.get_sequence_output(), model.get_pooled_output()]
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      full = session.run(outputs, dict(zip(placeholders, (ids, mask, types))))
      short = session.run(outputs, dict(zip(placeholders, (
          ids[:, :cut], mask[:, :cut], types[:, :cut]))))
  for row, n in enumerate(real):
    np.testing.assert_allclose(short[0][row, :n], full[0][row, :n],
                               atol=1e-5, rtol=0)
  np.testing.assert_allclose(short[1], full[1], atol=1e-5, rtol=0)
  assert np.abs(full[0]).max() > 0.1  # Real activations, not zeros.


def test_token_shares_are_exact_when_micro_batches_differ_in_length():
  """Gradient accumulation's shares (the update's labelled tokens / N)
  over micro-batches that bucketing cut to different lengths."""
  batches = [_mask([3, 5], 16), _mask([20, 2], 24), _mask([1, 1], 16),
             _mask([9, 40], 48)]
  dataset = tf.data.Dataset.from_generator(
      lambda: ({"w": b} for b in batches),
      output_signature={"w": tf.TensorSpec([None, None], tf.int32)})
  shared = accumulation.with_update_shares(dataset, 2,
                                           lambda batch: batch["w"])
  got = [(b["w"].shape[1], b[accumulation.UPDATE_SHARE_KEY].numpy().tolist())
         for b in shared]
  assert got == [(16, [15.0, 15.0]), (24, [15.0, 15.0]),
                 (16, [25.5, 25.5]), (48, [25.5, 25.5])]


def test_use_tpu_refuses_the_flag_in_one_line():
  assert lengths.flag_problems(False, True) == []
  assert lengths.flag_problems(True, False) == []
  (problem,) = lengths.flag_problems(True, True)
  assert problem.startswith("--bucket_by_length:") and "--use_tpu" in problem


# ----------------------------------------------------------------------------
# The scripts, padded and cut: equal outputs.
# ----------------------------------------------------------------------------


def _cola(tmp_path):
  """Short single sentences (CoLA), so that batches cut below 64."""
  data_dir = str(tmp_path / "cola")
  for split, count in (("train", 24), ("dev", 20), ("test", 21)):
    lines = read_lines(shared_path("data", "glue", "CoLA", split + ".tsv"))
    write_tsv(os.path.join(data_dir, split + ".tsv"), lines[:count + 1])
  return data_dir


def _floats(path):
  return np.array([[float(x) for x in line.split("\t")]
                   for line in read_lines(path)])


def _eval_results(path):
  return {line.split(" = ")[0]: float(line.split(" = ")[1])
          for line in read_lines(path)}


# The stack's default runner (the bucketed input is the same on both; the
# session runner's bucketed training on TF 2.15: the mirrored and two-worker
# tests below).
@pytest.mark.slow
@pytest.mark.both_stacks
@pytest.mark.parametrize("runner", RUNNERS[:1])
def test_classifier_trains_bucketed_and_predicts_as_padded(tmp_path, runner):
  data_dir = _cola(tmp_path)
  common = ["--task_name=CoLA", "--data_dir=%s" % data_dir,
            "--max_seq_length=64", "--eval_batch_size=8",
            "--predict_batch_size=8", "--runner=" + runner]
  model_flags = [f for f in tiny_model_flags() if "init_checkpoint" not in f]
  trained = str(tmp_path / "trained")
  result = run_script("run_classifier.py", common + model_flags + [
      [f for f in tiny_model_flags() if "init_checkpoint" in f][0],
      "--output_dir=" + trained, "--do_train", "--bucket_by_length",
      "--train_batch_size=4", "--num_train_epochs=1"])
  assert result.returncode == 0, result.stderr[-3000:]
  assert tf.train.latest_checkpoint(trained).endswith("model.ckpt-6")
  outputs = {}
  for bucket in (False, True):
    out = str(tmp_path / ("cut" if bucket else "padded"))
    result = run_script("run_classifier.py", common + model_flags + [
        "--init_checkpoint=" + trained, "--output_dir=" + out, "--do_eval",
        "--do_predict", "--bucket_by_length=%s" % bucket,
        "--export_dir=" + out + "/export"])
    assert result.returncode == 0, result.stderr[-3000:]
    exported = serving.BertServingModel(out + "/export")
    outputs[bucket] = (_floats(os.path.join(out, "test_results.tsv")),
                       _eval_results(os.path.join(out, "eval_results.txt")),
                       exported)
  assert outputs[True][0].shape == (21, 2)
  np.testing.assert_allclose(outputs[True][0], outputs[False][0], atol=1e-5,
                             rtol=0)
  for key, value in outputs[False][1].items():
    assert outputs[True][1][key] == pytest.approx(value, abs=1e-5), key
  # The SavedModels: the cut one takes any length and pads a batch to its
  # bucket; the padded one is the reference's fixed-length signature.
  cut, padded = outputs[True][2], outputs[False][2]
  assert cut.config["bucket_lengths"] == [16, 24, 32, 48, 64]
  assert "bucket_lengths" not in padded.config
  assert cut._signature.structured_input_signature[1][
      "input_ids"].shape.as_list() == [None, None]
  for text in ("Bill whistled.", "The car honked its way down the road "
               "while the children in the back seat sang loudly."):
    got, want = cut.classify(text), padded.classify(text)
    assert sorted(got) == sorted(want)
    for label in want:
      assert got[label] == pytest.approx(want[label], abs=1e-5)


@pytest.mark.slow
def test_ner_trains_bucketed_with_accumulation_and_predicts_as_padded(
    tmp_path):
  data = tmp_path / "data"
  for name, count in (("eng.train", 40), ("eng.testa", 20),
                      ("eng.testb", 20)):
    _head_of_conll(shared_path("data", "ner", "conll2003", name),
                   data / name, count)
  common = ["--data_dir=%s" % data, "--max_seq_length=48",
            "--doc_stride=16"] + [
                f for f in tiny_model_flags() if "init_checkpoint" not in f]
  trained = str(tmp_path / "trained")
  result = run_script("run_ner.py", common + [
      [f for f in tiny_model_flags() if "init_checkpoint" in f][0],
      "--output_dir=" + trained, "--do_train", "--bucket_by_length",
      "--train_batch_size=8", "--gradient_accumulation_steps=2",
      "--num_train_epochs=1", "--learning_rate=1e-3"])
  assert result.returncode == 0, result.stderr[-3000:]
  assert "micro-batches" in result.stderr  # The token-weighted update mean.
  outputs = {}
  for bucket in (False, True):  # From the training output_dir (its labels).
    result = run_script("run_ner.py", common + [
        "--output_dir=" + trained, "--do_eval", "--do_predict",
        "--bucket_by_length=%s" % bucket, "--export_dir=%s/export%s" % (
            trained, bucket)])
    assert result.returncode == 0, result.stderr[-3000:]
    with open(os.path.join(trained, "test_predictions.txt")) as f:
      predictions = f.read()
    outputs[bucket] = (predictions,
                       _eval_results(os.path.join(trained,
                                                  "eval_results.txt")))
  assert outputs[True][0] == outputs[False][0]
  assert outputs[True][1]["eval_loss"] == pytest.approx(
      outputs[False][1]["eval_loss"], abs=1e-5)
  assert outputs[True][1]["eval_f1"] == outputs[False][1]["eval_f1"]
  # The SavedModels: per-token probabilities at the batch's bucket length
  # (16 for 5 tokens), equal to the padded export's on the real tokens.
  cut = serving.BertServingModel(trained + "/exportTrue")
  padded = serving.BertServingModel(trained + "/exportFalse")
  mask = _mask([5, 3], 48)
  ids = mask * 7
  got = cut.run(ids, mask, 0 * mask)["probabilities"]
  want = padded.run(ids, mask, 0 * mask)["probabilities"]
  assert got.shape[:2] == (2, 16) and want.shape[:2] == (2, 48)
  np.testing.assert_allclose(got[0, :5], want[0, :5], atol=1e-5, rtol=0)


@pytest.mark.slow
def test_mirrored_training_takes_batches_of_varying_length(tmp_path):
  """Each replica's share of a cut batch keeps its length; the run ends at
  the step the flags give."""
  out = str(tmp_path / "out")
  result = run_script("run_classifier.py", [
      "--task_name=CoLA", "--data_dir=" + _cola(tmp_path),
      "--max_seq_length=64", "--output_dir=" + out, "--do_train",
      "--bucket_by_length", "--train_batch_size=4", "--num_train_epochs=1",
      "--runner=session", "--distribution_strategy=mirrored",
      "--num_cpu_devices=2"] + tiny_model_flags())
  assert result.returncode == 0, result.stderr[-3000:]
  assert tf.train.latest_checkpoint(out).endswith("model.ckpt-6")


@pytest.mark.slow
@pytest.mark.both_stacks
def test_two_workers_train_bucketed_and_stay_identical(tmp_path):
  """multi_worker_mirrored: each worker cuts its own batches (lengths differ
  between workers); the all-reduced updates keep them identical."""
  import distribute_helpers  # pylint: disable=g-import-not-at-top
  out = str(tmp_path / "out")
  args = ["--task_name=CoLA", "--data_dir=" + _cola(tmp_path),
          "--max_seq_length=64", "--output_dir=" + out, "--do_train",
          "--bucket_by_length", "--train_batch_size=4",
          "--num_train_epochs=1", "--runner=session",
          "--distribution_strategy=multi_worker_mirrored", "--num_gpus=0",
          "--worker_timeout_secs=120"] + tiny_model_flags()
  codes = distribute_helpers.run_workers(tmp_path, "bucket", "run_classifier.py",
                                         args, distribute_helpers.cluster())
  logs = [distribute_helpers.read_log(tmp_path, "bucket", i) for i in (0, 1)]
  assert codes == [0, 0], logs[0][-3000:] + logs[1][-3000:]
  distribute_helpers.assert_workers_match_the_chiefs_checkpoint(
      tmp_path, "bucket", out, 6)


def _jsonl(path):
  with open(path, encoding="utf-8") as f:
    return [json.loads(line) for line in f]


def extraction_inputs(tmp_path):
  """(input.txt of 5 lines of different lengths, masked.txt of 3 lines
  with [MASK]s) under `tmp_path`, for extract_features.py and
  predict_masked_lm.py."""
  texts = ["a short line", "the man went to the store ||| he bought milk",
           "one", "a much longer line with many more words in it than the "
           "others have , to make a batch need a longer bucket", "two words"]
  input_file = tmp_path / "input.txt"
  input_file.write_text("\n".join(texts) + "\n", encoding="utf-8")
  masked_file = tmp_path / "masked.txt"
  masked_file.write_text("\n".join([
      "the man went to the [MASK] .", "[MASK] city",
      "he was born in [MASK] city and lived there for many years ||| she "
      "[MASK] ."]) + "\n", encoding="utf-8")
  return input_file, masked_file


@pytest.mark.slow
def test_extract_features_and_predict_masked_lm_write_as_padded(tmp_path):
  input_file, masked_file = extraction_inputs(tmp_path)
  extract_flags = tiny_model_flags(("conformance", "extract_features"),
                                   do_lower_case=True)
  got = {}
  for bucket in (False, True):
    tag = "cut" if bucket else "padded"
    for args in (["--layers=-1,-2"], ["--pooling=mean"]):
      output = str(tmp_path / ("%s%s.jsonl" % (tag, args[0][2:6])))
      result = run_script("extract_features.py", [
          "--input_file=%s" % input_file, "--output_file=" + output,
          "--max_seq_length=64", "--batch_size=2",
          "--bucket_by_length=%s" % bucket] + args + extract_flags)
      assert result.returncode == 0, result.stderr[-3000:]
      got[tag, args[0]] = _jsonl(output)
    output = str(tmp_path / ("%s-masked.jsonl" % tag))
    result = run_script("predict_masked_lm.py", [
        "--input_file=%s" % masked_file, "--output_file=" + output,
        "--max_seq_length=64", "--predict_batch_size=2", "--top_k=3",
        "--bucket_by_length=%s" % bucket] + tiny_model_flags())
    assert result.returncode == 0, result.stderr[-3000:]
    got[tag, "masked"] = _jsonl(output)
  assert_same_extraction(got["cut", "--layers=-1,-2"],
                         got["padded", "--layers=-1,-2"],
                         got["cut", "masked"], got["padded", "masked"])
  for cut, padded in zip(got["cut", "--pooling=mean"],
                         got["padded", "--pooling=mean"]):
    np.testing.assert_allclose(cut["embedding"], padded["embedding"],
                               atol=1e-5, rtol=0)


def assert_same_extraction(features, want_features, masked, want_masked):
  """extract_features.py's JSON lines (`features`) and predict_masked_lm.py's
  (`masked`, 3 lines) against another run's: the same lines, tokens and
  words, values within 1e-5."""
  assert len(features) == len(want_features)
  for got, want in zip(features, want_features):
    assert got["linex_index"] == want["linex_index"]
    assert [f["token"] for f in got["features"]] == [
        f["token"] for f in want["features"]]
    for f_got, f_want in zip(got["features"], want["features"]):
      for l_got, l_want in zip(f_got["layers"], f_want["layers"]):
        np.testing.assert_allclose(l_got["values"], l_want["values"],
                                   atol=1e-5, rtol=0)
  assert len(masked) == len(want_masked) == 3
  for got, want in zip(masked, want_masked):
    assert got["line"] == want["line"]
    assert len(got["masks"]) == len(want["masks"])
    for m_got, m_want in zip(got["masks"], want["masks"]):
      assert m_got["position"] == m_want["position"]
      assert m_got["tokens"] == m_want["tokens"]
      np.testing.assert_allclose(m_got["probabilities"],
                                 m_want["probabilities"], atol=1e-5, rtol=0)


@pytest.mark.slow
@pytest.mark.parametrize("script", ["run_classifier.py", "extract_features.py"])
def test_bucket_by_length_with_use_tpu_is_one_line(tmp_path, script):
  args = {"run_classifier.py": ["--task_name=CoLA", "--data_dir=%s" % tmp_path,
                                "--do_predict",
                                "--output_dir=%s" % (tmp_path / "o")],
          "extract_features.py": ["--input_file=%s" % __file__,
                                  "--output_file=%s" % (tmp_path / "o.j")]}
  result = run_script(script, args[script] + [
      "--max_seq_length=32", "--bucket_by_length", "--use_tpu"] +
                      tiny_model_flags())
  assert result.returncode != 0
  assert result.stderr.strip().splitlines()[-1].startswith("error: ")
  assert "--bucket_by_length: batches of varying length need dynamic " \
      "shapes" in result.stderr
  assert "Traceback" not in result.stderr
