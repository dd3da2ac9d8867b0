"""Tests for run_pretraining.py: heads vs golden vectors, end-to-end runs."""

import json
import os

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from helpers import data_path
from helpers import run_script
from bert_tf import io as io_utils
from bert_tf.tasks.pretraining import heads
from bert_tf.train import model_fn as model_fn_utils
import modeling
import run_pretraining
from bert_tf.checks.problems import Problems

_SEQ = 16
_PREDS = 4


def _conformance(name):
  return data_path("conformance", "modeling", name)


def _checkpoint():
  return os.path.join(os.path.dirname(_conformance("variables.json")),
                      "bert_model.ckpt")


# ---------------------------------------------------------------------------
# Heads.
# ---------------------------------------------------------------------------


def test_heads_match_reference_outputs_and_checkpoint_names():
  inputs = np.load(_conformance("inputs.npz"))
  expected = np.load(_conformance("expected.npz"))
  with open(_conformance("variables.json")) as f:
    expected_vars = {v["name"]: v["shape"] for v in json.load(f)}
  with tf.Graph().as_default():
    config = modeling.BertConfig.from_json_file(
        _conformance("bert_config.json"))
    model = modeling.BertModel(
        config, is_training=False, input_ids=tf.constant(inputs["input_ids"]),
        input_mask=tf.constant(inputs["input_mask"]),
        token_type_ids=tf.constant(inputs["token_type_ids"]))
    mlm = run_pretraining.get_masked_lm_output(
        config, model.get_sequence_output(), model.get_embedding_table(),
        tf.constant(inputs["masked_lm_positions"]),
        tf.constant(inputs["masked_lm_ids"]),
        tf.constant(inputs["masked_lm_weights"]))
    nsp = run_pretraining.get_next_sentence_output(
        config, model.get_pooled_output(),
        tf.constant(inputs["next_sentence_labels"]))
    actual_vars = {v.op.name: v.shape.as_list() for v in tf.global_variables()}
    assignment_map, _ = modeling.get_assignment_map_from_checkpoint(
        tf.trainable_variables(), _checkpoint())
    tf.train.init_from_checkpoint(_checkpoint(), assignment_map)
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      mlm_values, nsp_values, total = sess.run([mlm, nsp, mlm[0] + nsp[0]])
  mlm_loss, mlm_example, mlm_log_probs = mlm_values
  nsp_loss, nsp_example, nsp_log_probs = nsp_values
  assert actual_vars == expected_vars and len(actual_vars) == 46
  np.testing.assert_allclose(mlm_log_probs, expected["masked_lm_log_probs"],
                             atol=1e-5, rtol=0)
  np.testing.assert_allclose(nsp_log_probs,
                             expected["next_sentence_log_probs"], atol=1e-5,
                             rtol=0)
  for name, value in [("masked_lm_example_loss", mlm_example),
                      ("masked_lm_loss", mlm_loss),
                      ("next_sentence_example_loss", nsp_example),
                      ("next_sentence_loss", nsp_loss),
                      ("total_loss", total)]:
    np.testing.assert_allclose(value, expected[name], rtol=1e-5, err_msg=name)


def test_gather_indexes_picks_rows_batch_major():
  with tf.Graph().as_default():
    sequence = tf.reshape(tf.range(2 * 3 * 2, dtype=tf.float32), [2, 3, 2])
    picked = run_pretraining.gather_indexes(sequence,
                                            tf.constant([[2, 0], [1, 1]]))
    with tf.Session() as sess:
      value = sess.run(picked)
  np.testing.assert_array_equal(value, [[4, 5], [0, 1], [8, 9], [8, 9]])


# ---------------------------------------------------------------------------
# Input checks (in process).
# ---------------------------------------------------------------------------


def _write_records(path, num_examples, seq_length=_SEQ, preds=_PREDS, seed=0,
                   uneven=False):
  """Random pre-training records in create_pretraining_data.py's layout.

  Record i has preds - 1 masked tokens, or with `uneven` 1 + i % (preds - 1)
  (the rest of the slots padding), as short documents have fewer.
  """
  rng = np.random.RandomState(seed)
  with tf.io.TFRecordWriter(path) as writer:
    for index in range(num_examples):
      length = rng.randint(6, seq_length + 1)
      ids = [101] + list(rng.randint(104, 1000, size=length - 2)) + [102]
      ids += [0] * (seq_length - length)
      mask = [1] * length + [0] * (seq_length - length)
      segments = [0] * (length // 2) + [1] * (seq_length - length // 2)
      segments = [s * m for s, m in zip(segments, mask)]
      positions = sorted(rng.choice(range(1, length - 1), size=preds - 1,
                                    replace=False))
      label_ids = [ids[p] for p in positions]
      real = 1 + index % (preds - 1) if uneven else preds - 1
      positions = list(positions[:real]) + [0] * (preds - 1 - real)
      label_ids = label_ids[:real] + [0] * (preds - 1 - real)
      features = {
          "input_ids": io_utils.int64_feature(ids),
          "input_mask": io_utils.int64_feature(mask),
          "segment_ids": io_utils.int64_feature(segments),
          "masked_lm_positions": io_utils.int64_feature(
              list(positions) + [0]),
          "masked_lm_ids": io_utils.int64_feature(label_ids + [0]),
          "masked_lm_weights": io_utils.float_feature(
              [1.0] * real + [0.0] * (preds - real)),
          "next_sentence_labels": io_utils.int64_feature(
              [rng.randint(0, 2)]),
      }
      example = tf.train.Example(features=tf.train.Features(feature=features))
      writer.write(example.SerializeToString())
  return path


def test_check_record_lengths_names_file_feature_and_flag(tmp_path):
  path = _write_records(str(tmp_path / "short.tfrecord"), 2, seq_length=8)
  with pytest.raises(ValueError) as info:
    run_pretraining.check_record_lengths([path], 16, _PREDS)
  message = str(info.value)
  assert "short.tfrecord" in message and "input_ids" in message
  assert "length 8" in message and "--max_seq_length=16" in message
  with pytest.raises(ValueError, match="masked_lm_positions of length 4.*"
                     "--max_predictions_per_seq=20"):
    run_pretraining.check_record_lengths([path], 8, 20)
  run_pretraining.check_record_lengths([path], 8, _PREDS)


def test_check_record_lengths_rejects_non_tfrecord(tmp_path):
  path = tmp_path / "text.txt"
  path.write_text("this is not a tfrecord file\n" * 10)
  with pytest.raises(ValueError, match="text.txt is not a TFRecord"):
    run_pretraining.check_record_lengths([str(path)], 16, _PREDS)


def test_check_record_lengths_refuses_inputs_without_records(tmp_path):
  # Training on nothing used to loop forever over an empty dataset.
  empty = tmp_path / "empty.tfrecord"
  empty.write_bytes(b"")
  with pytest.raises(ValueError, match=r"--input_file: .*empty.tfrecord holds "
                     "no records"):
    run_pretraining.check_record_lengths([str(empty)], 16, _PREDS)
  # One empty shard among others is only a warning.
  path = _write_records(str(tmp_path / "full.tfrecord"), 2, seq_length=16)
  run_pretraining.check_record_lengths([str(empty), path], 16, _PREDS)


def _batch_sizes(input_fn, batch_size, max_batches):
  with tf.Graph().as_default():
    batch = tf.data.make_one_shot_iterator(
        input_fn({"batch_size": batch_size})).get_next()
    sizes = []
    with tf.Session() as sess:
      for _ in range(max_batches):
        try:
          sizes.append(len(sess.run(batch["input_ids"])))
        except tf.errors.OutOfRangeError:
          break
  return sizes


def test_eval_input_keeps_last_batch_off_tpu_and_repeats_on_tpu(tmp_path):
  path = _write_records(str(tmp_path / "eval.tfrecord"), 3)
  off_tpu = run_pretraining.input_fn_builder([path], _SEQ, _PREDS,
                                             is_training=False)
  assert _batch_sizes(off_tpu, 2, 5) == [2, 1]
  on_tpu = run_pretraining.input_fn_builder([path], _SEQ, _PREDS,
                                            is_training=False, use_tpu=True)
  assert _batch_sizes(on_tpu, 2, 5) == [2, 2, 2, 2, 2]


def _check(tmp_path, **overrides):
  params = dict(bert_config_file=_conformance("bert_config.json"),
                input_file=_write_records(str(tmp_path / "d.tfrecord"), 2),
                output_dir=str(tmp_path / "out"), init_checkpoint=None,
                max_seq_length=_SEQ, max_predictions_per_seq=_PREDS,
                do_train=True, do_eval=False)
  params.update(overrides)
  problems = Problems()
  found = run_pretraining.check_inputs(problems=problems, **params)
  problems.raise_if_any()
  return found


def test_check_inputs_missing_bert_config_file(tmp_path):
  with pytest.raises(ValueError, match="--bert_config_file is required"):
    _check(tmp_path, bert_config_file=None)
  missing = str(tmp_path / "nowhere" / "bert_config.json")
  with pytest.raises(ValueError, match="--bert_config_file.*nowhere"):
    _check(tmp_path, bert_config_file=missing)


def test_check_inputs_max_seq_length_above_position_embeddings(tmp_path):
  with pytest.raises(ValueError, match="--max_seq_length=128.*=64"):
    _check(tmp_path, max_seq_length=128)


def test_check_inputs_other_flags(tmp_path):
  with pytest.raises(ValueError, match="--do_train or --do_eval"):
    _check(tmp_path, do_train=False)
  with pytest.raises(ValueError, match="--input_file.*matched no files"):
    _check(tmp_path, input_file=str(tmp_path / "none*.tfrecord"))
  with pytest.raises(ValueError, match="--init_checkpoint"):
    _check(tmp_path, init_checkpoint=str(tmp_path / "no.ckpt"))
  config, files, checkpoint = _check(tmp_path,
                                     init_checkpoint=_checkpoint())
  assert config.hidden_size == 32 and len(files) == 1
  assert checkpoint == _checkpoint()


# ---------------------------------------------------------------------------
# End to end (subprocess: absl flags are process-global).
# ---------------------------------------------------------------------------


def _run(args, timeout=240):
  return run_script("run_pretraining.py", args, timeout=timeout,
                    env={"TF_CPP_MIN_LOG_LEVEL": "2",
                         "CUDA_VISIBLE_DEVICES": ""})


def _flags(data, output_dir, **overrides):
  flags = dict(bert_config_file=_conformance("bert_config.json"),
               input_file=data, output_dir=output_dir,
               init_checkpoint=_checkpoint(), max_seq_length=_SEQ,
               max_predictions_per_seq=_PREDS, train_batch_size=4,
               eval_batch_size=4, learning_rate=0.05, num_warmup_steps=0,
               save_checkpoints_steps=2, iterations_per_loop=2,
               max_eval_steps=3)
  flags.update(overrides)
  return ["--%s=%s" % item for item in flags.items()]


def _variable(checkpoint, name):
  return tf.train.load_variable(checkpoint, name)


@pytest.mark.e2e
@pytest.mark.slow
def test_train_eval_then_resume(tmp_path):
  data = _write_records(str(tmp_path / "a.tfrecord"), 12, seed=1)
  data_glob = str(tmp_path / "*.tfrecord")
  _write_records(str(tmp_path / "b.tfrecord"), 8, seed=2)
  output_dir = str(tmp_path / "out")

  first = _run(_flags(data_glob, output_dir, do_train=True, do_eval=True,
                      num_train_steps=4))
  assert first.returncode == 0, first.stderr[-3000:]
  with open(os.path.join(output_dir, "eval_results.txt")) as f:
    results = dict(line.strip().split(" = ") for line in f)
  assert sorted(results) == [
      "global_step", "loss", "masked_lm_accuracy", "masked_lm_loss",
      "next_sentence_accuracy", "next_sentence_loss"]
  assert int(results["global_step"]) == 4
  for key in results:
    assert np.isfinite(float(results[key])), key
  assert "examples/sec, ETA" in first.stderr  # ProgressHook.
  step_4 = tf.train.latest_checkpoint(output_dir)
  assert step_4.endswith("model.ckpt-4")
  _assert_learning_rate_summary(output_dir)

  # Restart with more steps: continues from step 4, init_checkpoint ignored;
  # on fewer input files, whose pipeline cannot take the saved position.
  second = _run(_flags(data, output_dir, do_train=True, num_train_steps=6))
  assert second.returncode == 0, second.stderr[-3000:]
  assert ("its input position does not fit this run's input pipeline"
          in second.stderr), second.stderr[-3000:]
  step_6 = tf.train.latest_checkpoint(output_dir)
  assert step_6.endswith("model.ckpt-6")
  assert _variable(step_6, "global_step") == 6
  name = "bert/embeddings/LayerNorm/gamma"
  initial, at_4, at_6 = (_variable(c, name)
                         for c in (_checkpoint(), step_4, step_6))
  # Two more steps from step 4 (resumed), not two steps from the initial
  # checkpoint (re-initialized): step 0 has rate 0, so run one moved 3 steps.
  assert np.linalg.norm(at_6 - at_4) < np.linalg.norm(at_6 - initial)
  assert not np.allclose(at_6, at_4)


def _assert_learning_rate_summary(output_dir):
  tags = set()
  for path in tf.io.gfile.glob(os.path.join(output_dir, "events.out.*")):
    for event in tf.train.summary_iterator(path):
      tags.update(value.tag for value in event.summary.value)
  assert "learning_rate" in tags and "loss" in tags, tags


@pytest.mark.slow
def test_wrong_record_length_is_a_one_line_error(tmp_path):
  data = _write_records(str(tmp_path / "long.tfrecord"), 2, seq_length=32)
  result = _run(_flags(data, str(tmp_path / "out"), do_train=True,
                       num_train_steps=1))
  assert result.returncode == 1
  last_line = result.stderr.strip().splitlines()[-1]
  assert last_line.startswith("error: ")
  assert "long.tfrecord" in last_line and "input_ids" in last_line
  assert "length 32" in last_line and "--max_seq_length=16" in last_line
  assert "Traceback" not in result.stderr


def test_check_inputs_refuses_dynamic_masking_on_tpu(tmp_path):
  with pytest.raises(ValueError, match="--dynamic_masking.*--use_tpu"):
    _check(tmp_path, dynamic_masking=True, use_tpu=True)


def test_check_inputs_refuses_training_for_zero_steps(tmp_path):
  with pytest.raises(ValueError, match="--num_train_steps=0: expected at "
                     "least 1"):
    _check(tmp_path, num_train_steps=0)
  _check(tmp_path, num_train_steps=0, do_train=False, do_eval=True)


@pytest.mark.parametrize("next_sentence", [True, False])
def test_pretraining_heads_combine_losses_and_metrics(next_sentence):
  # The heads as values: pre-training is their sum; without the
  # next-sentence head, its variables and metrics are gone.
  config = modeling.BertConfig.from_json_file(_conformance("bert_config.json"))
  inputs = np.load(_conformance("inputs.npz"))
  features = {"input_ids": inputs["input_ids"],
              "input_mask": inputs["input_mask"],
              "segment_ids": inputs["token_type_ids"],
              "masked_lm_positions": inputs["masked_lm_positions"],
              "masked_lm_ids": inputs["masked_lm_ids"],
              "masked_lm_weights": inputs["masked_lm_weights"],
              "next_sentence_labels": inputs["next_sentence_labels"]}
  with tf.Graph().as_default():
    model_fn = model_fn_utils.build_model_fn(
        heads.pretraining_head(config, next_sentence), config, None,
        use_tpu=False, use_one_hot_embeddings=False)
    spec = model_fn({k: tf.constant(v) for k, v in features.items()}, None,
                    "eval", {})
    metric_fn, tensors = spec.eval_metrics
    keys = set(metric_fn(*tensors))
    names = {v.op.name for v in tf.global_variables()}
  expected = {"masked_lm_accuracy", "masked_lm_loss"}
  if next_sentence:
    expected |= {"next_sentence_accuracy", "next_sentence_loss"}
  assert keys == expected
  assert ("cls/seq_relationship/output_weights" in names) == next_sentence
  assert "cls/predictions/output_bias" in names
