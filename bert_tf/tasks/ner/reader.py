"""Reading CoNLL column files into sentences, and the label list.

`read_conll_file` reads CoNLL-2003's `token POS chunk NER`, WNUT-17's
`token<TAB>tag` or any other column count: one word per line, the token in
column 0, the label in a chosen column; whitespace-only lines end a
sentence, `-DOCSTART-` lines start a document and are never words. The
training file's labels make the label list, which training writes to
`LABEL_LIST_FILE` in the output folder for later runs.
"""

import dataclasses
from typing import List, Optional

import tensorflow.compat.v1 as tf

from bert_tf import io as io_utils

__all__ = ["DOCSTART", "LABEL_LIST_FILE", "Sentence", "read_conll_file",
           "label_list_from", "check_labels", "write_label_list",
           "read_label_list"]

DOCSTART = "-DOCSTART-"
LABEL_LIST_FILE = "label_list.txt"


@dataclasses.dataclass
class Sentence:
  """One sentence of a CoNLL file.

  Attributes:
    words: list of str, the tokens (column 0), in file order.
    labels: list of str (one per word), or None for a one-column file.
    document: int, 0-based index of the sentence's document in its file
      (a file without `-DOCSTART-` lines is one document).
    lines: list of int, the 1-based line number of each word.
    path: str, the file it was read from.
  """
  words: List[str]
  labels: Optional[List[str]]
  document: int
  lines: List[int]
  path: str


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
    ValueError: when it does not exist (no training run wrote it), is empty
      or is not UTF-8 text (the file named).
  """
  if not tf.io.gfile.exists(path):
    raise ValueError("%s not found: the label list is written by --do_train; "
                     "train first, or use the --output_dir of a training run"
                     % path)
  labels = [text for _, text in io_utils.read_lines(path, strict=True)
            if text.strip()]
  if not labels:
    raise ValueError("%s: empty label list" % path)
  return labels
