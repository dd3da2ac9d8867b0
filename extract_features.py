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

`--pack_sequences` puts several lines into each row (all read into memory
first); every line's output stays its own.

On CPU/GPU the input is read lazily and the output streamed to a temporary
file renamed when complete: memory does not grow with the input, and a killed
run leaves no partial file.

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
                         "bucket_by_length", "pack_sequences",
                         "max_examples_per_row", "init_checkpoint",
                         "vocab_file", "do_lower_case", cli_flags.TPU_FLAGS)
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

import time

from absl import logging

from bert_tf.runner import select as runner_lib
# The reference's public names of this module (`extract_features.
# read_examples`, `.model_fn_builder`, ...) live in the package.
from bert_tf.tasks.extraction import convert_examples_to_features
from bert_tf.tasks.extraction import convert_single_example
from bert_tf.tasks.extraction import format_output_line
from bert_tf.tasks.extraction import input_fn_builder
from bert_tf.tasks.extraction import InputExample
from bert_tf.tasks.extraction import InputFeatures
from bert_tf.tasks.extraction import iter_examples
from bert_tf.tasks.extraction import iter_features
from bert_tf.tasks.extraction import LayersHead
from bert_tf.tasks.extraction import model_fn_builder
from bert_tf.tasks.extraction import packed_input_fn_builder
from bert_tf.tasks.extraction import PendingFeatures as _PendingFeatures
from bert_tf.tasks.extraction import read_examples
from bert_tf.tasks.extraction import streaming_input_fn_builder
from bert_tf import io as io_utils
from bert_tf.train import lengths as lengths_lib
from bert_tf.train import packing
from bert_tf.checks.problems import Problems
from bert_tf.cli import entry
from bert_tf.cli import startup


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
  if flag_values.pack_sequences and flag_values.pooling != "none":
    problems.append("--pack_sequences: writes every token's vectors; leave "
                    "--pooling off with it")
  return (problems + pooling_lib.flag_problems(
      flag_values.pooling, flag_values.l2_normalize, flag_values.layers,
      flag_values["layers"].present) + lengths_lib.flag_problems(
          flag_values.bucket_by_length, flag_values.use_tpu,
          flag_values.pack_sequences))


def _output_line(feature, result, layer_indexes, pooling):
  """The JSON line of one example: its tokens' vectors, or its pooled one."""
  if pooling == "none":
    return format_output_line(feature, result, layer_indexes)
  return pooling_lib.format_line(feature.unique_id, result["embedding"])


def _write_predictions(pairs, layer_indexes, output_file, pooling="none"):
  """Streams the lines of `pairs` (a generator of (feature, prediction), in
  input order) to `output_file` atomically, then closes it; returns the
  count."""
  count = 0
  start = time.time()
  try:
    with io_utils.atomic_write(output_file) as writer:
      for feature, result in pairs:
        writer.write(_output_line(feature, result, layer_indexes, pooling))
        count += 1
        if count % 1000 == 0:
          logging.info("%d examples written (%.1f/sec)", count,
                       count / max(time.time() - start, 1e-9))
  finally:
    # The prediction loop ends now, not after an error's line is printed.
    pairs.close()
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

  if FLAGS.pack_sequences:
    # Rows of several examples (all in memory, packed longest first),
    # embedded as on TPU; each example's tokens back in their own places.
    all_features = list(features())
    pairs = (pair for pair in zip(all_features, packing.unpack(
        model_runner.predict(
            packed_input_fn_builder(all_features, FLAGS.max_seq_length,
                                    FLAGS.max_examples_per_row),
            yield_single_examples=True),
        len(all_features), token_keys=[
            "layer_output_%d" % n for n in range(len(layer_indexes))])))
  else:
    pending = _PendingFeatures(features())
    if use_tpu:
      # TPU hosts cannot call back into this process: embed the features.
      # Iterating `pending` once queues every feature for the writer.
      input_fn = input_fn_builder(list(pending), FLAGS.max_seq_length)
    else:
      input_fn = streaming_input_fn_builder(lambda: pending,
                                            FLAGS.max_seq_length,
                                            FLAGS.bucket_by_length)
    pairs = ((pending.pop(int(result["unique_id"])), result) for result in
             model_runner.predict(input_fn, yield_single_examples=True))
  count = _write_predictions(pairs, layer_indexes, FLAGS.output_file,
                             FLAGS.pooling)
  logging.info("Wrote %d examples to %s", count, FLAGS.output_file)


def cli():
  """Command-line entry point: `main`, with the flags defined here or, run
  as a command, above."""
  entry.run_main(main, define_flags)


if __name__ == "__main__":
  cli()
