"""Extracts contextual token embeddings from a BERT checkpoint to JSON lines.

Each input line is one example; `text_a ||| text_b` makes a pair. For every
line, one JSON object is written, in input order:

  {"linex_index": i, "features": [{"token": "[CLS]", "layers": [
      {"index": -1, "values": [...]}, {"index": -2, "values": [...]}]}, ...]}

with one entry per real (unpadded) token and the activations of each layer in
`--layers` rounded to 6 decimals, as the reference release writes them.

`--pooling=mean|first_token|cls` (default none: the above) writes one vector
per line instead, from the last layer (`bert_tf/tasks/pooling.py`; a pair
pools over both segments), optionally `--l2_normalize`d:

  {"linex_index": i, "embedding": [...]}

On
CPU/GPU the input is read and tokenized lazily and the output streamed to a
temporary file renamed when complete, so memory does not grow with the input
and a killed run never leaves a partial file under the final name.

Example:
  python extract_features.py --input_file=input.txt --output_file=out.jsonl \
    --vocab_file=$BERT_DIR/vocab.txt --bert_config_file=$BERT_DIR/bert_config.json \
    --init_checkpoint=$BERT_DIR --layers=-1,-2,-3,-4 \
    --max_seq_length=128 --batch_size=8
  # Sentence embeddings (e.g. all-MiniLM-L6-v2 after convert_checkpoint.py):
  python extract_features.py ... --pooling=mean --l2_normalize
"""

from bert_tf.cli import quiet  # First: TensorFlow's start-up lines off.
quiet.when_run_as_command(__name__)

import dataclasses

from absl import flags

from bert_tf.cli import flags as cli_flags
from bert_tf.cli import flags_first
from bert_tf.tasks import pooling as pooling_lib

__all__ = ["define_flags", "InputExample", "InputFeatures", "iter_examples",
           "read_examples", "convert_single_example", "iter_features",
           "convert_examples_to_features", "input_fn_builder",
           "streaming_input_fn_builder", "LayersHead", "model_fn_builder",
           "parse_layer_indexes", "format_output_line", "main", "cli"]

FLAGS = flags.FLAGS


def define_flags():
  """Defines the script's flags (the reference's names and defaults)."""
  flags.DEFINE_string("input_file", None,
                      "Text to encode, one example per line; `a ||| b` is a "
                      "pair of texts.")
  flags.DEFINE_string("output_file", None,
                      "JSON-lines file to write, one line per input line.")
  flags.DEFINE_string("layers", "-1,-2,-3,-4",
                      "Which layers' activations to write: comma-separated "
                      "indexes, negative ones counted from the top.")
  cli_flags.define_flags("bert_config_file", "max_seq_length",
                         "bucket_by_length", "init_checkpoint", "vocab_file",
                         "do_lower_case", cli_flags.TPU_FLAGS)
  flags.DEFINE_integer("batch_size", 32, "Examples per prediction batch.")
  flags.DEFINE_bool("use_one_hot_embeddings", False,
                    "Look up embeddings as one-hot matmuls, which TPUs run "
                    "faster.")
  flags.DEFINE_enum(
      "pooling", "none", pooling_lib.MODES,
      "none: every token's vectors of every --layers layer (the "
      "reference's output). mean (over the attention mask, a pair's both "
      "segments), first_token ([CLS]'s vector) or cls (BERT's pooler "
      "output): one vector per line from the last layer, written as "
      '{"linex_index": i, "embedding": [...]}.')
  flags.DEFINE_bool("l2_normalize", False,
                    "With --pooling: divide each vector by its L2 norm.")


# Run as a command: --help and flag errors answer here, before the
# imports below load TensorFlow.
flags_first.parse_when_run_as_command(__name__, define_flags)

import collections
import json
import re
import threading
import time
from typing import Optional

from absl import logging
import tensorflow.compat.v1 as tf

from bert_tf.train import input_fn as input_utils
from bert_tf.train import lengths as lengths_lib
from bert_tf.train import model_fn as model_fn_utils
from bert_tf.train import spec as spec_lib
from bert_tf.runner import select as runner_lib
from bert_tf.tasks import features as feature_utils
from bert_tf import io as io_utils
import modeling
from bert_tf.checks.problems import Problems
from bert_tf.cli import entry
from bert_tf.cli import startup


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
  """Yields one `InputExample` per line of `input_file`, lazily.

  Lines are read by `io_utils.read_lines` (the reference's rule: they end
  at `\\n` only, invalid UTF-8 is dropped) and stripped; an empty or blank
  line still yields an example (`[CLS] [SEP]`). `unique_id` counts lines
  from 0.

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
  """Tokenizes, truncates, frames and pads one example.

  Args:
    example: an `InputExample`.
    seq_length: int, the model input length.
    tokenizer: a `tokenization.FullTokenizer`.

  Returns:
    An `InputFeatures`.
  """
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
  columns = collections.defaultdict(list)
  for feature in features:
    for name, value in _feature_dict(feature).items():
      columns[name].append(value)

  def input_fn(params):
    num = len(features)
    tensors = {name: tf.constant(values, shape=[num] + (
        [seq_length] if name != "unique_ids" else []), dtype=tf.int32)
               for name, values in columns.items()}
    d = tf.data.Dataset.from_tensor_slices(tensors)
    return input_utils.without_autotune(
        d.batch(params["batch_size"], drop_remainder=False))

  return input_fn


# The [seq_length] features, which --bucket_by_length cuts.
_SEQUENCE_KEYS = ("input_ids", "input_mask", "input_type_ids")


def streaming_input_fn_builder(feature_factory, seq_length,
                               bucket_by_length=False):
  """An `input_fn` that pulls features from a Python generator, lazily.

  Args:
    feature_factory: callable returning a fresh iterator of `InputFeatures`.
    seq_length: int.
    bucket_by_length: bool; True cuts each batch to its longest input
      rounded up to `lengths.bucket_lengths(seq_length)` (the input order
      kept).

  Returns:
    `input_fn(params)`; memory stays bounded whatever the input size.
  """
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
        use_one_hot_embeddings=use_one_hot_embeddings)

  return model_fn_utils.build_model_fn(
      LayersHead(layer_indexes, pooling, l2_normalize), bert_config,
      init_checkpoint, use_tpu, use_one_hot_embeddings, log_features=False,
      encoder=encoder)


def parse_layer_indexes(layers, num_hidden_layers):
  """Parses `--layers` and checks each index against the model's depth.

  Raises:
    ValueError: for a non-integer entry or an index outside
      [-num_hidden_layers, num_hidden_layers - 1].
  """
  indexes = []
  for piece in layers.split(","):
    try:
      index = int(piece.strip())
    except ValueError:
      raise ValueError("--layers: %r is not an integer (expected e.g. "
                       "-1,-2,-3,-4)" % piece) from None
    if not -num_hidden_layers <= index < num_hidden_layers:
      raise ValueError(
          "--layers: index %d is outside the model's %d layers (valid: %d to "
          "%d)" % (index, num_hidden_layers, -num_hidden_layers,
                   num_hidden_layers - 1))
    indexes.append(index)
  return indexes


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


class _PendingFeatures(object):
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


def _flag_problems(flag_values):
  """This script's own flag problems, as a list of messages."""
  problems = ["--%s is required" % name
              for name in ("input_file", "output_file")
              if not flag_values[name].value]
  if flag_values.batch_size < 1:
    problems.append("--batch_size=%d: expected at least 1" %
                    flag_values.batch_size)
  try:
    if flag_values.output_file:
      io_utils.check_output_file(flag_values.output_file)
    if (flag_values.input_file and
        next(iter_examples(flag_values.input_file), None) is None):
      problems.append("--input_file: %s is empty (expected one example per "
                      "line)" % flag_values.input_file)
  except ValueError as e:
    problems.append(str(e))
  return (problems + pooling_lib.flag_problems(
      flag_values.pooling, flag_values.l2_normalize, flag_values.layers,
      flag_values["layers"].present) + lengths_lib.flag_problems(
          flag_values.bucket_by_length, flag_values.use_tpu))


def _output_line(feature, result, layer_indexes, pooling):
  """The JSON line of one example: its tokens' vectors, or its pooled one."""
  if pooling == "none":
    return format_output_line(feature, result, layer_indexes)
  return pooling_lib.format_line(feature.unique_id, result["embedding"])


def _write_predictions(model_runner, input_fn, pending, layer_indexes,
                       output_file, pooling="none"):
  """Streams predictions to `output_file` atomically; returns the count."""
  count = 0
  start = time.time()
  with io_utils.atomic_write(output_file) as writer:
    for result in model_runner.predict(input_fn, yield_single_examples=True):
      feature = pending.pop(int(result["unique_id"]))
      writer.write(_output_line(feature, result, layer_indexes, pooling))
      count += 1
      if count % 1000 == 0:
        logging.info("%d examples written (%.1f/sec)", count,
                     count / max(time.time() - start, 1e-9))
  return count


def main(_):
  # 1. Flags, the runner and TPU options (no training), config,
  # checkpoint, vocabulary: every problem reported before any work.
  run, model = startup.start(FLAGS, _flag_problems(FLAGS),
                             setup_devices=False, need_output_dir=False,
                             need_checkpoint=True)
  bert_config, init_checkpoint, tokenizer = model
  Problems(pooling_lib.checkpoint_problems(FLAGS.pooling,
                                           init_checkpoint)).raise_if_any()
  layer_indexes = parse_layer_indexes(
      "-1" if FLAGS.pooling != "none" else FLAGS.layers,
      bert_config.num_hidden_layers)

  # 2. The runner.
  use_tpu = run.tpu.use_tpu
  model_fn = model_fn_builder(bert_config, init_checkpoint, layer_indexes,
                              use_tpu, FLAGS.use_one_hot_embeddings,
                              FLAGS.pooling, FLAGS.l2_normalize)
  model_runner = runner_lib.make_runner(
      model_fn, run, output_dir=None, predict_batch_size=FLAGS.batch_size)

  def features():
    return iter_features(iter_examples(FLAGS.input_file),
                         FLAGS.max_seq_length, tokenizer)

  if use_tpu:
    # TPU hosts cannot call back into this process: embed the features.
    # Iterating `pending` once queues every feature for the writer.
    pending = _PendingFeatures(features())
    all_features = list(pending)
    input_fn = input_fn_builder(all_features, FLAGS.max_seq_length)
  else:
    pending = _PendingFeatures(features())
    input_fn = streaming_input_fn_builder(lambda: pending,
                                          FLAGS.max_seq_length,
                                          FLAGS.bucket_by_length)
  count = _write_predictions(model_runner, input_fn, pending, layer_indexes,
                             FLAGS.output_file, FLAGS.pooling)
  logging.info("Wrote %d examples to %s", count, FLAGS.output_file)


def cli():
  """Command-line entry point: `main`, with the flags defined here or, run
  as a command, above."""
  entry.run_main(main, define_flags)


if __name__ == "__main__":
  cli()
