# coding=utf-8
"""The reference's pre-training instances: documents in, masked pairs out.

`create_pretraining_data.py`'s algorithm (Devlin et al. 2018, section 3.1
and appendix A.1): documents read and tokenized, packed into chunks, split
into A and B (B random half the time), truncated and masked, all drawn from
one `random.Random` in the reference's order, so that the same seed writes
the same records. Two variants, off by default: instances left unmasked
(`masked=False`, for masking in the input pipeline) and instances of one
span without B (`next_sentence=False`).
"""

import collections
import dataclasses

from absl import logging

from bert_tf import io as io_utils
from bert_tf.tasks.pretraining import processes as pretraining_processes
from bert_tf.tasks.pretraining import shuffle as pretraining_shuffle
from bert_tf.tasks.pretraining import whole_words
import tokenization

__all__ = ["TrainingInstance", "MaskedLmInstance", "read_documents",
           "describe_files", "check_num_documents",
           "create_training_instances", "instances_from_documents",
           "create_instances_from_document", "pick_other_document",
           "create_masked_lm_predictions", "truncate_seq_pair"]

# The reference draws at most this many document indexes for a random B.
_RANDOM_DOC_TRIES = 10


@dataclasses.dataclass(eq=False)
class TrainingInstance:
  """One pre-training example: `[CLS] A [SEP] B [SEP]` after masking.

  Attributes:
    tokens: list of str, the masked tokens with `[CLS]`/`[SEP]`.
    segment_ids: list of int, 0 for `[CLS]`, A and its `[SEP]`, 1 after.
    masked_lm_positions: list of int, masked positions in increasing order.
    masked_lm_labels: list of str, the original tokens at those positions.
    is_random_next: bool, True when B was taken from another document;
      None for an instance without B (no next-sentence prediction).
  """

  # Slots: a corpus makes millions of instances (no field has a default).
  __slots__ = ("tokens", "segment_ids", "masked_lm_positions",
               "masked_lm_labels", "is_random_next")
  tokens: list
  segment_ids: list
  masked_lm_positions: list
  masked_lm_labels: list
  is_random_next: bool

  def __str__(self):
    return "".join([
        "tokens: %s\n" % " ".join(
            tokenization.printable_text(t) for t in self.tokens),
        "segment_ids: %s\n" % " ".join(str(s) for s in self.segment_ids),
        "is_random_next: %s\n" % self.is_random_next,
        "masked_lm_positions: %s\n" % " ".join(
            str(p) for p in self.masked_lm_positions),
        "masked_lm_labels: %s\n" % " ".join(
            tokenization.printable_text(t) for t in self.masked_lm_labels),
    ])

  def __repr__(self):
    return self.__str__()


# The reference's record of one masked position: `index` (int, position in
# the tokens) and `label` (str, the original token there).
MaskedLmInstance = collections.namedtuple("MaskedLmInstance",
                                          ["index", "label"])


# ----------------------------------------------------------------------------
# Reading text.


def read_documents(sources, tokenizer, prefix="", chinese_words_too=False):
  """Reads and tokenizes documents from `sources`, as the reference does.

  Args:
    sources: list of `(path, start_byte, end_byte_or_None)`, read in order as
      one stream (a new file does not start a new document by itself).
    tokenizer: object with `tokenize(text) -> list of str`.
    prefix: str put before progress log lines.
    chinese_words_too: bool, mark the Chinese characters continuing a
      segmenter word (`whole_words.WordMarkingTokenizer`; same tokens).

  Returns:
    list of documents; a document is a non-empty list of segments, a segment
    a non-empty list of str tokens. Documents left empty are dropped.
  """
  if chinese_words_too:
    tokenizer = whole_words.WordMarkingTokenizer(tokenizer)
  documents = [[]]
  progress = pretraining_processes.Progress(
      "lines read", prefix,
      lambda: ", %d documents" % (len(documents) - (not documents[-1])))
  for path, start, end in sources:
    for _, line in io_utils.read_lines(path, start, end):
      progress.add()
      line = line.strip()
      if not line:
        if documents[-1]:
          documents.append([])
        continue
      tokens = tokenizer.tokenize(line)
      if tokens:
        documents[-1].append(tokens)
  progress.log(final=True)
  return [document for document in documents if document]


def describe_files(paths):
  """Short human-readable list of paths for error messages."""
  shown = ", ".join(paths[:3])
  if len(paths) > 3:
    shown += " and %d more" % (len(paths) - 3)
  return shown


def check_num_documents(documents, where):
  """Raises ValueError unless there are at least two documents.

  Next-sentence prediction takes a random B from *another* document; with
  fewer than two documents every "random" B would be text from the same
  document (the reference then labels real continuations as random).
  """
  if len(documents) >= 2:
    return
  if not documents:
    raise ValueError(
        "%s holds no text: expected plain text, one sentence per line, with "
        "a blank line between documents" % where)
  raise ValueError(
      "%s holds only 1 document; next-sentence prediction needs at least two "
      "documents, separated by blank lines (one sentence per line)" % where)


# ----------------------------------------------------------------------------
# Instances.


def create_training_instances(input_files, tokenizer, max_seq_length,
                              dupe_factor, short_seq_prob, masked_lm_prob,
                              max_predictions_per_seq, rng,
                              do_whole_word_mask=False,
                              do_chinese_whole_word_mask=False, *,
                              masked=True, next_sentence=True):
  """Reads `input_files` and returns the shuffled `TrainingInstance`s.

  Matches the reference release's draw order: documents are
  shuffled once, then `dupe_factor` passes over them make instances, and all
  instances are shuffled once at the end.

  Args:
    input_files: list of str, text files read in order (one sentence per
      line, blank line between documents).
    tokenizer: a `tokenization.FullTokenizer`.
    max_seq_length: int, tokens per instance including `[CLS]` and `[SEP]`s.
    dupe_factor: int, passes over the documents (each with new masks).
    short_seq_prob: float, chance that a document's target length is short.
    masked_lm_prob: float, share of tokens to mask.
    max_predictions_per_seq: int, cap on masked positions per instance.
    rng: `random.Random`, the only source of randomness.
    do_whole_word_mask: bool, mask all WordPieces of a word together.
    do_chinese_whole_word_mask: bool, also mask the characters of a
      segmenter word together (implies `do_whole_word_mask`).
    masked: bool; False leaves the tokens unmasked (no masking draws).
    next_sentence: bool; False makes each instance one span of a document,
      `[CLS] A [SEP]`, with no random B (is_random_next None).

  Returns:
    list of `TrainingInstance`.

  Raises:
    ValueError: if the files hold fewer than two documents, or jieba is
      needed and missing.
  """
  with io_utils.gc_paused():
    sources = [(path, 0, None) for path in input_files]
    documents = read_documents(sources, tokenizer,
                                chinese_words_too=do_chinese_whole_word_mask)
    if next_sentence:
      check_num_documents(
          documents, "--input_file (%s)" % describe_files(list(input_files)))
    return instances_from_documents(
        documents, tokenizer, max_seq_length, dupe_factor, short_seq_prob,
        masked_lm_prob, max_predictions_per_seq, rng,
        do_whole_word_mask or do_chinese_whole_word_mask, masked=masked,
        next_sentence=next_sentence)


def instances_from_documents(documents, tokenizer, max_seq_length,
                              dupe_factor, short_seq_prob, masked_lm_prob,
                              max_predictions_per_seq, rng, do_whole_word_mask,
                              prefix="", random_next_only=(), **kind):
  """Shuffles `documents` in place; makes all passes' instances; shuffles.
  `random_next_only`: documents drawn only as "random next" B segments;
  `kind`: `masked`, `next_sentence` (`create_instances_from_document`)."""
  logging.info("%s%d documents", prefix, len(documents))
  pretraining_shuffle.shuffle(documents, rng)
  num_own = len(documents)
  if random_next_only:
    documents = documents + list(random_next_only)
  vocab_words = list(tokenizer.vocab.keys())
  instances = []
  for pass_index in range(dupe_factor):
    progress = pretraining_processes.Progress(
        "documents of pass %d/%d" % (pass_index + 1, dupe_factor), prefix)
    for document_index in range(num_own):
      instances.extend(create_instances_from_document(
          documents, document_index, max_seq_length, short_seq_prob,
          masked_lm_prob, max_predictions_per_seq, vocab_words, rng,
          do_whole_word_mask=do_whole_word_mask, **kind))
      progress.add()
    logging.info("%spass %d/%d: %d instances so far", prefix, pass_index + 1,
                 dupe_factor, len(instances))
  pretraining_shuffle.shuffle(instances, rng)
  return instances


def create_instances_from_document(all_documents, document_index,
                                   max_seq_length, short_seq_prob,
                                   masked_lm_prob, max_predictions_per_seq,
                                   vocab_words, rng, do_whole_word_mask=False,
                                   *, masked=True, next_sentence=True):
  """Makes the instances of one document (the reference's chunking).

  Segments are packed into chunks up to a target length (shorter with
  probability `short_seq_prob`); each chunk is split into A and B, where B is
  the chunk's rest or, half the time, text from another document.

  Args:
    all_documents: list of documents (lists of segments of str tokens).
    document_index: int, which document to use.
    max_seq_length: int, tokens per instance including 3 special tokens.
    short_seq_prob: float, chance of a random target length in [2, budget].
    masked_lm_prob: float, share of tokens to mask.
    max_predictions_per_seq: int, cap on masked positions per instance.
    vocab_words: list of str, the vocabulary in file order.
    rng: `random.Random`.
    do_whole_word_mask: bool, mask all WordPieces of a word together.
    masked, next_sentence: as `create_training_instances`'s.

  Returns a list of `TrainingInstance`; raises ValueError if there are fewer
  than two documents (with `next_sentence`) or `max_seq_length < 5`.
  """
  if next_sentence and len(all_documents) < 2:
    raise ValueError(
        "all_documents holds %d document(s); next-sentence prediction needs at "
        "least two" % len(all_documents))
  if max_seq_length < 5:
    raise ValueError("max_seq_length is %d; expected at least 5 ([CLS] A "
                     "[SEP] B [SEP] with two tokens of text)" % max_seq_length)
  document = all_documents[document_index]
  # Room for [CLS], [SEP], and a second [SEP] with a B segment.
  max_num_tokens = max_seq_length - (3 if next_sentence else 2)
  target_seq_length = max_num_tokens
  if rng.random() < short_seq_prob:
    target_seq_length = rng.randint(2, max_num_tokens)

  instances = []
  chunk = []
  chunk_length = 0
  i = 0
  while i < len(document):
    chunk.append(document[i])
    chunk_length += len(document[i])
    if i == len(document) - 1 or chunk_length >= target_seq_length:
      if next_sentence:
        tokens_a, tokens_b, is_random_next, num_unused = _split_chunk(
            chunk, all_documents, document_index, target_seq_length, rng)
        i -= num_unused  # Unused segments start the next chunk.
      else:
        tokens_a, tokens_b, is_random_next = sum(chunk, []), [], None
      truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
      instances.append(_make_instance(
          tokens_a, tokens_b, is_random_next, masked_lm_prob,
          max_predictions_per_seq, vocab_words, rng, do_whole_word_mask,
          masked))
      chunk = []
      chunk_length = 0
    i += 1
  return instances


def _split_chunk(chunk, all_documents, document_index, target_seq_length, rng):
  """Splits a chunk into (tokens_a, tokens_b, is_random_next, num_unused)."""
  a_end = 1
  if len(chunk) >= 2:
    a_end = rng.randint(1, len(chunk) - 1)
  tokens_a = []
  for segment in chunk[:a_end]:
    tokens_a.extend(segment)

  tokens_b = []
  if len(chunk) == 1 or rng.random() < 0.5:
    target_b_length = target_seq_length - len(tokens_a)
    random_document = all_documents[
        pick_other_document(len(all_documents), document_index, rng)]
    random_start = rng.randint(0, len(random_document) - 1)
    for segment in random_document[random_start:]:
      tokens_b.extend(segment)
      if len(tokens_b) >= target_b_length:
        break
    return tokens_a, tokens_b, True, len(chunk) - a_end

  for segment in chunk[a_end:]:
    tokens_b.extend(segment)
  return tokens_a, tokens_b, False, 0


def pick_other_document(num_documents, document_index, rng):
  """Index of a random document other than `document_index`.

  The reference's ten draws, kept for parity; if all ten hit the current
  document the reference used it anyway (a real continuation labelled
  random), so this keeps drawing until another document comes up.
  """
  other = document_index
  for _ in range(_RANDOM_DOC_TRIES):
    other = rng.randint(0, num_documents - 1)
    if other != document_index:
      return other
  while other == document_index:
    other = rng.randint(0, num_documents - 1)
  return other


def _make_instance(tokens_a, tokens_b, is_random_next, masked_lm_prob,
                   max_predictions_per_seq, vocab_words, rng,
                   do_whole_word_mask, masked=True):
  """Builds `[CLS] A [SEP] B [SEP]` (`[CLS] A [SEP]` when `is_random_next`
  is None), masks it unless not `masked`, wraps it in an instance."""
  if not tokens_a or (is_random_next is not None and not tokens_b):
    raise ValueError("internal error: empty segment after truncation")
  tokens = ["[CLS]"] + tokens_a + ["[SEP]"]
  if is_random_next is not None:
    tokens += tokens_b + ["[SEP]"]
  segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens) -
                                                   len(tokens_a) - 2)
  positions, labels = [], []
  if masked:
    tokens, positions, labels = create_masked_lm_predictions(
        tokens, masked_lm_prob, max_predictions_per_seq, vocab_words, rng,
        do_whole_word_mask=do_whole_word_mask)
  return TrainingInstance(tokens, segment_ids, positions, labels,
                          is_random_next)


def create_masked_lm_predictions(tokens, masked_lm_prob,
                                 max_predictions_per_seq, vocab_words, rng,
                                 do_whole_word_mask=False):
  """Chooses masked positions and replaces their tokens.

  Each chosen position becomes `[MASK]` 80% of the time, stays the same 10%
  and becomes a random vocabulary word 10% (Devlin et al. 2018, 3.1).

  Args:
    tokens: list of str, `[CLS] A [SEP] B [SEP]`.
    masked_lm_prob: float, share of tokens to mask (rounded, at least 1).
    max_predictions_per_seq: int, cap on masked positions.
    vocab_words: list of str, the vocabulary in file order.
    rng: `random.Random`.
    do_whole_word_mask: bool, a `##` piece joins the group before it (even
      across a `[SEP]`, kept for parity), and so does a
      `whole_words.WordContinuation` (not across a `[SEP]`); groups are
      masked whole.

  Returns:
    (output_tokens, masked_lm_positions, masked_lm_labels): the masked
    tokens (a new list), and the positions (increasing) with their original
    tokens.
  """
  num_to_predict = min(max_predictions_per_seq,
                       max(1, int(round(len(tokens) * masked_lm_prob))))
  if do_whole_word_mask:
    chosen = whole_words.choose_whole_words(tokens, num_to_predict, rng)
  else:
    # Each position its own group: shuffle (same draws as shuffling
    # one-element groups), then take the first `num_to_predict`.
    candidates = [index for index, token in enumerate(tokens)
                  if token != "[CLS]" and token != "[SEP]"]
    pretraining_shuffle.shuffle(candidates, rng)
    chosen = candidates[:num_to_predict]

  output_tokens = list(tokens)
  num_words = len(vocab_words)
  for index in chosen:  # In the order chosen: the draws depend on it.
    if rng.random() < 0.8:
      output_tokens[index] = "[MASK]"
    elif rng.random() >= 0.5:  # Else (another 50%) the token stays as it is.
      output_tokens[index] = vocab_words[rng.randint(0, num_words - 1)]
  positions = sorted(chosen)
  return output_tokens, positions, [tokens[index] for index in positions]


def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
  """Truncates a pair in place to at most `max_num_tokens` tokens in total.

  One token at a time from the longer list (B when equal), from its front
  when a `random()` draw is below 0.5, else from its back (the reference's
  rule). The draws are made first, counting the tokens to drop at each end, and
  each list is then cut once: linear time, same result and rng state as
  deleting token by token.
  """
  lengths = [len(tokens_a), len(tokens_b)]
  drops = [[0, 0], [0, 0]]  # [front, back] tokens to drop from A and from B.
  while lengths[0] + lengths[1] > max_num_tokens:
    longer = 0 if lengths[0] > lengths[1] else 1
    if not lengths[longer]:
      raise ValueError("max_num_tokens is %d; cannot truncate below 0"
                       % max_num_tokens)
    lengths[longer] -= 1
    drops[longer][0 if rng.random() < 0.5 else 1] += 1
  for tokens, (front, back) in zip((tokens_a, tokens_b), drops):
    del tokens[len(tokens) - back:]
    del tokens[:front]
