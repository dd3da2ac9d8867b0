"""One vector per input line: `extract_features.py --pooling`.

Modes, over the last layer (float32 [batch, seq, hidden] -> [batch, hidden]):

  none         every token's vectors of every `--layers` layer (the
               reference's output).
  mean         the mean over the attention mask (`[CLS]`, `[SEP]` and both
               segments of a pair included): sentence-transformers' mean
               pooling (Reimers and Gurevych 2019), as all-MiniLM-L6-v2.
  first_token  the vector at `[CLS]` (sentence-transformers' "cls").
  cls          BERT's pooled output, tanh(dense(first_token)) (Devlin et al.
               2018, 3.2); needs `bert/pooler/*` in the checkpoint.

`--l2_normalize` divides by the Euclidean norm (at least 1e-12), as
sentence-transformers' Normalize.
"""

import json

__all__ = ["MODES", "flag_problems", "checkpoint_problems", "pool",
           "format_line"]

MODES = ("none", "mean", "first_token", "cls")

# The pooler's weights, which --pooling=cls needs in the checkpoint.
_POOLER_KERNEL = "bert/pooler/dense/kernel"


def flag_problems(pooling, l2_normalize, layers, layers_given):
  """The one-line problems (list of str) of `pooling`, `l2_normalize` and
  `--layers` (ignored when pooling unless `layers_given`)."""
  problems = []
  if l2_normalize and pooling == "none":
    problems.append(
        "--l2_normalize needs --pooling=mean, first_token or cls (with "
        "--pooling=none every token's vectors are written unchanged)")
  if (pooling != "none" and layers_given and
      [piece.strip() for piece in layers.split(",")] != ["-1"]):
    problems.append(
        "--layers=%s with --pooling=%s: pooling uses the last layer only; "
        "expected --layers=-1 or no --layers" % (layers, pooling))
  return problems


def checkpoint_problems(pooling, init_checkpoint):
  """Problems (list of str) of `init_checkpoint` for `pooling`: cls needs
  the pooler's weights, which sentence-embedding checkpoints may lack."""
  if pooling != "cls" or not init_checkpoint:
    return []
  # TensorFlow (and the checkpoint checks, which import it) where used:
  # extract_features.py defines --pooling from MODES before TensorFlow loads.
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  # The checkpoint checks import TensorFlow too (see above).
  from bert_tf.checks import checkpoint as checkpoint_checks
  names = {name for name, _ in tf.train.list_variables(
      checkpoint_checks.readable_prefix(init_checkpoint))}
  if _POOLER_KERNEL in names:
    return []
  return ["--pooling=cls: %s has no pooler weights (%s); expected a "
          "checkpoint with BERT's pooler, or --pooling=first_token or mean"
          % (init_checkpoint, _POOLER_KERNEL)]


def pool(pooling, sequence_output, input_mask, pooled_output,
         l2_normalize=False):
  """One float32 vector [batch, hidden] per example, by `pooling` ("mean",
  "first_token", "cls") of `sequence_output` [batch, seq, hidden] under
  `input_mask` [batch, seq], or of `pooled_output` [batch, hidden].

  Raises:
    ValueError: for another `pooling`.
  """
  # TensorFlow where it is used (see checkpoint_problems).
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  sequence_output = tf.cast(sequence_output, tf.float32)
  if pooling == "mean":
    mask = tf.cast(input_mask, tf.float32)[:, :, None]
    total = tf.reduce_sum(sequence_output * mask, axis=1)
    vectors = total / tf.maximum(tf.reduce_sum(mask, axis=1), 1e-9)
  elif pooling == "first_token":
    vectors = sequence_output[:, 0, :]
  elif pooling == "cls":
    vectors = tf.cast(pooled_output, tf.float32)
  else:
    raise ValueError("pooling=%r: expected one of mean, first_token, cls"
                     % (pooling,))
  if l2_normalize:
    norm = tf.sqrt(tf.reduce_sum(tf.square(vectors), axis=-1, keepdims=True))
    vectors = vectors / tf.maximum(norm, 1e-12)
  return vectors


def format_line(unique_id, vector):
  """`{"linex_index": i, "embedding": [...]}` and a newline; the values
  rounded to 6 decimals, as the per-token output's are."""
  return json.dumps({"linex_index": unique_id,
                     "embedding": [round(float(x), 6) for x in vector]}) + "\n"
