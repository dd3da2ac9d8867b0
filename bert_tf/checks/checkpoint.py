"""Checks of a TensorFlow checkpoint before training or fine-tuning from it.

Cheap: only the index is read, never the weights. A checkpoint copied only
in part, or one that does not fit the `bert_config.json`, is refused in one
line naming the file, before any graph is built.
"""

import tensorflow.compat.v1 as tf

__all__ = ["expected_bert_shapes", "check_checkpoint",
           "check_resume_checkpoint"]


def expected_bert_shapes(bert_config):
  """The shapes of the encoder's variables, from the config alone.

  The variable names are the reference release's (`bert/embeddings/...`,
  `bert/encoder/layer_<i>/...`, `bert/pooler/dense/...`).

  Args:
    bert_config: `modeling.BertConfig`.

  Returns:
    dict name -> list of int.
  """
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
    return tf.train.load_checkpoint(prefix)
  except (tf.errors.OpError, ValueError) as e:
    raise ValueError(
        "--%s: %s.index is not a readable checkpoint index (%s): the file is "
        "truncated or damaged; copy it again" %
        (flag_name, prefix, " ".join(str(e).split()))) from None


def check_checkpoint(prefix, flag_name="init_checkpoint", bert_config=None,
                     config_flag="bert_config_file"):
  """Refuses a checkpoint that cannot be read whole, or does not fit.

  The `.data` files must be at least as large as the tensors the index
  lists (a truncated copy is not); with `bert_config`, every `bert/`
  variable the model has must have the shape the config gives it.

  Args:
    prefix: str, a checkpoint prefix (`.../bert_model.ckpt`).
    flag_name: str, the flag the checkpoint came from.
    bert_config: `modeling.BertConfig` or None (shapes not checked).
    config_flag: str, the flag the config came from.

  Returns:
    list of str, the model variables the checkpoint lacks (they start from
    random values, as in the reference); empty when it has them all.

  Raises:
    ValueError: one line naming the file (the variable, both shapes and the
      flags for a shape mismatch).
  """
  reader = _checkpoint_reader(prefix, flag_name)
  shapes = reader.get_variable_to_shape_map()
  dtypes = reader.get_variable_to_dtype_map()
  data_files = tf.io.gfile.glob(prefix + ".data-*-of-*")
  if not data_files and shapes:
    raise ValueError("--%s: %s has an index but no .data-* file beside it" %
                     (flag_name, prefix))
  if all(dtypes[name] != tf.string for name in shapes):
    needed = 0
    for name, shape in shapes.items():
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
  return missing


def check_resume_checkpoint(output_dir):
  """Refuses to resume from a latest checkpoint that is truncated.

  Args:
    output_dir: str, the training folder (its `checkpoint` state file names
      the latest checkpoint; none there is accepted).

  Raises:
    ValueError: naming the checkpoint files, when `output_dir`'s latest
      checkpoint cannot be read whole.
  """
  latest = tf.train.latest_checkpoint(output_dir)
  if latest:
    try:
      check_checkpoint(latest, flag_name="output_dir")
    except ValueError as e:
      raise ValueError("%s (training would resume from it; remove its "
                       "files to resume from the one before)" % e) from None
