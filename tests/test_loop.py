"""bert_tf/runner/loop.py: the one sequence every training script runs.

In process, on a one-weight linear model through the session runner (both
runners are proven equal in test_runners.py): the order of the steps, the
checkpoint that prediction and export get, the lock, and a diverged run's
one line.
"""

import os

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from bert_tf.checks.problems import Problems
from bert_tf.runner import loop
from bert_tf.train import model_fn as model_fn_utils
from bert_tf.train import options as training_options
from bert_tf.train import spec as spec_lib


def _model_fn(features, labels, mode, params):
  del labels, params
  w = tf.get_variable("w", [], initializer=tf.zeros_initializer())
  loss = tf.reduce_mean(tf.square(w * features["x"] - 2.0 * features["x"]))
  if mode == spec_lib.ModeKeys.TRAIN:  # The scripts' train op: AdamW.
    return model_fn_utils.train_spec(loss, 0.01, 6, 0, use_tpu=False)
  if mode == spec_lib.ModeKeys.EVAL:
    return spec_lib.model_spec(mode=mode, loss=loss)
  return spec_lib.model_spec(mode=mode, predictions={"p": w * features["x"]})


def _input_fn(values, repeat=False):
  def input_fn(params):
    data = tf.data.Dataset.from_tensor_slices(
        {"x": np.asarray(values, np.float32)})
    return (data.repeat() if repeat else data).batch(params["batch_size"])
  return input_fn


def _run(**fields):
  base = dict(tpu=training_options.TpuOptions(runner="session"),
              train_batch_size=1, save_checkpoints_steps=1,
              save_checkpoints_secs=0, do_train=True)
  base.update(fields)
  return training_options.RunOptions(**base)


def test_train_evaluate_predict_export_in_order_with_the_best_checkpoint(
    tmp_path):
  out = str(tmp_path)
  calls = []
  run = _run(do_eval=True, do_predict=True,
             evaluation=training_options.EvalOptions(
                 eval_every_steps=2, keep_best_by="loss"))

  def evaluate(steps):
    calls.append("evaluate")
    return steps.evaluate(_input_fn([1.0, 2.0]))

  def predict(steps, checkpoint):
    calls.append(("predict", os.path.basename(checkpoint)))
    assert len(list(steps.predict(_input_fn([1.0]), checkpoint_path=checkpoint,
                                  num_batches=1))) == 1

  def export(checkpoint):
    calls.append(("export", os.path.basename(checkpoint)))

  with loop.output_dir(out, run):
    assert os.path.exists(os.path.join(out, ".lock"))
    results = loop.run(
        _model_fn, run, out,
        training=loop.Training(_input_fn([1.0], repeat=True),
                               num_train_steps=4),
        evaluate=evaluate, predict=predict, export=export,
        eval_batch_size=2, predict_batch_size=1)
  # Evaluated at steps 2 and 4 while training; the last evaluation is of the
  # final checkpoint, so it is not repeated for eval_results.txt.
  assert calls == ["evaluate", "evaluate", ("predict", "model.ckpt-4"),
                   ("export", "model.ckpt-4")]
  assert int(results["global_step"]) == 4
  with open(os.path.join(out, "eval_results.txt")) as f:
    assert "global_step = 4" in f.read()


def test_a_diverged_run_is_one_line_and_keeps_only_finite_checkpoints(
    tmp_path):
  out = str(tmp_path)
  run = _run()
  # The third example makes the loss NaN at step 3, which is saved (the
  # checkpoint hook runs before the NaN check) and then removed.
  training = loop.Training(_input_fn([1.0, 1.0, np.nan], repeat=True),
                           num_train_steps=6, learning_rate=0.01)
  with pytest.raises(loop.DivergedError) as info:
    with loop.output_dir(out, run):
      loop.run(_model_fn, run, out, training=training)
  message = str(info.value)
  # Step 3 ran with the rate of step 2: 0.01 * (1 - 2 / 6).
  assert message.startswith(
      "the loss became NaN at step 3 (learning rate 0.00667); removed "
      "model.ckpt-3 (w is not finite); the last checkpoint with sane weights "
      "is %s" % os.path.join(out, "model.ckpt-2")), message
  assert message.endswith("rerun the same command to resume from it")
  assert "\n" not in message and "lower --learning_rate" in message
  assert tf.train.latest_checkpoint(out).endswith("model.ckpt-2")
  assert not tf.io.gfile.glob(os.path.join(out, "model.ckpt-3*"))


def test_the_lock_is_held_only_while_training(tmp_path):
  out = str(tmp_path / "out")
  with loop.output_dir(out, _run(do_train=False)):
    assert not os.path.exists(os.path.join(out, ".lock"))
  with loop.output_dir(out, _run()):
    with pytest.raises(ValueError, match="in use by another training run"):
      with loop.output_dir(out, _run()):
        pass
  with loop.output_dir(out, _run()):  # Released at the end of the block.
    pass


@pytest.mark.parametrize("do_train", [True, False])
def test_a_failed_start_leaves_no_folder_it_made(tmp_path, do_train):
  top = tmp_path / "new"
  with pytest.raises(ValueError, match="bad input"):
    with loop.output_dir(str(top / "out"), _run(do_train=do_train)):
      raise ValueError("bad input")
  assert not top.exists()
  # A folder that was there, or one holding a file, stays.
  (top / "out").mkdir(parents=True)
  with pytest.raises(ValueError):
    with loop.output_dir(str(top / "out"), _run(do_train=do_train)):
      raise ValueError("bad input")
  assert (top / "out").is_dir()
  with pytest.raises(ValueError):
    with loop.output_dir(str(tmp_path / "kept"), _run(do_train=do_train)):
      (tmp_path / "kept" / "train.tf_record").write_bytes(b"")
      raise ValueError("bad input")
  assert (tmp_path / "kept" / "train.tf_record").exists()


def test_number_flags_are_refused_with_the_other_problems():
  class Flags(object):
    learning_rate = float("nan")
    num_train_epochs = -1.0
    train_batch_size = 8

  problems = Problems()
  training_options.from_flags(Flags(), problems)
  assert problems.lines == [
      "--learning_rate=nan: expected a finite number >= 0.0",
      "--num_train_epochs=-1.0: expected a finite number > 0.0"]
