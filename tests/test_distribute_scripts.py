"""The fine-tuning scripts on tf.distribute, on CPU replicas.

run_classifier.py, run_squad.py and run_ner.py on two logical CPU replicas
against one device (same global batch, dropout off): every replica's copy
of every variable is identical and equal to the one-device run within float
tolerance, and so are the outputs; the three scripts on two workers over
loopback: both workers end with the chief's checkpoint, and the chief alone
evaluates and predicts; a global batch that the replicas do not divide is
refused in one line by each script. The classifier runs each strategy on
every runner of the stack; SQuAD and NER, whose heads are what is theirs
here, each strategy on one runner, crossed (RUNNERS[:1] / RUNNERS[-1:]).
Packed rows (--pack_sequences): accumulation on two replicas against one
device (the default runner), and two workers (RUNNERS[-1:]).
(run_pretraining.py: test_distribute.py.)
"""

import json
import os

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from helpers import read_lines
from helpers import RUNNERS
from helpers import shared_path
from helpers import tiny_model_flags
from helpers import write_tsv
import distribute_helpers as helpers
from test_run_ner import _conll
from test_run_ner import _head_of_conll
from test_run_squad import _real_squad_subset


def _mrpc(tmp_path, train=16, dev=10, test=11):
  """A small MRPC folder: the first lines of the shared GLUE files."""
  data_dir = str(tmp_path / "data")
  for split, count in (("train", train), ("dev", dev), ("test", test)):
    lines = read_lines(shared_path("data", "glue", "MRPC", split + ".tsv"))
    write_tsv(os.path.join(data_dir, split + ".tsv"), lines[:count + 1])
  return data_dir


def _classifier_args(data_dir, output_dir, **overrides):
  values = dict(task_name="MRPC", do_train=True, do_eval=True,
                do_predict=True, data_dir=data_dir, output_dir=output_dir,
                max_seq_length=32, train_batch_size=4, num_train_epochs=1,
                eval_batch_size=4, predict_batch_size=4, learning_rate=1e-3,
                random_seed=1)
  values.update(overrides)
  return tiny_model_flags() + helpers.flag_args(values)


def _reader():
  return tf.train.load_checkpoint(helpers.tiny_checkpoint())


def _test_results(output_dir):
  return np.array([[float(x) for x in line.split("\t")] for line in
                   read_lines(os.path.join(output_dir, "test_results.tsv"))])


# ---------------------------------------------------------------------------
# Two CPU replicas vs one device.
# ---------------------------------------------------------------------------


# The stack's default runner; the session runner's replicas on TF 2.15:
# the NER test below.
@pytest.mark.both_stacks
@pytest.mark.slow
@pytest.mark.parametrize("runner", RUNNERS[:1])
def test_classifier_on_two_cpu_replicas_matches_one_device(tmp_path, runner):
  data_dir = _mrpc(tmp_path)
  export_dir = str(tmp_path / "export")

  def args_for(output_dir, strategy):
    extra = dict(export_dir=export_dir) if strategy else {}
    return _classifier_args(data_dir, output_dir, runner=runner, **extra,
                            **strategy)

  single, mirrored = helpers.run_one_and_two_replicas(
      tmp_path, "run_classifier.py", args_for)
  assert "Training on 2 replicas (MirroredStrategy" in mirrored.log
  assert "output_weights" in mirrored.replicas  # The new head: compared too.
  # 16 examples, global batch 4: 4 steps, 2 examples per replica each.
  helpers.assert_matches_one_device(single, mirrored, _reader(), steps=4)
  # Evaluation and prediction (one device, the trained variables).
  results = helpers.assert_eval_results_match(mirrored.output_dir,
                                              single.output_dir)
  assert results["global_step"] == 4
  want = helpers.read_eval_results(single.output_dir)
  for key in ("eval_accuracy", "eval_f1"):  # Counts of 10 examples.
    assert results[key] == want[key], key
  np.testing.assert_allclose(_test_results(mirrored.output_dir),
                             _test_results(single.output_dir), atol=1e-4)
  assert _test_results(mirrored.output_dir).shape == (11, 2)
  # --export_dir exports the checkpoint trained on two replicas.
  [version] = os.listdir(export_dir)
  assert os.path.isfile(os.path.join(export_dir, version, "saved_model.pb"))


@pytest.mark.slow
@pytest.mark.parametrize("runner", RUNNERS[:1])
def test_squad_on_two_cpu_replicas_matches_one_device(tmp_path, runner):
  train_file, predict_file = _real_squad_subset(tmp_path)

  def args_for(output_dir, strategy):
    return tiny_model_flags() + helpers.flag_args(dict(
        output_dir=output_dir, do_train=True, do_predict=True,
        train_file=train_file, predict_file=predict_file,
        version_2_with_negative=True, max_seq_length=64, doc_stride=32,
        max_query_length=16, train_batch_size=2, num_train_epochs=1,
        predict_batch_size=16, learning_rate=1e-3, random_seed=1,
        runner=runner, **strategy))

  single, mirrored = helpers.run_one_and_two_replicas(
      tmp_path, "run_squad.py", args_for)
  assert "cls/squad/output_weights" in mirrored.replicas
  # 8 questions, global batch 2: 4 steps.
  helpers.assert_matches_one_device(single, mirrored, _reader(), steps=4)
  got, want = (_squad_outputs(mirrored.output_dir),
               _squad_outputs(single.output_dir))
  assert got["predictions.json"] == want["predictions.json"]
  assert len(got["predictions.json"]) == 8
  for qid, odds in want["null_odds.json"].items():
    assert got["null_odds.json"][qid] == pytest.approx(odds, abs=1e-4), qid
  # The same n-best spans in the same order (the closest two of a question
  # differ by 4e-5 in logits, the runs by about 1e-7), logits within 1e-4.
  assert list(got["nbest_predictions.json"]) == list(want["predictions.json"])
  for qid, nbest in want["nbest_predictions.json"].items():
    assert ([e["text"] for e in got["nbest_predictions.json"][qid]] ==
            [e["text"] for e in nbest]), qid
    for key in ("start_logit", "end_logit", "probability"):
      np.testing.assert_allclose(
          [e[key] for e in got["nbest_predictions.json"][qid]],
          [e[key] for e in nbest], atol=1e-4, err_msg=qid + " " + key)


def _squad_outputs(output_dir):
  outputs = {}
  for name in ("predictions.json", "nbest_predictions.json",
               "null_odds.json"):
    with open(os.path.join(output_dir, name), encoding="utf-8") as f:
      outputs[name] = json.load(f)
  return outputs


@pytest.mark.slow
@pytest.mark.parametrize("runner", RUNNERS[-1:])
def test_ner_on_two_cpu_replicas_matches_one_device(tmp_path, runner):
  data = tmp_path / "data"
  _head_of_conll(_conll("eng.train"), data / "eng.train", 8)
  _head_of_conll(_conll("eng.testa"), data / "eng.testa", 8)

  def args_for(output_dir, strategy):
    return tiny_model_flags() + helpers.flag_args(dict(
        data_dir=data, output_dir=output_dir, max_seq_length=32,
        doc_stride=16, do_train=True, do_eval=True, train_batch_size=4,
        num_train_epochs=1, learning_rate=1e-3, random_seed=1, runner=runner,
        **strategy))

  single, mirrored = helpers.run_one_and_two_replicas(
      tmp_path, "run_ner.py", args_for)
  assert "Training on 2 replicas (MirroredStrategy" in mirrored.log
  assert "cls/ner/output_weights" in mirrored.replicas
  # 7 sentences -> 24 windows of 32 tokens, global batch 4: 6 steps.
  helpers.assert_matches_one_device(single, mirrored, _reader(), steps=6)
  results = helpers.assert_eval_results_match(mirrored.output_dir,
                                              single.output_dir)
  assert results["global_step"] == 6
  # The predicted tags of the dev words (all O after 6 steps: eval_f1 is 0
  # in both runs; eval_accuracy and eval_loss carry the comparison).
  assert (read_lines(os.path.join(mirrored.output_dir, "dev_predictions.txt"))
          == read_lines(os.path.join(single.output_dir,
                                     "dev_predictions.txt")))


# ---------------------------------------------------------------------------
# Two workers over loopback.
# ---------------------------------------------------------------------------


# The stack's default runner; the session runner's workers on TF 2.15: the
# SQuAD and packed classifier tests below.
@pytest.mark.both_stacks
@pytest.mark.slow
@pytest.mark.parametrize("runner", RUNNERS[:1])
def test_classifier_on_two_workers_only_the_chief_writes_results(tmp_path, runner):
  data_dir = _mrpc(tmp_path, train=8, dev=6, test=5)
  out = str(tmp_path / "out")
  args = _classifier_args(data_dir, out, train_batch_size=2, runner=runner,
                          distribution_strategy="multi_worker_mirrored",
                          num_gpus=0, worker_timeout_secs=120)
  codes = helpers.run_workers(tmp_path, "run", "run_classifier.py", args,
                              helpers.cluster())
  logs = [helpers.read_log(tmp_path, "run", i) for i in range(2)]
  assert codes == [0, 0], logs[0][-3000:] + logs[1][-3000:]
  # 8 examples, global batch 2: 4 steps of one example per worker.
  results = helpers.read_eval_results(out)
  assert results["global_step"] == 4
  assert len(read_lines(os.path.join(out, "test_results.tsv"))) == 5
  assert _EVALUATED_AT % 4 in logs[0]
  for name in ("do_eval", "do_predict"):
    assert "Not the chief: --%s is left to the chief" % name in logs[1]
  assert "Running evaluation" not in logs[1]
  assert "Running prediction" not in logs[1]
  helpers.assert_workers_match_the_chiefs_checkpoint(tmp_path, "run", out, 4)


def _run_two_workers(tmp_path, script, args):
  """Two workers over loopback; both logs (asserts both exit with 0)."""
  codes = helpers.run_workers(tmp_path, "run", script, args,
                              helpers.cluster())
  logs = [helpers.read_log(tmp_path, "run", i) for i in range(2)]
  assert codes == [0, 0], logs[0][-3000:] + logs[1][-3000:]
  return logs


# The log line of an evaluation, in either runner.
_EVALUATED_AT = "for global step %d:"

_MULTI_WORKER = dict(distribution_strategy="multi_worker_mirrored",
                     num_gpus=0, worker_timeout_secs=120)


@pytest.mark.slow
@pytest.mark.parametrize("runner", RUNNERS[-1:])
def test_squad_on_two_workers_only_the_chief_writes_predictions(tmp_path, runner):
  train_file, predict_file = _real_squad_subset(tmp_path)
  out = str(tmp_path / "out")
  args = tiny_model_flags() + helpers.flag_args(dict(
      output_dir=out, do_train=True, do_predict=True, train_file=train_file,
      predict_file=predict_file, version_2_with_negative=True,
      max_seq_length=64, doc_stride=32, max_query_length=16,
      train_batch_size=2, num_train_epochs=1, predict_batch_size=16,
      learning_rate=1e-3, random_seed=1, runner=runner, **_MULTI_WORKER))
  logs = _run_two_workers(tmp_path, "run_squad.py", args)
  # 8 questions, global batch 2: 4 steps of one question per worker.
  _, compared = helpers.assert_workers_match_the_chiefs_checkpoint(
      tmp_path, "run", out, 4)
  assert compared > 20
  with open(predict_file, encoding="utf-8") as f:
    qids = [qa["id"] for p in json.load(f)["data"][0]["paragraphs"]
            for qa in p["qas"]]
  outputs = _squad_outputs(out)
  for name in ("predictions.json", "nbest_predictions.json",
               "null_odds.json"):
    assert list(outputs[name]) == qids, name
  for name in ("eval_results.json", "predictions_best_threshold.json"):
    assert os.path.isfile(os.path.join(out, name)), name
  assert "Not the chief: --do_predict is left to the chief" in logs[1]
  for line in ("Running prediction", "Writing predictions to",
               "SQuAD scores"):
    assert line in logs[0], line
    assert line not in logs[1], line


@pytest.mark.slow
@pytest.mark.parametrize("runner", RUNNERS[:1])
def test_ner_on_two_workers_only_the_chief_writes_results(tmp_path, runner):
  data = tmp_path / "data"
  _head_of_conll(_conll("eng.train"), data / "eng.train", 8)
  _head_of_conll(_conll("eng.testa"), data / "eng.testa", 4)
  _head_of_conll(_conll("eng.testb"), data / "eng.testb", 4)
  out = str(tmp_path / "out")
  args = tiny_model_flags() + helpers.flag_args(dict(
      data_dir=data, output_dir=out, max_seq_length=32, doc_stride=16,
      do_train=True, do_eval=True, do_predict=True, train_batch_size=8,
      num_train_epochs=1, learning_rate=1e-3, random_seed=1, runner=runner,
      **_MULTI_WORKER))
  logs = _run_two_workers(tmp_path, "run_ner.py", args)
  # 7 sentences -> 24 windows, global batch 8: 3 steps of 4 per worker.
  _, compared = helpers.assert_workers_match_the_chiefs_checkpoint(
      tmp_path, "run", out, 3)
  assert compared > 20
  results = helpers.read_eval_results(out)
  assert results["global_step"] == 3
  assert "eval_f1" in results
  # `token gold pred` lines, one per word (3 dev, 3 test sentences).
  for name, sentences in (("dev_predictions.txt", "eng.testa"),
                          ("test_predictions.txt", "eng.testb")):
    words = [line for line in read_lines(str(data / sentences))
             if line.strip() and not line.startswith("-DOCSTART-")]
    predicted = [line for line in read_lines(os.path.join(out, name))
                 if line.strip()]
    assert len(predicted) == len(words), name
  assert _EVALUATED_AT % 3 in logs[0]
  for name in ("do_eval", "do_predict"):
    assert "Not the chief: --%s is left to the chief" % name in logs[1]
  for line in ("Running evaluation", "Running prediction",
               "***** Eval results *****"):
    assert line in logs[0], line
    assert line not in logs[1], line


# ---------------------------------------------------------------------------
# Bad input.
# ---------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("script", ["run_classifier.py", "run_squad.py",
                                    "run_ner.py"])
def test_global_batch_the_replicas_do_not_divide_is_one_line(tmp_path,
                                                             script):
  out = str(tmp_path / "out")
  inputs = {"run_classifier.py": dict(task_name="MRPC", data_dir=tmp_path),
            "run_squad.py": dict(train_file=tmp_path / "train.json"),
            "run_ner.py": dict(data_dir=tmp_path)}[script]
  args = tiny_model_flags() + helpers.flag_args(dict(
      output_dir=out, do_train=True, train_batch_size=3,
      **helpers.TWO_CPU_REPLICAS, **inputs))
  proc = helpers.run_plain(script, args)
  assert proc.returncode == 1 and "Traceback" not in proc.stderr
  # The first of the start-up problems, reported together on one line (the
  # tiny model's 64 positions refuse the scripts' default sequence lengths).
  assert proc.stderr.strip().splitlines()[-1].startswith(
      "error: --train_batch_size=3 is the global batch (all replicas "
      "together) and must be a multiple of the 2 replicas"), proc.stderr[-2000:]
  assert not os.path.exists(out)  # Refused before any work.


def _short_mrpc(tmp_path):
  """16 MRPC training pairs cut to 2 to 5 words a sentence (they pack)."""
  lines = read_lines(shared_path("data", "glue", "MRPC", "train.tsv"))
  short = [lines[0]] + ["\t".join(fields[:3] + [
      " ".join(text.split()[:2 + i % 4]) for text in fields[3:]])
                        for i, fields in enumerate(
                            line.split("\t") for line in lines[1:17])]
  data_dir = str(tmp_path / "data")
  write_tsv(os.path.join(data_dir, "train.tsv"), short)
  return data_dir


@pytest.mark.slow
def test_packed_accumulation_on_two_cpu_replicas_matches_one_device(
    tmp_path):
  # 16 short examples packed into 8 rows of 1 to 3 examples; one update of
  # two micro-batches of four rows, on one device and on two replicas (two
  # rows each): each micro-batch divides by its share of the update's
  # examples, so the replicas' unequal counts give the one device's update.
  # (Accumulated packed micro-batches against one unpacked batch:
  # test_packing.py, in process.)
  data_dir = _short_mrpc(tmp_path)

  def args_for(output_dir, strategy):
    return _classifier_args(
        data_dir, output_dir, do_eval=False, do_predict=False,
        max_seq_length=64, pack_sequences=True, max_examples_per_row=4,
        train_batch_size=8, gradient_accumulation_steps=2, **strategy)

  single, mirrored = helpers.run_one_and_two_replicas(
      tmp_path, "run_classifier.py", args_for)
  assert "Packed 16 inputs into 8 rows" in mirrored.log
  helpers.assert_matches_one_device(single, mirrored, _reader(), steps=1)


@pytest.mark.slow
@pytest.mark.parametrize("runner", RUNNERS[-1:])
def test_packed_classifier_on_two_workers_reads_whole_rows(tmp_path, runner):
  # Each worker reads every other packed row (whole rows, never part of
  # one), two rows a step; the loss's denominator, the examples of both
  # workers' rows, and the update are all-reduced, so both end with the
  # chief's checkpoint. (Each worker shuffles its own rows, so no one-device
  # run sees the same batches; that the all-reduced denominator gives the
  # one device's update: the test above, on two replicas of one process.)
  out = str(tmp_path / "out")
  args = _classifier_args(
      _short_mrpc(tmp_path), out, do_eval=False, do_predict=False,
      max_seq_length=64, pack_sequences=True, max_examples_per_row=4,
      train_batch_size=8, runner=runner, **_MULTI_WORKER)
  logs = _run_two_workers(tmp_path, "run_classifier.py", args)
  assert "Packed 16 inputs into 8 rows" in logs[0]
  # 16 examples, 8 an update: 2 steps.
  dumps, compared = helpers.assert_workers_match_the_chiefs_checkpoint(
      tmp_path, "run", out, 2)
  assert compared > 20
  init = _reader()
  assert sum(np.abs(copies[0] - init.get_tensor(name)).max() > 1e-4
             for name, copies in dumps[0].items()
             if name.startswith("bert/") and init.has_tensor(name)) > 20
