"""The classification task as one value: its data, records, head and outputs.

`ClassifierTask` is what `run_classifier.py` trains: it reads the splits
(`DataProcessor`), writes their records (the reference's
`file_based_convert_examples_to_features`, or `windows.write_features`
where the head needs it), builds the `input_fn`s and the `model_fn` of its
head, writes `test_results.tsv` and says what its export holds. It reads
no flags: the script chooses the processor and the head.
"""

import dataclasses
import os
from typing import Any, Optional

from absl import logging
import tensorflow.compat.v1 as tf

from bert_tf.runner import loop
from bert_tf.tasks.classifier import features as features_lib
from bert_tf.tasks.classifier import model as model_lib
from bert_tf.tasks.classifier import windows as windows_lib
from bert_tf.tasks.classifier.data import PaddingInputExample
from bert_tf.tasks.classifier.data import TsvProcessor
from bert_tf.train import input_fn as input_utils
from bert_tf.train import model_fn as model_fn_utils
from bert_tf.train import packing

__all__ = ["ClassifierTask"]


@dataclasses.dataclass
class ClassifierTask:
  """A classification task: data, records, head, outputs.

  Attributes:
    name: str, the task's name in lower case (`data.PROCESSORS`).
    processor: the task's `DataProcessor`.
    label_list: list of str (`processor.get_labels()`), None for regression.
    head: the head value (e.g. `model.head_for`'s).
    tokenizer: `tokenization.FullTokenizer`.
    max_seq_length: int.
    output_dir: str, where records and outputs are written.
    use_tpu: bool; evaluation and prediction records are padded to whole
      batches on TPU.
    bucket_by_length: bool, see `features.file_based_input_fn_builder`.
    max_examples_per_row: int, or None (the reference's one example per
      record): records are rows of up to this many whole examples
      (`packing`); `--train_batch_size` counts examples on average, the
      eval and predict batch sizes rows.
  """

  name: str
  processor: Any
  label_list: Optional[list]
  head: Any
  tokenizer: Any
  max_seq_length: int
  output_dir: str
  use_tpu: bool = False
  bucket_by_length: bool = False
  max_examples_per_row: Optional[int] = None

  def read_examples(self, data_dir, splits):
    """Reads every split that the run needs ("train", "dev", "test"), so
    bad input fails up front; dict split -> list of `InputExample`s.

    Raises:
      ValueError: when the training or dev split is empty.
    """
    examples = {}
    for split in splits:
      examples[split] = getattr(self.processor,
                                "get_%s_examples" % split)(data_dir)
      logging.info("Read %d %s examples from %s", len(examples[split]), split,
                   data_dir)
      # An empty test set is fine (it gives an empty test_results.tsv), but
      # training on nothing would loop forever and evaluating nothing means
      # nothing.
      if not examples[split] and split != "test":
        raise ValueError("--data_dir=%s: no %s examples were read; --do_%s "
                         "needs at least one" %
                         (data_dir, split,
                          "train" if split == "train" else "eval"))
    return examples

  def write_records(self, path, examples, batch_size=None):
    """Writes `examples` to `path`, padded to whole batches of `batch_size`
    on TPU (None: training, no padding).

    Returns:
      (number of records, owners): `owners` lists each record's example
      (`windows.write_features`; packed: each packed input's), or is None
      for the reference's records (one per example, in order).
    """
    if self.max_examples_per_row:
      num_rows, owners, _ = self._write_rows(path, examples, batch_size)
      return num_rows, None if self.head.reference_records else owners
    if not self.head.reference_records:
      owners = windows_lib.write_features(
          examples, self.head, self.max_seq_length, self.tokenizer, path,
          doc_stride=self.head.doc_stride,
          batch_multiple=batch_size if self.use_tpu else None)
      return len(owners), owners
    num_actual = len(examples)
    if batch_size is not None and self.use_tpu:
      examples = features_lib.pad_to_batch_multiple(examples, batch_size)
    features_lib.file_based_convert_examples_to_features(
        examples, self.label_list, self.max_seq_length, self.tokenizer, path)
    if batch_size is not None:
      logging.info("  Num examples = %d (%d actual, %d padding)",
                   len(examples), num_actual, len(examples) - num_actual)
      logging.info("  Batch size = %d", batch_size)
    return len(examples), None

  def _write_rows(self, path, examples, batch_size, window=None):
    """`write_records` for packed rows: each example's inputs (its windows
    with `doc_stride`), packed (`packing.pack`'s `window`), then empty
    rows to whole batches on TPU.

    Returns:
      (number of rows, each input's example index, number of inputs).
    """
    inputs, labels, owners = [], [], []
    for index, example in enumerate(examples):
      if isinstance(example, PaddingInputExample):
        continue
      label = self.head.label_ids(example)
      for input_ids, input_mask, segment_ids in windows_lib.encode_windows(
          example, self.tokenizer, self.max_seq_length, self.head.doc_stride):
        length = sum(input_mask)
        inputs.append({"input_ids": input_ids[:length],
                       "segment_ids": segment_ids[:length]})
        labels.append(label)
        owners.append(index)
    rows = packing.pack(inputs, self.max_seq_length,
                        self.max_examples_per_row, window=window)
    while batch_size and self.use_tpu and len(rows) % batch_size:
      rows.append(packing.empty_row(self.max_seq_length,
                                    self.max_examples_per_row))
    packing.add_slot_values(rows, "label_ids", labels,
                            list(self.head.padding_label))
    packing.write_rows(path, rows)
    logging.info("Packed %d inputs into %d rows of %d tokens", len(inputs),
                 len(rows), self.max_seq_length)
    return len(rows), owners, len(inputs)

  def _packed_schema(self):
    return packing.input_features(self.max_seq_length,
                                  self.max_examples_per_row,
                                  self.head.label_feature)

  def input_fn(self, path, is_training=False):
    """The `input_fn` over a records file `write_records` wrote (packed
    rows: evaluation and prediction; `training` reads packed training rows
    through `packing.training_input_fn`)."""
    if self.max_examples_per_row:
      if is_training:
        raise ValueError("packed training rows are read by "
                         "packing.training_input_fn (see training)")
      return input_utils.tfrecord_input_fn_builder(
          [path], self._packed_schema(), is_training=False,
          drop_remainder=self.use_tpu)
    return features_lib.file_based_input_fn_builder(
        path, self.max_seq_length, is_training=is_training,
        drop_remainder=is_training or self.use_tpu,
        label_feature=self.head.label_feature,
        bucket_by_length=self.bucket_by_length)

  def model_fn(self, bert_config, init_checkpoint, schedule=None,
               compute_dtype=tf.float32):
    """The head's `model_fn` (`model_fn.build_model_fn`)."""
    return model_fn_utils.build_model_fn(
        self.head, bert_config, init_checkpoint, self.use_tpu,
        use_one_hot_embeddings=self.use_tpu, schedule=schedule,
        compute_dtype=compute_dtype)

  def training(self, examples, examples_per_update, num_train_epochs,
               warmup_proportion, learning_rate):
    """Writes the training records; their `loop.Training` (steps count
    updates of `examples_per_update` records)."""
    self.head.write_training_files(self.output_dir)
    train_file = os.path.join(self.output_dir, "train.tf_record")
    # With windows, every window is a training example.
    if self.max_examples_per_row:  # Steps count inputs, batches rows.
      num_rows, _, num_records = self._write_rows(
          train_file, examples, None, window=packing.TRAINING_SPAN)
      input_fn = packing.training_input_fn(
          train_file, self._packed_schema(), num_records / max(1, num_rows))
    else:
      num_records, _ = self.write_records(train_file, examples)
      input_fn = self.input_fn(train_file, is_training=True)
    num_train_steps, num_warmup_steps = model_fn_utils.fine_tuning_steps(
        num_records, examples_per_update, num_train_epochs,
        warmup_proportion)
    logging.info("  Num examples = %d (%d records)", len(examples),
                 num_records)
    return loop.Training(
        input_fn=input_fn, num_train_steps=num_train_steps, num_warmup_steps=num_warmup_steps,
        learning_rate=learning_rate, records=[train_file],
        # With accumulation, packed micro-batches of unequal numbers of
        # examples give the mean over all of the update's examples.
        token_weights=lambda batch: batch["is_real_example"],
        # Progress about ten times a run, at most every 100 steps.
        progress_every=min(100, max(1, num_train_steps // 10)))

  def evaluate(self, examples, batch_size):
    """Writes the dev records; the `loop.run` evaluation over them."""
    eval_file = os.path.join(self.output_dir, "eval.tf_record")
    num_written, _ = self.write_records(eval_file, examples, batch_size)

    def evaluate(steps):
      # On TPU every batch is whole; elsewhere the last partial batch is
      # kept and evaluation runs until the data is exhausted.
      return steps.evaluate(
          self.input_fn(eval_file), records=[eval_file],
          steps=num_written // batch_size if self.use_tpu else None)

    return evaluate

  def predict(self, examples, batch_size, steps, checkpoint):
    """Writes test_results.tsv: a line of probabilities (or the predicted
    value) per test example."""
    predict_file = os.path.join(self.output_dir, "predict.tf_record")
    num_written, owners = self.write_records(predict_file, examples,
                                             batch_size)
    predictions = steps.predict(
        self.input_fn(predict_file), records=[predict_file],
        num_batches=-(-num_written // batch_size), checkpoint_path=checkpoint,
        batch_size=batch_size)
    if self.max_examples_per_row:  # In input order; windows then combined.
      num_inputs = len(owners) if owners is not None else len(examples)
      predictions = packing.unpack(predictions, num_inputs)
    if owners is not None:
      predictions = self.head.aggregate(predictions, owners, len(examples))
    output_file = os.path.join(self.output_dir, "test_results.tsv")
    model_lib.write_test_results(output_file, predictions, len(examples))
    logging.info("Wrote %d lines to %s", len(examples), output_file)

  def export_spec(self, bert_config):
    """What an export of the task holds: `saved_model.export_saved_model`'s
    `model_fn` (PREDICT, float32, no TPU), `max_seq_length`, `label_list`,
    `bucket_by_length`, `max_examples_per_row` (packed: a packed signature
    too), and the head's `export_spec` with the task's own
    `serving_config.json` keys (its name, the `tsv` task's columns; a
    windowed head's `doc_stride` and `window_aggregation`)."""
    spec = self.head.export_spec()
    tsv_columns = None
    if isinstance(self.processor, TsvProcessor):
      tsv_columns = {name: getattr(self.processor, name) for name in (
          "text_a_column", "text_b_column", "skip_header")}
    spec["extra_config"].update(task_name=self.name, tsv_columns=tsv_columns)
    if self.head.doc_stride is not None:
      spec["extra_config"].update(doc_stride=self.head.doc_stride,
                                  window_aggregation=self.head.aggregation)
    return dict(spec, model_fn=model_fn_utils.build_model_fn(
        self.head, bert_config, None, False, False),
                max_seq_length=self.max_seq_length,
                label_list=self.label_list,
                bucket_by_length=self.bucket_by_length,
                max_examples_per_row=self.max_examples_per_row)
