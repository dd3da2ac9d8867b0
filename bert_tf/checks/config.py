"""Checks of a `bert_config.json` before a model is built from it.

`modeling.BertConfig.from_dict` accepts any keys, as the reference does for
library users; the scripts check the file here first so that a bad value is
one line naming the key, not a shape error deep in the graph.
"""

import json

import tensorflow.compat.v1 as tf

import modeling

__all__ = ["check_bert_config_json", "read_json"]

# Keys that fix the shapes of the checkpoint's variables: no default can be
# right for them.
_REQUIRED_INT_KEYS = ("vocab_size", "hidden_size", "num_hidden_layers",
                      "num_attention_heads", "intermediate_size")
_OPTIONAL_INT_KEYS = ("max_position_embeddings", "type_vocab_size")
_PROBABILITY_KEYS = ("hidden_dropout_prob", "attention_probs_dropout_prob")


def check_bert_config_json(json_object, path, flag_name="bert_config_file"):
  """Refuses a config whose values cannot describe a BERT model.

  Args:
    json_object: the parsed JSON.
    path: str, the file (for the message).
    flag_name: str, the flag it came from.

  Raises:
    ValueError: one line naming the flag, the file and every bad key: a
      missing size key (vocab_size, hidden_size, num_hidden_layers,
      num_attention_heads, intermediate_size), a size that is not a positive
      integer, a dropout probability outside [0, 1), an initializer_range
      that is not a positive number, a hidden_act that is not an activation
      name (`modeling.get_activation`), or a
      hidden_size that num_attention_heads does not divide.
  """
  where = "--%s: %s" % (flag_name, path)
  if not isinstance(json_object, dict):
    raise ValueError("%s must hold a JSON object, got %s" %
                     (where, type(json_object).__name__))
  problems = []
  for key in _REQUIRED_INT_KEYS + _OPTIONAL_INT_KEYS:
    if key not in json_object:
      if key in _REQUIRED_INT_KEYS:
        problems.append("%r is missing" % key)
      continue
    value = json_object[key]
    if isinstance(value, bool) or not isinstance(value, int):
      problems.append("%r is %r; expected a positive integer" % (key, value))
    elif value < 1:
      problems.append("%r is %d; expected a positive integer" % (key, value))
  for key in _PROBABILITY_KEYS:
    value = json_object.get(key, 0.0)
    if (isinstance(value, bool) or not isinstance(value, (int, float))
        or not 0.0 <= value < 1.0):
      problems.append("%r is %r; expected a probability in [0, 1)" %
                      (key, value))
  value = json_object.get("initializer_range", 0.02)
  if (isinstance(value, bool) or not isinstance(value, (int, float))
      or not value > 0):
    problems.append("'initializer_range' is %r; expected a positive number" %
                    (value,))
  value = json_object.get("hidden_act", "gelu")
  if value is not None and not isinstance(value, str):
    problems.append("'hidden_act' is %r; expected a name such as \"gelu\"" %
                    (value,))
  elif value:
    try:
      modeling.get_activation(value)
    except ValueError as e:  # It names the activations it knows.
      problems.append("'hidden_act': %s" % e)
  hidden, heads = (json_object.get("hidden_size"),
                   json_object.get("num_attention_heads"))
  if (not problems and hidden % heads):
    problems.append("hidden_size=%d is not a multiple of "
                    "num_attention_heads=%d" % (hidden, heads))
  if problems:
    raise ValueError("%s: %s" % (where, "; ".join(problems)))


def read_json(path):
  """The parsed JSON of a small UTF-8 file (local or any `tf.io.gfile`
  file system)."""
  with tf.io.gfile.GFile(path, "rb") as f:
    return json.loads(f.read().decode("utf-8"))
