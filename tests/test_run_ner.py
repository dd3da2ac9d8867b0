"""Tests for run_ner.py and bert_tf/tasks/ner/: readers on the real CoNLL-2003
and WNUT-17 files, label alignment, windows, document context, the entity-metric
golden case, bad input, the Hugging Face token-classification conversion and
one end-to-end train/eval/predict run with the tiny conformance model."""

import collections
import functools
import json
import logging as py_logging
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from seqeval.metrics.sequence_labeling import get_entities
import tensorflow.compat.v1 as tf

from helpers import data_path
from helpers import import_or_skip
from helpers import REPO_ROOT
from helpers import shared_path

import convert_checkpoint
import modeling
from bert_tf.tasks.ner import features as ner_features
from bert_tf.tasks.ner import metrics as ner_metrics
from bert_tf.tasks.ner import reader as ner_reader
from bert_tf.tasks.ner import tags as ner_tags
import run_ner
from bert_tf.tasks.squad import data as squad_data
import tokenization


# ----------------------------------------------------------------------------
# Helpers.
# ----------------------------------------------------------------------------


def _conll(*parts):
  return shared_path("data", "ner", "conll2003", *parts)


def _wnut(*parts):
  return shared_path("data", "ner", "wnut17", *parts)


def _stats(path):
  with open(os.path.join(os.path.dirname(path), "stats.json")) as f:
    return json.load(f)["files"][os.path.basename(path)]


@functools.lru_cache(maxsize=None)
def _read_cached(path):
  """`read_conll_file(path)`, read once per test session (eng.train is big)."""
  return ner_reader.read_conll_file(path)


def _write(path, text):
  os.makedirs(os.path.dirname(str(path)), exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    f.write(text)
  return str(path)


def _vocab_tokenizer(tmp_path, words):
  """A FullTokenizer over a hand-made vocabulary (special tokens first)."""
  path = _write(tmp_path / "vocab.txt", "\n".join(
      ["[PAD]", "[UNK]", "[CLS]", "[SEP]"] + list(words)) + "\n")
  return tokenization.FullTokenizer(path, do_lower_case=True)


def _sentence(words, labels=None, document=0):
  return ner_reader.Sentence(list(words), labels and list(labels), document,
                             list(range(1, len(words) + 1)), "mem")


def _run_script(args, timeout=300):
  env = dict(os.environ)
  env.pop("BERT_DEBUG", None)
  return subprocess.run(
      [sys.executable, os.path.join(REPO_ROOT, "run_ner.py")] + args,
      cwd=REPO_ROOT, env=env, capture_output=True, text=True,
      timeout=timeout)


def _tiny_model_flags():
  model_dir = data_path("conformance", "modeling")
  return ["--vocab_file=%s" % os.path.join(model_dir, "vocab.txt"),
          "--bert_config_file=%s" % os.path.join(model_dir,
                                                  "bert_config.json"),
          "--init_checkpoint=%s" % os.path.join(model_dir, "bert_model.ckpt")]


def _head_of_conll(src, dst, num_sentences):
  """The first `num_sentences` sentences (and -DOCSTART- lines) of `src`."""
  out, seen = [], 0
  with open(src, encoding="utf-8") as f:
    for line in f:
      if not line.strip():
        seen += 1
        if seen >= num_sentences:
          break
      out.append(line)
  return _write(dst, "".join(out))


# ----------------------------------------------------------------------------
# Readers on the real files.
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["eng.train", "eng.testa", "eng.testb"])
def test_conll2003_reader_matches_stats(name):
  path = _conll(name)
  stats = _stats(path)
  sentences = _read_cached(path)
  assert len(sentences) == stats["sentences"]
  assert sum(len(s.words) for s in sentences) == stats["tokens"]
  assert len({s.document for s in sentences}) == stats["documents"]
  assert sentences[-1].document == stats["documents"] - 1
  tags = collections.Counter(t for s in sentences for t in s.labels)
  assert dict(tags) == stats["tag_counts"]
  assert all("-DOCSTART-" not in s.words for s in sentences)
  assert ner_tags.detect_tag_scheme(s.labels for s in sentences) == "IOB1"
  # Entities with conlleval's chunking (seqeval's default mode, which
  # entity_scores uses), per type, as counted in stats.json.
  entities = collections.Counter(
      e[0] for e in get_entities([s.labels for s in sentences]))
  expected = dict(stats["entities"])
  del expected["total"]
  assert dict(entities) == expected


@pytest.mark.parametrize("name", ["wnut17train.conll", "emerging.dev.conll",
                                  "emerging.test.annotated"])
def test_wnut17_reader_matches_stats(name):
  path = _wnut(name)
  stats = _stats(path)
  sentences = ner_reader.read_conll_file(path)
  # wnut17train.conll separates many sentences by a line holding one tab.
  assert len(sentences) == stats["sentences"]
  assert sum(len(s.words) for s in sentences) == stats["tokens"]
  assert {s.document for s in sentences} == {0}  # No -DOCSTART-.
  tags = collections.Counter(t for s in sentences for t in s.labels)
  assert dict(tags) == stats["tag_counts"]
  assert ner_tags.detect_tag_scheme(s.labels for s in sentences) == "IOB2"
  assert ner_tags.find_invalid_tags(sentences, "IOB2") == (0, None)


def test_other_label_column_and_line_numbers():
  sentences = ner_reader.read_conll_file(_conll("eng.testa"), label_column=1)
  first = sentences[0]
  assert first.words[:2] == ["CRICKET", "-"]
  assert first.labels[:2] == ["NNP", ":"]  # The POS column.
  assert first.lines[0] == 3  # After "-DOCSTART- -X- O O" and a blank line.


def test_invalid_tags_in_declared_scheme_are_counted_not_fatal(caplog):
  sentences = _read_cached(_conll("eng.train"))
  # stats.json: two irregular B- tags after O, at these lines.
  assert ner_tags.find_invalid_tags(sentences, "IOB1") == (
      2, (152428, "B-MISC", "O"))
  with caplog.at_level(py_logging.WARNING):
    assert ner_tags.warn_invalid_tags(sentences, "IOB1", "eng.train") == 2
  warnings = [r for r in caplog.records if "invalid in IOB1" in r.getMessage()]
  assert len(warnings) == 1 and "line 152428" in warnings[0].getMessage()
  # Read as IOB2, every I- entity start is a violation (one per sentence).
  count, first = ner_tags.find_invalid_tags(sentences, "IOB2")
  assert count > 9000 and first[1].startswith("I-")


def test_tag_scheme_detection_and_iobes_validity():
  iobes = [["B-PER", "E-PER", "O", "S-LOC"], ["O"]]
  assert ner_tags.detect_tag_scheme(iobes) == "IOBES"
  assert ner_tags.detect_tag_scheme([["O", "O"]]) == "IOB2"
  good = [_sentence("abcd", iobes[0])]
  assert ner_tags.find_invalid_tags(good, "IOBES") == (0, None)
  bad = [_sentence("abc", ["B-PER", "O", "S-LOC"]),
         _sentence("ab", ["I-PER", "E-PER"])]
  assert ner_tags.find_invalid_tags(bad, "IOBES") == (2, (1, "B-PER", "the "
                                                           "sentence start"))
  assert ner_tags.find_invalid_tags([_sentence("a", ["PER"])], "IOB2")[0] == 1


# ----------------------------------------------------------------------------
# Features.
# ----------------------------------------------------------------------------


def test_first_piece_carries_the_label(tmp_path):
  tokenizer = _vocab_tokenizer(
      tmp_path, ["john", "##son", "lives", "in", "york", "##ville", ","])
  labels = ["I-LOC", "I-PER", "O"]
  sentence = _sentence(["Johnson", "lives", "in", "Yorkville,"],
                       ["I-PER", "O", "O", "I-LOC"])
  features, empty = ner_features.convert_sentences_to_features(
      [sentence], labels, tokenizer, max_seq_length=12, doc_stride=4)
  assert empty == 0 and len(features) == 1
  f = features[0]
  ids = tokenizer.convert_tokens_to_ids(
      ["[CLS]", "john", "##son", "lives", "in", "york", "##ville", ",",
       "[SEP]"])
  assert f.input_ids == ids + [0] * 3
  assert f.input_mask == [1] * 9 + [0] * 3
  assert f.segment_ids == [0] * 12
  # Weight 1 only at each word's first piece; other pieces, [CLS], [SEP]
  # and padding have weight 0 and label id 0.
  assert f.label_weights == [0, 1, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0]
  assert f.label_ids == [0, 1, 0, 2, 2, 0, 0, 0, 0, 0, 0, 0]
  assert f.word_index == [-1, 0, -1, 1, 2, 3, -1, -1, -1, -1, -1, -1]
  assert [p for p in range(12) if f.is_max_context[p]] == [1, 3, 4, 5]


def test_label_ids_at_first_pieces(tmp_path):
  tokenizer = _vocab_tokenizer(tmp_path, ["john", "##son", "lives"])
  labels = ["I-PER", "O"]
  features, _ = ner_features.convert_sentences_to_features(
      [_sentence(["Johnson", "lives"], ["I-PER", "O"])], labels, tokenizer,
      max_seq_length=8, doc_stride=2)
  assert features[0].label_ids[:4] == [0, 0, 0, 1]  # [CLS] john ##son lives
  assert features[0].label_weights[:5] == [0, 1, 0, 1, 0]


def test_windows_cover_every_word_and_pick_the_most_context(tmp_path):
  words = ["w%d" % i for i in range(10)]
  tokenizer = _vocab_tokenizer(tmp_path, words)
  assert squad_data.doc_spans(10, 4, 2) == [(0, 4), (2, 4), (4, 4), (6, 4)]
  assert squad_data.doc_spans(10, 4, 9) == [(0, 4), (4, 4), (8, 2)]  # No gap.
  sentence = _sentence(words, ["O"] * 10)
  features, _ = ner_features.convert_sentences_to_features(
      [sentence], ["O"], tokenizer, max_seq_length=6, doc_stride=2)
  assert len(features) == 4
  chosen = {}
  for index, f in enumerate(features):
    for position, word in enumerate(f.word_index):
      if word >= 0 and f.is_max_context[position]:
        assert word not in chosen
        chosen[word] = index
  # min(left, right) + 0.01 * length, first window wins ties.
  assert chosen == {0: 0, 1: 0, 2: 0, 3: 1, 4: 1, 5: 2, 6: 2, 7: 3, 8: 3,
                    9: 3}
  # Predictions come from the chosen window: window k predicts label k.
  label_list = ["L0", "L1", "L2", "L3"]
  predictions = []
  for index, f in enumerate(features):
    probs = np.zeros([6, 4], np.float32)
    probs[:, index] = 1.0
    predictions.append({"unique_ids": f.unique_id, "probabilities": probs})
  predicted = ner_metrics.word_predictions([sentence], features, predictions,
                                           label_list)
  assert predicted == [["L%d" % chosen[w] for w in range(10)]]


def test_word_predictions_refuse_mispaired_predictions(tmp_path):
  tokenizer = _vocab_tokenizer(tmp_path, ["a", "b"])
  sentences = [_sentence(["a"], ["O"]), _sentence(["b"], ["O"])]
  features, _ = ner_features.convert_sentences_to_features(
      sentences, ["O"], tokenizer, 4, 1)
  probs = np.ones([4, 1], np.float32)
  with pytest.raises(ValueError, match="unique id 1, expected 0"):
    ner_metrics.word_predictions(sentences, features, [
        {"unique_ids": 1, "probabilities": probs}] * 2, ["O"])
  with pytest.raises(ValueError, match="got 1 predictions for 2 features"):
    ner_metrics.word_predictions(sentences, features, [
        {"unique_ids": 0, "probabilities": probs}], ["O"])


def test_document_context_surrounds_the_sentence(tmp_path):
  tokenizer = _vocab_tokenizer(
      tmp_path, ["a", "b", "c", "d", "e", "f", "g", "x", "##y"])
  doc0 = [_sentence(["a", "b"], ["O", "O"]), _sentence(["c"], ["I-PER"]),
          _sentence(["d", "xy", "e"], ["O", "O", "O"])]
  doc1 = [_sentence(["f", "g"], ["O", "O"], document=1)]
  labels = ["I-PER", "O"]
  features, _ = ner_features.convert_sentences_to_features(
      doc0 + doc1, labels, tokenizer, max_seq_length=7, doc_stride=2,
      document_context=True)
  assert len(features) == 4
  tokens = [tokenizer.convert_ids_to_tokens(
      [i for i, m in zip(f.input_ids, f.input_mask) if m]) for f in features]
  # Budget 5 pieces; whole words alternate left and right, nearest first.
  assert tokens[0] == ["[CLS]", "a", "b", "c", "d", "[SEP]"]  # "xy" = 2 > 1.
  assert tokens[1] == ["[CLS]", "a", "b", "c", "d", "[SEP]"]  # "xy" blocks.
  assert tokens[2] == ["[CLS]", "c", "d", "x", "##y", "e", "[SEP]"]
  assert tokens[3] == ["[CLS]", "f", "g", "[SEP]"]  # Other document: alone.
  # Only the sentence's own words carry labels.
  assert features[1].word_index[:7] == [-1, -1, -1, 0, -1, -1, -1]
  assert features[1].label_ids[3] == 0 and features[1].label_weights[3] == 1
  assert sum(features[1].label_weights) == 1
  assert features[2].word_index[:7] == [-1, -1, 0, 1, -1, 2, -1]
  assert [p for p in range(7) if features[2].is_max_context[p]] == [2, 3, 5]


def test_document_context_off_encodes_sentences_alone(tmp_path):
  tokenizer = _vocab_tokenizer(tmp_path, ["a", "b", "c"])
  sentences = [_sentence(["a", "b"], ["O", "O"]), _sentence(["c"], ["O"])]
  features, _ = ner_features.convert_sentences_to_features(
      sentences, ["O"], tokenizer, max_seq_length=8, doc_stride=2)
  assert [sum(f.input_mask) for f in features] == [4, 3]


def test_words_without_wordpiece_are_counted_and_predicted_o(tmp_path):
  tokenizer = _vocab_tokenizer(tmp_path, ["a", "b"])
  sentences = [_sentence(["a", "\x07", "b"], ["I-PER", "I-PER", "O"]),
               _sentence(["\x01\x02"], ["I-PER"])]
  features, empty = ner_features.convert_sentences_to_features(
      sentences, ["I-PER", "O"], tokenizer, max_seq_length=8, doc_stride=2)
  assert empty == 2
  assert len(features) == 1  # The all-control sentence has no feature.
  probs = np.zeros([8, 2], np.float32)
  probs[:, 0] = 1.0  # Predict I-PER everywhere.
  predicted = ner_metrics.word_predictions(
      sentences, features, [{"unique_ids": 0, "probabilities": probs}],
      ["I-PER", "O"])
  assert predicted == [["I-PER", "O", "I-PER"], ["O"]]
  out = str(tmp_path / "pred.txt")
  ner_metrics.write_conll_predictions(out, sentences, predicted)
  with open(out, encoding="utf-8") as f:
    assert f.read() == ("a I-PER I-PER\n\x07 I-PER O\nb O I-PER\n\n"
                        "\x01\x02 I-PER O\n")


# ----------------------------------------------------------------------------
# Metrics.
# ----------------------------------------------------------------------------


def test_metric_case_matches_conlleval_and_seqeval_exactly():
  path = _conll("metric_case.txt")
  with open(_conll("metric_case.json")) as f:
    case = json.load(f)
  gold = ner_reader.read_conll_file(path, label_column=1)
  pred = ner_reader.read_conll_file(path, label_column=2)
  assert sum(len(s.words) for s in gold) == case["tokens"] == 3491
  scores = ner_metrics.entity_scores([s.labels for s in gold],
                                     [s.labels for s in pred])
  conlleval = case["conlleval"]["scores"]
  seqeval = case["seqeval_default"]["scores"]
  for key in ("precision", "recall", "f1"):
    assert scores[key] == conlleval["overall"][key] == seqeval["overall"][key]
  assert scores["accuracy"] == conlleval["token_accuracy"]
  assert sorted(scores["types"]) == ["LOC", "MISC", "ORG", "PER"]
  for name, row in scores["types"].items():
    for key in ("precision", "recall", "f1"):
      assert row[key] == conlleval[name][key] == seqeval[name][key], name
    assert row["support"] == conlleval[name]["gold"]
  entries = ner_metrics.eval_results_entries(scores)
  assert sorted(entries) == [
      "eval_accuracy", "eval_f1", "eval_f1_LOC", "eval_f1_MISC",
      "eval_f1_ORG", "eval_f1_PER", "eval_precision", "eval_recall"]
  assert entries["eval_f1"] == pytest.approx(0.7145214521452145, abs=0)


def test_entity_scores_report_requested_types_and_no_entities():
  scores = ner_metrics.entity_scores([["O", "O"]], [["O", "O"]],
                                     types=["PER"])
  assert scores["f1"] == 0.0 and scores["accuracy"] == 1.0
  assert scores["types"] == {"PER": {"precision": 0.0, "recall": 0.0,
                                     "f1": 0.0, "support": 0}}
  # IOBES is chunked like conlleval: S- alone, B- ... E-.
  scores = ner_metrics.entity_scores([["B-PER", "E-PER", "S-LOC"]],
                                     [["B-PER", "E-PER", "O"]])
  assert scores["precision"] == 1.0 and scores["recall"] == 0.5


# ----------------------------------------------------------------------------
# Bad input.
# ----------------------------------------------------------------------------


def test_wrong_column_count_names_file_and_line(tmp_path):
  path = _write(tmp_path / "d" / "bad.txt",
                "-DOCSTART- -X- O O\n\nEU NNP I-NP I-ORG\nrejects VBZ I-VP\n")
  with pytest.raises(ValueError, match=r"bad\.txt:4: expected 4 space-"
                     r"separated columns \(as on line 3\), got 3"):
    ner_reader.read_conll_file(path)


@pytest.mark.parametrize("text", ["", "\n\n", "-DOCSTART- -X- O O\n\n"])
def test_empty_file_is_one_line_error(tmp_path, text):
  path = _write(tmp_path / "d" / "empty.txt", text)
  with pytest.raises(ValueError, match="empty.txt: ") as info:
    ner_reader.read_conll_file(path)
  assert "\n" not in str(info.value)


def test_label_not_in_training_labels_names_label_and_file():
  sentences = [_sentence(["Paris"], ["I-LOC"]), _sentence(["x"], ["B-GPE"])]
  with pytest.raises(ValueError, match=r"mem:1: label 'B-GPE' is not in "
                     r"the training file"):
    ner_reader.check_labels(sentences, ["I-LOC", "O"], "mem")


def test_label_column_outside_the_file_is_named(tmp_path):
  path = _write(tmp_path / "d" / "two.txt", "a\tO\n")
  with pytest.raises(ValueError, match=r"two.txt:1: --label_column=3"):
    ner_reader.read_conll_file(path, label_column=3)
  with pytest.raises(ValueError, match=r"--label_column=0"):
    ner_reader.read_conll_file(path, label_column=0)


def test_token_only_file_reads_without_labels(tmp_path):
  path = _write(tmp_path / "d" / "raw.txt", "Paris\nis\n\nbig\n")
  sentences = ner_reader.read_conll_file(path)
  assert [s.words for s in sentences] == [["Paris", "is"], ["big"]]
  assert sentences[0].labels is None
  with pytest.raises(ValueError, match="no label column"):
    ner_reader.label_list_from(sentences, path)


# ----------------------------------------------------------------------------
# The model and the checkpoint conversion.
# ----------------------------------------------------------------------------


def _tiny_config():
  return modeling.BertConfig.from_json_file(
      data_path("conformance", "modeling", "bert_config.json"))


def test_create_model_loss_weights_first_pieces_only():
  rng = np.random.RandomState(0)
  ids = rng.randint(5, 100, size=[2, 6]).astype(np.int32)
  labels = rng.randint(0, 3, size=[2, 6]).astype(np.int32)
  weights = np.array([[0, 1, 0, 1, 1, 0], [0, 1, 1, 0, 0, 0]], np.float32)
  with tf.Graph().as_default():
    loss, per_token, logits, probs = run_ner.create_model(
        _tiny_config(), False, tf.constant(ids), tf.ones([2, 6], tf.int32),
        tf.zeros([2, 6], tf.int32), tf.constant(labels),
        tf.constant(weights), 3, False)
    names = sorted(v.name for v in tf.trainable_variables()
                   if v.name.startswith("cls/"))
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      loss, per_token, logits, probs = sess.run(
          [loss, per_token, logits, probs])
  assert names == ["cls/ner/output_bias:0", "cls/ner/output_weights:0"]
  assert probs.shape == (2, 6, 3) and logits.shape == (2, 6, 3)
  shifted = logits - logits.max(-1, keepdims=True)
  log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
  expected = -np.take_along_axis(log_probs, labels[..., None], -1)[..., 0]
  np.testing.assert_allclose(per_token, expected, rtol=1e-5)
  np.testing.assert_allclose(
      loss, (expected * weights).sum() / (weights.sum() + 1e-5), rtol=1e-5)


@pytest.mark.slow
def test_token_classifier_converts_to_hf_with_equal_outputs(tmp_path):
  torch = import_or_skip("torch", "./setup.sh --test")
  transformers = import_or_skip("transformers",
                                "./setup.sh --test")
  torch.set_num_threads(1)
  model_dir = data_path("conformance", "modeling")
  reader = tf.train.load_checkpoint(os.path.join(model_dir,
                                                 "bert_model.ckpt"))
  weights = {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()
             if not n.startswith("cls/")}
  rng = np.random.RandomState(1)
  weights["cls/ner/output_weights"] = rng.normal(size=(5, 32)).astype(
      np.float32)
  weights["cls/ner/output_bias"] = rng.normal(size=(5,)).astype(np.float32)
  run_dir = tmp_path / "run"
  run_dir.mkdir()
  prefix = str(run_dir / "model.ckpt-3")
  convert_checkpoint.write_tf_checkpoint(weights, prefix)
  labels = ["B-MISC", "I-LOC", "I-MISC", "I-PER", "O"]
  ner_reader.write_label_list(str(run_dir / "label_list.txt"), labels)

  inputs = np.load(os.path.join(model_dir, "inputs.npz"))
  ids, mask, types = (inputs[k] for k in
                      ("input_ids", "input_mask", "token_type_ids"))
  with tf.Graph().as_default():
    _, _, logits, _ = run_ner.create_model(
        _tiny_config(), False, tf.constant(ids), tf.constant(mask),
        tf.constant(types), tf.zeros_like(tf.constant(ids)),
        tf.zeros(ids.shape, tf.float32), 5, False)
    saver = tf.train.Saver()
    with tf.Session() as sess:
      saver.restore(sess, prefix)
      tf_logits = sess.run(logits)

  out = str(tmp_path / "hf")
  groups = convert_checkpoint.tf_to_hf(
      prefix, out, bert_config_file=os.path.join(model_dir,
                                                 "bert_config.json"),
      vocab_file=os.path.join(model_dir, "vocab.txt"))
  assert "ner" in groups and "classifier" not in groups
  with open(os.path.join(out, "config.json")) as f:
    hf_config = json.load(f)
  assert hf_config["architectures"] == ["BertForTokenClassification"]
  assert hf_config["id2label"] == {str(i): l for i, l in enumerate(labels)}
  model, info = transformers.BertForTokenClassification.from_pretrained(
      out, output_loading_info=True)
  assert info["missing_keys"] == []
  np.testing.assert_array_equal(model.classifier.weight.detach().numpy(),
                                weights["cls/ner/output_weights"])
  with torch.no_grad():
    hf_logits = model.eval()(
        input_ids=torch.tensor(ids, dtype=torch.long),
        attention_mask=torch.tensor(mask, dtype=torch.long),
        token_type_ids=torch.tensor(types, dtype=torch.long)).logits.numpy()
  real = mask.astype(bool)
  assert np.abs(tf_logits[real] - hf_logits[real]).max() <= 1e-4

  # Back to TF: the head is cls/ner/* again, every tensor exact.
  back = str(tmp_path / "tf")
  assert "ner" in convert_checkpoint.hf_to_tf(out, back)
  reader = tf.train.load_checkpoint(os.path.join(back, "bert_model.ckpt"))
  got = {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}
  assert sorted(got) == sorted(weights)
  for name, value in weights.items():
    np.testing.assert_array_equal(got[name], value, err_msg=name)


def test_sequence_classifier_conversion_is_unchanged():
  with open(data_path("conformance", "modeling", "bert_config.json")) as f:
    table = convert_checkpoint.tensor_table(json.load(f))
  names = {e.hf_name: e.tf_name for e in table}
  assert names["classifier.weight"] == "output_weights"
  assert convert_checkpoint.is_token_classification(
      {"architectures": ["BertForTokenClassification"]})
  assert not convert_checkpoint.is_token_classification(
      {"architectures": ["BertForSequenceClassification"]})


# ----------------------------------------------------------------------------
# The script.
# ----------------------------------------------------------------------------


def _eval_results(path):
  results = {}
  with open(path) as f:
    for line in f:
      key, value = line.rstrip("\n").split(" = ")
      results[key] = value
  return results


@pytest.mark.e2e
@pytest.mark.slow
def test_end_to_end_train_eval_predict_writes_every_output(tmp_path):
  data = tmp_path / "data"
  _head_of_conll(_conll("eng.train"), data / "eng.train", 48)
  _head_of_conll(_conll("eng.testa"), data / "eng.testa", 20)
  _head_of_conll(_conll("eng.testb"), data / "eng.testb", 20)
  out = str(tmp_path / "out")
  common = ["--data_dir=%s" % data, "--output_dir=%s" % out,
            "--max_seq_length=24", "--doc_stride=8"] + _tiny_model_flags()
  result = _run_script(common + [
      "--do_train", "--do_eval", "--do_predict", "--train_batch_size=8",
      "--num_train_epochs=1", "--learning_rate=1e-3"])
  assert result.returncode == 0, result.stderr[-3000:]
  assert "Tag scheme: IOB1 (detected)" in result.stderr
  for name in ("label_list.txt", "eval_results.txt", "dev_predictions.txt",
               "test_predictions.txt"):
    assert os.path.isfile(os.path.join(out, name)), name
  assert not [n for n in os.listdir(out) if ".tmp-" in n]
  train = ner_reader.read_conll_file(str(data / "eng.train"))
  labels = sorted({l for s in train for l in s.labels})
  with open(os.path.join(out, "label_list.txt")) as f:
    assert f.read().split() == labels
  results = _eval_results(os.path.join(out, "eval_results.txt"))
  types = ner_tags.entity_types(labels)
  assert sorted(results) == sorted(
      ["eval_accuracy", "eval_f1", "eval_loss", "eval_precision",
       "eval_recall", "global_step", "loss"] +
      ["eval_f1_%s" % t for t in types])
  assert list(results) == sorted(results)
  # The scores are those of dev_predictions.txt, read as conlleval would.
  dev = ner_reader.read_conll_file(str(data / "eng.testa"))
  gold = ner_reader.read_conll_file(os.path.join(out, "dev_predictions.txt"),
                                    label_column=1)
  pred = ner_reader.read_conll_file(os.path.join(out, "dev_predictions.txt"),
                                    label_column=2)
  assert [s.words for s in gold] == [s.words for s in dev]
  assert [s.labels for s in gold] == [s.labels for s in dev]
  scores = ner_metrics.entity_scores([s.labels for s in gold],
                                     [s.labels for s in pred], types)
  for key, value in ner_metrics.eval_results_entries(scores).items():
    assert float(results[key]) == pytest.approx(value, abs=1e-12), key
  for key in ("eval_precision", "eval_recall", "eval_f1", "eval_accuracy"):
    assert 0.0 <= float(results[key]) <= 1.0
  # TensorBoard: the entity scores beside eval_loss, at the same step.
  tags = {}
  for path in tf.io.gfile.glob(os.path.join(out, "eval", "events.out.*")):
    for event in tf.train.summary_iterator(path):
      for value in event.summary.value:
        tags.setdefault(value.tag, set()).add(event.step)
  step = int(results["global_step"])
  for key in ("eval_loss", "eval_f1", "eval_precision", "eval_recall"):
    assert tags.get(key) == {step}, (key, tags)
  # What the evaluation loads is said as it is.
  assert "Evaluating the checkpoint %s" % os.path.join(
      out, "model.ckpt-%d" % step) in result.stderr
  test = ner_reader.read_conll_file(str(data / "eng.testb"))
  with open(os.path.join(out, "test_predictions.txt")) as f:
    test_lines = f.read()
  written = ner_reader.read_conll_file(
      os.path.join(out, "test_predictions.txt"), label_column=1)
  assert [s.words for s in written] == [s.words for s in test]
  assert all(l.split()[-1] in labels for l in test_lines.splitlines() if l)

  # Predicting again from the output dir reads the label list back.
  os.remove(os.path.join(out, "test_predictions.txt"))
  again = _run_script(common + ["--do_predict"])
  assert again.returncode == 0, again.stderr[-3000:]
  with open(os.path.join(out, "test_predictions.txt")) as f:
    assert f.read() == test_lines


@pytest.mark.slow
def test_unknown_dev_label_is_a_one_line_error(tmp_path):
  data = tmp_path / "data"
  _write(data / "eng.train", "EU I-ORG\nrejects O\n")
  _write(data / "eng.testa", "Paris I-LOC\n")
  result = _run_script(["--data_dir=%s" % data, "--do_train", "--do_eval",
                        "--max_seq_length=32",
                        "--output_dir=%s" % (tmp_path / "out")] +
                       _tiny_model_flags())
  assert result.returncode == 1
  assert result.stderr.strip().splitlines()[-1] == (
      "error: %s:1: label 'I-LOC' is not in the training file %s (labels: "
      "I-ORG O)" % (data / "eng.testa", data / "eng.train"))
  assert not os.path.exists(tmp_path / "out")


@pytest.mark.slow
def test_help_documents_every_flag():
  result = _run_script(["--help"])  # absl exits with status 1 after it.
  for name in ("data_dir", "train_file", "dev_file", "test_file",
               "label_column", "tag_scheme", "max_seq_length", "doc_stride",
               "document_context", "do_train", "do_eval", "do_predict",
               "eval_batch_size", "train_batch_size", "predict_batch_size",
               "learning_rate", "num_train_epochs", "warmup_proportion",
               "bert_config_file", "vocab_file", "init_checkpoint",
               "do_lower_case", "output_dir", "use_tpu",
               "save_checkpoints_steps"):
    assert re.search(r"\n  --(\[no\])?%s: \S" % name, result.stdout), name
