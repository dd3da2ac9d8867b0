"""Tests for run_classifier.py --multi_label: label sets, the sigmoid head,
its metrics, test_results.tsv, the export, and the Hugging Face conversion
to BertForSequenceClassification(problem_type="multi_label_classification").
"""

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
from helpers import write_tsv

from bert_tf.export import serving
from bert_tf.tasks.classifier import metrics as glue_metrics
from bert_tf.tasks.classifier import model as classifier_model
from bert_tf.tasks.classifier import multi_label as multi_label_lib
from bert_tf.tasks.ner import reader as ner_reader
import convert_checkpoint
import modeling
import tokenization

# Words of the conformance vocabulary that decide the labels.
_CUES = {"PER": "john", "LOC": "city", "ORG": "company"}
_FILLER = ["the", "a", "is", "of", "and"]


def _rows(count, seed):
  rng = np.random.RandomState(seed)
  rows = []
  for _ in range(count):
    labels = [name for name in sorted(_CUES) if rng.rand() < 0.5]
    words = [_FILLER[i] for i in rng.randint(0, len(_FILLER), 3)]
    words += [_CUES[name] for name in labels]
    rng.shuffle(words)
    rows.append([" ".join(words), "|".join(labels)])
  return rows


def _write_data(folder, dev=None):
  dev_rows = dev or _rows(10, 1)
  write_tsv(os.path.join(folder, "train.tsv"), _rows(24, 0))
  write_tsv(os.path.join(folder, "dev.tsv"), dev_rows)
  write_tsv(os.path.join(folder, "test.tsv"), dev_rows)
  return dev_rows


def _eval_results(path):
  return {k: float(v) for k, v in
          (line.split(" = ") for line in read_lines(path))}


def _vocab():
  return data_path("conformance", "modeling", "vocab.txt")


# ----------------------------------------------------------------------------
# Data and metrics.
# ----------------------------------------------------------------------------


def test_label_sets_become_sorted_label_list_and_multi_hot(tmp_path):
  write_tsv(str(tmp_path / "train.tsv"), [["a", "PER, LOC"], ["b", ""],
                                          ["c", "ORG,PER,PER"]])
  write_tsv(str(tmp_path / "dev.tsv"), [["d", "LOC"]])
  processor = multi_label_lib.MultiLabelTsvProcessor(str(tmp_path))
  assert processor.get_labels() == ["LOC", "ORG", "PER"]
  examples = processor.get_train_examples(str(tmp_path))
  assert [e.label for e in examples] == [("PER", "LOC"), (), ("ORG", "PER")]
  assert multi_label_lib.multi_hot(examples[0].label,
                                   processor.get_labels()) == [1, 0, 1]


def test_unknown_label_in_dev_names_file_and_line(tmp_path):
  write_tsv(str(tmp_path / "train.tsv"), [["a", "PER"], ["b", "LOC"]])
  write_tsv(str(tmp_path / "dev.tsv"), [["c", "LOC"], ["d", "PER,CITY"]])
  processor = multi_label_lib.MultiLabelTsvProcessor(str(tmp_path))
  with pytest.raises(ValueError) as e:
    processor.get_dev_examples(str(tmp_path))
  assert str(e.value).startswith("%s:2: label 'CITY' is not one of" %
                                 (tmp_path / "dev.tsv"))


def test_empty_label_between_separators_is_refused(tmp_path):
  write_tsv(str(tmp_path / "train.tsv"), [["a", "PER,,LOC"]])
  with pytest.raises(ValueError, match=r"train.tsv:1: label set .* empty"):
    multi_label_lib.MultiLabelTsvProcessor(str(tmp_path)).get_labels()


def test_multi_label_scores_by_hand():
  # Label 0: tp 2 fp 1 fn 1 -> F1 2*2/(4+2) = 2/3; label 1: nothing -> 0.
  micro, macro, per_label = glue_metrics.multi_label_scores(
      [2, 0], [1, 0], [1, 0])
  np.testing.assert_allclose(per_label, [2 / 3, 0.0], rtol=1e-6)
  assert macro == pytest.approx(1 / 3)
  assert micro == pytest.approx(2 / 3)


def test_multi_label_head_is_sigmoid_with_mean_binary_cross_entropy():
  with tf.Graph().as_default():
    config = modeling.BertConfig.from_json_file(
        data_path("conformance", "modeling", "bert_config.json"))
    ids = tf.constant([[1, 5, 6, 2], [1, 7, 2, 0]])
    labels = tf.constant([[1, 0, 1], [0, 0, 0]])
    loss, per_example, logits, probabilities = classifier_model.create_model(
        config, False, ids, tf.cast(ids > 0, tf.int32), tf.zeros_like(ids),
        labels, 3, False, multi_label=True)
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      loss, per_example, logits, probabilities = session.run(
          [loss, per_example, logits, probabilities])
  np.testing.assert_allclose(probabilities, 1 / (1 + np.exp(-logits)),
                             rtol=1e-5)
  truth = np.array([[1, 0, 1], [0, 0, 0]], np.float64)
  bce = -(truth * np.log(probabilities) +
          (1 - truth) * np.log(1 - probabilities))
  np.testing.assert_allclose(per_example, bce.mean(axis=-1), rtol=1e-4)
  assert loss == pytest.approx(bce.mean(), rel=1e-4)


def test_conll_recipe_rows_name_the_entity_types(tmp_path):
  path = tmp_path / "eng.train"
  path.write_text("-DOCSTART- -X- O O\n\nEU NNP I-NP I-ORG\nrejects VBZ "
                  "I-VP O\nGerman JJ I-NP I-MISC\n\nPeter NNP I-NP I-PER\n\n"
                  "Hello UH O O\n", encoding="utf-8")
  rows = multi_label_lib.conll_entity_type_rows(
      ner_reader.read_conll_file(str(path)))
  assert rows == [["EU rejects German", "MISC,ORG"], ["Peter", "PER"],
                  ["Hello", ""]]


# ----------------------------------------------------------------------------
# End to end.
# ----------------------------------------------------------------------------


def _f1(tp, fp, fn):
  return 2.0 * tp / (2.0 * tp + fp + fn) if tp + fp + fn else 0.0


@pytest.mark.slow
@pytest.mark.parametrize("runner", RUNNERS)
def test_multi_label_train_eval_predict_export(tmp_path, runner):
  data_dir, output_dir = str(tmp_path / "data"), str(tmp_path / "out")
  dev_rows = _write_data(data_dir)
  export_dir = str(tmp_path / "export")
  result = run_script("run_classifier.py", [
      "--runner=" + runner, "--task_name=tsv", "--multi_label=True",
      "--label_separator=|", "--multi_label_threshold=0.4", "--do_train",
      "--do_eval", "--do_predict", "--data_dir=" + data_dir,
      "--output_dir=" + output_dir, "--max_seq_length=16",
      "--train_batch_size=8", "--num_train_epochs=2", "--learning_rate=1e-3",
      "--export_dir=" + export_dir] + tiny_model_flags())
  assert result.returncode == 0, result.stderr[-3000:]
  results = _eval_results(os.path.join(output_dir, "eval_results.txt"))
  assert sorted(results) == [
      "eval_exact_match", "eval_f1_LOC", "eval_f1_ORG", "eval_f1_PER",
      "eval_loss", "eval_macro_f1", "eval_micro_f1", "global_step", "loss"]
  # test.tsv is dev.tsv: its probabilities give the same scores.
  probabilities = np.array([[float(x) for x in line.split("\t")] for line in
                            read_lines(os.path.join(output_dir,
                                                    "test_results.tsv"))])
  assert probabilities.shape == (10, 3)
  assert ((probabilities > 0) & (probabilities < 1)).all()
  labels = ["LOC", "ORG", "PER"]
  truth = np.array([[name in row[1].split("|") for name in labels]
                    for row in dev_rows])
  predicted = probabilities >= 0.4
  counts = [((truth & predicted)[:, i].sum(), (~truth & predicted)[:, i].sum(),
             (truth & ~predicted)[:, i].sum()) for i in range(3)]
  for name, count in zip(labels, counts):
    assert results["eval_f1_" + name] == pytest.approx(_f1(*count), abs=1e-5)
  assert results["eval_micro_f1"] == pytest.approx(
      _f1(*np.sum(counts, axis=0)), abs=1e-5)
  assert results["eval_macro_f1"] == pytest.approx(
      np.mean([_f1(*c) for c in counts]), abs=1e-5)
  assert results["eval_exact_match"] == pytest.approx(
      (truth == predicted).all(axis=1).mean(), abs=1e-6)
  with open(os.path.join(output_dir, multi_label_lib.LABELS_FILE)) as f:
    assert json.load(f)["labels"] == labels
  # The export returns the same probabilities, [batch, num_labels].
  model = serving.BertServingModel(export_dir)
  tokenizer = tokenization.FullTokenizer(_vocab())
  encoded = [serving.encode_text(tokenizer, row[0], None, 16)[:3]
             for row in dev_rows[:4]]
  outputs = model.run(*[np.array([e[k] for e in encoded]) for k in range(3)])
  assert outputs["probabilities"].shape == (4, 3)
  np.testing.assert_allclose(outputs["probabilities"], probabilities[:4],
                             atol=1e-5)
  assert model.config["problem_type"] == multi_label_lib.PROBLEM_TYPE


@pytest.mark.slow
def test_multi_label_trains_under_mirrored_two_cpu_replicas(tmp_path):
  data_dir, output_dir = str(tmp_path / "data"), str(tmp_path / "out")
  _write_data(data_dir)
  result = run_script("run_classifier.py", [
      "--task_name=tsv", "--multi_label=True", "--label_separator=|",
      "--do_train", "--do_eval", "--data_dir=" + data_dir,
      "--output_dir=" + output_dir, "--max_seq_length=16",
      "--train_batch_size=8", "--num_train_epochs=1",
      "--distribution_strategy=mirrored", "--num_cpu_devices=2",
      "--num_gpus=0"] + tiny_model_flags())
  assert result.returncode == 0, result.stderr[-3000:]
  assert "Training on 2 replicas" in result.stderr
  results = _eval_results(os.path.join(output_dir, "eval_results.txt"))
  assert results["global_step"] == 3 and "eval_micro_f1" in results


@pytest.mark.slow
@pytest.mark.parametrize("flag,message", [
    ("--multi_label_threshold=1.0",
     "--multi_label_threshold: got 1.0, expected a number in (0, 1)"),
    ("--multi_label_threshold=0",
     "--multi_label_threshold: got 0.0, expected a number in (0, 1)"),
])
def test_threshold_outside_zero_one_is_one_line(tmp_path, flag, message):
  data_dir = str(tmp_path / "data")
  _write_data(data_dir)
  result = run_script("run_classifier.py", [
      "--task_name=tsv", "--multi_label=True", flag, "--do_train",
      "--max_seq_length=16", "--data_dir=" + data_dir, "--output_dir=%s" % (tmp_path / "out")] +
                      tiny_model_flags(), timeout=120)
  assert result.returncode == 1
  assert result.stderr.strip().splitlines()[-1] == "error: " + message


@pytest.mark.slow
def test_unknown_label_is_one_line_naming_file_and_line(tmp_path):
  data_dir = str(tmp_path / "data")
  _write_data(data_dir, dev=[["john is", "PER"], ["city", "LOC|CITY"]])
  result = run_script("run_classifier.py", [
      "--task_name=tsv", "--multi_label=True", "--label_separator=|",
      "--do_eval", "--max_seq_length=16", "--data_dir=" + data_dir,
      "--output_dir=%s" % (tmp_path / "out")] + tiny_model_flags(),
                      timeout=120)
  assert result.returncode == 1
  last = result.stderr.strip().splitlines()[-1]
  assert last.startswith("error: %s:2: label 'CITY' is not one of" %
                         os.path.join(data_dir, "dev.tsv")), last


# ----------------------------------------------------------------------------
# Hugging Face conversion, both ways.
# ----------------------------------------------------------------------------


@pytest.mark.slow
def test_multi_label_head_converts_both_ways_with_equal_outputs(tmp_path):
  torch = import_or_skip("torch", "./setup.sh --test")
  transformers = import_or_skip("transformers", "./setup.sh --test")
  torch.set_num_threads(1)
  folder = os.path.dirname(data_path("conformance", "modeling",
                                     "bert_config.json"))
  reader = tf.train.load_checkpoint(os.path.join(folder, "bert_model.ckpt"))
  weights = {n: reader.get_tensor(n) for n in
             reader.get_variable_to_shape_map() if not n.startswith("cls/")}
  rng = np.random.RandomState(0)
  weights["output_weights"] = rng.normal(size=(3, 32)).astype(np.float32)
  weights["output_bias"] = rng.normal(size=(3,)).astype(np.float32)
  train_dir = tmp_path / "train"
  train_dir.mkdir()
  prefix = str(train_dir / "model.ckpt-5")
  convert_checkpoint.write_tf_checkpoint(weights, prefix)
  multi_label_lib.write_labels_file(str(train_dir), ["LOC", "ORG", "PER"])

  hf_dir = str(tmp_path / "hf")
  convert_checkpoint.tf_to_hf(
      prefix, hf_dir, bert_config_file=os.path.join(folder,
                                                    "bert_config.json"),
      vocab_file=os.path.join(folder, "vocab.txt"))
  model = transformers.BertForSequenceClassification.from_pretrained(
      hf_dir).eval()
  assert model.config.problem_type == "multi_label_classification"
  assert model.config.id2label == {0: "LOC", 1: "ORG", 2: "PER"}

  ids = np.array([[1, 5, 6, 7, 2], [1, 9, 2, 0, 0]], np.int32)
  mask = (ids > 0).astype(np.int32)
  labels = np.array([[1, 0, 1], [0, 1, 0]], np.int32)
  with torch.no_grad():
    out = model(input_ids=torch.tensor(ids, dtype=torch.long),
                attention_mask=torch.tensor(mask, dtype=torch.long),
                token_type_ids=torch.zeros(ids.shape, dtype=torch.long),
                labels=torch.tensor(labels, dtype=torch.float32))
  hf_probabilities = torch.sigmoid(out.logits).numpy()

  with tf.Graph().as_default():
    config = modeling.BertConfig.from_json_file(
        os.path.join(folder, "bert_config.json"))
    loss, _, _, probabilities = classifier_model.create_model(
        config, False, tf.constant(ids), tf.constant(mask),
        tf.zeros_like(ids), tf.constant(labels), 3, False, multi_label=True)
    tf.train.init_from_checkpoint(prefix, {"bert/": "bert/",
                                           "output_weights": "output_weights",
                                           "output_bias": "output_bias"})
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      loss, probabilities = session.run([loss, probabilities])
  np.testing.assert_allclose(probabilities, hf_probabilities, atol=1e-5)
  assert loss == pytest.approx(float(out.loss), abs=1e-5)

  back = str(tmp_path / "back")
  convert_checkpoint.hf_to_tf(hf_dir, back)
  assert multi_label_lib.read_labels_file(back) == (
      multi_label_lib.PROBLEM_TYPE, ["LOC", "ORG", "PER"])
  reader = tf.train.load_checkpoint(os.path.join(back, "bert_model.ckpt"))
  for name, value in weights.items():
    np.testing.assert_array_equal(reader.get_tensor(name), value,
                                  err_msg=name)
