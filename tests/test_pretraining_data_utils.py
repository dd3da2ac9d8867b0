# coding=utf-8
"""Tests of bert_tf/tasks/pretraining/: the record encoder against records
built with protobuf, the shuffle copy against `random.shuffle`, and the
multi-process runner (corpus split, output names and checks, failing and
dying workers)."""

import os
import random

from google import protobuf
import pytest
import tensorflow.compat.v1 as tf

from helpers import data_path
from helpers import skip_or_fail
from helpers import write_corpus
import create_pretraining_data as cpd
from bert_tf.tasks.pretraining import instances as instances_lib
from bert_tf import io as io_utils
from bert_tf.tasks.pretraining import processes
from bert_tf.tasks.pretraining import records
from bert_tf.tasks.pretraining import shuffle
import tokenization

_tokenizers = {}


def _conf(*parts):
  return data_path("conformance", "pretraining_data", *parts)


def _tokenizer(vocab_name="vocab.txt"):
  if vocab_name not in _tokenizers:
    _tokenizers[vocab_name] = tokenization.FullTokenizer(_conf(vocab_name),
                                                         do_lower_case=True)
  return _tokenizers[vocab_name]


def _protobuf_example(features):
  """The reference's way: an Example from the features in their order."""
  return tf.train.Example(features=tf.train.Features(feature={
      name: (cpd.create_float_feature(values) if name == "masked_lm_weights"
             else cpd.create_int_feature(values))
      for name, values in zip(records.FEATURE_ORDER, features)}))


def test_direct_encoder_matches_protobuf_built_examples():
  """The hand encoder gives the bytes of the reference's OrderedDict build."""
  tokenizer = _tokenizer()
  instances = cpd.create_training_instances(
      [_conf("sample_text.txt")], tokenizer, 128, 2, 0.1, 0.15, 20,
      random.Random(12345), do_whole_word_mask=True)
  serializer = records.ExampleSerializer(tokenizer, 128, 20)
  for max_predictions in (20, 0):
    for instance in instances[:5]:
      if max_predictions == 0:
        instance = cpd.TrainingInstance(instance.tokens, instance.segment_ids,
                                        [], [], instance.is_random_next)
      built = _protobuf_example(
          records.instance_features(instance, tokenizer.vocab, 128, 20))
      encoded = serializer.serialize(instance)
      assert tf.train.Example.FromString(encoded) == built
      if max_predictions:
        # protobuf 4 (TensorFlow 2.15) writes the reference's feature order;
        # protobuf 7 another, so the order is written by hand on every stack.
        assert encoded == io_utils.serialize_example(built.features.feature,
                                                     records._WIRE_ORDER)
        if protobuf.__version__.startswith("4."):
          assert encoded == built.SerializeToString()


def test_encoder_handles_large_ids_and_long_sequences():
  """Ids and lengths past one varint byte (and past the lookup table)."""
  vocab = {"[CLS]": 0, "[SEP]": 1, "a": 127, "b": 128, "c": 300000}
  tokenizer = type("Tokenizer", (), {"vocab": vocab})()
  tokens = ["[CLS]"] + ["a", "b", "c"] * 1500 + ["[SEP]"]
  instance = cpd.TrainingInstance(tokens, [0] * len(tokens), [1, 4000],
                                  ["a", "c"], True)
  serializer = records.ExampleSerializer(tokenizer, 5000, 3)
  built = _protobuf_example(records.instance_features(instance, vocab, 5000, 3))
  assert tf.train.Example.FromString(
      serializer.serialize(instance)) == built


def test_encoder_refuses_instances_over_the_limits():
  tokenizer = _tokenizer()
  instance = cpd.TrainingInstance(["[CLS]", "the", "[SEP]"], [0, 0, 0], [1, 2],
                                  ["the", "[SEP]"], False)
  with pytest.raises(ValueError, match="3 tokens; max_seq_length is 2"):
    records.ExampleSerializer(tokenizer, 2, 5).serialize(instance)
  with pytest.raises(ValueError, match="2 masked positions; "
                     "max_predictions_per_seq is 1"):
    records.ExampleSerializer(tokenizer, 8, 1).serialize(instance)


def test_inlined_shuffle_draws_like_random_shuffle():
  assert shuffle._FAST_SHUFFLE
  for seed in range(20):
    for size in (0, 1, 2, 3, 31, 32, 33, 127, 128, 129, 500):
      expected, got = list(range(size)), list(range(size))
      rng_expected, rng_got = random.Random(seed), random.Random(seed)
      rng_expected.shuffle(expected)
      shuffle.shuffle(got, rng_got)
      assert got == expected
      assert rng_got.random() == rng_expected.random()  # Same draws used.

  class CountingRandom(random.Random):
    calls = 0

    def shuffle(self, x):
      CountingRandom.calls += 1
      super().shuffle(x)

  shuffle.shuffle([1, 2, 3], CountingRandom(0))  # Subclasses keep their own.
  assert CountingRandom.calls == 1


def test_split_corpus_cuts_at_document_boundaries(tmp_path):
  files = write_corpus(tmp_path)
  tokenizer = _tokenizer()
  whole = instances_lib.read_documents([(p, 0, None) for p in files], tokenizer)
  assert len(whole) == 6
  for num_parts in (2, 3):
    parts, num_documents = processes.split_corpus(files, num_parts)
    pieces = [instances_lib.read_documents(part, tokenizer) for part in parts]
    assert [d for piece in pieces for d in piece] == whole
    assert [len(piece) for piece in pieces] == num_documents
    assert all(piece for piece in pieces)


def test_split_corpus_decodes_non_ascii_lines_to_find_blanks(tmp_path):
  """A line of only Unicode spaces is blank; one of non-ASCII text is not."""
  path = tmp_path / "u.txt"
  path.write_text("one a\n\u3000\u00a0\ntwo b\n\u00e9t\u00e9\n\nthree c\n",
                  encoding="utf-8")
  _, num_documents = processes.split_corpus([str(path)], 1)
  assert num_documents == [3]
  assert len(instances_lib.read_documents([(str(path), 0, None)], _tokenizer())) == 3


def test_part_output_names():
  assert processes.part_output_files(["o"], 2) == [["o-00000-of-00002"],
                                                   ["o-00001-of-00002"]]
  assert processes.part_output_files(["x", "y"], 2) == [["x"], ["y"]]
  assert processes.part_output_files(["x", "y"], 1) == [["x", "y"]]
  with pytest.raises(ValueError, match="--output_file: got 3 paths"):
    processes.part_output_files(["x", "y", "z"], 2)


def test_output_paths_checked_before_work(tmp_path):
  corpus = str(tmp_path / "corpus.txt")
  out = str(tmp_path / "o.tfrecord")
  processes.check_output_paths([corpus], [out, str(tmp_path / "p")], 1)
  for outputs, workers in (([out, out], 1), ([out, out], 2),
                           ([out, str(tmp_path / "." / "o.tfrecord")], 2)):
    with pytest.raises(ValueError, match="--output_file: .*o.tfrecord is "
                       "given more than once"):
      processes.check_output_paths([corpus], outputs, workers)
  with pytest.raises(ValueError, match="corpus.txt is also an --input_file"):
    processes.check_output_paths([corpus], [out, corpus], 1)
  with pytest.raises(ValueError, match="--output_file: .* is a directory"):
    processes.check_output_paths([corpus], [str(tmp_path)], 1)
  (tmp_path / "o.tfrecord-00001-of-00002").mkdir()
  with pytest.raises(ValueError, match="-00001-of-00002 is a directory"):
    processes.check_output_paths([corpus], [out], 2)


def _write_part(part_index, num_parts, ranges, output_files, failure,
                random_next_from=()):
  """A part runner for the tests: writes its ranges' bytes, or fails.

  `failure`: None, or (part index, "raise" or "die").
  """
  del random_next_from  # Only the ranges are written.
  if failure and failure[0] == part_index:
    if failure[1] == "die":
      os._exit(3)
    raise ValueError("part %d refused" % part_index)
  data = b"".join(open(path, "rb").read()[start:end]
                  for path, start, end in ranges)
  with open(output_files[0], "wb") as f:
    f.write(data)
  return {"documents": num_parts, "instances": len(data)}


def test_run_parts_writes_each_part_and_reports_usage(tmp_path):
  files = write_corpus(tmp_path)
  out = str(tmp_path / "out" / "o")
  results = processes.run_parts(files, 3, [out], _write_part, None)
  written = []
  for k, result in enumerate(results):
    with open("%s-%05d-of-00003" % (out, k), "rb") as f:
      written.append(f.read())
    assert result["instances"] == len(written[-1]) > 0
    assert result["documents"] == 3
    assert result["cpu_s"] > 0 and result["peak_rss_mb"] > 0
  assert b"".join(written) == b"".join(open(p, "rb").read() for p in files)
  assert len(os.listdir(tmp_path / "out")) == 3


def test_run_parts_failing_part_leaves_no_outputs(tmp_path):
  files = write_corpus(tmp_path)
  with pytest.raises(ValueError, match="part 1 refused"):
    processes.run_parts(files, 2, [str(tmp_path / "o")], _write_part,
                        (1, "raise"))
  assert sorted(os.listdir(tmp_path)) == sorted(os.path.basename(f)
                                                for f in files)


def test_run_parts_reports_a_worker_that_dies(tmp_path):
  if "fork" not in processes.multiprocessing.get_all_start_methods():
    skip_or_fail("a dying worker is only simulated with fork")
  files = write_corpus(tmp_path)
  with pytest.raises(ChildProcessError, match="part-1 exited with code 3"):
    processes.run_parts(files, 2, [str(tmp_path / "o")], _write_part,
                        (1, "die"))
  assert not [p for p in os.listdir(tmp_path) if not p.startswith("corpus")]


def test_run_parts_refuses_a_part_without_a_document(tmp_path):
  path = tmp_path / "two.txt"
  path.write_text("one a\n\ntwo b\n", encoding="utf-8")
  with pytest.raises(ValueError, match=r"--num_workers=3: part 1 of the "
                     r"corpus \(no text left to cut\) holds no document; the "
                     r"corpus has 2 document\(s\)"):
    processes.run_parts([str(path)], 3, [str(tmp_path / "o")], _write_part,
                        None)
  assert os.listdir(tmp_path) == ["two.txt"]


def test_split_corpus_gives_every_part_a_document(tmp_path):
  """Three documents of 268, 1,604 and 2,517 bytes (the shape of the
  reference's sample_text.txt): two parts of 2 and 1 documents, cut at the
  boundary nearest the middle; the one-document part borrows its "random
  next" documents from the other part. The old cut (the first blank line at
  or after the middle) left part 1 empty."""
  path = tmp_path / "three.txt"
  docs = ["a" * 267, "b" * 1603, "c" * 2516]
  path.write_text("\n\n".join(docs) + "\n", encoding="utf-8")
  parts, num_documents = processes.split_corpus([str(path)], 2)
  assert num_documents == [2, 1]
  assert parts == [[(str(path), 0, 268 + 1 + 1604)],
                   [(str(path), 268 + 1 + 1604, None)]]
  assert processes.random_next_ranges(parts, num_documents) == [[], parts[0]]
  # Three parts: one document each, every part borrowing.
  parts, num_documents = processes.split_corpus([str(path)], 3)
  assert num_documents == [1, 1, 1]
  assert processes.random_next_ranges(parts, num_documents) == [
      parts[1], parts[2], parts[1]]
  parts, num_documents = processes.split_corpus([str(path)], 4)
  with pytest.raises(ValueError, match="holds no document; the corpus has 3"):
    processes.check_parts(parts, num_documents)


def test_split_corpus_cuts_at_the_nearest_boundary(tmp_path):
  """Ten documents of 99 bytes, a blank line after each but the last (999
  bytes): 2 parts cut at the blank line nearest byte 499.5 (499, after
  document 5), 3 parts at those nearest 333 and 666 (299 and 699)."""
  path = tmp_path / "ten.txt"
  path.write_text("\n\n".join(["x" * 98] * 10) + "\n", encoding="utf-8")
  _, num_documents = processes.split_corpus([str(path)], 2)
  assert num_documents == [5, 5]
  _, num_documents = processes.split_corpus([str(path)], 3)
  assert num_documents == [3, 4, 3]
