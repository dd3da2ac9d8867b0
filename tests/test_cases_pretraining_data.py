# coding=utf-8
"""Bug-report case: a corpus of one document, and its neighbours.

With one document, the reference draws the "random" next segment from
that same document and labels real continuations as random. The case's
`right` value: refuse a corpus with fewer than two documents, in one line that
says next-sentence prediction needs two documents and that blank lines
separate them. Neighbours: no documents, one document over several files,
documents that become empty after tokenization, a `--num_workers` part with
one document, and two documents (accepted; random B always from the other
document, even when ten draws in a row hit the current one).
"""

import json
import os
import random

import pytest

from helpers import data_path
from helpers import run_script
import create_pretraining_data as cpd
from bert_tf.tasks.pretraining import instances as instances_lib
from bert_tf.tasks.pretraining import whole_words
import tokenization

_UNCASED_VOCAB = ("conformance", "tokenization", "vocab.txt")
_TWO_DOCS = "two documents"


@pytest.fixture(scope="module")
def case():
  with open(data_path("cases", "pretraining_single_document.json"),
            encoding="utf-8") as f:
    loaded = json.load(f)
  assert loaded["id"] == "pretraining_single_document"
  assert loaded["category"] == "pretraining-data/single-document"
  return loaded


@pytest.fixture(scope="module")
def tokenizer():
  return tokenization.FullTokenizer(data_path(*_UNCASED_VOCAB),
                                    do_lower_case=True)


def _write(tmp_path, name, text):
  path = tmp_path / name
  path.write_text(text, encoding="utf-8")
  return str(path)


def _create(files, tokenizer, case, seed=12345, dupe_factor=None):
  params = case["input"]
  return cpd.create_training_instances(
      files, tokenizer, params["max_seq_length"],
      dupe_factor or params["dupe_factor"], params["short_seq_prob"],
      params["masked_lm_prob"], params["max_predictions_per_seq"],
      random.Random(seed), do_whole_word_mask=params["do_whole_word_mask"])


def test_case_single_document_is_refused(tmp_path, tokenizer, case):
  assert "error" in case["expected"]["right"]
  path = _write(tmp_path, "one_doc.txt",
                "\n".join(case["input"]["input_file_lines"]) + "\n")
  with pytest.raises(ValueError) as raised:
    _create([path], tokenizer, case)
  message = str(raised.value)
  assert "\n" not in message
  assert path in message
  assert "needs at least two documents" in message
  assert "separated by blank lines" in message
  # The reference's output for this input labels B as random although it is
  # the same document's text: the bug being refused.
  assert any(i["is_random_next"] for i in case["expected"]["instances"])


@pytest.mark.parametrize("texts", [
    [""],  # Empty file.
    ["\n \n\t\n\n"],  # Blank lines only.
    ["", "\n\n"],  # Several files, none with text.
])
def test_no_documents_is_refused(tmp_path, tokenizer, case, texts):
  files = [_write(tmp_path, "f%d.txt" % k, t) for k, t in enumerate(texts)]
  with pytest.raises(ValueError, match="holds no text: expected plain text, "
                     "one sentence per line, with a blank line between "
                     "documents"):
    _create(files, tokenizer, case)


@pytest.mark.parametrize("texts", [
    ["hello\ntom sawyer\n", "how are you\n"],  # A new file is no new doc.
    ["\n\nhello\n", "tom sawyer", "how are you\n\n\n"],  # f1 ends mid-line.
])
def test_one_document_over_several_files_is_refused(tmp_path, tokenizer, case,
                                                    texts):
  files = [_write(tmp_path, "f%d.txt" % k, t) for k, t in enumerate(texts)]
  with pytest.raises(ValueError, match="holds only 1 document; next-sentence "
                     "prediction needs at least two documents"):
    _create(files, tokenizer, case)


def test_blank_line_in_a_file_between_makes_two_documents(tmp_path, tokenizer,
                                                          case):
  texts = ["hello\ntom sawyer\n", "\n", "how are you\n"]
  files = [_write(tmp_path, "f%d.txt" % k, t) for k, t in enumerate(texts)]
  assert _create(files, tokenizer, case)


def test_documents_empty_after_tokenization_do_not_count(tmp_path, tokenizer,
                                                         case):
  # Control and format characters (U+0000, BEL, U+200B, U+FFFD) tokenize to
  # nothing: the second "document" is dropped, leaving one.
  path = _write(tmp_path, "odd.txt",
                "hello\ntom sawyer\n\n\x00\x07\u200b\n\ufffd\n")
  with pytest.raises(ValueError, match="holds only 1 document"):
    _create([path], tokenizer, case)


def test_two_documents_random_next_always_from_the_other(tmp_path, tokenizer,
                                                         case):
  doc_a = "apple banana cherry\ngrape lemon mango\npeach plum pear\n"
  doc_b = "zebra yak wolf\nfox tiger lion\nbear deer moose\n"
  path = _write(tmp_path, "two.txt", doc_a + "\n" + doc_b)
  words_a = set(tokenizer.tokenize(doc_a))
  words_b = set(tokenizer.tokenize(doc_b))
  assert not words_a & words_b
  instances = _create([path], tokenizer, case, dupe_factor=40)
  num_random = 0
  for instance in instances:
    tokens = whole_words.unmasked_tokens(instance)
    first = {t for t, s in zip(tokens, instance.segment_ids) if s == 0}
    second = {t for t, s in zip(tokens, instance.segment_ids) if s == 1}
    first -= {"[CLS]", "[SEP]"}
    second -= {"[SEP]"}
    own = words_a if first <= words_a else words_b
    assert first <= own
    if instance.is_random_next:
      num_random += 1
      assert not second & own, instance
    else:
      assert second <= own, instance
  assert num_random > 10


class _StuckRng(object):
  """randint returns `stuck` for the first `times` calls, then `then`."""

  def __init__(self, stuck, times, then):
    self.calls = 0
    self._stuck, self._times, self._then = stuck, times, then

  def randint(self, low, high):
    del low, high
    self.calls += 1
    return self._stuck if self.calls <= self._times else self._then


def test_ten_unlucky_draws_keep_drawing_for_another_document():
  # The reference would use document 0 after ten draws of 0.
  rng = _StuckRng(stuck=0, times=10, then=1)
  assert instances_lib.pick_other_document(2, 0, rng) == 1
  assert rng.calls == 11
  rng = _StuckRng(stuck=3, times=25, then=2)
  assert instances_lib.pick_other_document(5, 3, rng) == 2
  # Within ten draws the choice and the draws are the reference's.
  rng = _StuckRng(stuck=0, times=4, then=1)
  assert instances_lib.pick_other_document(2, 0, rng) == 1
  assert rng.calls == 5


def test_single_document_list_is_refused_by_the_library():
  with pytest.raises(ValueError, match="needs at least two"):
    cpd.create_instances_from_document(
        [[["hello"], ["tom", "sawyer"]]], 0, 16, 0.1, 0.15, 3,
        ["hello", "tom", "sawyer"], random.Random(1))


def test_worker_part_without_a_document_is_refused(tmp_path, tokenizer):
  path = _write(tmp_path, "three.txt", "one a\n\ntwo b\n\nthree c\n")
  with pytest.raises(ValueError, match=r"--num_workers=4: part 1 of the "
                     r"corpus .* holds no document; the corpus has 3 "
                     r"document\(s\) \(documents are separated by blank "
                     r"lines\)"):
    cpd._run_workers([path], tokenizer, {}, 1, 4, [str(tmp_path / "o")])


@pytest.mark.slow
def test_cli_single_document_one_line_error(tmp_path, case):
  path = _write(tmp_path, "one_doc.txt",
                "\n".join(case["input"]["input_file_lines"]) + "\n")
  proc = run_script(
      "create_pretraining_data.py",
      ["--input_file=" + path, "--output_file=" + str(tmp_path / "o"),
       "--vocab_file=" + data_path(*_UNCASED_VOCAB),
       "--max_seq_length=16", "--max_predictions_per_seq=3",
       "--dupe_factor=2"], timeout=600, env={"TF_CPP_MIN_LOG_LEVEL": "3"})
  assert proc.returncode == 1
  errors = [l for l in proc.stderr.splitlines() if l.startswith("error: ")]
  assert len(errors) == 1 and "Traceback" not in proc.stderr
  assert _TWO_DOCS in errors[0] and "blank lines" in errors[0]
  assert not os.path.exists(str(tmp_path / "o"))
