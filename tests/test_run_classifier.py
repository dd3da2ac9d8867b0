"""Tests for run_classifier.py: processors, features, metrics, bad input and
two end-to-end runs (MRPC classification and STS-B regression)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from conftest import REPO_ROOT
from conftest import shared_path

import classifier_data
import glue_metrics
import modeling
import run_classifier
import tokenization

_CONFORMANCE_TASKS = ("MRPC", "CoLA", "MNLI", "XNLI")


# ----------------------------------------------------------------------------
# Helpers.
# ----------------------------------------------------------------------------


def _write(path, lines):
  """Writes `lines` (lists of cells or strings) as a TSV file."""
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    for line in lines:
      f.write((line if isinstance(line, str) else "\t".join(line)) + "\n")
  return path


def _run_script(args, timeout=300):
  env = dict(os.environ)
  env.pop("BERT_DEBUG", None)
  return subprocess.run(
      [sys.executable, os.path.join(REPO_ROOT, "run_classifier.py")] + args,
      cwd=REPO_ROOT, env=env, capture_output=True, text=True,
      timeout=timeout)


def _tiny_model_flags():
  model_dir = shared_path("conformance", "modeling")
  return ["--vocab_file=%s" % os.path.join(model_dir, "vocab.txt"),
          "--bert_config_file=%s" % os.path.join(model_dir,
                                                  "bert_config.json"),
          "--init_checkpoint=%s" % os.path.join(model_dir, "bert_model.ckpt")]


def _read_lines(path):
  with open(path, encoding="utf-8") as f:
    return f.read().splitlines()


def _eval_results(path):
  results = {}
  for line in _read_lines(path):
    key, value = line.split(" = ")
    results[key] = float(value)
  return results


# ----------------------------------------------------------------------------
# Conformance: examples and features equal the reference's exactly.
# ----------------------------------------------------------------------------


def _conformance_examples(task):
  data_dir = shared_path("conformance", "classifier", task, "data")
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
  folder = shared_path("conformance", "classifier", task)
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
  folder = shared_path("conformance", "classifier", "MNLI")
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
  folder = shared_path("conformance", "classifier", "MRPC")
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
  folder = shared_path("conformance", "classifier", "CoLA")
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
# Processors on the real GLUE/XNLI files.
# ----------------------------------------------------------------------------


def _label_counts(examples):
  counts = {}
  for e in examples:
    counts[e.label] = counts.get(e.label, 0) + 1
  return counts


def test_mrpc_processor_on_real_files():
  data_dir = shared_path("data", "glue", "MRPC")
  processor = run_classifier.get_processor("MRPC")
  train = processor.get_train_examples(data_dir)
  dev = processor.get_dev_examples(data_dir)
  test = processor.get_test_examples(data_dir)
  assert (len(train), len(dev), len(test)) == (3668, 408, 1725)
  assert train[0].guid == "train-1" and train[0].label == "1"
  assert train[0].text_a.startswith("Amrozi accused his brother")
  assert train[0].text_b.startswith("Referring to him as only")
  assert _label_counts(train) == {"1": 2474, "0": 1194}
  assert _label_counts(dev) == {"1": 279, "0": 129}
  assert {e.label for e in test} == {"0"}
  assert test[-1].guid == "test-1725"
  assert test[-1].text_a.startswith("Sobig.F spreads")


def test_cola_processor_on_real_files():
  data_dir = shared_path("data", "glue", "CoLA")
  processor = run_classifier.get_processor("cola")
  train = processor.get_train_examples(data_dir)
  dev = processor.get_dev_examples(data_dir)
  test = processor.get_test_examples(data_dir)
  assert (len(train), len(dev), len(test)) == (8551, 1043, 1063)
  assert train[0].guid == "train-0"
  assert train[0].text_a == ("Our friends won't buy this analysis, let alone "
                             "the next one we propose.")
  assert train[0].text_b is None
  # dev.tsv has no final newline: its last row is still read.
  assert dev[-1].text_a == "John talked to Bill about himself."
  assert _label_counts(dev) == {"1": 721, "0": 322}
  # test.tsv's header is skipped.
  assert test[0].guid == "test-1"
  assert test[0].text_a == "Bill whistled past the house."
  assert test[-1].text_a == "A picture of himself frightened John."


def test_sst2_processor_on_real_files():
  data_dir = shared_path("data", "glue", "SST-2")
  processor = run_classifier.get_processor("SST-2")
  dev = processor.get_dev_examples(data_dir)
  test = processor.get_test_examples(data_dir)
  assert len(processor.get_train_examples(data_dir)) == 67349
  assert (len(dev), len(test)) == (872, 1821)
  assert dev[0].text_a == "it 's a charming and often affecting journey . "
  assert dev[0].text_b is None and dev[0].label == "1"
  assert _label_counts(dev) == {"1": 444, "0": 428}
  assert test[0].text_a == "uneasy mishmash of styles and genres ."


def test_rte_processor_on_real_files():
  data_dir = shared_path("data", "glue", "RTE")
  processor = run_classifier.get_processor("rte")
  train = processor.get_train_examples(data_dir)
  dev = processor.get_dev_examples(data_dir)
  test = processor.get_test_examples(data_dir)
  assert (len(train), len(dev), len(test)) == (2490, 277, 3000)
  assert train[0].text_a == ("No Weapons of Mass Destruction Found in Iraq "
                             "Yet.")
  assert train[0].text_b == "Weapons of Mass Destruction Found in Iraq."
  assert train[0].label == "not_entailment"
  assert _label_counts(dev) == {"entailment": 146, "not_entailment": 131}
  assert test[0].text_b == "Shukla is related to Mangla."
  assert processor.get_labels() == ["entailment", "not_entailment"]


def test_mnli_processors_on_real_rows():
  data_dir = shared_path("data", "glue", "MNLI_sample")
  matched = run_classifier.get_processor("mnli")
  mismatched = run_classifier.get_processor("MNLI-MM")
  train = matched.get_train_examples(data_dir)
  assert len(train) == 6
  assert train[0].guid == "train-0" and train[0].label == "neutral"
  assert train[0].text_a.startswith("Conceptually cream skimming")
  dev_m = matched.get_dev_examples(data_dir)
  assert dev_m[0].guid == "dev_matched-0"
  assert dev_m[0].text_a == "The new rights are nice enough"
  dev_mm = mismatched.get_dev_examples(data_dir)
  assert len(dev_mm) == 5 and dev_mm[0].guid == "dev_mismatched-0"
  assert _label_counts(dev_mm) == {"entailment": 2, "contradiction": 3}
  test_m = matched.get_test_examples(data_dir)
  test_mm = mismatched.get_test_examples(data_dir)
  assert test_m[0].text_b == "Hierbas is a name worth looking out for."
  assert test_mm[0].text_b == "So what's your decision?"
  assert {e.label for e in test_m + test_mm} == {"contradiction"}


def test_xnli_processor_on_unzipped_download_layout(tmp_path):
  sample = shared_path("data", "xnli", "sample")
  processor = run_classifier.get_processor("xnli")
  train = processor.get_train_examples(sample)
  dev = processor.get_dev_examples(sample)
  test = processor.get_test_examples(sample)
  assert (len(train), len(dev), len(test)) == (8, 6, 6)
  assert train[0].text_b == "我们 家里 有 一个 但 我 从来 没有 时间 使用 它 ."
  assert "contradictory" not in {e.label for e in train}
  assert dev[0].text_a == "他说，妈妈，我回来了。"
  assert dev[0].label == "neutral"
  assert test[0].label == "contradiction"
  # Rows of other languages are left out.
  rows = _read_lines(os.path.join(sample, "XNLI-1.0", "xnli.dev.tsv"))
  other = rows[1].split("\t")
  other[0] = "fr"
  _write(str(tmp_path / "xnli.dev.tsv"), rows + ["\t".join(other)])
  assert len(processor.get_dev_examples(str(tmp_path))) == 6


def test_xnli_processor_on_full_zh_dev_set():
  data_dir = shared_path("data", "xnli", "ernie_zh_as_xnli1.0")
  dev = classifier_data.XnliProcessor().get_dev_examples(data_dir)
  assert len(dev) == 2490
  assert _label_counts(dev) == {"contradiction": 830, "entailment": 830,
                                "neutral": 830}


# Small files in the GLUE layouts that ../shared/data does not hold.
_QQP_TRAIN = [
    "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate",
    "133273\t213221\t213222\tHow is the life of a math student?\t"
    "Which level of preparation is enough for the exam?\t0",
    "402555\t536040\t536041\tHow do I control my horny emotions?\t"
    "How do you control your horniness?\t1",
]
_QQP_TEST = ["id\tquestion1\tquestion2",
             "0\tWould the idea of Trump be better?\tWhat does a Trump win "
             "mean?"]
_QNLI_TRAIN = [
    "index\tquestion\tsentence\tlabel",
    "0\tWhen did the third Digimon series begin?\tUnlike the two seasons "
    "before it, Digimon Tamers takes a darker approach.\tnot_entailment",
    "1\tWhich missile batteries often have individual launchers?\tThe "
    "missile batteries often have launchers several kilometres apart.\t"
    "entailment",
]
_QNLI_TEST = ["index\tquestion\tsentence",
              "0\tWhat organization is devoted to Jihad?\tFor some "
              "decades, Islamic Jihad has been an organization."]
_WNLI_TRAIN = [
    "index\tsentence1\tsentence2\tlabel",
    "0\tI stuck a pin through a carrot. When I pulled the pin out, it had "
    "a hole.\tThe carrot had a hole.\t1",
    "1\tJohn couldn't see the stage with Billy in front of him because he "
    "is so short.\tJohn is so short.\t1",
    "2\tThe police arrested all of the gang members. They were trying to "
    "stop the drug trade.\tThe police were trying to stop the gang.\t0",
]
_WNLI_TEST = ["index\tsentence1\tsentence2",
              "0\tMaude and Dora had seen the trains.\tHorses had seen the "
              "trains."]
_STSB_HEADER = ("index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\t"
                "sentence1\tsentence2")
_STSB_PAIRS = [
    ("A plane is taking off.", "An air plane is taking off.", "5.000"),
    ("A man is playing a large flute.", "A man is playing a flute.",
     "3.800"),
    ("Three men are playing chess.", "Two men are playing chess.", "2.600"),
    ("A man is smoking.", "A man is skating.", "0.500"),
    ("The man is playing the piano.", "The man is playing the guitar.",
     "1.600"),
    ("Some men are fighting.", "Two men are fighting.", "4.250"),
]


def _stsb_lines(pairs, with_score=True):
  lines = [_STSB_HEADER + ("\tscore" if with_score else "")]
  for i, (a, b, score) in enumerate(pairs):
    cells = [str(i), "main-captions", "MSRvid", "2012test", "%04d" % (i + 1),
             "none", "none", a, b]
    lines.append("\t".join(cells + ([score] if with_score else [])))
  return lines


def _write_glue(folder, train, test, dev=None):
  _write(os.path.join(folder, "train.tsv"), train)
  _write(os.path.join(folder, "dev.tsv"), dev or train)
  _write(os.path.join(folder, "test.tsv"), test)
  return folder


def test_qqp_qnli_wnli_processors_on_glue_layouts(tmp_path):
  qqp = run_classifier.get_processor("qqp")
  data_dir = _write_glue(str(tmp_path / "QQP"), _QQP_TRAIN, _QQP_TEST)
  train = qqp.get_train_examples(data_dir)
  assert [e.label for e in train] == ["0", "1"]
  assert train[1].text_a == "How do I control my horny emotions?"
  assert train[1].text_b == "How do you control your horniness?"
  test = qqp.get_test_examples(data_dir)
  assert test[0].text_b == "What does a Trump win mean?"
  assert qqp.metric_names == ("f1",)

  qnli = run_classifier.get_processor("QNLI")
  data_dir = _write_glue(str(tmp_path / "QNLI"), _QNLI_TRAIN, _QNLI_TEST)
  train = qnli.get_train_examples(data_dir)
  assert [e.label for e in train] == ["not_entailment", "entailment"]
  assert train[0].text_a == "When did the third Digimon series begin?"
  assert qnli.get_test_examples(data_dir)[0].label == "entailment"

  wnli = run_classifier.get_processor("wnli")
  data_dir = _write_glue(str(tmp_path / "WNLI"), _WNLI_TRAIN, _WNLI_TEST)
  train = wnli.get_train_examples(data_dir)
  assert [e.label for e in train] == ["1", "1", "0"]
  assert train[0].text_b == "The carrot had a hole."
  assert wnli.get_test_examples(data_dir)[0].text_b == ("Horses had seen the "
                                                        "trains.")


def test_stsb_processor_reads_float_scores(tmp_path):
  data_dir = _write_glue(str(tmp_path / "STS-B"), _stsb_lines(_STSB_PAIRS),
                         _stsb_lines(_STSB_PAIRS[:2], with_score=False))
  processor = run_classifier.get_processor("sts-b")
  assert processor.is_regression and processor.get_labels() is None
  train = processor.get_train_examples(data_dir)
  assert train[0].text_a == "A plane is taking off."
  assert train[0].text_b == "An air plane is taking off."
  assert [e.label for e in train][:2] == ["5.000", "3.800"]
  assert len(processor.get_test_examples(data_dir)) == 2
  tokenizer = tokenization.FullTokenizer(
      shared_path("conformance", "modeling", "vocab.txt"))
  feature = run_classifier.convert_single_example(0, train[1], None, 16,
                                                  tokenizer)
  assert feature.label_id == pytest.approx(3.8)


def test_tsv_task_columns_from_flags(tmp_path):
  data_dir = str(tmp_path)
  header = "label\tid\tquestion\tanswer"
  _write(os.path.join(data_dir, "train.tsv"),
         [header, "yes\t1\tIs it?\tIt is.", "no\t2\tIs it not?\tIt is.",
          "maybe\t3\tWho?\tMe."])
  _write(os.path.join(data_dir, "dev.tsv"), [header, "no\t7\tA?\tB."])
  _write(os.path.join(data_dir, "test.tsv"), [header, "\t8\tC?\tD.",
                                              "\t9\tE?\tF."])
  processor = run_classifier.get_processor(
      "TSV", data_dir=data_dir, text_a_column=2, text_b_column=-1,
      label_column=0, skip_header=True)
  assert processor.get_labels() == ["maybe", "no", "yes"]
  train = processor.get_train_examples(data_dir)
  assert [(e.text_a, e.text_b, e.label) for e in train[:1]] == [
      ("Is it?", "It is.", "yes")]
  assert processor.get_dev_examples(data_dir)[0].label == "no"
  test = processor.get_test_examples(data_dir)
  assert [e.text_a for e in test] == ["C?", "E?"]
  single = run_classifier.get_processor(
      "tsv", data_dir=data_dir, text_a_column=3, label_column=0,
      skip_header=True)
  assert single.get_train_examples(data_dir)[2].text_b is None


# ----------------------------------------------------------------------------
# Metrics against hand-computed values.
# ----------------------------------------------------------------------------


def test_f1_hand_computed():
  # tp=3, fp=1, fn=2: precision 3/4, recall 3/5, F1 = 6/9.
  assert glue_metrics.f1_from_counts(3, 1, 2) == pytest.approx(2 / 3)
  assert glue_metrics.f1_from_counts(0, 0, 0) == 0.0


def test_matthews_hand_computed():
  # (3*4 - 1*2) / sqrt(4 * 5 * 5 * 6) = 10 / sqrt(600).
  assert glue_metrics.matthews_from_counts(3, 1, 2, 4) == pytest.approx(
      10 / 600 ** 0.5)
  assert glue_metrics.matthews_from_counts(5, 0, 0, 5) == pytest.approx(1.0)
  assert glue_metrics.matthews_from_counts(0, 0, 5, 5) == 0.0  # Undefined.


def test_pearson_hand_computed():
  # dx = [-1.5, -.5, .5, 1.5], dy = [-3, -1, 0, 4]: 11 / sqrt(5 * 26).
  assert glue_metrics.pearson_correlation(
      [1, 2, 3, 4], [2, 4, 5, 9]) == pytest.approx(11 / 130 ** 0.5, rel=1e-6)
  assert np.isnan(glue_metrics.pearson_correlation([1, 1, 1], [1, 2, 3]))


def test_spearman_hand_computed_with_ties():
  # Ranks [1, 2.5, 2.5, 4] and [1, 3, 2, 4]: 4.5 / sqrt(4.5 * 5).
  assert glue_metrics.spearman_correlation(
      [1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(4.5 / 22.5 ** 0.5,
                                                   rel=1e-6)
  assert glue_metrics.spearman_correlation(
      [1, 2, 3, 4, 5], [1, 4, 9, 16, 100]) == pytest.approx(1.0)
  assert glue_metrics.spearman_correlation(
      [3, 2, 1], [1, 2, 3]) == pytest.approx(-1.0)


def _run_streaming(metric_fn, batches):
  """Feeds `batches` (lists of arrays) through a metric_fn; final values."""
  with tf.Graph().as_default():
    placeholders = [tf.placeholder(tf.as_dtype(a.dtype),
                                   [None] + list(a.shape[1:]))
                    for a in batches[0]]
    metrics = metric_fn(*placeholders)
    with tf.Session() as sess:
      sess.run(tf.local_variables_initializer())
      for batch in batches:
        sess.run([update for _, update in metrics.values()],
                 dict(zip(placeholders, batch)))
      return sess.run({k: value for k, (value, _) in metrics.items()})


def test_classification_metrics_in_graph_ignore_padding():
  labels = np.array([1, 1, 1, 0, 0, 0, 1], np.int32)
  predicted = np.array([1, 1, 0, 1, 0, 0, 0])
  logits = np.eye(2, dtype=np.float32)[predicted]
  loss = np.arange(1, 8, dtype=np.float32)
  real = np.array([1, 1, 1, 1, 1, 1, 0], np.float32)  # The last: padding.

  def metric_fn(*args):
    return glue_metrics.classification_metric_fn(
        *args, metric_names=("f1", "mcc"))

  batches = [(loss[:4], labels[:4], logits[:4], real[:4]),
             (loss[4:], labels[4:], logits[4:], real[4:])]
  results = _run_streaming(metric_fn, batches)
  # Real examples: tp=2, fn=1, fp=1, tn=2.
  assert results["eval_accuracy"] == pytest.approx(4 / 6)
  assert results["eval_loss"] == pytest.approx(3.5)
  assert results["eval_f1"] == pytest.approx(4 / 6)
  assert results["eval_mcc"] == pytest.approx(3 / 9)


def test_regression_metrics_in_graph_ignore_padding():
  preds = np.array([1, 2, 3, 4, 100], np.float32)
  labels = np.array([2, 4, 5, 9, -50], np.float32)
  loss = np.square(preds - labels)
  real = np.array([1, 1, 1, 1, 0], np.float32)
  batches = [(loss[:3], labels[:3], preds[:3], real[:3]),
             (loss[3:], labels[3:], preds[3:], real[3:])]
  results = _run_streaming(glue_metrics.regression_metric_fn, batches)
  assert sorted(results) == ["eval_loss", "eval_pearson", "eval_spearman"]
  assert results["eval_loss"] == pytest.approx((1 + 4 + 4 + 25) / 4)
  assert results["eval_pearson"] == pytest.approx(11 / 130 ** 0.5, rel=1e-6)
  assert results["eval_spearman"] == pytest.approx(1.0)


# ----------------------------------------------------------------------------
# The model.
# ----------------------------------------------------------------------------


def test_model_fn_initializes_bert_from_checkpoint_and_adds_head():
  model_dir = shared_path("conformance", "modeling")
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
    spec = model_fn(features, None, tf.estimator.ModeKeys.PREDICT, {})
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
# Bad input.
# ----------------------------------------------------------------------------


_MRPC_HEADER = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"


def test_read_tsv_rows_line_endings_bom_and_separators(tmp_path):
  path = tmp_path / "rows.tsv"
  path.write_bytes("\ufeffa\tb\r\n\r\nc\u2028d\t\"e\nf\tg".encode("utf-8"))
  # CRLF and BOM dropped, the empty line skipped (but counted), U+2028 and
  # quotes are ordinary characters, the last line needs no newline.
  assert classifier_data.read_tsv_rows(str(path)) == [
      (0, ["a", "b"]), (2, ["c\u2028d", "\"e"]), (3, ["f", "g"])]
  assert classifier_data.read_tsv_rows(str(path), skip_header=True)[0][0] == 2


def test_invalid_utf8_names_file_and_line(tmp_path):
  path = tmp_path / "train.tsv"
  path.write_bytes(b"a\tb\n\xff\tc\n")
  with pytest.raises(ValueError, match=r"train\.tsv:2: not valid UTF-8"):
    classifier_data.read_tsv_rows(str(path))


def test_row_with_wrong_column_count_names_file_and_line(tmp_path):
  path = _write(str(tmp_path / "train.tsv"),
                [_MRPC_HEADER, "1\t1\t2\tA.\tB.", "0\t3\t4\tonly four"])
  with pytest.raises(ValueError, match=r"train\.tsv:3: expected 5 "
                     r"tab-separated columns, got 4"):
    classifier_data.MrpcProcessor().get_train_examples(str(tmp_path))
  assert path


def test_unknown_label_names_file_line_and_label(tmp_path):
  _write(str(tmp_path / "dev.tsv"),
         [_MRPC_HEADER, "1\t1\t2\tA.\tB.", "yes\t3\t4\tC.\tD."])
  with pytest.raises(ValueError, match=r"dev\.tsv:3: label 'yes' is not one "
                     r"of \['0', '1'\]"):
    run_classifier.get_processor("mrpc").get_dev_examples(str(tmp_path))


def test_non_numeric_stsb_score_is_refused(tmp_path):
  lines = _stsb_lines(_STSB_PAIRS[:2])
  lines[2] = lines[2].rsplit("\t", 1)[0] + "\thigh"
  _write(str(tmp_path / "train.tsv"), lines)
  with pytest.raises(ValueError, match=r"train\.tsv:3: label 'high' is not "
                     "a number"):
    classifier_data.StsbProcessor().get_train_examples(str(tmp_path))


@pytest.mark.parametrize("score", ["nan", "inf", "-Infinity", "NaN"])
def test_non_finite_stsb_score_is_refused(tmp_path, score):
  lines = _stsb_lines(_STSB_PAIRS[:2])
  lines[2] = lines[2].rsplit("\t", 1)[0] + "\t" + score
  _write(str(tmp_path / "train.tsv"), lines)
  with pytest.raises(ValueError, match=r"train\.tsv:3: label '%s' is not a "
                     "finite number" % score):
    classifier_data.StsbProcessor().get_train_examples(str(tmp_path))


def test_tsv_task_bad_column_and_unseen_dev_label(tmp_path):
  _write(str(tmp_path / "train.tsv"), ["a text\tpos", "b text\tneg"])
  _write(str(tmp_path / "dev.tsv"), ["c text\tneutral"])
  processor = run_classifier.get_processor("tsv", data_dir=str(tmp_path))
  with pytest.raises(ValueError, match=r"dev\.tsv:1: label 'neutral' is not "
                     r"one of \['neg', 'pos'\]"):
    processor.get_dev_examples(str(tmp_path))
  bad = run_classifier.get_processor("tsv", data_dir=str(tmp_path),
                                     label_column=5)
  with pytest.raises(ValueError, match=r"train\.tsv:1: column 5 does not "
                     "exist"):
    bad.get_labels()


def test_unknown_task_lists_known_tasks():
  with pytest.raises(ValueError) as error:
    run_classifier.get_processor("glue")
  message = str(error.value)
  assert "--task_name: unknown task 'glue'" in message
  for name in ("cola", "mnli", "mnli-mm", "mrpc", "xnli", "sst-2", "qqp",
               "qnli", "rte", "wnli", "sts-b", "tsv"):
    assert name in message


def test_missing_data_file_names_the_path(tmp_path):
  with pytest.raises(FileNotFoundError, match=r"dev_matched\.tsv: no such "
                     "file"):
    classifier_data.MnliProcessor().get_dev_examples(str(tmp_path))
  with pytest.raises(FileNotFoundError,
                     match=r"multinli\.train\.zh\.tsv: no such file"):
    classifier_data.XnliProcessor().get_train_examples(str(tmp_path))


def test_cli_refuses_long_max_seq_length_before_running(tmp_path):
  output_dir = str(tmp_path / "out")
  result = _run_script(
      ["--task_name=mrpc", "--do_train",
       "--data_dir=%s" % shared_path("data", "glue", "MRPC"),
       "--output_dir=%s" % output_dir, "--max_seq_length=128"] +
      _tiny_model_flags())
  assert result.returncode == 1
  last = result.stderr.strip().splitlines()[-1]
  assert last.startswith("error: --max_seq_length=128 is longer than the "
                         "model's max_position_embeddings=64")
  assert not os.path.exists(output_dir)


def test_cli_refuses_case_contradicting_checkpoint_name(tmp_path):
  model_dir = shared_path("conformance", "modeling")
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


def test_cli_refuses_vocab_larger_than_the_model(tmp_path):
  model_dir = shared_path("conformance", "modeling")
  output_dir = str(tmp_path / "out")
  vocab = shared_path("data", "vocab", "cased_L-12_H-768_A-12", "vocab.txt")
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


def test_mrpc_train_eval_predict_end_to_end(tmp_path):
  data_dir = str(tmp_path / "data")
  for split, count in (("train", 16), ("dev", 10), ("test", 11)):
    lines = _read_lines(shared_path("data", "glue", "MRPC", split + ".tsv"))
    _write(os.path.join(data_dir, split + ".tsv"), lines[:count + 1])
  output_dir = str(tmp_path / "out")
  result = _run_script(
      ["--task_name=MRPC", "--do_train", "--do_eval", "--do_predict",
       "--data_dir=%s" % data_dir, "--output_dir=%s" % output_dir,
       "--max_seq_length=32", "--train_batch_size=8", "--num_train_epochs=1",
       "--predict_batch_size=8", "--eval_batch_size=4"] + _tiny_model_flags())
  assert result.returncode == 0, result.stderr[-3000:]
  results = _eval_results(os.path.join(output_dir, "eval_results.txt"))
  assert sorted(results) == ["eval_accuracy", "eval_f1", "eval_loss",
                             "global_step", "loss"]
  assert results["global_step"] == 2
  assert 0.0 <= results["eval_accuracy"] <= 1.0
  lines = _read_lines(os.path.join(output_dir, "test_results.tsv"))
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


def test_stsb_regression_end_to_end(tmp_path):
  data_dir = _write_glue(str(tmp_path / "data"), _stsb_lines(_STSB_PAIRS),
                         _stsb_lines(_STSB_PAIRS[:5], with_score=False),
                         dev=_stsb_lines(_STSB_PAIRS[1:]))
  output_dir = str(tmp_path / "out")
  result = _run_script(
      ["--task_name=sts-b", "--do_train", "--do_eval", "--do_predict",
       "--data_dir=%s" % data_dir, "--output_dir=%s" % output_dir,
       "--max_seq_length=24", "--train_batch_size=3", "--num_train_epochs=1",
       "--learning_rate=1e-3", "--predict_batch_size=2"] +
      _tiny_model_flags())
  assert result.returncode == 0, result.stderr[-3000:]
  results = _eval_results(os.path.join(output_dir, "eval_results.txt"))
  assert sorted(results) == ["eval_loss", "eval_pearson", "eval_spearman",
                             "global_step", "loss"]
  assert -1.0 <= results["eval_spearman"] <= 1.0
  lines = _read_lines(os.path.join(output_dir, "test_results.tsv"))
  assert len(lines) == 5
  assert all(len(line.split("\t")) == 1 for line in lines)
  [float(line) for line in lines]  # pylint: disable=expression-not-assigned


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
      _tiny_model_flags(), timeout=120)
  assert result.returncode == 1, result.stderr[-2000:]
  split = "train" if flag == "--do_train" else "dev"
  assert result.stderr.strip().splitlines()[-1] == (
      "error: --data_dir=%s: no %s examples were read; %s needs at least "
      "one" % (data_dir, split, flag))
