"""`prepare_corpus.py`'s Beam pipeline: dumps and text to sentence shards.

One worker reads each file; pages are cleaned and split on any worker.
Documents go to shard `crc32(file index, position) % num_shards`, each
shard sorted and written as `create_pretraining_data.py` reads text (a
sentence a line, a blank line after a document): a function of the input
alone, appearing only when every shard is written.
"""

import logging as std_logging
import zlib

import tensorflow.compat.v1 as tf

from bert_tf.corpus import beam_support
from bert_tf.corpus import wiki
from bert_tf.tasks.pretraining import processes

__all__ = ["run"]

_NAMESPACE = "prepare_corpus"


def run(input_files, output_files, num_shards, pipeline_options_text,
        language="en"):
  """Runs the pipeline; returns counts (`pages`, `skipped`, `documents`,
  `sentences`). `output_files`: one path (`<path>-0000k-of-0000N` shards)
  or `num_shards` paths; `language`: sentencex's code.

  Raises:
    ValueError: a bad flag, a file that is not a dump, or a worker's user
      error (one line).
  """
  beam = beam_support.import_beam("prepare_corpus.py")
  options = beam_support.pipeline_options(pipeline_options_text, num_shards)
  for name in ("mwxml", "mwparserfromhell", "sentencex"):
    beam_support.import_module(name, "prepare_corpus.py")
  if num_shards == 1 and len(output_files) != 1:
    raise ValueError("--output_file: got %d paths; with --num_shards=1 give "
                     "one" % len(output_files))
  part_outputs = processes.part_output_files(output_files, num_shards,
                                             "num_shards")
  beam_support.worker_pythonpath(beam_support)
  std_logging.getLogger("apache_beam").setLevel(std_logging.WARNING)
  with beam_support.atomic_outputs(part_outputs) as temps:
    pipeline = beam.Pipeline(options=options)
    _ = (pipeline
         | "Files" >> beam.Create(list(enumerate(input_files)))
         | "SpreadFiles" >> beam.Reshuffle()
         | "Read" >> beam.FlatMap(_read_file)
         | "SpreadPages" >> beam.Reshuffle()
         | "Clean" >> beam.FlatMap(_document, language, num_shards)
         | "ByShard" >> beam.GroupByKey()
         | "Write" >> beam.Map(_write_shard, temps))
    result = beam_support.run_pipeline(pipeline, "input_file")
  return beam_support.counters(beam, result, _NAMESPACE)


def _counter(name):
  # The beam extra is optional: imported only where a pipeline runs.
  from apache_beam.metrics import Metrics  # pylint: disable=g-import-not-at-top
  return Metrics.counter(_NAMESPACE, name)


def _read_file(element):
  """Yields `((file index, position), kind, content)` of one input file.

  kind "wiki": content is an article's wikitext; "text": a list of
  paragraphs.
  """
  file_index, path = element
  if wiki.is_dump(path):
    pages, skipped = _counter("pages"), _counter("skipped")
    position = 0
    for _, _, text in wiki.read_pages(path, on_skip=skipped.inc):
      pages.inc()
      yield (file_index, position), "wiki", text
      position += 1
  else:
    for position, paragraphs in enumerate(wiki.text_documents(path)):
      yield (file_index, position), "text", paragraphs


def _document(element, language, num_shards):
  """Yields `(shard, (key, sentences))` for a document with any sentence."""
  key, kind, content = element
  if kind == "wiki":
    sentences = wiki.page_document(content, language)
  else:
    sentences = []
    for paragraph in content:
      sentences.extend(wiki.split_sentences(paragraph, language))
  if sentences:
    shard = zlib.crc32(("%d:%d" % key).encode("ascii")) % num_shards
    yield shard, (key, sentences)


def _write_shard(element, temps):
  """Writes one shard's documents, sorted, to the shard's temporary name(s)."""
  shard, documents = element
  documents = sorted(documents, key=lambda item: item[0])
  sentences = 0
  with beam_support.attempt_paths(temps[shard]) as attempts:
    with tf.io.gfile.GFile(attempts[0], "w") as f:
      for _, document in documents:
        f.write("\n".join(document) + "\n\n")
        sentences += len(document)
  _counter("documents").inc(len(documents))
  _counter("sentences").inc(sentences)
  return shard
