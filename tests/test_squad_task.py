"""Tests for bert_tf/tasks/squad/task.py: SquadTask's training records are
the reference's (questions shuffled with seed 12345, then windowed), an
empty training file is refused in one line, and the export's settings."""

import os
import random

import pytest
import tensorflow.compat.v1 as tf

from helpers import write_json
from squad_conformance import make_tokenizer
from squad_conformance import squad_path

from bert_tf.tasks.squad import data as squad_data
from bert_tf.tasks.squad import model as squad_model
from bert_tf.tasks.squad.task import SquadOptions
from bert_tf.tasks.squad.task import SquadTask

_SIZES = dict(max_seq_length=96, doc_stride=32, max_query_length=24)


@pytest.fixture(scope="module")
def tokenizer():
  return make_tokenizer()


def _task(tokenizer, train_file, output_dir):
  return SquadTask(SquadOptions(train_file=train_file, predict_file=None,
                                output_dir=str(output_dir),
                                version_2_with_negative=True, **_SIZES),
                   tokenizer)


def _records(path):
  return [r.numpy() for r in tf.data.TFRecordDataset(path)]


def test_training_records_are_the_shuffled_questions_windows(tokenizer,
                                                             tmp_path):
  train_file = squad_path("v2.0", "input_train.json")
  task = _task(tokenizer, train_file, tmp_path / "out")
  os.makedirs(tmp_path / "out")
  _, records, num_examples = task.training_records()
  examples = squad_data.read_squad_examples(
      train_file, is_training=True, version_2_with_negative=True)
  random.Random(12345).shuffle(examples)
  expected = str(tmp_path / "expected.tf_record")
  with squad_data.FeatureWriter(expected, is_training=True) as writer:
    squad_data.convert_examples_to_features(
        examples, tokenizer, is_training=True,
        output_fn=writer.process_feature, **_SIZES)
  assert records == [str(tmp_path / "out" / "train.tf_record")]
  assert num_examples == len(examples)
  assert _records(records[0]) == _records(expected)
  assert isinstance(task.head, squad_model.SpanHead)


def test_a_training_file_without_questions_is_refused(tokenizer, tmp_path):
  train_file = write_json(tmp_path, {"version": "1.1", "data": []},
                          "empty.json")
  with pytest.raises(ValueError, match=r"^--train_file: .*empty.json holds "
                     r"no usable training question \(none, or all "
                     r"skipped\)$"):
    _task(tokenizer, train_file, tmp_path).training_records()


def test_the_export_records_the_window_settings(tokenizer, tmp_path):
  assert _task(tokenizer, None, tmp_path).serving_config() == {
      "doc_stride": 32, "max_query_length": 24,
      "version_2_with_negative": True}
