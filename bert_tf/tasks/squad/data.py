"""SQuAD data: examples from SQuAD JSON, and the windowed features.

The reference's reading and conversion (Devlin et al. 2018, sections 4.2
and 4.3): whitespace-split words, training answers at `answer_start`,
`[CLS] query [SEP] span [SEP]` over sliding spans (`doc_stride`), each
token's "max context" span marked; the windowing (`doc_spans`,
`is_max_context`) is shared with NER.
"""

import collections
import contextlib
import dataclasses
from typing import Any, Dict, List, Optional

from absl import logging
import tensorflow.compat.v1 as tf

from bert_tf import io as io_utils
from bert_tf import json_file
from bert_tf.tasks import features as feature_utils
import tokenization

__all__ = [
    "SquadExample", "read_squad_examples", "load_squad_data", "split_document",
    "InputFeatures", "check_span_lengths", "convert_examples_to_features",
    "FeatureWriter", "DocSpan", "doc_spans", "is_max_context",
]

# Document words are split on these characters only (reference behaviour:
# U+202F NARROW NO-BREAK SPACE is included, U+00A0 and other spaces are not).
_DOC_SPLIT_CHARS = frozenset(" \t\r\n\u202f")
_FIRST_UNIQUE_ID = 1000000000
_LOG_EVERY_EXAMPLES = 1000


# ----------------------------------------------------------------------------
# Examples
# ----------------------------------------------------------------------------


@dataclasses.dataclass(eq=False, repr=False)
class SquadExample:
  """One question about one paragraph.

  Attributes:
    qas_id: the question's id; question_text: str.
    doc_tokens: list of str, the paragraph's whitespace-separated words.
    orig_answer_text: str or None, the training answer as written.
    start_position, end_position: int or None, the answer's first and last
      word (training only; -1/-1 for an impossible 2.0 question).
    is_impossible: bool, a SQuAD 2.0 question without an answer.
  """

  qas_id: Any
  question_text: str
  doc_tokens: List[str]
  orig_answer_text: Optional[str] = None
  start_position: Optional[int] = None
  end_position: Optional[int] = None
  is_impossible: bool = False

  def __repr__(self):
    return ("SquadExample(qas_id=%r, question_text=%r, doc_tokens=[%s], "
            "start_position=%r, end_position=%r, is_impossible=%r)" %
            (self.qas_id, self.question_text, " ".join(self.doc_tokens),
             self.start_position, self.end_position, self.is_impossible))


def read_squad_examples(input_file, is_training, version_2_with_negative=False):
  """Reads a SQuAD 1.1/2.0 JSON file into `SquadExample`s, in file order.

  Answers and `is_impossible` (with `version_2_with_negative`) are read
  when training; an answer not found at its `answer_start` is skipped with
  a warning (reference behaviour), the count logged at the end.

  Raises:
    FileNotFoundError: `input_file` does not exist.
    ValueError: not JSON or not SQuAD-shaped (naming the field), a question
      id twice, or an answerable training question without exactly one
      answer.
  """
  examples = []
  skipped = 0
  seen_ids = {}
  for where, context, qas in _iter_paragraphs(input_file):
    doc_tokens, char_to_word_offset = split_document(context)
    for q_index, qa in enumerate(qas):
      q_where = "%s.qas[%d]" % (where, q_index)
      qas_id = _field(qa, "id", "string", input_file, q_where)
      if qas_id in seen_ids:
        raise ValueError("%s: question id %r appears twice (%s and %s); ids "
                         "must be unique" % (input_file, qas_id,
                                             seen_ids[qas_id], q_where))
      seen_ids[qas_id] = q_where
      question = _field(qa, "question", "string", input_file, q_where)
      if not is_training:
        examples.append(SquadExample(qas_id, question, doc_tokens))
        continue
      answer = _training_answer(qa, doc_tokens, char_to_word_offset,
                                version_2_with_negative, input_file, q_where)
      if answer is None:
        skipped += 1
        continue
      examples.append(SquadExample(qas_id, question, doc_tokens, *answer))
  if skipped:
    logging.warning("%s: skipped %d training answer(s) not found at "
                    "answer_start; kept %d examples", input_file,
                    skipped, len(examples))
  logging.info("Read %d examples from %s", len(examples), input_file)
  return examples


def load_squad_data(input_file):
  """The list under a SQuAD JSON file's top-level "data" key.

  Raises:
    FileNotFoundError: `input_file` does not exist.
    ValueError: not valid JSON, or no "data" list.
  """
  if not tf.io.gfile.exists(input_file):
    raise FileNotFoundError("%s: no such file (expected a SQuAD JSON file)" %
                            input_file)
  with tf.io.gfile.GFile(input_file, "rb") as f:
    data = f.read()
  # json.loads reads UTF-8 (and UTF-16/32) bytes as the text reader did;
  # bytes that are none of these are a one-line error naming the file.
  parsed = json_file.loads(data, input_file)
  return _field(parsed, "data", "list", input_file, "")


def _field(obj, key, kind, input_file, where):
  """obj[key], checked to be a `kind` (a `json_file` kind name); a one-line
  error names the file, the key path and what was expected."""
  return json_file.field(obj, key, kind, input_file, where)


def _iter_paragraphs(input_file):
  """Yields (location, context, qas) for every paragraph of the file."""
  data = load_squad_data(input_file)
  for a_index, article in enumerate(data):
    a_where = "data[%d]" % a_index
    paragraphs = _field(article, "paragraphs", "list", input_file, a_where)
    for p_index, paragraph in enumerate(paragraphs):
      p_where = "%s.paragraphs[%d]" % (a_where, p_index)
      context = _field(paragraph, "context", "string", input_file, p_where)
      qas = _field(paragraph, "qas", "list", input_file, p_where)
      yield p_where, context, qas


def split_document(context):
  """(doc_tokens, char_to_word_offset) of a paragraph, as the reference:
  words split at space, tab, CR, LF and U+202F only; each character's word
  index (a separator: the word before, -1 before the first)."""
  doc_tokens = []
  char_to_word_offset = []
  word_start = None
  for i, char in enumerate(context):
    if char in _DOC_SPLIT_CHARS:
      if word_start is not None:
        doc_tokens.append(context[word_start:i])
        word_start = None
      char_to_word_offset.append(len(doc_tokens) - 1)
    else:
      if word_start is None:
        word_start = i
      char_to_word_offset.append(len(doc_tokens))
  if word_start is not None:
    doc_tokens.append(context[word_start:])
  return doc_tokens, char_to_word_offset


def _training_answer(qa, doc_tokens, char_to_word_offset,
                     version_2_with_negative, input_file, where):
  """(answer text, start word, end word, is_impossible), or None if skipped."""
  is_impossible = bool(version_2_with_negative and qa.get("is_impossible"))
  if is_impossible:
    if json_file.field(qa, "answers", ("list", "null"), input_file, where,
                       default=None):
      # The reference trains such a question as impossible; so does this,
      # but says so (the data contradicts itself).
      logging.warning("%s: %s id %r is marked is_impossible but has %d "
                      "answer(s); trained as impossible, answers ignored",
                      input_file, where, qa.get("id"), len(qa["answers"]))
    return "", -1, -1, True
  answers = _field(qa, "answers", "list", input_file, where)
  if len(answers) != 1:
    raise ValueError(
        "For training, each question should have exactly 1 answer. (%s: %s "
        "id %r has %d; SQuAD 2.0 data needs --version_2_with_negative)" %
        (input_file, where, qa["id"], len(answers)))
  first = where + ".answers[0]"
  text = _field(answers[0], "text", "string", input_file, first)
  offset = _field(answers[0], "answer_start", "integer", input_file, first)
  end_offset = offset + len(text) - 1
  if not 0 <= offset < len(char_to_word_offset) or (
      end_offset >= len(char_to_word_offset)):
    logging.warning("%s: %s id %r: answer_start %d is outside the context "
                    "(%d characters); skipped", input_file, where, qa["id"],
                    offset, len(char_to_word_offset))
    return None
  start_word = char_to_word_offset[offset]
  end_word = char_to_word_offset[end_offset]
  if not 0 <= start_word <= end_word < len(doc_tokens):
    logging.warning("%s: %s id %r: answer_start %d is not on a word of the "
                    "context (%d words); skipped", input_file, where,
                    qa["id"], offset, len(doc_tokens))
    return None
  actual_text = " ".join(doc_tokens[start_word:end_word + 1])
  cleaned_text = " ".join(tokenization.whitespace_tokenize(text))
  if actual_text.find(cleaned_text) == -1:
    logging.warning("%s: %s id %r: could not find answer %r at answer_start "
                    "%d (document words there: %r); skipped", input_file,
                    where, qa["id"], cleaned_text, offset, actual_text)
    return None
  return text, start_word, end_word, False


# ----------------------------------------------------------------------------
# Features
# ----------------------------------------------------------------------------


@dataclasses.dataclass(eq=False)
class InputFeatures:
  """The model inputs for one document span of one example.

  Attributes:
    unique_id: int, counts features from 1000000000.
    example_index, doc_span_index: int, the example's and span's indexes.
    tokens: list of str, `[CLS] query [SEP] span [SEP]`.
    token_to_orig_map, token_is_max_context: dict position in `tokens` ->
      document word index / whether this span is its max context
      (document tokens only).
    input_ids, input_mask, segment_ids: lists of `max_seq_length` ints.
    start_position, end_position: int or None, the answer in `tokens`
      (training only; 0/0, `[CLS]`, when the span lacks it).
    is_impossible: bool or None (training only).
  """

  unique_id: int
  example_index: int
  doc_span_index: int
  tokens: List[str]
  token_to_orig_map: Dict[int, int]
  token_is_max_context: Dict[int, bool]
  input_ids: List[int]
  input_mask: List[int]
  segment_ids: List[int]
  start_position: Optional[int] = None
  end_position: Optional[int] = None
  is_impossible: Optional[bool] = None


# The sub-tokens of a document and the maps between them and its words.
_TokenizedDoc = collections.namedtuple(
    "_TokenizedDoc", ["tokens", "tok_to_orig", "orig_to_tok"])
DocSpan = collections.namedtuple("DocSpan", ["start", "length"])


def check_span_lengths(max_seq_length, doc_stride, max_query_length):
  """Refuses span settings that leave no room for the document.

  Raises:
    ValueError: `max_seq_length` cannot hold the query, `[CLS]`, two
      `[SEP]`s and one document token, or `doc_stride` < 1.
  """
  needed = max_query_length + 4
  if max_seq_length < needed:
    raise ValueError(
        "max_seq_length=%d is too small: it must hold max_query_length=%d "
        "query tokens + 3 special tokens + at least 1 document token = %d" %
        (max_seq_length, max_query_length, needed))
  if doc_stride < 1:
    raise ValueError("doc_stride=%d: expected at least 1 token" % doc_stride)


def convert_examples_to_features(examples, tokenizer, max_seq_length,
                                 doc_stride, max_query_length, is_training,
                                 output_fn):
  """Streams the span features of `examples` to `output_fn`, one
  `InputFeatures` at a time (`unique_id`s from 1000000000), with answer
  positions when `is_training`; returns their number.

  Raises:
    ValueError: from `check_span_lengths`.
  """
  check_span_lengths(max_seq_length, doc_stride, max_query_length)
  unique_id = _FIRST_UNIQUE_ID
  example_index = -1
  for example_index, example in enumerate(examples):
    for feature in _example_features(example, example_index, unique_id,
                                     tokenizer, max_seq_length, doc_stride,
                                     max_query_length, is_training):
      output_fn(feature)
      unique_id += 1
    if (example_index + 1) % _LOG_EVERY_EXAMPLES == 0:
      logging.info("Converted %d examples into %d features",
                   example_index + 1, unique_id - _FIRST_UNIQUE_ID)
  num_features = unique_id - _FIRST_UNIQUE_ID
  logging.info("Converted %d examples into %d features", example_index + 1,
               num_features)
  return num_features


def _example_features(example, example_index, first_unique_id, tokenizer,
                      max_seq_length, doc_stride, max_query_length,
                      is_training):
  """Yields the `InputFeatures` of one example, one per document span."""
  query_tokens = tokenizer.tokenize(example.question_text)[:max_query_length]
  doc = _tokenize_document(example.doc_tokens, tokenizer)
  answer_span = None
  if is_training and not example.is_impossible:
    answer_span = _answer_token_span(example, doc, tokenizer)
  max_tokens_for_doc = max_seq_length - len(query_tokens) - 3
  spans = doc_spans(len(doc.tokens), max_tokens_for_doc, doc_stride)
  doc_offset = len(query_tokens) + 2
  for span_index, span in enumerate(spans):
    feature = _pack_feature(query_tokens, doc, spans, span_index, tokenizer,
                            max_seq_length)
    feature.unique_id = first_unique_id + span_index
    feature.example_index = example_index
    feature.is_impossible = example.is_impossible
    if is_training:
      feature.start_position, feature.end_position = _positions_in_span(
          answer_span, span, doc_offset)
    yield feature


def _tokenize_document(doc_words, tokenizer):
  """WordPiece-tokenizes every word, keeping word <-> sub-token maps."""
  tokens, tok_to_orig, orig_to_tok = [], [], []
  for word_index, word in enumerate(doc_words):
    orig_to_tok.append(len(tokens))
    for sub_token in tokenizer.tokenize(word):
      tok_to_orig.append(word_index)
      tokens.append(sub_token)
  return _TokenizedDoc(tokens, tok_to_orig, orig_to_tok)


def _answer_token_span(example, doc, tokenizer):
  """The answer's (start, end) sub-token indexes in the whole document."""
  start = doc.orig_to_tok[example.start_position]
  if example.end_position < len(example.doc_tokens) - 1:
    end = doc.orig_to_tok[example.end_position + 1] - 1
  else:
    end = len(doc.tokens) - 1
  return _improve_answer_span(doc.tokens, start, end, tokenizer,
                              example.orig_answer_text)


def _improve_answer_span(doc_tokens, start, end, tokenizer, answer_text):
  """Narrows a word-level span to the sub-tokens that spell the answer
  ("1895" in "(1895-1943)."): the first match, starts left to right, ends
  right to left; else the word-level span."""
  answer_tokens = " ".join(tokenizer.tokenize(answer_text))
  for new_start in range(start, end + 1):
    for new_end in range(end, new_start - 1, -1):
      if " ".join(doc_tokens[new_start:new_end + 1]) == answer_tokens:
        return new_start, new_end
  return start, end


def doc_spans(num_tokens, max_tokens_for_doc, doc_stride):
  """Windows of at most `max_tokens_for_doc` tokens from 0, advancing by
  min(length, doc_stride) until one reaches the end."""
  spans = []
  start = 0
  while start < num_tokens:
    length = min(num_tokens - start, max_tokens_for_doc)
    spans.append(DocSpan(start, length))
    if start + length == num_tokens:
      break
    start += min(length, doc_stride)
  return spans


def is_max_context(spans, span_index, position):
  """Whether `spans[span_index]` gives token `position` its most context:
  min(left, right context) + 0.01 * span length; the earliest wins ties."""
  best_score, best_index = None, None
  for index, span in enumerate(spans):
    end = span.start + span.length - 1
    if position < span.start or position > end:
      continue
    score = min(position - span.start, end - position) + 0.01 * span.length
    if best_score is None or score > best_score:
      best_score, best_index = score, index
  return span_index == best_index


def _pack_feature(query_tokens, doc, spans, span_index, tokenizer,
                  max_seq_length):
  """`[CLS] query [SEP] span [SEP]`, padded, as a partial `InputFeatures`."""
  span = spans[span_index]
  tokens = ["[CLS]"] + query_tokens + ["[SEP]"]
  segment_ids = [0] * len(tokens)
  token_to_orig_map = {}
  token_is_max_context = {}
  for doc_index in range(span.start, span.start + span.length):
    token_to_orig_map[len(tokens)] = doc.tok_to_orig[doc_index]
    token_is_max_context[len(tokens)] = is_max_context(spans, span_index,
                                                        doc_index)
    tokens.append(doc.tokens[doc_index])
    segment_ids.append(1)
  tokens.append("[SEP]")
  segment_ids.append(1)
  input_ids, input_mask, segment_ids = feature_utils.pad_input(
      tokenizer.convert_tokens_to_ids(tokens), segment_ids, max_seq_length)
  return InputFeatures(
      unique_id=None, example_index=None, doc_span_index=span_index,
      tokens=tokens, token_to_orig_map=token_to_orig_map,
      token_is_max_context=token_is_max_context, input_ids=input_ids,
      input_mask=input_mask, segment_ids=segment_ids)


def _positions_in_span(answer_span, span, doc_offset):
  """Answer positions within one feature; 0/0 (`[CLS]`) when not inside."""
  if answer_span is None:
    return 0, 0
  start, end = answer_span
  if start < span.start or end > span.start + span.length - 1:
    return 0, 0
  return start - span.start + doc_offset, end - span.start + doc_offset


# The order in which the reference's records hold the features (protobuf's
# map order for FeatureWriter's insertion order); see
# io_utils.serialize_example.
_TRAIN_WIRE_ORDER = ("is_impossible", "input_ids", "end_positions",
                     "unique_ids", "start_positions", "input_mask",
                     "segment_ids")
_EVAL_WIRE_ORDER = ("unique_ids", "input_mask", "input_ids", "segment_ids")


class FeatureWriter(object):
  """Writes `InputFeatures` to a TFRecord file, atomically (renamed by
  `close()`; an exception in the `with` block discards it). Keys in this
  order (the bytes depend on it): `unique_ids`, `input_ids`, `input_mask`,
  `segment_ids`, and when training `start_positions`, `end_positions`,
  `is_impossible`."""

  def __init__(self, filename, is_training):
    self.filename = filename
    self.is_training = is_training
    self.num_features = 0
    self._output = contextlib.ExitStack()
    self._temp = self._output.enter_context(io_utils.atomic_path(filename))
    self._writer = tf.io.TFRecordWriter(self._temp)

  def process_feature(self, feature):
    """Serializes one feature and appends it to the file."""
    self.num_features += 1
    int64 = io_utils.int64_feature
    features = collections.OrderedDict()
    features["unique_ids"] = int64([feature.unique_id])
    features["input_ids"] = int64(feature.input_ids)
    features["input_mask"] = int64(feature.input_mask)
    features["segment_ids"] = int64(feature.segment_ids)
    if self.is_training:
      features["start_positions"] = int64([feature.start_position])
      features["end_positions"] = int64([feature.end_position])
      features["is_impossible"] = int64([1 if feature.is_impossible else 0])
    self._writer.write(io_utils.serialize_example(
        features, _TRAIN_WIRE_ORDER if self.is_training else _EVAL_WIRE_ORDER))

  def close(self):
    """Finishes the file and moves it to `filename`."""
    self._writer.close()
    self._output.close()

  def abort(self):
    """Discards everything written so far."""
    self._writer.close()
    aborted = RuntimeError("aborted")
    self._output.__exit__(RuntimeError, aborted, None)

  def __enter__(self):
    return self

  def __exit__(self, exc_type, exc_value, traceback):
    if exc_type is None:
      self.close()
    else:
      self.abort()
    return False
