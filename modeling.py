"""The BERT encoder: configuration, embeddings, Transformer layers and pooler.

A post-layer-norm Transformer encoder (Devlin et al. 2018, "BERT: Pre-training
of Deep Bidirectional Transformers for Language Understanding", section 3;
Vaswani et al. 2017, section 3) written on `tf.compat.v1.get_variable` and plain
ops so that every variable keeps the name it has in the released checkpoints:

  bert/embeddings/{word_embeddings,token_type_embeddings,position_embeddings}
  bert/embeddings/LayerNorm/{beta,gamma}
  bert/encoder/layer_N/attention/self/{query,key,value}/{kernel,bias}
  bert/encoder/layer_N/attention/output/dense/{kernel,bias}
  bert/encoder/layer_N/attention/output/LayerNorm/{beta,gamma}
  bert/encoder/layer_N/intermediate/dense/{kernel,bias}
  bert/encoder/layer_N/output/dense/{kernel,bias}
  bert/encoder/layer_N/output/LayerNorm/{beta,gamma}
  bert/pooler/dense/{kernel,bias}

Kernels are `[in, out]`.

Precision: every variable is float32 under those names whatever the compute
dtype, so a checkpoint written by a bfloat16 or float16 run loads in a float32
one and back. With `BertModel(..., compute_dtype=tf.bfloat16)` (or float16)
the variables are cast on read (`_cast`, at each matmul and embedding lookup;
in graphs that do not train, once: `cast_weights_once`) and the matmuls,
attention scores and feed-forward run in that dtype, while
layer norm and the attention softmax compute in float32 (mixed precision,
Micikevicius et al. 2018, "Mixed Precision Training", section 3). The
building blocks follow the dtype of their input tensor.

Shape legend used in comments:
  B = batch size, F = "from" sequence length, T = "to" sequence length,
  N = number of attention heads, H = size per head, W = hidden width.

Public names are listed in `__all__`: the reference's, plus `compute_dtype`
(an argument of `BertModel`), `gelu_exact`, `variable_name` and
`DropoutSeed` (stateless dropout draws, for runs that must repeat exactly).
"""

import collections
import copy
import json
import math
import re

import numpy as np
import tensorflow.compat.v1 as tf

from bert_tf import json_file as json_checks


# ----------------------------------------------------------------------------
# Configuration
# ----------------------------------------------------------------------------


__all__ = [
    "BertConfig",
    "BertModel",
    "gelu",
    "gelu_exact",
    "get_activation",
    "get_assignment_map_from_checkpoint",
    "variable_name",
    "dropout",
    "DropoutSeed",
    "layer_norm",
    "layer_norm_and_dropout",
    "create_initializer",
    "dense_layer",
    "embedding_lookup",
    "embedding_postprocessor",
    "create_attention_mask_from_input_mask",
    "attention_layer",
    "transformer_model",
    "get_shape_list",
    "reshape_to_matrix",
    "reshape_from_matrix",
    "assert_rank",
]


class BertConfig(object):
  """Hyper-parameters of a `BertModel` (the `bert_config.json` file).

  Keys that this class does not know (for example `directionality` or
  `pooler_type` in some released configs) are kept as attributes and written
  back by `to_dict` / `to_json_string`.
  """

  def __init__(self,
               vocab_size,
               hidden_size=768,
               num_hidden_layers=12,
               num_attention_heads=12,
               intermediate_size=3072,
               hidden_act="gelu",
               hidden_dropout_prob=0.1,
               attention_probs_dropout_prob=0.1,
               max_position_embeddings=512,
               type_vocab_size=16,
               initializer_range=0.02):
    """Builds a configuration.

    Args:
      vocab_size: int, number of WordPiece tokens (rows of `word_embeddings`).
      hidden_size: int, width W of every encoder layer.
      num_hidden_layers: int, number of Transformer layers.
      num_attention_heads: int, heads per attention layer; must divide
        `hidden_size`.
      intermediate_size: int, width of the feed-forward ("intermediate") layer.
      hidden_act: str or callable, feed-forward activation (see
        `get_activation`).
      hidden_dropout_prob: float, chance of dropping an activation in the
        embeddings, the attention output and the feed-forward output.
      attention_probs_dropout_prob: float, chance of dropping an attention
        probability.
      max_position_embeddings: int, longest sequence the model supports (rows
        of `position_embeddings`).
      type_vocab_size: int, number of `token_type_ids` values (segments).
      initializer_range: float, stddev of the truncated-normal initializer.
    """
    self.vocab_size = vocab_size
    self.hidden_size = hidden_size
    self.num_hidden_layers = num_hidden_layers
    self.num_attention_heads = num_attention_heads
    self.hidden_act = hidden_act
    self.intermediate_size = intermediate_size
    self.hidden_dropout_prob = hidden_dropout_prob
    self.attention_probs_dropout_prob = attention_probs_dropout_prob
    self.max_position_embeddings = max_position_embeddings
    self.type_vocab_size = type_vocab_size
    self.initializer_range = initializer_range

  @classmethod
  def from_dict(cls, json_object):
    """Builds a config from a dict; unknown keys become attributes too.

    Raises:
      ValueError: if `json_object` is not a dict.
    """
    if not isinstance(json_object, dict):
      raise ValueError("BertConfig.from_dict expects a dict, got %s" %
                       type(json_object).__name__)
    config = cls(vocab_size=None)
    for key, value in json_object.items():
      config.__dict__[key] = value
    return config

  @classmethod
  def from_json_file(cls, json_file):
    """Reads a config from a JSON file (local path or any tf.io.gfile URL).

    Raises:
      FileNotFoundError: if `json_file` does not exist.
      ValueError: if the file is not a JSON object (or is nested deeper
        than `json_file.MAX_DEPTH`), naming the file.
    """
    if not tf.io.gfile.exists(json_file):
      raise FileNotFoundError("BERT config file not found: %s" % json_file)
    with tf.io.gfile.GFile(json_file, "rb") as reader:
      text = reader.read()
    json_object = json_checks.loads(text, "BERT config file %s" % json_file)
    json_checks.require(json_object, "object",
                        "BERT config file %s" % json_file, "")
    return cls.from_dict(json_object)

  def to_dict(self):
    """Returns a deep copy of every attribute, unknown keys included."""
    return copy.deepcopy(self.__dict__)

  def to_json_string(self):
    """Returns the config as indented JSON with sorted keys and a newline."""
    return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"


# ----------------------------------------------------------------------------
# The model
# ----------------------------------------------------------------------------


class BertModel(object):
  """BERT encoder: embeddings, `num_hidden_layers` Transformer layers, pooler.

  Example:

    input_ids = tf.constant([[31, 51, 99], [15, 5, 0]])        # [B, T]
    input_mask = tf.constant([[1, 1, 1], [1, 1, 0]])
    token_type_ids = tf.constant([[0, 0, 1], [0, 2, 0]])
    config = modeling.BertConfig(vocab_size=32000, hidden_size=512,
                                 num_hidden_layers=8, num_attention_heads=8,
                                 intermediate_size=1024)
    model = modeling.BertModel(config, is_training=True, input_ids=input_ids,
                               input_mask=input_mask,
                               token_type_ids=token_type_ids)
    pooled = model.get_pooled_output()                          # [B, W]
  """

  def __init__(self,
               config,
               is_training,
               input_ids,
               input_mask=None,
               token_type_ids=None,
               use_one_hot_embeddings=False,
               scope=None,
               compute_dtype=tf.float32,
               cast_weights_once=False,
               position_ids=None,
               block_diagonal=False,
               pool_positions=None,
               dropout_seed=None):
    """Builds the graph.

    Args:
      config: `BertConfig`.
      is_training: bool; dropout is applied only when True.
      input_ids: int32 Tensor of shape [batch_size, seq_length], WordPiece ids.
      input_mask: (optional) int32 Tensor of shape [batch_size, seq_length],
        1 for real tokens and 0 for padding. Default: all ones.
      token_type_ids: (optional) int32 Tensor of shape [batch_size,
        seq_length], segment ids. Default: all zeros.
      use_one_hot_embeddings: bool; look word embeddings up with a one-hot
        matmul (faster on TPU) instead of a gather. Same results.
      scope: (optional) str, variable scope; default "bert".
      compute_dtype: tf.float32 (default, the reference's arithmetic),
        tf.bfloat16 or tf.float16: the dtype of the matmuls, attention and
        feed-forward. Variables stay float32 (same names, same checkpoints);
        layer norm and softmax compute in float32; every `get_*` output is
        float32, so the task heads and their losses stay in float32.
      cast_weights_once: bool; for a graph that only predicts or evaluates
        with a `compute_dtype` other than float32: every dense layer reads a
        `compute_dtype` copy of its kernel and bias (see `dense_layer`), cast
        once when the local variables are initialized, instead of casting
        the float32 variables on every step. Same values; never in a graph
        that trains. Ignored for float32.
      position_ids: (optional) int32 Tensor [batch_size, seq_length], each
        token's row of the position table. Default: 0..seq_length-1.
      block_diagonal: bool; True reads `input_mask` as segment numbers (0 =
        padding, 1..K = the K sequences packed in a row) and lets a token
        attend only to the real tokens of its own sequence (Krell et al.
        2021). Default False: every real token, as the reference.
      pool_positions: (optional) int32 Tensor [batch_size, K]: pool the
        tokens at these positions (each packed sequence's [CLS]) with the
        same pooler variables; `get_pooled_output` is then [batch_size, K,
        hidden_size]. Default: the first token, [batch_size, hidden_size].
      dropout_seed: (optional) `DropoutSeed`: every dropout draws stateless
        masks from it (attribute `dropout_seed`, None when not training, for
        the heads' dropout). Default: stateful draws, as the reference.

    Raises:
      ValueError: if a tensor has the wrong rank, if the static sequence length
        exceeds `config.max_position_embeddings`, if `hidden_size` is not a
        multiple of `num_attention_heads`, if `compute_dtype` is not one of
        the three float dtypes, or if `cast_weights_once` comes with
        `is_training`.
    """
    if is_training and cast_weights_once:
      raise ValueError("cast_weights_once is for graphs that do not train: "
                       "the copies take no gradient (is_training=True)")
    compute_dtype = tf.as_dtype(compute_dtype)
    if compute_dtype not in _COMPUTE_DTYPES:
      raise ValueError("compute_dtype must be float32, bfloat16 or float16, "
                       "got %s" % compute_dtype.name)
    self.compute_dtype = compute_dtype
    config = copy.deepcopy(config)
    if not is_training:
      config.hidden_dropout_prob = 0.0
      config.attention_probs_dropout_prob = 0.0
      dropout_seed = None
    self.dropout_seed = dropout_seed

    batch_size, seq_length = get_shape_list(
        input_ids, expected_rank=2, name="input_ids")
    if isinstance(seq_length, int):  # Fail before any variable is created.
      _check_seq_length(seq_length, config.max_position_embeddings)
    if input_mask is None:
      input_mask = tf.ones(shape=[batch_size, seq_length], dtype=tf.int32)
    if token_type_ids is None:
      token_type_ids = tf.zeros(shape=[batch_size, seq_length], dtype=tf.int32)

    with tf.variable_scope(scope, default_name="bert"):
      with tf.variable_scope("embeddings"):
        embedding_output, self.embedding_table = self._embed(
            config, input_ids, token_type_ids, use_one_hot_embeddings,
            compute_dtype, position_ids, dropout_seed)
      with tf.variable_scope("encoder"):
        attention_mask = create_attention_mask_from_input_mask(
            input_ids, input_mask, dtype=compute_dtype,
            block_diagonal=block_diagonal)
        all_encoder_layers = transformer_model(
            input_tensor=embedding_output,
            attention_mask=attention_mask,
            hidden_size=config.hidden_size,
            num_hidden_layers=config.num_hidden_layers,
            num_attention_heads=config.num_attention_heads,
            intermediate_size=config.intermediate_size,
            intermediate_act_fn=get_activation(config.hidden_act),
            hidden_dropout_prob=config.hidden_dropout_prob,
            attention_probs_dropout_prob=config.attention_probs_dropout_prob,
            initializer_range=config.initializer_range,
            do_return_all_layers=True,
            cast_weights_once=cast_weights_once,
            dropout_seed=dropout_seed)
      with tf.variable_scope("pooler"):
        pooled_output = self._pool(config, all_encoder_layers[-1],
                                   cast_weights_once, pool_positions)
    # The outputs the heads read are float32 (no-ops in a float32 model).
    self.embedding_output = _cast(embedding_output, tf.float32)
    self.all_encoder_layers = [_cast(layer, tf.float32)
                               for layer in all_encoder_layers]
    self.sequence_output = self.all_encoder_layers[-1]
    self.pooled_output = _cast(pooled_output, tf.float32)

  @staticmethod
  def _embed(config, input_ids, token_type_ids, use_one_hot_embeddings,
             compute_dtype, position_ids=None, dropout_seed=None):
    """Word + token type + position embeddings, layer norm, dropout."""
    word_embeddings, embedding_table = embedding_lookup(
        input_ids=input_ids,
        vocab_size=config.vocab_size,
        embedding_size=config.hidden_size,
        initializer_range=config.initializer_range,
        word_embedding_name="word_embeddings",
        use_one_hot_embeddings=use_one_hot_embeddings,
        compute_dtype=compute_dtype)
    output = embedding_postprocessor(
        input_tensor=word_embeddings,
        use_token_type=True,
        token_type_ids=token_type_ids,
        token_type_vocab_size=config.type_vocab_size,
        token_type_embedding_name="token_type_embeddings",
        use_position_embeddings=True,
        position_embedding_name="position_embeddings",
        initializer_range=config.initializer_range,
        max_position_embeddings=config.max_position_embeddings,
        dropout_prob=config.hidden_dropout_prob,
        position_ids=position_ids,
        dropout_seed=dropout_seed)
    return output, embedding_table

  @staticmethod
  def _pool(config, sequence_output, cast_weights_once, positions=None):
    """tanh dense layer on the first ([CLS]) token: [B, T, W] -> [B, W];
    on the tokens at `positions` [B, K]: [B, T, W] -> [B, K, W]."""
    if positions is None:
      first_token = sequence_output[:, 0, :]  # [B, W]
      return dense_layer(first_token, config.hidden_size, activation=tf.tanh,
                         initializer_range=config.initializer_range,
                         name="dense", cast_weights_once=cast_weights_once)
    tokens = tf.gather(sequence_output, positions, batch_dims=1)  # [B, K, W]
    batch_size, num_slots, width = get_shape_list(tokens, expected_rank=3)
    pooled = dense_layer(tf.reshape(tokens, [-1, width]), config.hidden_size,
                         activation=tf.tanh,
                         initializer_range=config.initializer_range,
                         name="dense", cast_weights_once=cast_weights_once)
    return tf.reshape(pooled, [batch_size, num_slots, config.hidden_size])

  def get_pooled_output(self):
    """float32 Tensor of shape [batch_size, hidden_size]: pooled [CLS]
    ([batch_size, K, hidden_size] with `pool_positions`).

    float32 whatever `compute_dtype` (cast from it after the pooler).
    """
    return self.pooled_output

  def get_sequence_output(self):
    """The last layer: float32 Tensor [batch_size, seq_length, hidden_size].

    float32 whatever `compute_dtype` (cast from it after the last layer).
    """
    return self.sequence_output

  def get_all_encoder_layers(self):
    """One float32 Tensor [batch_size, seq_length, hidden_size] per layer.

    float32 whatever `compute_dtype`.
    """
    return self.all_encoder_layers

  def get_embedding_output(self):
    """float32 Tensor [batch_size, seq_length, hidden_size]: encoder input.

    Word + token type + position embeddings after layer norm and dropout;
    float32 whatever `compute_dtype`.
    """
    return self.embedding_output

  def get_embedding_table(self):
    """float32 Variable of shape [vocab_size, hidden_size]: word embeddings."""
    return self.embedding_table


_COMPUTE_DTYPES = (tf.float32, tf.bfloat16, tf.float16)


def _cast(tensor, dtype):
  """`tensor` (or a variable's value) in `dtype`; unchanged when it already is.

  Returning the very tensor when no cast is needed keeps a float32 model's
  graph exactly the reference's.
  """
  if tensor.dtype.base_dtype == dtype:
    return tensor
  return tf.cast(tensor, dtype)


# ----------------------------------------------------------------------------
# Activations
# ----------------------------------------------------------------------------


def gelu(x):
  """GELU, tanh approximation, as the released models were trained.

  0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))
  (Hendrycks and Gimpel 2016, "Gaussian Error Linear Units", section 2.)
  Built in this op order under a "Gelu" name scope, in the name scope of the
  dense layer it follows: the shape Grappler's remapper (TF 2.15 and 2.21)
  fuses with the matmul and bias into one oneDNN kernel when nothing else
  reads the pre-activation, as in inference (7% faster in fp32, 18% in bf16
  for BERT-Base on an AVX512-BF16 CPU; docs/performance.md). Unfused, the
  values are the reference's bit for bit (it wrote x * (0.5 * (1 + t)), and
  halving is exact); fused, they differ by float32 rounding (oneDNN's tanh).

  Args:
    x: float Tensor of any shape.

  Returns:
    float Tensor of the same shape.
  """
  with tf.name_scope("Gelu"):
    return 0.5 * x * (1.0 + tf.tanh(
        math.sqrt(2.0 / math.pi) * (x + 0.044715 * tf.pow(x, 3))))


def gelu_exact(x):
  """GELU, exact erf form: 0.5 * x * (1 + erf(x / sqrt(2))).

  The form most Hugging Face BERT checkpoints use (`hidden_act: "gelu"` there).

  Args:
    x: float Tensor of any shape.

  Returns:
    float Tensor of the same shape.
  """
  return 0.5 * x * (1.0 + tf.math.erf(x / math.sqrt(2.0)))


_ACTIVATIONS = {
    "linear": None,
    "relu": tf.nn.relu,
    "gelu": gelu,
    "gelu_exact": gelu_exact,
    "tanh": tf.tanh,
}


def get_activation(activation_string):
  """Maps an activation name to a function.

  Args:
    activation_string: "linear", "relu", "gelu" (tanh approximation),
      "gelu_exact" (erf form) or "tanh", case-insensitive; None or "" for
      identity; a callable is returned unchanged.

  Returns:
    A function of one Tensor, or None for identity (as in the reference, where
    None means "no activation" to the dense layers).

  Raises:
    ValueError: if the name is unknown, or the argument is neither a string,
      None, nor a callable.
  """
  if activation_string is None:
    return None
  if not isinstance(activation_string, str):
    if callable(activation_string):
      return activation_string
    raise ValueError("Activation must be a name or a callable, got %r" %
                     (activation_string,))
  if not activation_string:
    return None
  name = activation_string.lower()
  if name not in _ACTIVATIONS:
    raise ValueError("Unsupported activation: %r (expected one of %s)" %
                     (activation_string, ", ".join(sorted(_ACTIVATIONS))))
  return _ACTIVATIONS[name]


# ----------------------------------------------------------------------------
# Checkpoints
# ----------------------------------------------------------------------------


def get_assignment_map_from_checkpoint(tvars, init_checkpoint):
  """Maps the graph variables that the checkpoint holds, by name.

  Only names are compared (the ":0" output suffix removed); graph variables
  absent from the checkpoint (new task heads) are left out and keep their
  initializers. A shape mismatch is reported by `tf.train.init_from_checkpoint`
  (ValueError), as in the reference.

  Args:
    tvars: list of graph Variables (usually `tf.trainable_variables()`).
    init_checkpoint: str, checkpoint path prefix (e.g. ".../bert_model.ckpt").

  Returns:
    (assignment_map, initialized_variable_names): an OrderedDict
    checkpoint name -> graph variable name, in checkpoint order, for
    `tf.train.init_from_checkpoint`; and a dict whose keys are every mapped
    name both without and with ":0" (for `*INIT_FROM_CKPT*` logging).
  """
  name_to_variable = collections.OrderedDict()
  for var in tvars:
    name_to_variable[variable_name(var.name)] = var

  assignment_map = collections.OrderedDict()
  initialized_variable_names = {}
  for name, _ in tf.train.list_variables(init_checkpoint):
    if name not in name_to_variable:
      continue
    assignment_map[name] = name
    initialized_variable_names[name] = 1
    initialized_variable_names[name + ":0"] = 1
  return assignment_map, initialized_variable_names


def variable_name(name):
  """A variable's name without its output suffix: 'bert/x/kernel:0' ->
  'bert/x/kernel' (the name checkpoints use)."""
  match = re.match(r"^(.*):\d+$", name)
  return match.group(1) if match else name


# ----------------------------------------------------------------------------
# Building blocks
# ----------------------------------------------------------------------------


class DropoutSeed(object):
  """The key of stateless dropout draws: each `dropout` given this value
  draws with the key folded with its own number (1, 2, ... in the order the
  graph builds them), so its masks depend on the key alone, not on what
  the process drew before. One value per model built.
  """

  def __init__(self, make_key):
    """`make_key()`: the key, an int32 or int64 Tensor of shape [2] (a
    stateless op's seed); called at the first dropout, so a model without
    dropout gets no extra ops."""
    self._make_key = make_key
    self._key = None
    self._sites = 0

  def next_key(self):
    """The [2] seed of the next dropout site."""
    if self._key is None:
      self._key = self._make_key()
    self._sites += 1
    return tf.random.experimental.stateless_fold_in(self._key, self._sites)


def dropout(input_tensor, dropout_prob, seed=None):
  """Drops each value with probability `dropout_prob` (and rescales the rest).

  float32 input: `tf.nn.dropout`, as the reference. bfloat16 or float16
  input: the same mask rule (keep where a uniform number >= the rate) and
  scale 1 / (1 - rate), with the uniform numbers drawn in float32; half
  the op time of drawing bfloat16 ones on an AVX512-BF16 CPU. With `seed`,
  that rule on float32 numbers drawn by `tf.random.stateless_uniform`.

  Args:
    input_tensor: float Tensor of any shape.
    dropout_prob: float in [0, 1), the chance of dropping a value; None or 0.0
      returns `input_tensor` unchanged.
    seed: (optional) `DropoutSeed`; None: stateful draws.

  Returns:
    float Tensor of the same shape.
  """
  if dropout_prob is None or dropout_prob == 0.0:
    return input_tensor
  if input_tensor.dtype == tf.float32 and seed is None:
    return tf.nn.dropout(input_tensor, rate=dropout_prob)
  with tf.name_scope("dropout"):
    shape = tf.shape(input_tensor)
    if seed is None:
      uniform = tf.random.uniform(shape)
    else:
      uniform = tf.random.stateless_uniform(shape, seed.next_key())
    keep = uniform >= dropout_prob
    scale = tf.cast(1.0 / (1.0 - dropout_prob), input_tensor.dtype)
    return input_tensor * scale * tf.cast(keep, input_tensor.dtype)


def layer_norm(input_tensor, name=None):
  """Layer normalization over the last axis (Ba et al. 2016).

  Variables `<scope>/beta` (zeros) and `<scope>/gamma` (ones), float32 of
  shape [width], under the variable scope `name` (default "LayerNorm", the
  name `tf.contrib.layers.layer_norm` gave them in the released checkpoints).
  Epsilon 1e-12, as in the reference. The statistics are computed in float32
  whatever the input dtype (a bfloat16 variance loses too many bits).

  Args:
    input_tensor: float Tensor of shape [..., width] with a static width.
    name: (optional) str, variable scope name.

  Returns:
    Tensor of the same shape and dtype as `input_tensor`.
  """
  width = input_tensor.shape.as_list()[-1]
  with tf.variable_scope(name, default_name="LayerNorm"):
    beta = tf.get_variable(
        "beta", shape=[width], dtype=tf.float32,
        initializer=tf.zeros_initializer())
    gamma = tf.get_variable(
        "gamma", shape=[width], dtype=tf.float32,
        initializer=tf.ones_initializer())
    inputs = _cast(input_tensor, tf.float32)
    mean, variance = tf.nn.moments(inputs, axes=[-1], keepdims=True)
    scale = tf.math.rsqrt(variance + 1e-12) * gamma
    return _cast(inputs * scale + (beta - mean * scale), input_tensor.dtype)


def layer_norm_and_dropout(input_tensor, dropout_prob, name=None, seed=None):
  """`layer_norm` then `dropout`; see both."""
  return dropout(layer_norm(input_tensor, name), dropout_prob, seed)


def create_initializer(initializer_range=0.02):
  """Truncated-normal initializer with stddev `initializer_range`."""
  return tf.truncated_normal_initializer(stddev=initializer_range)


def dense_layer(input_tensor, units, activation=None, initializer_range=0.02,
                name="dense", cast_weights_once=False):
  """Fully connected layer on a matrix, with the reference's variable names.

  Variables `<name>/kernel` [in_width, units] (truncated normal) and
  `<name>/bias` [units] (zeros), float32, as `tf.layers.dense` named them in
  the released checkpoints. They are cast to the input's dtype for the
  matmul, which runs in that dtype: on every step, or with
  `cast_weights_once` (a bfloat16 or float16 input) once, into non-trainable
  local variables `<name>/kernel_<dtype>` and `<name>/bias_<dtype>` filled
  from the float32 ones when the local variables are initialized (a
  `Scaffold` does that after restoring the checkpoint). The copies are not
  saved and do not follow later updates, so only a graph that never trains
  may use them; they save the casts of every weight on every step (8% of a
  bf16 BERT-Base inference step on an AVX512-BF16 CPU; docs/performance.md).

  Args:
    input_tensor: float Tensor of shape [batch_size, in_width] (static width);
      float32, bfloat16 or float16.
    units: int, output width.
    activation: (optional) function applied to the output, in the layer's
      name scope (see `gelu`); None = identity.
    initializer_range: float, stddev of the kernel's initializer.
    name: str, variable scope of the two variables.
    cast_weights_once: bool, see above; ignored for a float32 input.

  Returns:
    Tensor of shape [batch_size, units], in the dtype of `input_tensor`.
  """
  in_width = input_tensor.shape.as_list()[-1]
  dtype = input_tensor.dtype
  with tf.variable_scope(name):
    kernel = tf.get_variable(
        "kernel", shape=[in_width, units],
        initializer=create_initializer(initializer_range))
    bias = tf.get_variable(
        "bias", shape=[units], initializer=tf.zeros_initializer())
    if cast_weights_once and dtype != kernel.dtype.base_dtype:
      kernel, bias = (_cast_once(kernel, dtype), _cast_once(bias, dtype))
    output = tf.nn.bias_add(tf.matmul(input_tensor, _cast(kernel, dtype)),
                            _cast(bias, dtype))
    if activation is not None:
      output = activation(output)
  return output


def _cast_once(variable, dtype):
  """A non-trainable local variable holding `variable` cast to `dtype`.

  Named after it (`kernel` -> `kernel_bfloat16`), in the current variable
  scope; its initializer reads `variable`, so it runs with the local
  variables' initializer, after the global ones are restored or initialized.
  """
  short_name = variable.op.name.split("/")[-1]
  return tf.get_variable(
      "%s_%s" % (short_name, dtype.name), initializer=tf.cast(variable, dtype),
      trainable=False, collections=[tf.GraphKeys.LOCAL_VARIABLES])


def embedding_lookup(input_ids,
                     vocab_size,
                     embedding_size=128,
                     initializer_range=0.02,
                     word_embedding_name="word_embeddings",
                     use_one_hot_embeddings=False,
                     compute_dtype=tf.float32):
  """Looks word ids up in a new embedding table.

  Args:
    input_ids: int32 Tensor of shape [batch_size, seq_length] (or
      [batch_size, seq_length, k], giving [batch_size, seq_length,
      k * embedding_size]).
    vocab_size: int, rows of the table.
    embedding_size: int, columns of the table.
    initializer_range: float, stddev of the table's initializer.
    word_embedding_name: str, name of the table variable.
    use_one_hot_embeddings: bool; one-hot matmul (TPU-friendly) instead of a
      gather. Same results.
    compute_dtype: (optional) dtype of the output (float32, bfloat16 or
      float16); the table stays a float32 variable, cast on read.

  Returns:
    (output, embedding_table): Tensor of shape [batch_size, seq_length,
    embedding_size] in `compute_dtype` and the float32 Variable [vocab_size,
    embedding_size].

  Raises:
    ValueError: if `input_ids` is not rank 2 or 3.
  """
  if input_ids.shape.ndims == 2:
    input_ids = tf.expand_dims(input_ids, axis=[-1])  # [B, T, 1]
  input_shape = get_shape_list(input_ids, expected_rank=3, name="input_ids")

  embedding_table = tf.get_variable(
      name=word_embedding_name,
      shape=[vocab_size, embedding_size],
      initializer=create_initializer(initializer_range))

  flat_ids = tf.reshape(input_ids, [-1])  # [B*T*k]
  if use_one_hot_embeddings:
    one_hot_ids = tf.one_hot(flat_ids, depth=vocab_size,
                             dtype=compute_dtype)  # [B*T*k, vocab]
    output = tf.matmul(one_hot_ids, _cast(embedding_table, compute_dtype))
  else:
    # Gather float32 rows, then cast only those.
    output = _cast(tf.gather(embedding_table, flat_ids),
                   compute_dtype)  # [B*T*k, E]

  output = tf.reshape(  # [B, T, k*E]
      output, input_shape[0:-1] + [input_shape[-1] * embedding_size])
  return output, embedding_table


def embedding_postprocessor(input_tensor,
                            use_token_type=False,
                            token_type_ids=None,
                            token_type_vocab_size=16,
                            token_type_embedding_name="token_type_embeddings",
                            use_position_embeddings=True,
                            position_embedding_name="position_embeddings",
                            initializer_range=0.02,
                            max_position_embeddings=512,
                            dropout_prob=0.1,
                            position_ids=None,
                            dropout_seed=None):
  """Adds token type and absolute position embeddings, then layer norm, dropout.

  The tables are float32 variables, cast on read to the dtype of
  `input_tensor`, in which the sums are computed.

  Args:
    input_tensor: float Tensor of shape [batch_size, seq_length, width].
    use_token_type: bool, add `token_type_ids` embeddings.
    token_type_ids: (optional) int32 Tensor of shape [batch_size, seq_length];
      required when `use_token_type`.
    token_type_vocab_size: int, rows of the token type table.
    token_type_embedding_name: str, name of that table variable.
    use_position_embeddings: bool, add learned absolute position embeddings.
    position_embedding_name: str, name of that table variable.
    initializer_range: float, stddev of the tables' initializer.
    max_position_embeddings: int, rows of the position table.
    dropout_prob: float, chance of dropping a value of the output.
    position_ids: (optional) int32 Tensor [batch_size, seq_length], each
      token's row of the position table (packed sequences restart at 0);
      default 0..seq_length-1 for every row.
    dropout_seed: (optional) `DropoutSeed` of the dropout; None: stateful.

  Returns:
    Tensor of the same shape and dtype as `input_tensor`.

  Raises:
    ValueError: if `input_tensor` is not rank 3, if `use_token_type` is set
      without `token_type_ids`, or if the static seq_length exceeds
      `max_position_embeddings` (an unknown length is checked at run time).
  """
  batch_size, seq_length, width = get_shape_list(
      input_tensor, expected_rank=3, name="input_tensor")
  output = input_tensor
  dtype = input_tensor.dtype

  if use_token_type:
    if token_type_ids is None:
      raise ValueError("token_type_ids must be given when use_token_type=True")
    token_type_table = tf.get_variable(
        name=token_type_embedding_name,
        shape=[token_type_vocab_size, width],
        initializer=create_initializer(initializer_range))
    # The type vocabulary is small: a one-hot matmul is fast on every device.
    flat_types = tf.reshape(token_type_ids, [-1])  # [B*T]
    one_hot_types = tf.one_hot(flat_types, depth=token_type_vocab_size,
                               dtype=dtype)
    type_embeddings = tf.matmul(one_hot_types,
                                _cast(token_type_table, dtype))  # [B*T, W]
    output += tf.reshape(type_embeddings, [batch_size, seq_length, width])

  if use_position_embeddings:
    seq_check = _check_seq_length(seq_length, max_position_embeddings)
    full_position_table = tf.get_variable(
        name=position_embedding_name,
        shape=[max_position_embeddings, width],
        initializer=create_initializer(initializer_range))
    if position_ids is not None:  # Each token's own row: [B, T, W].
      with tf.control_dependencies(seq_check):
        output += _cast(tf.gather(full_position_table, position_ids), dtype)
    else:
      with tf.control_dependencies(seq_check):
        # Rows 0..T-1 of the table, broadcast over the batch: [1, T, W].
        position_embeddings = tf.slice(full_position_table, [0, 0],
                                       [seq_length, -1])
      output += tf.expand_dims(_cast(position_embeddings, dtype), axis=0)

  return layer_norm_and_dropout(output, dropout_prob, seed=dropout_seed)


def _check_seq_length(seq_length, max_position_embeddings):
  """Rejects sequences longer than the position table.

  A static length is checked now (ValueError, graph construction); an unknown
  one gets a run-time assertion, whose op is returned in a list (empty list
  for a static length) for use as a control dependency.

  The reference only asserted at run time (InvalidArgumentError) even for a
  static length; failing at graph construction is this project's choice.
  """
  if isinstance(seq_length, int):
    if seq_length > max_position_embeddings:
      raise ValueError(
          "Sequence length %d is longer than max_position_embeddings %d of "
          "the BERT config: use sequences of at most %d tokens "
          "(e.g. --max_seq_length=%d) or a model with more position "
          "embeddings." % (seq_length, max_position_embeddings,
                           max_position_embeddings, max_position_embeddings))
    return []
  return [tf.debugging.assert_less_equal(
      seq_length, tf.constant(max_position_embeddings, dtype=seq_length.dtype),
      message="Sequence length is longer than max_position_embeddings %d" %
      max_position_embeddings)]


def create_attention_mask_from_input_mask(from_tensor, to_mask,
                                          dtype=tf.float32,
                                          block_diagonal=False):
  """Builds the [B, F, T] attention mask from a [B, T] padding mask.

  Every query position may attend to every real key position; padded query
  rows are left as they are (their outputs are ignored downstream).

  Args:
    from_tensor: Tensor of shape [batch_size, from_seq_length, ...] (rank 2
      or 3; only its first two dimensions are used).
    to_mask: int32 Tensor of shape [batch_size, to_seq_length], 1 = real.
    dtype: (optional) float dtype of the mask, the model's compute dtype
      (0 and 1 are exact in every float dtype).
    block_diagonal: bool; True: `to_mask` holds segment numbers (0 =
      padding) of packed sequences, `from_tensor` is the same row, and
      mask[b, i, j] = (to_mask[b, j] > 0) & (to_mask[b, i] == to_mask[b, j]).

  Returns:
    Tensor of shape [batch_size, from_seq_length, to_seq_length] in `dtype`.

  Raises:
    ValueError: on wrong ranks.
  """
  from_shape = get_shape_list(from_tensor, expected_rank=[2, 3],
                              name="from_tensor")
  batch_size, from_seq_length = from_shape[0], from_shape[1]
  to_shape = get_shape_list(to_mask, expected_rank=2, name="to_mask")
  to_seq_length = to_shape[1]

  if block_diagonal:
    same = tf.equal(to_mask[:, :, None], to_mask[:, None, :])  # [B, T, T]
    return tf.cast(same & (to_mask[:, None, :] > 0), dtype)
  keys = tf.cast(tf.reshape(to_mask, [batch_size, 1, to_seq_length]),
                 dtype)  # [B, 1, T]
  queries = tf.ones(shape=[batch_size, from_seq_length, 1],
                    dtype=dtype)  # [B, F, 1]
  return queries * keys  # [B, F, T]


def _split_heads(tensor_2d, batch_size, seq_length, num_heads, head_size):
  """[B*S, N*H] -> [B, N, S, H]."""
  tensor = tf.reshape(tensor_2d, [batch_size, seq_length, num_heads,
                                  head_size])  # [B, S, N, H]
  return tf.transpose(tensor, [0, 2, 1, 3])  # [B, N, S, H]


def attention_layer(from_tensor,
                    to_tensor,
                    attention_mask=None,
                    num_attention_heads=1,
                    size_per_head=512,
                    query_act=None,
                    key_act=None,
                    value_act=None,
                    attention_probs_dropout_prob=0.0,
                    initializer_range=0.02,
                    do_return_2d_tensor=False,
                    batch_size=None,
                    from_seq_length=None,
                    to_seq_length=None,
                    cast_weights_once=False,
                    dropout_seed=None):
  """Multi-head scaled dot-product attention (Vaswani et al. 2017, 3.2).

  Variables `query`, `key`, `value` (each `kernel` [width, N*H], `bias`
  [N*H]) in the current scope. Scores are scaled by 1/sqrt(H); masked keys
  get -10000 added before the softmax. The projections, both attention
  matmuls, the scaling and the masking run in the dtype of `from_tensor`
  (the same scores as scaling in float32 when 1/sqrt(H) is a power of two,
  as for H = 64), the softmax in float32.

  Args:
    from_tensor: float Tensor [B, F, from_width], or [B*F, from_width] with
      `batch_size` and `from_seq_length` given.
    to_tensor: float Tensor [B, T, to_width], or [B*T, to_width] with
      `batch_size` and `to_seq_length` given.
    attention_mask: (optional) int32 or float Tensor of shape [B, F, T], 1 for
      keys a query may attend to, 0 for masked keys.
    num_attention_heads: int, N.
    size_per_head: int, H.
    query_act, key_act, value_act: (optional) activations of the projections.
    attention_probs_dropout_prob: float, chance of dropping an attention
      probability.
    initializer_range: float, stddev of the kernels' initializer.
    do_return_2d_tensor: bool; return [B*F, N*H] instead of [B, F, N*H].
    batch_size, from_seq_length, to_seq_length: (optional) ints or scalar
      Tensors, required when the inputs are 2-D.
    cast_weights_once: bool; see `dense_layer` (inference graphs only).
    dropout_seed: (optional) `DropoutSeed` of the dropout; None: stateful.

  Returns:
    Tensor [B, F, N*H] (or [B*F, N*H] with `do_return_2d_tensor`), in the
    dtype of `from_tensor`.

  Raises:
    ValueError: if the inputs' ranks differ or are not 2 or 3, or if 2-D
      inputs come without `batch_size`, `from_seq_length`, `to_seq_length`.
  """
  from_shape = get_shape_list(from_tensor, expected_rank=[2, 3],
                              name="from_tensor")
  to_shape = get_shape_list(to_tensor, expected_rank=[2, 3], name="to_tensor")
  if len(from_shape) != len(to_shape):
    raise ValueError("from_tensor (rank %d) and to_tensor (rank %d) must have "
                     "the same rank" % (len(from_shape), len(to_shape)))
  if len(from_shape) == 3:
    batch_size, from_seq_length, to_seq_length = (
        from_shape[0], from_shape[1], to_shape[1])
  elif batch_size is None or from_seq_length is None or to_seq_length is None:
    raise ValueError("2-D from_tensor/to_tensor need batch_size, "
                     "from_seq_length and to_seq_length")

  from_2d = reshape_to_matrix(from_tensor)  # [B*F, from_width]
  to_2d = reshape_to_matrix(to_tensor)  # [B*T, to_width]
  width = num_attention_heads * size_per_head
  query = dense_layer(from_2d, width, query_act, initializer_range, "query",
                      cast_weights_once)
  key = dense_layer(to_2d, width, key_act, initializer_range, "key",
                    cast_weights_once)
  value = dense_layer(to_2d, width, value_act, initializer_range, "value",
                      cast_weights_once)

  query = _split_heads(query, batch_size, from_seq_length,
                       num_attention_heads, size_per_head)  # [B, N, F, H]
  key = _split_heads(key, batch_size, to_seq_length,
                     num_attention_heads, size_per_head)  # [B, N, T, H]
  value = _split_heads(value, batch_size, to_seq_length,
                       num_attention_heads, size_per_head)  # [B, N, T, H]

  # Scaled and masked in the matmul's dtype (float32: the reference's
  # arithmetic), the three ops Grappler's remapper fuses into one oneDNN
  # batched matmul (in bfloat16 too; a cast between would stop it).
  scores = tf.matmul(query, key, transpose_b=True)  # [B, N, F, T]
  scores *= tf.constant(1.0 / math.sqrt(float(size_per_head)), scores.dtype)
  if attention_mask is not None:
    mask = tf.expand_dims(tf.cast(attention_mask, scores.dtype), 1)  # [B,1,F,T]
    # Kept for parity: a finite -10000 adder rather than -inf.
    scores += (1.0 - mask) * -10000.0
  probs = _cast(tf.nn.softmax(_cast(scores, tf.float32)),
                value.dtype)  # [B, N, F, T]
  # Kept for parity: dropout on whole attention probabilities (keys dropped).
  probs = dropout(probs, attention_probs_dropout_prob, dropout_seed)

  context = tf.matmul(probs, value)  # [B, N, F, H]
  context = tf.transpose(context, [0, 2, 1, 3])  # [B, F, N, H]
  if do_return_2d_tensor:
    return tf.reshape(context, [batch_size * from_seq_length, width])
  return tf.reshape(context, [batch_size, from_seq_length, width])


def _transformer_layer(layer_input, attention_mask, batch_size, seq_length,
                       hidden_size, num_attention_heads, intermediate_size,
                       intermediate_act_fn, hidden_dropout_prob,
                       attention_probs_dropout_prob, initializer_range,
                       cast_weights_once, dropout_seed=None):
  """One post-layer-norm Transformer layer on [B*T, W] activations."""
  with tf.variable_scope("attention"):
    with tf.variable_scope("self"):
      attention_output = attention_layer(
          from_tensor=layer_input,
          to_tensor=layer_input,
          attention_mask=attention_mask,
          num_attention_heads=num_attention_heads,
          size_per_head=hidden_size // num_attention_heads,
          attention_probs_dropout_prob=attention_probs_dropout_prob,
          initializer_range=initializer_range,
          do_return_2d_tensor=True,
          batch_size=batch_size,
          from_seq_length=seq_length,
          to_seq_length=seq_length,
          cast_weights_once=cast_weights_once,
          dropout_seed=dropout_seed)  # [B*T, W]
    with tf.variable_scope("output"):
      attention_output = dense_layer(attention_output, hidden_size, None,
                                     initializer_range, "dense",
                                     cast_weights_once)
      attention_output = dropout(attention_output, hidden_dropout_prob,
                                 dropout_seed)
      attention_output = layer_norm(attention_output + layer_input)

  with tf.variable_scope("intermediate"):
    intermediate_output = dense_layer(attention_output, intermediate_size,
                                      intermediate_act_fn, initializer_range,
                                      "dense", cast_weights_once)  # [B*T, I]
  with tf.variable_scope("output"):
    layer_output = dense_layer(intermediate_output, hidden_size, None,
                               initializer_range, "dense",
                               cast_weights_once)  # [B*T, W]
    layer_output = dropout(layer_output, hidden_dropout_prob, dropout_seed)
    return layer_norm(layer_output + attention_output)


def transformer_model(input_tensor,
                      attention_mask=None,
                      hidden_size=768,
                      num_hidden_layers=12,
                      num_attention_heads=12,
                      intermediate_size=3072,
                      intermediate_act_fn=gelu,
                      hidden_dropout_prob=0.1,
                      attention_probs_dropout_prob=0.1,
                      initializer_range=0.02,
                      do_return_all_layers=False,
                      cast_weights_once=False,
                      dropout_seed=None):
  """Stack of post-layer-norm Transformer layers (Vaswani et al. 2017, 3.1).

  Variables under `layer_<i>/...` in the current scope (see the module
  docstring). Activations are kept as [B*T, W] matrices between layers (kept
  for parity: the reference's 2-D layout, cheap on TPU) and reshaped to
  [B, T, W] only for the returned outputs.

  Args:
    input_tensor: float Tensor of shape [batch_size, seq_length, hidden_size].
    attention_mask: (optional) int32 or float Tensor of shape [batch_size,
      seq_length, seq_length], 1 where attention is allowed.
    hidden_size: int, W.
    num_hidden_layers: int, number of layers.
    num_attention_heads: int, N; must divide `hidden_size`.
    intermediate_size: int, feed-forward width.
    intermediate_act_fn: function or None, feed-forward activation.
    hidden_dropout_prob: float, chance of dropping a value of each sub-layer
      output.
    attention_probs_dropout_prob: float, chance of dropping an attention
      probability.
    initializer_range: float, stddev of the kernels' initializer.
    do_return_all_layers: bool; return every layer's output, not just the
      last.
    cast_weights_once: bool; see `dense_layer` (inference graphs only).
    dropout_seed: (optional) `DropoutSeed` of every dropout; None: stateful.

  Returns:
    float Tensor [batch_size, seq_length, hidden_size] (the last layer), or a
    list of them, one per layer, with `do_return_all_layers`.

  Raises:
    ValueError: if `hidden_size` is not a multiple of `num_attention_heads`,
      if the input width differs from `hidden_size`, or on a wrong rank.
  """
  if hidden_size % num_attention_heads != 0:
    raise ValueError(
        "hidden_size %d is not a multiple of num_attention_heads %d" %
        (hidden_size, num_attention_heads))
  input_shape = get_shape_list(input_tensor, expected_rank=3,
                               name="input_tensor")
  batch_size, seq_length, input_width = input_shape
  if input_width != hidden_size:
    raise ValueError("input_tensor width %s must equal hidden_size %d (the "
                     "residual connections add them)" %
                     (input_width, hidden_size))

  layer_output = reshape_to_matrix(input_tensor)  # [B*T, W]
  all_layer_outputs = []
  for layer_idx in range(num_hidden_layers):
    with tf.variable_scope("layer_%d" % layer_idx):
      layer_output = _transformer_layer(
          layer_output, attention_mask, batch_size, seq_length, hidden_size,
          num_attention_heads, intermediate_size, intermediate_act_fn,
          hidden_dropout_prob, attention_probs_dropout_prob,
          initializer_range, cast_weights_once, dropout_seed)
      all_layer_outputs.append(layer_output)

  if do_return_all_layers:
    return [reshape_from_matrix(out, input_shape) for out in all_layer_outputs]
  return reshape_from_matrix(layer_output, input_shape)


# ----------------------------------------------------------------------------
# Shape helpers
# ----------------------------------------------------------------------------


def get_shape_list(tensor, expected_rank=None, name=None):
  """Returns a tensor's shape as a list, static dims as ints.

  Args:
    tensor: Tensor whose shape to read.
    expected_rank: (optional) int or list of ints; a rank mismatch raises.
    name: (optional) str, the tensor's name for error messages.

  Returns:
    List with one entry per dimension: a Python int where the dimension is
    known statically, else a scalar int32 Tensor (`tf.shape(tensor)[i]`).

  Raises:
    ValueError: if the rank is not `expected_rank`.
  """
  if expected_rank is not None:
    assert_rank(tensor, expected_rank, name)
  shape = tensor.shape.as_list()
  unknown = [i for i, dim in enumerate(shape) if dim is None]
  if not unknown:
    return shape
  dynamic_shape = tf.shape(tensor)
  for i in unknown:
    shape[i] = dynamic_shape[i]
  return shape


def reshape_to_matrix(input_tensor):
  """[d0, ..., dn-1, width] -> [d0*...*dn-1, width]; rank 2 passes through.

  Raises:
    ValueError: if the rank is below 2.
  """
  ndims = input_tensor.shape.ndims
  if ndims is None or ndims < 2:
    raise ValueError("reshape_to_matrix needs a tensor of rank >= 2, got "
                     "shape %s" % (input_tensor.shape,))
  if ndims == 2:
    return input_tensor
  width = input_tensor.shape.as_list()[-1]
  return tf.reshape(input_tensor, [-1, width])


def reshape_from_matrix(output_tensor, orig_shape_list):
  """[d0*...*dn-1, width] -> orig_shape_list[:-1] + [width].

  Args:
    output_tensor: Tensor of shape [M, width].
    orig_shape_list: list of ints / scalar Tensors (as from `get_shape_list`)
      of the shape before `reshape_to_matrix`.
  """
  if len(orig_shape_list) == 2:
    return output_tensor
  output_shape = get_shape_list(output_tensor)
  return tf.reshape(output_tensor, orig_shape_list[0:-1] + [output_shape[-1]])


def assert_rank(tensor, expected_rank, name=None):
  """Raises ValueError unless `tensor` has the expected (static) rank.

  Args:
    tensor: Tensor to check.
    expected_rank: int or list of ints.
    name: (optional) str, name for the message; default the tensor's name.

  Raises:
    ValueError: naming the tensor, its rank and the expected rank(s).
  """
  if name is None:
    name = getattr(tensor, "name", repr(tensor))
  if isinstance(expected_rank, (int, np.integer)):
    allowed = [int(expected_rank)]
  else:
    allowed = [int(rank) for rank in expected_rank]
  actual = tensor.shape.ndims
  if actual not in allowed:
    raise ValueError(
        "Tensor %s (shape %s) has rank %s, expected rank %s (in variable "
        "scope '%s')" % (name, tensor.shape, actual,
                         allowed[0] if len(allowed) == 1 else allowed,
                         tf.get_variable_scope().name))
