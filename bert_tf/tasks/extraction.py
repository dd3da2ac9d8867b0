"""extract_features.py's examples, inputs, head and output lines.

Input lines are examples (`text_a ||| text_b` a pair); their features feed
the encoder from memory (TPU) or lazily from a generator; `LayersHead`
predicts the layers (or a pooled vector); each example is written as the
reference's JSON line (`format_output_line`).
"""

import collections
import dataclasses
import json
import re
import threading
from typing import Optional

from absl import logging
import tensorflow.compat.v1 as tf

from bert_tf import io as io_utils
from bert_tf.tasks import features as feature_utils
from bert_tf.tasks import pooling as pooling_lib
from bert_tf.train import input_fn as input_utils
from bert_tf.train import lengths as lengths_lib
from bert_tf.train import model_fn as model_fn_utils
from bert_tf.train import packing
from bert_tf.train import spec as spec_lib
import modeling

__all__ = ["InputExample", "InputFeatures", "iter_examples", "read_examples",
           "convert_single_example", "iter_features",
           "convert_examples_to_features", "input_fn_builder",
           "packed_input_fn_builder", "streaming_input_fn_builder", "LayersHead", "model_fn_builder",
           "format_output_line", "PendingFeatures"]

# A pair is written `text_a ||| text_b`; the pattern is greedy, so the last
# separator wins (reference behaviour).
_PAIR_PATTERN = re.compile(r"^(.*) \|\|\| (.*)$")


@dataclasses.dataclass(eq=False)
class InputExample:
  """One input line: `text_a`, and `text_b` (None unless a pair)."""

  unique_id: int
  text_a: str
  text_b: Optional[str]


@dataclasses.dataclass(eq=False)
class InputFeatures:
  """The model inputs of one example, padded to `max_seq_length`.

  Attributes:
    unique_id: int, the line's index.
    tokens: list of str, `[CLS] a [SEP] (b [SEP])`, unpadded.
    input_ids, input_mask, input_type_ids: lists of `max_seq_length` ints.
  """

  unique_id: int
  tokens: list
  input_ids: list
  input_mask: list
  input_type_ids: list


def iter_examples(input_file):
  """Yields one `InputExample` per line of `input_file` (`io_utils.read_lines`,
  stripped; a blank line is `[CLS] [SEP]`), `unique_id` from 0.

  Raises:
    ValueError: when the file does not exist.
  """
  if not tf.io.gfile.exists(input_file):
    raise ValueError("--input_file: %s does not exist" % input_file)
  for unique_id, (_, line) in enumerate(io_utils.read_lines(input_file)):
    line = line.strip()
    match = _PAIR_PATTERN.match(line)
    if match:
      yield InputExample(unique_id, match.group(1), match.group(2))
    else:
      yield InputExample(unique_id, line, None)


def read_examples(input_file):
  """Reads all lines of `input_file` into a list of `InputExample`s."""
  return list(iter_examples(input_file))


def convert_single_example(example, seq_length, tokenizer):
  """The `InputFeatures` of one example: tokenized, truncated, framed and
  padded to `seq_length`."""
  tokens_a = tokenizer.tokenize(example.text_a)
  tokens_b = tokenizer.tokenize(example.text_b) if example.text_b else None
  tokens, segment_ids = feature_utils.pack_tokens(tokens_a, tokens_b,
                                                  seq_length)
  input_ids = tokenizer.convert_tokens_to_ids(tokens)
  input_ids, input_mask, segment_ids = feature_utils.pad_input(
      input_ids, segment_ids, seq_length)
  return InputFeatures(example.unique_id, tokens, input_ids, input_mask,
                       segment_ids)


def iter_features(examples, seq_length, tokenizer):
  """Lazily converts `examples` (any iterable) to `InputFeatures`."""
  for example in examples:
    yield convert_single_example(example, seq_length, tokenizer)


def convert_examples_to_features(examples, seq_length, tokenizer):
  """Converts a list of `InputExample`s to a list of `InputFeatures`."""
  return list(iter_features(examples, seq_length, tokenizer))


def _feature_dataset_types(seq_length):
  shapes = {"unique_ids": tf.TensorShape([]),
            "input_ids": tf.TensorShape([seq_length]),
            "input_mask": tf.TensorShape([seq_length]),
            "input_type_ids": tf.TensorShape([seq_length])}
  types = {name: tf.int32 for name in shapes}
  return types, shapes


def _feature_dict(feature):
  return {"unique_ids": feature.unique_id,
          "input_ids": feature.input_ids,
          "input_mask": feature.input_mask,
          "input_type_ids": feature.input_type_ids}


def input_fn_builder(features, seq_length):
  """An `input_fn` over in-memory `features` (the reference's form).

  Every feature is embedded in the graph as a constant, so this is for small
  inputs and TPUs (whose hosts cannot call back into this Python process).
  """
  del seq_length  # The features' own.
  return packing.rows_input_fn([_feature_dict(feature) for feature in features])


def packed_input_fn_builder(features, seq_length, max_per_row):
  """`input_fn_builder` over `features` packed into rows of `seq_length`
  (`packing.pack`, at most `max_per_row` examples a row; `LayersHead`
  then predicts rows, which `packing.unpack` returns to examples)."""
  rows = packing.pack(
      [{name: getattr(feature, name)[:len(feature.tokens)]
        for name in ("input_ids", "input_type_ids")} for feature in features],
      seq_length, max_per_row)
  logging.info("Packed %d examples into %d rows of %d tokens", len(features),
               len(rows), seq_length)
  return packing.rows_input_fn(rows)


# The [seq_length] features, which --bucket_by_length cuts.
_SEQUENCE_KEYS = ("input_ids", "input_mask", "input_type_ids")


def streaming_input_fn_builder(feature_factory, seq_length,
                               bucket_by_length=False):
  """An `input_fn(params)` pulling features lazily from
  `feature_factory()` (a fresh iterator each call), memory bounded;
  `bucket_by_length` cuts each batch to its bucket, order kept."""
  types, shapes = _feature_dataset_types(seq_length)

  def generate():
    for feature in feature_factory():
      yield _feature_dict(feature)

  def input_fn(params):
    d = tf.data.Dataset.from_generator(generate, output_types=types,
                                       output_shapes=shapes)
    d = d.batch(params["batch_size"], drop_remainder=False)
    if bucket_by_length:
      d = lengths_lib.cut_batches(d, lengths_lib.bucket_lengths(seq_length),
                                  _SEQUENCE_KEYS)
    return input_utils.without_autotune(d)

  return input_fn


class LayersHead(model_fn_utils.Head):
  """Prediction only: the encoder's layers (or a sentence vector) as they are.

  Predictions: `unique_id` (int32 [batch_size]) and, for each index `i` of
  `layer_indexes`, `layer_output_<n>` (float32 [batch_size, seq_length,
  hidden_size]) holding `get_all_encoder_layers()[i]`, `n` its position in
  `layer_indexes`; with `pooling` other than "none", `embedding` (float32
  [batch_size, hidden_size], `pooling_lib.pool`) instead of the layers.
  """

  modes = (spec_lib.ModeKeys.PREDICT,)

  def __init__(self, layer_indexes, pooling="none", l2_normalize=False):
    self.layer_indexes = layer_indexes
    self.pooling = pooling
    self.l2_normalize = l2_normalize

  def build(self, model, features, mode, update_share=None):
    del mode, update_share  # Prediction only.
    all_layers = model.get_all_encoder_layers()
    if "example_index" in features:  # Packed rows: for `packing.unpack`.
      predictions = {name: features[name]
                     for name in ("example_index", "input_mask")}
    else:
      predictions = {"unique_id": features["unique_ids"]}
    if self.pooling != "none":
      predictions["embedding"] = pooling_lib.pool(
          self.pooling, all_layers[-1], features["input_mask"],
          model.get_pooled_output(), self.l2_normalize)
      return model_fn_utils.HeadOutput(predictions=predictions)
    for n, layer_index in enumerate(self.layer_indexes):
      predictions["layer_output_%d" % n] = all_layers[layer_index]
    return model_fn_utils.HeadOutput(predictions=predictions)


def model_fn_builder(bert_config, init_checkpoint, layer_indexes, use_tpu,
                     use_one_hot_embeddings, pooling="none",
                     l2_normalize=False):
  """Returns a prediction-only `model_fn` for TPUEstimator: `LayersHead` on
  the encoder, whose segment ids come as `input_type_ids` (the reference's
  feature name here)."""

  def encoder(features, mode):
    del mode  # Prediction only: no dropout.
    return modeling.BertModel(
        config=bert_config, is_training=False,
        input_ids=features["input_ids"], input_mask=features["input_mask"],
        token_type_ids=features["input_type_ids"],
        use_one_hot_embeddings=use_one_hot_embeddings,
        **packing.encoder_inputs(features))

  return model_fn_utils.build_model_fn(
      LayersHead(layer_indexes, pooling, l2_normalize), bert_config,
      init_checkpoint, use_tpu, use_one_hot_embeddings, log_features=False,
      encoder=encoder)


def format_output_line(feature, result, layer_indexes):
  """The JSON line for one example, as the reference writes it."""
  entries = []
  for i, token in enumerate(feature.tokens):
    layers = []
    for n, layer_index in enumerate(layer_indexes):
      values = result["layer_output_%d" % n][i]
      layers.append(collections.OrderedDict([
          ("index", layer_index),
          ("values", [round(float(x), 6) for x in values])]))
    entries.append(collections.OrderedDict([("token", token),
                                            ("layers", layers)]))
  line = collections.OrderedDict([("linex_index", feature.unique_id),
                                  ("features", entries)])
  return json.dumps(line) + "\n"


class PendingFeatures:
  """Features handed to the input pipeline, awaiting their predictions.

  The generator feeding `tf.data` records each feature here; the writer pops
  them in order as predictions arrive. Only the features prefetched by the
  pipeline are held at any time.
  """

  def __init__(self, features):
    self._features = features
    self._queue = collections.deque()
    self._lock = threading.Lock()

  def __iter__(self):
    for feature in self._features:
      with self._lock:
        self._queue.append(feature)
      yield feature

  def pop(self, unique_id):
    with self._lock:
      feature = self._queue.popleft()
    if feature.unique_id != unique_id:
      raise RuntimeError("prediction for example %d arrived when %d was "
                         "expected" % (unique_id, feature.unique_id))
    return feature
