"""Model configs at start-up: null activations, and the memory a run needs.

`"hidden_act": null` is the reference's linear activation (its
`get_activation` returns None); the start-up memory check counts what
training holds (weights, optimizer slots, accumulation buffers) against the
machine's memory and the process's address-space limit.
"""

import json

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

import fault_helpers as fh
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
