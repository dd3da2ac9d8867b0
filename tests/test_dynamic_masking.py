"""Masked-LM-only pre-training with dynamic masking.

create_pretraining_data.py --dynamic_masking writes unmasked records;
run_pretraining.py --dynamic_masking masks them as they are read, by the
records' own rule (15% of the tokens, of which 80% [MASK], 10% a random
word, 10% kept; whole words together), anew each epoch and reproducibly
for a fixed seed; --next_sentence=false drops the next-sentence head.
"""

import os
import random
import types

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from helpers import data_path
from helpers import import_or_skip
from helpers import run_script
from helpers import shared_path
from bert_tf import io as io_utils
from bert_tf.tasks.pretraining import heads
from bert_tf.tasks.pretraining import instances as instances_lib
from bert_tf.tasks.pretraining import masking
from bert_tf.tasks.pretraining import records
from bert_tf.tasks.pretraining import whole_words
from bert_tf.tasks.pretraining.inputs import check_record_lengths
from bert_tf.tasks.pretraining.inputs import input_fn_builder
from bert_tf.train import model_fn as model_fn_utils
import create_pretraining_data
import modeling
import tokenization

_SEQ = 32
_PREDS = 5
_SEED = 7


def _tiny(name):
  return data_path("conformance", "modeling", name)


@pytest.fixture(scope="module")
def tokenizer():
  return tokenization.FullTokenizer(_tiny("vocab.txt"), do_lower_case=True)


@pytest.fixture(scope="module")
def unmasked(tokenizer, tmp_path_factory):
  """Unmasked records of the shared sample corpus, and their instances."""
  found = instances_lib.create_training_instances(
      [shared_path("data", "pretrain", "sample_text.txt")], tokenizer, _SEQ,
      dupe_factor=2, short_seq_prob=0.1, masked_lm_prob=0.15,
      max_predictions_per_seq=_PREDS, rng=random.Random(1), masked=False)
  path = str(tmp_path_factory.mktemp("unmasked") / "unmasked.tfrecord")
  serializer = records.make_serializer(tokenizer, _SEQ, _PREDS,
                                       dynamic_masking=True)
  with tf.io.TFRecordWriter(path) as writer:
    for instance in found:
      writer.write(serializer.serialize(instance))
  return path, found


def _random_sequences(vocab_size, count, rng):
  """`count` [CLS] a [SEP] b [SEP] id lists of 20-128 tokens (ids from 999
  non-special words: 1000 up)."""
  sequences = []
  for _ in range(count):
    length = rng.randint(20, 128)
    words = [rng.randint(1000, vocab_size - 1) for _ in range(length - 3)]
    cut = rng.randint(1, len(words) - 1)
    sequences.append([101] + words[:cut] + [102] + words[cut:] + [102])
  return sequences


def test_masking_statistics_follow_the_reference_rule():
  # 1000 sequences, ~74k tokens per pass, two passes (other indexes):
  # 150k tokens. Each sequence masks round(15%) of its tokens (at most
  # --max_predictions_per_seq); of the masked, 80% [MASK], 10% a random
  # word, 10% kept, within 4 standard deviations.
  words = tokenization.load_vocab(_tiny("vocab.txt"))
  fake = types.SimpleNamespace(
      vocab=dict(words), inv_vocab={v: k for k, v in words.items()})
  # A 30k-word vocabulary, so the random word is rarely the original.
  for index in range(len(words), 30000):
    fake.vocab["w%d" % index] = index
    fake.inv_vocab[index] = "w%d" % index
  masker = masking.Masker(fake, max_predictions_per_seq=19)
  sequences = _random_sequences(30000, 1000, random.Random(0))
  counts = {"tokens": 0, "masked": 0, "mask": 0, "kept": 0, "random": 0}
  for pass_index in range(2):
    for index, ids in enumerate(sequences):
      rng = random.Random(pass_index * 10**6 + index)
      padded = ids + [0] * (128 - len(ids))
      out, positions, labels, weights = masker.mask_ids(padded, len(ids), rng)
      num = int(weights.sum())
      assert num == min(19, max(1, int(round(len(ids) * 0.15))))
      assert list(positions[:num]) == sorted(positions[:num])
      assert all(ids[p] not in (101, 102) for p in positions[:num])
      assert [ids[p] for p in positions[:num]] == list(labels[:num])
      unchanged = [i for i in range(len(ids)) if i not in positions[:num]]
      assert all(out[i] == ids[i] for i in unchanged)
      counts["tokens"] += len(ids)
      counts["masked"] += num
      for p in positions[:num]:
        key = ("mask" if out[p] == 103 else
               "kept" if out[p] == ids[p] else "random")
        counts[key] += 1
  assert counts["tokens"] > 100000
  share = counts["masked"] / counts["tokens"]
  assert abs(share - 0.15) < 0.005, counts
  for key, expected in (("mask", 0.8), ("kept", 0.1), ("random", 0.1)):
    p = counts[key] / counts["masked"]
    sigma = (expected * (1 - expected) / counts["masked"]) ** 0.5
    assert abs(p - expected) < 4 * sigma, (key, p, counts)


def test_whole_word_masking_masks_all_pieces_of_a_word_together():
  tokenizer = tokenization.FullTokenizer(
      shared_path("data", "vocab", "uncased_L-12_H-768_A-12", "vocab.txt"),
      do_lower_case=True)
  masker = masking.Masker(tokenizer, 20, do_whole_word_mask=True)
  text = ("unbelievably, the transformers reconfigured everything "
          "whereupon philanthropists hesitated ") * 3
  tokens = ["[CLS]"] + tokenizer.tokenize(text)[:60] + ["[SEP]"]
  ids = tokenizer.convert_tokens_to_ids(tokens)
  groups = whole_words.word_groups(tokens)
  assert any(len(group) > 1 for group in groups)
  seen_partial = False
  for index in range(300):
    _, positions, _, weights = masker.mask_ids(ids, len(ids),
                                               random.Random(index))
    chosen = set(positions[:int(weights.sum())])
    for group in groups:
      inside = [p in chosen for p in group]
      seen_partial |= any(inside) and len(group) > 1
      assert all(inside) or not any(inside), (group, sorted(chosen))
  assert seen_partial  # Words of several pieces were chosen, whole.


def test_chinese_word_marks_mask_segmenter_words_together(tokenizer):
  # word_continues marks (the records of --do_chinese_whole_word_mask)
  # join a token to the word before it.
  masker = masking.Masker(tokenizer, 6, word_marks=True)
  ids = [101] + list(range(200, 230)) + [102]
  marks = [0] + [0, 1, 1] * 10 + [0]
  for index in range(100):
    _, positions, _, weights = masker.mask_ids(
        ids, len(ids), random.Random(index), marks)
    chosen = set(positions[:int(weights.sum())])
    for start in range(1, 31, 3):
      inside = [p in chosen for p in range(start, start + 3)]
      assert all(inside) or not any(inside)


def _batches(input_fn, count, seed=_SEED, batch_size=4):
  config = types.SimpleNamespace(tf_random_seed=seed)
  with tf.Graph().as_default():
    dataset = input_fn({"batch_size": batch_size}, config)
    element = tf.data.make_one_shot_iterator(dataset).get_next()
    with tf.Session() as sess:
      return [sess.run(element) for _ in range(count)]


def test_pipeline_masks_anew_each_epoch_and_repeats_under_a_seed(
    unmasked, tokenizer):
  path, found = unmasked
  masker = masking.Masker(tokenizer, _PREDS)

  def eval_batches(seed):
    return _batches(input_fn_builder([path], _SEQ, _PREDS, False,
                                     masker=masker), 2, seed=seed)

  first, again, other = eval_batches(1), eval_batches(1), eval_batches(2)
  for a, b in zip(first, again):
    for key in a:
      np.testing.assert_array_equal(a[key], b[key])
  assert not np.array_equal(first[0]["masked_lm_positions"],
                            other[0]["masked_lm_positions"])
  # Training repeats the records: the second pass draws other masks.
  num = len(found)
  train = _batches(input_fn_builder([path], _SEQ, _PREDS, True,
                                    masker=masker, num_cpu_threads=1),
                   (2 * num) // 4)
  seen = {}
  differs = 0
  for batch in train:
    for row in range(4):
      mask = batch["input_mask"][row]
      original = batch["input_ids"][row].copy()
      count = int(batch["masked_lm_weights"][row].sum())
      positions = batch["masked_lm_positions"][row][:count]
      original[positions] = batch["masked_lm_ids"][row][:count]
      key = (original * mask).tobytes() + batch["segment_ids"][row].tobytes()
      if key in seen:
        differs += not np.array_equal(seen[key], positions)
      seen[key] = positions
  assert differs > num // 4  # Most sequences read twice got new masks.


def _static_records(path, masker, copies, out_dir):
  """(unmasked, static): `copies` copies of the unmasked records of `path`,
  and the same in the reference's layout, record i masked as the pipeline
  masks the sequence of index i (seed `_SEED`): the reference's
  --dupe_factor copies, with the masks the pipeline draws."""
  unmasked_path = os.path.join(out_dir, "copies.tfrecord")
  static_path = os.path.join(out_dir, "static.tfrecord")
  with tf.io.TFRecordWriter(unmasked_path) as copy:
    for _ in range(copies):
      for record in tf.io.tf_record_iterator(path):
        copy.write(record)
  with tf.io.TFRecordWriter(static_path) as writer:
    for index, record in enumerate(tf.io.tf_record_iterator(unmasked_path)):
      feature = tf.train.Example.FromString(record).features.feature
      values = {name: list(feature[name].int64_list.value)
                for name in feature}
      ids, positions, label_ids, weights = masker.mask_ids(
          values["input_ids"], sum(values["input_mask"]),
          random.Random((_SEED << 64) + index))
      features = {
          "input_ids": io_utils.int64_feature(ids),
          "input_mask": io_utils.int64_feature(values["input_mask"]),
          "segment_ids": io_utils.int64_feature(values["segment_ids"]),
          "masked_lm_positions": io_utils.int64_feature(positions),
          "masked_lm_ids": io_utils.int64_feature(label_ids),
          "masked_lm_weights": io_utils.float_feature(weights),
          "next_sentence_labels": io_utils.int64_feature(
              values["next_sentence_labels"])}
      writer.write(tf.train.Example(features=tf.train.Features(
          feature=features)).SerializeToString())
  return unmasked_path, static_path


def _losses(*batch_lists):
  """The pre-training loss of the tiny model on each batch of each list."""
  config = modeling.BertConfig.from_json_file(_tiny("bert_config.json"))
  with tf.Graph().as_default():
    placeholders = {key: tf.placeholder(tf.as_dtype(value.dtype), value.shape)
                    for key, value in batch_lists[0][0].items()}
    spec = model_fn_utils.build_model_fn(
        heads.pretraining_head(config), config,
        os.path.join(os.path.dirname(_tiny("vocab.txt")), "bert_model.ckpt"),
        use_tpu=False,
        use_one_hot_embeddings=False)(placeholders, None, "eval", {})
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      return [[sess.run(spec.loss, {placeholders[k]: v for k, v in b.items()})
               for b in batches] for batches in batch_lists]


def test_masks_drawn_once_train_as_the_static_records(unmasked, tokenizer,
                                                      tmp_path):
  # The same masks in a static file: the training pipeline gives the same
  # batches (same shuffle), and the model the same losses. (Three copies:
  # the shuffle buffer of 100 reads past the first.)
  path, found = unmasked
  masker = masking.Masker(tokenizer, _PREDS)
  copies, static = _static_records(path, masker, 3, str(tmp_path))
  count = len(found) // 4
  dynamic_batches = _batches(input_fn_builder(
      [copies], _SEQ, _PREDS, True, masker=masker, num_cpu_threads=1), count)
  static_batches = _batches(input_fn_builder(
      [static], _SEQ, _PREDS, True, num_cpu_threads=1), count)
  for a, b in zip(dynamic_batches, static_batches):
    assert sorted(a) == sorted(b)
    for key in a:
      np.testing.assert_array_equal(a[key], b[key], err_msg=key)
  dynamic_losses, static_losses = _losses(dynamic_batches, static_batches)
  np.testing.assert_allclose(dynamic_losses, static_losses, rtol=1e-6)


def test_unmasked_records_without_next_sentence(tokenizer, tmp_path):
  corpus = tmp_path / "one.txt"
  corpus.write_text("the cat sat on the mat .\nit was happy .\n",
                    encoding="utf-8")
  found = instances_lib.create_training_instances(
      [str(corpus)], tokenizer, 12, 1, 0.0, 0.15, _PREDS, random.Random(0),
      masked=False, next_sentence=False)
  assert found  # One document is enough without next-sentence prediction.
  for instance in found:
    assert instance.is_random_next is None
    assert instance.tokens[0] == "[CLS]" and instance.tokens[-1] == "[SEP]"
    assert instance.tokens.count("[SEP]") == 1
    assert set(instance.segment_ids) == {0}
    assert not instance.masked_lm_positions
  serializer = records.make_serializer(tokenizer, 12, _PREDS, True, False)
  example = tf.train.Example.FromString(serializer.serialize(found[0]))
  assert sorted(example.features.feature) == [
      "input_ids", "input_mask", "segment_ids"]


def _pretrain(unmasked_path, output_dir, *extra):
  flags = ["--input_file=%s" % unmasked_path, "--output_dir=%s" % output_dir,
           "--bert_config_file=%s" % _tiny("bert_config.json"),
           "--vocab_file=%s" % _tiny("vocab.txt"),
           "--init_checkpoint=%s" % os.path.join(
               os.path.dirname(_tiny("vocab.txt")), "bert_model.ckpt"),
           "--max_seq_length=%d" % _SEQ,
           "--max_predictions_per_seq=%d" % _PREDS,
           "--dynamic_masking", "--next_sentence=false", "--deterministic",
           "--do_eval", "--eval_batch_size=8", "--max_eval_steps=8"]
  result = run_script("run_pretraining.py", flags + list(extra),
                      env={"CUDA_VISIBLE_DEVICES": ""})
  assert result.returncode == 0, result.stderr[-3000:]
  with open(os.path.join(output_dir, "eval_results.txt")) as f:
    return dict(line.strip().split(" = ") for line in f)


@pytest.mark.slow
def test_masked_lm_only_run_learns_and_its_checkpoint_loads(unmasked,
                                                            tmp_path):
  # The shared sample corpus, masked anew each epoch, no next sentence: the
  # masked-LM accuracy on the same (seeded) evaluation masks rises; the
  # checkpoint, without the next-sentence head, loads into the full model.
  path, _ = unmasked
  before = _pretrain(path, str(tmp_path / "before"))
  after = _pretrain(path, str(tmp_path / "after"), "--do_train",
                    "--num_train_steps=20", "--train_batch_size=8",
                    "--learning_rate=2e-3", "--num_warmup_steps=0",
                    "--save_checkpoints_steps=20")
  assert sorted(after) == ["global_step", "loss", "masked_lm_accuracy",
                           "masked_lm_loss"]
  assert float(after["masked_lm_accuracy"]) > (
      float(before["masked_lm_accuracy"]) + 0.05), (before, after)
  assert float(after["masked_lm_loss"]) < float(before["masked_lm_loss"])
  checkpoint = tf.train.latest_checkpoint(str(tmp_path / "after"))
  names = {name for name, _ in tf.train.list_variables(checkpoint)}
  assert not any(name.startswith("cls/seq_relationship") for name in names)
  config = modeling.BertConfig.from_json_file(_tiny("bert_config.json"))
  batch = {"input_ids": np.full([2, _SEQ], 5, np.int32),
           "input_mask": np.ones([2, _SEQ], np.int32),
           "segment_ids": np.zeros([2, _SEQ], np.int32),
           "masked_lm_positions": np.ones([2, _PREDS], np.int32),
           "masked_lm_ids": np.full([2, _PREDS], 5, np.int32),
           "masked_lm_weights": np.ones([2, _PREDS], np.float32),
           "next_sentence_labels": np.zeros([2, 1], np.int32)}
  with tf.Graph().as_default():
    spec = model_fn_utils.build_model_fn(
        heads.pretraining_head(config), config, checkpoint, use_tpu=False,
        use_one_hot_embeddings=False)(
            {k: tf.constant(v) for k, v in batch.items()}, None, "eval", {})
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      embeddings = sess.run(tf.global_variables("bert/embeddings/word")[0])
      assert np.isfinite(sess.run(spec.loss))
  np.testing.assert_array_equal(
      embeddings, tf.train.load_variable(
          checkpoint, "bert/embeddings/word_embeddings"))


@pytest.mark.parametrize("chinese", [False, True])
def test_a_part_writes_unmasked_records_with_the_word_marks(tmp_path,
                                                            chinese):
  # A worker's part (--num_workers, --num_shards) writes the unmasked
  # layout; with --do_chinese_whole_word_mask, word_continues marks the
  # characters that continue a jieba word, and the pipeline masks them
  # whole.
  if chinese:
    import_or_skip("jieba", "./setup.sh --chinese")
  vocab = shared_path("data", "vocab", "chinese_L-12_H-768_A-12", "vocab.txt")
  tokenizer = tokenization.FullTokenizer(vocab, do_lower_case=True)
  corpus = tmp_path / "zh.txt"
  corpus.write_text("我爱北京天安门。\n今天天气很好。\n\n北京是中国的首都。\n"
                    "天安门在北京。\n", encoding="utf-8")
  out = str(tmp_path / "part.tfrecord")
  options = {"max_seq_length": 24, "dupe_factor": 1, "short_seq_prob": 0.0,
             "masked_lm_prob": 0.15, "max_predictions_per_seq": 4,
             "do_whole_word_mask": False,
             "do_chinese_whole_word_mask": chinese, "dynamic_masking": True,
             "next_sentence": True}
  counts = create_pretraining_data._run_part(  # pylint: disable=protected-access
      0, 1, [(str(corpus), 0, None)], [out], tokenizer, options, 3)
  found = [tf.train.Example.FromString(r).features.feature
           for r in tf.io.tf_record_iterator(out)]
  assert len(found) == counts["instances"] > 0
  names = ["input_ids", "input_mask", "segment_ids", "next_sentence_labels"]
  assert sorted(found[0]) == sorted(names + ["word_continues"] * chinese)
  if chinese:
    marks = np.array([list(f["word_continues"].int64_list.value)
                      for f in found])
    assert marks.sum() > 0
    masker = masking.Masker(tokenizer, 4, word_marks=True)
    ids = list(found[0]["input_ids"].int64_list.value)
    num = sum(found[0]["input_mask"].int64_list.value)
    for index in range(30):
      _, positions, _, weights = masker.mask_ids(
          ids, num, random.Random(index), marks[0])
      chosen = set(positions[:int(weights.sum())])
      specials = (tokenizer.vocab["[CLS]"], tokenizer.vocab["[SEP]"])
      for start, continues in enumerate(marks[0][1:], 1):
        if continues and ids[start - 1] not in specials:
          assert (start in chosen) == (start - 1 in chosen)


def test_records_of_the_other_layout_are_one_line_naming_the_flags(unmasked):
  path, _ = unmasked
  with pytest.raises(ValueError, match=r"record 0 has no feature "
                     r"'masked_lm_positions'.*--dynamic_masking"):
    check_record_lengths([path], _SEQ, _PREDS)
  check_record_lengths([path], _SEQ, _PREDS, dynamic_masking=True)
  with pytest.raises(ValueError, match="word_continues"):
    check_record_lengths([path], _SEQ, _PREDS, dynamic_masking=True,
                         word_marks=True)


def test_masked_records_under_dynamic_masking_are_one_line(tokenizer,
                                                          tmp_path):
  path = str(tmp_path / "masked.tfrecord")
  instance = instances_lib.TrainingInstance(
      tokens=["[CLS]", "the", "[MASK]", "[SEP]", "a", "[SEP]"],
      segment_ids=[0, 0, 0, 0, 1, 1], is_random_next=False,
      masked_lm_positions=[2], masked_lm_labels=["man"])
  with tf.io.TFRecordWriter(path) as writer:
    writer.write(records.make_serializer(tokenizer, _SEQ, _PREDS).serialize(
        instance))
  check_record_lengths([path], _SEQ, _PREDS)
  with pytest.raises(ValueError, match=r"masked.tfrecord: record 0 is "
                     r"already masked; --dynamic_masking expects"):
    check_record_lengths([path], _SEQ, _PREDS, dynamic_masking=True,
                         next_sentence=False)
