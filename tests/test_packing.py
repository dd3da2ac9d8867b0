"""Packed sequences: the packer, and the encoder's outputs and gradients on
packed rows equal to each example run alone (bert_tf/train/packing.py,
modeling.BertModel's `position_ids`, `block_diagonal`, `pool_positions`)."""

import json
import os
import re
import shutil

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from helpers import data_path
from helpers import read_lines
from helpers import run_script
from helpers import shared_path
from helpers import tiny_model_flags
from helpers import write_tsv
from test_bucket_by_length import assert_same_extraction
from test_bucket_by_length import extraction_inputs
from test_run_ner import _head_of_conll

from bert_tf.tasks.classifier import data
from bert_tf.tasks.classifier import model as model_lib
from bert_tf.tasks.classifier import task as task_lib
from bert_tf.train import accumulation
from bert_tf.train import model_fn as model_fn_utils
from bert_tf.train import packing
from bert_tf.train import spec as spec_lib
import modeling
import tokenization

_LENGTHS = [9, 5, 12, 7, 3, 20, 2, 14]
_SEQ_LENGTH, _MAX_PER_ROW = 32, 3


def test_first_fit_decreasing_never_splits_and_bounds_rows():
  rng = np.random.RandomState(0)
  lengths = list(rng.randint(1, 65, size=300))
  rows = packing.first_fit_decreasing(lengths, 64, 4)
  placed = sorted(index for row in rows for index in row)
  assert placed == list(range(len(lengths)))  # Each item once, whole.
  assert all(1 <= len(row) <= 4 for row in rows)
  assert all(sum(lengths[i] for i in row) <= 64 for row in rows)
  # The same rows as a plain first-fit decreasing.
  naive = []
  for index in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
    for row in naive:
      if len(row) < 4 and sum(lengths[i] for i in row) + lengths[index] <= 64:
        row.append(index)
        break
    else:
      naive.append([index])
  assert rows == naive
  # Fill: far fewer rows than items.
  assert len(rows) < 0.7 * len(lengths)


def test_first_fit_decreasing_known_rows_and_errors():
  assert packing.first_fit_decreasing([3, 6, 4, 5, 2], 10, 2) == [
      [1, 2], [3, 0], [4]]
  assert packing.first_fit_decreasing([], 10, 2) == []
  with pytest.raises(ValueError, match="item 1 has length 11"):
    packing.first_fit_decreasing([3, 11], 10, 2)


def test_pack_lays_out_slots_positions_and_masks():
  rows = packing.pack([{"input_ids": [101, 7, 102], "segment_ids": [0, 0, 0]},
                       {"input_ids": [101, 8, 102, 9, 102],
                        "segment_ids": [0, 0, 0, 1, 1]}], 10, 3)
  assert rows == [{
      "input_ids": [101, 8, 102, 9, 102, 101, 7, 102, 0, 0],
      "segment_ids": [0, 0, 0, 1, 1, 0, 0, 0, 0, 0],
      "input_mask": [1, 1, 1, 1, 1, 2, 2, 2, 0, 0],
      "position_ids": [0, 1, 2, 3, 4, 0, 1, 2, 0, 0],
      "cls_positions": [0, 5, 0], "example_index": [1, 0, -1],
      "is_real_example": [1, 1, 0]}]
  packing.add_slot_values(rows, "label_ids", [[4], [5]], [0])
  assert rows[0]["label_ids"] == [5, 4, 0]
  unpacked = packing.unpack([{"example_index": np.array([1, 0, -1]),
                              "p": np.array([[0.5], [0.25], [0.0]])}], 2)
  assert [item["p"][0] for item in unpacked] == [0.25, 0.5]
  tokens = packing.unpack([{"example_index": np.array([1, 0, -1]),
                            "input_mask": np.array(rows[0]["input_mask"]),
                            "t": np.arange(10)}], 2, token_keys=("t",))
  assert [list(item["t"]) for item in tokens] == [
      [5, 6, 7, 0, 0, 0, 0, 0, 0, 0], [0, 1, 2, 3, 4, 0, 0, 0, 0, 0]]
  with pytest.raises(ValueError, match="1 of 3 packed examples"):
    packing.unpack([{"example_index": np.array([1, 0, -1]),
                     "p": np.zeros([3])}], 3)


def test_pack_window_keeps_the_items_order():
  # Training packs runs of consecutive items, rows in the items' order, at
  # about the fill of packing them all together.
  rng = np.random.RandomState(2)
  items = [{"input_ids": [101] * n} for n in rng.randint(1, 40, size=500)]
  rows = packing.pack(items, 64, 4, window=60)
  members = [[i for i in row["example_index"] if i >= 0] for row in rows]
  assert sorted(i for m in members for i in m) == list(range(500))
  # Runs 0-59, ..., 360-419 and 420-499 (the last 20 join the run before).
  assert all(len({min(i // 60, 7) for i in m}) == 1 for m in members)
  assert any(min(m) < 480 <= max(m) for m in members)
  assert [min(m) for m in members] == sorted(min(m) for m in members)
  together = packing.pack(items, 64, 4)
  assert len(together) <= len(rows) <= 1.05 * len(together)
  # Without a window, the longest items lead.
  assert len(items[together[0]["example_index"][0]]["input_ids"]) == 39


def _examples():
  rng = np.random.RandomState(1)
  return [{"input_ids": list(rng.randint(1, 99, size=n)),
           "segment_ids": list(rng.randint(0, 2, size=n))} for n in _LENGTHS]


def _batches(examples):
  """(unpacked arrays, packed arrays) of the examples."""
  def padded(values):
    return values + [0] * (_SEQ_LENGTH - len(values))

  unpacked = {
      "input_ids": [padded(e["input_ids"]) for e in examples],
      "token_type_ids": [padded(e["segment_ids"]) for e in examples],
      "input_mask": [padded([1] * len(e["input_ids"])) for e in examples]}
  rows = packing.pack(examples, _SEQ_LENGTH, _MAX_PER_ROW)
  packed = {name: [row[name] for row in rows] for name in rows[0]}
  packed["token_type_ids"] = packed.pop("segment_ids")
  return ({k: np.array(v, np.int32) for k, v in unpacked.items()},
          {k: np.array(v, np.int32) for k, v in packed.items()})


@pytest.fixture(scope="module")
def graph():
  """One graph: the same random 2-layer 32-wide BERT over the examples
  unpacked and packed; a loss on each (the packed one per real slot)."""
  examples = _examples()
  unpacked, packed = _batches(examples)
  config = modeling.BertConfig(vocab_size=99, hidden_size=32,
                               num_hidden_layers=2, num_attention_heads=4,
                               intermediate_size=37,
                               max_position_embeddings=64)
  g = tf.Graph()
  with g.as_default():
    tf.set_random_seed(3)
    alone = modeling.BertModel(config, False, scope="bert", **{
        k: tf.constant(v) for k, v in unpacked.items()})
    with tf.variable_scope(tf.get_variable_scope(), reuse=True):
      rows = modeling.BertModel(
          config, False, scope="bert",
          input_ids=tf.constant(packed["input_ids"]),
          input_mask=tf.constant(packed["input_mask"]),
          token_type_ids=tf.constant(packed["token_type_ids"]),
          position_ids=tf.constant(packed["position_ids"]),
          block_diagonal=True,
          pool_positions=tf.constant(packed["cls_positions"]))
    weights = tf.constant(np.random.RandomState(2).randn(32), tf.float32)
    alone_loss = tf.reduce_mean(tf.tanh(tf.reduce_sum(
        alone.get_pooled_output() * weights, -1)))
    slot_losses = tf.tanh(tf.reduce_sum(packing.slots(
        rows.get_pooled_output()) * weights, -1))
    rows_loss = model_fn_utils.weighted_mean_loss(
        slot_losses, packing.slots(tf.cast(
            tf.constant(packed["is_real_example"]), tf.float32)))
    variables = tf.trainable_variables()
    tensors = {
        "alone_sequence": alone.get_sequence_output(),
        "alone_pooled": alone.get_pooled_output(),
        "rows_sequence": rows.get_sequence_output(),
        "rows_pooled": rows.get_pooled_output(),
        "alone_grads": [tf.convert_to_tensor(grad) for grad in
                        tf.gradients(alone_loss, variables)],
        "rows_grads": [tf.convert_to_tensor(grad) for grad in
                       tf.gradients(rows_loss, variables)]}
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      values = session.run(tensors)
  return examples, packed, values


def test_packed_rows_equal_each_example_alone(graph):
  examples, packed, values = graph
  assert packed["input_ids"].shape[0] < len(examples)
  assert values["rows_pooled"].shape == (len(packed["input_ids"]),
                                         _MAX_PER_ROW, 32)
  seen = 0
  for r, row_index in enumerate(packed["example_index"]):
    for slot, index in enumerate(row_index):
      if index < 0:
        continue
      seen += 1
      start = packed["cls_positions"][r][slot]
      length = len(examples[index]["input_ids"])
      np.testing.assert_allclose(
          values["rows_sequence"][r, start:start + length],
          values["alone_sequence"][index, :length], atol=1e-5)
      np.testing.assert_allclose(values["rows_pooled"][r, slot],
                                 values["alone_pooled"][index], atol=1e-5)
  assert seen == len(examples)


def test_packed_gradient_equals_unpacked(graph):
  _, _, values = graph
  assert len(values["rows_grads"]) == len(values["alone_grads"]) > 10
  for rows, alone in zip(values["rows_grads"], values["alone_grads"]):
    # The packed mean divides by (8 + 1e-5): a relative 1.3e-6 apart.
    np.testing.assert_allclose(rows, alone, rtol=2e-5,
                               atol=1e-6 * np.abs(alone).max() + 1e-9)


def test_accumulated_packed_micro_batches_give_the_big_unpacked_gradient(
    monkeypatch):
  # Rows of 2, 3 and 3 examples, one row a micro-batch: the mean of their
  # gradients, each divided by its update share (`with_update_shares`), is
  # the gradient of all 8 examples unpacked; each micro-batch's own mean
  # would weigh the first row's examples 4/3 too much.
  monkeypatch.setattr(modeling, "dropout", lambda tensor, prob, seed=None: tensor)
  examples = _examples()
  labels = [int(i % 3 == 0) for i in range(len(examples))]
  unpacked, packed = _batches(examples)
  packed["segment_ids"] = packed.pop("token_type_ids")
  packed["label_ids"] = np.array(
      [[labels[i] if i >= 0 else 0 for i in row]
       for row in packed["example_index"]], np.int32)
  assert [int(n) for n in packed["is_real_example"].sum(1)] == [2, 3, 3]
  shares = [float(batch[accumulation.UPDATE_SHARE_KEY][0]) for batch in
            accumulation.with_update_shares(
                tf.data.Dataset.from_tensor_slices(packed).batch(1), 3,
                lambda batch: batch["is_real_example"]).as_numpy_iterator()]
  assert shares == pytest.approx([8 / 3] * 3)
  config = modeling.BertConfig(
      vocab_size=99, hidden_size=32, num_hidden_layers=2,
      num_attention_heads=4, intermediate_size=37,
      max_position_embeddings=64)
  head = model_lib.SingleLabelHead(["0", "1"])
  train = spec_lib.ModeKeys.TRAIN
  with tf.Graph().as_default():
    tf.set_random_seed(5)
    big = dict(input_ids=tf.constant(unpacked["input_ids"]),
               input_mask=tf.constant(unpacked["input_mask"]),
               segment_ids=tf.constant(unpacked["token_type_ids"]),
               label_ids=tf.constant(labels),
               is_real_example=tf.ones([len(labels)]))
    big_loss = head.build(modeling.BertModel(
        config, True, big["input_ids"], big["input_mask"],
        big["segment_ids"], scope="bert"), big, train).loss
    row = {name: tf.placeholder(tf.int32, [1] + list(value.shape[1:]))
           for name, value in packed.items()}
    share = tf.placeholder(tf.float32, [1])
    with tf.variable_scope(tf.get_variable_scope(), reuse=True):
      row_loss = head.build(modeling.BertModel(
          config, True, row["input_ids"], row["input_mask"],
          row["segment_ids"], scope="bert", **packing.encoder_inputs(row)),
                            head.prepare(row, train), train, share).loss
    variables = tf.trainable_variables()
    big_grads = [tf.convert_to_tensor(grad) for grad in
                 tf.gradients(big_loss, variables)]
    row_grads = [tf.convert_to_tensor(grad) for grad in
                 tf.gradients(row_loss, variables)]
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      expected = session.run(big_grads)

      def mean_gradient(shares):
        total = [0.0] * len(variables)
        for r, value in enumerate(shares):
          feed = {row[name]: packed[name][r:r + 1] for name in row}
          feed[share] = [value]
          total = [t + g for t, g in zip(total, session.run(row_grads, feed))]
        return [t / len(shares) for t in total]

      accumulated = mean_gradient(shares)
      own_means = mean_gradient(packed["is_real_example"].sum(1))
  assert len(variables) > 20
  worst = max(np.linalg.norm(a - e) / np.linalg.norm(e)
              for a, e in zip(own_means, expected))
  assert worst > 0.01  # The test tells the two rules apart.
  for got, want in zip(accumulated, expected):
    np.testing.assert_allclose(got, want, rtol=2e-5,
                               atol=1e-6 * np.abs(want).max() + 1e-9)


@pytest.mark.parametrize("max_per_row", [None, 3])
def test_classifier_training_input_carries_the_update_share(tmp_path,
                                                            max_per_row):
  # What an accumulating classifier model_fn requires (unpacked, the mean
  # of equal micro-batches' means ignores it): each micro-batch's share of
  # its update's real examples.
  processor = data.get_processor("mrpc")
  write_tsv(str(tmp_path / "train.tsv"), _mrpc_lines("train", 16))
  task = task_lib.ClassifierTask(
      "mrpc", processor, processor.get_labels(),
      model_lib.head_for(processor, processor.get_labels()),
      tokenization.FullTokenizer(
          data_path("conformance", "modeling", "vocab.txt")),
      max_seq_length=64, output_dir=str(tmp_path),
      max_examples_per_row=max_per_row)
  training = task.training(processor.get_train_examples(str(tmp_path)), 8,
                           1.0, 0.1, 1e-3)
  input_fn = accumulation.update_shares_input_fn(training.input_fn, 2,
                                                 training.token_weights)
  with tf.Graph().as_default():
    batch = tf.data.make_one_shot_iterator(
        input_fn({"batch_size": 4})).get_next()
    with tf.Session() as session:
      values = session.run(batch)
  assert values[accumulation.UPDATE_SHARE_KEY].min() >= 1.0
  if max_per_row is None:  # Two micro-batches of 4 examples.
    np.testing.assert_allclose(values[accumulation.UPDATE_SHARE_KEY], 4.0)


def test_classifier_packed_training_reads_the_file_in_order(tmp_path):
  # As fixed padding's shuffle buffer of 100 records: a packed update draws
  # on about the next packing.TRAINING_SPAN examples of the file (before,
  # the longest examples of the whole file came first).
  processor = data.get_processor("sst-2")
  lines = read_lines(shared_path("data", "glue", "SST-2", "train.tsv"))
  write_tsv(str(tmp_path / "train.tsv"), lines[:1001])
  task = task_lib.ClassifierTask(
      "sst-2", processor, processor.get_labels(),
      model_lib.head_for(processor, processor.get_labels()),
      tokenization.FullTokenizer(
          data_path("conformance", "modeling", "vocab.txt")),
      max_seq_length=128, output_dir=str(tmp_path), max_examples_per_row=16)
  training = task.training(processor.get_train_examples(str(tmp_path)), 32,
                           1.0, 0.1, 1e-3)
  with tf.Graph().as_default():
    batch = tf.data.make_one_shot_iterator(
        training.input_fn({"batch_size": 32})).get_next()
    with tf.Session() as session:
      first = session.run(batch)
  real = first["example_index"][first["is_real_example"] == 1]
  assert len(real) >= 16  # About 32 examples, in whole rows.
  assert real.max() < 2 * packing.TRAINING_SPAN, real
  # The evaluation and prediction input_fn does not read them for training.
  with pytest.raises(ValueError, match="packing.training_input_fn"):
    task.input_fn(str(tmp_path / "train.tf_record"), is_training=True)


# ----------------------------------------------------------------------------
# The classifier: packed records, their input_fn and model_fn (TPU path).
# ----------------------------------------------------------------------------


def _mrpc_lines(split, count):
  return read_lines(shared_path("data", "glue", "MRPC", split + ".tsv"))[
      :count + 1]


def test_tpu_rows_have_static_shapes_and_every_example_comes_back(tmp_path):
  vocab = data_path("conformance", "modeling", "vocab.txt")
  processor = data.get_processor("mrpc")
  write_tsv(str(tmp_path / "dev.tsv"), _mrpc_lines("dev", 10))
  examples = processor.get_dev_examples(str(tmp_path))
  head = model_lib.head_for(processor, processor.get_labels())
  task = task_lib.ClassifierTask(
      "mrpc", processor, processor.get_labels(), head,
      tokenization.FullTokenizer(vocab), max_seq_length=64,
      output_dir=str(tmp_path), use_tpu=True, max_examples_per_row=3)
  path = str(tmp_path / "rows.tf_record")
  num_rows, owners = task.write_records(path, examples, batch_size=4)
  assert owners is None and num_rows % 4 == 0
  config = modeling.BertConfig.from_json_file(
      data_path("conformance", "modeling", "bert_config.json"))
  def batch():
    return tf.data.make_one_shot_iterator(
        task.input_fn(path)({"batch_size": 4})).get_next()

  with tf.Graph().as_default():
    _, tensors = task.model_fn(config, None)(batch(), None, "eval",
                                             {}).eval_metrics
    assert [t.shape.as_list() for t in tensors][-1] == [12]  # Per slot.
  with tf.Graph().as_default():
    features = batch()
    assert features["input_ids"].shape.as_list() == [4, 64]
    assert features["position_ids"].shape.as_list() == [4, 64]
    assert features["cls_positions"].shape.as_list() == [4, 3]
    assert features["label_ids"].shape.as_list() == [4, 3]
    spec = task.model_fn(config, None)(features, None, "infer", {})
    assert spec.predictions["probabilities"].shape.as_list() == [4, 3, 2]
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      rows = []
      for _ in range(num_rows // 4):
        values = session.run(spec.predictions)
        rows += [{k: v[i] for k, v in values.items()} for i in range(4)]
  unpacked = packing.unpack(rows, len(examples))
  assert len(unpacked) == 10
  for item in unpacked:
    assert item["probabilities"].sum() == pytest.approx(1.0, abs=1e-5)


def _eval_results(path):
  return {line.split(" = ")[0]: float(line.split(" = ")[1])
          for line in read_lines(path)}


@pytest.mark.slow
def test_classifier_trains_packed_and_predicts_as_unpacked(tmp_path):
  """64 MRPC pairs at 128 tokens (about 2.3 a row), a random 2-layer
  32-wide BERT with the released uncased vocabulary: training with packing
  counts its steps in examples and learns the label prior; evaluation and
  prediction from its checkpoint equal the unpacked run's per example."""
  data_dir = tmp_path / "data"
  for split in ("train", "dev", "test"):
    write_tsv(str(data_dir / (split + ".tsv")), _mrpc_lines(split, 64))
  config = dict(vocab_size=30522, hidden_size=32, num_hidden_layers=2,
                num_attention_heads=4, intermediate_size=37,
                max_position_embeddings=128, type_vocab_size=2)
  (tmp_path / "bert_config.json").write_text(json.dumps(config))
  common = ["--task_name=MRPC", "--data_dir=%s" % data_dir,
            "--max_seq_length=128", "--eval_batch_size=8",
            "--predict_batch_size=8", "--do_eval", "--do_predict",
            "--bert_config_file=%s" % (tmp_path / "bert_config.json"),
            "--vocab_file=%s" % shared_path(
                "data", "vocab", "uncased_L-12_H-768_A-12", "vocab.txt")]
  packed, unpacked = str(tmp_path / "packed"), str(tmp_path / "unpacked")
  result = run_script("run_classifier.py", common + [
      "--output_dir=" + packed, "--do_train", "--pack_sequences",
      "--train_batch_size=16", "--num_train_epochs=3",
      "--learning_rate=1e-3"])
  assert result.returncode == 0, result.stderr[-3000:]
  assert "Packed 64 inputs into 28 rows of 128 tokens" in result.stderr
  result = run_script("run_classifier.py", common + [
      "--output_dir=" + unpacked, "--init_checkpoint=" + packed])
  assert result.returncode == 0, result.stderr[-3000:]
  got = _eval_results(os.path.join(packed, "eval_results.txt"))
  want = _eval_results(os.path.join(unpacked, "eval_results.txt"))
  assert got["global_step"] == 12  # 64 examples / 16 * 3 epochs.
  assert got["eval_loss"] < 0.69  # Below log(2): it learned.
  for key in ("eval_loss", "eval_accuracy", "eval_f1"):
    assert got[key] == pytest.approx(want[key], abs=1e-5), key
  lines = {name: np.array([[float(x) for x in line.split("\t")]
                           for line in read_lines(os.path.join(
                               folder, "test_results.tsv"))])
           for name, folder in (("packed", packed), ("unpacked", unpacked))}
  assert lines["packed"].shape == (64, 2)
  np.testing.assert_allclose(lines["packed"], lines["unpacked"], atol=1e-5,
                             rtol=0)


def test_multi_label_windows_pack_with_each_windows_labels(tmp_path):
  vocab = data_path("conformance", "modeling", "vocab.txt")
  words = [w.strip() for w in open(vocab, encoding="utf-8")][200:260]
  examples = [data.InputExample("t-%d" % i, " ".join(words[i:i + n]), None,
                                labels)
              for i, (n, labels) in enumerate([(30, ["a"]), (5, []),
                                               (12, ["b", "c"])])]
  head = model_lib.MultiLabelHead(["a", "b", "c"]).windowed(8)
  task = task_lib.ClassifierTask(
      "tsv", None, ["a", "b", "c"], head, tokenization.FullTokenizer(vocab),
      max_seq_length=16, output_dir=str(tmp_path), max_examples_per_row=4)
  path = str(tmp_path / "rows.tf_record")
  num_rows, owners = task.write_records(path, examples)
  assert owners.count(0) > 2 and sorted(set(owners)) == [0, 1, 2]
  batch = next(iter(task.input_fn(path)({"batch_size": num_rows})))
  assert batch["label_ids"].shape == (num_rows, 4, 3)
  want = {0: [1, 0, 0], 1: [0, 0, 0], 2: [0, 1, 1]}
  seen = 0
  for row_labels, row_index in zip(batch["label_ids"].numpy(),
                                   batch["example_index"].numpy()):
    for labels, index in zip(row_labels, row_index):
      if index >= 0:
        seen += 1
        assert list(labels) == want[owners[index]]
  assert seen == len(owners)


@pytest.mark.slow
def test_ner_trains_packed_and_predicts_as_unpacked(tmp_path):
  """CoNLL-2003 sentences, windows of 48 tokens packed: each token reads
  its own example's positions, so the predictions and the scores equal
  the unpacked run's."""
  data_dir = tmp_path / "data"
  for name, count in (("eng.train", 40), ("eng.testa", 20),
                      ("eng.testb", 20)):
    _head_of_conll(shared_path("data", "ner", "conll2003", name),
                   data_dir / name, count)
  model_flags = tiny_model_flags()
  common = ["--data_dir=%s" % data_dir, "--max_seq_length=48",
            "--doc_stride=16", "--do_eval", "--do_predict"] + [
                f for f in model_flags if "init_checkpoint" not in f]
  packed, unpacked = str(tmp_path / "packed"), str(tmp_path / "unpacked")
  result = run_script("run_ner.py", common + [
      [f for f in model_flags if "init_checkpoint" in f][0],
      "--output_dir=" + packed, "--do_train", "--pack_sequences",
      "--train_batch_size=8", "--num_train_epochs=1",
      "--learning_rate=1e-3"])
  assert result.returncode == 0, result.stderr[-3000:]
  num_features, num_rows = map(int, re.search(
      r"Packed (\d+) features into (\d+) rows", result.stderr).groups())
  assert num_rows < num_features
  os.makedirs(unpacked)  # The training run's labels.
  shutil.copy(os.path.join(packed, "label_list.txt"), unpacked)
  result = run_script("run_ner.py", common + [
      "--output_dir=" + unpacked, "--init_checkpoint=" + packed])
  assert result.returncode == 0, result.stderr[-3000:]
  got = _eval_results(os.path.join(packed, "eval_results.txt"))
  want = _eval_results(os.path.join(unpacked, "eval_results.txt"))
  assert got["global_step"] == num_features // 8  # Features, not rows.
  for key in ("eval_loss", "eval_f1", "eval_accuracy"):
    assert got[key] == pytest.approx(want[key], abs=1e-5), key
  for name in ("test_predictions.txt", "dev_predictions.txt"):
    assert read_lines(os.path.join(packed, name)) == read_lines(
        os.path.join(unpacked, name))


@pytest.mark.slow
def test_extract_features_and_predict_masked_lm_write_as_unpacked(tmp_path):
  input_file, masked_file = extraction_inputs(tmp_path)
  got = {}
  for pack in (False, True):
    output = str(tmp_path / ("features%s.jsonl" % pack))
    result = run_script("extract_features.py", [
        "--input_file=%s" % input_file, "--output_file=" + output,
        "--max_seq_length=48", "--batch_size=2", "--layers=-1,-2",
        "--pack_sequences=%s" % pack, "--max_examples_per_row=3"] +
                        tiny_model_flags(("conformance", "extract_features"),
                                         do_lower_case=True))
    assert result.returncode == 0, result.stderr[-3000:]
    assert bool(re.search("Packed 5 examples into [23] rows",
                          result.stderr)) == pack
    got[pack, "features"] = [json.loads(line) for line in read_lines(output)]
    output = str(tmp_path / ("masked%s.jsonl" % pack))
    result = run_script("predict_masked_lm.py", [
        "--input_file=%s" % masked_file, "--output_file=" + output,
        "--max_seq_length=48", "--predict_batch_size=2", "--top_k=3",
        "--pack_sequences=%s" % pack] + tiny_model_flags())
    assert result.returncode == 0, result.stderr[-3000:]
    assert ("Packed 3 lines into 1 rows" in result.stderr) == pack
    got[pack, "masked"] = [json.loads(line) for line in read_lines(output)]
  assert_same_extraction(got[True, "features"], got[False, "features"],
                         got[True, "masked"], got[False, "masked"])
