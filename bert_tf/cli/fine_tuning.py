"""What every fine-tuning script shares: its training, model_fn and export.

A fine-tuning script writes its task's training records, then trains for
a number of epochs (`training`) the task's `model_fn.Head` on the encoder
(`model_fn`), and may export the fine-tuned model as a SavedModel
(`exporter`): the same steps for every task, which gives only its records,
its head and what its export serves (`Serving`); `runner/loop.py` runs
them. Nothing here reads flags: the scripts pass their values.
"""

import dataclasses
from typing import Any, Callable, Optional, Sequence

from bert_tf.export import saved_model as export_utils
from bert_tf.runner import loop
from bert_tf.train import checkpoints
from bert_tf.train import model_fn as model_fn_utils

__all__ = ["Serving", "ModelFiles", "training", "model_fn", "exporter"]


@dataclasses.dataclass(frozen=True)
class Serving:
  """What a task's SavedModel serves (see `saved_model.export_saved_model`).

  Attributes:
    kind: one of `saved_model.KINDS` (e.g. `saved_model.NER`).
    output_keys: the head's predictions the signature returns.
    features: the serving inputs beyond `input_ids`, `input_mask` and
      `segment_ids` (`saved_model.NER_FEATURES`, ...).
    config: JSON values added to `serving_config.json`.
    label_list: list of str in label-id order, or None (no labels).
  """

  kind: str
  output_keys: Sequence[str]
  features: Optional[dict] = None
  config: Optional[dict] = None
  label_list: Optional[Sequence[str]] = None


@dataclasses.dataclass(frozen=True)
class ModelFiles:
  """The model a fine-tuning run starts from and writes.

  Attributes:
    vocab_file, bert_config_file: str, copied into an export's assets.
    do_lower_case: bool, how the text is tokenized.
    max_seq_length: int, tokens per record.
    output_dir: str, the run's checkpoints.
    export_dir: str or None, the SavedModel base folder.
    bucket_by_length: bool, export a signature of any length up to
      `max_seq_length`.
    max_examples_per_row: int or None, export a packed signature too
      (`saved_model.PACKED_KINDS`).
  """

  vocab_file: str
  bert_config_file: str
  do_lower_case: bool
  max_seq_length: int
  output_dir: str
  export_dir: Optional[str] = None
  bucket_by_length: bool = False
  max_examples_per_row: Optional[int] = None


def training(input_fn, records, num_examples, examples_per_update,
             num_train_epochs, warmup_proportion, learning_rate,
             token_weights: Optional[Callable[..., Any]] = None):
  """The `loop.Training` of `num_train_epochs` over written records.

  Steps count updates (of `examples_per_update` records: the batch size
  times the micro-batches of an update); warmup is `warmup_proportion` of
  them, as in the reference (`model_fn.fine_tuning_steps`); progress is
  logged about ten times a run, at most every 100 steps.

  Args:
    input_fn: the training `input_fn` over `records`.
    records: list of str, the TFRecord files it reads.
    num_examples: int, records in one epoch.
    examples_per_update: int, `RunOptions.examples_per_update`.
    num_train_epochs: float.
    warmup_proportion: float in [0, 1].
    learning_rate: float, the peak rate.
    token_weights: see `loop.Training` (token-level losses).

  Returns:
    A `loop.Training`.
  """
  num_train_steps, num_warmup_steps = model_fn_utils.fine_tuning_steps(
      num_examples, examples_per_update, num_train_epochs, warmup_proportion)
  return loop.Training(
      input_fn=input_fn, num_train_steps=num_train_steps,
      num_warmup_steps=num_warmup_steps, learning_rate=learning_rate,
      records=list(records), token_weights=token_weights,
      progress_every=min(100, max(1, num_train_steps // 10)))


def model_fn(head, model, run, learning_rate, train=None):
  """The run's `model_fn` of `head` (`model_fn.build_model_fn`).

  Args:
    head: the task's `model_fn.Head`.
    model: `startup.Model` (config and the resolved init checkpoint).
    run: checked `options.RunOptions` (TPU, optimizer, compute dtype).
    learning_rate: float, the peak rate.
    train: the run's `loop.Training`, or None (no training).
  """
  use_tpu = run.tpu.use_tpu
  return model_fn_utils.build_model_fn(
      head, model.bert_config, model.init_checkpoint, use_tpu,
      use_one_hot_embeddings=use_tpu,
      schedule=model_fn_utils.TrainingSchedule(
          learning_rate, train and train.num_train_steps,
          train and train.num_warmup_steps,
          run.training.optimizer_options,
          dropout_seed=run.training.dropout_seed),
      compute_dtype=run.training.compute_dtype, log_features=False)


def exporter(head, bert_config, serving, files, init_checkpoint,
             encoder=None):
  """The `loop.run` export of a fine-tuned model: `export(checkpoint)`.

  Args:
    head: the task's `model_fn.Head` (it must predict
      `serving.output_keys`).
    bert_config: `modeling.BertConfig`.
    serving: `Serving`.
    files: `ModelFiles` (with `export_dir`).
    init_checkpoint: str or None, exported when the output folder holds no
      checkpoint (`checkpoints.checkpoint_to_export`).
    encoder: (optional) the task's `build_model_fn(encoder=...)`, built
      without TPU options (multiple choice's reads [B, C, S] inputs).

  Returns:
    function(checkpoint=None) writing a new SavedModel version under
    `files.export_dir`: `checkpoint` (the kept best), else the latest one.
  """

  def export(checkpoint=None):
    # The weights come from the checkpoint: no init checkpoint, no TPU.
    model_fn = model_fn_utils.build_model_fn(
        head, bert_config, init_checkpoint=None, use_tpu=False,
        use_one_hot_embeddings=False, log_features=False, encoder=encoder)
    path = checkpoint or checkpoints.checkpoint_to_export(
        files.output_dir, init_checkpoint)
    return export_utils.export_saved_model(
        model_fn, path, files.export_dir, files.max_seq_length,
        kind=serving.kind, output_keys=list(serving.output_keys),
        vocab_file=files.vocab_file, bert_config_file=files.bert_config_file,
        do_lower_case=files.do_lower_case,
        label_list=(None if serving.label_list is None
                    else list(serving.label_list)),
        extra_features=serving.features, extra_config=serving.config,
        bucket_by_length=files.bucket_by_length,
        max_examples_per_row=files.max_examples_per_row)

  return export
