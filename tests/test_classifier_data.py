"""Tests for bert_tf/tasks/classifier/data.py: the GLUE/XNLI/TSV processors on
real and small files, and their one-line errors on bad input."""

import os

import pytest

from helpers import data_path
from helpers import read_lines
from helpers import shared_path
from helpers import write_tsv
from glue_samples import QNLI_TEST
from glue_samples import QNLI_TRAIN
from glue_samples import QQP_TEST
from glue_samples import QQP_TRAIN
from glue_samples import STSB_PAIRS
from glue_samples import stsb_lines
from glue_samples import WNLI_TEST
from glue_samples import WNLI_TRAIN
from glue_samples import write_glue

from bert_tf.tasks.classifier import data as classifier_data
import run_classifier
import tokenization

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
  processor = classifier_data.get_processor("MRPC")
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
  processor = classifier_data.get_processor("cola")
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
  processor = classifier_data.get_processor("SST-2")
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
  processor = classifier_data.get_processor("rte")
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
  matched = classifier_data.get_processor("mnli")
  mismatched = classifier_data.get_processor("MNLI-MM")
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
  processor = classifier_data.get_processor("xnli")
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
  rows = read_lines(os.path.join(sample, "XNLI-1.0", "xnli.dev.tsv"))
  other = rows[1].split("\t")
  other[0] = "fr"
  write_tsv(str(tmp_path / "xnli.dev.tsv"), rows + ["\t".join(other)])
  assert len(processor.get_dev_examples(str(tmp_path))) == 6


def test_xnli_processor_on_full_zh_dev_set():
  data_dir = shared_path("data", "xnli", "ernie_zh_as_xnli1.0")
  dev = classifier_data.XnliProcessor().get_dev_examples(data_dir)
  assert len(dev) == 2490
  assert _label_counts(dev) == {"contradiction": 830, "entailment": 830,
                                "neutral": 830}


def test_qqp_qnli_wnli_processors_on_glue_layouts(tmp_path):
  qqp = classifier_data.get_processor("qqp")
  data_dir = write_glue(str(tmp_path / "QQP"), QQP_TRAIN, QQP_TEST)
  train = qqp.get_train_examples(data_dir)
  assert [e.label for e in train] == ["0", "1"]
  assert train[1].text_a == "How do I control my horny emotions?"
  assert train[1].text_b == "How do you control your horniness?"
  test = qqp.get_test_examples(data_dir)
  assert test[0].text_b == "What does a Trump win mean?"
  assert qqp.metric_names == ("f1",)

  qnli = classifier_data.get_processor("QNLI")
  data_dir = write_glue(str(tmp_path / "QNLI"), QNLI_TRAIN, QNLI_TEST)
  train = qnli.get_train_examples(data_dir)
  assert [e.label for e in train] == ["not_entailment", "entailment"]
  assert train[0].text_a == "When did the third Digimon series begin?"
  assert qnli.get_test_examples(data_dir)[0].label == "entailment"

  wnli = classifier_data.get_processor("wnli")
  data_dir = write_glue(str(tmp_path / "WNLI"), WNLI_TRAIN, WNLI_TEST)
  train = wnli.get_train_examples(data_dir)
  assert [e.label for e in train] == ["1", "1", "0"]
  assert train[0].text_b == "The carrot had a hole."
  assert wnli.get_test_examples(data_dir)[0].text_b == ("Horses had seen the "
                                                        "trains.")


def test_stsb_processor_reads_float_scores(tmp_path):
  data_dir = write_glue(str(tmp_path / "STS-B"), stsb_lines(STSB_PAIRS),
                        stsb_lines(STSB_PAIRS[:2], with_score=False))
  processor = classifier_data.get_processor("sts-b")
  assert processor.is_regression and processor.get_labels() is None
  train = processor.get_train_examples(data_dir)
  assert train[0].text_a == "A plane is taking off."
  assert train[0].text_b == "An air plane is taking off."
  assert [e.label for e in train][:2] == ["5.000", "3.800"]
  assert len(processor.get_test_examples(data_dir)) == 2
  tokenizer = tokenization.FullTokenizer(
      data_path("conformance", "modeling", "vocab.txt"))
  feature = run_classifier.convert_single_example(0, train[1], None, 16,
                                                  tokenizer)
  assert feature.label_id == pytest.approx(3.8)


def test_tsv_task_columns_from_flags(tmp_path):
  data_dir = str(tmp_path)
  header = "label\tid\tquestion\tanswer"
  write_tsv(os.path.join(data_dir, "train.tsv"),
            [header, "yes\t1\tIs it?\tIt is.", "no\t2\tIs it not?\tIt is.",
             "maybe\t3\tWho?\tMe."])
  write_tsv(os.path.join(data_dir, "dev.tsv"), [header, "no\t7\tA?\tB."])
  write_tsv(os.path.join(data_dir, "test.tsv"), [header, "\t8\tC?\tD.",
                                                 "\t9\tE?\tF."])
  processor = classifier_data.get_processor(
      "TSV", data_dir=data_dir, text_a_column=2, text_b_column=-1,
      label_column=0, skip_header=True)
  assert processor.get_labels() == ["maybe", "no", "yes"]
  train = processor.get_train_examples(data_dir)
  assert [(e.text_a, e.text_b, e.label) for e in train[:1]] == [
      ("Is it?", "It is.", "yes")]
  assert processor.get_dev_examples(data_dir)[0].label == "no"
  test = processor.get_test_examples(data_dir)
  assert [e.text_a for e in test] == ["C?", "E?"]
  single = classifier_data.get_processor(
      "tsv", data_dir=data_dir, text_a_column=3, label_column=0,
      skip_header=True)
  assert single.get_train_examples(data_dir)[2].text_b is None


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
  path = write_tsv(str(tmp_path / "train.tsv"),
                   [_MRPC_HEADER, "1\t1\t2\tA.\tB.", "0\t3\t4\tonly four"])
  with pytest.raises(ValueError, match=r"train\.tsv:3: expected 5 "
                     r"tab-separated columns, got 4"):
    classifier_data.MrpcProcessor().get_train_examples(str(tmp_path))
  assert path


def test_unknown_label_names_file_line_and_label(tmp_path):
  write_tsv(str(tmp_path / "dev.tsv"),
            [_MRPC_HEADER, "1\t1\t2\tA.\tB.", "yes\t3\t4\tC.\tD."])
  with pytest.raises(ValueError, match=r"dev\.tsv:3: label 'yes' is not one "
                     r"of \['0', '1'\]"):
    classifier_data.get_processor("mrpc").get_dev_examples(str(tmp_path))


def test_non_numeric_stsb_score_is_refused(tmp_path):
  lines = stsb_lines(STSB_PAIRS[:2])
  lines[2] = lines[2].rsplit("\t", 1)[0] + "\thigh"
  write_tsv(str(tmp_path / "train.tsv"), lines)
  with pytest.raises(ValueError, match=r"train\.tsv:3: label 'high' is not "
                     "a number"):
    classifier_data.StsbProcessor().get_train_examples(str(tmp_path))


@pytest.mark.parametrize("score", ["nan", "inf", "-Infinity", "NaN"])
def test_non_finite_stsb_score_is_refused(tmp_path, score):
  lines = stsb_lines(STSB_PAIRS[:2])
  lines[2] = lines[2].rsplit("\t", 1)[0] + "\t" + score
  write_tsv(str(tmp_path / "train.tsv"), lines)
  with pytest.raises(ValueError, match=r"train\.tsv:3: label '%s' is not a "
                     "finite number" % score):
    classifier_data.StsbProcessor().get_train_examples(str(tmp_path))


def test_tsv_task_bad_column_and_unseen_dev_label(tmp_path):
  write_tsv(str(tmp_path / "train.tsv"), ["a text\tpos", "b text\tneg"])
  write_tsv(str(tmp_path / "dev.tsv"), ["c text\tneutral"])
  processor = classifier_data.get_processor("tsv", data_dir=str(tmp_path))
  with pytest.raises(ValueError, match=r"dev\.tsv:1: label 'neutral' is not "
                     r"one of \['neg', 'pos'\]"):
    processor.get_dev_examples(str(tmp_path))
  bad = classifier_data.get_processor("tsv", data_dir=str(tmp_path),
                                      label_column=5)
  with pytest.raises(ValueError, match=r"train\.tsv:1: column 5 does not "
                     "exist"):
    bad.get_labels()


def test_unknown_task_lists_known_tasks():
  with pytest.raises(ValueError) as error:
    classifier_data.get_processor("glue")
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


def test_records_keep_the_reference_signatures():
  example = run_classifier.InputExample("train-1", "a")
  assert (example.guid, example.text_a, example.text_b, example.label) == (
      "train-1", "a", None, None)
  example = run_classifier.InputExample(guid="dev-2", text_a="a", text_b="b",
                                        label="1")
  assert (example.text_b, example.label) == ("b", "1")
  features = run_classifier.InputFeatures([1], [1], [0], 1)
  assert features.is_real_example is True
  features = run_classifier.InputFeatures(
      input_ids=[1], input_mask=[1], segment_ids=[0], label_id=0.5,
      is_real_example=False)
  assert (features.label_id, features.is_real_example) == (0.5, False)
  assert isinstance(run_classifier.PaddingInputExample(),
                    classifier_data.PaddingInputExample)
  # Identity, as in the reference: records stay hashable.
  assert len({run_classifier.PaddingInputExample(),
              run_classifier.PaddingInputExample()}) == 2
