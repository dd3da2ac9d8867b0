"""docs/layout.md's "Adding a task", done once with a toy task.

The toy task (defined only here) classifies whether a sentence's first
word id is even: a `Head` on the pooled output, trained for a few steps
with the shared fine-tuning plumbing (`fine_tuning.training`,
`fine_tuning.model_fn`), evaluated and predicted through `loop.run`, and
exported as a SavedModel with `fine_tuning.exporter`: the recipe's steps,
on a 2-layer, 32-wide model, through the session runner.
"""

import os

import numpy as np
import tensorflow.compat.v1 as tf

from helpers import data_path

from bert_tf.cli import startup
from bert_tf.export import saved_model
from bert_tf.cli import fine_tuning
from bert_tf.runner import loop
from bert_tf.train import model_fn as model_fn_utils
from bert_tf.train import options as training_options
from bert_tf.train import spec as spec_lib
import modeling

_SEQ = 8


class _ParityHead(model_fn_utils.Head):
  """Two classes on the pooled output (`cls/parity/*`): step 1 of the
  recipe, the head as a value."""

  def build(self, model, features, mode, update_share=None):
    pooled = model.get_pooled_output()
    weights = tf.get_variable("cls/parity/output_weights", [2, 32],
                              initializer=tf.truncated_normal_initializer(
                                  stddev=0.02))
    logits = tf.matmul(pooled, weights, transpose_b=True)
    probabilities = tf.nn.softmax(logits, axis=-1)
    if mode == spec_lib.ModeKeys.PREDICT:
      return model_fn_utils.HeadOutput(
          predictions={"probabilities": probabilities})
    labels = features["label_ids"]
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=logits))
    return model_fn_utils.HeadOutput(loss=loss, eval_metrics=(
        lambda l, p: {"eval_accuracy": tf.metrics.accuracy(
            l, tf.argmax(p, axis=-1, output_type=tf.int32))},
        [labels, probabilities]))


def _examples(count):
  rng = np.random.RandomState(0)
  ids = rng.randint(5, 900, size=(count, _SEQ)).astype(np.int32)
  return {"input_ids": ids, "input_mask": np.ones_like(ids),
          "segment_ids": np.zeros_like(ids),
          "label_ids": (ids[:, 0] % 2).astype(np.int32),
          "is_real_example": np.ones([count], np.int32)}


def _input_fn(examples, repeat):
  def input_fn(params, config=None, input_context=None):
    del config, input_context
    data = tf.data.Dataset.from_tensor_slices(examples)
    return (data.repeat() if repeat else data).batch(
        params["batch_size"], drop_remainder=repeat)
  return input_fn


def test_a_toy_task_trains_evaluates_predicts_and_exports(tmp_path):
  out, export_dir = str(tmp_path / "out"), str(tmp_path / "export")
  config_file = data_path("conformance", "modeling", "bert_config.json")
  model = startup.Model(modeling.BertConfig.from_json_file(config_file),
                        None, None)
  run = training_options.RunOptions(
      tpu=training_options.TpuOptions(runner="session"), do_train=True,
      do_eval=True, do_predict=True, train_batch_size=4,
      save_checkpoints_steps=100)
  head = _ParityHead()
  examples = _examples(8)
  predicted = []

  def predict(steps, checkpoint):
    predicted.extend(steps.predict(_input_fn(examples, False),
                                   checkpoint_path=checkpoint, num_batches=2))

  with loop.output_dir(out, run):
    # Step 2: the training, over the task's records (one epoch of 8).
    training = fine_tuning.training(
        _input_fn(examples, True), [], 8,
        run.examples_per_update, num_train_epochs=1.0,
        warmup_proportion=0.5, learning_rate=1e-3)
    assert (training.num_train_steps, training.num_warmup_steps) == (2, 1)
    # Step 3: the model_fn of the head, and the call that trains.
    results = loop.run(
        fine_tuning.model_fn(head, model, run, 1e-3, training), run, out,
        training=training,
        evaluate=lambda steps: steps.evaluate(_input_fn(examples, False)),
        predict=predict,
        # Step 4: what the export serves.
        export=fine_tuning.exporter(
            head, model.bert_config, fine_tuning.Serving(
                kind=saved_model.CLASSIFIER, output_keys=["probabilities"],
                features=saved_model.CLASSIFIER_FEATURES,
                label_list=["odd", "even"]),
            fine_tuning.ModelFiles(
                data_path("conformance", "modeling", "vocab.txt"),
                config_file, True, _SEQ, out, export_dir), None),
        eval_batch_size=4, predict_batch_size=4)
  assert int(results["global_step"]) == 2
  assert 0.0 <= float(results["eval_accuracy"]) <= 1.0
  assert len(predicted) == 8
  np.testing.assert_allclose(
      [p["probabilities"].sum() for p in predicted], 1.0, rtol=1e-5)
  versions = os.listdir(export_dir)
  assert len(versions) == 1
  assert os.path.isfile(os.path.join(export_dir, versions[0],
                                     "saved_model.pb"))
