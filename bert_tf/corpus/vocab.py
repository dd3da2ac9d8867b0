"""WordPiece vocabularies of one's own: learning, extending, measuring.

`learn` pre-tokenizes as `FullTokenizer` does and trains Hugging Face
`tokenizers`' WordPiece, laid out as the released vocabularies (`[PAD]`,
`[unused*]`, `[UNK]`, `[CLS]`, `[SEP]`, `[MASK]`, pieces; with 99 unused
slots the special ids are the released 0 and 100-103). `add_extra_tokens`
fills `[unused*]` slots keeping every other id (the reference FAQ's
advice); `measure` gives pieces per word and the `[UNK]` rate.
"""

import collections
import re

from absl import logging

from bert_tf import io as io_utils
from bert_tf.corpus import beam_support
import tokenization

__all__ = ["SPECIAL_TOKENS", "special_layout", "iter_words", "learn",
           "add_extra_tokens", "measure", "write_vocab"]

SPECIAL_TOKENS = ("[UNK]", "[CLS]", "[SEP]", "[MASK]")
_UNUSED = re.compile(r"^\[unused\d+\]$")


def special_layout(num_unused):
  """`[PAD]`, `num_unused` `[unused*]` slots, `[UNK]`, `[CLS]`, `[SEP]`,
  `[MASK]`: the released vocabularies' first tokens."""
  return (["[PAD]"] + ["[unused%d]" % k for k in range(num_unused)] +
          list(SPECIAL_TOKENS))


def iter_words(input_files, do_lower_case):
  """Yields each non-blank line's words, as FullTokenizer's first step
  splits them (list of str), reading as `create_pretraining_data.py` does."""
  basic = tokenization.BasicTokenizer(do_lower_case=do_lower_case)
  for path in input_files:
    for _, line in io_utils.read_lines(path):
      words = basic.tokenize(line)
      if words:
        yield words


def learn(input_files, vocab_size, do_lower_case, num_unused=99,
          min_frequency=2, limit_alphabet=1000):
  """Learns a WordPiece vocabulary (list of str in id order; fewer than
  `vocab_size` when the text has no more pieces seen `min_frequency`
  times) from text files; `limit_alphabet` caps single characters.

  Raises:
    ValueError: `vocab_size` leaves no room for pieces, no words, or no
      `tokenizers` installed.
  """
  specials = special_layout(num_unused)
  if vocab_size <= len(specials):
    raise ValueError("--vocab_size is %d; expected more than the %d special "
                     "and [unused*] tokens" % (vocab_size, len(specials)))
  hf = beam_support.import_module("tokenizers", "learn_vocab.py")
  alphabet, continuing = _alphabet(input_files, do_lower_case, limit_alphabet)
  if not alphabet:
    raise ValueError("--input_file: no text in %s" % ", ".join(input_files))
  tokenizer = hf.Tokenizer(hf.models.WordPiece(unk_token="[UNK]"))
  tokenizer.pre_tokenizer = hf.pre_tokenizers.WhitespaceSplit()
  # Determinism: the trainer numbers the `##c` pieces in the order of its
  # own hash map (a new order each process), and that order breaks ties
  # between equally frequent merges, so each run learned another
  # vocabulary. Given here as special tokens, in sorted order, they get
  # the same ids on every run; the alphabet is chosen here too (the
  # trainer's cut at limit_alphabet breaks ties the same way).
  trainer = hf.trainers.WordPieceTrainer(
      vocab_size=vocab_size, min_frequency=min_frequency,
      special_tokens=specials + continuing, initial_alphabet=alphabet,
      limit_alphabet=len(alphabet), continuing_subword_prefix="##",
      show_progress=False)
  counts = {"lines": 0}

  def lines():
    for words in iter_words(input_files, do_lower_case):
      counts["lines"] += 1
      yield " ".join(words)

  tokenizer.train_from_iterator(lines(), trainer)
  ids = tokenizer.get_vocab()
  vocab = sorted(ids, key=ids.get)
  if vocab[:len(specials) + len(continuing)] != specials + continuing:
    raise ValueError("internal error: the trainer did not put the special "
                     "tokens first")
  # The released layout: specials, single characters, `##` characters,
  # then the merged pieces.
  rest = vocab[len(specials) + len(continuing):]
  singles = set(alphabet)
  vocab = (specials + [t for t in rest if t in singles] + continuing +
           [t for t in rest if t not in singles])
  logging.info("Learned %d tokens (%d pieces) from %d lines", len(vocab),
               len(vocab) - len(specials), counts["lines"])
  if len(vocab) < vocab_size:
    logging.warning("Only %d of --vocab_size=%d tokens: the text holds no "
                    "more pieces seen --min_frequency=%d times", len(vocab),
                    vocab_size, min_frequency)
  return vocab


def _alphabet(input_files, do_lower_case, limit_alphabet):
  """(alphabet, continuing pieces): the `limit_alphabet` most frequent
  characters of the words (ties: in character order), and `##c` for each
  of them that occurs inside a word, sorted."""
  counts = collections.Counter()
  inside = set()
  for words in iter_words(input_files, do_lower_case):
    for word in words:
      counts.update(word)
      inside.update(word[1:])
  alphabet = sorted(counts, key=lambda c: (-counts[c], c))[:limit_alphabet]
  return alphabet, ["##" + c for c in sorted(set(alphabet) & inside)]


def add_extra_tokens(vocab, words, do_lower_case):
  """Puts `words` ((line number, str)) into `vocab`'s `[unused*]` slots, in
  order, normalized as `FullTokenizer` sees them; words already there are
  skipped. Returns (new vocabulary, added, skipped).

  Raises:
    ValueError: a word BERT's pre-tokenization splits, or more words than
      free slots.
  """
  basic = tokenization.BasicTokenizer(do_lower_case=do_lower_case)
  present = set(vocab)
  slots = [k for k, token in enumerate(vocab) if _UNUSED.match(token)]
  new = list(vocab)
  added, skipped = [], []
  for number, word in words:
    pieces = basic.tokenize(word)
    if len(pieces) != 1:
      raise ValueError(
          "--extra_tokens: line %d: %r is %d words after BERT's "
          "pre-tokenization (%s); expected one word without spaces or "
          "punctuation" % (number, word, len(pieces), " ".join(pieces)))
    token = pieces[0]
    if token in present:
      skipped.append(token)
      continue
    if len(added) == len(slots):
      raise ValueError(
          "--extra_tokens: more new words than the vocabulary's %d [unused*] "
          "slots (line %d: %r)" % (len(slots), number, word))
    new[slots[len(added)]] = token
    present.add(token)
    added.append(token)
  return new, added, skipped


def measure(vocab_file, do_lower_case, input_files):
  """WordPiece statistics of `vocab_file` on `input_files`: dict of `words`,
  `pieces` (ints), `pieces_per_word`, `unk_rate` (share of words that
  become `[UNK]`)."""
  tokenizer = tokenization.FullTokenizer(vocab_file,
                                         do_lower_case=do_lower_case)
  wordpiece = tokenizer.wordpiece_tokenizer
  words = pieces = unknown = 0
  for line_words in iter_words(input_files, do_lower_case):
    for word in line_words:
      word_pieces = wordpiece.tokenize(word)
      words += 1
      pieces += len(word_pieces)
      unknown += word_pieces == ["[UNK]"]
  return {"words": words, "pieces": pieces,
          "pieces_per_word": pieces / max(words, 1),
          "unk_rate": unknown / max(words, 1)}


def write_vocab(path, vocab):
  """Writes `vocab` one token a line, atomically."""
  with io_utils.atomic_write(path) as f:
    for token in vocab:
      f.write(token + "\n")
