"""Checks of a `bert_config.json` before a model is built from it: a bad
value is one line naming the key, not a shape error deep in the graph
(`modeling.BertConfig.from_dict` accepts anything, as the reference)."""

import os
import resource

import modeling
from bert_tf import json_file

__all__ = ["check_bert_config_json", "read_json", "parameter_count",
           "training_copies", "memory_problem"]

# Keys that fix the shapes of the checkpoint's variables: no default can be
# right for them. Each with the largest value a sane model has (far above
# any released BERT; a larger one is a typo that would only allocate until
# the kernel kills the process).
_REQUIRED_INT_KEYS = {"vocab_size": 10 ** 7, "hidden_size": 65536,
                      "num_hidden_layers": 1000, "num_attention_heads": 4096,
                      "intermediate_size": 2 ** 20}
_OPTIONAL_INT_KEYS = {"max_position_embeddings": 2 ** 20,
                      "type_vocab_size": 65536}
_PROBABILITY_KEYS = ("hidden_dropout_prob", "attention_probs_dropout_prob")
# float32 weights.
_BYTES_PER_PARAMETER = 4


def check_bert_config_json(json_object, path, flag_name="bert_config_file",
                           memory_bytes=None):
  """Refuses a config whose values cannot describe a BERT model.

  `memory_bytes` defaults to this machine's memory.

  Raises:
    ValueError: one line naming `flag_name`, `path` and every bad key: a
      missing size key, a size not a positive integer up to its maximum, a
      dropout outside [0, 1), a non-positive initializer_range, an unknown
      hidden_act (null and "" mean none, as the reference), a hidden_size
      the heads do not divide, or float32 weights over the memory.
  """
  where = "--%s: %s" % (flag_name, path) if flag_name else path
  if not isinstance(json_object, dict):
    raise ValueError("%s must hold a JSON object, got %s" %
                     (where, type(json_object).__name__))
  problems = []
  for key, largest in list(_REQUIRED_INT_KEYS.items()) + list(
      _OPTIONAL_INT_KEYS.items()):
    if key not in json_object:
      if key in _REQUIRED_INT_KEYS:
        problems.append("%r is missing" % key)
      continue
    value = json_object[key]
    if (isinstance(value, bool) or not isinstance(value, int) or
        not 1 <= value <= largest):
      problems.append("%r is %s; expected a positive integer up to %d" %
                      (key, json_file.describe(value), largest))
  for key in _PROBABILITY_KEYS:
    value = json_object.get(key, 0.0)
    if (isinstance(value, bool) or not isinstance(value, (int, float))
        or not 0.0 <= value < 1.0):
      problems.append("%r is %s; expected a probability in [0, 1)" %
                      (key, json_file.describe(value)))
  value = json_object.get("initializer_range", 0.02)
  if (isinstance(value, bool) or not isinstance(value, (int, float))
      or not 0 < value < float("inf")):
    problems.append("'initializer_range' is %s; expected a finite positive "
                    "number" % json_file.describe(value))
  # null (or "") is no activation, a linear feed-forward layer: the
  # reference's `get_activation` returns None for it (kept for parity).
  value = json_object.get("hidden_act", "gelu")
  if value is not None and not isinstance(value, str):
    problems.append("'hidden_act' is %s; expected an activation name such as "
                    "\"gelu\", or null for none (linear)" %
                    json_file.describe(value))
  elif value:
    try:
      modeling.get_activation(value)
    except ValueError as e:  # It names the activations it knows.
      problems.append("'hidden_act': %s" % e)
  if not problems:
    hidden = json_object["hidden_size"]
    heads = json_object["num_attention_heads"]
    if hidden % heads:
      problems.append("hidden_size=%d is not a multiple of "
                      "num_attention_heads=%d" % (hidden, heads))
    else:
      problem = memory_problem(json_object, memory_bytes)
      if problem:
        problems.append(problem)
  if problems:
    raise ValueError("%s: %s" % (where, "; ".join(problems)))


def parameter_count(config):
  """The number of weights of a `BertModel` with its pooler, of a checked
  config dict."""
  hidden = config["hidden_size"]
  inner = config["intermediate_size"]
  embeddings = hidden * (config["vocab_size"] +
                         config.get("max_position_embeddings", 512) +
                         config.get("type_vocab_size", 16) + 2)
  attention = 4 * (hidden * hidden + hidden)
  feed_forward = 2 * hidden * inner + inner + hidden
  layer = attention + feed_forward + 4 * hidden
  return (embeddings + config["num_hidden_layers"] * layer +
          hidden * hidden + hidden)


def _machine_memory():
  """(memory, available memory) in bytes: the physical memory, or a lower
  cgroup limit (a container's); available may be None."""
  total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
  for limit_file in ("/sys/fs/cgroup/memory.max",
                     "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
    try:
      with open(limit_file) as f:
        total = min(total, int(f.read().strip()))
      break
    except (OSError, ValueError):  # Absent, or "max" (no limit).
      continue
  available = None
  try:
    with open("/proc/meminfo") as f:
      for line in f:
        if line.startswith("MemAvailable:"):
          available = int(line.split()[1]) * 1024
  except (OSError, ValueError, IndexError):
    pass
  return total, available


def _address_space():
  """(limit, mapped) in bytes: this process's address-space limit
  (`RLIMIT_AS`, `ulimit -v`) and what it maps now (`VmSize`); None when
  there is no limit."""
  limit, _ = resource.getrlimit(resource.RLIMIT_AS)
  if limit == resource.RLIM_INFINITY or limit < 0:
    return None
  mapped = 0
  try:
    with open("/proc/self/status") as f:
      for line in f:
        if line.startswith("VmSize:"):
          mapped = int(line.split()[1]) * 1024
  except (OSError, ValueError, IndexError):
    pass
  return limit, mapped


# Optimizer slots per weight (`--optimizer`): AdamW's and LAMB's first and
# second moments.
_SLOTS = {"adamw": ("AdamW", 2), "lamb": ("LAMB", 2)}


def training_copies(optimizer, gradient_accumulation_steps):
  """(count, what) of the float32 copies of each weight training holds:
  the weight, the optimizer's slots, the accumulation buffer (e.g. `(3,
  "the weight and AdamW's 2 slots")`)."""
  name, slots = _SLOTS.get(optimizer, (optimizer, 2))
  copies, what = 1 + slots, "the weight and %s's %d slots" % (name, slots)
  if gradient_accumulation_steps > 1:
    copies += 1
    what = what.replace(" and ", ", ") + " and a gradient-accumulation buffer"
  return copies, what


def memory_problem(config, memory_bytes=None, copies=None):
  """A one-line problem (or None) when the model's float32 weights, times
  `copies` (`training_copies`; default 1), exceed the memory.

  The budget is `memory_bytes`, else the least of this machine's memory
  (or cgroup limit), its available memory and `RLIMIT_AS`: a run over any
  dies later (OOM killer, SIGSEGV), leaving files behind.
  """
  count = parameter_count(config)
  factor = copies[0] if copies else 1
  needed = count * _BYTES_PER_PARAMETER * factor
  if copies:
    need = ("training holds %d float32 copies of each (%s): %s" %
            (copies[0], copies[1], _size(needed)))
  else:
    need = "its float32 weights alone need %s" % _size(needed)
  available, address_space = None, None
  if memory_bytes is None:
    memory_bytes, available = _machine_memory()
    address_space = _address_space()
  if needed > memory_bytes or (available is not None and
                               needed > available):
    return ("the model has %d parameters: %s but this machine has %s of "
            "memory%s; check the sizes" %
            (count, need, _size(memory_bytes), "" if available is None else
             " (%s available)" % _size(available)))
  if address_space is not None and needed > address_space[0] - (
      address_space[1]):
    limit, mapped = address_space
    return ("the model has %d parameters: %s but this process may map only "
            "%s more (its address-space limit, RLIMIT_AS or ulimit -v, is %s "
            "and %s are mapped); raise the limit or check the sizes" %
            (count, need, _size(max(limit - mapped, 0)), _size(limit),
             _size(mapped)))
  return None


def _size(num_bytes):
  return "%.1f GiB" % (num_bytes / 2 ** 30)


def read_json(path):
  """The parsed JSON of a small file (local or any `tf.io.gfile` file
  system), nested at most `json_file.MAX_DEPTH` levels."""
  return json_file.load(path, max_bytes=2 ** 20)
