"""Fine-tunes BERT for SQuAD 1.1 / 2.0 question answering and predicts answers.

Pipeline (Devlin et al. 2018, section 4.2 and 4.3; the reference release's
`run_squad.py` behaviour, SPEC 6.2):

  1. `read_squad_examples`: SQuAD JSON -> `SquadExample`s (whitespace-split
     document words; training answers located by `answer_start`).
  2. `convert_examples_to_features`: WordPiece, sliding document spans of
     `[CLS] query [SEP] span [SEP]`, streamed one `InputFeatures` at a time to
     a `FeatureWriter` (a TFRecord), so memory does not grow with the
     number of features.
  3. `model_fn_builder`: BERT plus one dense layer giving per-token start and
     end logits (`cls/squad/output_weights`, `cls/squad/output_bias`); the
     loss is the mean of the start and end cross-entropies.
  4. `write_predictions`: n-best span search, mapping the best sub-token span
     back to the original text (`get_final_text`), and for SQuAD 2.0 the null
     answer. Writes `predictions.json`, `nbest_predictions.json` and, for 2.0,
     `null_odds.json` to `--output_dir`.
  5. Beyond the reference: when `--predict_file` carries answers, the official
     SQuAD scores (`squad_metrics`) go to `eval_results.json`, and for 2.0 the
     predictions re-decided at the best null threshold to
     `predictions_best_threshold.json`.

Example (SQuAD 1.1):
  python run_squad.py --vocab_file=$BERT_DIR/vocab.txt \
    --bert_config_file=$BERT_DIR/bert_config.json \
    --init_checkpoint=$BERT_DIR/bert_model.ckpt --do_train=True \
    --train_file=$SQUAD_DIR/train-v1.1.json --do_predict=True \
    --predict_file=$SQUAD_DIR/dev-v1.1.json --train_batch_size=12 \
    --learning_rate=3e-5 --num_train_epochs=2.0 --max_seq_length=384 \
    --doc_stride=128 --output_dir=/tmp/squad_base/
"""

import collections
import json
import math
import os
import random
import unicodedata

from absl import flags
from absl import logging
import tensorflow.compat.v1 as tf

import estimator_utils
import modeling
import squad_metrics
import tokenization
import training_options

FLAGS = flags.FLAGS

# Document words are split on these characters only (reference behaviour:
# U+202F NARROW NO-BREAK SPACE is included, U+00A0 and other spaces are not).
_DOC_SPLIT_CHARS = frozenset(" \t\r\n\u202f")
_FIRST_UNIQUE_ID = 1000000000
_LOG_EVERY_EXAMPLES = 1000


def define_flags():
  """Defines the reference release's flags for this script."""
  flags.DEFINE_string("train_file", None,
                      "SQuAD JSON for training, e.g. train-v1.1.json.")
  flags.DEFINE_string("predict_file", None,
                      "SQuAD JSON to predict, e.g. dev-v1.1.json; when it "
                      "carries answers, the official scores are computed.")
  flags.DEFINE_integer("max_seq_length", 384,
                       "Tokens per input after WordPiece, query and document "
                       "span included; shorter inputs are padded.")
  flags.DEFINE_integer("doc_stride", 128,
                       "Tokens between the starts of consecutive document "
                       "spans of a long document.")
  flags.DEFINE_integer("max_query_length", 64,
                       "Questions are cut to this many tokens.")
  estimator_utils.define_model_flags()
  estimator_utils.define_fine_tuning_flags()
  training_options.define_training_flags()
  flags.DEFINE_integer("n_best_size", 20,
                       "Candidates kept per question in "
                       "nbest_predictions.json.")
  flags.DEFINE_integer("max_answer_length", 30,
                       "Longest answer, in WordPiece tokens.")
  flags.DEFINE_bool("verbose_logging", False,
                    "Log the cases where a predicted span cannot be mapped "
                    "back onto the original text.")
  flags.DEFINE_bool("version_2_with_negative", False,
                    "SQuAD 2.0: questions may have no answer.")
  flags.DEFINE_float("null_score_diff_threshold", 0.0,
                     "SQuAD 2.0: predict no answer when the null score minus "
                     "the best non-null score exceeds this.")


# ----------------------------------------------------------------------------
# Examples
# ----------------------------------------------------------------------------


class SquadExample(object):
  """One question about one paragraph.

  `doc_tokens` are the paragraph's whitespace-separated words;
  `start_position` / `end_position` index them (training only; -1/-1 for an
  impossible SQuAD 2.0 question; None when predicting).
  """

  def __init__(self, qas_id, question_text, doc_tokens, orig_answer_text=None,
               start_position=None, end_position=None, is_impossible=False):
    self.qas_id = qas_id
    self.question_text = question_text
    self.doc_tokens = doc_tokens
    self.orig_answer_text = orig_answer_text
    self.start_position = start_position
    self.end_position = end_position
    self.is_impossible = is_impossible

  def __repr__(self):
    return ("SquadExample(qas_id=%r, question_text=%r, doc_tokens=[%s], "
            "start_position=%r, end_position=%r, is_impossible=%r)" %
            (self.qas_id, self.question_text, " ".join(self.doc_tokens),
             self.start_position, self.end_position, self.is_impossible))


def read_squad_examples(input_file, is_training, version_2_with_negative=False):
  """Reads a SQuAD JSON file into `SquadExample`s, in file order.

  When training, an answer whose text is not found in the document words at
  its `answer_start` (or that is on no word, as in a context of only
  whitespace) is skipped with a warning (reference behaviour), and the
  number skipped is logged at the end.

  Args:
    input_file: str, path of a SQuAD 1.1 / 2.0 JSON file.
    is_training: bool; only then are answers and `is_impossible` read.
    version_2_with_negative: bool, honour `is_impossible` (SQuAD 2.0).

  Returns:
    list of `SquadExample`.

  Raises:
    FileNotFoundError: `input_file` does not exist.
    ValueError: the file is not JSON or not SQuAD-shaped (the message names
      the missing field), a question id appears twice, or an answerable
      training question does not have exactly one answer.
  """
  examples = []
  skipped = 0
  seen_ids = {}
  for where, context, qas in _iter_paragraphs(input_file):
    doc_tokens, char_to_word_offset = _split_document(context)
    for q_index, qa in enumerate(qas):
      q_where = "%s.qas[%d]" % (where, q_index)
      qas_id = _field(qa, "id", object, input_file, q_where)
      if qas_id in seen_ids:
        raise ValueError("%s: question id %r appears twice (%s and %s); ids "
                         "must be unique" % (input_file, qas_id,
                                             seen_ids[qas_id], q_where))
      seen_ids[qas_id] = q_where
      question = _field(qa, "question", str, input_file, q_where)
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
  """Returns the list under the top-level "data" key of a SQuAD JSON file.

  Raises:
    FileNotFoundError: `input_file` does not exist.
    ValueError: not valid JSON, or no "data" list.
  """
  if not tf.io.gfile.exists(input_file):
    raise FileNotFoundError("%s: no such file (expected a SQuAD JSON file)" %
                            input_file)
  with tf.io.gfile.GFile(input_file, "r") as f:
    text = f.read()
  try:
    parsed = json.loads(text)
  except ValueError as e:
    raise ValueError("%s: not valid JSON (%s)" % (input_file, e)) from e
  return _field(parsed, "data", list, input_file, "the top level")


def _field(obj, key, kind, input_file, where):
  """obj[key], checked to be a `kind`; a one-line error names what is wrong."""
  if not isinstance(obj, dict):
    raise ValueError("%s: %s is not a JSON object (not a SQuAD file?)" %
                     (input_file, where))
  if key not in obj:
    raise ValueError("%s: %s has no %r field (not a SQuAD file?)" %
                     (input_file, where, key))
  value = obj[key]
  if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
    raise ValueError("%s: %s.%s is %r, expected %s" %
                     (input_file, where, key, value, _KIND_NAMES[kind]))
  return value


_KIND_NAMES = {object: "a value", str: "a string", list: "a list",
               int: "an integer"}


def _iter_paragraphs(input_file):
  """Yields (location, context, qas) for every paragraph of the file."""
  data = load_squad_data(input_file)
  for a_index, article in enumerate(data):
    a_where = "data[%d]" % a_index
    paragraphs = _field(article, "paragraphs", list, input_file, a_where)
    for p_index, paragraph in enumerate(paragraphs):
      p_where = "%s.paragraphs[%d]" % (a_where, p_index)
      context = _field(paragraph, "context", str, input_file, p_where)
      qas = _field(paragraph, "qas", list, input_file, p_where)
      yield p_where, context, qas


def _split_document(context):
  """Splits a paragraph into words on `_DOC_SPLIT_CHARS`.

  Returns:
    (doc_tokens, char_to_word_offset): the words, and for every character of
    `context` the index of its word (a separator maps to the word before it,
    -1 before the first word).
  """
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
    return "", -1, -1, True
  answers = _field(qa, "answers", list, input_file, where)
  if len(answers) != 1:
    raise ValueError(
        "For training, each question should have exactly 1 answer. (%s: %s "
        "id %r has %d; SQuAD 2.0 data needs --version_2_with_negative)" %
        (input_file, where, qa["id"], len(answers)))
  text = _field(answers[0], "text", str, input_file, where + ".answers[0]")
  offset = _field(answers[0], "answer_start", int, input_file,
                  where + ".answers[0]")
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


class InputFeatures(object):
  """The model inputs for one document span of one example.

  `token_to_orig_map` and `token_is_max_context` are keyed by position in
  `tokens` (document tokens only). `start_position` / `end_position` are
  positions in `tokens` (training only; 0/0 = `[CLS]` when the span does not
  hold the answer or the question is impossible).
  """

  def __init__(self, unique_id, example_index, doc_span_index, tokens,
               token_to_orig_map, token_is_max_context, input_ids, input_mask,
               segment_ids, start_position=None, end_position=None,
               is_impossible=None):
    self.unique_id = unique_id
    self.example_index = example_index
    self.doc_span_index = doc_span_index
    self.tokens = tokens
    self.token_to_orig_map = token_to_orig_map
    self.token_is_max_context = token_is_max_context
    self.input_ids = input_ids
    self.input_mask = input_mask
    self.segment_ids = segment_ids
    self.start_position = start_position
    self.end_position = end_position
    self.is_impossible = is_impossible


# The sub-tokens of a document and the maps between them and its words.
_TokenizedDoc = collections.namedtuple(
    "_TokenizedDoc", ["tokens", "tok_to_orig", "orig_to_tok"])
_DocSpan = collections.namedtuple("_DocSpan", ["start", "length"])


def check_span_lengths(max_seq_length, doc_stride, max_query_length):
  """Refuses span settings that leave no room for the document.

  Raises:
    ValueError: `max_seq_length` cannot hold `max_query_length` query tokens,
      `[CLS]` and two `[SEP]`s and one document token, or `doc_stride` < 1.
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
  """Turns examples into span features, handing each to `output_fn`.

  Features are streamed: none is kept here, so memory does not grow with
  their number. `unique_id`s count from 1000000000 in output order.

  Args:
    examples: iterable of `SquadExample`.
    tokenizer: a `tokenization.FullTokenizer`.
    max_seq_length: int, tokens per feature.
    doc_stride: int, tokens between consecutive span starts.
    max_query_length: int, questions are cut to this many tokens.
    is_training: bool; then answer positions are filled in.
    output_fn: callable taking one `InputFeatures`.

  Returns:
    int, the number of features written.

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
  spans = _doc_spans(len(doc.tokens), max_tokens_for_doc, doc_stride)
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
  """Narrows a word-level span to the sub-tokens that spell the answer.

  The answer "1895" in the word "(1895-1943)." should cover only the
  sub-token `1895`. Starts are scanned left to right and, for each start,
  ends right to left; the first span whose tokens equal the tokenized answer
  wins. With no match, the word-level span is kept.
  """
  answer_tokens = " ".join(tokenizer.tokenize(answer_text))
  for new_start in range(start, end + 1):
    for new_end in range(end, new_start - 1, -1):
      if " ".join(doc_tokens[new_start:new_end + 1]) == answer_tokens:
        return new_start, new_end
  return start, end


def _doc_spans(num_tokens, max_tokens_for_doc, doc_stride):
  """Overlapping windows of at most `max_tokens_for_doc` tokens.

  Windows start at 0 and advance by min(length, doc_stride) until one
  reaches the end of the document.
  """
  spans = []
  start = 0
  while start < num_tokens:
    length = min(num_tokens - start, max_tokens_for_doc)
    spans.append(_DocSpan(start, length))
    if start + length == num_tokens:
      break
    start += min(length, doc_stride)
  return spans


def _is_max_context(spans, span_index, position):
  """Whether `spans[span_index]` gives token `position` its most context.

  The score of a span for a token is min(left context, right context) +
  0.01 * span length; the earliest best-scoring span wins ties.
  """
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
    token_is_max_context[len(tokens)] = _is_max_context(spans, span_index,
                                                        doc_index)
    tokens.append(doc.tokens[doc_index])
    segment_ids.append(1)
  tokens.append("[SEP]")
  segment_ids.append(1)
  input_ids = tokenizer.convert_tokens_to_ids(tokens)
  padding = [0] * (max_seq_length - len(input_ids))
  input_mask = [1] * len(input_ids) + padding
  return InputFeatures(
      unique_id=None, example_index=None, doc_span_index=span_index,
      tokens=tokens, token_to_orig_map=token_to_orig_map,
      token_is_max_context=token_is_max_context,
      input_ids=input_ids + padding, input_mask=input_mask,
      segment_ids=segment_ids + padding)


def _positions_in_span(answer_span, span, doc_offset):
  """Answer positions within one feature; 0/0 (`[CLS]`) when not inside."""
  if answer_span is None:
    return 0, 0
  start, end = answer_span
  if start < span.start or end > span.start + span.length - 1:
    return 0, 0
  return start - span.start + doc_offset, end - span.start + doc_offset


class FeatureWriter(object):
  """Writes `InputFeatures` to a TFRecord file, atomically.

  Records are written to a temporary file renamed to `filename` by `close()`.
  Used as a context manager, an exception discards the temporary file.
  Keys, in this order (the serialized bytes depend on it): `unique_ids`,
  `input_ids`, `input_mask`, `segment_ids`, and when training
  `start_positions`, `end_positions`, `is_impossible` (0 or 1).
  """

  def __init__(self, filename, is_training):
    self.filename = filename
    self.is_training = is_training
    self.num_features = 0
    self._temp = estimator_utils.temp_path_for(filename)
    self._writer = tf.io.TFRecordWriter(self._temp)

  def process_feature(self, feature):
    """Serializes one feature and appends it to the file."""
    self.num_features += 1
    int64 = estimator_utils.int64_feature
    features = collections.OrderedDict()
    features["unique_ids"] = int64([feature.unique_id])
    features["input_ids"] = int64(feature.input_ids)
    features["input_mask"] = int64(feature.input_mask)
    features["segment_ids"] = int64(feature.segment_ids)
    if self.is_training:
      features["start_positions"] = int64([feature.start_position])
      features["end_positions"] = int64([feature.end_position])
      features["is_impossible"] = int64([1 if feature.is_impossible else 0])
    example = tf.train.Example(features=tf.train.Features(feature=features))
    self._writer.write(example.SerializeToString())

  def close(self):
    """Finishes the file and moves it to `filename`."""
    self._writer.close()
    estimator_utils.commit_temp(self._temp, self.filename)

  def abort(self):
    """Discards everything written so far."""
    self._writer.close()
    if tf.io.gfile.exists(self._temp):
      tf.io.gfile.remove(self._temp)

  def __enter__(self):
    return self

  def __exit__(self, exc_type, exc_value, traceback):
    if exc_type is None:
      self.close()
    else:
      self.abort()
    return False


# ----------------------------------------------------------------------------
# Model
# ----------------------------------------------------------------------------


def create_model(bert_config, is_training, input_ids, input_mask, segment_ids,
                 use_one_hot_embeddings, compute_dtype=tf.float32):
  """BERT with a per-token start/end classifier.

  Args:
    bert_config: `modeling.BertConfig`.
    is_training: bool, enables dropout.
    input_ids: int32 Tensor of shape [batch_size, seq_length].
    input_mask: int32 Tensor of shape [batch_size, seq_length].
    segment_ids: int32 Tensor of shape [batch_size, seq_length].
    use_one_hot_embeddings: bool, one-hot matmul embeddings (for TPUs).
    compute_dtype: the encoder's compute dtype (see `modeling.BertModel`);
      the logits are float32.

  Returns:
    (start_logits, end_logits): float32 Tensors of shape
    [batch_size, seq_length].
  """
  model = modeling.BertModel(
      config=bert_config, is_training=is_training, input_ids=input_ids,
      input_mask=input_mask, token_type_ids=segment_ids,
      use_one_hot_embeddings=use_one_hot_embeddings,
      compute_dtype=compute_dtype)
  final_hidden = model.get_sequence_output()
  batch_size, seq_length, hidden_size = modeling.get_shape_list(
      final_hidden, expected_rank=3)
  # Kept for parity: a fixed stddev of 0.02, not config.initializer_range.
  output_weights = tf.get_variable(
      "cls/squad/output_weights", [2, hidden_size],
      initializer=tf.truncated_normal_initializer(stddev=0.02))
  output_bias = tf.get_variable("cls/squad/output_bias", [2],
                                initializer=tf.zeros_initializer())
  # [B, S, H] -> [B * S, H]
  hidden_matrix = tf.reshape(final_hidden,
                             [batch_size * seq_length, hidden_size])
  logits = tf.matmul(hidden_matrix, output_weights, transpose_b=True)
  logits = tf.nn.bias_add(logits, output_bias)
  # [B * S, 2] -> [B, S, 2] -> [2, B, S]
  logits = tf.reshape(logits, [batch_size, seq_length, 2])
  logits = tf.transpose(logits, [2, 0, 1])
  start_logits, end_logits = tf.unstack(logits, axis=0)
  return start_logits, end_logits


def _span_loss(start_logits, end_logits, start_positions, end_positions):
  """Mean of the start and end cross-entropies over the batch.

  Args:
    start_logits: float32 Tensor of shape [batch_size, seq_length].
    end_logits: float32 Tensor of shape [batch_size, seq_length].
    start_positions: int32 Tensor of shape [batch_size].
    end_positions: int32 Tensor of shape [batch_size].

  Returns:
    float32 scalar Tensor.
  """
  seq_length = modeling.get_shape_list(start_logits, expected_rank=2)[1]

  def cross_entropy(logits, positions):
    one_hot = tf.one_hot(positions, depth=seq_length, dtype=tf.float32)
    log_probs = tf.nn.log_softmax(logits, axis=-1)
    return -tf.reduce_mean(tf.reduce_sum(one_hot * log_probs, axis=-1))

  return (cross_entropy(start_logits, start_positions) +
          cross_entropy(end_logits, end_positions)) / 2.0


def model_fn_builder(bert_config, init_checkpoint, learning_rate,
                     num_train_steps, num_warmup_steps, use_tpu,
                     use_one_hot_embeddings, options=None):
  """Returns the `model_fn` for `TPUEstimator` (TRAIN and PREDICT modes).

  PREDICT yields `unique_ids`, `start_logits` and `end_logits` per feature.
  `options` (optional `optimization.OptimizerOptions`) sets the encoder's
  compute dtype and the optimizer; default the reference's.
  """

  def model_fn(features, labels, mode, params):
    """Builds the graph for one mode."""
    del labels, params
    start_logits, end_logits = create_model(
        bert_config=bert_config,
        is_training=(mode == tf.estimator.ModeKeys.TRAIN),
        input_ids=features["input_ids"], input_mask=features["input_mask"],
        segment_ids=features["segment_ids"],
        use_one_hot_embeddings=use_one_hot_embeddings,
        compute_dtype=options.compute_dtype if options else tf.float32)
    scaffold_fn = estimator_utils.init_from_checkpoint(init_checkpoint,
                                                       use_tpu)
    if mode == tf.estimator.ModeKeys.TRAIN:
      total_loss = _span_loss(start_logits, end_logits,
                              features["start_positions"],
                              features["end_positions"])
      return estimator_utils.train_spec(
          total_loss, learning_rate, num_train_steps, num_warmup_steps,
          use_tpu, scaffold_fn, options=options)
    if mode == tf.estimator.ModeKeys.PREDICT:
      predictions = {"unique_ids": features["unique_ids"],
                     "start_logits": start_logits,
                     "end_logits": end_logits}
      return tf.estimator.tpu.TPUEstimatorSpec(
          mode=mode, predictions=predictions, scaffold_fn=scaffold_fn)
    raise ValueError("run_squad supports only the TRAIN and PREDICT modes, "
                     "got %s" % mode)

  return model_fn


def input_fn_builder(input_file, seq_length, is_training, drop_remainder):
  """An `input_fn` over a `FeatureWriter` TFRecord file."""
  name_to_features = {
      "unique_ids": tf.io.FixedLenFeature([], tf.int64),
      "input_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
      "input_mask": tf.io.FixedLenFeature([seq_length], tf.int64),
      "segment_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
  }
  if is_training:
    name_to_features["start_positions"] = tf.io.FixedLenFeature([], tf.int64)
    name_to_features["end_positions"] = tf.io.FixedLenFeature([], tf.int64)
  return estimator_utils.tfrecord_input_fn_builder(
      [input_file], name_to_features, is_training, drop_remainder)


# ----------------------------------------------------------------------------
# Predictions
# ----------------------------------------------------------------------------

RawResult = collections.namedtuple("RawResult",
                                   ["unique_id", "start_logits", "end_logits"])

# What `write_predictions` wrote: question id -> text, -> n-best list of
# dicts, and (SQuAD 2.0, else empty) -> null odds.
WrittenPredictions = collections.namedtuple(
    "WrittenPredictions", ["predictions", "nbest", "null_odds"])

_Candidate = collections.namedtuple(
    "_Candidate",
    ["feature_index", "start_index", "end_index", "start_logit", "end_logit"])
_NbestEntry = collections.namedtuple("_NbestEntry",
                                     ["text", "start_logit", "end_logit"])


def write_predictions(all_examples, all_features, all_results, n_best_size,
                      max_answer_length, do_lower_case, output_prediction_file,
                      output_nbest_file, output_null_log_odds_file,
                      version_2_with_negative=False,
                      null_score_diff_threshold=0.0, verbose_logging=False):
  """Picks each question's answer from the logits and writes the JSON files.

  Writes `output_prediction_file` (id -> text, "" = no answer),
  `output_nbest_file` (id -> list of {text, probability, start_logit,
  end_logit}) and, with `version_2_with_negative`,
  `output_null_log_odds_file` (id -> null score minus best non-null score).
  Each is `json.dumps(obj, indent=4)` plus a newline, written atomically.

  Args:
    all_examples: list of `SquadExample` (prediction mode).
    all_features: the examples' features, or any objects with their
      `unique_id`, `example_index`, `tokens`, `token_to_orig_map` and
      `token_is_max_context`.
    all_results: iterable of `RawResult`, one per feature.
    n_best_size: int, candidates per question.
    max_answer_length: int, longest answer in sub-tokens.
    do_lower_case: bool, as the tokenizer was configured.
    output_prediction_file, output_nbest_file, output_null_log_odds_file: str.
    version_2_with_negative: bool, allow "no answer" (SQuAD 2.0).
    null_score_diff_threshold: float, predict "" when the null odds exceed it.
    verbose_logging: bool, log spans that cannot be mapped back.

  Returns:
    `WrittenPredictions` holding the three dicts.
  """
  logging.info("Writing predictions to %s and %s", output_prediction_file,
               output_nbest_file)
  features_by_example = collections.defaultdict(list)
  for feature in all_features:
    features_by_example[feature.example_index].append(feature)
  results_by_id = {result.unique_id: result for result in all_results}
  predictions = collections.OrderedDict()
  nbest_json = collections.OrderedDict()
  null_odds = collections.OrderedDict()
  for example_index, example in enumerate(all_examples):
    features = features_by_example[example_index]
    candidates, null = _span_candidates(features, results_by_id, n_best_size,
                                        max_answer_length,
                                        version_2_with_negative)
    nbest = _nbest_entries(example, features, candidates, null, n_best_size,
                           do_lower_case, verbose_logging)
    nbest_json[example.qas_id] = _nbest_to_json(nbest)
    if not version_2_with_negative:
      predictions[example.qas_id] = nbest[0].text
    else:
      odds, text = _decide_null(null, nbest, null_score_diff_threshold)
      null_odds[example.qas_id] = odds
      predictions[example.qas_id] = text
  _write_json(output_prediction_file, predictions)
  _write_json(output_nbest_file, nbest_json)
  if version_2_with_negative:
    _write_json(output_null_log_odds_file, null_odds)
  return WrittenPredictions(predictions, nbest_json, null_odds)


def _best_indexes(logits, n_best_size):
  """Positions of the `n_best_size` largest logits (ties: lower first)."""
  # A stable sort: reverse=True keeps equal logits in position order.
  ranked = sorted(range(len(logits)), key=logits.__getitem__, reverse=True)
  return ranked[:n_best_size]


def _feature_spans(feature, result, n_best_size, max_answer_length):
  """(start, end) pairs of one feature, in start-rank then end-rank order.

  A pair is kept when both ends are document tokens of this feature, the
  start token has its maximal context here, and the span is at most
  `max_answer_length` sub-tokens long, end not before start.
  """
  num_tokens = len(feature.tokens)
  starts = [i for i in _best_indexes(result.start_logits, n_best_size)
            if i < num_tokens and i in feature.token_to_orig_map and
            feature.token_is_max_context.get(i, False)]
  ends = [i for i in _best_indexes(result.end_logits, n_best_size)
          if i < num_tokens and i in feature.token_to_orig_map]
  return [(start, end) for start in starts for end in ends
          if start <= end and end - start + 1 <= max_answer_length]


def _span_candidates(features, results_by_id, n_best_size, max_answer_length,
                     version_2_with_negative):
  """All valid spans of an example's features, best first.

  Returns:
    (candidates, null): `_Candidate`s sorted by start + end logit (a stable
    sort, so ties keep feature, start-rank, end-rank order, null last), and
    (null score, null `_Candidate`) for the feature with the lowest `[CLS]`
    score (None for SQuAD 1.1 or an example without features).
  """
  candidates = []
  null = None
  for feature_index, feature in enumerate(features):
    result = results_by_id[feature.unique_id]
    if version_2_with_negative:
      null_score = result.start_logits[0] + result.end_logits[0]
      if null is None or null_score < null[0]:
        null = (null_score, _Candidate(feature_index, 0, 0,
                                       result.start_logits[0],
                                       result.end_logits[0]))
    for start, end in _feature_spans(feature, result, n_best_size,
                                     max_answer_length):
      candidates.append(_Candidate(feature_index, start, end,
                                   result.start_logits[start],
                                   result.end_logits[end]))
  if null is not None:
    candidates.append(null[1])
  candidates.sort(key=lambda c: c.start_logit + c.end_logit, reverse=True)
  return candidates, null


def _nbest_entries(example, features, candidates, null, n_best_size,
                   do_lower_case, verbose_logging):
  """The first `n_best_size` distinct answer texts, plus the null entry."""
  nbest = []
  seen = set()
  for candidate in candidates:
    if len(nbest) >= n_best_size:
      break
    text = ""
    if candidate.start_index > 0:
      text = _candidate_text(example, features[candidate.feature_index],
                             candidate, do_lower_case, verbose_logging)
    if text in seen:
      continue
    seen.add(text)
    nbest.append(_NbestEntry(text, candidate.start_logit,
                             candidate.end_logit))
  if null is not None and "" not in seen:
    nbest.append(_NbestEntry("", null[1].start_logit, null[1].end_logit))
  if not nbest:
    nbest.append(_NbestEntry("empty", 0.0, 0.0))
  return nbest


def _candidate_text(example, feature, candidate, do_lower_case,
                    verbose_logging):
  """The original-text answer of one sub-token span."""
  tok_tokens = feature.tokens[candidate.start_index:candidate.end_index + 1]
  orig_start = feature.token_to_orig_map[candidate.start_index]
  orig_end = feature.token_to_orig_map[candidate.end_index]
  orig_text = " ".join(example.doc_tokens[orig_start:orig_end + 1])
  tok_text = " ".join(tok_tokens).replace(" ##", "").replace("##", "")
  tok_text = " ".join(tok_text.split())
  return get_final_text(tok_text, orig_text, do_lower_case, verbose_logging)


def _nbest_to_json(nbest):
  """n-best entries as JSON-ready dicts with softmax probabilities."""
  probs = _softmax([entry.start_logit + entry.end_logit for entry in nbest])
  return [collections.OrderedDict([("text", entry.text),
                                   ("probability", prob),
                                   ("start_logit", entry.start_logit),
                                   ("end_logit", entry.end_logit)])
          for entry, prob in zip(nbest, probs)]


def _softmax(scores):
  """Softmax in Python floats (a plain left-to-right sum, kept for parity)."""
  if not scores:
    return []
  max_score = max(scores)
  exps = [math.exp(score - max_score) for score in scores]
  total = 0.0
  for value in exps:
    total += value
  return [value / total for value in exps]


def _decide_null(null, nbest, threshold):
  """SQuAD 2.0: (null odds, predicted text) for one question.

  The odds are the null score minus the best non-null entry's start and end
  logits (in that order). Without any non-null entry the prediction is ""
  and the odds are taken against zero logits.
  """
  score_null = null[0] if null is not None else 0.0
  best = next((entry for entry in nbest if entry.text), None)
  if best is None:
    return score_null, ""
  odds = score_null - best.start_logit - best.end_logit
  return odds, ("" if odds > threshold else best.text)


def _write_json(path, obj):
  with estimator_utils.atomic_write(path) as f:
    f.write(json.dumps(obj, indent=4) + "\n")


def get_final_text(pred_text, orig_text, do_lower_case, verbose_logging=False):
  """Maps a normalized predicted answer back onto the original text.

  `pred_text` comes from sub-tokens, so it is lower-cased, accent-stripped
  and punctuation-split ("steve smith"), while `orig_text` is the span's
  original words ("Steve Smith's"). The original text is run through
  `BasicTokenizer`, the prediction is found there (first occurrence), and its
  character positions are carried back to `orig_text` ("Steve Smith").

  Difference from the reference: the reference aligns the two texts by
  removing U+0020 spaces only, so any other character the tokenizer drops or
  turns into a space (U+00A0 and the other Unicode spaces, U+2028/U+2029,
  control and format characters such as U+200B; also decomposed accents
  dropped and Hangul syllables split into jamo when lower-casing) breaks the
  alignment and the whole original text is returned ("10<NBSP>km" for "km").
  Here every original character is aligned with what the tokenizer makes of
  it, so such characters no longer matter. Texts without them give the
  reference's result.

  Args:
    pred_text: str, the prediction in tokenizer-normalized form.
    orig_text: str, the original words of the span, joined with spaces.
    do_lower_case: bool, as the tokenizer was configured.
    verbose_logging: bool, log why a mapping failed.

  Returns:
    str, a substring of `orig_text` (all of it when no mapping is found).
  """
  tokenizer = tokenization.BasicTokenizer(do_lower_case=do_lower_case)
  tok_text = " ".join(tokenizer.tokenize(orig_text))
  start = tok_text.find(pred_text)
  if start == -1:
    if verbose_logging:
      logging.info("Unable to find text: %r in %r", pred_text, orig_text)
    return orig_text
  end = start + len(pred_text) - 1
  # Non-space characters of tok_text <-> the original character each comes
  # from; the two lists line up when the tokenizer kept the text's length.
  tok_positions = [i for i, char in enumerate(tok_text) if char != " "]
  orig_positions = _normalized_char_origins(orig_text, tokenizer)
  if len(tok_positions) != len(orig_positions):
    if verbose_logging:
      logging.info("Length not equal after stripping spaces: %r vs %r",
                   orig_text, tok_text)
    return orig_text
  tok_to_ns = {pos: ns for ns, pos in enumerate(tok_positions)}
  if start not in tok_to_ns or end not in tok_to_ns:
    if verbose_logging:
      logging.info("Couldn't map the start or end position of %r", pred_text)
    return orig_text
  orig_end = _extend_over_dropped_marks(
      orig_text, orig_positions[tok_to_ns[end]], orig_positions)
  return orig_text[orig_positions[tok_to_ns[start]]:orig_end + 1]


def _extend_over_dropped_marks(text, end, origins):
  """Moves `end` past combining marks the tokenizer dropped (accents).

  "Cafe" + U+0301 (a decomposed accent) lower-cased is "cafe": the answer
  must keep its accent.
  """
  produced = set(origins)  # characters that left something after tokenizing
  while (end + 1 < len(text) and end + 1 not in produced and
         unicodedata.category(text[end + 1]) == "Mn"):
    end += 1
  return end


_NORMALIZED_LENGTHS = {True: {}, False: {}}


def _normalized_char_origins(text, tokenizer):
  """For each non-space character the tokenizer makes of `text`, its source.

  Each character is normalized on its own (dropped, a space, or itself,
  lower-cased and accent-stripped, possibly several characters); lengths
  add up over a word, so this lines up with tokenizing the whole text.

  Returns:
    list of int, indexes into `text`.
  """
  cache = _NORMALIZED_LENGTHS[bool(tokenizer.do_lower_case)]
  origins = []
  for index, char in enumerate(text):
    count = cache.get(char)
    if count is None:
      count = len("".join(tokenizer.tokenize(char)))
      cache[char] = count
    origins.extend([index] * count)
  return origins


# ----------------------------------------------------------------------------
# main
# ----------------------------------------------------------------------------


def _check_flags():
  """Validates the flags; returns the `BertConfig`.

  Raises:
    ValueError: a flag is missing or out of range.
  """
  if not FLAGS.do_train and not FLAGS.do_predict:
    raise ValueError("At least one of --do_train or --do_predict must be "
                     "True.")
  for name in ("vocab_file", "output_dir"):
    if not getattr(FLAGS, name):
      raise ValueError("--%s is required" % name)
  if FLAGS.do_train and not FLAGS.train_file:
    raise ValueError("--do_train needs --train_file (a SQuAD JSON file)")
  if FLAGS.do_predict and not FLAGS.predict_file:
    raise ValueError("--do_predict needs --predict_file (a SQuAD JSON file)")
  bert_config = estimator_utils.load_bert_config(FLAGS.bert_config_file)
  estimator_utils.check_max_seq_length(FLAGS.max_seq_length, bert_config)
  try:
    check_span_lengths(FLAGS.max_seq_length, FLAGS.doc_stride,
                       FLAGS.max_query_length)
  except ValueError as e:
    raise ValueError("--" + str(e)) from e
  for name in ("n_best_size", "max_answer_length", "train_batch_size",
               "predict_batch_size"):
    if getattr(FLAGS, name) < 1:
      raise ValueError("--%s=%d: expected at least 1" %
                       (name, getattr(FLAGS, name)))
  return bert_config


def _read_train_examples():
  """Training examples, shuffled once (seed 12345, as the reference)."""
  examples = read_squad_examples(
      FLAGS.train_file, is_training=True,
      version_2_with_negative=FLAGS.version_2_with_negative)
  if not examples:
    # Training on nothing would loop forever over an empty dataset.
    raise ValueError("--train_file: %s holds no usable training question "
                     "(none, or all skipped)" % FLAGS.train_file)
  random.Random(12345).shuffle(examples)
  return examples


def _num_train_steps(num_examples):
  """(train steps, warmup steps) for the training set size."""
  # Steps count updates, of batch size times accumulation examples each.
  return estimator_utils.fine_tuning_steps(
      num_examples, FLAGS.train_batch_size * FLAGS.gradient_accumulation_steps,
      FLAGS.num_train_epochs, FLAGS.warmup_proportion)


def _train(estimator, tokenizer, examples, num_train_steps):
  """Writes the training features and fine-tunes."""
  train_file = os.path.join(FLAGS.output_dir, "train.tf_record")
  with FeatureWriter(train_file, is_training=True) as writer:
    convert_examples_to_features(
        examples, tokenizer, FLAGS.max_seq_length, FLAGS.doc_stride,
        FLAGS.max_query_length, is_training=True,
        output_fn=writer.process_feature)
  logging.info("***** Running training *****")
  logging.info("  %d examples, %d features, batch size %d, %d steps",
               len(examples), writer.num_features, FLAGS.train_batch_size,
               num_train_steps)
  input_fn = input_fn_builder(train_file, FLAGS.max_seq_length,
                              is_training=True, drop_remainder=True)
  hook = estimator_utils.ProgressHook(
      FLAGS.train_batch_size * FLAGS.gradient_accumulation_steps,
      num_train_steps)
  estimator.train(input_fn=input_fn, max_steps=num_train_steps, hooks=[hook])


# The parts of a feature that `write_predictions` needs (no padded ids).
_FeatureMetadata = collections.namedtuple(
    "_FeatureMetadata", ["unique_id", "example_index", "doc_span_index",
                         "tokens", "token_to_orig_map",
                         "token_is_max_context"])


def _predict(estimator, tokenizer):
  """Predicts --predict_file; returns (examples, `WrittenPredictions`)."""
  examples = read_squad_examples(
      FLAGS.predict_file, is_training=False,
      version_2_with_negative=FLAGS.version_2_with_negative)
  eval_file = os.path.join(FLAGS.output_dir, "eval.tf_record")
  metadata = []
  with FeatureWriter(eval_file, is_training=False) as writer:

    def keep_and_write(feature):
      metadata.append(_FeatureMetadata(
          feature.unique_id, feature.example_index, feature.doc_span_index,
          feature.tokens, feature.token_to_orig_map,
          feature.token_is_max_context))
      writer.process_feature(feature)

    convert_examples_to_features(
        examples, tokenizer, FLAGS.max_seq_length, FLAGS.doc_stride,
        FLAGS.max_query_length, is_training=False, output_fn=keep_and_write)
  logging.info("***** Running predictions *****")
  logging.info("  %d examples, %d features, batch size %d", len(examples),
               len(metadata), FLAGS.predict_batch_size)
  input_fn = input_fn_builder(eval_file, FLAGS.max_seq_length,
                              is_training=False, drop_remainder=False)
  results = []
  for prediction in estimator.predict(input_fn, yield_single_examples=True):
    results.append(RawResult(
        unique_id=int(prediction["unique_ids"]),
        start_logits=[float(x) for x in prediction["start_logits"].flat],
        end_logits=[float(x) for x in prediction["end_logits"].flat]))
    if len(results) % 1000 == 0:
      logging.info("Predicted %d of %d features", len(results), len(metadata))
  out = FLAGS.output_dir
  written = write_predictions(
      examples, metadata, results, FLAGS.n_best_size, FLAGS.max_answer_length,
      FLAGS.do_lower_case, os.path.join(out, "predictions.json"),
      os.path.join(out, "nbest_predictions.json"),
      os.path.join(out, "null_odds.json"),
      version_2_with_negative=FLAGS.version_2_with_negative,
      null_score_diff_threshold=FLAGS.null_score_diff_threshold,
      verbose_logging=FLAGS.verbose_logging)
  return written


def score_predictions(predict_file, written, version_2_with_negative,
                      output_dir):
  """Official SQuAD scores of `written` against `predict_file`'s answers.

  Writes `eval_results.json` to `output_dir` and, for SQuAD 2.0,
  `predictions_best_threshold.json` (predictions re-decided at the null
  threshold that gives `best_f1`). Questions without gold answers are left
  out (SQuAD 1.1: no or empty "answers"; SQuAD 2.0: no "answers" field).

  Args:
    predict_file: str, the SQuAD JSON that was predicted.
    written: `WrittenPredictions` from `write_predictions`.
    version_2_with_negative: bool.
    output_dir: str.

  Returns:
    OrderedDict of scores, or None when the file carries no answers.
  """
  gold = squad_metrics.gold_answers(load_squad_data(predict_file))
  scorable = collections.OrderedDict(
      (q, answers) for q, answers in gold.items()
      if answers is not None and (answers or version_2_with_negative))
  if not scorable:
    logging.info("%s carries no answers; no scores computed", predict_file)
    return None
  if len(scorable) < len(gold):
    logging.warning("%d of %d questions have no gold answers and are left "
                    "out of the scores", len(gold) - len(scorable), len(gold))
  if version_2_with_negative:
    best_non_null = collections.OrderedDict(
        (q, next((e["text"] for e in nbest if e["text"]), ""))
        for q, nbest in written.nbest.items())
    results = squad_metrics.evaluate_v2(scorable, written.predictions,
                                        written.null_odds, best_non_null)
    best_predictions, _ = squad_metrics.best_f1_predictions(
        scorable, written.null_odds, best_non_null)
    _write_json(os.path.join(output_dir, "predictions_best_threshold.json"),
                best_predictions)
  else:
    results = squad_metrics.evaluate_v1(scorable, written.predictions)
  _write_json(os.path.join(output_dir, "eval_results.json"), results)
  logging.info("***** SQuAD scores (%s) *****", predict_file)
  for key, value in results.items():
    logging.info("  %s = %s", key, value)
  return results


def main(_):
  logging.set_verbosity(logging.INFO)
  bert_config = _check_flags()
  training = training_options.options_from_flags(FLAGS)
  init_checkpoint = None
  if FLAGS.init_checkpoint:
    init_checkpoint = estimator_utils.resolve_checkpoint(FLAGS.init_checkpoint)
  tokenization.validate_case_matches_checkpoint(FLAGS.do_lower_case,
                                                FLAGS.init_checkpoint)
  tokenizer = tokenization.FullTokenizer(vocab_file=FLAGS.vocab_file,
                                         do_lower_case=FLAGS.do_lower_case)
  estimator_utils.check_vocab_size(tokenizer, bert_config)
  tf.io.gfile.makedirs(FLAGS.output_dir)

  train_examples, num_train_steps, num_warmup_steps = None, None, None
  if FLAGS.do_train:
    train_examples = _read_train_examples()
    num_train_steps, num_warmup_steps = _num_train_steps(len(train_examples))

  run_config = training_options.configure_run_config(
      estimator_utils.run_config_from_flags(FLAGS, FLAGS.output_dir),
      training)
  model_fn = model_fn_builder(
      bert_config=bert_config, init_checkpoint=init_checkpoint,
      learning_rate=FLAGS.learning_rate, num_train_steps=num_train_steps,
      num_warmup_steps=num_warmup_steps, use_tpu=FLAGS.use_tpu,
      use_one_hot_embeddings=FLAGS.use_tpu,
      options=training.optimizer_options)
  estimator = estimator_utils.make_estimator(
      model_fn, run_config, FLAGS.use_tpu,
      train_batch_size=FLAGS.train_batch_size,
      predict_batch_size=FLAGS.predict_batch_size)

  if FLAGS.do_train:
    _train(estimator, tokenizer, train_examples, num_train_steps)
  if FLAGS.do_predict:
    written = _predict(estimator, tokenizer)
    score_predictions(FLAGS.predict_file, written,
                      FLAGS.version_2_with_negative, FLAGS.output_dir)


if __name__ == "__main__":
  define_flags()
  estimator_utils.run_main(main)
