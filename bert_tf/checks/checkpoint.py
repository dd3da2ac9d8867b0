"""Checks of a TensorFlow checkpoint before training or fine-tuning from
it: one copied in part, damaged, or not fitting `bert_config.json` is
refused in one line naming the file, before any graph is built."""

import atexit
import os
import re
import shutil
import tempfile

import tensorflow.compat.v1 as tf

__all__ = ["expected_bert_shapes", "checkpoint_files", "readable_prefix",
           "check_checkpoint"]

# Characters TensorFlow's file matching reads as a pattern.
_PATTERN_CHARACTERS = re.compile(r"[*?\[\]\\{}]")
# prefix -> a name of the same checkpoint without them (this process's).
_READABLE = {}


def checkpoint_files(prefix):
  """The files of checkpoint `prefix`: its `.index`, `.data-K-of-N` shards
  and `.meta` graph, found by listing its folder (no glob: a folder named
  `pre[2]` is read as named). Sorted; empty when there are none."""
  folder, base = os.path.split(prefix)
  if not tf.io.gfile.isdir(folder or "."):
    return []
  own = re.compile(re.escape(base) +
                   r"\.(index|meta|data-\d{5}-of-\d{5})$")
  return sorted(os.path.join(folder, name)
                for name in tf.io.gfile.listdir(folder or ".")
                if own.match(name))


def expected_bert_shapes(bert_config):
  """dict name -> shape (list of int) of the encoder's variables (the
  reference's names) from a `modeling.BertConfig`."""
  h, i = bert_config.hidden_size, bert_config.intermediate_size
  shapes = {
      "bert/embeddings/word_embeddings": [bert_config.vocab_size, h],
      "bert/embeddings/token_type_embeddings":
          [bert_config.type_vocab_size, h],
      "bert/embeddings/position_embeddings":
          [bert_config.max_position_embeddings, h],
      "bert/embeddings/LayerNorm/beta": [h],
      "bert/embeddings/LayerNorm/gamma": [h],
      "bert/pooler/dense/kernel": [h, h],
      "bert/pooler/dense/bias": [h],
  }
  for layer in range(bert_config.num_hidden_layers):
    prefix = "bert/encoder/layer_%d/" % layer
    for name in ("query", "key", "value"):
      shapes[prefix + "attention/self/%s/kernel" % name] = [h, h]
      shapes[prefix + "attention/self/%s/bias" % name] = [h]
    dense = {"attention/output/dense": (h, h), "intermediate/dense": (h, i),
             "output/dense": (i, h)}
    for name, (rows, cols) in dense.items():
      shapes[prefix + name + "/kernel"] = [rows, cols]
      shapes[prefix + name + "/bias"] = [cols]
    for name in ("attention/output/LayerNorm", "output/LayerNorm"):
      shapes[prefix + name + "/beta"] = [h]
      shapes[prefix + name + "/gamma"] = [h]
  return shapes


def _checkpoint_reader(prefix, flag_name):
  try:
    return tf.train.load_checkpoint(readable_prefix(prefix))
  except (tf.errors.OpError, ValueError) as e:
    raise ValueError(
        "--%s: %s.index is not a readable checkpoint index (%s): the file is "
        "truncated or damaged; copy it again" %
        (flag_name, prefix, " ".join(str(e).split()))) from None


def readable_prefix(prefix):
  """A name of checkpoint `prefix` that TensorFlow's readers can open: they
  find `<prefix>.index` by pattern, so `pre[2]/...` is "not found"; such a
  prefix gets links to its files in a folder of this process's temp folder
  (once; removed when the process exits), a
  folder (a SavedModel's) one link to itself; others, and remote ones, are
  returned as they are."""
  if "://" in prefix or not _PATTERN_CHARACTERS.search(prefix):
    return prefix
  if prefix not in _READABLE:
    folder = tempfile.mkdtemp(prefix="checkpoint-")
    atexit.register(shutil.rmtree, folder, True)  # Links only: gone at exit.
    paths = [prefix] if os.path.isdir(prefix) else checkpoint_files(prefix)
    for path in paths:
      os.symlink(os.path.abspath(path), os.path.join(
          folder, "checkpoint" + path[len(prefix):]))
    _READABLE[prefix] = os.path.join(folder, "checkpoint")
  return _READABLE[prefix]


def check_checkpoint(prefix, flag_name="init_checkpoint", bert_config=None,
                     config_flag="bert_config_file"):
  """Refuses a checkpoint that cannot be read whole, or does not fit.

  The `.data` files must hold the indexed tensors; with `bert_config`,
  every `bert/` variable must have the config's shape; every tensor is read
  once (checksums). Returns the model variables the checkpoint lacks
  (random at start, as in the reference).

  Raises:
    ValueError: one line naming the file (the variable, both shapes and the
      flags `flag_name`, `config_flag` for a shape mismatch).
  """
  reader = _checkpoint_reader(prefix, flag_name)
  shapes = reader.get_variable_to_shape_map()
  dtypes = reader.get_variable_to_dtype_map()
  data_files = [path for path in checkpoint_files(prefix)
                if ".data-" in path[len(prefix):]]
  if not data_files and shapes:
    raise ValueError("--%s: %s has an index but no .data-* file beside it" %
                     (flag_name, prefix))
  needed = 0
  for name, shape in shapes.items():
    if dtypes[name] == tf.string:  # Of any size (the input's position).
      continue
    count = 1
    for dim in shape:
      count *= dim
    needed += count * dtypes[name].size
  have = sum(tf.io.gfile.stat(path).length for path in data_files)
  if have < needed:
    raise ValueError(
        "--%s: %s is truncated: its .data files hold %d bytes but the "
        "index lists %d bytes of tensors; copy it again" %
        (flag_name, ", ".join(sorted(data_files)), have, needed))
  missing = []
  if bert_config is not None:
    for name, shape in sorted(expected_bert_shapes(bert_config).items()):
      if name not in shapes:
        missing.append(name)
      elif list(shapes[name]) != list(shape):
        raise ValueError(
            "--%s: variable %s has shape %s in %s, but --%s gives it %s; use "
            "the bert_config.json that came with the checkpoint" %
            (flag_name, name, list(shapes[name]), prefix, config_flag,
             list(shape)))
  _check_bytes(reader, sorted(shapes), data_files, flag_name)
  return missing


def _check_bytes(reader, names, data_files, flag_name):
  """Reads every tensor of `reader` once, one at a time (checksums).

  Raises:
    ValueError: naming the `.data` files and the first bad tensor.
  """
  for name in names:
    try:
      reader.get_tensor(name)
    except (tf.errors.OpError, ValueError) as e:
      text = " ".join(str(getattr(e, "message", None) or e).split())
      # TensorFlow's text names the bundle and both checksums.
      why = ("fails its checksum" if "Checksum does not match" in text
             else "does not read back (%s)" % text)
      raise ValueError("--%s: %s is damaged: tensor %s %s; copy it again" %
                       (flag_name, ", ".join(data_files), name, why)) from None
