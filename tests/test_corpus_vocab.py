# coding=utf-8
"""Tests of learn_vocab.py: learning, extending and measuring vocabularies.

Learning needs Hugging Face `tokenizers` (the `beam` extra; skips without
it, fails under CI); extending and measuring need nothing more.
"""

import os

import pytest

from helpers import data_path
from helpers import import_or_skip
from helpers import REPO_ROOT
from helpers import run_script
from bert_tf.corpus import vocab as vocab_utils
import tokenization

_SAMPLE = os.path.join(REPO_ROOT, "sample_data", "pretrain_corpus.txt")


def _read(path):
  with open(path, encoding="utf-8") as f:
    return f.read().splitlines()


def test_learned_vocab_has_the_released_layout_and_tokenizes_its_text(
    tmp_path):
  import_or_skip("tokenizers", "pip install .[beam]")
  vocab = vocab_utils.learn([_SAMPLE], 1500, do_lower_case=True)
  assert len(vocab) == 1500 and len(set(vocab)) == 1500
  assert vocab[0] == "[PAD]"
  assert vocab[1:100] == ["[unused%d]" % k for k in range(99)]
  assert vocab[100:104] == ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
  pieces = vocab[104:]
  assert not any(p.startswith("[") and p.endswith("]") and len(p) > 2
                 for p in pieces)
  # FullTokenizer's pre-tokenization: lower-cased, punctuation alone.
  assert all(p == p.lower() for p in pieces)
  assert "," in pieces and "." in pieces and "the" in pieces
  assert any(p.startswith("##") for p in pieces)
  path = str(tmp_path / "vocab.txt")
  vocab_utils.write_vocab(path, vocab)
  assert _read(path) == vocab
  stats = vocab_utils.measure(path, True, [_SAMPLE])
  assert stats["unk_rate"] == 0.0  # Every character of the text is a piece.
  assert 1.0 <= stats["pieces_per_word"] < 2.0


def test_the_same_text_learns_the_same_vocab_on_every_run():
  import_or_skip("tokenizers", "pip install .[beam]")
  # Each trainer hashes with a new seed, in one process as across runs:
  # three runs here gave three vocabularies before (issue #34).
  runs = [vocab_utils.learn([_SAMPLE], 400, do_lower_case=True, num_unused=5)
          for _ in range(3)]
  assert runs[0] == runs[1] == runs[2]
  singles = [t for t in runs[0][10:] if len(t) == 1]
  assert runs[0][10:10 + len(singles)] == singles  # Characters first.


def test_cjk_characters_are_learned_alone_and_cased_keeps_case():
  import_or_skip("tokenizers", "pip install .[beam]")
  path = data_path("conformance", "pretraining_data", "zh_sample.txt")
  vocab = vocab_utils.learn([path], 300, do_lower_case=False, num_unused=3)
  assert vocab[:8] == ["[PAD]", "[unused0]", "[unused1]", "[unused2]",
                       "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
  cjk = [p for p in vocab[8:] if any(0x4E00 <= ord(c) <= 0x9FFF for c in p)]
  assert cjk and all(len(p.replace("##", "")) == 1 for p in cjk)


def test_too_small_a_size_is_refused():
  with pytest.raises(ValueError, match="--vocab_size is 104; expected more "
                     "than the 104"):
    vocab_utils.learn([_SAMPLE], 104, True)


def test_extra_tokens_fill_unused_slots_and_keep_every_other_id():
  vocab = ["[PAD]", "[unused0]", "[unused1]", "[UNK]", "the", "[unused2]",
           "café"]
  new, added, skipped = vocab_utils.add_extra_tokens(
      vocab, [(1, "HbA1c"), (2, "the"), (3, "Naïve"), (4, "hba1c")],
      do_lower_case=True)
  assert new == ["[PAD]", "hba1c", "naive", "[UNK]", "the", "[unused2]",
                 "café"]
  assert added == ["hba1c", "naive"] and skipped == ["the", "hba1c"]
  with pytest.raises(ValueError, match=r"line 2: 'e-mail' is 3 words"):
    vocab_utils.add_extra_tokens(vocab, [(1, "ok"), (2, "e-mail")], True)
  with pytest.raises(ValueError, match="more new words than the "
                     "vocabulary's 3 \\[unused\\*\\] slots \\(line 4"):
    vocab_utils.add_extra_tokens(vocab, [(1, "a1"), (2, "b1"), (3, "c1"),
                                         (4, "d1")], True)


def test_measure_counts_pieces_and_unknown_words(tmp_path):
  vocab = tmp_path / "v.txt"
  vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
                              "un", "##able", "able", "."]) + "\n",
                   encoding="utf-8")
  text = tmp_path / "t.txt"
  text.write_text("Unable able.\nxyz\n", encoding="utf-8")
  stats = vocab_utils.measure(str(vocab), True, [str(text)])
  # unable -> un ##able; able; . ; xyz -> [UNK]
  assert stats == {"words": 4, "pieces": 5, "pieces_per_word": 1.25,
                   "unk_rate": 0.25}


@pytest.mark.e2e
@pytest.mark.slow
def test_cli_extra_tokens_keeps_ids_and_tokenizer_uses_the_words(tmp_path):
  released = data_path("conformance", "pretraining_data", "vocab.txt")
  extra = tmp_path / "words.txt"
  extra.write_text("Electrocardiogram\n\nhba1c\n", encoding="utf-8")
  out = str(tmp_path / "vocab.txt")
  proc = run_script("learn_vocab.py", ["--vocab_file=" + released,
                                       "--extra_tokens=" + str(extra),
                                       "--output_file=" + out])
  assert proc.returncode == 0, proc.stderr[-3000:]
  before, after = _read(released), _read(out)
  changed = [k for k, (a, b) in enumerate(zip(before, after)) if a != b]
  assert len(after) == len(before) and len(changed) == 2
  assert all(before[k].startswith("[unused") for k in changed)
  tokenizer = tokenization.FullTokenizer(out, do_lower_case=True)
  assert tokenizer.tokenize("An electrocardiogram") == ["an",
                                                        "electrocardiogram"]
  bad = run_script("learn_vocab.py", ["--extra_tokens=" + str(extra),
                                      "--output_file=" + out])
  assert bad.stderr.strip().splitlines()[-1] == (
      "error: --extra_tokens: needs --vocab_file, the vocabulary whose "
      "[unused*] slots take the words")
