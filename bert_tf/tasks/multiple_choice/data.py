"""Multiple-choice questions: SWAG's CSV and JSON-lines files.

Two layouts, told apart by the file name's extension:

- CSV (`.csv`), the SWAG release's (Zellers et al. 2018): a header row
  naming the columns (`video-id, fold-ind, startphrase, sent1, sent2,
  gold-source, ending0, ..., ending3, label`; SWAG's files start with an
  unnamed index column); the columns are found by name, so any order and
  extra columns are fine. The test split has no `label` column.
- JSON lines (`.json` or `.jsonl`), Hugging Face's `swag` layout: one
  object per line with `sent1`, `sent2`, `ending0`, ..., `label`; in the
  test split `label` may be absent or -1.

Any number of endings from 2 up is read, `ending0` to `endingN` with no gap:
the CSV header (or a JSON line's keys) decides how many. `--data_dir` holds
one file per split: `train`, `val` and `test` (SWAG's names), each `.csv`,
`.json` or `.jsonl`; or files named by the script (`--train_file`, ...).
A missing ending, a missing or out-of-range label and a
split with no file (or two) are one-line `ValueError`s naming the file and
row.
"""

import csv
import dataclasses
import json
import os
import re
from typing import List, Optional

import tensorflow.compat.v1 as tf

from bert_tf import io as io_utils

__all__ = ["MultipleChoiceExample", "SPLITS", "EXTENSIONS", "split_file",
           "read_examples", "read_split"]

# Split -> the file's base name in --data_dir (SWAG's names).
SPLITS = {"train": "train", "dev": "val", "test": "test"}
EXTENSIONS = (".csv", ".json", ".jsonl")
_ENDING = re.compile(r"^ending(\d+)$")
_MIN_CHOICES = 2


@dataclasses.dataclass(frozen=True)
class MultipleChoiceExample:
  """One question: a context, the start of the next sentence, its endings.

  Attributes:
    guid: str, `<file name>-<row>` (the row's line number in the file).
    context: str, sentence A (SWAG's `sent1`).
    start: str, the start of the next sentence (SWAG's `sent2`), put before
      each ending in sentence B.
    endings: tuple of str, the candidate endings (at least 2).
    label: int, the index of the right ending; None when unlabelled (test).
  """

  guid: str
  context: str
  start: str
  endings: tuple
  label: Optional[int] = None

  def choice_texts(self):
    """Sentence B of each choice: `start + " " + ending` (paper's recipe)."""
    return [" ".join(part for part in (self.start, ending) if part)
            for ending in self.endings]


def split_file(data_dir, split, name=None, option=None):
  """The file of `split` in `data_dir`.

  Args:
    data_dir: str, the `--data_dir` folder.
    split: "train", "dev" or "test".
    name: (optional) str, the file's name in `data_dir` (or a path); None:
      the split's standard name, `<train|val|test>.<csv|json|jsonl>`.
    option: (optional) str, what gave `name` (for the message: a flag).

  Returns:
    str, the file's path.

  Raises:
    ValueError: no such file, or more than one (naming them).
  """
  if name:
    path = os.path.join(data_dir, name)
    if not tf.io.gfile.exists(path):
      raise ValueError("%s%s: no such file" %
                       ("%s: " % option if option else "", path))
    return path
  base = SPLITS[split]
  found = [os.path.join(data_dir, base + ext) for ext in EXTENSIONS
           if tf.io.gfile.exists(os.path.join(data_dir, base + ext))]
  if not found:
    raise ValueError("--data_dir=%s: no %s file; expected one of %s" %
                     (data_dir, split,
                      ", ".join(base + ext for ext in EXTENSIONS)))
  if len(found) > 1:
    raise ValueError("--data_dir=%s: %s are both the %s split; keep one" %
                     (data_dir, " and ".join(os.path.basename(p)
                                             for p in found), split))
  return found[0]


def read_split(data_dir, split):
  """`read_examples` of the split's file (`split_file`); test: unlabelled."""
  return read_examples(split_file(data_dir, split),
                       labelled=split != "test")


def read_examples(path, labelled=True):
  """Reads the questions of one file (CSV or JSON lines, by extension).

  Args:
    path: str, a `.csv`, `.json` or `.jsonl` file.
    labelled: bool; True requires a label in range on every row, False
      (the test split) reads a label where there is one (-1 or absent:
      none).

  Returns:
    list of `MultipleChoiceExample`, in file order.

  Raises:
    ValueError: one line naming the file (and row): an unknown extension,
      a missing column or ending, fewer than 2 endings, a gap in the
      endings' numbers, a label that is not an integer in range.
  """
  if path.endswith(".csv"):
    return _read_csv(path, labelled)
  if path.endswith((".json", ".jsonl")):
    return _read_json_lines(path, labelled)
  raise ValueError("%s: expected a .csv, .json or .jsonl file" % path)


def _ending_keys(keys, where):
  """`ending0`..`endingN` among `keys`, in order; checks there is no gap."""
  numbers = sorted(int(m.group(1)) for m in map(_ENDING.match, keys) if m)
  if len(numbers) < _MIN_CHOICES:
    raise ValueError("%s: expected columns ending0, ending1, ... (at least "
                     "%d endings), got %s" % (where, _MIN_CHOICES,
                                              numbers and ", ".join(
                                                  "ending%d" % n
                                                  for n in numbers) or
                                              "none"))
  if numbers != list(range(len(numbers))):
    missing = sorted(set(range(numbers[-1] + 1)) - set(numbers))
    raise ValueError("%s: ending%d is missing (the endings are numbered "
                     "from 0 without gaps)" % (where, missing[0]))
  return ["ending%d" % n for n in numbers]


def _example(where, guid, values, ending_keys, labelled):
  """The example of one row (`values`: column name -> str/int or None)."""
  for key in ("sent1", "sent2"):
    if values.get(key) is None:
      raise ValueError("%s: %s is missing" % (where, key))
    if not isinstance(values[key], str):
      raise ValueError("%s: %s is %r, expected a string" %
                       (where, key, values[key]))
  endings = []
  for key in ending_keys:
    ending = values.get(key)
    if ending is None or not isinstance(ending, str) or not ending.strip():
      raise ValueError("%s: %s is missing (every question has %d endings)" %
                       (where, key, len(ending_keys)))
    endings.append(ending)
  label = _label(where, values.get("label"), len(ending_keys), labelled)
  return MultipleChoiceExample(guid=guid, context=values["sent1"],
                               start=values["sent2"], endings=tuple(endings),
                               label=label)


def _label(where, raw, num_choices, labelled):
  """The label as an int in [0, num_choices), or None (unlabelled)."""
  if raw is None or (isinstance(raw, str) and not raw.strip()):
    if labelled:
      raise ValueError("%s: label is missing" % where)
    return None
  try:
    if isinstance(raw, bool) or isinstance(raw, float):
      raise ValueError()
    label = int(raw.strip() if isinstance(raw, str) else raw)
  except (TypeError, ValueError):
    raise ValueError("%s: label %r is not an integer (expected 0..%d)" %
                     (where, raw, num_choices - 1)) from None
  if label == -1 and not labelled:
    return None  # Hugging Face's unlabelled test rows.
  if not 0 <= label < num_choices:
    raise ValueError("%s: label %d is out of range for %d endings (expected "
                     "0..%d)" % (where, label, num_choices, num_choices - 1))
  return label


def _text_lines(path):
  """The file's lines, each ending in a newline (for `csv.reader`)."""
  for _, line in io_utils.read_lines(path, strict=True):
    yield line + "\n"


def _read_csv(path, labelled):
  name = os.path.basename(path)
  reader = csv.reader(_text_lines(path))
  header = next(reader, None)
  if header is None:
    raise ValueError("%s: empty file; expected a header row" % path)
  # A byte-order mark (spreadsheets write one) is not part of a name.
  header = [column.strip().lstrip("\ufeff") for column in header]
  ending_keys = _ending_keys(header, "%s:1" % path)
  for key in ("sent1", "sent2") + (("label",) if labelled else ()):
    if key not in header:
      raise ValueError("%s:1: no %s column in the header (got %s)" %
                       (path, key, ", ".join(header)))
  examples: List[MultipleChoiceExample] = []
  row_start = reader.line_num + 1
  for row in reader:
    where = "%s:%d" % (path, row_start)
    line = row_start
    row_start = reader.line_num + 1
    if not row:
      continue  # A blank line.
    values = {key: row[i] if i < len(row) else None
              for i, key in enumerate(header)}
    examples.append(_example(where, "%s-%d" % (name, line), values,
                             ending_keys, labelled))
  return examples


def _read_json_lines(path, labelled):
  name = os.path.basename(path)
  examples = []
  for number, line in io_utils.read_lines(path, strict=True):
    if not line.strip():
      continue
    where = "%s:%d" % (path, number)
    try:
      values = json.loads(line)
    except ValueError as e:
      raise ValueError("%s: not a JSON object (%s)" % (where, e)) from None
    if not isinstance(values, dict):
      raise ValueError("%s: expected a JSON object, got %s" %
                       (where, type(values).__name__))
    example = _example(where, "%s-%d" % (name, number), values,
                       _ending_keys(list(values), where), labelled)
    if examples and len(example.endings) != len(examples[0].endings):
      raise ValueError("%s: %d endings, the file's first question %d (every "
                       "question of a file has the same number)" %
                       (where, len(example.endings),
                        len(examples[0].endings)))
    examples.append(example)
  return examples
