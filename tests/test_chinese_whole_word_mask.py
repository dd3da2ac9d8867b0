# coding=utf-8
"""Tests of `create_pretraining_data.py --do_chinese_whole_word_mask`.

The tokens (and so the ids) are those without the flag, with the Chinese
characters that continue a jieba word marked; the masked spans cover whole
segmenter words (English words still group by `##`) and keep the masking
budget; `--num_workers` and Beam write what one worker writes for the same
parts; a missing segmenter is one `error:` line. The flag-off bytes are the
conformance tests' (test_create_pretraining_data.py). Needs the chinese
extra (`./setup.sh --test` installs it); skipped, or failed under CI,
without it.
"""

import os
import random
import subprocess
import sys
import types

import pytest
import tensorflow.compat.v1 as tf

from helpers import data_path
from helpers import import_or_skip
from helpers import REPO_ROOT
from helpers import script_command
from helpers import script_env
from helpers import shared_path
import create_pretraining_data as cpd
from bert_tf.tasks.pretraining import instances as instances_lib
from bert_tf.corpus import instances as beam_instances
from bert_tf.tasks.pretraining import processes as pretraining_processes
from bert_tf.tasks.pretraining import records as pretraining_records
from bert_tf.tasks.pretraining import whole_words
import tokenization

_HINT = "./setup.sh --chinese (or pip install .[chinese])"
_ZH_SAMPLE = ("conformance", "pretraining_data", "zh_sample.txt")
_ZH_VOCAB = ("conformance", "pretraining_data", "vocab_chinese.txt")
_OPTIONS = {"max_seq_length": 64, "dupe_factor": 2, "short_seq_prob": 0.1,
            "masked_lm_prob": 0.15, "max_predictions_per_seq": 10,
            "do_whole_word_mask": False, "do_chinese_whole_word_mask": True}


@pytest.fixture(scope="module")
def jieba():
  return import_or_skip("jieba", _HINT)


@pytest.fixture(scope="module")
def tokenizer():
  return tokenization.FullTokenizer(data_path(*_ZH_VOCAB), do_lower_case=True)


@pytest.fixture(scope="module")
def marking(jieba, tokenizer):
  del jieba
  return whole_words.WordMarkingTokenizer(tokenizer)


def _shown(tokens):
  """Tokens with a `+` before each word continuation."""
  return ["+" * whole_words.is_continuation(t) + t for t in tokens]


def test_continuations_follow_jieba_words_and_tokens_are_unchanged(
    jieba, tokenizer, marking):
  text = "我爱北京天安门"
  assert jieba.lcut(text) == ["我", "爱", "北京", "天安门"]
  tokens = marking.tokenize(text)
  assert _shown(tokens) == ["我", "爱", "北", "+京", "天", "+安", "+门"]
  assert tokens == tokenizer.tokenize(text)
  assert (tokenizer.convert_tokens_to_ids(tokens) ==
          tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text)))


def test_every_wiki_line_keeps_its_tokens_and_groups_are_jieba_words(
    jieba, tokenizer, marking):
  """On the real Chinese Wikipedia sample: the same tokens as without the
  flag on every line, and the Chinese groups of two or more characters are
  jieba's all-Chinese words of two or more characters, in order."""
  path = shared_path("data", "pretrain", "zh_cmrc2018_dev_wiki.txt")
  with open(path, encoding="utf-8") as f:
    lines = [line.strip() for line in f if line.strip()][:1500]
  num_marked = 0
  for line in lines:
    tokens = marking.tokenize(line)
    assert tokens == tokenizer.tokenize(line), line
    num_marked += sum(map(whole_words.is_continuation, tokens))
    if "[UNK]" in tokens:
      continue
    groups = ["".join(tokens[i] for i in group)
              for group in whole_words.word_groups(tokens)]
    want = [w for w in jieba.lcut(line)
            if len(w) > 1 and whole_words.is_chinese(w)]
    assert [g for g in groups if len(g) > 1 and whole_words.is_chinese(g)] == [
        w.lower() for w in want], line
  assert num_marked > len(lines)


def test_mixed_text_groups_english_by_wordpieces(marking):
  tokens = ["[CLS]"] + marking.tokenize("我喜欢playing足球") + ["[SEP]"]
  assert _shown(tokens) == ["[CLS]", "我", "喜", "+欢", "play", "##ing", "足",
                            "+球", "[SEP]"]
  assert whole_words.word_groups(tokens) == [[1], [2, 3], [4, 5], [6, 7]]


def test_a_continuation_after_sep_starts_its_own_group():
  """Truncation can cut a word's start off: the rest is a word of its own,
  while a `##` piece still joins across `[SEP]` (the reference's rule)."""
  cont = whole_words.WordContinuation
  tokens = ["[CLS]", "北", cont("京"), "[SEP]", cont("安"), cont("门"), "[SEP]",
            "##x", "[SEP]"]
  assert whole_words.word_groups(tokens) == [[1, 2], [4, 5, 7]]


def test_a_word_longer_than_the_budget_is_skipped_whole():
  cont = whole_words.WordContinuation
  tokens = (["[CLS]", "中", cont("华"), cont("人"), cont("民"), cont("共"),
             "和", "[SEP]"])
  for seed in range(20):
    chosen = whole_words.choose_whole_words(tokens, 3, random.Random(seed))
    assert chosen == [6]  # The five-character word never fits in 3.
  assert sorted(whole_words.choose_whole_words(
      tokens, 6, random.Random(0))) == [1, 2, 3, 4, 5, 6]


def test_a_segmenter_that_loses_characters_leaves_the_line_unmarked(
    tokenizer):
  """Not expected of jieba; the line keeps its tokens, nothing marked."""
  class Dropping(object):
    def cut(self, text):
      return iter([text[1:]])  # One word, without the first character.
  marking = whole_words.WordMarkingTokenizer(tokenizer, Dropping())
  tokens = marking.tokenize("天安门")
  assert _shown(tokens) == ["天", "安", "门"]


def test_a_continuation_is_the_plain_token_in_records(tokenizer):
  cont = whole_words.WordContinuation
  marked = ["[CLS]", "北", cont("京"), "[SEP]", "天", cont("安"), "[SEP]"]
  plain = [str.__str__(t) for t in marked]
  assert marked == plain and hash(marked[2]) == hash("京")
  serializer = pretraining_records.ExampleSerializer(tokenizer, 16, 4)
  make = lambda tokens: cpd.TrainingInstance(tokens, [0] * 4 + [1] * 3,
                                             [2], [tokens[2]], False)
  assert serializer.serialize(make(marked)) == serializer.serialize(
      make(plain))


@pytest.fixture(scope="module")
def wiki_instances(jieba, tokenizer, tmp_path_factory):
  """Instances of the first 120 documents of the Chinese Wikipedia sample,
  with and without the flag (seed 3, 128 tokens, 20 predictions)."""
  del jieba
  path = shared_path("data", "pretrain", "zh_cmrc2018_dev_wiki.txt")
  with open(path, encoding="utf-8") as f:
    documents = f.read().split("\n\n")[:120]
  corpus = tmp_path_factory.mktemp("zh") / "corpus.txt"
  corpus.write_text("\n\n".join(documents) + "\n", encoding="utf-8")
  return {flag: cpd.create_training_instances(
      [str(corpus)], tokenizer, 128, 1, 0.1, 0.15, 20, random.Random(3),
      do_chinese_whole_word_mask=flag) for flag in (False, True)}


def test_masked_spans_are_whole_words_within_the_budget(wiki_instances):
  num_long_words = 0
  for instance in wiki_instances[True]:
    tokens = whole_words.unmasked_tokens(instance)
    masked = set(instance.masked_lm_positions)
    budget = min(20, max(1, int(round(len(tokens) * 0.15))))
    assert len(masked) <= budget
    left = []
    for group in whole_words.word_groups(tokens):
      inside = [p in masked for p in group]
      assert all(inside) or not any(inside), (group, _shown(tokens))
      if all(inside) and len(group) > 1 and whole_words.is_chinese(
          "".join(tokens[p] for p in group)):
        num_long_words += 1
      if not any(inside):
        left.append(len(group))
    # The reference's rule: a word is skipped only when it does not fit.
    assert all(size > budget - len(masked) for size in left)
  assert num_long_words > len(wiki_instances[True])


def test_masked_fraction_stays_masked_lm_prob(wiki_instances):
  def fraction(instances):
    return (sum(len(i.masked_lm_positions) for i in instances) /
            sum(len(i.tokens) for i in instances))
  with_flag, without = fraction(wiki_instances[True]), fraction(
      wiki_instances[False])
  assert abs(without - 0.15) < 0.005
  assert abs(with_flag - without) < 0.005


def test_documents_are_the_same_tokens_as_without_the_flag(jieba, tokenizer):
  del jieba
  sources = [(data_path(*_ZH_SAMPLE), 0, None)]
  marked = instances_lib.read_documents(sources, tokenizer, chinese_words_too=True)
  assert marked == instances_lib.read_documents(sources, tokenizer)
  assert any(whole_words.is_continuation(t)
             for document in marked for segment in document for t in segment)


def test_workers_with_the_flag_write_what_one_worker_writes_per_part(
    jieba, tokenizer, tmp_path):
  del jieba
  files = [data_path(*_ZH_SAMPLE)]
  outputs = [str(tmp_path / "a.tfrecord"), str(tmp_path / "b.tfrecord")]
  cpd._run_workers(files, tokenizer, _OPTIONS, 7, 2, outputs)
  parts, _ = pretraining_processes.split_corpus(files, 2)
  serializer = pretraining_records.ExampleSerializer(tokenizer, 64, 10)
  for k, (part, output) in enumerate(zip(parts, outputs)):
    instances = instances_lib.instances_from_documents(
        instances_lib.read_documents(part, tokenizer, chinese_words_too=True),
        tokenizer, 64, 2, 0.1, 0.15, 10, random.Random(7 + k), True)
    with open(output, "rb") as f:
      got = f.read()
    assert got == _record_file(instances, serializer, tmp_path / "want")


def _record_file(instances, serializer, path):
  with tf.io.TFRecordWriter(str(path)) as writer:
    for instance in instances:
      writer.write(serializer.serialize(instance))
  with open(path, "rb") as f:
    return f.read()


def test_beam_shards_with_the_flag_equal_worker_parts(jieba, tokenizer,
                                                      tmp_path):
  del jieba
  import_or_skip("apache_beam", "pip install .[beam] (or ./setup.sh --beam)")
  files = [data_path(*_ZH_SAMPLE)]
  (tmp_path / "w").mkdir()
  (tmp_path / "b").mkdir()
  cpd._run_workers(files, tokenizer, _OPTIONS, 5, 2, [str(tmp_path / "w/o")])
  flag_values = types.SimpleNamespace(
      num_shards=2, num_workers=1,
      pipeline_options="--runner=DirectRunner,--direct_running_mode=in_memory")
  beam_instances.run_shards(files, [str(tmp_path / "b/o")], cpd._run_part,
                            flag_values, tokenizer,
                            dict(_OPTIONS, parts_flag="num_shards"), 5)
  for k in range(2):
    name = "o-%05d-of-00002" % k
    with open(tmp_path / "w" / name, "rb") as w, open(
        tmp_path / "b" / name, "rb") as b:
      assert w.read() == b.read()


def test_missing_jieba_is_a_value_error_naming_the_extra(monkeypatch):
  monkeypatch.setitem(sys.modules, "jieba", None)
  for call in (whole_words.check_installed, whole_words.load_segmenter):
    with pytest.raises(ValueError, match=r"^--do_chinese_whole_word_mask "
                       r"needs the jieba segmenter.*\./setup\.sh --chinese"):
      call()


def _start_cli(output, **env):
  return subprocess.Popen(
      script_command("create_pretraining_data.py", [
          "--input_file=" + data_path(*_ZH_SAMPLE),
          "--vocab_file=" + data_path(*_ZH_VOCAB), "--output_file=" + output,
          "--do_chinese_whole_word_mask", "--dupe_factor=1"]),
      cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
      text=True, env=script_env(TF_CPP_MIN_LOG_LEVEL="3", **env))


@pytest.mark.e2e
@pytest.mark.slow
def test_cli_writes_the_library_records_and_without_jieba_one_line(
    jieba, tokenizer, tmp_path):
  """The command line with the flag writes what `create_training_instances`
  makes; with a jieba that fails to import (as a missing one does) it
  prints one `error:` line and writes nothing."""
  del jieba
  fake = tmp_path / "site" / "jieba"
  fake.mkdir(parents=True)
  (fake / "__init__.py").write_text("raise ImportError('no jieba here')\n")
  good = _start_cli(str(tmp_path / "good.tfrecord"))
  bad = _start_cli(str(tmp_path / "out.tfrecord"),
                   PYTHONPATH=str(tmp_path / "site"))
  good.communicate(timeout=300)
  _, stderr = bad.communicate(timeout=300)
  proc = subprocess.CompletedProcess(bad.args, bad.returncode, "", stderr)
  assert good.returncode == 0
  instances = cpd.create_training_instances(
      [data_path(*_ZH_SAMPLE)], tokenizer, 128, 1, 0.1, 0.15, 20,
      random.Random(12345), do_chinese_whole_word_mask=True)
  serializer = pretraining_records.ExampleSerializer(tokenizer, 128, 20)
  with open(tmp_path / "good.tfrecord", "rb") as f:
    assert f.read() == _record_file(instances, serializer, tmp_path / "want")
  assert proc.returncode == 1
  errors = [l for l in proc.stderr.splitlines() if l.startswith("error: ")]
  assert errors == [
      "error: --do_chinese_whole_word_mask needs the jieba segmenter, which "
      "is not installed; install the chinese extra: ./setup.sh --chinese, or "
      "pip install '.[chinese]' (jieba==0.42.1)"], proc.stderr[-2000:]
  assert "Traceback" not in proc.stderr
  assert not os.path.exists(tmp_path / "out.tfrecord")
