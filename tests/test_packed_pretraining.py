"""Packed pre-training instances: `create_pretraining_data.py
--pack_sequences` (`records.PackedSerializer`) writes every instance once,
and `run_pretraining.py`'s heads give a packed batch the losses and the
gradient of the same instances unpacked."""

import os
import random
import types

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from helpers import data_path
from helpers import run_script
import create_pretraining_data as cpd
from bert_tf.tasks.pretraining import heads as heads_lib
from bert_tf.tasks.pretraining import inputs as inputs_lib
from bert_tf.tasks.pretraining import instances as instances_lib
from bert_tf.tasks.pretraining import records
from bert_tf.train import accumulation
from bert_tf.train import packing
from bert_tf.train import spec as spec_lib
import modeling
import tokenization

_SEQ, _PREDS, _PER_ROW = 64, 10, 4

# Short documents, so that instances are short and share rows.
_CORPUS = "\n\n".join(
    "\n".join("the %s %s went to the %s ." % (a, b, c) for c in words)
    for a, b, words in [("man", "and", ["store", "park"]),
                        ("dog", "cat", ["house", "park", "store"]),
                        ("woman", "man", ["house"]),
                        ("cat", "dog", ["store", "house", "park", "store"]),
                        ("man", "woman", ["park", "house"])]) + "\n"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
  """(tokenizer, instances, rows read back from the written records)."""
  folder = tmp_path_factory.mktemp("packed")
  (folder / "corpus.txt").write_text(_CORPUS, encoding="utf-8")
  tokenizer = tokenization.FullTokenizer(
      data_path("conformance", "modeling", "vocab.txt"), do_lower_case=True)
  instances = instances_lib.create_training_instances(
      [str(folder / "corpus.txt")], tokenizer, _SEQ, 3, 0.3, 0.15, _PREDS,
      random.Random(5))
  path = str(folder / "packed.tfrecord")
  cpd.write_instance_to_example_files(
      instances, tokenizer, _SEQ, _PREDS, [path],
      records.make_serializer(tokenizer, _SEQ, _PREDS, max_per_row=_PER_ROW))
  rows = []
  for record in tf.io.tf_record_iterator(path):
    feature = tf.train.Example.FromString(record).features.feature
    rows.append({name: np.array(value.int64_list.value or
                                value.float_list.value)
                 for name, value in feature.items()})
  return tokenizer, instances, path, rows


def test_packed_records_hold_every_instance_exactly_once(data):
  tokenizer, instances, _, rows = data
  assert len(rows) < 0.6 * len(instances)  # They pack.
  seen = []
  for row in rows:
    assert sorted(row) == list(records.PackedSerializer(
        tokenizer, _SEQ, _PREDS, _PER_ROW).feature_names)
    assert row["masked_lm_weights"].sum() <= _PREDS
    masked = 0
    for slot, index in enumerate(row["example_index"]):
      if index < 0:
        assert row["is_real_example"][slot] == 0
        continue
      seen.append(index)
      instance = instances[index]
      mine = row["input_mask"] == slot + 1
      start, length = row["cls_positions"][slot], len(instance.tokens)
      assert np.flatnonzero(mine).tolist() == list(range(start,
                                                         start + length))
      assert tokenizer.convert_ids_to_tokens(
          row["input_ids"][mine].tolist()) == instance.tokens
      assert row["segment_ids"][mine].tolist() == instance.segment_ids
      assert row["position_ids"][mine].tolist() == list(range(length))
      assert row["next_sentence_labels"][slot] == instance.is_random_next
      count = len(instance.masked_lm_positions)
      assert (row["masked_lm_positions"][masked:masked + count] - start
              ).tolist() == instance.masked_lm_positions
      assert tokenizer.convert_ids_to_tokens(
          row["masked_lm_ids"][masked:masked + count].tolist()) == (
              instance.masked_lm_labels)
      masked += count
    assert row["masked_lm_weights"].tolist() == (
        [1.0] * masked + [0.0] * (_PREDS - masked))
  assert sorted(seen) == list(range(len(instances)))


def test_a_row_holds_at_most_max_predictions_masked_words():
  vocab = {"[CLS]": 1, "[SEP]": 2, "a": 3}
  tokenizer = types.SimpleNamespace(vocab=vocab)
  # Four instances of 8 tokens, 4 masked words each: tokens alone would
  # put them in one row of 32; 10 masked words a row make two rows of two.
  instances = [instances_lib.TrainingInstance(
      tokens=["[CLS]"] + ["a"] * 6 + ["[SEP]"], segment_ids=[0] * 8,
      masked_lm_positions=[1, 2, 3, 4], masked_lm_labels=["a"] * 4,
      is_random_next=k % 2 == 1) for k in range(4)]
  rows = records.PackedSerializer(tokenizer, 32, 10, 4).pack(instances)
  assert [row["example_index"] for row in rows] == [[0, 1, -1, -1],
                                                    [2, 3, -1, -1]]
  assert rows[0]["masked_lm_positions"] == [1, 2, 3, 4, 9, 10, 11, 12, 0, 0]
  assert rows[1]["next_sentence_labels"] == [0, 1, 0, 0]
  with pytest.raises(ValueError, match="5 masked positions; "
                     "max_predictions_per_seq is 4"):
    records.PackedSerializer(tokenizer, 32, 4, 4).pack([
        instances_lib.TrainingInstance(
            tokens=instances[0].tokens, segment_ids=[0] * 8,
            masked_lm_positions=[1, 2, 3, 4, 5], masked_lm_labels=["a"] * 5,
            is_random_next=False)])


def _losses(features, config, update_share=None):
  """(masked-LM loss, next-sentence loss) of the heads on `features`
  (`update_share`: of an accumulating micro-batch)."""
  tensors = {name: tf.constant(value) for name, value in features.items()}
  model = modeling.BertModel(
      config, False, tensors["input_ids"], tensors["input_mask"],
      tensors["segment_ids"], scope="bert",
      **packing.encoder_inputs(tensors))
  train = spec_lib.ModeKeys.TRAIN
  if update_share is not None:
    update_share = tensors[accumulation.UPDATE_SHARE_KEY]
  return tuple(head(config).build(model, tensors, train, update_share).loss
               for head in (heads_lib.MaskedLmHead,
                            heads_lib.NextSentenceHead))


def _micro_batches(rows):
  """An update of 4 packed rows, the two of fewest and the two of most
  instances, as 2 micro-batches with their shares of its masked words
  and real slots (`accumulation.with_update_shares`, as run_pretraining.py
  builds them)."""
  counts = [row["is_real_example"].sum() for row in rows]
  order = np.argsort(counts, kind="stable")
  update = _stack([rows[k] for k in list(order[:2]) + list(order[-2:])])
  update = {name: value.astype(np.float32 if name == "masked_lm_weights"
                               else np.int32)
            for name, value in update.items()}
  micro = accumulation.with_update_shares(
      tf.data.Dataset.from_tensor_slices(update).batch(2), 2,
      lambda batch: {
          accumulation.UPDATE_SHARE_KEY: batch["masked_lm_weights"],
          accumulation.SLOT_SHARE_KEY: batch["is_real_example"]})
  return update, list(micro.as_numpy_iterator())


@pytest.fixture(scope="module")
def losses(data):
  """The heads' losses and gradients on the instances unpacked and on
  their packed rows, with the same random 2-layer 32-wide BERT."""
  tokenizer, instances, _, rows = data
  update, micro_batches = _micro_batches(rows)
  unpacked = [records.instance_features(i, tokenizer.vocab, _SEQ, _PREDS)
              for i in instances]
  alone = {name: np.array([values[k] for values in unpacked],
                          np.float32 if name == "masked_lm_weights"
                          else np.int32)
           for k, name in enumerate(records.FEATURE_ORDER)}
  packed = {name: value.astype(np.float32 if name == "masked_lm_weights"
                               else np.int32)
            for name, value in _stack(rows).items()}
  config = modeling.BertConfig(vocab_size=len(tokenizer.vocab),
                               hidden_size=32, num_hidden_layers=2,
                               num_attention_heads=4, intermediate_size=37,
                               max_position_embeddings=_SEQ,
                               initializer_range=0.2)
  with tf.Graph().as_default():
    tf.set_random_seed(1)
    alone_losses = _losses(alone, config)
    with tf.variable_scope(tf.get_variable_scope(), reuse=True):
      packed_losses = _losses(packed, config)
      update_losses = _losses(update, config)
      shared = [_losses(batch, config, update_share=True)
                for batch in micro_batches]
      own = [_losses({k: v for k, v in batch.items() if "share" not in k},
                     config) for batch in micro_batches]
    variables = tf.trainable_variables()
    fetches = {
        "alone": alone_losses, "packed": packed_losses,
        "update": update_losses, "micro_shared": shared, "micro_own": own,
        "slots": [tf.constant(b["is_real_example"].sum())
                  for b in micro_batches],
        "alone_grads": tf.gradients(sum(alone_losses), variables),
        "packed_grads": tf.gradients(sum(packed_losses), variables)}
    fetches = {k: [tf.convert_to_tensor(t) for t in v]
               for k, v in fetches.items()}
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      return session.run(fetches)


def _stack(rows):
  return {name: np.stack([row[name] for row in rows]) for name in rows[0]}


def test_packed_losses_equal_the_instances_unpacked(losses):
  (alone_lm, alone_ns), (packed_lm, packed_ns) = (losses["alone"],
                                                  losses["packed"])
  assert alone_lm > 1.0 and alone_ns > 0.1
  np.testing.assert_allclose(packed_lm, alone_lm, rtol=1e-5)
  # The packed mean divides by (instances + 1e-5).
  np.testing.assert_allclose(packed_ns, alone_ns, rtol=1e-5)


def test_packed_gradient_equals_the_instances_unpacked(losses):
  assert len(losses["packed_grads"]) == len(losses["alone_grads"]) > 10
  # Float32 rounding, against the largest gradient (the attention keys'
  # bias has none: its values are rounding alone).
  scale = max(np.abs(alone).max() for alone in losses["alone_grads"])
  for packed, alone in zip(losses["packed_grads"], losses["alone_grads"]):
    np.testing.assert_allclose(packed, alone, rtol=2e-5, atol=1e-6 * scale)


def test_micro_batches_give_the_update_means(losses):
  # Rows hold different numbers of instances: with gradient accumulation
  # each micro-batch divides by its share of the update's masked words and
  # real slots, so the mean of the micro-batches' losses is the update's.
  assert losses["slots"][0] < losses["slots"][1]
  update_lm, update_ns = losses["update"]
  shared_lm, shared_ns = np.mean(losses["micro_shared"], axis=0)
  np.testing.assert_allclose(shared_lm, update_lm, rtol=1e-5)
  np.testing.assert_allclose(shared_ns, update_ns, rtol=1e-5)
  # Each micro-batch's own mean (the next-sentence loss before the slot
  # share) is not the update's on these rows: the test tells them apart.
  own_ns = np.mean(losses["micro_own"], axis=0)[1]
  assert abs(own_ns - update_ns) > 100 * 1e-5 * update_ns


def test_run_pretraining_reads_packed_rows_as_instances(data, tmp_path):
  _, instances, path, rows = data
  packed = inputs_lib.packed_rows([path])
  assert packed.max_per_row == _PER_ROW
  assert packed.instances_per_row == pytest.approx(len(instances) / len(rows))
  inputs_lib.check_record_lengths([path], _SEQ, _PREDS)
  input_fn = packing.scale_batch_size(inputs_lib.input_fn_builder(
      [path], _SEQ, _PREDS, is_training=True, max_per_row=_PER_ROW),
                                      packed.instances_per_row)
  with tf.Graph().as_default():
    batch = input_fn({"batch_size": 8})
    shapes = {name: shape.as_list()
              for name, shape in tf.data.get_output_shapes(batch).items()}
  rows_a_batch = max(1, round(8 / packed.instances_per_row))
  assert shapes["input_ids"] == shapes["position_ids"] == [rows_a_batch, _SEQ]
  assert shapes["next_sentence_labels"] == [rows_a_batch, _PER_ROW]
  assert shapes["masked_lm_positions"] == [rows_a_batch, _PREDS]


def test_mixed_or_dynamically_masked_packing_is_one_line(data, tmp_path,
                                                         monkeypatch):
  tokenizer, instances, path, _ = data
  plain = str(tmp_path / "plain.tfrecord")
  cpd.write_instance_to_example_files(instances[:2], tokenizer, _SEQ, _PREDS,
                                      [plain])
  assert inputs_lib.packed_rows([plain]) is None
  for files in ([path, plain], [plain, path]):
    with pytest.raises(ValueError, match=r"^\S*packed.tfrecord holds packed "
                       r"records and \S*plain.tfrecord unpacked ones; "
                       "expected every --input_file made with the same "
                       r"create_pretraining_data.py --pack_sequences$"):
      inputs_lib.check_record_lengths(files, _SEQ, _PREDS)
  with pytest.raises(ValueError, match="already masked"):
    inputs_lib.check_record_lengths([path], _SEQ, _PREDS,
                                    dynamic_masking=True)
  monkeypatch.setattr(cpd, "FLAGS", types.SimpleNamespace(
      input_file="i", output_file="o", vocab_file="v", max_seq_length=128,
      max_predictions_per_seq=20, dupe_factor=1, num_workers=1,
      masked_lm_prob=0.15, short_seq_prob=0.1, pack_sequences=True,
      dynamic_masking=True))
  with pytest.raises(ValueError, match=r"^--pack_sequences packs masked "
                     "instances, and --dynamic_masking writes unmasked ones: "
                     "use one or the other$"):
    cpd._check_flags(cpd.FLAGS)


@pytest.mark.e2e
@pytest.mark.slow
def test_scripts_write_and_train_on_packed_rows(tmp_path):
  # Both scripts as commands: the runner is the stack's default (the
  # Estimator on TF 2.15, the session runner on 2.21); training accumulates
  # two micro-batches (their shares of masked words and slots).
  (tmp_path / "corpus.txt").write_text(_CORPUS, encoding="utf-8")
  model = [data_path("conformance", "modeling", name)
           for name in ("vocab.txt", "bert_config.json")]
  env = {"TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}
  made = run_script("create_pretraining_data.py", [
      "--input_file=%s" % (tmp_path / "corpus.txt"),
      "--output_file=%s" % (tmp_path / "rows.tfrecord"),
      "--vocab_file=%s" % model[0], "--max_seq_length=%d" % _SEQ,
      "--max_predictions_per_seq=%d" % _PREDS, "--dupe_factor=3",
      "--pack_sequences", "--max_examples_per_row=%d" % _PER_ROW], env=env)
  assert made.returncode == 0, made.stderr[-3000:]
  assert "Packed" in made.stderr
  output_dir = tmp_path / "out"
  trained = run_script("run_pretraining.py", [
      "--input_file=%s" % (tmp_path / "rows.tfrecord"),
      "--output_dir=%s" % output_dir, "--bert_config_file=%s" % model[1],
      "--max_seq_length=%d" % _SEQ, "--max_predictions_per_seq=%d" % _PREDS,
      "--do_train", "--do_eval", "--train_batch_size=8",
      "--gradient_accumulation_steps=2",
      "--num_train_steps=2", "--num_warmup_steps=0", "--max_eval_steps=2"],
                       env=env)
  assert trained.returncode == 0, trained.stderr[-3000:]
  assert "Packed records:" in trained.stderr
  assert "each update's 2 micro-batches" in trained.stderr
  with open(os.path.join(output_dir, "eval_results.txt")) as f:
    results = dict(line.strip().split(" = ") for line in f)
  assert int(results["global_step"]) == 2
  assert 0.0 < float(results["next_sentence_loss"]) < 2.0
  assert 0.0 < float(results["masked_lm_loss"]) < 20.0
