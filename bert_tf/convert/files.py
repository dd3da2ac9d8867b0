"""Files of a conversion: safetensors (numpy API; PyTorch pickles are never
loaded), TF checkpoints (plain `tf.compat.v1` variables: the released
names), JSON, and output folders written under a temporary name."""

import contextlib
import os

from absl import logging
# ml_dtypes (a TensorFlow dependency) registers numpy's bfloat16, so the
# safetensors numpy API can read bf16 checkpoints.
import ml_dtypes  # pylint: disable=unused-import
from safetensors import safe_open
from safetensors import SafetensorError
import tensorflow.compat.v1 as tf

from bert_tf import io as io_utils
from bert_tf import json_file
from bert_tf.checks import checkpoint as checkpoint_checks
from bert_tf.convert import keras_names
from bert_tf.train import checkpoints
from bert_tf.train import variables as variables_lib

__all__ = ["read_json", "safetensors_files", "weight_files", "read_hf_weights",
           "hf_vocab_text", "log_lower_case", "write_tf_checkpoint",
           "resolve_tf_checkpoint", "read_tf_checkpoint",
           "atomic_output_dir", "check_output_dir"]

_PYTORCH_BIN_HINT = (
    "this converter never unpickles PyTorch files; convert it to safetensors "
    "first, e.g. python -c \"import torch, safetensors.torch as s; "
    "s.save_file({k: v.clone().contiguous() for k, v in torch.load("
    "'%s', weights_only=True).items()}, '%s')\"")


def read_json(path):
  """The JSON object in the local file `path`.

  Raises:
    FileNotFoundError: `path` is not a file.
    ValueError: not JSON, too deep, or not an object, naming the file.
  """
  return json_file.require(json_file.load(path), "object", path, "")


def safetensors_files(hf_dir):
  """The folder's safetensors files (one, or the shards of an index).

  Raises:
    FileNotFoundError: none (with the command that converts a lone
      `pytorch_model.bin`).
    ValueError: an index whose `weight_map` names files outside `hf_dir`,
      naming the index and the key.
  """
  single = os.path.join(hf_dir, "model.safetensors")
  if os.path.isfile(single):
    _check_inside(hf_dir, "model.safetensors", single, "")
    return [single]
  index = os.path.join(hf_dir, "model.safetensors.index.json")
  if os.path.isfile(index):
    weight_map = json_file.field(read_json(index), "weight_map", "object",
                                 index, default={})
    names = set()
    for tensor, name in weight_map.items():
      where = "weight_map[%s]" % json_file.describe(tensor)
      json_file.require(name, "string", index, where)
      names.add(name)
      _check_inside(hf_dir, name, index, where)
    return [os.path.join(hf_dir, name) for name in sorted(names)]
  pickle_path = os.path.join(hf_dir, "pytorch_model.bin")
  if os.path.exists(pickle_path) or os.path.exists(pickle_path + ".index.json"):
    raise FileNotFoundError(
        "%s has pytorch_model.bin but no model.safetensors: " % hf_dir +
        _PYTORCH_BIN_HINT % (pickle_path, single))
  raise FileNotFoundError("%s: no model.safetensors (found: %s)" %
                          (hf_dir, ", ".join(sorted(os.listdir(hf_dir))) or
                           "nothing"))


def weight_files(hf_dir):
  """The folder's safetensors, else transformers' TensorFlow `tf_model.h5`.

  Raises:
    FileNotFoundError, ValueError: as `safetensors_files`.
  """
  try:
    return safetensors_files(hf_dir)
  except FileNotFoundError:
    h5 = os.path.join(hf_dir, keras_names.H5_FILE)
    if os.path.isfile(h5):
      return [h5]
    raise


def _check_inside(folder, name, source, where):
  """Refuses a file name that leads out of `folder` (links into a Hugging
  Face cache's `blobs/` are followed).

  Raises:
    ValueError: absolute, `..`, or outside through links; naming `source`
      and `where`.
  """
  parts = name.replace("\\", "/").split("/")
  real_folder = os.path.realpath(folder)
  allowed = [real_folder]
  if os.path.basename(os.path.dirname(real_folder)) == "snapshots":
    allowed.append(os.path.join(os.path.dirname(os.path.dirname(real_folder)),
                                "blobs"))
  real = os.path.realpath(os.path.join(folder, name))
  if (os.path.isabs(name) or ".." in parts or
      not any(os.path.commonpath([root, real]) == root for root in allowed)):
    raise ValueError("%s: %s is %r, expected a file inside %s (absolute "
                     "paths, '..' and links leading out are refused)" %
                     (source, where or "the file", name, folder))


def read_hf_weights(hf_dir):
  """Every tensor of a Hugging Face folder: name -> numpy array, Keras
  names (`TFBert*`) renamed to PyTorch's (`keras_names`).

  Raises:
    FileNotFoundError: no weights file (see `weight_files`).
    ValueError: a tensor in two shards, or a damaged file, named.
  """
  tensors = {}
  for path in weight_files(hf_dir):
    if not os.path.isfile(path):
      raise FileNotFoundError("%s not found (listed in the shard index)" % path)
    if path.endswith(".h5"):
      found = list(keras_names.read_h5(path).items())
    else:
      found = _read_safetensors(path)
      if any(keras_names.is_keras_name(name) for name, _ in found):
        # Saved by a TFBert* class: Keras names and layouts.
        found = list(keras_names.keras_to_hf_names(dict(found),
                                                   path).items())
    for name, value in found:
      if name in tensors:
        raise ValueError("%s: tensor %r is stored twice" % (path, name))
      tensors[name] = value
  return tensors


def _read_safetensors(path):
  """[(name, numpy array)] of one safetensors file (8-byte header length,
  JSON header, data).

  Raises:
    ValueError: `<path>: not a valid safetensors file (...)`.
  """
  with open(path, "rb") as f:
    head = f.read(2)
  if head[:1] == b"\x80" or head == b"PK":  # A pickle, or torch.save's zip.
    raise ValueError(
        "%s: not a safetensors file but a PyTorch pickle; " % path +
        _PYTORCH_BIN_HINT % (path, path + ".converted"))
  try:
    with safe_open(path, framework="np") as f:
      return [(name, f.get_tensor(name)) for name in f.keys()]
  except (SafetensorError, ValueError, TypeError, OverflowError) as e:
    raise ValueError("%s: not a valid safetensors file (%s)" %
                     (path, " ".join(str(e).split()))) from e


def hf_vocab_text(hf_dir):
  """vocab.txt's text, or tokenizer.json's WordPiece vocab in id order.

  Raises:
    FileNotFoundError: neither file is there.
    ValueError: a tokenizer.json of the wrong shape.
  """
  vocab_path = os.path.join(hf_dir, "vocab.txt")
  if os.path.isfile(vocab_path):
    with open(vocab_path, "rb") as f:
      return f.read()
  tokenizer_path = os.path.join(hf_dir, "tokenizer.json")
  if os.path.isfile(tokenizer_path):
    return _wordpiece_vocab_text(tokenizer_path, hf_dir)
  raise FileNotFoundError("%s: no vocab.txt (nor a WordPiece tokenizer.json)" %
                          hf_dir)


def _wordpiece_vocab_text(tokenizer_path, hf_dir):
  """A tokenizer.json's WordPiece vocab as vocab.txt's text.

  Raises:
    ValueError: not a WordPiece `model` with ids 0..n-1, naming the file
      and the key.
  """
  model = json_file.field(read_json(tokenizer_path), "model", "object",
                          tokenizer_path)
  kind = json_file.field(model, "type", ("string", "null"), tokenizer_path,
                         "model", default=None)
  if kind != "WordPiece":
    raise ValueError("%s: model.type is %s, expected \"WordPiece\" (or a "
                     "vocab.txt in %s)" % (tokenizer_path,
                                          json_file.describe(kind), hf_dir))
  vocab = json_file.field(model, "vocab", "object", tokenizer_path, "model")
  for token, index in vocab.items():
    json_file.require(index, "integer", tokenizer_path,
                      "model.vocab[%s]" % json_file.describe(token))
  by_id = sorted(vocab.items(), key=lambda item: item[1])
  if [i for _, i in by_id] != list(range(len(by_id))):
    raise ValueError("%s: WordPiece vocab ids are not 0..n-1" %
                     tokenizer_path)
  logging.info("No vocab.txt: writing the WordPiece vocab of %s",
               tokenizer_path)
  return "".join(token + "\n" for token, _ in by_id).encode("utf-8")


def log_lower_case(hf_dir):
  """Tells which --do_lower_case the converted model needs, when known."""
  path = os.path.join(hf_dir, "tokenizer_config.json")
  if os.path.isfile(path):
    lower = json_file.field(read_json(path), "do_lower_case",
                            ("boolean", "null"), path, default=None)
    if lower is not None:
      logging.info("%s says do_lower_case=%s: pass --do_lower_case=%s to the "
                   "scripts", path, lower, bool(lower))


def write_tf_checkpoint(tf_tensors, checkpoint_prefix):
  """Writes `tf_tensors` (name -> numpy array) as a checkpoint at
  `checkpoint_prefix`: plain variables and a Saver in a fresh graph (the
  released names), values fed through placeholders (no 2 GB GraphDef)."""
  with tf.Graph().as_default():
    feeds, variables = {}, {}
    for name, value in sorted(tf_tensors.items()):
      placeholder = tf.placeholder(tf.as_dtype(value.dtype), value.shape)
      variables[name] = tf.Variable(placeholder, name=name, trainable=False)
      feeds[placeholder] = value
    saver = tf.train.Saver(var_list=variables)
    with tf.Session() as sess:
      sess.run([v.initializer for v in variables.values()], feed_dict=feeds)
      saver.save(sess, checkpoint_prefix, write_meta_graph=False,
                 write_state=False)


def resolve_tf_checkpoint(path):
  """The checkpoint prefix of a folder, a prefix or its `.index`, as
  `--init_checkpoint` (`checkpoints.resolve`).

  Raises:
    ValueError: naming `--input` and the path, when no checkpoint is there.
  """
  return checkpoints.resolve(path, flag_name="input")


def read_tf_checkpoint(checkpoint_prefix):
  """A checkpoint's weights (name -> numpy array), without its training
  state (`variables_lib.is_training_state`: AdamW's or LAMB's slots,
  accumulators, global_step, the loss scale, the input's position)."""
  reader = tf.train.load_checkpoint(
      checkpoint_checks.readable_prefix(checkpoint_prefix))
  tensors, skipped = {}, 0
  for name in sorted(reader.get_variable_to_shape_map()):
    if variables_lib.is_training_state(name):
      skipped += 1
      continue
    tensors[name] = reader.get_tensor(name)
  if skipped:
    logging.info("Skipped %d training-state entries (optimizer slots, "
                 "accumulators, step, loss scale, input position)", skipped)
  return tensors


@contextlib.contextmanager
def atomic_output_dir(output_dir):
  """Yields a new temporary folder that becomes `output_dir` on success
  (`io_utils.atomic_path`), with the modes of new files."""
  check_output_dir(output_dir)
  with io_utils.atomic_path(os.path.abspath(output_dir)) as tmp:
    os.makedirs(tmp)
    yield tmp
    _give_default_permissions(tmp)


def _give_default_permissions(folder):
  """Gives `folder` and its files the modes of new ones (umask): `mkdtemp`
  and safetensors make them private, a copied vocabulary keeps its mode."""
  umask = os.umask(0)
  os.umask(umask)
  os.chmod(folder, 0o777 & ~umask)
  for name in os.listdir(folder):
    os.chmod(os.path.join(folder, name), 0o666 & ~umask)


def check_output_dir(output_dir):
  """Refuses an `--output` that exists and is not an empty folder (a link
  to a folder is that folder).

  Raises:
    ValueError: naming the folder (and a link's target).
  """
  if os.path.islink(output_dir.rstrip("/")) and not os.path.isdir(output_dir):
    target = os.readlink(output_dir.rstrip("/"))
    raise ValueError("--output: %s is a symbolic link to %s, %s; expected a "
                     "new or empty folder, or a link to one" %
                     (output_dir, target, "a file" if os.path.exists(
                         output_dir) else "which does not exist"))
  if os.path.exists(output_dir) and (not os.path.isdir(output_dir) or
                                     os.listdir(output_dir)):
    raise ValueError("--output: %s already exists and is not an empty folder"
                     % output_dir)
