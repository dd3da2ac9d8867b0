"""Reading, features and entity metrics for token classification (NER).

Used by `run_ner.py`; kept free of flags so each piece can be tested alone.

* Reading: `read_conll_file` reads CoNLL column files (CoNLL-2003's
  `token POS chunk NER`, WNUT-17's `token<TAB>tag`, or any other column
  count): one word per line, the token in column 0, the label in a chosen
  column; whitespace-only lines end a sentence, `-DOCSTART-` lines start a
  document and are never words.
* Tag schemes: IOB1 (CoNLL-2003's original tags), IOB2 (BIO) and IOBES;
  `detect_tag_scheme` tells them apart, `find_invalid_tags` counts tag
  sequences that break the declared scheme.
* Features: `convert_sentences_to_features` gives the first WordPiece of each
  word its word's label (Devlin et al. 2019, section 5.3); other pieces,
  `[CLS]`, `[SEP]` and padding have weight 0. A sentence longer than the
  model's input is cut into overlapping windows; each word is predicted from
  the window where it has the most context, as the reference's SQuAD script
  picks a token's span. With `document_context`, a sentence is encoded with
  the words of its neighbouring sentences in the document around it.
* Metrics: `entity_scores` computes entity-level precision, recall and F1
  with conlleval's chunking (seqeval's default mode) and token accuracy.
"""

import collections

from absl import logging
import numpy as np
from seqeval import metrics as seqeval_metrics
import tensorflow.compat.v1 as tf

from bert_tf.tasks import features as feature_utils
from bert_tf import io as io_utils
from bert_tf.tasks.squad import data as squad_data

DOCSTART = "-DOCSTART-"
TAG_SCHEMES = ("IOB1", "IOB2", "IOBES")
LABEL_LIST_FILE = "label_list.txt"


class Sentence(object):
  """One sentence of a CoNLL file.

  Attributes:
    words: list of str, the tokens (column 0), in file order.
    labels: list of str (one per word), or None for a one-column file.
    document: int, 0-based index of the sentence's document in its file
      (a file without `-DOCSTART-` lines is one document).
    lines: list of int, the 1-based line number of each word.
    path: str, the file it was read from.
  """

  def __init__(self, words, labels, document, lines, path):
    self.words = words
    self.labels = labels
    self.document = document
    self.lines = lines
    self.path = path


# ----------------------------------------------------------------------------
# Reading.
# ----------------------------------------------------------------------------


def _split_columns(line, delimiter):
  if delimiter == "\t":
    return line.split("\t")
  return [cell for cell in line.split(" ") if cell]


def read_conll_file(path, label_column=-1):
  """Reads a CoNLL column file into sentences.

  The column delimiter is a tab when the file's first word line holds one,
  else runs of spaces. Every word line must have that line's number of
  columns. A file with a single column has no labels (`Sentence.labels` is
  None).

  Args:
    path: str, the file (UTF-8; any `tf.io.gfile` file system).
    label_column: int, the column holding the label; negative counts from the
      end (-1: the last column, CoNLL-2003's NER tag).

  Returns:
    list of `Sentence`, in file order.

  Raises:
    FileNotFoundError: when `path` does not exist.
    ValueError: one line naming `path` (and the line): the file is empty or
      has no word line, a line is not UTF-8, a line has another number of
      columns, or `label_column` is outside the columns.
  """
  if not tf.io.gfile.exists(path):
    raise FileNotFoundError("%s: no such file" % path)
  with tf.io.gfile.GFile(path, "rb") as f:
    data = f.read()
  if not data.strip():
    raise ValueError("%s: the file is empty; expected CoNLL lines 'token ... "
                     "label' with a blank line between sentences" % path)
  sentences = []
  words, labels, lines = [], [], []
  document = -1  # Becomes 0 at the first -DOCSTART- or the first word.
  seen_docstart = False
  num_columns, first_line, delimiter, label_index = None, None, None, None

  def finish():
    if words:
      sentences.append(Sentence(list(words), list(labels) if labels else None,
                                max(document, 0), list(lines), path))
      del words[:], labels[:], lines[:]

  for index, raw in enumerate(data.split(b"\n")):
    line_number = index + 1
    try:
      line = raw.decode("utf-8")
    except UnicodeDecodeError as e:
      raise ValueError("%s:%d: not valid UTF-8 (%s)" % (path, line_number, e))
    if index == 0:
      line = line.lstrip("\ufeff")
    line = line.rstrip("\r\n")
    if not line.strip():
      finish()
      continue
    if delimiter is None:
      delimiter = "\t" if "\t" in line else " "
    cells = _split_columns(line, delimiter)
    if cells[0] == DOCSTART:
      finish()
      document += 1
      seen_docstart = True
      continue
    if num_columns is None:
      num_columns, first_line = len(cells), line_number
      if num_columns > 1:
        if not -num_columns <= label_column < num_columns or (
            label_column % num_columns == 0):
          raise ValueError(
              "%s:%d: --label_column=%d, but the file has %d columns (the "
              "token is column 0)" % (path, line_number, label_column,
                                      num_columns))
        label_index = label_column % num_columns
      if not seen_docstart:
        document = 0
    elif len(cells) != num_columns:
      raise ValueError(
          "%s:%d: expected %d %s-separated columns (as on line %d), got %d" %
          (path, line_number, num_columns,
           "tab" if delimiter == "\t" else "space", first_line, len(cells)))
    words.append(cells[0])
    lines.append(line_number)
    if label_index is not None:
      labels.append(cells[label_index])
  finish()
  if not sentences:
    raise ValueError("%s: no sentences (only -DOCSTART- or blank lines)" %
                     path)
  return sentences


def label_list_from(sentences, path):
  """The sorted set of the labels in `sentences` (the training file).

  Raises:
    ValueError: when the file has no label column.
  """
  if sentences[0].labels is None:
    raise ValueError("%s: no label column (one column only); the training "
                     "file needs 'token ... label' lines" % path)
  return sorted({label for s in sentences for label in s.labels})


def check_labels(sentences, label_list, path, what="the training file"):
  """Refuses a label that the model cannot predict.

  Raises:
    ValueError: naming the label, `path` and its line, when a label of
      `sentences` is not in `label_list`.
  """
  known = set(label_list)
  for sentence in sentences:
    if sentence.labels is None:
      return
    for label, line in zip(sentence.labels, sentence.lines):
      if label not in known:
        raise ValueError("%s:%d: label %r is not in %s (labels: %s)" %
                         (path, line, label, what, " ".join(label_list)))


def write_label_list(path, label_list):
  """Writes one label per line, atomically."""
  with io_utils.atomic_write(path) as f:
    for label in label_list:
      f.write(label + "\n")


def read_label_list(path):
  """Reads a file written by `write_label_list`.

  Raises:
    ValueError: when it does not exist (no training run wrote it) or is empty.
  """
  if not tf.io.gfile.exists(path):
    raise ValueError("%s not found: the label list is written by --do_train; "
                     "train first, or use the --output_dir of a training run"
                     % path)
  with tf.io.gfile.GFile(path, "r") as f:
    labels = [line.rstrip("\r\n") for line in f if line.strip()]
  if not labels:
    raise ValueError("%s: empty label list" % path)
  return labels


# ----------------------------------------------------------------------------
# Tag schemes.
# ----------------------------------------------------------------------------


def _parse_tag(tag):
  """(prefix, type): ("O", None) for O, (None, None) for a malformed tag."""
  if tag == "O":
    return "O", None
  prefix, sep, entity_type = tag.partition("-")
  if not sep or prefix not in ("B", "I", "E", "S") or not entity_type:
    return None, None
  return prefix, entity_type


def entity_types(label_list):
  """The sorted entity types of a label list (`B-PER`, `I-PER` -> `PER`)."""
  return sorted({t for t in (_parse_tag(l)[1] for l in label_list) if t})


def detect_tag_scheme(label_sequences):
  """Tells IOB1, IOB2 and IOBES apart from gold tag sequences.

  IOBES uses E- or S- tags. IOB1 starts an entity with I-X (B-X only right
  after another X entity); IOB2 starts every entity with B-X. The scheme with
  more entity starts in its own style wins; no entity at all gives IOB2.

  Args:
    label_sequences: iterable of lists of str tags.

  Returns:
    "IOB1", "IOB2" or "IOBES".
  """
  i_starts, b_starts = 0, 0
  for tags in label_sequences:
    previous_type = None
    for tag in tags:
      prefix, entity_type = _parse_tag(tag)
      if prefix in ("E", "S"):
        return "IOBES"
      if prefix == "I" and entity_type != previous_type:
        i_starts += 1
      elif prefix == "B" and entity_type != previous_type:
        b_starts += 1
      previous_type = entity_type
  return "IOB1" if i_starts > b_starts else "IOB2"


def _tag_is_valid(previous, tag, following, scheme):
  """Whether `tag` may stand between `previous` and `following`."""
  prefix, entity_type = _parse_tag(tag)
  if prefix == "O":
    return True
  if prefix is None:
    return False
  prev_prefix, prev_type = _parse_tag(previous) if previous else ("O", None)
  continues = prev_type == entity_type and prev_prefix in ("B", "I")
  if scheme == "IOB1":
    # B-X only separates two adjacent X entities.
    return prefix == "I" or (prefix == "B" and prev_type == entity_type)
  if scheme == "IOB2":
    return prefix == "B" or (prefix == "I" and continues)
  next_prefix, next_type = (_parse_tag(following) if following
                            else ("O", None))
  goes_on = next_type == entity_type and next_prefix in ("I", "E")
  if prefix == "S":
    return True
  if prefix == "B":
    return goes_on
  if prefix == "I":
    return continues and goes_on
  return continues  # E-X.


def find_invalid_tags(sentences, scheme):
  """Counts the sentences whose tag sequence breaks `scheme`.

  Such sequences are kept as they are (they are only counted): entities are
  always read with conlleval's chunking, which accepts any sequence.

  Args:
    sentences: list of `Sentence` with labels.
    scheme: one of `TAG_SCHEMES`.

  Returns:
    (count, first): the number of such sentences, and for the first one a
    `(line, tag, previous tag)` tuple, or None.
  """
  count, first = 0, None
  for sentence in sentences:
    tags = sentence.labels
    if tags is None:
      return 0, None
    for i, tag in enumerate(tags):
      previous = tags[i - 1] if i else None
      following = tags[i + 1] if i + 1 < len(tags) else None
      if not _tag_is_valid(previous, tag, following, scheme):
        count += 1
        if first is None:
          first = (sentence.lines[i], tag, previous or "the sentence start")
        break
  return count, first


def warn_invalid_tags(sentences, scheme, path):
  """Logs one warning when some of `sentences` break `scheme`.

  Returns:
    The number of such sentences.
  """
  count, first = find_invalid_tags(sentences, scheme)
  if count:
    logging.warning(
        "%s: %d of %d sentences have a tag sequence that is invalid in %s "
        "(first: line %d, %r after %r); they are kept as they are", path,
        count, len(sentences), scheme, first[0], first[1], first[2])
  return count


# ----------------------------------------------------------------------------
# Features.
# ----------------------------------------------------------------------------


class NerFeature(object):
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

  def __init__(self, unique_id, sentence_index, input_ids, input_mask,
               segment_ids, label_ids, label_weights, word_index,
               is_max_context, is_real_example=True):
    self.unique_id = unique_id
    self.sentence_index = sentence_index
    self.input_ids = input_ids
    self.input_mask = input_mask
    self.segment_ids = segment_ids
    self.label_ids = label_ids
    self.label_weights = label_weights
    self.word_index = word_index
    self.is_max_context = is_max_context
    self.is_real_example = is_real_example


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
    sentences: list of `Sentence` (labels may be None: all label ids 0).
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
      writer.write(tf.train.Example(features=tf.train.Features(
          feature=record)).SerializeToString())


# ----------------------------------------------------------------------------
# Predictions and metrics.
# ----------------------------------------------------------------------------


def word_predictions(sentences, features, predictions, label_list):
  """Each word's predicted label, from the window with its most context.

  Args:
    sentences: list of `Sentence` the features were made from.
    features: list of `NerFeature` (TPU padding included), in input order.
    predictions: iterable of dicts with `unique_ids` and `probabilities`
      ([max_seq_length, num_labels]), one per feature, in the same order.
    label_list: list of str.

  Returns:
    list (one per sentence) of lists of str labels; words with no WordPiece
    are "O".

  Raises:
    ValueError: when predictions and features do not pair up.
  """
  result = [[None] * len(s.words) for s in sentences]
  count = 0
  for feature, prediction in zip(features, predictions):
    count += 1
    if int(prediction["unique_ids"]) != feature.unique_id:
      raise ValueError("prediction %d has unique id %d, expected %d" %
                       (count - 1, int(prediction["unique_ids"]),
                        feature.unique_id))
    if not feature.is_real_example:
      continue
    ids = np.argmax(prediction["probabilities"], axis=-1)
    words = result[feature.sentence_index]
    for position, word in enumerate(feature.word_index):
      if word >= 0 and feature.is_max_context[position]:
        words[word] = label_list[int(ids[position])]
  if count != len(features):
    raise ValueError("got %d predictions for %d features" %
                     (count, len(features)))
  return [[label if label is not None else "O" for label in words]
          for words in result]


def entity_scores(gold, predicted, types=()):
  """Entity-level precision, recall and F1, and token accuracy.

  Entities are chunks as conlleval reads them (seqeval's default mode): a
  chunk starts at B-X, S-X, or at I-X/E-X after O or another type, and ends
  before O, B-, S- or another type. This is right for IOB1, IOB2 and IOBES
  alike. Scores are micro-averaged, on the 0-1 scale, 0 where undefined.

  Args:
    gold: list of lists of str tags.
    predicted: list of lists of str tags, same shapes.
    types: entity types to report even when absent (e.g. the training set's).

  Returns:
    dict: "precision", "recall", "f1", "accuracy" (floats) and "types":
    {type: {"precision", "recall", "f1", "support"}} for every type in
    `types`, the gold tags or the predictions.
  """
  if [len(g) for g in gold] != [len(p) for p in predicted]:
    raise ValueError("gold and predicted tags differ in shape")
  scores = {
      "precision": float(seqeval_metrics.precision_score(
          gold, predicted, zero_division=0)),
      "recall": float(seqeval_metrics.recall_score(
          gold, predicted, zero_division=0)),
      "f1": float(seqeval_metrics.f1_score(gold, predicted, zero_division=0)),
  }
  num_tokens = sum(len(g) for g in gold)
  correct = sum(a == b for g, p in zip(gold, predicted)
                for a, b in zip(g, p))
  scores["accuracy"] = correct / num_tokens if num_tokens else 0.0
  report = {}
  if any(_parse_tag(t)[1] for s in gold + predicted for t in s):
    report = seqeval_metrics.classification_report(
        gold, predicted, output_dict=True, zero_division=0)
  per_type = {}
  for name in sorted(set(types) | {k for k in report if " avg" not in k}):
    row = report.get(name, {})
    per_type[name] = {"precision": float(row.get("precision", 0.0)),
                      "recall": float(row.get("recall", 0.0)),
                      "f1": float(row.get("f1-score", 0.0)),
                      "support": int(row.get("support", 0))}
  scores["types"] = per_type
  return scores


def eval_results_entries(scores):
  """`eval_results.txt` keys from `entity_scores`: eval_precision,
  eval_recall, eval_f1, eval_accuracy and eval_f1_<TYPE>."""
  entries = {"eval_precision": scores["precision"],
             "eval_recall": scores["recall"], "eval_f1": scores["f1"],
             "eval_accuracy": scores["accuracy"]}
  for name, row in scores["types"].items():
    entries["eval_f1_%s" % name] = row["f1"]
  return entries


def write_conll_predictions(path, sentences, predicted):
  """Writes `token gold pred` lines (`token pred` without gold labels),
  space-separated, a blank line between sentences, atomically; the format
  conlleval.pl reads. -DOCSTART- lines are not written.
  """
  with io_utils.atomic_write(path) as f:
    for index, (sentence, labels) in enumerate(zip(sentences, predicted)):
      if index:
        f.write("\n")
      gold = sentence.labels or [None] * len(sentence.words)
      for word, gold_label, label in zip(sentence.words, gold, labels):
        cells = [word] if gold_label is None else [word, gold_label]
        f.write(" ".join(cells + [label]) + "\n")
