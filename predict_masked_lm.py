"""Predicts the words behind `[MASK]`: the pre-trained masked-LM head, read.

Each line of `--input_file` holds one or more `[MASK]`s (`a ||| b`: a
pair); for each, one JSON line of `--output_file`, in input order:

  {"line": 1, "text": "the man went to the [MASK] .", "masks": [
      {"position": 6, "tokens": ["store", ...], "probabilities": [0.31, ...]}]}

`position` is the mask's WordPiece index (`[CLS]` is 0), `tokens` the
`--top_k` likeliest WordPieces, `probabilities` their softmax under the
`cls/predictions` head (Devlin et al. 2018, 3.1), from a released model or
a `run_pretraining.py` output_dir. A line without `[MASK]`, or whose masks
`--max_seq_length` would cut, is a one-line error before anything runs.

Example:
  python predict_masked_lm.py --input_file=masked.txt --output_file=out.jsonl \
    --vocab_file=$BERT_DIR/vocab.txt --bert_config_file=$BERT_DIR/bert_config.json \
    --init_checkpoint=$BERT_DIR --top_k=5
"""

from bert_tf.cli import quiet  # First: TensorFlow's start-up lines off.
quiet.when_run_as_command(__name__)

from absl import flags
from bert_tf.cli import flags as cli_flags
from bert_tf.cli import flags_first

__all__ = ["MASK", "MaskedLine", "define_flags", "read_masked_lines",
           "model_fn_builder", "check_masked_lm_head", "format_output_line",
           "main", "cli"]

FLAGS = flags.FLAGS


def define_flags():
  """Defines the script's flags."""
  flags.DEFINE_string("input_file", None,
                      "Text with [MASK]s, one example per line; `a ||| b` "
                      "is a pair of texts.")
  flags.DEFINE_string("output_file", None,
                      "JSON-lines file to write, one line per input line.")
  flags.DEFINE_integer("top_k", 5,
                       "How many WordPieces to write per [MASK], likeliest "
                       "first.")
  cli_flags.define_flags("bert_config_file", "max_seq_length",
                         "bucket_by_length", "pack_sequences",
                         "max_examples_per_row", "init_checkpoint",
                         "vocab_file", "do_lower_case",
                         "max_predictions_per_seq", "predict_batch_size",
                         cli_flags.TPU_FLAGS)
  # --vocab_file and --bert_config_file may come from a Hugging Face folder
  # given as --init_checkpoint; startup.prepare_model requires them.
  for name in ("input_file", "output_file", "init_checkpoint"):
    flags.mark_flag_as_required(name)


# Run as a command: --help and flag errors answer here, before the
# imports below load TensorFlow.
flags_first.parse_when_run_as_command(__name__, define_flags)

import dataclasses
import json

from absl import logging
import numpy as np
import tensorflow.compat.v1 as tf

from bert_tf import io as io_utils
from bert_tf.checks import checkpoint as checkpoint_checks
from bert_tf.cli import entry
from bert_tf.cli import startup
from bert_tf.runner import select as runner_lib
from bert_tf.tasks import features as feature_utils
from bert_tf.tasks.pretraining.heads import MaskedLmHead
from bert_tf.train import input_fn as input_utils
from bert_tf.train import lengths as lengths_lib
from bert_tf.train import model_fn as model_fn_utils
from bert_tf.train import packing


MASK = "[MASK]"
_PAIR_SEPARATOR = " ||| "
_HEAD_VARIABLE = "cls/predictions/output_bias"


@dataclasses.dataclass(eq=False)
class MaskedLine:
  """One input line as model inputs: `line` (1-based), `text` (stripped),
  `tokens` (`[CLS] a [SEP] (b [SEP])`, unpadded), `input_ids`,
  `input_mask`, `segment_ids` (`max_seq_length` ints), `positions` (the
  `[MASK]` indexes)."""

  line: int
  text: str
  tokens: list
  input_ids: list
  input_mask: list
  segment_ids: list
  positions: list


def _tokenize_masked(tokenizer, text):
  """WordPieces of `text` with each literal `[MASK]` kept as one token
  (the tokenizer alone would split it into `[`, `mask`, `]`)."""
  tokens = []
  for i, piece in enumerate(text.split(MASK)):
    if i:
      tokens.append(MASK)
    tokens.extend(tokenizer.tokenize(piece))
  return tokens


def read_masked_lines(input_file, tokenizer, max_seq_length,
                      max_predictions):
  """The `MaskedLine`s of `input_file`; blank lines skipped (but counted).

  Raises:
    ValueError: a missing or empty file, a vocabulary without `[MASK]`, or
      a line with no `[MASK]`, more than `max_predictions` of them, or one
      that `max_seq_length` would cut; each naming the file and line.
  """
  if not tf.io.gfile.exists(input_file):
    raise ValueError("--input_file: %s does not exist" % input_file)
  if MASK not in tokenizer.vocab:
    raise ValueError("--vocab_file: has no %s token" % MASK)
  lines = []
  for number, raw in io_utils.read_lines(input_file, strict=True):
    text = raw.strip()
    if not text:
      continue
    where = "%s:%d" % (input_file, number)
    if MASK not in text:
      raise ValueError("%s: no %s in the line (expected a text with at "
                       "least one)" % (where, MASK))
    text_a, _, text_b = text.partition(_PAIR_SEPARATOR)
    tokens_a = _tokenize_masked(tokenizer, text_a)
    tokens_b = _tokenize_masked(tokenizer, text_b) if text_b else None
    wanted = tokens_a.count(MASK) + (tokens_b or []).count(MASK)
    tokens, segment_ids = feature_utils.pack_tokens(tokens_a, tokens_b,
                                                    max_seq_length)
    positions = [i for i, token in enumerate(tokens) if token == MASK]
    if len(positions) < wanted:
      raise ValueError("%s: %d WordPieces do not fit --max_seq_length=%d; a "
                       "%s would be cut" % (where, len(tokens_a) +
                                            len(tokens_b or []),
                                            max_seq_length, MASK))
    if len(positions) > max_predictions:
      raise ValueError("%s: %d %ss, more than --max_predictions_per_seq=%d" %
                       (where, len(positions), MASK, max_predictions))
    input_ids, input_mask, segment_ids = feature_utils.pad_input(
        tokenizer.convert_tokens_to_ids(tokens), segment_ids, max_seq_length)
    lines.append(MaskedLine(number, text, tokens, input_ids, input_mask,
                            segment_ids, positions))
  if not lines:
    raise ValueError("--input_file: %s has no text (expected lines with "
                     "%s)" % (input_file, MASK))
  return lines


def _input_fn_builder(lines, max_seq_length, max_predictions,
                      bucket_by_length=False):
  """An in-memory `input_fn` of the lines (constants in the graph); with
  `bucket_by_length`, each batch cut to its longest line rounded up to
  `lengths.bucket_lengths(max_seq_length)`."""
  positions = [io_utils.pad_to(line.positions, max_predictions)
               for line in lines]

  def input_fn(params):
    columns = {
        "unique_ids": tf.constant(list(range(len(lines))), tf.int32),
        "masked_lm_positions": tf.constant(positions, tf.int32,
                                           [len(lines), max_predictions]),
    }
    for name in ("input_ids", "input_mask", "segment_ids"):
      columns[name] = tf.constant([getattr(line, name) for line in lines],
                                  tf.int32, [len(lines), max_seq_length])
    d = tf.data.Dataset.from_tensor_slices(columns).batch(
        params["batch_size"], drop_remainder=False)
    if bucket_by_length:
      d = lengths_lib.cut_batches(d, lengths_lib.bucket_lengths(
          max_seq_length))
    return input_utils.without_autotune(d)

  return input_fn


def _packed_rows(lines, max_seq_length, max_predictions, max_per_row):
  """The lines packed into rows (`packing.pack`), with `unique_ids` (the
  row's index) and `masked_lm_positions` [K * max_predictions]: each
  slot's `[MASK]` positions in the row, padded with 0."""
  rows = packing.pack([{name: getattr(line, name)[:len(line.tokens)]
                        for name in ("input_ids", "segment_ids")}
                       for line in lines], max_seq_length, max_per_row)
  for number, row in enumerate(rows):
    row["unique_ids"] = number
    row["masked_lm_positions"] = [
        position for index, start in zip(row["example_index"],
                                         row["cls_positions"])
        for position in io_utils.pad_to(
            [start + p for p in lines[index].positions] if index >= 0 else
            [], max_predictions)]
  return rows


def _packed_results(results, rows, max_per_row):
  """Each row's prediction as `packing.unpack` takes it: its slots'
  `example_index` [K], `top_ids` and `top_probabilities` [K, P, top_k]."""
  for result in results:
    row = dict(result)
    row["example_index"] = np.array(
        rows[int(row.pop("unique_id"))]["example_index"])
    for key in ("top_ids", "top_probabilities"):
      row[key] = np.reshape(row[key], [max_per_row, -1, row[key].shape[-1]])
    yield row


def model_fn_builder(bert_config, init_checkpoint, top_k, use_tpu=False):
  """A prediction-only `model_fn`: the encoder and `heads.MaskedLmHead`.

  Predictions: `unique_id` int32 [batch_size]; `top_ids` int32 and
  `top_probabilities` float32, [batch_size, max_predictions, top_k], the
  likeliest WordPiece ids at each of `masked_lm_positions` and their
  softmax probabilities.
  """
  return model_fn_utils.build_model_fn(
      MaskedLmHead(bert_config, top_k), bert_config, init_checkpoint, use_tpu,
      use_one_hot_embeddings=use_tpu, log_features=False)


def check_masked_lm_head(init_checkpoint):
  """Raises ValueError unless the checkpoint holds `cls/predictions`."""
  names = {name for name, _ in tf.train.list_variables(
      checkpoint_checks.readable_prefix(init_checkpoint))}
  if _HEAD_VARIABLE not in names:
    raise ValueError(
        "--init_checkpoint: %s has no masked-LM head (cls/predictions/*): "
        "use a pre-trained checkpoint (a released model or a "
        "run_pretraining.py output_dir), not a fine-tuned one" %
        init_checkpoint)


def format_output_line(line, result, tokenizer):
  """The JSON line of one `MaskedLine` and its prediction."""
  masks = []
  for slot, position in enumerate(line.positions):
    ids = np.asarray(result["top_ids"][slot]).tolist()
    masks.append({"position": position,
                  "tokens": tokenizer.convert_ids_to_tokens(ids),
                  "probabilities": [float(p) for p in
                                    result["top_probabilities"][slot]]})
  return json.dumps({"line": line.line, "text": line.text,
                     "masks": masks}) + "\n"


def _flag_problems(flag_values):
  problems = startup.positive_flag_problems(
      flag_values, ("top_k", "predict_batch_size", "max_predictions_per_seq"))
  try:
    io_utils.check_output_file(flag_values.output_file)
  except ValueError as e:
    problems.append(str(e))
  return problems + lengths_lib.flag_problems(flag_values.bucket_by_length,
                                              flag_values.use_tpu,
                                              flag_values.pack_sequences)


def main(_):
  # 1. Flags, config, checkpoint (with its head), vocabulary, every line:
  # checked before any work.
  run, (bert_config, init_checkpoint, tokenizer) = startup.start(
      FLAGS, _flag_problems(FLAGS), setup_devices=False,
      need_output_dir=False, need_checkpoint=True)
  check_masked_lm_head(init_checkpoint)
  if FLAGS.top_k > bert_config.vocab_size:
    raise ValueError("--top_k=%d: the vocabulary has %d tokens" %
                     (FLAGS.top_k, bert_config.vocab_size))
  lines = read_masked_lines(FLAGS.input_file, tokenizer, FLAGS.max_seq_length,
                            FLAGS.max_predictions_per_seq)

  # 2. The runner (the runner and TPU options; no training).
  model_runner = runner_lib.make_runner(
      model_fn_builder(bert_config, init_checkpoint, FLAGS.top_k,
                       run.tpu.use_tpu),
      run, output_dir=None, predict_batch_size=FLAGS.predict_batch_size)
  if FLAGS.pack_sequences:  # Several lines a row, each its own positions.
    rows = _packed_rows(lines, FLAGS.max_seq_length,
                        FLAGS.max_predictions_per_seq,
                        FLAGS.max_examples_per_row)
    results = packing.unpack(_packed_results(
        model_runner.predict(packing.rows_input_fn(rows),
                             yield_single_examples=True),
        rows, FLAGS.max_examples_per_row), len(lines))
    logging.info("Packed %d lines into %d rows", len(lines), len(rows))
  else:
    results = model_runner.predict(
        _input_fn_builder(lines, FLAGS.max_seq_length,
                          FLAGS.max_predictions_per_seq,
                          FLAGS.bucket_by_length),
        yield_single_examples=True)
  count = 0
  with io_utils.atomic_write(FLAGS.output_file) as writer:
    # In line order; zip leaves TPU padding unread.
    for line, result in zip(lines, results):
      writer.write(format_output_line(line, result, tokenizer))
      count += 1
  logging.info("Wrote %d lines to %s", count, FLAGS.output_file)


def cli():
  """Command-line entry point: `main`, with the flags defined here or, run
  as a command, above."""
  entry.run_main(main, define_flags)


if __name__ == "__main__":
  cli()
