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

Differences from the reference (docs/differences.md): a corpus (or a part
and its random-next documents) of fewer than two documents is refused, as
next-sentence prediction would label real continuations as random; and when
ten draws in a row pick the current document as the "random" one, drawing
continues until another document comes up.
"""

from bert_tf.cli import quiet  # First: TensorFlow's start-up lines off.
quiet.when_run_as_command(__name__)

import collections
import contextlib
import dataclasses
import random
import time

from absl import flags

from bert_tf.cli import flags as cli_flags
from bert_tf.cli import flags_first
from bert_tf.corpus import instances as beam_instances
import tokenization

__all__ = ["define_flags", "TrainingInstance", "create_training_instances",
           "create_instances_from_document", "create_masked_lm_predictions",
           "truncate_seq_pair", "create_int_feature", "create_float_feature",
           "write_instance_to_example_files", "main", "cli"]

FLAGS = flags.FLAGS


def define_flags():
  """Defines the script's flags (the reference's, plus `--num_workers`)."""
  flags.DEFINE_string("input_file", None,
      "Plain-text corpus: comma-separated files or globs, one sentence a "
      "line, documents separated by blank lines.")
  flags.DEFINE_string("output_file", None,
      "TFRecord file(s) to write, comma-separated; the records are dealt to "
      "them in turn. With --num_workers N > 1: N paths (one a part) or one "
      "path (part k writes <path>-0000k-of-0000N).")
  cli_flags.define_flags("vocab_file", "do_lower_case", "max_seq_length",
                         "max_predictions_per_seq")
  flags.DEFINE_bool("do_whole_word_mask", False,
                    "Mask every WordPiece of a chosen word together, not "
                    "pieces on their own.")
  flags.DEFINE_bool(
      "do_chinese_whole_word_mask", False,
      "--do_whole_word_mask, and the characters of a Chinese word (cut by "
      "the jieba segmenter: the chinese extra) are masked together; tokens "
      "and ids are unchanged.")
  flags.DEFINE_integer("random_seed", 12345,
                       "Seed of the one random generator that drives every "
                       "choice.")
  flags.DEFINE_integer(
      "dupe_factor", 10,
      "How many times each document is used, with a new masking each time.")
  flags.DEFINE_float("masked_lm_prob", 0.15,
                     "Share of each sequence's tokens chosen for the masked "
                     "LM task.")
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
from bert_tf.tasks.pretraining import whole_words
from bert_tf.tasks.pretraining import processes as pretraining_processes
from bert_tf.tasks.pretraining import records as pretraining_records
from bert_tf.tasks.pretraining import shuffle as pretraining_shuffle
from bert_tf.cli import entry
from bert_tf.cli import startup


# Tokens the records and the masking need; a vocabulary without them is refused.
_SPECIAL_TOKENS = ("[CLS]", "[SEP]", "[MASK]", "[UNK]")
# The reference draws at most this many document indexes for a random B.
_RANDOM_DOC_TRIES = 10
# Instances logged in full by the writer, as the reference does (first 20).
_NUM_INSTANCES_TO_LOG = 20


@dataclasses.dataclass(eq=False)
class TrainingInstance:
  """One pre-training example: `[CLS] A [SEP] B [SEP]` after masking.

  Attributes:
    tokens: list of str, the masked tokens with `[CLS]`/`[SEP]`.
    segment_ids: list of int, 0 for `[CLS]`, A and its `[SEP]`, 1 after.
    masked_lm_positions: list of int, masked positions in increasing order.
    masked_lm_labels: list of str, the original tokens at those positions.
    is_random_next: bool, True when B was taken from another document.
  """

  # Slots: a corpus makes millions of instances (no field has a default).
  __slots__ = ("tokens", "segment_ids", "masked_lm_positions",
               "masked_lm_labels", "is_random_next")
  tokens: list
  segment_ids: list
  masked_lm_positions: list
  masked_lm_labels: list
  is_random_next: bool

  def __str__(self):
    return "".join([
        "tokens: %s\n" % " ".join(
            tokenization.printable_text(t) for t in self.tokens),
        "segment_ids: %s\n" % " ".join(str(s) for s in self.segment_ids),
        "is_random_next: %s\n" % self.is_random_next,
        "masked_lm_positions: %s\n" % " ".join(
            str(p) for p in self.masked_lm_positions),
        "masked_lm_labels: %s\n" % " ".join(
            tokenization.printable_text(t) for t in self.masked_lm_labels),
    ])

  def __repr__(self):
    return self.__str__()


# The reference's record of one masked position: `index` (int, position in
# the tokens) and `label` (str, the original token there).
MaskedLmInstance = collections.namedtuple("MaskedLmInstance",
                                          ["index", "label"])


# ----------------------------------------------------------------------------
# Reading text.

def _read_documents(sources, tokenizer, prefix="", chinese_words_too=False):
  """Reads and tokenizes documents from `sources`, as the reference does.

  Args:
    sources: list of `(path, start_byte, end_byte_or_None)`, read in order as
      one stream (a new file does not start a new document by itself).
    tokenizer: object with `tokenize(text) -> list of str`.
    prefix: str put before progress log lines.
    chinese_words_too: bool, mark the Chinese characters continuing a
      segmenter word (`whole_words.WordMarkingTokenizer`; same tokens).

  Returns:
    list of documents; a document is a non-empty list of segments, a segment
    a non-empty list of str tokens. Documents left empty are dropped.
  """
  if chinese_words_too:
    tokenizer = whole_words.WordMarkingTokenizer(tokenizer)
  documents = [[]]
  progress = pretraining_processes.Progress(
      "lines read", prefix,
      lambda: ", %d documents" % (len(documents) - (not documents[-1])))
  for path, start, end in sources:
    for _, line in io_utils.read_lines(path, start, end):
      progress.add()
      line = line.strip()
      if not line:
        if documents[-1]:
          documents.append([])
        continue
      tokens = tokenizer.tokenize(line)
      if tokens:
        documents[-1].append(tokens)
  progress.log(final=True)
  return [document for document in documents if document]


def _describe_files(paths):
  """Short human-readable list of paths for error messages."""
  shown = ", ".join(paths[:3])
  if len(paths) > 3:
    shown += " and %d more" % (len(paths) - 3)
  return shown


def _check_num_documents(documents, where):
  """Raises ValueError unless there are at least two documents.

  Next-sentence prediction takes a random B from *another* document; with
  fewer than two documents every "random" B would be text from the same
  document (the reference then labels real continuations as random).
  """
  if len(documents) >= 2:
    return
  if not documents:
    raise ValueError(
        "%s holds no text: expected plain text, one sentence per line, with "
        "a blank line between documents" % where)
  raise ValueError(
      "%s holds only 1 document; next-sentence prediction needs at least two "
      "documents, separated by blank lines (one sentence per line)" % where)


# ----------------------------------------------------------------------------
# Instances.

def create_training_instances(input_files, tokenizer, max_seq_length,
                              dupe_factor, short_seq_prob, masked_lm_prob,
                              max_predictions_per_seq, rng,
                              do_whole_word_mask=False,
                              do_chinese_whole_word_mask=False):
  """Reads `input_files` and returns the shuffled `TrainingInstance`s.

  Matches the reference release's draw order: documents are
  shuffled once, then `dupe_factor` passes over them make instances, and all
  instances are shuffled once at the end.

  Args:
    input_files: list of str, text files read in order (one sentence per
      line, blank line between documents).
    tokenizer: a `tokenization.FullTokenizer`.
    max_seq_length: int, tokens per instance including `[CLS]` and `[SEP]`s.
    dupe_factor: int, passes over the documents (each with new masks).
    short_seq_prob: float, chance that a document's target length is short.
    masked_lm_prob: float, share of tokens to mask.
    max_predictions_per_seq: int, cap on masked positions per instance.
    rng: `random.Random`, the only source of randomness.
    do_whole_word_mask: bool, mask all WordPieces of a word together.
    do_chinese_whole_word_mask: bool, also mask the characters of a
      segmenter word together (implies `do_whole_word_mask`).

  Returns:
    list of `TrainingInstance`.

  Raises:
    ValueError: if the files hold fewer than two documents, or jieba is
      needed and missing.
  """
  with io_utils.gc_paused():
    sources = [(path, 0, None) for path in input_files]
    documents = _read_documents(sources, tokenizer,
                                chinese_words_too=do_chinese_whole_word_mask)
    _check_num_documents(
        documents, "--input_file (%s)" % _describe_files(list(input_files)))
    return _instances_from_documents(
        documents, tokenizer, max_seq_length, dupe_factor, short_seq_prob,
        masked_lm_prob, max_predictions_per_seq, rng,
        do_whole_word_mask or do_chinese_whole_word_mask)


def _instances_from_documents(documents, tokenizer, max_seq_length,
                              dupe_factor, short_seq_prob, masked_lm_prob,
                              max_predictions_per_seq, rng, do_whole_word_mask,
                              prefix="", random_next_only=()):
  """Shuffles `documents` in place; makes all passes' instances; shuffles.
  `random_next_only`: documents drawn only as "random next" B segments."""
  logging.info("%s%d documents", prefix, len(documents))
  pretraining_shuffle.shuffle(documents, rng)
  num_own = len(documents)
  if random_next_only:
    documents = documents + list(random_next_only)
  vocab_words = list(tokenizer.vocab.keys())
  instances = []
  for pass_index in range(dupe_factor):
    progress = pretraining_processes.Progress(
        "documents of pass %d/%d" % (pass_index + 1, dupe_factor), prefix)
    for document_index in range(num_own):
      instances.extend(create_instances_from_document(
          documents, document_index, max_seq_length, short_seq_prob,
          masked_lm_prob, max_predictions_per_seq, vocab_words, rng,
          do_whole_word_mask=do_whole_word_mask))
      progress.add()
    logging.info("%spass %d/%d: %d instances so far", prefix, pass_index + 1,
                 dupe_factor, len(instances))
  pretraining_shuffle.shuffle(instances, rng)
  return instances


def create_instances_from_document(all_documents, document_index,
                                   max_seq_length, short_seq_prob,
                                   masked_lm_prob, max_predictions_per_seq,
                                   vocab_words, rng, do_whole_word_mask=False):
  """Makes the instances of one document (the reference's chunking).

  Segments are packed into chunks up to a target length (shorter with
  probability `short_seq_prob`); each chunk is split into A and B, where B is
  the chunk's rest or, half the time, text from another document.

  Args:
    all_documents: list of documents (lists of segments of str tokens).
    document_index: int, which document to use.
    max_seq_length: int, tokens per instance including 3 special tokens.
    short_seq_prob: float, chance of a random target length in [2, budget].
    masked_lm_prob: float, share of tokens to mask.
    max_predictions_per_seq: int, cap on masked positions per instance.
    vocab_words: list of str, the vocabulary in file order.
    rng: `random.Random`.
    do_whole_word_mask: bool, mask all WordPieces of a word together.

  Returns a list of `TrainingInstance`; raises ValueError if there are fewer
  than two documents or `max_seq_length < 5`.
  """
  if len(all_documents) < 2:
    raise ValueError(
        "all_documents holds %d document(s); next-sentence prediction needs at "
        "least two" % len(all_documents))
  if max_seq_length < 5:
    raise ValueError("max_seq_length is %d; expected at least 5 ([CLS] A "
                     "[SEP] B [SEP] with two tokens of text)" % max_seq_length)
  document = all_documents[document_index]
  max_num_tokens = max_seq_length - 3  # Room for [CLS], [SEP], [SEP].
  target_seq_length = max_num_tokens
  if rng.random() < short_seq_prob:
    target_seq_length = rng.randint(2, max_num_tokens)

  instances = []
  chunk = []
  chunk_length = 0
  i = 0
  while i < len(document):
    chunk.append(document[i])
    chunk_length += len(document[i])
    if i == len(document) - 1 or chunk_length >= target_seq_length:
      tokens_a, tokens_b, is_random_next, num_unused = _split_chunk(
          chunk, all_documents, document_index, target_seq_length, rng)
      i -= num_unused  # Unused segments start the next chunk.
      truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
      instances.append(_make_instance(
          tokens_a, tokens_b, is_random_next, masked_lm_prob,
          max_predictions_per_seq, vocab_words, rng, do_whole_word_mask))
      chunk = []
      chunk_length = 0
    i += 1
  return instances


def _split_chunk(chunk, all_documents, document_index, target_seq_length, rng):
  """Splits a chunk into (tokens_a, tokens_b, is_random_next, num_unused)."""
  a_end = 1
  if len(chunk) >= 2:
    a_end = rng.randint(1, len(chunk) - 1)
  tokens_a = []
  for segment in chunk[:a_end]:
    tokens_a.extend(segment)

  tokens_b = []
  if len(chunk) == 1 or rng.random() < 0.5:
    target_b_length = target_seq_length - len(tokens_a)
    random_document = all_documents[
        _pick_other_document(len(all_documents), document_index, rng)]
    random_start = rng.randint(0, len(random_document) - 1)
    for segment in random_document[random_start:]:
      tokens_b.extend(segment)
      if len(tokens_b) >= target_b_length:
        break
    return tokens_a, tokens_b, True, len(chunk) - a_end

  for segment in chunk[a_end:]:
    tokens_b.extend(segment)
  return tokens_a, tokens_b, False, 0


def _pick_other_document(num_documents, document_index, rng):
  """Index of a random document other than `document_index`.

  The reference's ten draws, kept for parity; if all ten hit the current
  document the reference used it anyway (a real continuation labelled
  random), so this keeps drawing until another document comes up.
  """
  other = document_index
  for _ in range(_RANDOM_DOC_TRIES):
    other = rng.randint(0, num_documents - 1)
    if other != document_index:
      return other
  while other == document_index:
    other = rng.randint(0, num_documents - 1)
  return other


def _make_instance(tokens_a, tokens_b, is_random_next, masked_lm_prob,
                   max_predictions_per_seq, vocab_words, rng,
                   do_whole_word_mask):
  """Builds `[CLS] A [SEP] B [SEP]`, masks it, wraps it in an instance."""
  if not tokens_a or not tokens_b:
    raise ValueError("internal error: empty segment after truncation")
  tokens = ["[CLS]"] + tokens_a + ["[SEP]"] + tokens_b + ["[SEP]"]
  segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
  tokens, positions, labels = create_masked_lm_predictions(
      tokens, masked_lm_prob, max_predictions_per_seq, vocab_words, rng,
      do_whole_word_mask=do_whole_word_mask)
  return TrainingInstance(tokens, segment_ids, positions, labels,
                          is_random_next)


def create_masked_lm_predictions(tokens, masked_lm_prob,
                                 max_predictions_per_seq, vocab_words, rng,
                                 do_whole_word_mask=False):
  """Chooses masked positions and replaces their tokens.

  Each chosen position becomes `[MASK]` 80% of the time, stays the same 10%
  and becomes a random vocabulary word 10% (Devlin et al. 2018, 3.1).

  Args:
    tokens: list of str, `[CLS] A [SEP] B [SEP]`.
    masked_lm_prob: float, share of tokens to mask (rounded, at least 1).
    max_predictions_per_seq: int, cap on masked positions.
    vocab_words: list of str, the vocabulary in file order.
    rng: `random.Random`.
    do_whole_word_mask: bool, a `##` piece joins the group before it (even
      across a `[SEP]`, kept for parity), and so does a
      `whole_words.WordContinuation` (not across a `[SEP]`); groups are
      masked whole.

  Returns:
    (output_tokens, masked_lm_positions, masked_lm_labels): the masked
    tokens (a new list), and the positions (increasing) with their original
    tokens.
  """
  num_to_predict = min(max_predictions_per_seq,
                       max(1, int(round(len(tokens) * masked_lm_prob))))
  if do_whole_word_mask:
    chosen = whole_words.choose_whole_words(tokens, num_to_predict, rng)
  else:
    # Each position its own group: shuffle (same draws as shuffling
    # one-element groups), then take the first `num_to_predict`.
    candidates = [index for index, token in enumerate(tokens)
                  if token != "[CLS]" and token != "[SEP]"]
    pretraining_shuffle.shuffle(candidates, rng)
    chosen = candidates[:num_to_predict]

  output_tokens = list(tokens)
  num_words = len(vocab_words)
  for index in chosen:  # In the order chosen: the draws depend on it.
    if rng.random() < 0.8:
      output_tokens[index] = "[MASK]"
    elif rng.random() >= 0.5:  # Else (another 50%) the token stays as it is.
      output_tokens[index] = vocab_words[rng.randint(0, num_words - 1)]
  positions = sorted(chosen)
  return output_tokens, positions, [tokens[index] for index in positions]


def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
  """Truncates a pair in place to at most `max_num_tokens` tokens in total.

  One token at a time from the longer list (B when equal), from its front
  when a `random()` draw is below 0.5, else from its back (the reference's
  rule). The draws are made first, counting the tokens to drop at each end, and
  each list is then cut once: linear time, same result and rng state as
  deleting token by token.
  """
  lengths = [len(tokens_a), len(tokens_b)]
  drops = [[0, 0], [0, 0]]  # [front, back] tokens to drop from A and from B.
  while lengths[0] + lengths[1] > max_num_tokens:
    longer = 0 if lengths[0] > lengths[1] else 1
    if not lengths[longer]:
      raise ValueError("max_num_tokens is %d; cannot truncate below 0"
                       % max_num_tokens)
    lengths[longer] -= 1
    drops[longer][0 if rng.random() < 0.5 else 1] += 1
  for tokens, (front, back) in zip((tokens_a, tokens_b), drops):
    del tokens[len(tokens) - back:]
    del tokens[:front]


# ----------------------------------------------------------------------------
# Writing records.

def create_int_feature(values):
  """A `tf.train.Feature` holding the ints `values` as an `int64_list`."""
  return io_utils.int64_feature(values)


def create_float_feature(values):
  """A `tf.train.Feature` holding the floats `values` as a `float_list`."""
  return io_utils.float_feature(values)


def _write_instances(instances, serializer, paths, prefix=""):
  """Writes records to `paths` in turn (temporary names of the outputs)."""
  writers = [tf.io.TFRecordWriter(path) for path in paths]
  progress = pretraining_processes.Progress("instances written", prefix)
  try:
    for index, instance in enumerate(instances):
      writers[index % len(writers)].write(serializer.serialize(instance))
      progress.add()
      if index < _NUM_INSTANCES_TO_LOG:
        _log_instance(instance, serializer.features(instance))
  finally:
    for writer in writers:
      writer.close()
  progress.log(final=True)


def _log_instance(instance, features):
  logging.info("*** Example ***\n%s%s", instance, "".join(
      "%s: %s\n" % (name, " ".join(str(v) for v in values))
      for name, values in zip(pretraining_records.FEATURE_ORDER,
                              features)))


def write_instance_to_example_files(instances, tokenizer, max_seq_length,
                                    max_predictions_per_seq, output_files):
  """Writes `instances` as `tf.train.Example` records, to the files in turn.

  Each file is written under a temporary name and renamed when complete.

  Args:
    instances: list of `TrainingInstance`.
    tokenizer: a `tokenization.FullTokenizer` (its `vocab` maps tokens).
    max_seq_length: int, length of `input_ids`, `input_mask`, `segment_ids`.
    max_predictions_per_seq: int, length of the `masked_lm_*` features.
    output_files: list of str, TFRecord paths.

  Returns:
    int, the number of records written.

  Raises:
    ValueError: if an instance is longer than `max_seq_length` or has more
      than `max_predictions_per_seq` masked positions.
  """
  serializer = pretraining_records.ExampleSerializer(
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
    documents = _read_documents(ranges, tokenizer, prefix,
                                chinese_words_too=chinese_words_too)
    others = (_read_documents(random_next_from, tokenizer, prefix,
                              chinese_words_too=chinese_words_too)
              if random_next_from else [])
    _check_num_documents(
        documents and documents + others, "--%s=%d: part %d of the corpus "
        "(%s)" % (options.get("parts_flag", "num_workers"), num_parts,
                  part_index, pretraining_processes.describe_ranges(ranges)))
    instances = _instances_from_documents(
        documents, tokenizer, options["max_seq_length"],
        options["dupe_factor"], options["short_seq_prob"],
        options["masked_lm_prob"], options["max_predictions_per_seq"],
        random.Random(random_seed + part_index),
        options["do_whole_word_mask"] or chinese_words_too, prefix, others)
    serializer = pretraining_records.ExampleSerializer(
        tokenizer, options["max_seq_length"],
        options["max_predictions_per_seq"])
    _write_instances(instances, serializer, output_files, prefix)
  return {"documents": len(documents), "instances": len(instances)}


# ----------------------------------------------------------------------------
# Command line.

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
      "do_chinese_whole_word_mask")}
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
        do_chinese_whole_word_mask=FLAGS.do_chinese_whole_word_mask)
    logging.info("*** Writing to %d output file(s) ***", len(output_files))
    num_written = write_instance_to_example_files(
        instances, tokenizer, FLAGS.max_seq_length,
        FLAGS.max_predictions_per_seq, output_files)
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
