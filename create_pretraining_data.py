# coding=utf-8
"""Creates masked-LM and next-sentence pre-training examples as TFRecords.

Input: plain text, one sentence per line, a blank line between documents
(`--input_file`, comma-separated paths or globs). Output: `tf.train.Example`
records with the features `input_ids`, `input_mask`, `segment_ids`,
`masked_lm_positions`, `masked_lm_ids`, `masked_lm_weights` and
`next_sentence_labels` (`--output_file`, comma-separated; records go to the
files in turn).

With the same seed, flags and input this writes the same instances, byte for
byte, as the reference release (Devlin et al. 2018, section 3.1 and appendix
A.1): one `random.Random(random_seed)` drives document shuffling, chunking,
next-sentence sampling, truncation and masking in a fixed draw order.

`--num_workers N` (N > 1) cuts the corpus at document boundaries into N parts
of about equal size; part k runs the same algorithm in its own process with
seed `random_seed + k` (other, equally valid instances than N = 1: random-next
segments come from the part, or, for a part of one document, from a
neighbouring part; the final shuffle is per part; memory grows with the
largest part). `--num_shards N` runs them as an Apache Beam pipeline.

`--dynamic_masking` writes the instances unmasked, for run_pretraining.py
to mask anew each epoch (`input_ids`, `input_mask`, `segment_ids`, and
`next_sentence_labels` unless `--next_sentence=false`, which makes each
instance one span of a document without B).

`--pack_sequences` packs the finished instances several a row
(`records.PackedSerializer`: first-fit decreasing, at most
`--max_examples_per_row` instances and `--max_predictions_per_seq` masked
words a row), for run_pretraining.py, which detects such records.

Differences from the reference (docs/differences.md): a corpus (or a part
and its random-next documents) of fewer than two documents is refused, as
next-sentence prediction would label real continuations as random; and when
ten draws in a row pick the current document as the "random" one, drawing
continues until another document comes up.
"""

from bert_tf.cli import quiet  # First: TensorFlow's start-up lines off.
quiet.when_run_as_command(__name__)

import contextlib
import random
import time

from absl import flags

from bert_tf.cli import flags as cli_flags
from bert_tf.cli import flags_first
from bert_tf.corpus import instances as beam_instances

__all__ = ["define_flags", "TrainingInstance", "create_training_instances",
           "create_instances_from_document", "create_masked_lm_predictions",
           "truncate_seq_pair", "create_int_feature", "create_float_feature",
           "write_instance_to_example_files", "main", "cli"]

FLAGS = flags.FLAGS

# Tokens the records and the masking need; a vocabulary without them is refused.
_SPECIAL_TOKENS = ("[CLS]", "[SEP]", "[MASK]", "[UNK]")

# Instances logged in full by the writer, as the reference does (first 20).
_NUM_INSTANCES_TO_LOG = 20


def define_flags():
  """Defines the script's flags (the reference's, plus `--num_workers`)."""
  flags.DEFINE_string("input_file", None,
      "Plain-text corpus: comma-separated files or globs, one sentence a "
      "line, documents separated by blank lines.")
  flags.DEFINE_string("output_file", None,
      "TFRecord file(s) to write, comma-separated; the records are dealt to "
      "them in turn. With --num_workers N > 1: N paths (one a part) or one "
      "path (part k writes <path>-0000k-of-0000N).")
  cli_flags.define_flags(
      "vocab_file", "do_lower_case", "max_seq_length",
      "max_predictions_per_seq", "masked_lm_prob", "do_whole_word_mask",
      "do_chinese_whole_word_mask", "dynamic_masking", "next_sentence",
      "pack_sequences", "max_examples_per_row")
  flags.DEFINE_integer("random_seed", 12345,
                       "Seed of the one random generator that drives every "
                       "choice.")
  flags.DEFINE_integer(
      "dupe_factor", 10,
      "How many times each document is used, with a new masking each time.")
  flags.DEFINE_float(
      "short_seq_prob", 0.1,
      "Chance that a sequence aims at a random length shorter than "
      "max_seq_length, so fine-tuning on short inputs is seen in training.")
  flags.DEFINE_integer(
      "num_workers", 1,
      "Processes to use. 1 (default) is the reference behaviour. N > 1 cuts "
      "the corpus at document boundaries into N parts of about equal size and "
      "runs part k with seed random_seed + k: different (equally valid) "
      "instances than N = 1, and memory bounded by the largest part.")
  beam_instances.define_flags()


# Run as a command: --help and flag errors answer before TensorFlow loads.
flags_first.parse_when_run_as_command(__name__, define_flags)

from absl import logging
import tensorflow.compat.v1 as tf

from bert_tf import io as io_utils
from bert_tf.checks import numbers as number_checks
from bert_tf.tasks.pretraining import instances as instances_lib
# The reference's public names of this module live in the package.
from bert_tf.tasks.pretraining.instances import (
    TrainingInstance, MaskedLmInstance, create_training_instances,
    create_instances_from_document, create_masked_lm_predictions,
    truncate_seq_pair)
from bert_tf.tasks.pretraining import whole_words
from bert_tf.tasks.pretraining import processes as pretraining_processes
from bert_tf.tasks.pretraining import records as pretraining_records
from bert_tf.tasks.pretraining import shuffle as pretraining_shuffle
from bert_tf.cli import entry
from bert_tf.cli import startup


# ----------------------------------------------------------------------------
# Writing records.


def create_int_feature(values):
  """A `tf.train.Feature` holding the ints `values` as an `int64_list`."""
  return io_utils.int64_feature(values)


def create_float_feature(values):
  """A `tf.train.Feature` holding the floats `values` as a `float_list`."""
  return io_utils.float_feature(values)


def _write_instances(instances, serializer, paths, prefix=""):
  """Writes records to `paths` in turn (temporary names of the outputs);
  with a `PackedSerializer`, its rows of the instances."""
  if isinstance(serializer, pretraining_records.PackedSerializer):
    num_instances = len(instances)
    instances = serializer.pack(instances)
    logging.info("%sPacked %d instances into %d rows", prefix, num_instances,
                 len(instances))
  writers = [tf.io.TFRecordWriter(path) for path in paths]
  progress = pretraining_processes.Progress("instances written", prefix)
  try:
    for index, instance in enumerate(instances):
      writers[index % len(writers)].write(serializer.serialize(instance))
      progress.add()
      if index < _NUM_INSTANCES_TO_LOG:
        _log_instance(instance, serializer)
  finally:
    for writer in writers:
      writer.close()
  progress.log(final=True)


def _log_instance(instance, serializer):
  logging.info("*** Example ***\n%s%s", instance, "".join(
      "%s: %s\n" % (name, " ".join(str(v) for v in values))
      for name, values in zip(serializer.feature_names,
                              serializer.features(instance))))


def write_instance_to_example_files(instances, tokenizer, max_seq_length,
                                    max_predictions_per_seq, output_files,
                                    serializer=None):
  """Writes `instances` as `tf.train.Example` records, to the files in turn.

  Each file is written under a temporary name and renamed when complete.

  Args:
    instances: list of `TrainingInstance`.
    tokenizer: a `tokenization.FullTokenizer` (its `vocab` maps tokens).
    max_seq_length: int, length of `input_ids`, `input_mask`, `segment_ids`.
    max_predictions_per_seq: int, length of the `masked_lm_*` features.
    output_files: list of str, TFRecord paths.
    serializer: (optional) a `records.make_serializer` value; default the
      reference's records.

  Returns:
    int, the number of records written.

  Raises:
    ValueError: if an instance is longer than `max_seq_length` or has more
      than `max_predictions_per_seq` masked positions.
  """
  serializer = serializer or pretraining_records.ExampleSerializer(
      tokenizer, max_seq_length, max_predictions_per_seq)
  with contextlib.ExitStack() as outputs, io_utils.gc_paused():
    temps = [outputs.enter_context(io_utils.atomic_path(path))
             for path in output_files]
    _write_instances(instances, serializer, temps)
  for path in output_files:
    logging.info("Wrote %s", path)
  return len(instances)


# ----------------------------------------------------------------------------
# Several workers.


def _run_workers(input_files, tokenizer, options, random_seed, num_workers,
                 output_files):
  """Runs the reference algorithm on `num_workers` parts in parallel.

  Part k of the corpus runs in its own process with `random.Random(
  random_seed + k)` and writes its own output file(s) (`pretraining_processes.
  run_parts`). `options`: the keyword values of `_instances_from_documents`
  by flag name (+ `parts_flag`). Returns the number of instances written.

  Raises:
    ValueError: when a part holds no document, or one without another.
  """
  results = pretraining_processes.run_parts(
      input_files, num_workers, output_files, _run_part, tokenizer, options,
      random_seed)
  return sum(result["instances"] for result in results)


def _run_part(part_index, num_parts, ranges, output_files, tokenizer, options,
              random_seed, random_next_from=()):
  """Makes and writes one part's instances (in a worker process); returns
  a dict with the part's `documents` and `instances` counts.

  `random_next_from`: byte ranges of a part whose documents give a part of
  one document its "random next" segments (they make no instances here).
  """
  prefix = "part %d/%d: " % (part_index, num_parts)
  with io_utils.gc_paused():
    chinese_words_too = options.get("do_chinese_whole_word_mask", False)
    documents = instances_lib.read_documents(ranges, tokenizer, prefix,
                                chinese_words_too=chinese_words_too)
    others = (instances_lib.read_documents(random_next_from, tokenizer, prefix,
                              chinese_words_too=chinese_words_too)
              if random_next_from else [])
    instances_lib.check_num_documents(
        documents and documents + others, "--%s=%d: part %d of the corpus "
        "(%s)" % (options.get("parts_flag", "num_workers"), num_parts,
                  part_index, pretraining_processes.describe_ranges(ranges)))
    instances = instances_lib.instances_from_documents(
        documents, tokenizer, options["max_seq_length"],
        options["dupe_factor"], options["short_seq_prob"],
        options["masked_lm_prob"], options["max_predictions_per_seq"],
        random.Random(random_seed + part_index),
        options["do_whole_word_mask"] or chinese_words_too, prefix, others,
        masked=not options.get("dynamic_masking", False),
        next_sentence=options.get("next_sentence", True))
    _write_instances(instances, _serializer(tokenizer, options), output_files,
                     prefix)
  return {"documents": len(documents), "instances": len(instances)}


# ----------------------------------------------------------------------------
# Command line.


def _serializer(tokenizer, options):
  """The records' serializer for the flag values in `options` (a dict)."""
  return pretraining_records.make_serializer(
      tokenizer, options["max_seq_length"], options["max_predictions_per_seq"],
      options.get("dynamic_masking", False),
      options.get("next_sentence", True),
      options.get("do_chinese_whole_word_mask", False),
      options.get("pack_sequences") and options["max_examples_per_row"])


def _load_tokenizer(vocab_file, do_lower_case):
  """FullTokenizer for `vocab_file`, refusing vocabularies without specials."""
  tokenizer = startup.load_tokenizer(vocab_file, do_lower_case)
  missing = [t for t in _SPECIAL_TOKENS if t not in tokenizer.vocab]
  if missing:
    raise ValueError(
        "--vocab_file: %s lacks %s; expected a BERT WordPiece vocabulary with "
        "%s" % (vocab_file, ", ".join(missing), ", ".join(_SPECIAL_TOKENS)))
  return tokenizer


def _check_flags(flag_values):
  """One-line errors for missing or out-of-range flags."""
  for name in ("input_file", "output_file", "vocab_file"):
    if not getattr(flag_values, name):
      raise ValueError("--%s is required" % name)
  minimums = {"max_seq_length": 5, "max_predictions_per_seq": 1,
              "dupe_factor": 1, "num_workers": 1}
  for name, minimum in minimums.items():
    if getattr(flag_values, name) < minimum:
      raise ValueError("--%s is %d; expected at least %d"
                       % (name, getattr(flag_values, name), minimum))
  if not 0.0 < flag_values.masked_lm_prob <= 1.0:
    raise ValueError("--masked_lm_prob is %r; expected a probability in "
                     "(0, 1]" % flag_values.masked_lm_prob)
  if not 0.0 <= flag_values.short_seq_prob <= 1.0:
    raise ValueError("--short_seq_prob is %r; expected a probability in "
                     "[0, 1]" % flag_values.short_seq_prob)
  if flag_values.pack_sequences and flag_values.dynamic_masking:
    raise ValueError("--pack_sequences packs masked instances, and "
                     "--dynamic_masking writes unmasked ones: use one or the "
                     "other")
  number_checks.check_flags(flag_values)


def _split_paths(value):
  return [path.strip() for path in value.split(",") if path.strip()]


def main(_):
  start = time.time()
  _check_flags(FLAGS)
  if FLAGS.do_chinese_whole_word_mask:
    whole_words.check_installed()
  tokenizer = _load_tokenizer(FLAGS.vocab_file, FLAGS.do_lower_case)
  input_files = io_utils.expand_file_patterns(FLAGS.input_file,
                                              "input_file")
  output_files = _split_paths(FLAGS.output_file)
  num_parts, parts_flag = beam_instances.parts_from_flags(FLAGS)
  pretraining_processes.check_output_paths(input_files, output_files,
                                           num_parts, parts_flag)
  logging.info("*** Reading from %d input file(s) ***", len(input_files))
  for path in input_files:
    logging.info("  %s", path)

  options = {name: FLAGS[name].value for name in (
      "max_seq_length", "dupe_factor", "short_seq_prob", "masked_lm_prob",
      "max_predictions_per_seq", "do_whole_word_mask",
      "do_chinese_whole_word_mask", "dynamic_masking", "next_sentence",
      "pack_sequences", "max_examples_per_row")}
  if FLAGS.num_shards:
    num_written = beam_instances.run_shards(
        input_files, output_files, _run_part, FLAGS, tokenizer,
        dict(options, parts_flag="num_shards"), FLAGS.random_seed)
  elif FLAGS.num_workers == 1:
    rng = random.Random(FLAGS.random_seed)
    instances = create_training_instances(
        input_files, tokenizer, FLAGS.max_seq_length, FLAGS.dupe_factor,
        FLAGS.short_seq_prob, FLAGS.masked_lm_prob,
        FLAGS.max_predictions_per_seq, rng,
        do_whole_word_mask=FLAGS.do_whole_word_mask,
        do_chinese_whole_word_mask=FLAGS.do_chinese_whole_word_mask,
        masked=not FLAGS.dynamic_masking, next_sentence=FLAGS.next_sentence)
    logging.info("*** Writing to %d output file(s) ***", len(output_files))
    num_written = write_instance_to_example_files(
        instances, tokenizer, FLAGS.max_seq_length,
        FLAGS.max_predictions_per_seq, output_files,
        _serializer(tokenizer, options))
  else:
    num_written = _run_workers(input_files, tokenizer, options,
                               FLAGS.random_seed, FLAGS.num_workers,
                               output_files)
  elapsed = time.time() - start
  cpu_s, peak_rss_mb = pretraining_processes.process_usage()
  logging.info("Done: %d instances in %.1f s (%.1f instances/s); main "
               "process: %.1f s CPU, peak RSS %.1f MiB", num_written, elapsed,
               num_written / max(elapsed, 1e-9), cpu_s, peak_rss_mb)


def cli():
  """Command-line entry point: `main`, its flags defined (here, or above)."""
  entry.run_main(main, define_flags)


if __name__ == "__main__":
  cli()
