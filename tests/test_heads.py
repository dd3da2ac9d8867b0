"""The classifier's heads as values, and the recipe "Adding a head".

docs/layout.md's recipe is followed once here: a head defined only in this
test (the Brier score: the squared distance between the probabilities and
the one-hot label) subclasses `SingleLabelHead`, overriding its loss; the
classification task trains on it, evaluates it (its metrics' keys are the
head's `eval_keys`), and exports it, and the export serves its
probabilities. Also: what each head of the classifier declares.
"""

import os

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from helpers import data_path
from helpers import write_tsv

from bert_tf.export import saved_model as export_utils
from bert_tf.export import serving
from bert_tf.tasks.classifier import data as classifier_data
from bert_tf.tasks.classifier import model as heads
from bert_tf.tasks.classifier import multi_label as multi_label_lib
from bert_tf.tasks.classifier import task as task_lib
from bert_tf.train import model_fn as model_fn_utils
from bert_tf.train import spec as spec_lib
import modeling
import tokenization

_MODEL = ("conformance", "modeling")
_SEQ = 16


class _BrierHead(heads.SingleLabelHead):
  """Step 1 of the recipe: a head is a subclass with its own loss."""

  def loss(self, logits, labels):
    probabilities = tf.nn.softmax(logits, axis=-1)
    one_hot = tf.one_hot(labels, depth=self.num_outputs, dtype=tf.float32)
    per_example_loss = tf.reduce_sum(tf.square(probabilities - one_hot),
                                     axis=-1)
    return (tf.reduce_mean(per_example_loss), per_example_loss, logits,
            probabilities)


def _task(tmp_path, head, label_list):
  data_dir = str(tmp_path / "data")
  rows = [["john is here", "a"], ["the city", "b"]] * 4
  for split in ("train", "dev", "test"):
    write_tsv(os.path.join(data_dir, split + ".tsv"), rows)
  tokenizer = tokenization.FullTokenizer(data_path(*_MODEL, "vocab.txt"))
  output_dir = str(tmp_path / "out")
  os.makedirs(output_dir)
  processor = classifier_data.get_processor("tsv", data_dir=data_dir)
  return task_lib.ClassifierTask("tsv", processor, label_list, head,
                                 tokenizer, _SEQ, output_dir), data_dir


def _config():
  return modeling.BertConfig.from_json_file(data_path(*_MODEL,
                                                      "bert_config.json"))


def _batch(task, examples, name, is_training=False):
  path = os.path.join(task.output_dir, name)
  task.write_records(path, examples)
  return tf.data.make_one_shot_iterator(task.input_fn(path, is_training)(
      {"batch_size": len(examples)})).get_next()


def _restored(task, examples, mode, checkpoint):
  """The spec of `mode` over `examples` and a session restoring
  `checkpoint` (the caller closes it)."""
  features = _batch(task, examples, mode + ".tf_record")
  spec = task.model_fn(_config(), None)(features, None, mode, {})
  session = tf.Session()
  session.run(tf.local_variables_initializer())
  tf.train.Saver().restore(session, checkpoint)
  return spec, session


def test_a_head_defined_here_trains_evaluates_and_exports(tmp_path):
  # Step 2: the task takes the head as a value.
  task, data_dir = _task(tmp_path, _BrierHead(["a", "b"]), ["a", "b"])
  examples = task.read_examples(data_dir, ["train", "dev"])
  checkpoint = os.path.join(task.output_dir, "model.ckpt")
  with tf.Graph().as_default():
    features = _batch(task, examples["train"], "train.tf_record", True)
    spec = task.model_fn(
        _config(), os.path.join(data_path(*_MODEL), "bert_model.ckpt"),
        model_fn_utils.TrainingSchedule(1e-3, 10, 0))(
            features, None, spec_lib.ModeKeys.TRAIN, {})
    weights = tf.global_variables("output_weights")[0]
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      before = session.run(weights)
      session.run(spec.train_op)
      assert np.abs(session.run(weights) - before).max() > 0
      tf.train.Saver().save(session, checkpoint)
  with tf.Graph().as_default():
    spec, session = _restored(task, examples["dev"], spec_lib.ModeKeys.EVAL,
                              checkpoint)
    metric_fn, tensors = spec.eval_metrics
    metrics = metric_fn(*tensors)
    session.run(tf.local_variables_initializer())
    session.run([update for _, update in metrics.values()])
    eval_loss = session.run(metrics["eval_loss"][0])
    session.close()
  # What --keep_best_by may name: the metrics, the loss and the step.
  assert set(metrics) | {"loss", "global_step"} == task.head.eval_keys()
  with tf.Graph().as_default():
    spec, session = _restored(task, examples["dev"],
                              spec_lib.ModeKeys.PREDICT, checkpoint)
    probabilities = session.run(spec.predictions["probabilities"])
    session.close()
  one_hot = np.eye(2)[[0, 1] * 4]
  assert eval_loss == pytest.approx(
      np.square(probabilities - one_hot).sum(axis=-1).mean(), rel=1e-5)
  # Step 3: the export asks the head what it serves.
  version = export_utils.export_saved_model(
      checkpoint_path=checkpoint, export_dir=str(tmp_path / "export"),
      vocab_file=data_path(*_MODEL, "vocab.txt"),
      bert_config_file=data_path(*_MODEL, "bert_config.json"),
      do_lower_case=True, **task.export_spec(_config()))
  served = serving.BertServingModel(version).classify("john is here")
  assert list(served) == ["a", "b"]
  np.testing.assert_allclose(list(served.values()), probabilities[0],
                             atol=1e-5)


@pytest.mark.parametrize("head,kind,output,problem_type", [
    (heads.SingleLabelHead(["x", "y"], ("f1",)), export_utils.CLASSIFIER,
     "probabilities", None),
    (heads.RegressionHead(), export_utils.REGRESSION, "predictions", None),
    (heads.MultiLabelHead(["x", "y", "z"], 0.3), export_utils.CLASSIFIER,
     "probabilities", multi_label_lib.PROBLEM_TYPE),
    (heads.SingleLabelHead(["x", "y"]).windowed(4, "max"),
     export_utils.CLASSIFIER, "probabilities", None),
])
def test_each_head_declares_its_export(head, kind, output, problem_type):
  spec = head.export_spec()
  assert (spec["kind"], spec["output_keys"]) == (kind, [output])
  assert spec["extra_config"].get("problem_type") == problem_type
  assert set(spec["extra_features"]) == {"label_ids", "is_real_example"}


def test_head_for_follows_the_processor():
  assert isinstance(heads.head_for(classifier_data.get_processor("sts-b"),
                                   None), heads.RegressionHead)
  head = heads.head_for(classifier_data.get_processor("cola"), ["0", "1"])
  assert type(head) is heads.SingleLabelHead
  assert head.eval_keys() == {"eval_loss", "loss", "global_step",
                              "eval_accuracy", "eval_mcc"}


def test_a_windowed_head_keeps_the_heads_values():
  inner = heads.MultiLabelHead(["x", "y"], 0.4)
  head = inner.windowed(3, "mean")
  assert head.doc_stride == 3 and not head.reference_records
  assert inner.doc_stride is None and not inner.reference_records
  assert head.eval_keys() == inner.eval_keys()
  assert head.export_spec() == inner.export_spec()
  example = classifier_data.InputExample("g", "a b", label=("y",))
  assert head.label_ids(example) == [0, 1]
  mean = list(head.aggregate([{"probabilities": [0.2, 0.4]},
                              {"probabilities": [0.4, 0.8]}], [0, 0], 1))
  np.testing.assert_allclose(mean[0]["probabilities"], [0.3, 0.6])
