"""Tests for run_squad.py: the model, flag checks, command-line errors and one
end-to-end run (train two steps and predict SQuAD 2.0 with the tiny
conformance checkpoint).

Reading and features are tested in test_squad_data.py, predictions in
test_squad_predictions.py, scores in test_squad_metrics.py.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from helpers import REPO_ROOT
from helpers import run_script
from helpers import shared_path
from helpers import tiny_model_flags
from helpers import write_json
from squad_conformance import squad_path

import run_squad
from bert_tf.tasks.squad import metrics as squad_metrics


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
# Bad input on the command line
# ----------------------------------------------------------------------------


def _run_script(args, timeout=300):
  return run_script("run_squad.py", args, timeout=timeout)


@pytest.mark.slow
def test_script_refuses_too_small_max_seq_length_in_one_line(tmp_path):
  proc = _run_script(tiny_model_flags() + [
      "--output_dir=%s" % tmp_path, "--do_predict",
      "--predict_file=%s" % squad_path("v1.1", "input_dev.json"),
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
from bert_tf.cli import startup
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


@pytest.mark.slow
def test_flag_checks_name_the_flag():
  model = tiny_model_flags()[:2] + ["--output_dir=/tmp/unused"]
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
  return (write_json(tmp_path, train, "train.json"),
          write_json(tmp_path, predict, "dev.json"))


@pytest.mark.e2e
@pytest.mark.slow
def test_train_and_predict_squad_v2_end_to_end(tmp_path):
  train_file, predict_file = _real_squad_subset(tmp_path)
  out = tmp_path / "out"
  proc = _run_script(tiny_model_flags() + [
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


@pytest.mark.slow
def test_script_refuses_training_file_without_questions(tmp_path):
  # Training on nothing used to loop forever over an empty dataset.
  train_file = write_json(tmp_path, {"version": "1.1", "data": []},
                          "empty.json")
  proc = _run_script(tiny_model_flags() + [
      "--output_dir=%s" % (tmp_path / "out"), "--do_train",
      "--train_file=%s" % train_file, "--max_seq_length=64",
      "--max_query_length=24"], timeout=120)
  assert proc.returncode == 1, proc.stderr[-2000:]
  assert proc.stderr.strip().splitlines()[-1] == (
      "error: --train_file: %s holds no usable training question (none, or "
      "all skipped)" % train_file)
