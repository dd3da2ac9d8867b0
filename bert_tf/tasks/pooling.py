"""One vector per input line: `extract_features.py --pooling`.

Modes, all over the last encoder layer (float32 [batch, seq, hidden] in,
float32 [batch, hidden] out):

  none         no pooling: every token's vectors of every `--layers` layer
               (the reference's output).
  mean         the mean over the attention mask: every real token, `[CLS]`
               and `[SEP]` included, and for a pair `a ||| b` the tokens of
               both segments, as the model sees them. This is
               sentence-transformers' mean pooling (Reimers and Gurevych
               2019), the way all-MiniLM-L6-v2 is meant to be used.
  first_token  the vector at `[CLS]` (sentence-transformers' "cls" mode).
  cls          BERT's pooled output, tanh(dense(first_token)) (Devlin et al.
               2018, 3.2): what the reference's classifier is fine-tuned
               on; needs `bert/pooler/*` in the checkpoint.

`--l2_normalize` divides each vector by its Euclidean norm (at least
1e-12), as sentence-transformers' Normalize module does; the cosine
similarity of two such vectors is their dot product.
"""

import json


__all__ = ["MODES", "flag_problems", "checkpoint_problems", "pool",
           "format_line"]

MODES = ("none", "mean", "first_token", "cls")

# The pooler's weights, which --pooling=cls needs in the checkpoint.
_POOLER_KERNEL = "bert/pooler/dense/kernel"


def flag_problems(pooling, l2_normalize, layers, layers_given):
  """The one-line problems of a flag combination (list of str).

  Args:
    pooling: str, one of `MODES`.
    l2_normalize: bool.
    layers: str, `--layers`' value.
    layers_given: bool, whether `--layers` was on the command line (its
      default, four layers, is ignored when pooling).
  """
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
  # TensorFlow where it is used: extract_features.py defines --pooling from
  # MODES before TensorFlow loads.
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  names = {name for name, _ in tf.train.list_variables(init_checkpoint)}
  if _POOLER_KERNEL in names:
    return []
  return ["--pooling=cls: %s has no pooler weights (%s); expected a "
          "checkpoint with BERT's pooler, or --pooling=first_token or mean"
          % (init_checkpoint, _POOLER_KERNEL)]


def pool(pooling, sequence_output, input_mask, pooled_output,
         l2_normalize=False):
  """One vector per example.

  Args:
    pooling: str, "mean", "first_token" or "cls".
    sequence_output: float Tensor [batch, seq, hidden], the last layer.
    input_mask: int Tensor [batch, seq], 1 for real tokens, 0 for padding.
    pooled_output: float Tensor [batch, hidden], BERT's pooler output.
    l2_normalize: bool, divide each vector by its norm.

  Returns:
    float32 Tensor [batch, hidden].

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
