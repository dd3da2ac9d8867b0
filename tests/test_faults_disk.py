"""A full disk: a file-size limit (RLIMIT_FSIZE) set in the child process.

SIGXFSZ is ignored in the child, so a write past the limit fails with EFBIG
as on a full disk (ENOSPC). Each script must stop with one `error:` line
naming the file and saying the limit was hit, leave no partial output under
a final name, and, in training, leave the last good checkpoint loadable and
named by the `checkpoint` state file.
"""

import os

import pytest
import tensorflow.compat.v1 as tf

import fault_helpers as fh
from bert_tf import io as io_utils

pytestmark = pytest.mark.slow

_LIMIT_TEXT = "the disk is full or the file-size limit was reached"


def _assert_disk_error(result, path_part):
  assert result.returncode == 1, result.stderr[-3000:]
  line = fh.last_line(result.stderr)
  assert line.startswith("error: ") and _LIMIT_TEXT in line, line
  assert path_part in line, line
  assert "Traceback" not in result.stderr


def _no_temporaries(folder):
  return [name for name in os.listdir(folder) if ".tmp-" in name]


def test_create_pretraining_data_on_a_full_disk(tmp_path):
  corpus = fh.write_corpus(str(tmp_path / "corpus.txt"), num_documents=30)
  output = str(tmp_path / "out.tfrecord")
  result = fh.run("create_pretraining_data.py", fh.flags(
      input_file=corpus, output_file=output, vocab_file=fh.tiny("vocab.txt"),
      max_seq_length=fh.SEQ, max_predictions_per_seq=fh.PREDS,
      dupe_factor=5), file_size_limit=20000)
  _assert_disk_error(result, "error: %s: write failed" % output)
  assert not os.path.exists(output)
  assert not _no_temporaries(str(tmp_path))


def test_extract_features_on_a_full_disk(tmp_path):
  text = tmp_path / "input.txt"
  text.write_text("".join("the quick brown fox %d ||| jumps over\n" % i
                          for i in range(40)))
  output = str(tmp_path / "features.jsonl")
  result = fh.run("extract_features.py", fh.flags(
      input_file=str(text), output_file=output,
      vocab_file=fh.tiny("vocab.txt"),
      bert_config_file=fh.tiny("bert_config.json"),
      init_checkpoint=fh.tiny_checkpoint(), max_seq_length=fh.SEQ,
      batch_size=8, layers="-1,-2"), file_size_limit=30000)
  _assert_disk_error(result, "error: %s: write failed" % output)
  assert not os.path.exists(output)
  assert not _no_temporaries(str(tmp_path))


def test_convert_checkpoint_on_a_full_disk(tmp_path):
  output = str(tmp_path / "hf")
  result = fh.run("convert_checkpoint.py", fh.flags(
      direction="tf_to_hf",
      input=os.path.dirname(fh.tiny("bert_config.json")), output=output),
      file_size_limit=50000)
  _assert_disk_error(result, output)
  assert not os.path.exists(output)
  assert not _no_temporaries(str(tmp_path))


def test_training_on_a_full_disk_keeps_the_last_good_checkpoint(tmp_path):
  data = fh.write_records(str(tmp_path / "data.tfrecord"), 16)
  output_dir = str(tmp_path / "out")
  first = fh.run("run_pretraining.py", fh.pretraining_flags(
      data, output_dir, num_train_steps=2, save_checkpoints_steps=2))
  assert first.returncode == 0, first.stderr[-3000:]
  good = tf.train.latest_checkpoint(output_dir)
  assert good.endswith("model.ckpt-2")
  # Big enough for the checkpoint's index, too small for its graph and
  # weights.
  second = fh.run("run_pretraining.py", fh.pretraining_flags(
      data, output_dir, num_train_steps=6, save_checkpoints_steps=2),
                  file_size_limit=100000)
  _assert_disk_error(second, output_dir)
  latest = tf.train.latest_checkpoint(output_dir)
  assert latest == good
  reader = tf.train.load_checkpoint(latest)
  for name in reader.get_variable_to_shape_map():
    reader.get_tensor(name)
  # Every checkpoint under its final name is whole.
  for index in tf.io.gfile.glob(os.path.join(output_dir, "*.index")):
    reader = tf.train.load_checkpoint(index[:-len(".index")])
    for name in reader.get_variable_to_shape_map():
      reader.get_tensor(name)


def test_atomic_write_names_the_file_on_a_full_disk(tmp_path):
  path = str(tmp_path / "out.txt")
  # In-process: the errors atomic_path turns into one OSError naming path.
  for error in (OSError(27, "File too large"),
                tf.errors.OutOfRangeError(None, None, "x; File too large")):
    with pytest.raises(OSError, match=r"out\.txt: write failed: " +
                       _LIMIT_TEXT):
      with io_utils.atomic_write(path) as f:
        f.write("partial")
        raise error
    assert not os.path.exists(path)
