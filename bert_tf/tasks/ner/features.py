"""Fixed-length model inputs for token classification, and their records.

`convert_sentences_to_features` gives the first WordPiece of each word its
word's label (Devlin et al. 2019, section 5.3); other pieces, `[CLS]`,
`[SEP]` and padding have weight 0. A sentence longer than the model's input
is cut into overlapping windows; each word is predicted from the window
where it has the most context, as the reference's SQuAD script picks a
token's span. With `document_context`, a sentence is encoded with the words
of its neighbouring sentences in the document around it.
"""

import collections
import dataclasses
from typing import List

import tensorflow.compat.v1 as tf

from bert_tf import io as io_utils
from bert_tf.tasks import features as feature_utils
from bert_tf.tasks.squad import data as squad_data

__all__ = ["NerFeature", "convert_sentences_to_features", "padding_feature",
           "name_to_features", "SEQUENCE_KEYS", "write_features"]


@dataclasses.dataclass
class NerFeature:
  """One model input: a window over a sentence (with context).

  Attributes:
    unique_id: int, the feature's index (pairs predictions with features).
    sentence_index: int, index of the sentence in its file's list.
    input_ids, input_mask, segment_ids: lists of `max_seq_length` ints.
    label_ids: list of `max_seq_length` ints: the word's label id at the
      first piece of each of the sentence's own words, else 0.
    label_weights: list of `max_seq_length` ints: 1 where `label_ids` holds
      a label, else 0 (other pieces, context, `[CLS]`, `[SEP]`, padding).
    word_index: list of `max_seq_length` ints: the word's index in its
      sentence where `label_weights` is 1, else -1.
    is_max_context: list of `max_seq_length` bools: whether this window is
      the one a word is predicted from.
    is_real_example: bool; False for TPU batch padding.
  """
  unique_id: int
  sentence_index: int
  input_ids: List[int]
  input_mask: List[int]
  segment_ids: List[int]
  label_ids: List[int]
  label_weights: List[int]
  word_index: List[int]
  is_max_context: List[bool]
  is_real_example: bool = True


class _WordPieceCache(object):
  """`tokenizer.tokenize` per word, memoized (words repeat a lot)."""

  def __init__(self, tokenizer):
    self._tokenizer = tokenizer
    self._cache = {}

  def __call__(self, word):
    pieces = self._cache.get(word)
    if pieces is None:
      pieces = self._tokenizer.tokenize(word)
      self._cache[word] = pieces
    return pieces


def _context_words(pieces_of, document, sentence_pos, budget):
  """Pieces of the neighbouring sentences that fit in `budget` tokens.

  Whole words are added alternately on the left (nearest first) and on the
  right until neither side's next word fits.

  Returns:
    (left_pieces, right_pieces): lists of str.
  """
  left_words = [p for s in document[:sentence_pos] for p in pieces_of(s)]
  right_words = [p for s in document[sentence_pos + 1:] for p in pieces_of(s)]
  left, right = [], []
  li, ri = len(left_words) - 1, 0
  used = 0
  while True:
    grew = False
    if li >= 0 and used + len(left_words[li]) <= budget:
      left.insert(0, left_words[li])
      used += len(left_words[li])
      li -= 1
      grew = True
    if ri < len(right_words) and used + len(right_words[ri]) <= budget:
      right.append(right_words[ri])
      used += len(right_words[ri])
      ri += 1
      grew = True
    if not grew:
      break
  return ([p for w in left for p in w], [p for w in right for p in w])


def convert_sentences_to_features(sentences, label_list, tokenizer,
                                  max_seq_length, doc_stride,
                                  document_context=False):
  """Turns sentences into fixed-length features (see `NerFeature`).

  Each word is split into WordPieces; its first piece carries the word's
  label. A sentence whose pieces do not fit in `max_seq_length - 2` becomes
  several windows (`windows`); a word is predicted from the window given by
  `squad_data.is_max_context` for its first piece. With `document_context`, a
  sentence that fits is surrounded by whole words of the sentences before
  and after it in the same document, up to `max_seq_length - 2` pieces; only
  the sentence's own words carry labels (weight 1). Words with no WordPiece
  at all (control characters only) get no position; they are predicted O.

  Args:
    sentences: list of `reader.Sentence` (labels may be None: all label ids 0).
    label_list: list of str; a label's id is its index.
    tokenizer: `tokenization.FullTokenizer`.
    max_seq_length: int, at least 3.
    doc_stride: int, at least 1: tokens between window starts.
    document_context: bool.

  Returns:
    (features, num_empty_words): list of `NerFeature`, and the number of
    words that became no WordPiece.
  """
  if max_seq_length < 3:
    raise ValueError("max_seq_length=%d: expected at least 3 ([CLS], one "
                     "token, [SEP])" % max_seq_length)
  if doc_stride < 1:
    raise ValueError("doc_stride=%d: expected at least 1" % doc_stride)
  label_map = {label: i for i, label in enumerate(label_list)}
  tokenize = _WordPieceCache(tokenizer)
  max_tokens = max_seq_length - 2
  documents = collections.defaultdict(list)
  position_in_document = []
  for sentence in sentences:
    position_in_document.append(len(documents[sentence.document]))
    documents[sentence.document].append(sentence)

  def sentence_words(sentence):
    return [tokenize(w) for w in sentence.words]

  features, num_empty = [], 0
  for sentence_index, sentence in enumerate(sentences):
    word_pieces = sentence_words(sentence)
    pieces, owner = [], []  # owner: word index at a first piece, else -1.
    for word, word_piece_list in enumerate(word_pieces):
      if not word_piece_list:
        num_empty += 1
      for k, piece in enumerate(word_piece_list):
        pieces.append(piece)
        owner.append(word if k == 0 else -1)
    if not pieces:
      continue
    left, right = [], []
    if document_context and len(pieces) < max_tokens:
      left, right = _context_words(
          lambda s: [p for p in sentence_words(s) if p],
          documents[sentence.document],
          position_in_document[sentence_index], max_tokens - len(pieces))
    if left or right:
      spans = [squad_data.DocSpan(0, len(pieces))]
    else:
      spans = squad_data.doc_spans(len(pieces), max_tokens, doc_stride)
    for span_index, (start, length) in enumerate(spans):
      tokens = ["[CLS]"] + left + pieces[start:start + length] + right + [
          "[SEP]"]
      label_ids = [0] * max_seq_length
      label_weights = [0] * max_seq_length
      word_index = [-1] * max_seq_length
      is_max_context = [False] * max_seq_length
      for offset in range(length):
        word = owner[start + offset]
        if word < 0:
          continue
        position = 1 + len(left) + offset
        if sentence.labels is not None:
          label_ids[position] = label_map[sentence.labels[word]]
        label_weights[position] = 1
        word_index[position] = word
        is_max_context[position] = squad_data.is_max_context(
            spans, span_index, start + offset)
      input_ids, input_mask, segment_ids = feature_utils.pad_input(
          tokenizer.convert_tokens_to_ids(tokens), [0] * len(tokens),
          max_seq_length)
      features.append(NerFeature(
          unique_id=len(features), sentence_index=sentence_index,
          input_ids=input_ids, input_mask=input_mask,
          segment_ids=segment_ids, label_ids=label_ids,
          label_weights=label_weights, word_index=word_index,
          is_max_context=is_max_context))
  return features, num_empty


def padding_feature(unique_id, max_seq_length):
  """An all-zero feature with `is_real_example=False` (TPU batch padding)."""
  zeros = [0] * max_seq_length
  return NerFeature(unique_id, -1, zeros, zeros, zeros, zeros, zeros,
                    [-1] * max_seq_length, [False] * max_seq_length,
                    is_real_example=False)


# The [seq_length] features, which --bucket_by_length cuts.
SEQUENCE_KEYS = ("input_ids", "input_mask", "segment_ids", "label_ids",
                 "label_weights")


def name_to_features(seq_length):
  """The TFRecord schema of `write_features`."""
  return {
      "unique_ids": tf.io.FixedLenFeature([], tf.int64),
      "input_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
      "input_mask": tf.io.FixedLenFeature([seq_length], tf.int64),
      "segment_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
      "label_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
      "label_weights": tf.io.FixedLenFeature([seq_length], tf.int64),
      "is_real_example": tf.io.FixedLenFeature([], tf.int64),
  }


# protobuf 4's map order for write_features' insertion order, written on
# every stack (see io_utils.serialize_example).
_WIRE_ORDER = ("input_ids", "unique_ids", "is_real_example", "input_mask",
               "label_weights", "segment_ids", "label_ids")


def write_features(features, path):
  """Writes features to a TFRecord file (see `name_to_features`)."""
  with io_utils.atomic_path(path) as temp, \
      tf.io.TFRecordWriter(temp) as writer:
    for feature in features:
      record = collections.OrderedDict()
      record["unique_ids"] = io_utils.int64_feature(
          [feature.unique_id])
      for name in ("input_ids", "input_mask", "segment_ids", "label_ids",
                   "label_weights"):
        record[name] = io_utils.int64_feature(getattr(feature, name))
      record["is_real_example"] = io_utils.int64_feature(
          [int(feature.is_real_example)])
      writer.write(io_utils.serialize_example(record, _WIRE_ORDER))
