"""Model configs at start-up: null activations, and the memory a run needs.

`"hidden_act": null` is the reference's linear activation (its
`get_activation` returns None); the start-up memory check counts what
training holds (weights, optimizer slots, accumulation buffers) against the
machine's memory and the process's address-space limit.
"""

import json
import re
import resource
import subprocess
import sys

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import fault_helpers as fh
from helpers import REPO_ROOT
from bert_tf.checks import config as config_checks
from bert_tf.cli import startup
import modeling


def _tiny_config():
  with open(fh.tiny("bert_config.json")) as f:
    return json.load(f)


def _sequence_output(config_dict):
  config = modeling.BertConfig.from_dict(config_dict)
  with tf.Graph().as_default() as graph:
    graph.seed = 1
    ids = tf.constant([[5, 6, 7, 0]], tf.int32)
    model = modeling.BertModel(config, is_training=False, input_ids=ids)
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      return session.run(model.get_sequence_output())


def test_null_hidden_act_is_linear_as_in_the_reference(tmp_path):
  config = dict(_tiny_config(), hidden_act=None)
  path = tmp_path / "bert_config.json"
  path.write_text(json.dumps(config))
  loaded = startup.load_bert_config(str(path))
  assert loaded.hidden_act is None
  assert modeling.get_activation(None) is None
  null = _sequence_output(config)
  linear = _sequence_output(dict(config, hidden_act="linear"))
  gelu = _sequence_output(dict(config, hidden_act="gelu"))
  np.testing.assert_array_equal(null, linear)
  assert not np.allclose(null, gelu)


@pytest.mark.parametrize("value", [3, True, ["gelu"], {"name": "gelu"}])
def test_a_hidden_act_neither_a_name_nor_null_is_refused(tmp_path, value):
  path = tmp_path / "bert_config.json"
  path.write_text(json.dumps(dict(_tiny_config(), hidden_act=value)))
  with pytest.raises(ValueError, match=r"'hidden_act' is .*; expected an "
                     r"activation name such as \"gelu\", or null for none "
                     r"\(linear\)"):
    startup.load_bert_config(str(path))
  config_checks.check_bert_config_json(dict(_tiny_config(), hidden_act=None),
                                       str(path))


# ---------------------------------------------------------------------------
# Memory: weights, optimizer slots and accumulation buffers.


def test_training_copies_count_the_slots_and_the_accumulation_buffer():
  assert config_checks.training_copies("adamw", 1) == (
      3, "the weight and AdamW's 2 slots")
  assert config_checks.training_copies("lamb", 4) == (
      4, "the weight, LAMB's 2 slots and a gradient-accumulation buffer")


def test_weights_that_fit_but_not_with_their_slots_are_refused():
  config = _tiny_config()
  count = config_checks.parameter_count(config)
  memory = 4 * count * 2  # Room for the weights twice, not three times.
  assert config_checks.memory_problem(config, memory_bytes=memory) is None
  message = config_checks.memory_problem(
      config, memory_bytes=memory,
      copies=config_checks.training_copies("adamw", 1))
  assert message.startswith(
      "the model has %d parameters: training holds 3 float32 copies of each "
      "(the weight and AdamW's 2 slots): " % count), message


def test_the_address_space_limit_is_counted(monkeypatch):
  config = _tiny_config()
  count = config_checks.parameter_count(config)
  monkeypatch.setattr(config_checks, "_machine_memory",
                      lambda: (2 ** 40, 2 ** 40))
  monkeypatch.setattr(config_checks, "_address_space",
                      lambda: (2 ** 30 + 8 * count, 2 ** 30))
  assert config_checks.memory_problem(config) is None  # 4 bytes a weight.
  message = config_checks.memory_problem(
      config, copies=config_checks.training_copies("adamw", 1))
  assert ("but this process may map only 0.0 GiB more (its address-space "
          "limit, RLIMIT_AS or ulimit -v, is 1.0 GiB and 1.0 GiB are "
          "mapped); raise the limit or check the sizes") in message, message
  monkeypatch.setattr(config_checks, "_machine_memory",
                      lambda: (2 ** 40, 4 * count))
  assert "(0.0 GiB available)" in config_checks.memory_problem(
      config, copies=(2, "the weight and a slot"))


def _limit_address_space(limit):
  def preexec():
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
  return preexec


def test_training_beyond_the_address_space_limit_is_refused_at_start_up(
    tmp_path):
  # 350 M parameters: 1.3 GiB of weights fit in the 4.5 GiB limit beside
  # TensorFlow's own mappings (1.3-1.6 GiB), 3.9 GiB with AdamW's slots do
  # not. Without the check the run built its graph and died of SIGSEGV.
  config = dict(_tiny_config(), hidden_size=1024, num_attention_heads=16,
                intermediate_size=4096, vocab_size=320000,
                max_position_embeddings=512)
  path = tmp_path / "bert_config.json"
  path.write_text(json.dumps(config))
  count = config_checks.parameter_count(config)
  data = fh.write_records(str(tmp_path / "data.tfrecord"), 4)
  out = tmp_path / "out"
  limit = int(4.5 * 2 ** 30)
  result = subprocess.run(
      [sys.executable, fh.script("run_pretraining.py")] + fh.pretraining_flags(
          data, out, bert_config_file=path, init_checkpoint=""),
      cwd=REPO_ROOT, env=fh.env(), capture_output=True, text=True,
      timeout=300, preexec_fn=_limit_address_space(limit))
  assert result.returncode == 1, result.stderr[-3000:]
  assert re.match(
      r"error: --bert_config_file: %s: the model has %d parameters: training "
      r"holds 3 float32 copies of each \(the weight and AdamW's 2 slots\): "
      r"\d\.\d GiB but this process may map only \d\.\d GiB more \(its "
      r"address-space limit, RLIMIT_AS or ulimit -v, is 4\.5 GiB and "
      r"\d\.\d GiB are mapped\); raise the limit or check the sizes$" %
      (re.escape(str(path)), count), fh.last_line(result.stderr)), (
          result.stderr[-3000:])
  assert not out.exists()
