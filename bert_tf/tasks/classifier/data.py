"""Sentence(-pair) classification data: examples and the task processors.

The reference release's `InputExample`, `DataProcessor` and its XNLI, MNLI,
MRPC and CoLA processors with their file layouts, plus the rest of GLUE
(`sst-2`, `qqp`, `qnli`, `rte`, `wnli`, `sts-b` as a regression task,
`mnli-mm` for the mismatched sets) and a `tsv` task for a user's own files.
`run_classifier.py` imports every public name from here, so code written for
the reference (`run_classifier.MrpcProcessor()`) keeps working.
"""

import collections
import dataclasses
import math
import os
import types
from typing import Any, Optional

from bert_tf import io as io_utils
import tokenization

__all__ = [
    "AGGREGATIONS", "InputExample", "PaddingInputExample", "read_tsv_rows", "DataProcessor",
    "XnliProcessor", "MnliProcessor", "MnliMismatchedProcessor",
    "MrpcProcessor", "ColaProcessor", "Sst2Processor", "QqpProcessor",
    "QnliProcessor", "RteProcessor", "WnliProcessor", "StsbProcessor",
    "TsvProcessor", "PROCESSORS", "get_processor",
]


@dataclasses.dataclass(eq=False)
class InputExample:
  """A single training/test example for simple sequence classification.

  Attributes:
    guid: Unique id for the example, `"<set>-<n>"`.
    text_a: string. The untokenized text of the first sequence.
    text_b: (Optional) string. The untokenized text of the second sequence;
      None for single-sequence tasks.
    label: (Optional) string. The label of the example (for a regression
      task, the score as a string). Test examples carry the task's dummy
      label.
  """

  guid: Any
  text_a: str
  text_b: Optional[str] = None
  label: Optional[str] = None


@dataclasses.dataclass(eq=False)
class PaddingInputExample:
  """Fake example that pads an eval/predict set to a whole number of batches.

  TPUs need fixed-size batches, so on TPU the eval and predict sets are padded
  with these. They become all-zero features with `is_real_example=False`, which
  the metrics weight by 0 and `test_results.tsv` never contains. (Padding with
  real examples instead would bias the metrics.)
  """


# ----------------------------------------------------------------------------
# Reading tab-separated files.
# ----------------------------------------------------------------------------


@io_utils.gc_paused()
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
  rows = []
  for number, line in io_utils.read_lines(input_file, strict=True):
    line_index = number - 1
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
          (input_file, number, num_columns, len(cells)))
    if skip_header and line_index == 0:
      continue
    rows.append((line_index, cells))
  return rows


def _find_data_file(data_dir, *names):
  """Returns the first of `data_dir/<name>` that exists.

  Raises:
    FileNotFoundError: naming the first (the reference's) path and the
      alternatives, when none exists.
  """
  paths = [os.path.join(data_dir, name) for name in names]
  for path in paths:
    if os.path.exists(path):
      return path
    if "://" in path:
      # Remote paths through tf.io.gfile; importing this module loads no
      # TensorFlow (the scripts' flags are parsed before it loads).
      import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
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
                "guid_column"], defaults=(None, None, None))


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

  @io_utils.gc_paused()
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
                  "train", _Layout(num_columns=3, header=True, text_a=0,
                                   text_b=1, label=2)),
        "dev": (("xnli.dev.tsv", "XNLI-1.0/xnli.dev.tsv"),
                "dev", _Layout(num_columns=19, header=True, text_a=6, text_b=7,
                               label=1)),
        "test": (("xnli.test.tsv", "XNLI-1.0/xnli.test.tsv"),
                 "test", _Layout(num_columns=19, header=True, text_a=6,
                                 text_b=7, label=1)),
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
      "train": (("train.tsv",), "train",
                _Layout(num_columns=12, header=True, text_a=8, text_b=9,
                        label=11, guid_column=0)),
      "dev": (("dev_matched.tsv",), "dev_matched",
              _Layout(num_columns=16, header=True, text_a=8, text_b=9, label=15,
                      guid_column=0)),
      "test": (("test_matched.tsv",), "test",
               _Layout(num_columns=10, header=True, text_a=8, text_b=9,
                       guid_column=0)),
  }


class MnliMismatchedProcessor(MnliProcessor):
  """MultiNLI (GLUE), mismatched dev and test sets (task `mnli-mm`)."""

  SPLITS = dict(MnliProcessor.SPLITS)
  SPLITS["dev"] = (("dev_mismatched.tsv",), "dev_mismatched",
                   _Layout(num_columns=16, header=True, text_a=8, text_b=9,
                           label=15, guid_column=0))
  SPLITS["test"] = (("test_mismatched.tsv",), "test_mismatched",
                    _Layout(num_columns=10, header=True, text_a=8, text_b=9,
                            guid_column=0))


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
  SPLITS = _glue_splits(_Layout(num_columns=5, header=True, text_a=3, text_b=4,
                                label=0),
                        _Layout(num_columns=5, header=True, text_a=3, text_b=4))


class ColaProcessor(DataProcessor):
  """CoLA (GLUE): train/dev `source label original-label sentence`, no header;
  test `index sentence` with a header."""

  LABELS = ("0", "1")
  TEST_LABEL = "0"
  metric_names = ("mcc",)
  SPLITS = _glue_splits(_Layout(num_columns=4, header=False, text_a=3, label=1),
                        _Layout(num_columns=2, header=True, text_a=1))


class Sst2Processor(DataProcessor):
  """SST-2 (GLUE): `sentence label`; test `index sentence`."""

  LABELS = ("0", "1")
  TEST_LABEL = "0"
  SPLITS = _glue_splits(_Layout(num_columns=2, header=True, text_a=0, label=1),
                        _Layout(num_columns=2, header=True, text_a=1))


class QqpProcessor(DataProcessor):
  """QQP (GLUE): `id qid1 qid2 question1 question2 is_duplicate`; test
  `id question1 question2`."""

  LABELS = ("0", "1")
  TEST_LABEL = "0"
  metric_names = ("f1",)
  SPLITS = _glue_splits(_Layout(num_columns=6, header=True, text_a=3, text_b=4,
                                label=5),
                        _Layout(num_columns=3, header=True, text_a=1, text_b=2))


class QnliProcessor(DataProcessor):
  """QNLI (GLUE): `index question sentence label`; test without label."""

  LABELS = ("entailment", "not_entailment")
  TEST_LABEL = "entailment"
  SPLITS = _glue_splits(_Layout(num_columns=4, header=True, text_a=1, text_b=2,
                                label=3),
                        _Layout(num_columns=3, header=True, text_a=1, text_b=2))


class RteProcessor(QnliProcessor):
  """RTE (GLUE): `index sentence1 sentence2 label`; test without label."""


class WnliProcessor(DataProcessor):
  """WNLI (GLUE): `index sentence1 sentence2 label`; test without label."""

  LABELS = ("0", "1")
  TEST_LABEL = "0"
  SPLITS = _glue_splits(_Layout(num_columns=4, header=True, text_a=1, text_b=2,
                                label=3),
                        _Layout(num_columns=3, header=True, text_a=1, text_b=2))


class StsbProcessor(DataProcessor):
  """STS-B (GLUE), a regression task: a 0-5 similarity score.

  Ten columns (`index genre filename year old_index source1 source2 sentence1
  sentence2 score`); test has nine (no score). `get_labels()` is None.
  """

  TEST_LABEL = "0.0"
  is_regression = True
  metric_names = ("pearson", "spearman")
  SPLITS = _glue_splits(_Layout(num_columns=10, header=True, text_a=7, text_b=8,
                                label=9),
                        _Layout(num_columns=9, header=True, text_a=7, text_b=8))

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
      if not self._labels:
        raise ValueError("%s: no rows; the label set is read from the "
                         "training file's label column" % path)
    return list(self._labels)

  @io_utils.gc_paused()
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


# Task name (lower case) -> processor class (read-only).
# run_classifier.py --window_aggregation: how the windows of a long text make
# its prediction (`windows.aggregate`).
AGGREGATIONS = ("mean", "max")

PROCESSORS = types.MappingProxyType({
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
})


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
