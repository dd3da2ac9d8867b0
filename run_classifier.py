"""Fine-tunes BERT on a sentence or sentence-pair classification task.

Matches the reference release's `run_classifier.py`: the task processors (XNLI,
MNLI, MRPC, CoLA) and their file layouts, the `[CLS] a [SEP] b [SEP]` features,
the classifier head on the pooled output (`output_weights`/`output_bias`), the
`--init_checkpoint` assignment map, `TPUEstimator` with `use_tpu=False` on
CPU/GPU, and the output files `eval_results.txt` and `test_results.tsv`.

Beyond the reference:
  * the rest of GLUE in its standard layouts (`sst-2`, `qqp`, `qnli`, `rte`,
    `wnli`, `sts-b` as a regression task, `mnli-mm` for the mismatched sets) and
    a `tsv` task for a user's own files with columns chosen by flags;
  * each task's standard metric in `eval_results.txt` (`eval_f1` for MRPC and
    QQP, `eval_mcc` for CoLA, `eval_pearson`/`eval_spearman` for STS-B);
  * bad input (wrong column count, unknown label, missing file, unknown task)
    is reported as a one-line error naming the file, line or flag.

Usage (see README.md):
  python run_classifier.py --task_name=mrpc --do_train --do_eval --do_predict \
    --data_dir=$GLUE_DIR/MRPC --vocab_file=$BERT_DIR/vocab.txt \
    --bert_config_file=$BERT_DIR/bert_config.json \
    --init_checkpoint=$BERT_DIR/bert_model.ckpt --output_dir=/tmp/mrpc
"""

import collections
import csv
import functools
import gc
import math
import os

from absl import flags
from absl import logging
import numpy as np
import tensorflow.compat.v1 as tf

import estimator_utils
import feature_utils
import modeling
import tokenization
import training_options

FLAGS = flags.FLAGS


def define_flags():
  """Defines the script's flags (SPEC §5 plus the `tsv` task's columns)."""
  flags.DEFINE_string(
      "data_dir", None,
      "The input data dir. Should contain the .tsv files (or other data files) "
      "for the task.")
  flags.DEFINE_string(
      "task_name", None,
      "The name of the task to train (case-insensitive): " +
      ", ".join(sorted(PROCESSORS)) + ".")
  flags.DEFINE_integer(
      "max_seq_length", 128,
      "The maximum total input sequence length after WordPiece tokenization. "
      "Longer sequences are truncated, shorter ones padded.")
  flags.DEFINE_bool("do_eval", False, "Whether to run eval on the dev set.")
  flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval.")
  estimator_utils.define_model_flags()
  estimator_utils.define_fine_tuning_flags()
  training_options.define_training_flags()
  # The `tsv` task (a user's own files); column numbers are 0-based and may
  # be negative (counted from the end, as in Python).
  flags.DEFINE_integer("text_a_column", 0,
                       "task tsv: column of the first (or only) text.")
  flags.DEFINE_integer(
      "text_b_column", None,
      "task tsv: column of the second text; unset for single-text tasks.")
  flags.DEFINE_integer(
      "label_column", -1,
      "task tsv: column of the label in train.tsv and dev.tsv (ignored in "
      "test.tsv). The label set is the sorted set of train.tsv's labels.")
  flags.DEFINE_bool("skip_header", False,
                    "task tsv: whether the first line of every file is a "
                    "header.")
  for name in ("data_dir", "task_name", "vocab_file", "bert_config_file",
               "output_dir"):
    flags.mark_flag_as_required(name)


# ----------------------------------------------------------------------------
# Examples and features.
# ----------------------------------------------------------------------------


class InputExample(object):
  """A single training/test example for simple sequence classification."""

  def __init__(self, guid, text_a, text_b=None, label=None):
    """Constructs an InputExample.

    Args:
      guid: Unique id for the example, `"<set>-<n>"`.
      text_a: string. The untokenized text of the first sequence.
      text_b: (Optional) string. The untokenized text of the second sequence;
        None for single-sequence tasks.
      label: (Optional) string. The label of the example (for a regression
        task, the score as a string). Test examples carry the task's dummy
        label.
    """
    self.guid = guid
    self.text_a = text_a
    self.text_b = text_b
    self.label = label


class PaddingInputExample(object):
  """Fake example that pads an eval/predict set to a whole number of batches.

  TPUs need fixed-size batches, so on TPU the eval and predict sets are padded
  with these. They become all-zero features with `is_real_example=False`, which
  the metrics weight by 0 and `test_results.tsv` never contains. (Padding with
  real examples instead would bias the metrics.)
  """


class InputFeatures(object):
  """A single set of features of data."""

  def __init__(self, input_ids, input_mask, segment_ids, label_id,
               is_real_example=True):
    self.input_ids = input_ids
    self.input_mask = input_mask
    self.segment_ids = segment_ids
    self.label_id = label_id
    self.is_real_example = is_real_example


# ----------------------------------------------------------------------------
# Reading tab-separated files.
# ----------------------------------------------------------------------------


def _gc_paused(fn):
  """Decorator: runs `fn` with Python's cyclic garbage collector paused.

  Reading a large file allocates one list per row; with TensorFlow's many
  objects alive, the collector's full passes made reading SST-2 (67k rows)
  about six times slower. The rows hold no reference cycles.
  """

  @functools.wraps(fn)
  def wrapper(*args, **kwargs):
    was_enabled = gc.isenabled()
    gc.disable()
    try:
      return fn(*args, **kwargs)
    finally:
      if was_enabled:
        gc.enable()

  return wrapper


@_gc_paused
def read_tsv_rows(input_file, num_columns=None, skip_header=False):
  """Reads a tab-separated UTF-8 file with no quote character.

  Lines end at `\\n` only; `\\r` before it is dropped, a UTF-8 byte-order mark
  at the start of the file is dropped, and empty lines are skipped (they still
  count for line numbers).

  Args:
    input_file: path of the file.
    num_columns: (Optional) int, the number of columns every row must have.
      None: the number of columns of the file's first line.
    skip_header: bool, whether the first line is a header to skip.

  Returns:
    A list of `(line_index, cells)`, `line_index` 0-based (the header is line
    0), `cells` a list of strings.

  Raises:
    FileNotFoundError: if the file does not exist.
    ValueError: if a line is not valid UTF-8 or has another number of columns
      (the message names the file and the 1-based line number).
  """
  if not tf.io.gfile.exists(input_file):
    raise FileNotFoundError("%s: no such file" % input_file)
  rows = []
  with tf.io.gfile.GFile(input_file, "rb") as reader:
    for line_index, raw in enumerate(_iter_raw_lines(reader)):
      line = _decode_line(raw, input_file, line_index)
      if line_index == 0:
        line = line.lstrip("\ufeff")
      if not line:
        continue
      cells = line.split("\t")
      if num_columns is None:
        num_columns = len(cells)
      if len(cells) != num_columns:
        raise ValueError(
            "%s:%d: expected %d tab-separated columns, got %d" %
            (input_file, line_index + 1, num_columns, len(cells)))
      if skip_header and line_index == 0:
        continue
      rows.append((line_index, cells))
  return rows


def _iter_raw_lines(reader, block_size=1 << 20):
  """Yields the lines of a binary file object, split at b"\\n" only, without
  it; read in blocks (per-line reads through GFile are slow)."""
  pending = b""
  while True:
    block = reader.read(block_size)
    if not block:
      break
    parts = (pending + block).split(b"\n")
    pending = parts.pop()
    for part in parts:
      yield part
  if pending:
    yield pending


def _decode_line(raw, input_file, line_index):
  """One line (bytes, without its newline) as str without any `\\r`.

  Raises:
    ValueError: naming the file and line, if it is not valid UTF-8.
  """
  try:
    line = raw.decode("utf-8")
  except UnicodeDecodeError as e:
    raise ValueError("%s:%d: not valid UTF-8 (%s)" %
                     (input_file, line_index + 1, e))
  return line.replace("\r", "")


def _find_data_file(data_dir, *names):
  """Returns the first of `data_dir/<name>` that exists.

  Raises:
    FileNotFoundError: naming the first (the reference's) path and the
      alternatives, when none exists.
  """
  paths = [os.path.join(data_dir, name) for name in names]
  for path in paths:
    if tf.io.gfile.exists(path):
      return path
  message = "%s: no such file" % paths[0]
  if len(paths) > 1:
    message += " (nor %s)" % ", ".join(paths[1:])
  raise FileNotFoundError(message)


# Where a split's fields are: the number of columns, whether the file has a
# header, the columns of text_a, text_b (None: single text) and the label
# (None: test split, dummy label), and the column holding the guid's number
# (None: the line index).
_Layout = collections.namedtuple(
    "_Layout", ["num_columns", "header", "text_a", "text_b", "label",
                "guid_column"])


class DataProcessor(object):
  """Base class for data converters for sequence classification data sets.

  Subclasses either implement the four `get_*` methods themselves, or set the
  class attributes `LABELS`, `TEST_LABEL` and `SPLITS` (split name ->
  `(file names, guid set name, _Layout)`, the file names tried in order) and
  let the table-driven reader below do the work.
  """

  LABELS = None
  TEST_LABEL = None
  SPLITS = {}
  # Whether the task is a regression (one output, mean squared error loss).
  is_regression = False
  # Extra eval metrics, named as in `eval_results.txt` without `eval_`.
  metric_names = ()

  def get_train_examples(self, data_dir):
    """Gets a collection of `InputExample`s for the train set."""
    return self._split_examples(data_dir, "train")

  def get_dev_examples(self, data_dir):
    """Gets a collection of `InputExample`s for the dev set."""
    return self._split_examples(data_dir, "dev")

  def get_test_examples(self, data_dir):
    """Gets a collection of `InputExample`s for prediction."""
    return self._split_examples(data_dir, "test")

  def get_labels(self):
    """Gets the list of labels for this data set (None for regression)."""
    if self.LABELS is None:
      raise NotImplementedError()
    return list(self.LABELS)

  @classmethod
  def _read_tsv(cls, input_file, quotechar=None):
    """Reads a tab separated value file into a list of rows (lists of str)."""
    if quotechar is None:
      return [cells for _, cells in read_tsv_rows(input_file)]
    with tf.io.gfile.GFile(input_file, "r") as f:
      return list(csv.reader(f, delimiter="\t", quotechar=quotechar))

  @_gc_paused
  def _split_examples(self, data_dir, split):
    """Reads split `split` as described by `SPLITS`."""
    if split not in self.SPLITS:
      raise NotImplementedError(
          "%s has no %s split" % (type(self).__name__, split))
    file_names, set_name, layout = self.SPLITS[split]
    path = _find_data_file(data_dir, *file_names)
    rows = read_tsv_rows(path, layout.num_columns, layout.header)
    examples = []
    for line_index, cells in rows:
      if not self._keep_row(cells, set_name):
        continue
      examples.append(
          self._make_example(path, line_index, cells, set_name, layout))
    return examples

  def _keep_row(self, cells, set_name):
    """Whether a data row becomes an example (XNLI keeps one language)."""
    del cells, set_name  # Unused here.
    return True

  def _map_label(self, label):
    """Hook to rename labels as read (XNLI: `contradictory`)."""
    return label

  def _make_example(self, path, line_index, cells, set_name, layout):
    """Builds one `InputExample` from a row, checking its label."""
    if layout.guid_column is None:
      number = line_index
    else:
      number = tokenization.convert_to_unicode(cells[layout.guid_column])
    guid = "%s-%s" % (set_name, number)
    text_a = tokenization.convert_to_unicode(cells[layout.text_a])
    text_b = None
    if layout.text_b is not None:
      text_b = tokenization.convert_to_unicode(cells[layout.text_b])
    if layout.label is None:
      label = self.TEST_LABEL
    else:
      label = self._map_label(
          tokenization.convert_to_unicode(cells[layout.label]))
      self._check_label(label, path, line_index)
    return InputExample(guid=guid, text_a=text_a, text_b=text_b, label=label)

  def _check_label(self, label, path, line_index):
    """Raises ValueError naming file, line and label when it is not valid."""
    if self.is_regression:
      try:
        score = float(label)
      except ValueError:
        raise ValueError("%s:%d: label %r is not a number" %
                         (path, line_index + 1, label))
      if not math.isfinite(score):
        raise ValueError("%s:%d: label %r is not a finite number" %
                         (path, line_index + 1, label))
      return
    labels = self.get_labels()
    if label not in labels:
      raise ValueError("%s:%d: label %r is not one of %s" %
                       (path, line_index + 1, label, labels))


_NLI_LABELS = ("contradiction", "entailment", "neutral")


class XnliProcessor(DataProcessor):
  """XNLI, one language (default `zh`), trained on machine-translated MNLI.

  Reads `multinli/multinli.train.<lang>.tsv` and `xnli.dev.tsv` in `data_dir`
  (the reference layout), or the unzipped downloads' layout
  `XNLI-MT-1.0/multinli/...` and `XNLI-1.0/xnli.dev.tsv`. Dev (and test,
  `xnli.test.tsv`, an addition) keep only rows whose column 0 is the language.
  """

  LABELS = _NLI_LABELS

  def __init__(self, language="zh"):
    self.language = language
    train_name = "multinli.train.%s.tsv" % language
    self.SPLITS = {
        "train": (("multinli/" + train_name,
                   "XNLI-MT-1.0/multinli/" + train_name),
                  "train", _Layout(3, True, 0, 1, 2, None)),
        "dev": (("xnli.dev.tsv", "XNLI-1.0/xnli.dev.tsv"),
                "dev", _Layout(19, True, 6, 7, 1, None)),
        "test": (("xnli.test.tsv", "XNLI-1.0/xnli.test.tsv"),
                 "test", _Layout(19, True, 6, 7, 1, None)),
    }

  def _keep_row(self, cells, set_name):
    # The training file is all one language; dev and test hold all 15.
    return (set_name == "train" or
            tokenization.convert_to_unicode(cells[0]) == self.language)

  def _map_label(self, label):
    # XNLI-MT's training files spell one label differently.
    return "contradiction" if label == "contradictory" else label


class MnliProcessor(DataProcessor):
  """MultiNLI (GLUE), matched dev and test sets."""

  LABELS = _NLI_LABELS
  TEST_LABEL = "contradiction"
  SPLITS = {
      "train": (("train.tsv",), "train", _Layout(12, True, 8, 9, 11, 0)),
      "dev": (("dev_matched.tsv",), "dev_matched",
              _Layout(16, True, 8, 9, 15, 0)),
      "test": (("test_matched.tsv",), "test",
               _Layout(10, True, 8, 9, None, 0)),
  }


class MnliMismatchedProcessor(MnliProcessor):
  """MultiNLI (GLUE), mismatched dev and test sets (task `mnli-mm`)."""

  SPLITS = dict(MnliProcessor.SPLITS)
  SPLITS["dev"] = (("dev_mismatched.tsv",), "dev_mismatched",
                   _Layout(16, True, 8, 9, 15, 0))
  SPLITS["test"] = (("test_mismatched.tsv",), "test_mismatched",
                    _Layout(10, True, 8, 9, None, 0))


def _glue_splits(train_dev_layout, test_layout):
  """SPLITS for a GLUE task with files train.tsv, dev.tsv and test.tsv."""
  return {
      "train": (("train.tsv",), "train", train_dev_layout),
      "dev": (("dev.tsv",), "dev", train_dev_layout),
      "test": (("test.tsv",), "test", test_layout),
  }


class MrpcProcessor(DataProcessor):
  """MRPC (GLUE): `Quality #1 ID #2 ID #1 String #2 String`."""

  LABELS = ("0", "1")
  TEST_LABEL = "0"
  metric_names = ("f1",)
  SPLITS = _glue_splits(_Layout(5, True, 3, 4, 0, None),
                        _Layout(5, True, 3, 4, None, None))


class ColaProcessor(DataProcessor):
  """CoLA (GLUE): train/dev `source label original-label sentence`, no header;
  test `index sentence` with a header."""

  LABELS = ("0", "1")
  TEST_LABEL = "0"
  metric_names = ("mcc",)
  SPLITS = _glue_splits(_Layout(4, False, 3, None, 1, None),
                        _Layout(2, True, 1, None, None, None))


class Sst2Processor(DataProcessor):
  """SST-2 (GLUE): `sentence label`; test `index sentence`."""

  LABELS = ("0", "1")
  TEST_LABEL = "0"
  SPLITS = _glue_splits(_Layout(2, True, 0, None, 1, None),
                        _Layout(2, True, 1, None, None, None))


class QqpProcessor(DataProcessor):
  """QQP (GLUE): `id qid1 qid2 question1 question2 is_duplicate`; test
  `id question1 question2`."""

  LABELS = ("0", "1")
  TEST_LABEL = "0"
  metric_names = ("f1",)
  SPLITS = _glue_splits(_Layout(6, True, 3, 4, 5, None),
                        _Layout(3, True, 1, 2, None, None))


class QnliProcessor(DataProcessor):
  """QNLI (GLUE): `index question sentence label`; test without label."""

  LABELS = ("entailment", "not_entailment")
  TEST_LABEL = "entailment"
  SPLITS = _glue_splits(_Layout(4, True, 1, 2, 3, None),
                        _Layout(3, True, 1, 2, None, None))


class RteProcessor(QnliProcessor):
  """RTE (GLUE): `index sentence1 sentence2 label`; test without label."""


class WnliProcessor(DataProcessor):
  """WNLI (GLUE): `index sentence1 sentence2 label`; test without label."""

  LABELS = ("0", "1")
  TEST_LABEL = "0"
  SPLITS = _glue_splits(_Layout(4, True, 1, 2, 3, None),
                        _Layout(3, True, 1, 2, None, None))


class StsbProcessor(DataProcessor):
  """STS-B (GLUE), a regression task: a 0-5 similarity score.

  Ten columns (`index genre filename year old_index source1 source2 sentence1
  sentence2 score`); test has nine (no score). `get_labels()` is None.
  """

  TEST_LABEL = "0.0"
  is_regression = True
  metric_names = ("pearson", "spearman")
  SPLITS = _glue_splits(_Layout(10, True, 7, 8, 9, None),
                        _Layout(9, True, 7, 8, None, None))

  def get_labels(self):
    return None


class TsvProcessor(DataProcessor):
  """A user's own `train.tsv`/`dev.tsv`/`test.tsv` (task `tsv`).

  Columns are chosen by number (0-based; negative counts from the end). Every
  row of a file must have as many columns as the file's first line. The label
  set is the sorted set of labels in `train.tsv`, so it is the same at
  training and at prediction time; dev labels must be among them. The label
  column of `test.tsv`, if any, is ignored.
  """

  def __init__(self, data_dir, text_a_column=0, text_b_column=None,
               label_column=-1, skip_header=False):
    self.data_dir = data_dir
    self.text_a_column = text_a_column
    self.text_b_column = text_b_column
    self.label_column = label_column
    self.skip_header = skip_header
    self._labels = None

  def get_labels(self):
    if self._labels is None:
      path = _find_data_file(self.data_dir, "train.tsv")
      self._labels = sorted(set(
          tokenization.convert_to_unicode(self._cell(path, i, cells,
                                                     self.label_column))
          for i, cells in read_tsv_rows(path, None, self.skip_header)))
    return list(self._labels)

  @_gc_paused
  def _split_examples(self, data_dir, split):
    path = _find_data_file(data_dir, "%s.tsv" % split)
    labels = self.get_labels()
    examples = []
    for line_index, cells in read_tsv_rows(path, None, self.skip_header):
      text_a = self._cell(path, line_index, cells, self.text_a_column)
      text_b = None
      if self.text_b_column is not None:
        text_b = self._cell(path, line_index, cells, self.text_b_column)
      if split == "test":
        label = labels[0]
      else:
        label = self._cell(path, line_index, cells, self.label_column)
        self._check_label(label, path, line_index)
      examples.append(InputExample(
          guid="%s-%d" % (split, line_index),
          text_a=tokenization.convert_to_unicode(text_a),
          text_b=(None if text_b is None else
                  tokenization.convert_to_unicode(text_b)),
          label=label))
    return examples

  @staticmethod
  def _cell(path, line_index, cells, column):
    """cells[column], or a ValueError naming the file, line and column."""
    if not -len(cells) <= column < len(cells):
      raise ValueError("%s:%d: column %d does not exist (the line has %d "
                       "columns)" % (path, line_index + 1, column, len(cells)))
    return cells[column]


# Task name (lower case) -> processor class.
PROCESSORS = {
    "cola": ColaProcessor,
    "mnli": MnliProcessor,
    "mnli-mm": MnliMismatchedProcessor,
    "mrpc": MrpcProcessor,
    "xnli": XnliProcessor,
    "sst-2": Sst2Processor,
    "qqp": QqpProcessor,
    "qnli": QnliProcessor,
    "rte": RteProcessor,
    "wnli": WnliProcessor,
    "sts-b": StsbProcessor,
    "tsv": TsvProcessor,
}


def get_processor(task_name, data_dir=None, text_a_column=0,
                  text_b_column=None, label_column=-1, skip_header=False):
  """Returns the `DataProcessor` for `task_name` (case-insensitive).

  The keyword arguments after `task_name` configure the `tsv` task only.

  Raises:
    ValueError: for an unknown task, listing the known ones.
  """
  name = task_name.lower()
  if name not in PROCESSORS:
    raise ValueError("--task_name: unknown task %r; known tasks: %s" %
                     (task_name, ", ".join(sorted(PROCESSORS))))
  if name == "tsv":
    return TsvProcessor(data_dir, text_a_column=text_a_column,
                        text_b_column=text_b_column, label_column=label_column,
                        skip_header=skip_header)
  return PROCESSORS[name]()


# ----------------------------------------------------------------------------
# Feature conversion.
# ----------------------------------------------------------------------------


def _label_id(example, label_list):
  """The example's label as an int index, or a float for regression."""
  if label_list is None:
    return float(example.label)
  label_map = {label: i for i, label in enumerate(label_list)}
  if example.label not in label_map:
    raise ValueError("example %s: label %r is not one of %s" %
                     (example.guid, example.label, label_list))
  return label_map[example.label]


def convert_single_example(ex_index, example, label_list, max_seq_length,
                           tokenizer):
  """Converts a single `InputExample` into a single `InputFeatures`.

  Layout `[CLS] a [SEP] b [SEP]`, segment ids 0 for `[CLS] a [SEP]` and 1 for
  `b [SEP]`, padded with 0 to `max_seq_length`. A pair longer than
  `max_seq_length - 3` tokens is truncated longest-first; a single text is cut
  to `max_seq_length - 2`. A `PaddingInputExample` gives all-zero features with
  label id 0 and `is_real_example=False`.

  Args:
    ex_index: int, the example's position (the first 5 are logged).
    example: `InputExample` or `PaddingInputExample`.
    label_list: list of label strings; None for a regression task (the label
      id is then `float(example.label)`).
    max_seq_length: int, the padded length.
    tokenizer: `tokenization.FullTokenizer`.

  Returns:
    An `InputFeatures`.

  Raises:
    ValueError: if the label is not in `label_list`.
  """
  if isinstance(example, PaddingInputExample):
    return InputFeatures(
        input_ids=[0] * max_seq_length,
        input_mask=[0] * max_seq_length,
        segment_ids=[0] * max_seq_length,
        label_id=0.0 if label_list is None else 0,
        is_real_example=False)

  tokens_a = tokenizer.tokenize(example.text_a)
  tokens_b = None
  if example.text_b is not None:
    tokens_b = tokenizer.tokenize(example.text_b)
  tokens, segment_ids = feature_utils.pack_tokens(tokens_a, tokens_b,
                                                  max_seq_length)
  input_ids, input_mask, segment_ids = feature_utils.pad_input(
      tokenizer.convert_tokens_to_ids(tokens), segment_ids, max_seq_length)

  label_id = _label_id(example, label_list)
  if ex_index < 5:
    _log_example(example, tokens, input_ids, input_mask, segment_ids,
                 label_id)
  return InputFeatures(input_ids=input_ids, input_mask=input_mask,
                       segment_ids=segment_ids, label_id=label_id,
                       is_real_example=True)


def _log_example(example, tokens, input_ids, input_mask, segment_ids,
                 label_id):
  """Logs one converted example, as the reference does for the first five."""
  logging.info("*** Example ***")
  logging.info("guid: %s", example.guid)
  logging.info("tokens: %s",
               " ".join(tokenization.printable_text(t) for t in tokens))
  logging.info("input_ids: %s", " ".join(str(x) for x in input_ids))
  logging.info("input_mask: %s", " ".join(str(x) for x in input_mask))
  logging.info("segment_ids: %s", " ".join(str(x) for x in segment_ids))
  logging.info("label: %s (id = %s)", example.label, label_id)


def convert_examples_to_features(examples, label_list, max_seq_length,
                                 tokenizer):
  """Converts a list of `InputExample`s into a list of `InputFeatures`."""
  features = []
  for ex_index, example in enumerate(examples):
    if ex_index % 10000 == 0:
      logging.info("Writing example %d of %d", ex_index, len(examples))
    features.append(convert_single_example(ex_index, example, label_list,
                                           max_seq_length, tokenizer))
  return features


def _feature_to_tf_example(feature):
  """Serializable `tf.train.Example` of an `InputFeatures`."""
  if isinstance(feature.label_id, float):
    label_feature = estimator_utils.float_feature([feature.label_id])
  else:
    label_feature = estimator_utils.int64_feature([feature.label_id])
  # Insertion order fixes the serialized bytes (same as the reference).
  record = collections.OrderedDict()
  record["input_ids"] = estimator_utils.int64_feature(feature.input_ids)
  record["input_mask"] = estimator_utils.int64_feature(feature.input_mask)
  record["segment_ids"] = estimator_utils.int64_feature(feature.segment_ids)
  record["label_ids"] = label_feature
  record["is_real_example"] = estimator_utils.int64_feature(
      [int(feature.is_real_example)])
  return tf.train.Example(features=tf.train.Features(feature=record))


def file_based_convert_examples_to_features(examples, label_list,
                                            max_seq_length, tokenizer,
                                            output_file):
  """Converts `examples` to features and writes them to a TFRecord file.

  Keys: `input_ids`, `input_mask`, `segment_ids` (int64, `max_seq_length`),
  `label_ids` (int64, 1; float for regression) and `is_real_example` (int64,
  1), in that order.
  """
  with tf.io.TFRecordWriter(output_file) as writer:
    for ex_index, example in enumerate(examples):
      if ex_index % 10000 == 0:
        logging.info("Writing example %d of %d", ex_index, len(examples))
      feature = convert_single_example(ex_index, example, label_list,
                                       max_seq_length, tokenizer)
      writer.write(_feature_to_tf_example(feature).SerializeToString())


def file_based_input_fn_builder(input_file, seq_length, is_training,
                                drop_remainder, is_regression=False):
  """Creates an `input_fn` over a file written by
  `file_based_convert_examples_to_features`.

  Args:
    input_file: path of the TFRecord file.
    seq_length: int, the `max_seq_length` it was written with.
    is_training: bool; training repeats and shuffles.
    drop_remainder: bool, whether to drop the last partial batch (TPU only).
    is_regression: bool, whether `label_ids` is a float (regression task).

  Returns:
    `input_fn(params)` for the Estimator; the batch size is
    `params["batch_size"]`.
  """
  name_to_features = {
      "input_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
      "input_mask": tf.io.FixedLenFeature([seq_length], tf.int64),
      "segment_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
      "label_ids": tf.io.FixedLenFeature(
          [], tf.float32 if is_regression else tf.int64),
      "is_real_example": tf.io.FixedLenFeature([], tf.int64),
  }
  return estimator_utils.tfrecord_input_fn_builder(
      [input_file], name_to_features, is_training=is_training,
      drop_remainder=drop_remainder)


def pad_to_batch_multiple(examples, batch_size):
  """Appends `PaddingInputExample`s until `len(examples)` is a multiple of
  `batch_size` (what TPU evaluation and prediction need).

  Returns:
    A new list; `examples` itself is unchanged.
  """
  padded = list(examples)
  while len(padded) % batch_size != 0:
    padded.append(PaddingInputExample())
  return padded


# ----------------------------------------------------------------------------
# Metrics (numpy, so that they are testable by hand; used in the graph
# through tf.numpy_function).
# ----------------------------------------------------------------------------


def f1_from_counts(tp, fp, fn):
  """F1 of the positive class (label id 1): 2tp / (2tp + fp + fn); 0 when
  there are no positives at all."""
  denominator = 2.0 * tp + fp + fn
  return np.float32(2.0 * tp / denominator if denominator else 0.0)


def matthews_from_counts(tp, fp, fn, tn):
  """Matthews correlation coefficient of a binary confusion matrix; 0 when a
  row or column of the matrix is empty (as scikit-learn reports it)."""
  tp, fp, fn, tn = (float(x) for x in (tp, fp, fn, tn))
  denominator = math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
  return np.float32((tp * tn - fp * fn) / denominator if denominator else 0.0)


def _average_ranks(values):
  """1-based ranks of `values`, ties sharing their average rank."""
  values = np.asarray(values, dtype=np.float64)
  order = np.argsort(values, kind="mergesort")
  ranks = np.empty(len(values), dtype=np.float64)
  sorted_values = values[order]
  start = 0
  while start < len(values):
    end = start
    while end + 1 < len(values) and sorted_values[end + 1] == sorted_values[
        start]:
      end += 1
    ranks[order[start:end + 1]] = (start + end) / 2.0 + 1.0
    start = end + 1
  return ranks


def pearson_correlation(x, y):
  """Pearson's r of two equal-length sequences; NaN when either is constant
  (or has fewer than two values), where r is undefined."""
  x = np.asarray(x, dtype=np.float64)
  y = np.asarray(y, dtype=np.float64)
  if len(x) < 2:
    return np.float32(np.nan)
  dx = x - x.mean()
  dy = y - y.mean()
  denominator = math.sqrt(float(np.dot(dx, dx)) * float(np.dot(dy, dy)))
  if not denominator:
    return np.float32(np.nan)
  return np.float32(np.dot(dx, dy) / denominator)


def spearman_correlation(x, y):
  """Spearman's rho: Pearson's r of the average ranks."""
  return pearson_correlation(_average_ranks(x), _average_ranks(y))


def _numpy_metric(fn, inputs):
  """`(value, update_op)`-compatible float32 scalar from a numpy function."""
  value = tf.numpy_function(fn, inputs, tf.float32, stateful=False)
  value.set_shape([])
  return value


def _streaming_concat(values, name):
  """A streaming metric collecting all of `values` (1-D) across batches.

  Returns:
    `(collected, update_op)`; `collected` is a 1-D Tensor of everything the
    update op has seen since the local variables were initialized.
  """
  with tf.variable_scope(None, default_name=name):
    collected = tf.Variable(
        tf.zeros([0], dtype=values.dtype), trainable=False,
        validate_shape=False, shape=tf.TensorShape([None]),
        collections=[tf.GraphKeys.LOCAL_VARIABLES,
                     tf.GraphKeys.METRIC_VARIABLES],
        name="values")
    update_op = collected.assign(tf.concat([collected, values], axis=0),
                                 read_value=False)
  return collected.read_value(), update_op


def classification_metric_fn(per_example_loss, label_ids, logits,
                             is_real_example, metric_names=()):
  """Eval metrics of a classification task.

  Args:
    per_example_loss: float32 Tensor of shape [batch_size].
    label_ids: int32 Tensor of shape [batch_size].
    logits: float32 Tensor of shape [batch_size, num_labels].
    is_real_example: float32 Tensor of shape [batch_size]; 0 for padding.
    metric_names: names of extra metrics: "f1" (positive class: label id 1)
      and/or "mcc" (Matthews correlation), for two-label tasks.

  Returns:
    Dict of `(value, update_op)`: `eval_accuracy`, `eval_loss` and
    `eval_<name>` for each extra metric. Padding examples have weight 0.
  """
  predictions = tf.argmax(logits, axis=-1, output_type=tf.int32)
  metrics = {
      "eval_accuracy": tf.metrics.accuracy(
          labels=label_ids, predictions=predictions, weights=is_real_example),
      "eval_loss": tf.metrics.mean(values=per_example_loss,
                                   weights=is_real_example),
  }
  if metric_names:
    counts, updates = [], []
    for count_fn in (tf.metrics.true_positives, tf.metrics.false_positives,
                     tf.metrics.false_negatives, tf.metrics.true_negatives):
      count, update = count_fn(labels=label_ids, predictions=predictions,
                               weights=is_real_example)
      counts.append(count)
      updates.append(update)
    update_op = tf.group(*updates)
    tp, fp, fn, tn = counts
    if "f1" in metric_names:
      metrics["eval_f1"] = (_numpy_metric(f1_from_counts, [tp, fp, fn]),
                            update_op)
    if "mcc" in metric_names:
      metrics["eval_mcc"] = (
          _numpy_metric(matthews_from_counts, [tp, fp, fn, tn]), update_op)
  return metrics


def regression_metric_fn(per_example_loss, label_ids, predictions,
                         is_real_example):
  """Eval metrics of a regression task (STS-B).

  Args:
    per_example_loss: float32 Tensor of shape [batch_size], squared errors.
    label_ids: float32 Tensor of shape [batch_size], the true scores.
    predictions: float32 Tensor of shape [batch_size].
    is_real_example: float32 Tensor of shape [batch_size]; 0 for padding.

  Returns:
    Dict of `(value, update_op)`: `eval_loss` (mean squared error),
    `eval_pearson` and `eval_spearman` over the real examples. The two
    correlations collect every prediction (on the host, also on TPU) and are
    computed once at the end.
  """
  real = tf.greater(is_real_example, 0)
  labels, labels_update = _streaming_concat(
      tf.boolean_mask(tf.cast(label_ids, tf.float32), real), "labels")
  preds, preds_update = _streaming_concat(
      tf.boolean_mask(predictions, real), "predictions")
  update_op = tf.group(labels_update, preds_update)
  return {
      "eval_loss": tf.metrics.mean(values=per_example_loss,
                                   weights=is_real_example),
      "eval_pearson": (_numpy_metric(pearson_correlation, [preds, labels]),
                       update_op),
      "eval_spearman": (_numpy_metric(spearman_correlation, [preds, labels]),
                        update_op),
  }


# ----------------------------------------------------------------------------
# The model.
# ----------------------------------------------------------------------------


def create_model(bert_config, is_training, input_ids, input_mask, segment_ids,
                 labels, num_labels, use_one_hot_embeddings,
                 is_regression=False, compute_dtype=tf.float32):
  """Creates a classification model: a dense layer on the pooled output.

  Args:
    bert_config: `modeling.BertConfig`.
    is_training: bool; dropout (probability 0.1) on the pooled output only
      when training, as in the reference.
    input_ids: int32 Tensor of shape [batch_size, seq_length].
    input_mask: int32 Tensor of shape [batch_size, seq_length].
    segment_ids: int32 Tensor of shape [batch_size, seq_length].
    labels: int32 Tensor of shape [batch_size] (float32 for regression).
    num_labels: int, the number of classes (1 for regression).
    use_one_hot_embeddings: bool, one-hot matmul embeddings (faster on TPU).
    is_regression: bool; one output trained with the squared error.
    compute_dtype: the encoder's compute dtype (see `modeling.BertModel`);
      the head and the loss are float32.

  Returns:
    `(loss, per_example_loss, logits, probabilities)`: scalar, [batch_size],
    [batch_size, num_labels] and [batch_size, num_labels] float32 Tensors.
    For regression `probabilities` is the predicted value, [batch_size].
  """
  model = modeling.BertModel(
      config=bert_config, is_training=is_training, input_ids=input_ids,
      input_mask=input_mask, token_type_ids=segment_ids,
      use_one_hot_embeddings=use_one_hot_embeddings,
      compute_dtype=compute_dtype)
  output_layer = model.get_pooled_output()  # [B, H]
  hidden_size = modeling.get_shape_list(output_layer, expected_rank=2)[1]

  output_weights = tf.get_variable(
      "output_weights", [num_labels, hidden_size],
      initializer=tf.truncated_normal_initializer(stddev=0.02))
  output_bias = tf.get_variable(
      "output_bias", [num_labels], initializer=tf.zeros_initializer())

  # Holds no variables. Not named "loss" as in the reference: that name would
  # push the Estimator's TensorBoard `loss` summary to `loss_1`.
  with tf.variable_scope("classifier"):
    if is_training:
      output_layer = modeling.dropout(output_layer, 0.1)
    logits = tf.matmul(output_layer, output_weights, transpose_b=True)
    logits = tf.nn.bias_add(logits, output_bias)  # [B, num_labels]
    if is_regression:
      predictions = tf.squeeze(logits, axis=-1)  # [B]
      per_example_loss = tf.square(predictions - tf.cast(labels, tf.float32))
      return (tf.reduce_mean(per_example_loss), per_example_loss, logits,
              predictions)
    probabilities = tf.nn.softmax(logits, axis=-1)
    log_probs = tf.nn.log_softmax(logits, axis=-1)
    one_hot_labels = tf.one_hot(labels, depth=num_labels, dtype=tf.float32)
    per_example_loss = -tf.reduce_sum(one_hot_labels * log_probs, axis=-1)
    # The mean includes TPU padding examples (kept for parity).
    loss = tf.reduce_mean(per_example_loss)
    return loss, per_example_loss, logits, probabilities


def model_fn_builder(bert_config, num_labels, init_checkpoint, learning_rate,
                     num_train_steps, num_warmup_steps, use_tpu,
                     use_one_hot_embeddings, is_regression=False,
                     metric_names=(), options=None):
  """Returns a `model_fn` for `TPUEstimator`.

  Args:
    bert_config: `modeling.BertConfig`.
    num_labels: int, the number of classes (1 for regression).
    init_checkpoint: (Optional) checkpoint to initialize from; the classifier
      head is new, every `bert/...` variable found in it is loaded.
    learning_rate: float, the peak learning rate.
    num_train_steps: int, steps of the linear decay.
    num_warmup_steps: int, steps of linear warmup.
    use_tpu: bool.
    use_one_hot_embeddings: bool.
    is_regression: bool, a one-output regression task (STS-B).
    metric_names: extra eval metrics ("f1", "mcc") of a classification task.
    options: (optional) `optimization.OptimizerOptions`: the encoder's
      compute dtype and the optimizer; default the reference's.

  Returns:
    `model_fn(features, labels, mode, params)`. Predictions are
    `{"probabilities": [batch_size, num_labels]}`, or for regression
    `{"predictions": [batch_size]}`.
  """

  def model_fn(features, labels, mode, params):
    del labels, params  # Unused.
    logging.info("*** Features ***")
    for name in sorted(features):
      logging.info("  name = %s, shape = %s", name, features[name].shape)
    label_ids = features["label_ids"]
    is_real_example = tf.cast(features["is_real_example"], tf.float32)
    is_training = mode == tf.estimator.ModeKeys.TRAIN

    total_loss, per_example_loss, logits, outputs = create_model(
        bert_config, is_training, features["input_ids"],
        features["input_mask"], features["segment_ids"], label_ids,
        num_labels, use_one_hot_embeddings, is_regression=is_regression,
        compute_dtype=options.compute_dtype if options else tf.float32)
    scaffold_fn = estimator_utils.init_from_checkpoint(init_checkpoint,
                                                       use_tpu)

    if mode == tf.estimator.ModeKeys.TRAIN:
      return estimator_utils.train_spec(
          total_loss, learning_rate, num_train_steps, num_warmup_steps,
          use_tpu, scaffold_fn, options=options)
    if mode == tf.estimator.ModeKeys.EVAL:
      if is_regression:
        eval_metrics = (regression_metric_fn,
                        [per_example_loss, label_ids, outputs,
                         is_real_example])
      else:
        # TPUEstimator matches the tensors to the metric_fn's arguments.
        eval_metrics = (functools.partial(classification_metric_fn,
                                          metric_names=metric_names),
                        [per_example_loss, label_ids, logits,
                         is_real_example])
      return tf.estimator.tpu.TPUEstimatorSpec(
          mode=mode, loss=total_loss, eval_metrics=eval_metrics,
          scaffold_fn=scaffold_fn)
    key = "predictions" if is_regression else "probabilities"
    return tf.estimator.tpu.TPUEstimatorSpec(
        mode=mode, predictions={key: outputs}, scaffold_fn=scaffold_fn)

  return model_fn


# ----------------------------------------------------------------------------
# Outputs.
# ----------------------------------------------------------------------------


def write_test_results(output_file, predictions, num_examples):
  """Writes `test_results.tsv` atomically: one line per real test example.

  Args:
    output_file: path to write.
    predictions: iterable of prediction dicts in input order, with
      `probabilities` (a line of tab-separated class probabilities) or
      `predictions` (regression: the predicted value). Entries after the
      first `num_examples` (TPU padding) are not written.
    num_examples: int, the number of real test examples.

  Returns:
    The number of lines written (`num_examples`).

  Raises:
    ValueError: if fewer than `num_examples` predictions arrive.
  """
  written = 0
  with estimator_utils.atomic_write(output_file) as writer:
    for prediction in predictions:
      if written >= num_examples:
        break  # The rest are PaddingInputExamples.
      if "probabilities" in prediction:
        values = np.reshape(prediction["probabilities"], [-1])
      else:
        values = np.reshape(prediction["predictions"], [-1])
      writer.write("\t".join(str(value) for value in values) + "\n")
      written += 1
    if written != num_examples:
      raise ValueError("%s: got %d predictions for %d test examples" %
                       (output_file, written, num_examples))
  return written


# ----------------------------------------------------------------------------
# main.
# ----------------------------------------------------------------------------


def _check_flags(bert_config):
  """Refuses contradictory or out-of-range flags before anything runs.

  Returns:
    The resolved `--init_checkpoint` prefix, or None.
  """
  if not (FLAGS.do_train or FLAGS.do_eval or FLAGS.do_predict):
    raise ValueError(
        "At least one of --do_train, --do_eval or --do_predict must be set.")
  tokenization.validate_case_matches_checkpoint(FLAGS.do_lower_case,
                                                FLAGS.init_checkpoint)
  estimator_utils.check_max_seq_length(FLAGS.max_seq_length, bert_config)
  if FLAGS.max_seq_length < 3:
    raise ValueError("--max_seq_length: got %d, expected at least 3" %
                     FLAGS.max_seq_length)
  for name in ("train_batch_size", "eval_batch_size", "predict_batch_size"):
    if FLAGS[name].value < 1:
      raise ValueError("--%s: got %d, expected at least 1" %
                       (name, FLAGS[name].value))
  if not tf.io.gfile.isdir(FLAGS.data_dir):
    raise FileNotFoundError("--data_dir: %s is not a directory" %
                            FLAGS.data_dir)
  if FLAGS.init_checkpoint:
    return estimator_utils.resolve_checkpoint(FLAGS.init_checkpoint)
  return None


def _read_examples(processor):
  """Reads every split that the run needs, so bad input fails up front.

  Returns:
    Dict split name -> list of `InputExample`s, for the requested splits.
  """
  examples = {}
  if FLAGS.do_train:
    examples["train"] = processor.get_train_examples(FLAGS.data_dir)
  if FLAGS.do_eval:
    examples["dev"] = processor.get_dev_examples(FLAGS.data_dir)
  if FLAGS.do_predict:
    examples["test"] = processor.get_test_examples(FLAGS.data_dir)
  for split, split_examples in examples.items():
    logging.info("Read %d %s examples from %s", len(split_examples), split,
                 FLAGS.data_dir)
    # An empty test set is fine (it gives an empty test_results.tsv), but
    # training on nothing would loop forever and evaluating nothing means
    # nothing.
    if not split_examples and split != "test":
      raise ValueError("--data_dir=%s: no %s examples were read; --do_%s "
                       "needs at least one" %
                       (FLAGS.data_dir, split,
                        "train" if split == "train" else "eval"))
  return examples


def _train(estimator, examples, label_list, tokenizer, num_train_steps,
           is_regression):
  """Writes train.tf_record and trains for `num_train_steps` steps."""
  train_file = os.path.join(FLAGS.output_dir, "train.tf_record")
  file_based_convert_examples_to_features(
      examples, label_list, FLAGS.max_seq_length, tokenizer, train_file)
  logging.info("***** Running training *****")
  logging.info("  Num examples = %d", len(examples))
  logging.info("  Batch size = %d", FLAGS.train_batch_size)
  logging.info("  Num steps = %d", num_train_steps)
  input_fn = file_based_input_fn_builder(
      train_file, FLAGS.max_seq_length, is_training=True, drop_remainder=True,
      is_regression=is_regression)
  # Progress (examples/sec, ETA) about ten times per run, at most every 100.
  progress = estimator_utils.ProgressHook(
      FLAGS.train_batch_size * FLAGS.gradient_accumulation_steps,
      total_steps=num_train_steps,
      every_n_steps=min(100, max(1, num_train_steps // 10)))
  estimator.train(input_fn=input_fn, max_steps=num_train_steps,
                  hooks=[progress])


def _evaluate(estimator, examples, label_list, tokenizer, is_regression):
  """Evaluates on the dev set and writes eval_results.txt."""
  num_actual = len(examples)
  if FLAGS.use_tpu:
    examples = pad_to_batch_multiple(examples, FLAGS.eval_batch_size)
  eval_file = os.path.join(FLAGS.output_dir, "eval.tf_record")
  file_based_convert_examples_to_features(
      examples, label_list, FLAGS.max_seq_length, tokenizer, eval_file)
  logging.info("***** Running evaluation *****")
  logging.info("  Num examples = %d (%d actual, %d padding)", len(examples),
               num_actual, len(examples) - num_actual)
  logging.info("  Batch size = %d", FLAGS.eval_batch_size)
  # On TPU every batch is whole; elsewhere the last partial batch is kept
  # and evaluation runs until the data is exhausted.
  eval_steps = None
  if FLAGS.use_tpu:
    eval_steps = len(examples) // FLAGS.eval_batch_size
  input_fn = file_based_input_fn_builder(
      eval_file, FLAGS.max_seq_length, is_training=False,
      drop_remainder=FLAGS.use_tpu, is_regression=is_regression)
  result = estimator.evaluate(input_fn=input_fn, steps=eval_steps)
  estimator_utils.write_eval_results(
      os.path.join(FLAGS.output_dir, "eval_results.txt"), result)


def _predict(estimator, examples, label_list, tokenizer, is_regression):
  """Predicts the test set and writes test_results.tsv."""
  num_actual = len(examples)
  if FLAGS.use_tpu:
    examples = pad_to_batch_multiple(examples, FLAGS.predict_batch_size)
  predict_file = os.path.join(FLAGS.output_dir, "predict.tf_record")
  file_based_convert_examples_to_features(
      examples, label_list, FLAGS.max_seq_length, tokenizer, predict_file)
  logging.info("***** Running prediction *****")
  logging.info("  Num examples = %d (%d actual, %d padding)", len(examples),
               num_actual, len(examples) - num_actual)
  logging.info("  Batch size = %d", FLAGS.predict_batch_size)
  input_fn = file_based_input_fn_builder(
      predict_file, FLAGS.max_seq_length, is_training=False,
      drop_remainder=FLAGS.use_tpu, is_regression=is_regression)
  num_steps = -(-len(examples) // FLAGS.predict_batch_size)
  predictions = estimator.predict(
      input_fn=input_fn,
      hooks=[estimator_utils.ProgressHook(FLAGS.predict_batch_size,
                                          total_steps=num_steps)])
  output_file = os.path.join(FLAGS.output_dir, "test_results.tsv")
  write_test_results(output_file, predictions, num_actual)
  logging.info("Wrote %d lines to %s", num_actual, output_file)


def main(_):
  logging.set_verbosity(logging.INFO)
  # 1. Configuration and flag checks, before anything is written.
  bert_config = estimator_utils.load_bert_config(FLAGS.bert_config_file)
  init_checkpoint = _check_flags(bert_config)
  training = training_options.options_from_flags(FLAGS)
  processor = get_processor(
      FLAGS.task_name, data_dir=FLAGS.data_dir,
      text_a_column=FLAGS.text_a_column, text_b_column=FLAGS.text_b_column,
      label_column=FLAGS.label_column, skip_header=FLAGS.skip_header)
  label_list = processor.get_labels()
  is_regression = processor.is_regression
  num_labels = 1 if is_regression else len(label_list)
  tokenizer = tokenization.FullTokenizer(vocab_file=FLAGS.vocab_file,
                                         do_lower_case=FLAGS.do_lower_case)
  estimator_utils.check_vocab_size(tokenizer, bert_config)

  # 2. Every input the run needs, read (and checked) up front.
  examples = _read_examples(processor)
  tf.io.gfile.makedirs(FLAGS.output_dir)

  # 3. The estimator.
  num_train_steps = None
  num_warmup_steps = None
  if FLAGS.do_train:
    # Steps count updates, of batch size times accumulation examples each.
    num_train_steps, num_warmup_steps = estimator_utils.fine_tuning_steps(
        len(examples["train"]),
        FLAGS.train_batch_size * training.gradient_accumulation_steps,
        FLAGS.num_train_epochs, FLAGS.warmup_proportion)
  model_fn = model_fn_builder(
      bert_config=bert_config, num_labels=num_labels,
      init_checkpoint=init_checkpoint,
      learning_rate=FLAGS.learning_rate, num_train_steps=num_train_steps,
      num_warmup_steps=num_warmup_steps, use_tpu=FLAGS.use_tpu,
      use_one_hot_embeddings=FLAGS.use_tpu, is_regression=is_regression,
      metric_names=processor.metric_names,
      options=training.optimizer_options)
  run_config = training_options.configure_run_config(
      estimator_utils.run_config_from_flags(FLAGS, FLAGS.output_dir),
      training)
  estimator = estimator_utils.make_estimator(
      model_fn, run_config, FLAGS.use_tpu,
      train_batch_size=FLAGS.train_batch_size,
      eval_batch_size=FLAGS.eval_batch_size,
      predict_batch_size=FLAGS.predict_batch_size)

  # 4. Train, evaluate, predict.
  if FLAGS.do_train:
    _train(estimator, examples["train"], label_list, tokenizer,
           num_train_steps, is_regression)
  if FLAGS.do_eval:
    _evaluate(estimator, examples["dev"], label_list, tokenizer,
              is_regression)
  if FLAGS.do_predict:
    _predict(estimator, examples["test"], label_list, tokenizer,
             is_regression)


if __name__ == "__main__":
  define_flags()
  estimator_utils.run_main(main)
