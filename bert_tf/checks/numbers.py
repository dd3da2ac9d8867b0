"""The range of every number flag the scripts take, checked at start-up.

`RANGES` holds each integer and float flag once: its bounds, or None for
the few a script checks itself. `flag_problems` turns a value outside its
range into one line (`--train_batch_size=0: expected an integer in [1,
2^31-1]`) before any work; `tests/test_faults_numbers.py` keeps the table
complete.
"""

import collections
import math
import types

__all__ = ["Range", "RANGES", "flag_problems", "check_flags"]

# Range of a number flag: `integer` (else a float), the lowest value (-inf:
# any), whether it is allowed itself, and the highest (inclusive; None: no
# bound but finiteness).
Range = collections.namedtuple("Range", "integer low low_allowed high")

# Tensor dimensions (batch sizes) are int32; step counters int64. A longer
# sequence than 2^20 positions is no BERT (`checks.config`'s bound).
_INT32 = 2 ** 31 - 1
_INT64 = 2 ** 63 - 1
_LENGTH = 2 ** 20


def _int(low, high):
  return Range(True, low, True, high)


def _float(low, low_allowed=True, high=None):
  return Range(False, low, low_allowed, high)


# name -> Range, or None where the script checks the flag itself. Read-only.
RANGES = types.MappingProxyType({
    # The training options' flags, first (in the order of their messages).
    "learning_rate": _float(0.0),
    "num_train_epochs": _float(0.0, low_allowed=False),
    "warmup_proportion": _float(0.0, high=1.0),
    "num_train_steps": _int(1, _INT64),
    "num_warmup_steps": _int(0, _INT64),
    "save_checkpoints_steps": _int(1, _INT64),
    "save_checkpoints_secs": _int(0, _INT64),
    "iterations_per_loop": _int(1, _INT32),
    # SQuAD 2.0's null-answer margin: any finite number.
    "null_score_diff_threshold": _float(float("-inf")),
    # Sizes of a step.
    "train_batch_size": _int(1, _INT32),
    "eval_batch_size": _int(1, _INT32),
    "predict_batch_size": _int(1, _INT32),
    "batch_size": _int(1, _INT32),
    "gradient_accumulation_steps": _int(1, _INT32),
    # Lengths, in WordPiece tokens; run_squad.py also checks the query and
    # the document fit in --max_seq_length.
    "max_seq_length": _int(3, _LENGTH),
    "max_predictions_per_seq": _int(1, _LENGTH),
    "doc_stride": _int(1, _LENGTH),
    "max_examples_per_row": _int(1, 4096),
    "max_query_length": _int(1, _LENGTH),
    "max_answer_length": _int(1, _LENGTH),
    "n_best_size": _int(1, _INT32),
    "top_k": _int(1, _INT32),
    # Steps, rates.
    "poly_power": _float(0.0, low_allowed=False),
    "max_eval_steps": _int(1, _INT64),
    "eval_every_steps": _int(1, _INT64),
    "early_stopping_patience": _int(1, _INT64),
    # Devices and workers.
    "num_tpu_cores": _int(1, 65536),
    "num_gpus": _int(0, 65536),
    "num_cpu_devices": _int(0, 65536),
    "worker_timeout_secs": _int(1, _INT32),
    "num_workers": _int(1, 65536),
    "num_shards": _int(0, 65536),
    "random_seed": _int(-_INT64 - 1, _INT64),
    # Data.
    "label_column": _int(-_INT32 - 1, _INT32),
    "text_a_column": _int(0, _INT32),
    "text_b_column": _int(0, _INT32),
    "dupe_factor": _int(1, _INT32),
    "vocab_size": _int(1, 10 ** 7),
    "num_unused": _int(0, 10 ** 7),
    "min_frequency": _int(0, _INT64),
    # Checked by their script, with their own reason: probabilities
    # (create_pretraining_data.py) and a threshold in (0, 1)
    # (run_classifier.py).
    "masked_lm_prob": None,
    "short_seq_prob": None,
    "multi_label_threshold": None,
})


# Bounds printed as powers of two.
_BOUND_NAMES = {_INT32: "2^31-1", _INT64: "2^63-1", -_INT32 - 1: "-2^31",
                -_INT64 - 1: "-2^63", _LENGTH: "2^20"}


def _expected(rule):
  """What a flag of `rule` takes, in words."""
  if rule.integer:
    return "an integer in [%s, %s]" % tuple(
        _BOUND_NAMES.get(bound, str(bound)) for bound in (rule.low,
                                                          rule.high))
  if rule.high is not None:
    return "a number in [%s, %s]" % (rule.low, rule.high)
  if rule.low == float("-inf"):
    return "a finite number"
  return "a finite number %s %s" % (">=" if rule.low_allowed else ">",
                                    rule.low)


def _in_range(value, rule):
  if isinstance(value, float) and not math.isfinite(value):
    return False
  if value < rule.low or (value == rule.low and not rule.low_allowed):
    return False
  return rule.high is None or value <= rule.high


def flag_problems(flag_values, names=None):
  """One-line messages (`--name=value: expected ...`, in `RANGES` order)
  for the flags of `names` (default: all) outside their range; undefined,
  unset (None) and self-checked flags are skipped."""
  wanted = RANGES if names is None else set(names)
  problems = []
  for name, rule in RANGES.items():
    if rule is None or name not in wanted:
      continue
    value = getattr(flag_values, name, None)
    if value is None or isinstance(value, bool):
      continue
    if not _in_range(value, rule):
      problems.append("--%s=%s: expected %s" % (name, value,
                                                _expected(rule)))
  return problems


def check_flags(flag_values, names=None):
  """`flag_problems` for the scripts without the training options' checks,
  after their own.

  Raises:
    ValueError: every problem, joined by "; ".
  """
  problems = flag_problems(flag_values, names)
  if problems:
    raise ValueError("; ".join(problems))
