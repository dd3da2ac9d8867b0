"""Multi-label classification data: a `tsv` task whose label is a set.

`run_classifier.py --multi_label=True` reads `train.tsv`/`dev.tsv`/`test.tsv`
as the `tsv` task does, except that the label cell holds any number of
labels joined by `--label_separator` (an empty cell: no label). The label
list is the sorted union of the labels in `train.tsv`; an example's label
becomes a multi-hot vector over it (one sigmoid per label in the model, see
`model.create_model`). Also: the label file written beside the checkpoints,
which `convert_checkpoint.py` reads to mark a Hugging Face export as
`problem_type="multi_label_classification"`, and the recipe that turns a
CoNLL-2003 file into "which entity types occur in this sentence".
"""

import json
import os
import sys

import tensorflow.compat.v1 as tf

from bert_tf import io as io_utils
from bert_tf import json_file
from bert_tf.tasks.ner import reader as ner_reader
from bert_tf.tasks.classifier.data import InputExample
from bert_tf.tasks.classifier.data import read_tsv_rows
from bert_tf.tasks.classifier.data import TsvProcessor
from bert_tf.tasks.classifier.data import _find_data_file  # pylint: disable=protected-access
import tokenization

__all__ = [
    "PROBLEM_TYPE", "LABELS_FILE", "split_label_set", "multi_hot",
    "MultiLabelTsvProcessor", "write_labels_file", "read_labels_file",
    "conll_entity_type_rows", "CONLL_SPLITS", "write_conll_entity_types",
    "main",
]

# Hugging Face's name for this head's loss (`BertForSequenceClassification`).
PROBLEM_TYPE = "multi_label_classification"
# Written into --output_dir by a --multi_label run: the problem type and the
# label names in output order.
LABELS_FILE = "classifier_labels.json"


def split_label_set(cell, separator, where):
  """The labels of one cell, in their order, without repeats.

  Args:
    cell: str, the label cell; empty (or only spaces) means no label.
    separator: str, what joins the labels (`--label_separator`).
    where: str, `file:line` for the error message.

  Returns:
    Tuple of str, each label stripped of surrounding spaces.

  Raises:
    ValueError: an empty label between separators, naming `where`.
  """
  if not cell.strip():
    return ()
  labels = []
  for part in cell.split(separator):
    label = part.strip()
    if not label:
      raise ValueError("%s: label set %r has an empty label (separator %r)" %
                       (where, cell, separator))
    if label not in labels:
      labels.append(label)
  return tuple(labels)


def multi_hot(label_set, label_list):
  """List of `len(label_list)` ints: 1 where the label is in `label_set`.

  Raises:
    ValueError: a label that is not in `label_list`.
  """
  index = {label: i for i, label in enumerate(label_list)}
  vector = [0] * len(label_list)
  for label in label_set:
    if label not in index:
      raise ValueError("label %r is not one of %s" % (label, label_list))
    vector[index[label]] = 1
  return vector


class MultiLabelTsvProcessor(TsvProcessor):
  """The `tsv` task with a set of labels per line (`--multi_label=True`).

  Columns as `TsvProcessor`. `InputExample.label` is a tuple of label
  strings (empty for `test.tsv`, whose label column is ignored).
  """

  multi_label = True

  def __init__(self, data_dir, separator=",", **kwargs):
    super().__init__(data_dir, **kwargs)
    if not separator:
      raise ValueError("--label_separator: expected a non-empty string")
    self.separator = separator

  def get_labels(self):
    if self._labels is None:
      path = _find_data_file(self.data_dir, "train.tsv")
      labels = set()
      for i, cells in read_tsv_rows(path, None, self.skip_header):
        cell = tokenization.convert_to_unicode(
            self._cell(path, i, cells, self.label_column))
        labels.update(split_label_set(cell, self.separator,
                                      "%s:%d" % (path, i + 1)))
      if not labels:
        raise ValueError("%s: no line has a label; --multi_label needs at "
                         "least one" % path)
      self._labels = sorted(labels)
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
        text_b = tokenization.convert_to_unicode(
            self._cell(path, line_index, cells, self.text_b_column))
      label = ()
      if split != "test":
        where = "%s:%d" % (path, line_index + 1)
        label = split_label_set(
            tokenization.convert_to_unicode(
                self._cell(path, line_index, cells, self.label_column)),
            self.separator, where)
        unknown = [name for name in label if name not in labels]
        if unknown:
          raise ValueError("%s: label %r is not one of the labels of "
                           "train.tsv %s" % (where, unknown[0], labels))
      examples.append(InputExample(
          guid="%s-%d" % (split, line_index),
          text_a=tokenization.convert_to_unicode(text_a), text_b=text_b,
          label=label))
    return examples


def write_labels_file(output_dir, label_list):
  """Writes `LABELS_FILE` into `output_dir` (atomically)."""
  path = os.path.join(output_dir, LABELS_FILE)
  with io_utils.atomic_write(path) as f:
    f.write(json.dumps({"problem_type": PROBLEM_TYPE,
                        "labels": list(label_list)}, indent=2) + "\n")
  return path


def read_labels_file(folder):
  """`(problem_type, labels)` from `folder/LABELS_FILE`, or None if absent.

  Raises:
    ValueError: a file that is not `{"problem_type": str, "labels": [str,
      ...]}`, naming it and the key.
  """
  path = os.path.join(folder, LABELS_FILE)
  if not tf.io.gfile.exists(path):
    return None
  content = json_file.load(path, max_bytes=2 ** 24)
  problem_type = json_file.field(content, "problem_type", "string", path)
  labels = json_file.field(content, "labels", "list", path)
  for i, label in enumerate(labels):
    json_file.require(label, "string", path,
                      json_file.index_path("labels", i))
  return problem_type, labels


def conll_entity_type_rows(sentences):
  """The recipe: (sentence text, its entity types) of CoNLL sentences.

  Args:
    sentences: `bert_tf.tasks.ner.reader.Sentence`s (words and IOB/BIO
      tags such as `B-PER`, `I-LOC`, `O`).

  Returns:
    List of `[text, types]` rows for a TSV file: the words joined by spaces
    and the sorted entity types (`LOC,PER`; empty when none occurs).
  """
  rows = []
  for sentence in sentences:
    types = sorted({tag.split("-", 1)[1] for tag in sentence.labels
                    if "-" in tag})
    rows.append([" ".join(sentence.words), ",".join(types)])
  return rows


# The recipe's files: TSV split -> CoNLL-2003 file (English).
CONLL_SPLITS = (("train", "eng.train"), ("dev", "eng.testa"),
                ("test", "eng.testb"))


def write_conll_entity_types(conll_dir, output_dir):
  """Writes the recipe's `train.tsv`, `dev.tsv` and `test.tsv`.

  Each line is `sentence<TAB>types` (see `conll_entity_type_rows`), for
  `run_classifier.py --task_name=tsv --multi_label=True`.

  Args:
    conll_dir: folder with `eng.train`, `eng.testa` and `eng.testb`.
    output_dir: folder to write to (created when absent).

  Returns:
    Dict split -> number of lines written.
  """
  tf.io.gfile.makedirs(output_dir)
  counts = {}
  for split, name in CONLL_SPLITS:
    rows = conll_entity_type_rows(
        ner_reader.read_conll_file(os.path.join(conll_dir, name)))
    with io_utils.atomic_write(os.path.join(output_dir,
                                            split + ".tsv")) as f:
      for row in rows:
        f.write("\t".join(row) + "\n")
    counts[split] = len(rows)
  return counts


def main(argv):
  """`python -m bert_tf.tasks.classifier.multi_label CONLL_DIR OUTPUT_DIR`
  writes the recipe's files; returns the exit status."""
  if len(argv) != 3:
    sys.stderr.write("usage: python -m bert_tf.tasks.classifier.multi_label "
                     "CONLL_DIR OUTPUT_DIR\n")
    return 2
  try:
    counts = write_conll_entity_types(argv[1], argv[2])
  except (OSError, ValueError) as e:
    sys.stderr.write("error: %s\n" % " ".join(str(e).split()))
    return 1
  print(" ".join("%s.tsv: %d lines" % item for item in counts.items()))
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv))
