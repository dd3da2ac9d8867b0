"""Structure-aware fuzzing of every JSON reader (issue #34).

For each reader a valid file is generated, then mutated one value at a
time: its type changed, its key removed, a non-finite number put in, or
the value nested 100,000 levels deep. Every outcome must be success or a
`ValueError` / `OSError` whose message is one line naming the file (what
`entry.run_main` prints as one `error:` line). The mutations are
enumerated from a fixed seed and capped per reader, so the file runs in
seconds, in-process, on either stack.
"""

import json
import os
import random

import pytest

import fault_helpers as fh
from bert_tf.checks import config as config_checks
from bert_tf import json_file
from bert_tf.cli import startup
from bert_tf.convert import config as convert_config
from bert_tf.convert import files as convert_files
from bert_tf.export import saved_model as export_utils
from bert_tf.export import serving
from bert_tf.tasks.classifier import multi_label
from bert_tf.tasks.squad import data as squad_data
from bert_tf.tasks.squad import metrics as squad_metrics
from bert_tf.train import best
from bert_tf.train import distribute

# Cases per reader: every removal and type change would be a few hundred
# for SQuAD; a seeded sample keeps the file fast and the same on each run.
CASES_PER_READER = 40
_DEEP = 100000
_DEEP_MARK = "__deep_nesting__"
_OTHER_VALUES = [[], {}, "x", 7, -3, 1.5, True, None, [1, [2]], {"a": {}}]
_NON_FINITE = [float("nan"), float("inf"), float("-inf")]


def _tiny_config():
  with open(fh.tiny("bert_config.json")) as f:
    return json.load(f)


def _squad():
  return {"version": "2.0", "data": [{"title": "t", "paragraphs": [{
      "context": "Ann came home.", "qas": [
          {"id": "q1", "question": "Who came?", "is_impossible": False,
           "answers": [{"text": "Ann", "answer_start": 0}]},
          {"id": "q2", "question": "Why?", "is_impossible": True,
           "answers": []}]}]}]}


def _hf_config():
  config = convert_config.bert_config_to_hf_config(
      _tiny_config(), ["BertForSequenceClassification"], num_labels=2)
  config["problem_type"] = "single_label_classification"
  return config


def _tokenizer():
  return {"version": "1.0", "model": {
      "type": "WordPiece", "unk_token": "[UNK]",
      "vocab": {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "a": 4}}}


def _serving_config():
  return {"kind": "squad", "do_lower_case": True, "max_seq_length": 16,
          "label_list": None, "output_keys": ["start_logits", "end_logits"],
          "doc_stride": 8, "max_query_length": 4,
          "version_2_with_negative": False,
          "tsv_columns": {"text_a_column": 0, "text_b_column": None,
                          "skip_header": False}}


def _best_record():
  return {"key": "eval_accuracy", "best_step": 2, "best_value": 0.5,
          "best_checkpoint": "model.ckpt-2", "since_best": 0,
          "evaluations": [{"global_step": 2.0, "eval_accuracy": 0.5}]}


def _tf_config():
  return {"cluster": {"worker": ["localhost:2222", "localhost:2223"]},
          "task": {"type": "worker", "index": 0}}


# ---------------------------------------------------------------------------
# The readers: (file name, valid document, reader(folder, path)).
# ---------------------------------------------------------------------------


def _read_bert_config(folder, path):
  return startup.load_bert_config(path)


def _read_squad(folder, path):
  squad_data.read_squad_examples(path, False, False)
  squad_data.read_squad_examples(path, True, True)
  squad_metrics.gold_answers(squad_data.load_squad_data(path), path)


def _read_hf_config(folder, path):
  return convert_config.hf_config_to_bert_config(
      convert_files.read_json(path), path)


def _read_tokenizer(folder, path):
  return convert_files.hf_vocab_text(folder)


def _read_tokenizer_config(folder, path):
  return convert_files.log_lower_case(folder)


def _read_index(folder, path):
  return convert_files.safetensors_files(folder)


def _read_tf_to_hf_config(folder, path):
  # What folders.tf_to_hf does with --bert_config_file before any weight.
  config_checks.check_bert_config_json(convert_files.read_json(path), path,
                                       flag_name=None)


def _read_labels(folder, path):
  return multi_label.read_labels_file(folder)


def _read_best(folder, path):
  # The record names a checkpoint whose files must be in the folder.
  for suffix in (".index", ".data-00000-of-00001"):
    open(os.path.join(folder, "model.ckpt-2" + suffix), "w").close()
  return best.BestKeeper(os.path.dirname(folder), key="eval_accuracy")


def _read_serving(folder, path):
  for name in (export_utils.VOCAB_ASSET, export_utils.CONFIG_ASSET):
    if not os.path.exists(os.path.join(folder, name)):
      with open(os.path.join(folder, name), "w") as f:
        f.write("{}")
  return serving.read_assets(os.path.dirname(folder))


def _read_tf_config(folder, path):
  with open(path, "rb") as f:
    text = f.read().decode("utf-8", "replace")
  try:
    return distribute.parse_tf_config(text)
  except ValueError as e:  # It names the variable, not a file.
    assert str(e).startswith("TF_CONFIG"), str(e)
    raise ValueError("%s: %s" % (path, e)) from None


READERS = {
    "bert_config": ("bert_config.json", _tiny_config, _read_bert_config),
    "squad": ("train-v2.0.json", _squad, _read_squad),
    "hf_config": ("config.json", _hf_config, _read_hf_config),
    "tokenizer": ("tokenizer.json", _tokenizer, _read_tokenizer),
    "tokenizer_config": ("tokenizer_config.json",
                         lambda: {"do_lower_case": True,
                                  "tokenizer_class": "BertTokenizer"},
                         _read_tokenizer_config),
    "shard_index": ("model.safetensors.index.json",
                    lambda: {"metadata": {"total_size": 16}, "weight_map": {
                        "bert.pooler.dense.bias": "model-1.safetensors",
                        "cls.predictions.bias": "model-2.safetensors"}},
                    _read_index),
    "tf_to_hf_config": ("bert_config.json", _tiny_config,
                        _read_tf_to_hf_config),
    "classifier_labels": (multi_label.LABELS_FILE,
                          lambda: {"problem_type": multi_label.PROBLEM_TYPE,
                                   "labels": ["LOC", "PER"]}, _read_labels),
    "best": (best.RECORD_FILE, _best_record, _read_best),
    "serving_config": (export_utils.SERVING_ASSET, _serving_config,
                       _read_serving),
    "tf_config": ("TF_CONFIG.json", _tf_config, _read_tf_config),
}


# ---------------------------------------------------------------------------
# Mutations.
# ---------------------------------------------------------------------------


def _paths(value, prefix=()):
  """Every (path, value) inside `value`, the whole document first."""
  yield prefix, value
  if isinstance(value, dict):
    for key, child in value.items():
      yield from _paths(child, prefix + (key,))
  elif isinstance(value, list):
    for i, child in enumerate(value):
      yield from _paths(child, prefix + (i,))


def _replaced(document, path, new):
  """A deep copy of `document` with the value at `path` replaced (or
  removed, when `new` is `_REMOVE`)."""
  copy = json.loads(json.dumps(document))
  if not path:
    return new
  holder = copy
  for step in path[:-1]:
    holder = holder[step]
  if new is _REMOVE:
    del holder[path[-1]]
  else:
    holder[path[-1]] = new
  return copy


_REMOVE = object()


def mutations(document, seed):
  """[(description, file text)]: seeded type changes, removals and
  non-finite numbers, capped at `CASES_PER_READER`, plus deep nesting at
  the top and at one value."""
  rng = random.Random(seed)
  cases = []
  for path, value in _paths(document):
    where = "/".join(map(str, path)) or "<top>"
    for other in _OTHER_VALUES:
      if type(other) is not type(value):  # pylint: disable=unidiomatic-typecheck
        cases.append(("%s := %s" % (where, json.dumps(other)),
                      _replaced(document, path, other)))
    if path and isinstance(path[-1], str):
      cases.append(("%s removed" % where, _replaced(document, path, _REMOVE)))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
      for number in _NON_FINITE:
        cases.append(("%s := %s" % (where, number),
                      _replaced(document, path, number)))
  rng.shuffle(cases)
  texts = [(name, json.dumps(doc)) for name, doc in cases[:CASES_PER_READER]]
  inner = rng.choice([p for p, _ in _paths(document) if p])
  for path, opener, closer in ((), "[", "]"), (inner, "{\"a\":", "}"):
    text = json.dumps(_replaced(document, path, _DEEP_MARK))
    texts.append(("%s nested %d deep" % ("/".join(map(str, path)) or "<top>",
                                         _DEEP),
                  text.replace(json.dumps(_DEEP_MARK),
                               opener * _DEEP + "1" + closer * _DEEP)))
  return texts


def _one_line_or_success(reader, folder, path):
  """Runs `reader`; only a one-line ValueError/OSError naming `path` may
  escape. Returns the message, or None on success."""
  try:
    reader(folder, path)
  except (ValueError, OSError) as e:
    message = str(e)
    assert "\n" not in message.strip(), message
    assert path in message, "%s: %r does not name the file" % (
        type(e).__name__, message)
    assert len(message) < 1000, message
    return message
  return None


def _setup(tmp_path, name, reader_name):
  """(folder, file path): the folder a reader expects the file in."""
  sub = {"best": best.BEST_DIR,
         "serving_config": export_utils.ASSETS_DIR}.get(reader_name, "model")
  folder = tmp_path / reader_name / sub
  folder.mkdir(parents=True)
  return str(folder), str(folder / name)


@pytest.mark.parametrize("reader_name", sorted(READERS))
def test_valid_file_is_read(tmp_path, reader_name):
  name, valid, reader = READERS[reader_name]
  folder, path = _setup(tmp_path, name, reader_name)
  with open(path, "w") as f:
    json.dump(valid(), f)
  reader(folder, path)


@pytest.mark.parametrize("reader_name", sorted(READERS))
def test_mutated_file_is_read_or_one_line(tmp_path, reader_name):
  name, valid, reader = READERS[reader_name]
  folder, path = _setup(tmp_path, name, reader_name)
  refused = 0
  for description, text in mutations(valid(), seed=reader_name):
    with open(path, "w") as f:
      f.write(text)
    try:
      refused += _one_line_or_success(reader, folder, path) is not None
    except AssertionError as e:
      raise AssertionError("%s: %s" % (description, e)) from None
    except Exception as e:  # pylint: disable=broad-except
      raise AssertionError("%s: %s: %s" % (description, type(e).__name__,
                                           e)) from None
  assert refused, "no mutation was refused"


def test_depth_limit_names_the_file(tmp_path):
  path = str(tmp_path / "x.json")
  with open(path, "w") as f:
    f.write("[" * (json_file.MAX_DEPTH + 1) + "]" * (json_file.MAX_DEPTH + 1))
  with pytest.raises(ValueError, match="x.json: JSON nested deeper than 64"):
    json_file.load(path)
  with open(path, "w") as f:
    f.write("[" * json_file.MAX_DEPTH + "]" * json_file.MAX_DEPTH)
  assert json_file.load(path)


def test_field_names_the_key_path_and_what_was_expected():
  with pytest.raises(ValueError, match=r"^f\.json: data\[0\]\.qas\[1\]\.id is "
                     r"a list, expected a string$"):
    json_file.field({"id": [1]}, "id", "string", "f.json", "data[0].qas[1]")
  with pytest.raises(ValueError, match=r"^f\.json: the top level has no 'x' "
                     r"field \(expected an integer\)$"):
    json_file.field({}, "x", "integer", "f.json")
  with pytest.raises(ValueError, match=r"^f\.json: lr is inf, expected a "
                     r"finite number$"):
    json_file.field({"lr": float("inf")}, "lr", "number", "f.json")
  assert json_file.field({}, "x", "integer", "f.json", default=3) == 3
