"""The SQuAD conformance vectors (tests/data/conformance/squad) and readers of
them, shared by test_squad_data.py, test_squad_predictions.py and
test_run_squad.py.

CONFIGS maps each conformance folder to its (max_seq_length, doc_stride,
max_query_length).
"""

import json

from helpers import data_path

from bert_tf.tasks.squad import data as squad_data
import tokenization

__all__ = ["CONFIGS", "VERSIONS", "squad_path", "read_jsonl", "make_tokenizer",
           "read_examples", "convert_features"]

CONFIGS = {"seq384_stride128_query64": (384, 128, 64),
           "seq96_stride32_query24": (96, 32, 24)}
VERSIONS = ("v1.1", "v2.0")


def squad_path(*parts):
  """A path under tests/data/conformance/squad."""
  return data_path("conformance", "squad", *parts)


def read_jsonl(path):
  """The JSON objects of a JSON-lines file, in order."""
  with open(path, encoding="utf-8") as f:
    return [json.loads(line) for line in f]


def make_tokenizer():
  """The uncased tokenizer of the SQuAD conformance vocabulary."""
  return tokenization.FullTokenizer(squad_path("vocab.txt"),
                                    do_lower_case=True)


def read_examples(version, is_training):
  """The conformance examples of `version` ("v1.1"/"v2.0"), train or dev."""
  name = "input_train.json" if is_training else "input_dev.json"
  return squad_data.read_squad_examples(
      squad_path(version, name), is_training,
      version_2_with_negative=(version == "v2.0"))


def convert_features(examples, tokenizer, config, is_training):
  """All features of `examples` under the span settings CONFIGS[config]."""
  max_seq_length, doc_stride, max_query_length = CONFIGS[config]
  features = []
  count = squad_data.convert_examples_to_features(
      examples, tokenizer, max_seq_length, doc_stride, max_query_length,
      is_training, features.append)
  assert count == len(features)
  return features
