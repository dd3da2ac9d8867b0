"""Tests for tokenization.py: golden vectors, vocab reading, case checks, caches.

The golden vectors (`conformance/tokenization/*.jsonl`, produced by the
original release) are checked row by row for basic tokens, WordPiece tokens and
ids, with the real uncased, cased and Chinese vocabularies. A plain,
unoptimised statement of the algorithm (`_plain_*` below, written from SPEC §2)
is the oracle for randomised tests of the fast paths.
"""
import ast
import gzip
import json
import logging
import os
import random
import shutil
import subprocess
import sys
import unicodedata

import pytest

from helpers import data_path
from helpers import import_or_skip
from helpers import REPO_ROOT
from helpers import skip_or_fail
import tokenization

_CASE_FILES = {
    "uncased": ("cases.jsonl", "vocab.txt"),
    "cased": ("cases_cased.jsonl", "vocab_cased.txt"),
    "chinese": ("cases_chinese.jsonl", "vocab_chinese.txt"),
}


@pytest.fixture(scope="module")
def golden():
  """Loads each vocab once: {name: (rows, {do_lower_case: FullTokenizer})}."""
  loaded = {}
  for name, (cases_file, vocab_file) in _CASE_FILES.items():
    vocab_path = data_path("conformance", "tokenization", vocab_file)
    with open(data_path("conformance", "tokenization", cases_file),
              encoding="utf-8") as f:
      rows = [json.loads(line) for line in f]
    tokenizers = {lower: tokenization.FullTokenizer(vocab_path, lower)
                  for lower in (True, False)}
    loaded[name] = (rows, tokenizers)
  return loaded


@pytest.mark.parametrize("do_lower_case", [True, False])
@pytest.mark.parametrize("name", sorted(_CASE_FILES))
def test_golden_rows_match_reference_exactly(golden, name, do_lower_case):
  rows, tokenizers = golden[name]
  tokenizer = tokenizers[do_lower_case]
  basic = tokenization.BasicTokenizer(do_lower_case=do_lower_case)
  rows = [r for r in rows if r["do_lower_case"] == do_lower_case]
  assert len(rows) == 630
  failures = []
  for row in rows:
    tokens = tokenizer.tokenize(row["text"])
    got = (basic.tokenize(row["text"]), tokens,
           tokenizer.convert_tokens_to_ids(tokens))
    want = (row["basic_tokens"], row["tokens"], row["ids"])
    if got != want:
      failures.append("id %d %r: got %r want %r" % (row["id"], row["text"][:40],
                                                    got, want))
  if failures and unicodedata.unidata_version != "14.0.0":
    skip_or_fail("%d rows differ under unicodedata %s (vectors need 14.0.0)" %
                 (len(failures), unicodedata.unidata_version))
  assert not failures, "%d rows differ:\n%s" % (len(failures),
                                                "\n".join(failures[:10]))


def test_golden_ids_round_trip_through_inv_vocab(golden):
  rows, tokenizers = golden["uncased"]
  tokenizer = tokenizers[True]
  for row in rows[:200]:
    assert tokenizer.convert_ids_to_tokens(row["ids"]) == row["tokens"]


# ---------------------------------------------------------------------------
# load_vocab


def _write(tmp_path, data, name="vocab.txt"):
  path = tmp_path / name
  path.write_bytes(data)
  return str(path)


def test_load_vocab_ids_are_line_numbers_in_file_order(tmp_path):
  vocab = tokenization.load_vocab(_write(tmp_path, b"[PAD]\n[UNK]\nhello\n##s\n"))
  assert list(vocab.items()) == [("[PAD]", 0), ("[UNK]", 1), ("hello", 2),
                                 ("##s", 3)]


def test_load_vocab_line_of_u2028_becomes_empty_token(tmp_path):
  data = "a\n\u2028\nb\n".encode("utf-8")
  vocab = tokenization.load_vocab(_write(tmp_path, data))
  assert list(vocab.items()) == [("a", 0), ("", 1), ("b", 2)]


def test_load_vocab_lines_end_at_newline_only(tmp_path):
  # U+2028, U+0085 and form feed inside a line do not end it.
  data = "x\u2028y\nx\x85y\nx\x0cy\nx\u2029y\n".encode("utf-8")
  vocab = tokenization.load_vocab(_write(tmp_path, data))
  assert list(vocab) == ["x\u2028y", "x\x85y", "x\x0cy", "x\u2029y"]


def test_load_vocab_removes_carriage_returns(tmp_path):
  vocab = tokenization.load_vocab(_write(tmp_path, b"a\r\nb\rc\r\n\r\nd"))
  assert list(vocab.items()) == [("a", 0), ("bc", 1), ("", 2), ("d", 3)]


def test_load_vocab_last_line_without_newline_is_kept(tmp_path):
  vocab = tokenization.load_vocab(_write(tmp_path, b"a\nb"))
  assert list(vocab.items()) == [("a", 0), ("b", 1)]


def test_load_vocab_duplicate_keeps_first_position_takes_later_id(tmp_path):
  vocab = tokenization.load_vocab(_write(tmp_path, b"a\nb\na\nc\n"))
  assert list(vocab.items()) == [("a", 2), ("b", 1), ("c", 3)]
  tokenizer = tokenization.FullTokenizer(_write(tmp_path, b"a\nb\na\nc\n", "v2"))
  assert tokenizer.inv_vocab == {2: "a", 1: "b", 3: "c"}


def test_load_vocab_strips_each_line(tmp_path):
  vocab = tokenization.load_vocab(_write(tmp_path, b" a \n\tb\n\n"))
  assert list(vocab.items()) == [("a", 0), ("b", 1), ("", 2)]


def test_load_vocab_ignores_invalid_utf8_bytes(tmp_path):
  vocab = tokenization.load_vocab(_write(tmp_path, b"a\xffb\n\xc3\xa9\n"))
  assert list(vocab) == ["ab", "\u00e9"]


def test_load_vocab_counts_dropped_bytes_in_one_warning(tmp_path, caplog):
  caplog.set_level(logging.WARNING)
  path = _write(tmp_path, "caf\u00e9\nna\u00efve\nplain\r\n".encode("latin-1"))
  assert list(tokenization.load_vocab(path)) == ["caf", "nave", "plain"]
  warnings = [r.getMessage() for r in caplog.records
              if "not UTF-8" in r.getMessage()]
  assert len(warnings) == 1
  assert "dropped 2 bytes that are not UTF-8, on 2 lines" in warnings[0]


def test_load_vocab_refuses_directories_and_compressed_files(tmp_path):
  with pytest.raises(ValueError, match="is a directory; expected a text file"):
    tokenization.load_vocab(str(tmp_path))
  path = str(tmp_path / "vocab.txt.gz")
  with gzip.open(path, "wb") as f:
    f.write(b"[PAD]\n[UNK]\n" * 50)
  with pytest.raises(ValueError, match="vocab.txt.gz is a gzip file"):
    tokenization.load_vocab(path)
  path = _write(tmp_path, b"\x00" * 64 + b"a\n", "nul.txt")
  with pytest.raises(ValueError, match="nul.txt is a binary file"):
    tokenization.load_vocab(path)


def test_load_vocab_missing_file_names_path(tmp_path):
  path = str(tmp_path / "no_such_vocab.txt")
  with pytest.raises(FileNotFoundError, match="no_such_vocab.txt"):
    tokenization.load_vocab(path)
  with pytest.raises(FileNotFoundError, match="no_such_vocab.txt"):
    tokenization.FullTokenizer(path)


def test_load_vocab_empty_file_names_path(tmp_path):
  path = _write(tmp_path, b"", "empty_vocab.txt")
  with pytest.raises(ValueError, match="empty_vocab.txt"):
    tokenization.load_vocab(path)


def test_chinese_vocab_u2028_line_is_empty_token():
  path = data_path("conformance", "tokenization", "vocab_chinese.txt")
  with open(path, "rb") as f:
    lines = f.read().split(b"\n")
  line_no = lines.index("\u2028".encode("utf-8"))
  vocab = tokenization.load_vocab(path)
  assert vocab[""] == line_no
  assert len(vocab) == 21128


# ---------------------------------------------------------------------------
# validate_case_matches_checkpoint

_LOWER = ["uncased_L-24_H-1024_A-16", "uncased_L-12_H-768_A-12",
          "multilingual_L-12_H-768_A-12", "chinese_L-12_H-768_A-12"]
_CASED = ["cased_L-12_H-768_A-12", "cased_L-24_H-1024_A-16",
          "multi_cased_L-12_H-768_A-12"]
_EXTRA_LOWER = (["wwm_uncased_L-24_H-1024_A-16"] +
                ["uncased_L-%d_H-%d_A-%d" % (l, h, h // 64)
                 for l in (2, 4, 6, 8, 10, 12) for h in (128, 256, 512, 768)])
_EXTRA_CASED = ["wwm_cased_L-24_H-1024_A-16"]


@pytest.mark.parametrize("name", _LOWER + _EXTRA_LOWER)
def test_validate_lower_cased_model_needs_do_lower_case(name):
  path = "gs://bucket/models/%s/bert_model.ckpt" % name
  tokenization.validate_case_matches_checkpoint(True, path)
  with pytest.raises(ValueError, match="--do_lower_case=True") as err:
    tokenization.validate_case_matches_checkpoint(False, path)
  assert name in str(err.value)


def test_validate_checks_checkpoint_file_suffixes_like_reference():
  with pytest.raises(ValueError):
    tokenization.validate_case_matches_checkpoint(
        True, "/m/cased_L-12_H-768_A-12/bert_model.ckpt.index")


@pytest.mark.parametrize("name", _CASED + _EXTRA_CASED)
def test_validate_cased_model_needs_no_lower_case(name):
  path = "models/%s/bert_model.ckpt" % name
  tokenization.validate_case_matches_checkpoint(False, path)
  with pytest.raises(ValueError, match="--do_lower_case=False") as err:
    tokenization.validate_case_matches_checkpoint(True, path)
  assert name in str(err.value)


@pytest.mark.parametrize("do_lower_case", [True, False])
@pytest.mark.parametrize("path", [
    None, "", "models/my_cased_model/bert_model.ckpt",
    "models/cased_L-12_H-768_A-12/model.ckpt-1000",
    "models/uncased_L-12_H-768_A-12/model.ckpt-1000",
    "bert_model.ckpt", "uncased_L-12_H-768_A-12"])
def test_validate_unknown_or_unchecked_paths_pass(path, do_lower_case):
  tokenization.validate_case_matches_checkpoint(do_lower_case, path)


# ---------------------------------------------------------------------------
# convert_to_unicode, printable_text, whitespace_tokenize, convert_by_vocab


@pytest.mark.parametrize("fn", [tokenization.convert_to_unicode,
                                tokenization.printable_text])
def test_text_conversion_str_bytes_and_other(fn):
  assert fn("caf\u00e9") == "caf\u00e9"
  assert fn("caf\u00e9".encode("utf-8")) == "caf\u00e9"
  assert fn(b"a\xffb\xc3") == "ab"
  for bad in (1, None, ["a"], bytearray(b"a")):
    with pytest.raises(ValueError, match="Unsupported string type"):
      fn(bad)


def test_tokenizers_reject_non_text():
  with pytest.raises(ValueError):
    tokenization.BasicTokenizer().tokenize(3)
  with pytest.raises(ValueError):
    tokenization.WordpieceTokenizer({"a": 0}).tokenize(None)


def test_tokenizers_accept_utf8_bytes(tmp_path):
  tokenizer = tokenization.FullTokenizer(_write(tmp_path, b"[UNK]\ncafe\n"))
  assert tokenizer.tokenize("Caf\u00e9".encode("utf-8")) == ["cafe"]


def test_whitespace_tokenize_uses_str_split():
  assert tokenization.whitespace_tokenize("  a\u2028b\u3000c\x0bd ") == [
      "a", "b", "c", "d"]
  assert tokenization.whitespace_tokenize(" \t\n") == []


def test_convert_by_vocab_unknown_token_raises_key_error():
  with pytest.raises(KeyError):
    tokenization.convert_tokens_to_ids({"a": 0}, ["a", "b"])
  assert tokenization.convert_ids_to_tokens({0: "a"}, [0, 0]) == ["a", "a"]


# ---------------------------------------------------------------------------
# WordPiece


def test_wordpiece_splits_greedy_longest_match_first():
  vocab = {t: i for i, t in enumerate(
      ["[UNK]", "un", "##want", "##ed", "runn", "##ing", "want", "wa"])}
  wp = tokenization.WordpieceTokenizer(vocab)
  assert wp.tokenize("unwanted running") == ["un", "##want", "##ed", "runn",
                                             "##ing"]
  assert wp.tokenize("unwantedX running") == ["[UNK]", "runn", "##ing"]
  assert wp.tokenize("") == []


def test_wordpiece_splits_unknown_word_to_unk():
  wp = tokenization.WordpieceTokenizer({"a": 0}, unk_token="<oov>")
  assert wp.tokenize("ab a") == ["<oov>", "a"]


@pytest.mark.parametrize("limit", [1, 5, 200])
def test_wordpiece_max_input_chars_per_word_boundary(limit):
  vocab = {"[UNK]": 0, "a": 1, "##a": 2}
  wp = tokenization.WordpieceTokenizer(vocab, max_input_chars_per_word=limit)
  assert wp.tokenize("a" * limit) == ["a"] + ["##a"] * (limit - 1)
  assert wp.tokenize("a" * (limit + 1)) == ["[UNK]"]
  # Code points are counted, not UTF-8 bytes or UTF-16 units.
  vocab.update({"\U0001F600": 3, "##\U0001F600": 4})
  assert wp.tokenize("\U0001F600" * limit)[0] == "\U0001F600"


def test_cache_does_not_leak_between_tokenizers(tmp_path):
  small = tokenization.FullTokenizer(_write(tmp_path, b"[UNK]\nplay\n##ing\n", "s"))
  large = tokenization.FullTokenizer(
      _write(tmp_path, b"[UNK]\nplay\n##ing\nplaying\n", "l"))
  cased = tokenization.FullTokenizer(
      _write(tmp_path, b"[UNK]\nplay\n##ing\nPlaying\n", "c"), do_lower_case=False)
  for _ in range(2):
    assert small.tokenize("Playing playing") == ["play", "##ing"] * 2
    assert large.tokenize("Playing playing") == ["playing"] * 2
    assert cased.tokenize("Playing playing") == ["Playing", "play", "##ing"]
    assert small.tokenize("Pl\u00e4ying") == ["play", "##ing"]
    assert cased.tokenize("Pl\u00e4ying") == ["[UNK]"]


def test_cache_follows_changes_to_vocab_and_settings():
  vocab = {"[UNK]": 0, "a": 1}
  wp = tokenization.WordpieceTokenizer(vocab)
  assert wp.tokenize("ab") == ["[UNK]"]
  vocab["##b"] = 2
  assert wp.tokenize("ab") == ["a", "##b"]
  wp.max_input_chars_per_word = 1
  assert wp.tokenize("ab") == ["[UNK]"]
  basic = tokenization.BasicTokenizer(do_lower_case=True)
  assert basic.tokenize("\u00c9t\u00e9") == ["ete"]
  basic.do_lower_case = False
  assert basic.tokenize("\u00c9t\u00e9") == ["\u00c9t\u00e9"]


def test_cache_is_bounded(monkeypatch):
  monkeypatch.setattr(tokenization, "_CACHE_MAX_ENTRIES", 8)
  vocab = {"[UNK]": 0, "a": 1, "##a": 2}
  wp = tokenization.WordpieceTokenizer(vocab)
  words = ["a" * n for n in range(1, 30)]
  assert wp.tokenize(" ".join(words)) == [p for n in range(1, 30)
                                          for p in ["a"] + ["##a"] * (n - 1)]
  assert len(wp._cache) <= 8  # pylint: disable=protected-access
  basic = tokenization.BasicTokenizer()
  basic.tokenize(" ".join("\u00e9%d" % i for i in range(30)))
  assert len(basic._word_cache) <= 8  # pylint: disable=protected-access


# ---------------------------------------------------------------------------
# Fast paths against a plain statement of the algorithm (SPEC §2).


def _plain_basic(text, lower):
  """Character-by-character basic tokenization, as SPEC §2 words it."""
  chars = []
  for c in text:
    cat = unicodedata.category(c)
    if c in "\x00\ufffd" or (c not in "\t\n\r" and cat in ("Cc", "Cf")):
      continue
    if c in " \t\n\r" or cat == "Zs":
      chars.append(" ")
    elif any(a <= ord(c) <= b for a, b in tokenization._CJK_RANGES):  # pylint: disable=protected-access
      chars.append(" %s " % c)
    else:
      chars.append(c)
  split = []
  for token in "".join(chars).split():
    if lower:
      token = "".join(c for c in unicodedata.normalize("NFD", token.lower())
                      if unicodedata.category(c) != "Mn")
    groups = []
    new_word = True
    for c in token:
      cp = ord(c)
      if (33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or
          123 <= cp <= 126 or unicodedata.category(c).startswith("P")):
        groups.append(c)
        new_word = True
      else:
        if new_word:
          groups.append("")
        groups[-1] += c
        new_word = False
    split.extend(groups)
  return " ".join(split).split()


def _plain_wordpiece(word, vocab, limit=200):
  if len(word) > limit:
    return ["[UNK]"]
  pieces, start = [], 0
  while start < len(word):
    for end in range(len(word), start, -1):
      piece = ("##" if start else "") + word[start:end]
      if piece in vocab:
        break
    else:
      return ["[UNK]"]
    pieces.append(piece)
    start = end
  return pieces


_POOL = ("aAbZz09 \t\n\r\x00\x0b\x0c\x1f\x7f\x85\xa0\xad\u200b\u2028\u2029"
         "\u3000\ufeff\ufffd.,!?$+<^~`'\"-_()[]{}\u00e9\u00c9e\u0301\u0130\u00df"
         "\u1e9e\ufb01\u03a3\u03c2\u4e00\u4e16\u9fff\u3400\uf900\u3042\u30a2"
         "\uac00\ud55c\u0627\u064e\u05d0\u0915\u093f\u0e01\u0e31\u3001\u300c"
         "\u2014\u2026\u00bf\U0001F600\U0001F3FB\u200d\ufe0f\U00020000\U0002F800"
         "\ue000\U000e0001\u0378\ud800")


def test_fast_paths_match_plain_algorithm_on_random_text(golden):
  rng = random.Random(1234)
  _, tokenizers = golden["uncased"]
  for lower in (True, False):
    basic = tokenization.BasicTokenizer(lower)
    tokenizer = tokenizers[lower]
    for _ in range(1500):
      text = "".join(rng.choice(_POOL) for _ in range(rng.randint(0, 30)))
      want = _plain_basic(text, lower)
      assert basic.tokenize(text) == want, repr(text)
      assert tokenizer.tokenize(text) == [
          p for w in want for p in _plain_wordpiece(w, tokenizer.vocab)], repr(text)


def test_ascii_fast_path_matches_plain_algorithm_on_every_ascii_char():
  text = "".join(chr(cp) + "x" for cp in range(128))
  for lower in (True, False):
    assert tokenization.BasicTokenizer(lower).tokenize(text) == _plain_basic(
        text, lower)
    # The same characters inside non-ASCII text take the general path.
    assert tokenization.BasicTokenizer(lower).tokenize(text + "\u00e9") == (
        _plain_basic(text + "\u00e9", lower))


def test_module_imports_without_tensorflow():
  code = ("import sys, tokenization; "
          "tokenization.BasicTokenizer().tokenize('x'); "
          "assert 'tensorflow' not in sys.modules")
  subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, check=True)


def test_module_imports_only_the_standard_library_six_and_tensorflow():
  with open(os.path.join(REPO_ROOT, "tokenization.py"), encoding="utf-8") as f:
    tree = ast.parse(f.read())
  imported = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      imported.update(alias.name.split(".")[0] for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
      assert node.level == 0, "relative import on line %d" % node.lineno
      imported.add(node.module.split(".")[0])
  assert imported, "no imports found"
  allowed = set(sys.stdlib_module_names) | {"six", "tensorflow"}
  assert imported <= allowed, sorted(imported - allowed)


def test_module_works_copied_alone_into_another_folder(tmp_path):
  shutil.copy(os.path.join(REPO_ROOT, "tokenization.py"), str(tmp_path))
  vocab = tmp_path / "vocab.txt"
  vocab.write_bytes(b"[UNK]\r\nhello\n\xe2\x80\xa8\n##s\nhello\nworld")
  code = ("import sys; sys.path.insert(0, sys.argv[1]); "
          "import tokenization; "
          "assert tokenization.__file__.startswith(sys.argv[1]); "
          "t = tokenization.FullTokenizer(sys.argv[2]); "
          "assert list(t.vocab.items()) == [('[UNK]', 0), ('hello', 4), "
          "('', 2), ('##s', 3), ('world', 5)], t.vocab; "
          "assert t.tokenize('Hellos, world!') == "
          "['hello', '##s', '[UNK]', 'world', '[UNK]']; "
          "assert 'bert_tf' not in sys.modules")
  # -I: isolated mode (no PYTHONPATH, no user site, not even the current
  # folder), so the checkout is not on sys.path; only the copy's folder is.
  subprocess.run([sys.executable, "-I", "-c", code, str(tmp_path),
                  str(vocab)], cwd=str(tmp_path), check=True, timeout=120)


def test_full_tokenizer_honours_overridden_wordpiece_tokenize(tmp_path):
  class Upper(tokenization.WordpieceTokenizer):

    def tokenize(self, text):
      return [text.upper()]

  tokenizer = tokenization.FullTokenizer(_write(tmp_path, b"[UNK]\na\n"))
  tokenizer.wordpiece_tokenizer = Upper(tokenizer.vocab)
  assert tokenizer.tokenize("a b,") == ["A", "B", ","]


def test_load_vocab_ids_follow_tf_gfile_readline(tmp_path):
  tf = import_or_skip("tensorflow.compat.v1", "./setup.sh")
  data = ("a\r\nb\u2028c\n\x85d\x0ce\r\rf\n\n \u3000\n\u00e9\r").encode("utf-8")
  path = _write(tmp_path, data)
  want = []
  with tf.io.gfile.GFile(path, "r") as reader:
    while True:
      line = reader.readline()
      if not line:
        break
      want.append(line)
  want_vocab = {}
  for index, line in enumerate(want):
    want_vocab[line.strip()] = index
  assert list(tokenization.load_vocab(path).items()) == list(want_vocab.items())
