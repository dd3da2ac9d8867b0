"""Every number flag of every script has a range, checked at start-up.

`--train_batch_size=0` passed the flag checks and ended in `error: None
values not supported.` after training began; `-4` was refused for the wrong
reason. `bert_tf.checks.numbers.RANGES` now holds a row for each integer
and float flag of every script (kept complete by the first test), and a
value outside it is one line before any work.
"""

import json
import os
import subprocess
import sys

import pytest

import fault_helpers as fh
from helpers import REPO_ROOT
from bert_tf.checks import numbers
from bert_tf.checks.problems import Problems
from bert_tf.train import distribute as distribute_utils
from bert_tf.train import options as training_options

SCRIPTS = ("run_pretraining", "run_classifier", "run_squad", "run_ner",
           "extract_features", "create_pretraining_data", "predict_masked_lm",
           "predict_saved_model", "convert_checkpoint", "learn_vocab",
           "prepare_corpus")

# Defines each script's flags in turn (then deletes them, so the next can
# define its own) and prints {script: {flag: default}} of the number flags
# it defines (not absl's or TensorFlow's, which importing it may add).
_LIST_NUMBER_FLAGS = """
import importlib, json, sys
from absl import flags
found = {}
for name in sys.argv[1:]:
  before = set(flags.FLAGS)
  importlib.import_module(name).define_flags()
  added = sorted(set(flags.FLAGS) - before)
  found[name] = {
      f: flags.FLAGS[f].default for f in added
      if flags.FLAGS[f].flag_type() in ("int", "float") and
      flags.FLAGS.find_module_defining_flag(f).split(".")[0] in (name,
                                                                 "bert_tf")}
  for f in added:
    delattr(flags.FLAGS, f)
print(json.dumps(found))
"""


@pytest.fixture(scope="module")
def number_flags():
  result = subprocess.run(
      [sys.executable, "-c", _LIST_NUMBER_FLAGS] + list(SCRIPTS),
      cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
      env=fh.env(TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=REPO_ROOT))
  assert result.returncode == 0, result.stderr[-3000:]
  return json.loads(result.stdout.strip().splitlines()[-1])


def test_every_number_flag_of_every_script_has_a_range(number_flags):
  missing = sorted("%s --%s" % (script, name)
                   for script, found in number_flags.items()
                   for name in found if name not in numbers.RANGES)
  assert not missing, missing
  assert "train_batch_size" in number_flags["run_pretraining"]


def test_every_scripts_defaults_are_in_range(number_flags):
  for script, found in number_flags.items():
    values = type("Flags", (), found)()
    assert numbers.flag_problems(values) == [], script


@pytest.mark.parametrize("name, value, expected", [
    ("train_batch_size", 0, "--train_batch_size=0: expected an integer in "
     "[1, 2^31-1]"),
    ("train_batch_size", -4, "--train_batch_size=-4: expected an integer in "
     "[1, 2^31-1]"),
    ("eval_batch_size", 2 ** 40, "--eval_batch_size=1099511627776: expected "
     "an integer in [1, 2^31-1]"),
    ("max_seq_length", 10 ** 12, "--max_seq_length=1000000000000: expected "
     "an integer in [3, 2^20]"),
    ("doc_stride", 0, "--doc_stride=0: expected an integer in [1, 2^20]"),
    ("max_query_length", -5, "--max_query_length=-5: expected an integer in "
     "[1, 2^20]"),
    ("num_tpu_cores", 0, "--num_tpu_cores=0: expected an integer in "
     "[1, 65536]"),
    ("max_eval_steps", 0, "--max_eval_steps=0: expected an integer in "
     "[1, 2^63-1]"),
    ("num_train_steps", 2 ** 64, "--num_train_steps=18446744073709551616: "
     "expected an integer in [1, 2^63-1]"),
    ("learning_rate", float("nan"), "--learning_rate=nan: expected a finite "
     "number >= 0.0"),
    ("num_train_epochs", 0.0, "--num_train_epochs=0.0: expected a finite "
     "number > 0.0"),
    ("warmup_proportion", 1.5, "--warmup_proportion=1.5: expected a number "
     "in [0.0, 1.0]"),
    ("top_k", 0, "--top_k=0: expected an integer in [1, 2^31-1]"),
    ("vocab_size", 0, "--vocab_size=0: expected an integer in [1, "
     "10000000]"),
])
def test_a_value_out_of_range_is_named_with_its_range(name, value, expected):
  assert numbers.flag_problems(type("Flags", (), {name: value})()) == [
      expected]


def test_unset_optional_and_undefined_flags_are_skipped():
  values = type("Flags", (), {"doc_stride": None, "eval_every_steps": None,
                              "random_seed": None})()
  assert numbers.flag_problems(values) == []


def test_a_flag_already_refused_by_another_check_is_named_once():
  problems = Problems(["--train_batch_size=0: expected at least 1"])
  problems.extend_unnamed(["--train_batch_size=0: expected an integer in "
                           "[1, 2^31-1]", "--top_k=0: expected ..."])
  assert problems.lines == ["--train_batch_size=0: expected at least 1",
                            "--top_k=0: expected ..."]


def test_a_negative_global_batch_under_a_strategy_gets_the_right_reason():
  with pytest.raises(ValueError) as raised:
    distribute_utils.check_global_batch(-4, 2, "train_batch_size")
  assert str(raised.value) == ("--train_batch_size=-4: expected an integer "
                               ">= 1 (the global batch, all replicas "
                               "together)")


def test_training_options_report_the_batch_sizes():
  values = type("Flags", (), {"train_batch_size": 0, "eval_batch_size": -4,
                              "learning_rate": 5e-5})()
  assert training_options.number_flag_problems(values) == [
      "--train_batch_size=0: expected an integer in [1, 2^31-1]",
      "--eval_batch_size=-4: expected an integer in [1, 2^31-1]"]


def test_run_pretraining_refuses_bad_batch_sizes_before_any_work(tmp_path):
  data = fh.write_records(str(tmp_path / "data.tfrecord"), 4)
  out = tmp_path / "out"
  result = fh.run("run_pretraining.py", fh.pretraining_flags(
      data, out, train_batch_size=0, eval_batch_size=-4, do_eval=True),
                  timeout=300)
  assert result.returncode == 1, result.stderr[-3000:]
  assert fh.last_line(result.stderr) == (
      "error: --train_batch_size=0: expected an integer in [1, 2^31-1]; "
      "--eval_batch_size=-4: expected an integer in [1, 2^31-1]")
  assert not os.path.exists(str(out))
