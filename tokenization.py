# coding=utf-8
"""WordPiece tokenization, output-identical to the BERT research release.

Pure Python and standalone (the standard library; TensorFlow only for a
vocabulary on a remote file system), so the file can be copied alone.
Public names are the reference's (see `__all__`).

Pipeline of `FullTokenizer.tokenize` (Devlin et al. 2018, §3 / appendix A.2 and
the released `tokenization.py` behaviour):

  1. clean: drop U+0000, U+FFFD and Cc/Cf characters; every whitespace
     character becomes a space;
  2. put spaces around CJK Unified Ideographs;
  3. split on whitespace (`str.split()`);
  4. per word: optionally lowercase + NFD + drop Mn marks, then split off every
     punctuation character;
  5. WordPiece: greedy longest-match-first against the vocabulary.

Speed, same output: ASCII texts take one `str.translate` and one `split`;
other texts a lazily filled per-character table and a per-word cache;
WordPiece results are cached per word, and no substring longer than the
longest vocabulary entry is tried.
"""

import collections
import logging
import os
import re
import unicodedata

__all__ = [
    "FullTokenizer", "BasicTokenizer", "WordpieceTokenizer", "load_vocab",
    "convert_by_vocab", "convert_tokens_to_ids", "convert_ids_to_tokens",
    "whitespace_tokenize", "convert_to_unicode", "printable_text",
    "validate_case_matches_checkpoint",
]

# The standard library's logging: records reach absl's handler (the scripts'
# log format) through the root logger, and this file needs nothing else.
_LOGGER = logging.getLogger(__name__)

# Bound on every per-instance cache (entries); a full cache is simply cleared.
_CACHE_MAX_ENTRIES = 1 << 16

# CJK Unified Ideograph blocks padded with spaces (inclusive ranges). Hangul,
# Hiragana and Katakana are not included. Kept for parity: these are exactly the
# ranges the released checkpoints were pre-trained with (later extensions F and
# G, U+2CEB0 and U+30000 on, are not padded; unassigned code points inside the
# blocks are).
_CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)

# Known released checkpoints (folder name -> was it pre-trained lower-cased).
_LOWER_CASED_MODELS = frozenset([
    "uncased_L-24_H-1024_A-16",
    "uncased_L-12_H-768_A-12",
    "multilingual_L-12_H-768_A-12",
    "chinese_L-12_H-768_A-12",
    # Extension: whole-word-masking and the 24 small BERTs (Turc et al. 2019).
    "wwm_uncased_L-24_H-1024_A-16",
] + ["uncased_L-%d_H-%d_A-%d" % (layers, hidden, hidden // 64)
     for layers in (2, 4, 6, 8, 10, 12)
     for hidden in (128, 256, 512, 768)])
_CASED_MODELS = frozenset([
    "cased_L-12_H-768_A-12",
    "cased_L-24_H-1024_A-16",
    "multi_cased_L-12_H-768_A-12",
    # Extension: whole-word masking.
    "wwm_cased_L-24_H-1024_A-16",
])


def validate_case_matches_checkpoint(do_lower_case, init_checkpoint):
  """Checks that `do_lower_case` agrees with a released checkpoint's casing.

  Only paths holding `<name>/bert_model.ckpt` are checked (anything may follow,
  such as TF's `.index` suffix), `<name>` being the folder just above; the check
  applies when `<name>` is a known Google release: the seven of the original
  README, plus (an extension) `wwm_uncased_L-24_H-1024_A-16`,
  `wwm_cased_L-24_H-1024_A-16` and the small BERTs `uncased_L-{2..12}_H-*_A-*`.
  `None`, empty paths, other folder names and other file names
  (`model.ckpt-1000`) pass silently. Matches the reference's heuristic.

  Args:
    do_lower_case: bool, the `--do_lower_case` flag.
    init_checkpoint: str or None, the `--init_checkpoint` flag.

  Raises:
    ValueError: the checkpoint is a known release whose casing contradicts
      `do_lower_case`; the message says which flag value to use.
  """
  if not init_checkpoint:
    return
  match = re.match(r"^.*?([A-Za-z0-9_-]+)/bert_model\.ckpt", init_checkpoint)
  if match is None:
    return
  model_name = match.group(1)
  if model_name in _LOWER_CASED_MODELS and not do_lower_case:
    casing, wanted = "lower-cased", True
  elif model_name in _CASED_MODELS and do_lower_case:
    casing, wanted = "cased", False
  else:
    return
  raise ValueError(
      "--do_lower_case=%s does not match --init_checkpoint=%s: %s is a %s "
      "model, so pass --do_lower_case=%s (the tokenizer must match how the "
      "model was pre-trained)." % (not wanted, init_checkpoint, model_name,
                                   casing, wanted))


def convert_to_unicode(text):
  """Returns `text` as `str`; bytes are decoded as UTF-8 ignoring bad bytes.

  Raises:
    ValueError: `text` is neither `str` nor `bytes`.
  """
  if isinstance(text, str):
    return text
  if isinstance(text, bytes):
    return text.decode("utf-8", "ignore")
  raise ValueError("Unsupported string type: %s (expected str or bytes)" %
                   type(text).__name__)


def printable_text(text):
  """Returns `text` as a `str` fit for printing/logging (same as Python 3 str).

  Raises:
    ValueError: `text` is neither `str` nor `bytes`.
  """
  return convert_to_unicode(text)


# Compressed or binary files refused as a vocabulary: leading magic bytes.
_BINARY_MAGIC = ((b"\x1f\x8b", "gzip"), (b"BZh", "bzip2"),
                 (b"\xfd7zXZ\x00", "xz"), (b"PK\x03\x04", "zip"))
# How much of the file is looked at for NUL bytes.
_SNIFF_BYTES = 8192


def _gfile():
  """`tf.io.gfile`, for remote paths only."""
  # Imported here, not at the top: a local vocabulary needs only the standard
  # library, and `import tokenization` stays free of TensorFlow.
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  return tf.io.gfile


def _read_file_bytes(path):
  """The bytes of `path` (local or `tf.io.gfile`).

  Raises:
    FileNotFoundError: `path` does not exist.
    ValueError: a directory, or a compressed or binary file.
  """
  remote = "://" in path
  if not (_gfile().exists(path) if remote else os.path.exists(path)):
    raise FileNotFoundError("%s: no such file" % path)
  if _gfile().isdir(path) if remote else os.path.isdir(path):
    raise ValueError("%s is a directory; expected a text file" % path)
  with (_gfile().GFile(path, "rb") if remote else open(path, "rb")) as reader:
    data = reader.read()
  head = data[:_SNIFF_BYTES]
  for magic, kind in _BINARY_MAGIC:
    if head.startswith(magic) and (kind != "bzip2" or head[3:4].isdigit()):
      raise ValueError("%s is a %s file, not UTF-8 text; decompress it first" %
                       (path, kind))
  if head and head.count(b"\x00") * 10 >= len(head):
    raise ValueError("%s is a binary file (%d NUL bytes in its first %d), not "
                     "UTF-8 text" % (path, head.count(b"\x00"), len(head)))
  return data


def _read_lines(path):
  """Yields a text file's lines as `GFile.readline()` does (SPEC section
  2): ending at `\\n` only, `\\r` removed, invalid UTF-8 dropped (one
  warning), no empty last line. Raises as `_read_file_bytes`."""
  lines = _read_file_bytes(path).split(b"\n")
  last = lines.pop()  # After the final "\n": b"" unless the file lacks one.
  dropped_bytes = dropped_lines = 0
  for raw, ended in [(line, True) for line in lines] + [(last, False)]:
    text = raw.replace(b"\r", b"").decode("utf-8", "ignore")
    if not raw.isascii():
      lost = len(raw) - raw.count(b"\r") - len(text.encode("utf-8"))
      if lost:
        dropped_bytes += lost
        dropped_lines += 1
    if text or ended:
      yield text
  if dropped_bytes:
    _LOGGER.warning(
        "%s: dropped %d bytes that are not UTF-8, on %d lines (the "
        "reference's rule; a Latin-1 file? convert it with iconv -f latin1 "
        "-t utf-8)", path, dropped_bytes, dropped_lines)


def load_vocab(vocab_file):
  """Loads a WordPiece vocabulary: one token per line, id = 0-based line number.

  Lines are read as the reference reads them (`_read_lines`: they end at
  `\\n` only, `\\r` and invalid UTF-8 are dropped) and `str.strip()`-ed
  (so a line holding only U+2028 is the empty token ""). A token seen twice
  keeps its first position in the mapping and takes the later id (reference
  behaviour), with one warning naming the first such token and both of its
  lines.

  Args:
    vocab_file: str, path of the vocab file.

  Returns:
    `collections.OrderedDict` token (str) -> id (int), in file order.

  Raises:
    FileNotFoundError: the file does not exist.
    ValueError: the file holds no tokens, is a directory, or is compressed
      or binary.
  """
  vocab = collections.OrderedDict()
  duplicates = []
  for index, line in enumerate(_read_lines(vocab_file)):
    token = line.strip()
    if token in vocab:
      duplicates.append((token, vocab[token], index))
    vocab[token] = index
  if duplicates:
    token, first, later = duplicates[0]
    _LOGGER.warning("%s: %d tokens appear twice, such as %r on lines %d and "
                    "%d; each takes the id of its last line (as in the "
                    "reference)", vocab_file, len(duplicates), token,
                    first + 1, later + 1)
  if not vocab:
    raise ValueError("Vocabulary file is empty: %s (expected one token per "
                     "line)" % vocab_file)
  return vocab


def convert_by_vocab(vocab, items):
  """Maps each item through `vocab` (tokens -> ids or ids -> tokens).

  Raises:
    KeyError: an item is not in `vocab` (as the reference).
  """
  return [vocab[item] for item in items]


def convert_tokens_to_ids(vocab, tokens):
  """Returns the ids of `tokens` (list of str) under `vocab` (token -> id)."""
  return convert_by_vocab(vocab, tokens)


def convert_ids_to_tokens(inv_vocab, ids):
  """Returns the tokens of `ids` (list of int) under `inv_vocab` (id -> token)."""
  return convert_by_vocab(inv_vocab, ids)


def whitespace_tokenize(text):
  """`str.strip()` then `str.split()` (so U+2028/U+2029 also separate)."""
  text = text.strip()
  if not text:
    return []
  return text.split()


class FullTokenizer(object):
  """End-to-end tokenization: basic tokenization, then WordPiece."""

  def __init__(self, vocab_file, do_lower_case=True):
    """Loads the vocabulary and builds both stages.

    Args:
      vocab_file: str, path of the WordPiece vocab (one token per line).
      do_lower_case: bool, lowercase and strip accents (must match the
        checkpoint; see `validate_case_matches_checkpoint`).

    Raises:
      FileNotFoundError: the vocab file does not exist.
      ValueError: the vocab file is empty.
    """
    self.vocab = load_vocab(vocab_file)
    self.inv_vocab = {v: k for k, v in self.vocab.items()}
    self.basic_tokenizer = BasicTokenizer(do_lower_case=do_lower_case)
    self.wordpiece_tokenizer = WordpieceTokenizer(vocab=self.vocab)

  def tokenize(self, text):
    """Returns the WordPiece tokens (list of str) of `text` (str or bytes)."""
    words = self.basic_tokenizer.tokenize(text)
    wordpiece = self.wordpiece_tokenizer
    if getattr(type(wordpiece), "tokenize", None) is WordpieceTokenizer.tokenize:
      # Not overridden: skip the per-word str/whitespace checks.
      return wordpiece._tokenize_words(words)  # pylint: disable=protected-access
    return [piece for word in words for piece in wordpiece.tokenize(word)]

  def convert_tokens_to_ids(self, tokens):
    """Returns the ids (list of int) of `tokens`.

    Raises:
      KeyError: a token is not in the vocabulary.
    """
    return convert_by_vocab(self.vocab, tokens)

  def convert_ids_to_tokens(self, ids):
    """Returns the tokens (list of str) of `ids`.

    Raises:
      KeyError: an id is not in the vocabulary.
    """
    return convert_by_vocab(self.inv_vocab, ids)


# ---------------------------------------------------------------------------
# Character classes (reference definitions).


def _is_whitespace(char):
  """Space, tab, newline, CR and category Zs (U+2028/U+0085 are not)."""
  if char in " \t\n\r":
    return True
  return unicodedata.category(char) == "Zs"


def _is_control(char):
  """Categories Cc and Cf, except tab/newline/CR (Co, Cn, Cs are kept)."""
  # Kept for parity: VT, FF, U+0085 and zero-width characters are deleted, not
  # treated as spaces, so the words on either side are joined.
  if char in "\t\n\r":
    return False
  return unicodedata.category(char) in ("Cc", "Cf")


def _is_punctuation(char):
  """ASCII 33-47, 58-64, 91-96, 123-126 (so `$+<^~` too) or any category P*."""
  cp = ord(char)
  if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
    return True
  return unicodedata.category(char).startswith("P")


def _is_chinese_char(cp):
  """Is code point `cp` in one of the CJK Unified Ideograph blocks?"""
  for first, last in _CJK_RANGES:
    if first <= cp <= last:
      return True
  return False


def _clean_value(cp):
  """What steps 1-2 make of code point `cp`: None (dropped: U+0000, U+FFFD,
  Cc/Cf), " " (whitespace), " c " (CJK ideograph, padded) or `cp` itself."""
  char = chr(cp)
  if cp == 0 or cp == 0xFFFD or _is_control(char):
    return None
  if _is_whitespace(char):
    return " "
  if _is_chinese_char(cp):
    return " %s " % char
  return cp


class _CleanTable(dict):
  """`str.translate` table for steps 1-2 (`_clean_value`), filled lazily one
  code point at a time; each `BasicTokenizer` holds its own."""

  def __missing__(self, cp):
    value = _clean_value(cp)
    self[cp] = value
    return value


class _PunctTable(dict):
  """`str.translate` table padding every punctuation character with spaces,
  filled lazily; each `BasicTokenizer` holds its own."""

  def __missing__(self, cp):
    char = chr(cp)
    value = (" %s " % char) if _is_punctuation(char) else cp
    self[cp] = value
    return value


def _ascii_table(do_lower_case):
  """One-pass table for all-ASCII text: steps 1, 4 (lowercase, punctuation)."""
  table = {}
  for cp in range(128):
    char = chr(cp)
    value = _clean_value(cp)
    if isinstance(value, int):
      if _is_punctuation(char):
        value = " %s " % char
      elif do_lower_case:
        value = char.lower()
    table[cp] = value
  return table


# Built once and never changed: index 0 keeps case, index 1 lowercases.
_ASCII_TABLES = (_ascii_table(False), _ascii_table(True))


def _strip_accents(text):
  """NFD-normalizes `text` and drops combining marks (category Mn)."""
  text = unicodedata.normalize("NFD", text)
  if text.isascii():
    return text
  return "".join(c for c in text if unicodedata.category(c) != "Mn")


class BasicTokenizer(object):
  """Cleaning, CJK padding, whitespace and punctuation splitting, lowercasing."""

  def __init__(self, do_lower_case=True):
    """Builds the tokenizer.

    Args:
      do_lower_case: bool, lowercase and strip accents (NFD, drop Mn).
    """
    self.do_lower_case = do_lower_case
    self._word_cache = {}
    self._word_cache_lower = do_lower_case
    self._clean_table = _CleanTable()
    self._punct_table = _PunctTable()

  def tokenize(self, text):
    """Returns the basic tokens (list of str) of `text` (str or bytes).

    Raises:
      ValueError: `text` is neither str nor bytes.
    """
    text = convert_to_unicode(text)
    lower = bool(self.do_lower_case)
    if text.isascii():
      # ASCII has no CJK, no Mn marks and no non-ASCII punctuation or spaces.
      return text.translate(_ASCII_TABLES[lower]).split()
    if lower != self._word_cache_lower:
      self._word_cache = {}
      self._word_cache_lower = lower
    cache = self._word_cache
    output = []
    for word in text.translate(self._clean_table).split():
      tokens = cache.get(word)
      if tokens is None:
        tokens = self._split_word(word, lower)
        if len(cache) >= _CACHE_MAX_ENTRIES:
          cache.clear()
        cache[word] = tokens
      output.extend(tokens)
    return output

  def _split_word(self, word, lower):
    """Basic tokens (tuple) of one cleaned whitespace-free word."""
    if lower:
      # Kept for parity: lowercasing also strips accents (NFD, drop Mn), which
      # decomposes Hangul syllables into jamo; released uncased models use it.
      word = _strip_accents(word.lower())
    return tuple(word.translate(self._punct_table).split())


class WordpieceTokenizer(object):
  """Greedy longest-match-first WordPiece (Wu et al. 2016; BERT release)."""

  def __init__(self, vocab, unk_token="[UNK]", max_input_chars_per_word=200):
    """Builds the tokenizer; nothing is computed until the first call.

    Args:
      vocab: mapping token (str) -> id; treated as read-only (a change in its
        size or identity resets the cache).
      unk_token: str, emitted for a word that cannot be matched.
      max_input_chars_per_word: int, words longer than this many code points
        become `unk_token` (counted after basic tokenization).
    """
    self.vocab = vocab
    self.unk_token = unk_token
    self.max_input_chars_per_word = max_input_chars_per_word
    self._cache_key = None
    self._cache = {}
    self._max_first = 0
    self._max_later = 0

  def tokenize(self, text):
    """Returns the WordPiece tokens (list of str) of `text`.

    `text` is whitespace-split first; each word becomes its pieces, later
    pieces prefixed `##`, or one `unk_token` if it is too long or some
    position cannot be matched.

    Raises:
      ValueError: `text` is neither str nor bytes.
    """
    return self._tokenize_words(whitespace_tokenize(convert_to_unicode(text)))

  def _tokenize_words(self, words):
    """WordPiece tokens of a list of whitespace-free words (cached per word)."""
    key = (id(self.vocab), len(self.vocab), self.unk_token,
           self.max_input_chars_per_word)
    if key != self._cache_key:
      self._reset_cache(key)
    cache = self._cache
    output = []
    for word in words:
      pieces = cache.get(word)
      if pieces is None:
        pieces = self._split_word(word)
        if len(cache) >= _CACHE_MAX_ENTRIES:
          cache.clear()
        cache[word] = pieces
      output.extend(pieces)
    return output

  def _reset_cache(self, key):
    """Empties the cache and recomputes the longest vocab entry lengths."""
    self._cache_key = key
    self._cache = {}
    max_first = max_later = 0
    for token in self.vocab:
      if token.startswith("##"):
        max_later = max(max_later, len(token) - 2)
      max_first = max(max_first, len(token))
    self._max_first, self._max_later = max_first, max_later

  def _split_word(self, word):
    """Greedy longest-match-first pieces (tuple) of one word."""
    length = len(word)
    if length > self.max_input_chars_per_word:
      return (self.unk_token,)
    vocab = self.vocab
    pieces = []
    start = 0
    while start < length:
      # Substrings longer than any vocab entry cannot match: start below them.
      end = min(length, start + (self._max_later if start else self._max_first))
      while end > start:
        piece = word[start:end] if start == 0 else "##" + word[start:end]
        if piece in vocab:
          break
        end -= 1
      else:
        # Kept for parity: one unmatched position (e.g. an emoji glued to a
        # word, which is neither punctuation nor CJK) makes the whole word UNK.
        return (self.unk_token,)
      pieces.append(piece)
      start = end
    return tuple(pieces)
