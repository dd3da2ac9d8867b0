"""Tests for the shared plumbing in estimator_utils.py and feature_utils.py."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from conftest import REPO_ROOT

import estimator_utils
import feature_utils
import modeling


def test_expand_file_patterns_keeps_order_and_sorts_each_glob(tmp_path):
  for name in ("b1.txt", "b0.txt", "a.txt"):
    (tmp_path / name).write_text("x")
  patterns = "%s,%s" % (tmp_path / "b*.txt", tmp_path / "a.txt")
  assert estimator_utils.expand_file_patterns(patterns) == [
      str(tmp_path / "b0.txt"), str(tmp_path / "b1.txt"),
      str(tmp_path / "a.txt")]


def test_expand_file_patterns_names_flag_and_unmatched_glob(tmp_path):
  pattern = str(tmp_path / "nothing*.txt")
  with pytest.raises(ValueError, match=r"--input_file: .*nothing\*\.txt.* "
                     "matched no files"):
    estimator_utils.expand_file_patterns(pattern, "input_file")
  with pytest.raises(ValueError, match="--train_file: expected"):
    estimator_utils.expand_file_patterns(" , ", "train_file")


def test_check_max_seq_length_names_both_numbers():
  config = modeling.BertConfig(vocab_size=10, max_position_embeddings=64)
  estimator_utils.check_max_seq_length(64, config)
  with pytest.raises(ValueError, match="--max_seq_length=65 .*=64"):
    estimator_utils.check_max_seq_length(65, config)


def test_load_bert_config_errors_name_flag_and_path(tmp_path):
  with pytest.raises(ValueError, match="--bert_config_file is required"):
    estimator_utils.load_bert_config(None)
  missing = str(tmp_path / "missing.json")
  with pytest.raises(ValueError, match="--bert_config_file: .*missing.json "
                     "does not exist"):
    estimator_utils.load_bert_config(missing)


def test_atomic_write_renames_on_success_and_cleans_up_on_error(tmp_path):
  path = str(tmp_path / "out.txt")
  with estimator_utils.atomic_write(path) as f:
    f.write("complete\n")
    assert not os.path.exists(path)
  assert open(path).read() == "complete\n"
  with pytest.raises(RuntimeError):
    with estimator_utils.atomic_write(path) as f:
      f.write("half")
      raise RuntimeError("killed")
  assert open(path).read() == "complete\n"
  assert os.listdir(tmp_path) == ["out.txt"]


def test_atomic_write_of_nothing_leaves_an_empty_file(tmp_path):
  for mode in ("w", "wb"):
    path = str(tmp_path / ("empty-" + mode))
    with estimator_utils.atomic_write(path, mode):
      pass
    assert os.path.getsize(path) == 0


def test_write_eval_results_sorted_key_value_lines(tmp_path):
  path = str(tmp_path / "eval_results.txt")
  estimator_utils.write_eval_results(path, {"loss": 1.5, "global_step": 7,
                                            "eval_accuracy": 0.25})
  assert open(path).read() == ("eval_accuracy = 0.25\nglobal_step = 7\n"
                               "loss = 1.5\n")


def test_resolve_checkpoint_accepts_prefix_or_directory(tmp_path):
  with tf.Graph().as_default():
    tf.get_variable("v", shape=[2])
    saver = tf.train.Saver()
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      prefix = saver.save(sess, str(tmp_path / "model.ckpt"), global_step=3)
  assert estimator_utils.resolve_checkpoint(prefix) == prefix
  assert estimator_utils.resolve_checkpoint(str(tmp_path)) == prefix
  with pytest.raises(ValueError, match="--init_checkpoint: no TensorFlow "
                     "checkpoint"):
    estimator_utils.resolve_checkpoint(str(tmp_path / "nope.ckpt"))
  with pytest.raises(ValueError, match="--init_checkpoint: no TensorFlow"):
    estimator_utils.resolve_checkpoint(None)


def test_decode_record_casts_int64_to_int32():
  example = tf.train.Example(features=tf.train.Features(feature={
      "input_ids": estimator_utils.int64_feature([1, 2, 3]),
      "weights": estimator_utils.float_feature([0.5, 1.0])}))
  with tf.Graph().as_default():
    parsed = estimator_utils.decode_record(
        tf.constant(example.SerializeToString()),
        {"input_ids": tf.FixedLenFeature([3], tf.int64),
         "weights": tf.FixedLenFeature([2], tf.float32)})
    assert parsed["input_ids"].dtype == tf.int32
    assert parsed["weights"].dtype == tf.float32
    with tf.Session() as sess:
      values = sess.run(parsed)
  np.testing.assert_array_equal(values["input_ids"], [1, 2, 3])
  np.testing.assert_allclose(values["weights"], [0.5, 1.0])


def test_tfrecord_input_fn_eval_reads_in_order_and_keeps_last_batch(tmp_path):
  paths = [str(tmp_path / "a.tfrecord"), str(tmp_path / "b.tfrecord")]
  value = 0
  for path in paths:
    with tf.io.TFRecordWriter(path) as writer:
      for _ in range(3):
        writer.write(tf.train.Example(features=tf.train.Features(feature={
            "x": estimator_utils.int64_feature([value])})).SerializeToString())
        value += 1
  input_fn = estimator_utils.tfrecord_input_fn_builder(
      paths, {"x": tf.FixedLenFeature([1], tf.int64)}, is_training=False,
      drop_remainder=False)
  with tf.Graph().as_default():
    batch = tf.data.make_one_shot_iterator(
        input_fn({"batch_size": 4})).get_next()
    with tf.Session() as sess:
      first = sess.run(batch)["x"].ravel().tolist()
      second = sess.run(batch)["x"].ravel().tolist()
  assert first == [0, 1, 2, 3] and second == [4, 5]


def test_run_main_prints_bad_input_as_one_line(tmp_path):
  script = tmp_path / "script.py"
  script.write_text(textwrap.dedent("""
      import sys
      sys.path.insert(0, %r)
      import estimator_utils
      def main(_):
        raise ValueError("--input_file: 'x' matched\\nno files")
      estimator_utils.run_main(main)
  """ % REPO_ROOT))
  env = dict(os.environ)
  env.pop("BERT_DEBUG", None)
  result = subprocess.run([sys.executable, str(script)], capture_output=True,
                          text=True, env=env, timeout=120)
  assert result.returncode == 1
  assert result.stderr.splitlines()[-1] == (
      "error: --input_file: 'x' matched no files")
  assert "Traceback" not in result.stderr


def test_pack_tokens_truncates_longer_side_from_the_end():
  tokens, segment_ids = feature_utils.pack_tokens(
      ["a1", "a2", "a3", "a4"], ["b1", "b2"], 7)
  assert tokens == ["[CLS]", "a1", "a2", "[SEP]", "b1", "b2", "[SEP]"]
  assert segment_ids == [0, 0, 0, 0, 1, 1, 1]
  tokens, _ = feature_utils.pack_tokens(["a1", "a2"], ["b1", "b2"], 6)
  assert tokens == ["[CLS]", "a1", "a2", "[SEP]", "b1", "[SEP]"]
  tokens, segment_ids = feature_utils.pack_tokens(["a1", "a2", "a3"], None, 4)
  assert tokens == ["[CLS]", "a1", "a2", "[SEP]"] and segment_ids == [0] * 4


def test_pad_input_builds_mask():
  ids, mask, segs = feature_utils.pad_input([5, 6], [0, 1], 4)
  assert (ids, mask, segs) == ([5, 6, 0, 0], [1, 1, 0, 0], [0, 1, 0, 0])


def test_fine_tuning_steps_follow_epochs_and_warmup():
  assert estimator_utils.fine_tuning_steps(100, 32, 3.0, 0.1) == (9, 0)
  assert estimator_utils.fine_tuning_steps(3668, 32, 3.0, 0.1) == (343, 34)
  # A training set smaller than one batch still trains one step.
  assert estimator_utils.fine_tuning_steps(5, 32, 1.0, 0.1) == (1, 0)


def test_expand_file_patterns_refuses_a_directory(tmp_path):
  with pytest.raises(ValueError, match="is a directory; expected files"):
    estimator_utils.expand_file_patterns(str(tmp_path), "input_file")


def test_output_paths_that_are_directories_are_refused(tmp_path):
  with pytest.raises(ValueError, match="--output_file: .* is a directory"):
    estimator_utils.check_output_file(str(tmp_path))
  with pytest.raises(ValueError, match="--output_file is required"):
    estimator_utils.check_output_file("")
  estimator_utils.check_output_file(str(tmp_path / "new.txt"))
  with pytest.raises(ValueError, match="is a directory"):
    with estimator_utils.atomic_write(str(tmp_path)):
      pass


class _Vocab(object):

  def __init__(self, size):
    self.vocab = dict.fromkeys(range(size))


def test_check_vocab_size_refuses_ids_past_the_embeddings():
  config = modeling.BertConfig(vocab_size=1000)
  estimator_utils.check_vocab_size(_Vocab(1000), config)
  with pytest.raises(ValueError, match="--vocab_file has 1001 tokens but the "
                     "model's vocab_size is 1000"):
    estimator_utils.check_vocab_size(_Vocab(1001), config)


def test_init_from_checkpoint_refuses_a_checkpoint_without_bert(tmp_path):
  with tf.Graph().as_default():
    tf.get_variable("foo/bar", shape=[2])
    saver = tf.train.Saver()
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      prefix = saver.save(sess, str(tmp_path / "other.ckpt"))
  with tf.Graph().as_default():
    tf.get_variable("bert/embeddings/word_embeddings", shape=[4, 2])
    with pytest.raises(ValueError, match="--init_checkpoint: none of the "
                       "model's 1 variables is in"):
      estimator_utils.init_from_checkpoint(prefix, use_tpu=False)


def test_graph_execution_errors_are_cut_to_their_message():
  error = tf.errors.InvalidArgumentError(
      None, None, "Graph execution error:\n\nDetected at node 'x' defined at "
      "(most recent call last):\n  File \"a.py\", line 1\n    f()\n"
      "indices[1] = 1103 is not in [0, 1000)\n\t [[{{node x}}]]")
  assert estimator_utils._one_line(error) == (
      "indices[1] = 1103 is not in [0, 1000)")
  assert estimator_utils._one_line(ValueError("a\nb")) == "a b"


def test_atomic_write_removes_temp_files_a_killed_run_left(tmp_path):
  path = tmp_path / "out.jsonl"
  stale = tmp_path / ".out.jsonl.tmp-deadbeef"
  stale.write_text("half")
  other = tmp_path / ".other.jsonl.tmp-deadbeef"
  other.write_text("someone else's")
  with estimator_utils.atomic_write(str(path)) as f:
    f.write("done\n")
  assert sorted(os.listdir(tmp_path)) == sorted([other.name, path.name])
