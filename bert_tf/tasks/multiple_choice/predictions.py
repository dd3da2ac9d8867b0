"""`test_results.tsv` of multiple choice: probabilities and the choice."""

import numpy as np

from bert_tf import io as io_utils

__all__ = ["write_test_results"]


def write_test_results(output_file, predictions, num_examples):
  """Writes one line per test question, atomically.

  Each line holds the probability of each ending (`ending0` first), then the
  index of the most probable ending, tab-separated: with four endings
  `p0 <TAB> p1 <TAB> p2 <TAB> p3 <TAB> choice`. Lines are in the order of
  the test file.

  Args:
    output_file: str, the file to write.
    predictions: iterable of dicts with `probabilities` (float array
      [num_choices]), in input order; entries after the first
      `num_examples` (TPU padding) are not written.
    num_examples: int, the number of real test questions.

  Returns:
    int, the number of lines written (`num_examples`).

  Raises:
    ValueError: fewer than `num_examples` predictions arrive.
  """
  written = 0
  with io_utils.atomic_write(output_file) as writer:
    for prediction in predictions:
      if written >= num_examples:
        break
      values = np.reshape(prediction["probabilities"], [-1])
      cells = [io_utils.number_str(value) for value in values]
      cells.append(str(int(np.argmax(values))))
      writer.write("\t".join(cells) + "\n")
      written += 1
    if written != num_examples:
      raise ValueError("%s: got %d predictions for %d test questions" %
                       (output_file, written, num_examples))
  return written
