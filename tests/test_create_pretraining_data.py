# coding=utf-8
"""Tests of create_pretraining_data.py.

Conformance: the four `conformance/pretraining_data` folders (instances and
TFRecord bytes), then the record format and the reference's public names,
round-robin outputs, reading rules (invalid UTF-8, `\\r`), `--num_workers`,
and the command line's one-line errors (a few subprocess runs). The encoder,
shuffle and multi-process runner are tested in test_pretraining_data_utils.
"""

import json
import os
import random
import subprocess
import time
import types

import pytest
import tensorflow.compat.v1 as tf

from helpers import data_path
from helpers import REPO_ROOT
from helpers import script_command
from helpers import script_env
from helpers import write_corpus
from helpers import write_three_documents
from helpers import skip_or_fail
import create_pretraining_data as cpd
from bert_tf.tasks.pretraining import instances as instances_lib
from bert_tf.tasks.pretraining import processes as pretraining_processes
from bert_tf.tasks.pretraining import records as pretraining_records
import tokenization

# (folder, input, vocab, do_whole_word_mask) of conformance/pretraining_data.
_CONFORMANCE = [
    ("en_wwm_false", "sample_text.txt", "vocab.txt", False),
    ("en_wwm_true", "sample_text.txt", "vocab.txt", True),
    ("zh_wwm_false", "zh_sample.txt", "vocab_chinese.txt", False),
    ("zh_wwm_true", "zh_sample.txt", "vocab_chinese.txt", True),
]

_KEYS = {"input_ids": ("int64", 128), "input_mask": ("int64", 128),
         "segment_ids": ("int64", 128), "masked_lm_positions": ("int64", 20),
         "masked_lm_ids": ("int64", 20), "masked_lm_weights": ("float", 20),
         "next_sentence_labels": ("int64", 1)}

_tokenizers = {}


def _conf(*parts):
  return data_path("conformance", "pretraining_data", *parts)


def _tokenizer(vocab_name):
  if vocab_name not in _tokenizers:
    _tokenizers[vocab_name] = tokenization.FullTokenizer(_conf(vocab_name),
                                                         do_lower_case=True)
  return _tokenizers[vocab_name]


def _conformance_instances(input_name, vocab_name, wwm, seed=12345):
  return cpd.create_training_instances(
      [_conf(input_name)], _tokenizer(vocab_name), 128, 2, 0.1, 0.15, 20,
      random.Random(seed), do_whole_word_mask=wwm)


def _as_row(instance):
  return {"tokens": instance.tokens, "segment_ids": instance.segment_ids,
          "is_random_next": instance.is_random_next,
          "masked_lm_positions": instance.masked_lm_positions,
          "masked_lm_labels": instance.masked_lm_labels}


def _records(path):
  return list(tf.io.tf_record_iterator(path))


def _features(record):
  """name -> list of values of one serialized Example."""
  feature = tf.train.Example.FromString(record).features.feature
  out = {}
  for name, value in feature.items():
    kind = value.WhichOneof("kind")
    out[name] = list(getattr(value, kind).value)
  return out


@pytest.mark.parametrize("folder,input_name,vocab_name,wwm", _CONFORMANCE)
def test_instances_and_records_match_conformance(tmp_path, folder, input_name,
                                                 vocab_name, wwm):
  instances = _conformance_instances(input_name, vocab_name, wwm)
  with open(_conf(folder, "instances.jsonl"), encoding="utf-8") as f:
    expected = [json.loads(line) for line in f]
  assert [_as_row(i) for i in instances] == expected

  output = str(tmp_path / "examples.tfrecord")
  cpd.write_instance_to_example_files(instances, _tokenizer(vocab_name), 128,
                                      20, [output])
  got, want = _records(output), _records(_conf(folder, "examples.tfrecord"))
  assert len(got) == len(want)
  for index, (g, w) in enumerate(zip(got, want)):
    assert _features(g) == _features(w), "record %d" % index
  with open(output, "rb") as f_got, open(
      _conf(folder, "examples.tfrecord"), "rb") as f_want:
    assert f_got.read() == f_want.read()
  assert not [p for p in os.listdir(tmp_path) if ".tmp" in p]


def test_create_int_feature_holds_an_int64_list():
  feature = cpd.create_int_feature(v for v in (101, 0, 2**40, -1))
  assert isinstance(feature, tf.train.Feature)
  assert feature.WhichOneof("kind") == "int64_list"
  assert list(feature.int64_list.value) == [101, 0, 2**40, -1]
  assert cpd.create_int_feature([]).WhichOneof("kind") == "int64_list"


def test_create_float_feature_holds_a_float32_list():
  feature = cpd.create_float_feature((1.0, 0.0, 0.1))
  assert isinstance(feature, tf.train.Feature)
  assert feature.WhichOneof("kind") == "float_list"
  values = list(feature.float_list.value)
  assert values[:2] == [1.0, 0.0]
  assert values[2] != 0.1 and abs(values[2] - 0.1) < 1e-8  # Stored as float32.


def test_reference_public_names_are_kept():
  for name in ("TrainingInstance", "create_training_instances",
               "create_instances_from_document",
               "create_masked_lm_predictions", "truncate_seq_pair",
               "write_instance_to_example_files", "create_int_feature",
               "create_float_feature", "main", "define_flags"):
    assert callable(getattr(cpd, name)), name
  masked = cpd.MaskedLmInstance(index=3, label="cat")
  assert masked._fields == ("index", "label") and masked == (3, "cat")


def test_records_have_feature_keys_dtypes_and_lengths(tmp_path):
  instances = _conformance_instances("zh_sample.txt", "vocab_chinese.txt",
                                     False)
  output = str(tmp_path / "zh.tfrecord")
  cpd.write_instance_to_example_files(
      instances, _tokenizer("vocab_chinese.txt"), 128, 20, [output])
  for record, instance in zip(_records(output), instances):
    feature = tf.train.Example.FromString(record).features.feature
    assert set(feature) == set(_KEYS)
    for name, (dtype, length) in _KEYS.items():
      assert feature[name].WhichOneof("kind") == dtype + "_list"
      assert len(getattr(feature[name], dtype + "_list").value) == length
    values = _features(record)
    num_tokens = len(instance.tokens)
    assert values["input_mask"] == [1] * num_tokens + [0] * (128 - num_tokens)
    num_masked = len(instance.masked_lm_positions)
    assert values["masked_lm_weights"] == [1.0] * num_masked + [0.0] * (
        20 - num_masked)
    assert values["next_sentence_labels"] == [int(instance.is_random_next)]


def test_chinese_characters_are_single_tokens():
  instances = _conformance_instances("zh_sample.txt", "vocab_chinese.txt",
                                     False)
  labels = [t for i in instances for t in i.masked_lm_labels]
  cjk = [t for t in labels if any(0x4E00 <= ord(c) <= 0x9FFF for c in t)]
  assert cjk and all(len(t) == 1 for t in cjk)


def test_outputs_receive_instances_in_turn(tmp_path):
  tokenizer = _tokenizer("vocab.txt")
  instances = _conformance_instances("sample_text.txt", "vocab.txt", False)
  single = str(tmp_path / "all.tfrecord")
  cpd.write_instance_to_example_files(instances, tokenizer, 128, 20, [single])
  outputs = [str(tmp_path / ("shard%d.tfrecord" % k)) for k in range(3)]
  written = cpd.write_instance_to_example_files(instances, tokenizer, 128, 20,
                                                outputs)
  assert written == len(instances) == 23
  everything = _records(single)
  for k, path in enumerate(outputs):
    assert _records(path) == everything[k::3]


def test_truncate_seq_pair_drops_from_the_longer_side():
  rng = random.Random(0)
  for len_a, len_b in [(10, 3), (3, 10), (6, 6), (1, 40)]:
    tokens_a = ["a%d" % i for i in range(len_a)]
    tokens_b = ["b%d" % i for i in range(len_b)]
    cpd.truncate_seq_pair(tokens_a, tokens_b, 5, rng)
    assert len(tokens_a) + len(tokens_b) == 5
    assert tokens_a and tokens_b
    # What is left is a contiguous run of each side.
    for kept, prefix in ((tokens_a, "a"), (tokens_b, "b")):
      first = int(kept[0][1:])
      assert kept == ["%s%d" % (prefix, first + i) for i in range(len(kept))]
  tokens_a, tokens_b = ["x"] * 4, ["y"] * 4
  cpd.truncate_seq_pair(tokens_a, tokens_b, 7, rng)
  assert (len(tokens_a), len(tokens_b)) == (4, 3)  # B when equal.


def test_masking_count_positions_and_whole_words():
  vocab_words = ["[PAD]", "[MASK]", "foo", "##bar", "baz"]
  tokens = (["[CLS]"] + ["foo", "##bar", "##bar", "baz"] * 5 + ["[SEP]"] +
            ["##bar", "baz"] * 3 + ["[SEP]"])
  for wwm in (False, True):
    rng = random.Random(7)
    output, positions, labels = cpd.create_masked_lm_predictions(
        tokens, 0.15, 20, vocab_words, rng, do_whole_word_mask=wwm)
    assert positions == sorted(positions)
    assert labels == [tokens[p] for p in positions]
    assert all(tokens[p] not in ("[CLS]", "[SEP]") for p in positions)
    assert {p for p, t in enumerate(output) if t != tokens[p]} <= set(positions)
    if wwm:
      assert len(positions) <= round(len(tokens) * 0.15)
      for p in positions:  # A word's pieces are masked together.
        if p + 1 < len(tokens) and tokens[p + 1].startswith("##"):
          assert p + 1 in positions
    else:
      assert len(positions) == round(len(tokens) * 0.15)


def test_lines_are_decoded_like_the_reference(tmp_path):
  """Invalid UTF-8 is dropped, `\\r` removed, U+2028 does not end a line."""
  path = tmp_path / "odd.txt"
  path.write_bytes(b"caf\xff\xfeed going\r\nthe\x80 cat\xe2\x80\xa8sat\n\n"
                   b"second doc here\n")
  documents = instances_lib.read_documents([(str(path), 0, None)],
                                  _tokenizer("vocab.txt"))
  assert documents == [[["cafe", "##d", "going"], ["the", "cat", "sat"]],
                       [["second", "doc", "here"]]]


def _two_workers(files, tokenizer, tmp_path):
  """Runs `--num_workers=2` (seed 7, 16 tokens, 3 dupes) in process;
  returns (the two output paths, the number of instances)."""
  options = {"max_seq_length": 16, "dupe_factor": 3, "short_seq_prob": 0.1,
             "masked_lm_prob": 0.15, "max_predictions_per_seq": 3,
             "do_whole_word_mask": False}
  outputs = [str(tmp_path / "a.tfrecord"), str(tmp_path / "b.tfrecord")]
  return outputs, cpd._run_workers(files, tokenizer, options, 7, 2, outputs)


def test_workers_write_parts_with_their_own_seeds(tmp_path):
  files = write_corpus(tmp_path)
  tokenizer = _tokenizer("vocab.txt")
  outputs, total = _two_workers(files, tokenizer, tmp_path)
  parts, _ = pretraining_processes.split_corpus(files, 2)
  serializer = pretraining_records.ExampleSerializer(tokenizer, 16, 3)
  count = 0
  for k, (part, output) in enumerate(zip(parts, outputs)):
    instances = instances_lib.instances_from_documents(
        instances_lib.read_documents(part, tokenizer), tokenizer, 16, 3, 0.1, 0.15, 3,
        random.Random(7 + k), False)
    assert _records(output) == [serializer.serialize(i) for i in instances]
    count += len(instances)
  assert total == count
  assert sorted(os.listdir(tmp_path)) == sorted(
      ["a.tfrecord", "b.tfrecord"] + [os.path.basename(f) for f in files])


def test_failing_part_leaves_no_outputs(tmp_path):
  """A part whose second document tokenizes to nothing fails in its worker;
  the other part's finished file is removed too."""
  path = tmp_path / "corpus.txt"
  path.write_text("alpha one\n\nbeta two\n\ngamma three\n\n\x07\n",
                  encoding="utf-8")
  _, num_documents = pretraining_processes.split_corpus([str(path)], 2)
  assert num_documents == [2, 2]
  options = {"max_seq_length": 16, "dupe_factor": 1, "short_seq_prob": 0.1,
             "masked_lm_prob": 0.15, "max_predictions_per_seq": 3,
             "do_whole_word_mask": False}
  with pytest.raises(ValueError, match="part 1 of the corpus .* holds only 1 "
                     "document"):
    cpd._run_workers([str(path)], _tokenizer("vocab.txt"), options, 1, 2,
                     [str(tmp_path / "out")])
  assert os.listdir(tmp_path) == ["corpus.txt"]


def test_part_without_a_document_is_refused(tmp_path):
  path = tmp_path / "three.txt"
  path.write_text("one a\n\ntwo b\n\nthree c\n", encoding="utf-8")
  with pytest.raises(ValueError, match=r"part 1 of the corpus .* holds no "
                     r"document; the corpus has 3 document\(s\)"):
    cpd._run_workers([str(path)], _tokenizer("vocab.txt"), {}, 1, 4,
                     [str(tmp_path / "o")])


# ---------------------------------------------------------------------------
# Command line. Each run imports TensorFlow (seconds), so all runs start
# together in one fixture and the tests check their results.


def _cli_cases(root):
  """name -> (argv, output folder) of each command-line run."""
  empty = root / "empty.txt"
  empty.write_text("\n  \n\n", encoding="utf-8")
  vocab = root / "bad_vocab.txt"
  vocab.write_text("[PAD]\n[UNK]\n[CLS]\nthe\n", encoding="utf-8")
  cases = {
      "two_workers": ["--input_file=" + _conf("zh_sample.txt"),
                      "--vocab_file=" + _conf("vocab_chinese.txt"),
                      "--dupe_factor=1", "--max_seq_length=64",
                      "--num_workers=2"],
      "no_match": ["--input_file=" + str(root / "nothing*.txt"),
                   "--vocab_file=" + _conf("vocab.txt")],
      "empty": ["--input_file=" + str(empty),
                "--vocab_file=" + _conf("vocab.txt")],
      "bad_vocab": ["--input_file=" + _conf("zh_sample.txt"),
                    "--vocab_file=" + str(vocab)],
  }
  runs = {}
  for name, argv in cases.items():
    out_dir = root / name
    out_dir.mkdir()
    runs[name] = (argv + ["--output_file=" + str(out_dir / "out.tfrecord")],
                  out_dir)
  return runs


@pytest.fixture(scope="module")
def cli(tmp_path_factory):
  """name -> (CompletedProcess-like result, output folder)."""
  root = tmp_path_factory.mktemp("cli")
  env = script_env(TF_CPP_MIN_LOG_LEVEL="3")
  started = {}
  for name, (argv, out_dir) in _cli_cases(root).items():
    started[name] = (subprocess.Popen(
        script_command("create_pretraining_data.py", argv),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        cwd=REPO_ROOT), out_dir)
  results = {}
  for name, (proc, out_dir) in started.items():
    stdout, stderr = proc.communicate(timeout=600)
    results[name] = (subprocess.CompletedProcess(proc.args, proc.returncode,
                                                 stdout, stderr), out_dir)
  return results


def _assert_one_line_error(proc, *fragments):
  assert proc.returncode != 0
  errors = [l for l in proc.stderr.splitlines() if l.startswith("error: ")]
  assert len(errors) == 1, proc.stderr[-2000:]
  assert "Traceback" not in proc.stderr
  for fragment in fragments:
    assert fragment in errors[0], errors[0]


@pytest.mark.e2e
@pytest.mark.slow
def test_cli_two_workers_one_output_path(cli):
  proc, out_dir = cli["two_workers"]
  assert proc.returncode == 0, proc.stderr[-3000:]
  names = sorted(os.listdir(out_dir))
  assert names == ["out.tfrecord-00000-of-00002",
                   "out.tfrecord-00001-of-00002"]
  for name in names:
    records = _records(str(out_dir / name))
    assert records
    for record in records:
      values = _features(record)
      num_tokens = sum(values["input_mask"])
      assert values["input_ids"][0] == 101  # [CLS]
      assert values["input_ids"][num_tokens - 1] == 102  # [SEP]
      assert len(values["input_ids"]) == 64
  assert "peak RSS" in proc.stderr


@pytest.mark.slow
def test_cli_glob_matching_nothing(cli):
  proc, _ = cli["no_match"]
  _assert_one_line_error(proc, "--input_file", "nothing*.txt",
                         "matched no files")


@pytest.mark.slow
def test_cli_empty_corpus(cli):
  proc, out_dir = cli["empty"]
  _assert_one_line_error(proc, "--input_file", "empty.txt", "no text",
                         "blank line between documents")
  assert not os.listdir(out_dir)


@pytest.mark.slow
def test_cli_vocab_without_special_tokens(cli):
  proc, _ = cli["bad_vocab"]
  _assert_one_line_error(proc, "--vocab_file", "bad_vocab.txt",
                         "lacks [SEP], [MASK]")


def test_too_short_max_seq_length_is_refused():
  assert cpd._split_paths(" a , ,b,") == ["a", "b"]
  with pytest.raises(ValueError, match="max_seq_length is 4; expected at "
                     "least 5"):
    cpd.create_instances_from_document([[["a"]], [["b"]]], 0, 4, 0.1, 0.15, 2,
                                       ["a"], random.Random(1))


def _reference_truncate(tokens_a, tokens_b, max_num_tokens, rng):
  """Token-by-token truncation, as SPEC §6.1 item 5 words it."""
  while len(tokens_a) + len(tokens_b) > max_num_tokens:
    longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
    if rng.random() < 0.5:
      del longer[0]
    else:
      longer.pop()


def test_truncate_seq_pair_is_linear_and_matches_token_by_token():
  case_rng = random.Random(7)
  for _ in range(200):
    len_a, len_b = case_rng.randint(0, 30), case_rng.randint(0, 30)
    limit = case_rng.randint(0, 40)
    pairs = []
    for truncate in (cpd.truncate_seq_pair, _reference_truncate):
      tokens_a = ["a%d" % i for i in range(len_a)]
      tokens_b = ["b%d" % i for i in range(len_b)]
      rng = random.Random(limit)
      truncate(tokens_a, tokens_b, limit, rng)
      pairs.append((tokens_a, tokens_b, rng.random()))
    assert pairs[0] == pairs[1]
  tokens_a, tokens_b = list(range(200000)), list(range(150000))
  start = time.time()
  cpd.truncate_seq_pair(tokens_a, tokens_b, 125, random.Random(3))
  assert time.time() - start < 1.0
  assert len(tokens_a) + len(tokens_b) == 125


@pytest.mark.parametrize("name,value,message", [
    ("max_predictions_per_seq", 0, "--max_predictions_per_seq is 0; expected "
     "at least 1"),
    ("max_predictions_per_seq", -3, "--max_predictions_per_seq is -3"),
    ("masked_lm_prob", 0.0, r"--masked_lm_prob is 0.0; expected a "
     r"probability in \(0, 1\]"),
    ("masked_lm_prob", 1.5, "--masked_lm_prob is 1.5"),
    ("masked_lm_prob", -0.1, "--masked_lm_prob is -0.1"),
])
def test_out_of_range_masking_flags_are_refused(monkeypatch, name, value,
                                                message):
  values = dict(input_file="i", output_file="o", vocab_file="v",
                max_seq_length=128, max_predictions_per_seq=20, dupe_factor=1,
                num_workers=1, masked_lm_prob=0.15, short_seq_prob=0.1,
                pack_sequences=False, dynamic_masking=False)
  monkeypatch.setattr(cpd, "FLAGS", types.SimpleNamespace(**values))
  cpd._check_flags(cpd.FLAGS)  # The defaults pass.
  setattr(cpd.FLAGS, name, value)
  with pytest.raises(ValueError, match=message):
    cpd._check_flags(cpd.FLAGS)


def test_two_workers_split_three_documents_into_two_parts(tmp_path):
  """The old cut (first blank line at or after the middle) left part 1
  empty: `holds 0 document(s)`. Now part 1 holds the third document and
  takes its random next segments from part 0's documents, never its own."""
  files = write_three_documents(tmp_path / "three.txt")
  tokenizer = _tokenizer("vocab.txt")
  outputs, total = _two_workers(files, tokenizer, tmp_path)
  parts, num_documents = pretraining_processes.split_corpus(files, 2)
  assert num_documents == [2, 1]
  own = instances_lib.read_documents(parts[1], tokenizer)
  others = instances_lib.read_documents(parts[0], tokenizer)
  instances = instances_lib.instances_from_documents(
      own, tokenizer, 16, 3, 0.1, 0.15, 3, random.Random(7 + 1), False,
      random_next_only=others)
  serializer = pretraining_records.ExampleSerializer(tokenizer, 16, 3)
  assert _records(outputs[1]) == [serializer.serialize(i) for i in instances]
  random_next = [i for i in instances if i.is_random_next]
  assert random_next and len(random_next) < len(instances)
  for instance in random_next:
    b = instance.tokens[instance.segment_ids.index(1):]
    assert not {"gamma", "five", "six", "seven"} & set(b)
    assert {"alpha", "beta", "one", "two", "three", "four"} & set(b)
  assert total == len(instances) + len(_records(outputs[0]))
