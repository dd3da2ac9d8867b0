"""Whole-word masking: which positions are masked together.

`choose_whole_words` is `create_pretraining_data.py --do_whole_word_mask`'s
choice over `word_groups`. The rest is `--do_chinese_whole_word_mask`:
Chinese text tokenizes to one WordPiece token per character, so the
reference's whole-word masking (a `##` piece joins the word before it)
masks single characters. Here each line is also cut into words by jieba
(dictionary and HMM shipped in the package: nothing is downloaded), as in
the Chinese
BERT-wwm models (Cui et al. 2019, "Pre-Training with Whole Word Masking for
Chinese BERT"). A Chinese character token that continues the segmenter word
of the token just before it is returned as a `WordContinuation`: a `str`
subclass equal to the plain token (same hash, so the same vocabulary id).
The masking joins such a token to the group before it, as it joins `##`
pieces. The tokens, their ids and the records' layout are unchanged; only
which positions are masked together changes.

Only Chinese characters (the tokenizer's CJK ranges) take part: a segmenter
word that mixes them with Latin letters or digits (`T恤`) groups its Chinese
characters, and the Latin part is a word of its own (grouped by `##`).
"""

import importlib.util
import logging as std_logging
import tempfile
import warnings

from absl import logging

from bert_tf.tasks.pretraining import shuffle as pretraining_shuffle
import tokenization

__all__ = ["WordContinuation", "is_continuation", "is_chinese",
           "check_installed", "load_segmenter",
           "WordMarkingTokenizer", "word_groups", "choose_whole_words",
           "unmasked_tokens"]

# The extra that brings the segmenter (requirements-chinese.txt).
_INSTALL_HINT = ("install the chinese extra: ./setup.sh --chinese, or pip "
                 "install '.[chinese]' (jieba==0.42.1)")


class WordContinuation(str):
  """A Chinese character token continuing the segmenter word before it.

  Equal to, and hashed as, the plain token: vocabulary look-ups, records
  and comparisons see the plain token.
  """

  __slots__ = ()


def is_continuation(token):
  """Whether `token` (str) is a `WordContinuation` (a plain str is not)."""
  return isinstance(token, WordContinuation)


def _is_chinese_char(char):
  """The tokenizer's own CJK test, which makes a character its own token."""
  # pylint: disable-next=protected-access
  return tokenization._is_chinese_char(ord(char))


def is_chinese(text):
  """Whether `text` (str) is non-empty and all Chinese characters."""
  return bool(text) and all(_is_chinese_char(char) for char in text)


def _missing_message():
  return ("--do_chinese_whole_word_mask needs the jieba segmenter, which is "
          "not installed; " + _INSTALL_HINT)


def check_installed():
  """Raises ValueError (one line naming the extra) when jieba is missing.

  Looks the package up without importing it (no dictionary loaded).
  """
  if importlib.util.find_spec("jieba") is None:
    raise ValueError(_missing_message())


def load_segmenter():
  """A jieba `Tokenizer` with its shipped dictionary loaded.

  jieba keeps a cache of the parsed dictionary in the temporary folder
  (`jieba.cache`, written atomically); its debug lines are silenced, and a
  cache it cannot write (a full temporary folder) is one warning line, not
  jieba's traceback (printed twice).

  Returns:
    `jieba.Tokenizer`, whose `cut(text)` yields words (str) whose
    concatenation is `text`.

  Raises:
    ValueError: when jieba is not installed (one line naming the extra).
  """
  try:
    with warnings.catch_warnings():
      # jieba 0.42.1 imports the deprecated pkg_resources where present.
      warnings.simplefilter("ignore")
      # The chinese extra is optional: imported only when the flag is on.
      import jieba  # pylint: disable=g-import-not-at-top
  except ImportError:
    raise ValueError(_missing_message()) from None
  logger = std_logging.getLogger("jieba")
  logger.setLevel(std_logging.WARNING)
  failed_write = _FailedCacheWrite()
  logger.addFilter(failed_write)
  segmenter = jieba.Tokenizer()
  try:
    segmenter.initialize()
  finally:
    logger.removeFilter(failed_write)
  if failed_write.error is not None:
    logging.warning(
        "--do_chinese_whole_word_mask: jieba could not write its dictionary "
        "cache in %s (%s: %s); the dictionary is parsed again at each start",
        segmenter.tmp_dir or tempfile.gettempdir(),
        type(failed_write.error).__name__,
        " ".join(str(failed_write.error).split()))
  return segmenter


class _FailedCacheWrite(std_logging.Filter):
  """Drops jieba's report (with a traceback, printed by its own handler and
  again by the root logger's) that it could not write its dictionary cache
  (a full or read-only temporary folder); keeps the error for one warning.
  The dictionary itself is loaded all the same."""

  def __init__(self):
    super().__init__()
    self.error = None

  def filter(self, record):
    if record.exc_info and "cache" in record.getMessage():
      self.error = record.exc_info[1]
      return False
    return True


class WordMarkingTokenizer(object):
  """`tokenize(text)`: a tokenizer's tokens, continuations marked.

  The tokens are exactly `tokenizer.tokenize(text)` (basic tokenization,
  then WordPiece word by word); each Chinese character token whose
  character is in the same segmenter word as the previous token's
  character is a `WordContinuation`.
  """

  def __init__(self, tokenizer, segmenter=None):
    """Args:
      tokenizer: a `tokenization.FullTokenizer`.
      segmenter: object with `cut(text)` yielding words that cover `text`
        (default: `load_segmenter()`).

    Raises:
      ValueError: when jieba is needed and not installed.
    """
    self.vocab = tokenizer.vocab
    self._basic = tokenizer.basic_tokenizer
    self._wordpiece = tokenizer.wordpiece_tokenizer
    self._tokenizer = tokenizer
    self._segmenter = segmenter or load_segmenter()
    self._warned = False
    # One shared WordContinuation per character, as the plain tokens are
    # shared through the tokenizer's caches: a corpus holds millions.
    self._continuations = {}

  def tokenize(self, text):
    """The WordPiece tokens (list of str) of `text` (str or bytes)."""
    text = tokenization.convert_to_unicode(text)
    if text.isascii():  # No Chinese characters: nothing to mark.
      return self._tokenizer.tokenize(text)
    words = self._chinese_char_words(text)
    tokens = []
    used = 0  # Chinese character tokens so far.
    previous = None  # Segmenter word of the previous token, if Chinese.
    for basic in self._basic.tokenize(text):
      pieces = self._wordpiece.tokenize(basic)
      if len(basic) == 1 and _is_chinese_char(basic):
        word = words[used] if used < len(words) else None
        used += 1
        if word is not None and word == previous:
          piece = self._continuations.get(pieces[0])
          if piece is None:
            piece = self._continuations[pieces[0]] = WordContinuation(
                pieces[0])
          pieces = (piece,)
        previous = word
      else:
        previous = None
      tokens.extend(pieces)
    if used != len(words):
      # Not expected (the tokenizer makes each Chinese character a token);
      # the line keeps its tokens, each character masked on its own.
      if not self._warned:
        logging.warning("Chinese whole-word masking: the segmenter's and the "
                        "tokenizer's Chinese characters differ in %r; such "
                        "lines mask single characters", text[:80])
        self._warned = True
      return self._tokenizer.tokenize(text)
    return tokens

  def _chinese_char_words(self, text):
    """The segmenter word index of each Chinese character of `text`."""
    words = []
    for index, word in enumerate(self._segmenter.cut(text)):
      words.extend(index for char in word if _is_chinese_char(char))
    return words


def word_groups(tokens):
  """Groups of positions masked together (whole-word masking).

  A `##` piece joins the group before it, even across a `[SEP]` (the
  reference's rule, kept for parity); a `WordContinuation` joins it unless
  a `[CLS]` or `[SEP]` comes between (truncation may have cut its word's
  start off). `[CLS]` and `[SEP]` are in no group.

  Args:
    tokens: list of str, `[CLS] A [SEP] B [SEP]`.

  Returns:
    list of lists of int, in order.
  """
  groups = []
  for index, token in enumerate(tokens):
    if token == "[CLS]" or token == "[SEP]":
      continue
    # `type() is`, not a call: this runs for every token of every instance.
    if groups and (token.startswith("##") or (
        type(token) is WordContinuation and  # pylint: disable=unidiomatic-typecheck
        tokens[index - 1] != "[CLS]" and tokens[index - 1] != "[SEP]")):
      groups[-1].append(index)
    else:
      groups.append([index])
  return groups


def choose_whole_words(tokens, num_to_predict, rng):
  """Positions to mask, whole words at a time, in the order chosen.

  The `word_groups` are shuffled (`rng`, the reference's draws) and taken
  in turn, skipping any that would exceed `num_to_predict` (the
  reference's rule). The groups are disjoint, so the reference's "already
  covered" check never fires and is left out.

  Args:
    tokens: list of str, `[CLS] A [SEP] B [SEP]`.
    num_to_predict: int, the most positions to choose.
    rng: `random.Random`.

  Returns:
    list of int, at most `num_to_predict` positions, in the order chosen.
  """
  groups = word_groups(tokens)
  pretraining_shuffle.shuffle(groups, rng)
  chosen = []
  for group in groups:
    if len(chosen) >= num_to_predict:
      break
    if len(chosen) + len(group) <= num_to_predict:
      chosen.extend(group)
  return chosen


def unmasked_tokens(instance):
  """An instance's tokens before masking (for checks and statistics).

  Args:
    instance: a `TrainingInstance` (`tokens`, `masked_lm_positions`,
      `masked_lm_labels`).

  Returns:
    list of str: `tokens` with each label put back at its position (a
    label keeps its `WordContinuation` mark, so `word_groups` of the result
    are the groups the masking chose from).
  """
  tokens = list(instance.tokens)
  for position, label in zip(instance.masked_lm_positions,
                             instance.masked_lm_labels):
    tokens[position] = label
  return tokens
