"""The multiple-choice task for `run_multiple_choice.py`, as one value.

`MultipleChoiceTask` reads the splits a run needs (`data`), writes their
records (`features`), gives `loop.run` its training, evaluation and
prediction (`test_results.tsv`, `predictions`), and names its head
(`head.MultipleChoiceHead`). It takes values, never flags: the script reads
its flags and passes them.
"""

import dataclasses
import os

from absl import logging

from bert_tf.runner import loop
from bert_tf.tasks.multiple_choice import data
from bert_tf.tasks.multiple_choice import features as mc_features
from bert_tf.tasks.multiple_choice import head as mc_head
from bert_tf.tasks.multiple_choice import metrics as mc_metrics
from bert_tf.tasks.multiple_choice import predictions as mc_predictions
from bert_tf.train import model_fn as model_fn_utils

__all__ = ["TEST_RESULTS_FILE", "MultipleChoiceOptions", "MultipleChoiceTask"]

TEST_RESULTS_FILE = "test_results.tsv"


@dataclasses.dataclass(frozen=True)
class MultipleChoiceOptions:
  """What the task needs from a run.

  Attributes:
    data_dir: str, the folder of `train`, `val` and `test` files.
    output_dir: str, where records and `test_results.tsv` go.
    max_seq_length: int, each choice's row length.
    use_tpu: bool; evaluation and prediction records are padded to whole
      batches on TPU.
    eval_batch_size: int.
    predict_batch_size: int.
    split_files: dict split -> (file name in `data_dir` or path, the flag
      that gave it); a split not in it has its standard name
      (`data.split_file`).
  """

  data_dir: str
  output_dir: str
  max_seq_length: int
  use_tpu: bool = False
  eval_batch_size: int = 8
  predict_batch_size: int = 8
  split_files: dict = dataclasses.field(default_factory=dict)


class MultipleChoiceTask(object):
  """SWAG-style multiple choice: its data, records, head and outputs.

  Attributes:
    options: `MultipleChoiceOptions`.
    tokenizer: `tokenization.FullTokenizer`.
    head: `head.MultipleChoiceHead` (the script builds its `model_fn`).
    eval_keys: the keys of `eval_results.txt`.
    examples: dict split -> list of `data.MultipleChoiceExample`, after
      `read`.
  """

  def __init__(self, options, tokenizer, head):
    self.options = options
    self.tokenizer = tokenizer
    self.head = head
    self.eval_keys = mc_metrics.EVAL_KEYS
    self.examples = {}

  def read(self, splits):
    """Reads every split the run needs, so bad input fails before work.

    Args:
      splits: names among "train", "dev" and "test".

    Raises:
      ValueError: a bad file (one line naming file and row), or an empty
        training or dev split.
    """
    for split in splits:
      path = data.split_file(self.options.data_dir, split,
                             *self.options.split_files.get(split, ()))
      self.examples[split] = data.read_examples(path,
                                                labelled=split != "test")
      logging.info("Read %d %s questions from %s", len(self.examples[split]),
                   split, path)
      if not self.examples[split] and split != "test":
        raise ValueError("%s: no questions; --do_%s needs at least one" %
                         (path, "train" if split == "train" else "eval"))

  def _write(self, split, batch_size=None):
    """Writes the split's records; returns (path, records, num_choices)."""
    examples = self.examples[split]
    path = os.path.join(self.options.output_dir, "%s.tf_record" % split)
    multiple = batch_size if self.options.use_tpu else None
    count = mc_features.write_records(examples, self.options.max_seq_length,
                                      self.tokenizer, path,
                                      batch_multiple=multiple)
    num_choices = len(examples[0].endings) if examples else 2
    logging.info("  %s: %d questions of %d choices (%d records)", split,
                 len(examples), num_choices, count)
    return path, count, num_choices

  def _input_fn(self, path, num_choices, is_training):
    return mc_features.file_based_input_fn_builder(
        path, num_choices, self.options.max_seq_length,
        is_training=is_training,
        drop_remainder=is_training or self.options.use_tpu)

  def training(self, examples_per_update, num_train_epochs,
               warmup_proportion, learning_rate):
    """Writes the training records; their `loop.Training`.

    Args:
      examples_per_update: int, questions per update (batch size times
        accumulation steps).
      num_train_epochs: float.
      warmup_proportion: float, the share of the steps spent warming up.
      learning_rate: float, the peak rate.
    """
    path, count, num_choices = self._write("train")
    num_train_steps, num_warmup_steps = model_fn_utils.fine_tuning_steps(
        count, examples_per_update, num_train_epochs, warmup_proportion)
    return loop.Training(
        input_fn=self._input_fn(path, num_choices, True),
        num_train_steps=num_train_steps, num_warmup_steps=num_warmup_steps,
        learning_rate=learning_rate, records=[path],
        token_weights=mc_head.question_weights,
        progress_every=min(100, max(1, num_train_steps // 10)))

  def evaluate(self):
    """Writes the dev records; `loop.run`'s `evaluate(steps)` over them."""
    batch_size = self.options.eval_batch_size
    path, count, num_choices = self._write("dev", batch_size)
    input_fn = self._input_fn(path, num_choices, False)

    def evaluate(steps):
      # On TPU every batch is whole; elsewhere the last partial one is kept.
      return steps.evaluate(
          input_fn, records=[path],
          steps=count // batch_size if self.options.use_tpu else None)

    return evaluate

  def predict(self, steps, checkpoint):
    """`loop.run`'s `predict`: writes `test_results.tsv` (see
    `predictions.write_test_results`) over the test split."""
    batch_size = self.options.predict_batch_size
    path, count, num_choices = self._write("test", batch_size)
    results = steps.predict(
        self._input_fn(path, num_choices, False), records=[path],
        num_batches=-(-count // batch_size), checkpoint_path=checkpoint,
        batch_size=batch_size)
    output_file = os.path.join(self.options.output_dir, TEST_RESULTS_FILE)
    num_examples = len(self.examples["test"])
    mc_predictions.write_test_results(output_file, results, num_examples)
    logging.info("Wrote %d lines to %s", num_examples, output_file)
