"""Fine-tuned checkpoints to Hugging Face folders that its users load as
they are: `AutoTokenizer` and `AutoModelFor...` on the converted folder
give the same tokens and the same probabilities / logits (1e-5) as this
project's model, with `id2label`, `problem_type`, the tokenizer settings and
a model card (bert_tf/convert/fine_tuned.py).

The models are the 2-layer, 32-wide conformance encoder with a random head
per task, written here; the export a run would leave is stood in for by its
`serving_config.json` (all that the conversion reads of it).
"""
import json
import os
import shutil

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from bert_tf.tasks.classifier import model as classifier_model
from bert_tf.tasks.squad import model as squad_model
from bert_tf.train import checkpoints
from helpers import data_path
from helpers import import_or_skip
from helpers import run_script
import convert_checkpoint
import modeling
import run_ner
import tokenization

_TINY = os.path.dirname(data_path("conformance", "modeling",
                                  "bert_config.json"))
_TEXTS = [("The child decided to stay.", "Peter's friends stood, eventually!"),
          ("Money and songs", "CHARLES met the committee in 1995")]
_SEQ = 24
_HEADS = {"classifier": ("output_weights", "output_bias"),
          "ner": ("cls/ner/output_weights", "cls/ner/output_bias"),
          "squad": ("cls/squad/output_weights", "cls/squad/output_bias")}


@pytest.fixture(scope="module", autouse=True)
def _environment_kept():
  """transformers (its pipelines look for TensorFlow classes) sets
  TF_USE_LEGACY_KERAS, which breaks the scripts that later tests run in
  subprocesses: the environment is restored after this module."""
  environ = dict(os.environ)
  yield
  os.environ.clear()
  os.environ.update(environ)


@pytest.fixture(scope="module")
def hf():
  torch = import_or_skip("torch", "./setup.sh --test")
  transformers = import_or_skip("transformers", "./setup.sh --test")
  torch.set_num_threads(1)
  return transformers, torch


def _encoder():
  reader = tf.train.load_checkpoint(os.path.join(_TINY, "bert_model.ckpt"))
  return {name: reader.get_tensor(name)
          for name in reader.get_variable_to_shape_map()
          if not name.startswith("cls/")}


def _run_dir(tmp_path, head, rows, seed=0):
  """A run's output folder: a checkpoint with `head` of `rows` outputs,
  the model's bert_config.json and vocab.txt beside it."""
  weights = _encoder()
  rng = np.random.RandomState(seed)
  kernel, bias = _HEADS[head]
  weights[kernel] = rng.normal(size=(rows, 32)).astype(np.float32)
  weights[bias] = rng.normal(size=(rows,)).astype(np.float32)
  run_dir = tmp_path / "run"
  run_dir.mkdir()
  convert_checkpoint.write_tf_checkpoint(weights,
                                         str(run_dir / "model.ckpt-5"))
  (run_dir / "checkpoint").write_text(
      'model_checkpoint_path: "model.ckpt-5"\n')
  for name in ("bert_config.json", "vocab.txt"):
    shutil.copy(os.path.join(_TINY, name), run_dir / name)
  return run_dir


def _export(tmp_path, **config):
  """An export folder as --export_dir leaves it (the serving config)."""
  version = tmp_path / "export" / "1700000000"
  (version / "assets.extra").mkdir(parents=True)
  (version / "saved_model.pb").write_bytes(b"")
  full = {"do_lower_case": True, "max_seq_length": _SEQ,
          "output_keys": ["probabilities"]}
  full.update(config)
  (version / "assets.extra" / "serving_config.json").write_text(
      json.dumps(full))
  return str(tmp_path / "export")


def _features(transformers, folder):
  """This project's features of `_TEXTS`, checked against AutoTokenizer's."""
  tokenizer = tokenization.FullTokenizer(os.path.join(_TINY, "vocab.txt"),
                                         do_lower_case=True)
  auto = transformers.AutoTokenizer.from_pretrained(folder)
  ids, mask, segments = [], [], []
  for a, b in _TEXTS:
    tokens_a, tokens_b = tokenizer.tokenize(a), tokenizer.tokenize(b)
    assert auto.tokenize(a) == tokens_a and auto.tokenize(b) == tokens_b
    tokens = ["[CLS]"] + tokens_a + ["[SEP]"] + tokens_b + ["[SEP]"]
    pad = _SEQ - len(tokens)
    ids.append(tokenizer.convert_tokens_to_ids(tokens) + [0] * pad)
    mask.append([1] * len(tokens) + [0] * pad)
    segments.append([0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1) +
                    [0] * pad)
  encoded = auto([a for a, _ in _TEXTS], [b for _, b in _TEXTS],
                 padding="max_length", max_length=_SEQ, return_tensors="np")
  np.testing.assert_array_equal(encoded["input_ids"], ids)
  np.testing.assert_array_equal(encoded["attention_mask"], mask)
  np.testing.assert_array_equal(encoded["token_type_ids"], segments)
  return [np.array(x, dtype=np.int32) for x in (ids, mask, segments)]


def _project(run_dir, build):
  """Runs `build(config, ids, mask, segments)`'s tensors on the checkpoint."""
  config = modeling.BertConfig.from_json_file(
      os.path.join(_TINY, "bert_config.json"))

  def run(ids, mask, segments):
    with tf.Graph().as_default():
      outputs = build(config, tf.constant(ids), tf.constant(mask),
                      tf.constant(segments))
      with tf.Session() as sess:
        tf.train.Saver().restore(sess, str(run_dir / "model.ckpt-5"))
        return sess.run(outputs)
  return run


def _hf_outputs(torch, model, ids, mask, segments):
  with torch.no_grad():
    return model.eval()(input_ids=torch.tensor(ids, dtype=torch.long),
                        attention_mask=torch.tensor(mask, dtype=torch.long),
                        token_type_ids=torch.tensor(segments,
                                                    dtype=torch.long))


def _read(folder, name):
  with open(os.path.join(folder, name), encoding="utf-8") as f:
    return f.read() if name.endswith(".md") else json.load(f)


def _classifier(num_labels, **kwargs):
  def build(config, ids, mask, segments):
    batch = ids.shape[0]
    labels = (tf.zeros([batch, num_labels], tf.int32)
              if kwargs.get("multi_label") else
              tf.zeros([batch], tf.float32) if kwargs.get("is_regression")
              else tf.zeros([batch], tf.int32))
    _, _, logits, probabilities = classifier_model.create_model(
        config, False, ids, mask, segments, labels, num_labels, False,
        **kwargs)
    return logits, probabilities
  return build


@pytest.mark.slow
def test_single_label_classifier_with_its_export(hf, tmp_path):
  transformers, torch = hf
  run_dir = _run_dir(tmp_path, "classifier", 3)
  (run_dir / "eval_results.txt").write_text(
      "eval_accuracy = 0.8125\neval_loss = 0.41\nglobal_step = 5\n")
  export = _export(tmp_path, kind="classifier", task_name="mnli",
                   label_list=["contradiction", "entailment", "neutral"])
  out = str(tmp_path / "hf")
  convert_checkpoint.tf_to_hf(str(run_dir), out, export=export,
                              base_model="google-bert/bert-base-uncased")
  config = _read(out, "config.json")
  assert config["architectures"] == ["BertForSequenceClassification"]
  assert config["id2label"] == {"0": "contradiction", "1": "entailment",
                                "2": "neutral"}
  assert config["label2id"] == {"contradiction": 0, "entailment": 1,
                                "neutral": 2}
  assert config["problem_type"] == "single_label_classification"
  assert _read(out, "tokenizer_config.json")["do_lower_case"] is True
  card = _read(out, "README.md")
  for expected in ("pipeline_tag: text-classification",
                   "base_model: \"google-bert/bert-base-uncased\"",
                   "- Training data: mnli", "`contradiction`, `entailment`",
                   "| eval_accuracy | 0.8125 |", "| `--max_seq_length` | `24` |",
                   "AutoModelForSequenceClassification"):
    assert expected in card, expected

  ids, mask, segments = _features(transformers, out)
  _, probabilities = _project(run_dir, _classifier(3))(ids, mask, segments)
  model = transformers.AutoModelForSequenceClassification.from_pretrained(out)
  logits = _hf_outputs(torch, model, ids, mask, segments).logits
  np.testing.assert_allclose(logits.softmax(-1).numpy(), probabilities,
                             atol=1e-5)
  environ = dict(os.environ)
  try:
    pipe = transformers.pipeline("text-classification", model=out)
  finally:  # See _environment_kept.
    os.environ.clear()
    os.environ.update(environ)
  assert pipe(_TEXTS[0][0])[0]["label"] in config["label2id"]


@pytest.mark.slow
def test_multi_label_classifier_from_its_labels_file(hf, tmp_path):
  transformers, torch = hf
  run_dir = _run_dir(tmp_path, "classifier", 4, seed=1)
  (run_dir / "classifier_labels.json").write_text(json.dumps(
      {"problem_type": "multi_label_classification",
       "labels": ["LOC", "MISC", "ORG", "PER"]}))
  out = str(tmp_path / "hf")
  convert_checkpoint.tf_to_hf(str(run_dir), out)
  config = _read(out, "config.json")
  assert config["problem_type"] == "multi_label_classification"
  assert config["id2label"]["3"] == "PER"
  assert "one sigmoid per label" in _read(out, "README.md")
  ids, mask, segments = _features(transformers, out)
  _, probabilities = _project(run_dir, _classifier(4, multi_label=True))(
      ids, mask, segments)
  model = transformers.AutoModelForSequenceClassification.from_pretrained(out)
  logits = _hf_outputs(torch, model, ids, mask, segments).logits
  np.testing.assert_allclose(logits.sigmoid().numpy(), probabilities,
                             atol=1e-5)


@pytest.mark.slow
def test_regression_from_the_task_flag(hf, tmp_path):
  transformers, torch = hf
  run_dir = _run_dir(tmp_path, "classifier", 1, seed=2)
  out = str(tmp_path / "hf")
  convert_checkpoint.tf_to_hf(str(run_dir), out, task="regression")
  config = _read(out, "config.json")
  assert config["problem_type"] == "regression"
  assert config["id2label"] == {"0": "LABEL_0"}
  ids, mask, segments = _features(transformers, out)
  _, predictions = _project(run_dir, _classifier(1, is_regression=True))(
      ids, mask, segments)
  model = transformers.AutoModelForSequenceClassification.from_pretrained(out)
  logits = _hf_outputs(torch, model, ids, mask, segments).logits
  np.testing.assert_allclose(logits.numpy()[:, 0], predictions, atol=1e-5)


@pytest.mark.slow
def test_ner_with_its_label_list(hf, tmp_path):
  transformers, torch = hf
  run_dir = _run_dir(tmp_path, "ner", 5, seed=3)
  labels = ["B-PER", "I-LOC", "I-PER", "O", "X"]
  (run_dir / "label_list.txt").write_text("\n".join(labels) + "\n")
  out = str(tmp_path / "hf")
  convert_checkpoint.tf_to_hf(str(run_dir), out)
  config = _read(out, "config.json")
  assert config["architectures"] == ["BertForTokenClassification"]
  assert config["label2id"] == {label: i for i, label in enumerate(labels)}
  assert "problem_type" not in config
  assert "pipeline_tag: token-classification" in _read(out, "README.md")
  ids, mask, segments = _features(transformers, out)

  def build(config, ids, mask, segments):
    _, _, logits, _ = run_ner.create_model(
        config, False, ids, mask, segments, tf.zeros_like(ids),
        tf.zeros(ids.shape, tf.float32), 5, False)
    return tf.nn.softmax(logits)
  probabilities = _project(run_dir, build)(ids, mask, segments)
  model = transformers.AutoModelForTokenClassification.from_pretrained(out)
  logits = _hf_outputs(torch, model, ids, mask, segments).logits
  np.testing.assert_allclose(logits.softmax(-1).numpy(), probabilities,
                             atol=1e-5)


@pytest.mark.slow
def test_squad_with_its_export(hf, tmp_path):
  transformers, torch = hf
  run_dir = _run_dir(tmp_path, "squad", 2, seed=4)
  export = _export(tmp_path, kind="squad", doc_stride=8, max_query_length=8,
                   output_keys=["start_logits", "end_logits"])
  out = str(tmp_path / "hf")
  convert_checkpoint.tf_to_hf(str(run_dir), out, export=export)
  config = _read(out, "config.json")
  assert config["architectures"] == ["BertForQuestionAnswering"]
  assert "id2label" not in config
  card = _read(out, "README.md")
  assert "pipeline_tag: question-answering" in card
  assert "| `--doc_stride` | `8` |" in card
  ids, mask, segments = _features(transformers, out)

  def build(config, ids, mask, segments):
    return squad_model.create_model(config, False, ids, mask, segments,
                                    False)
  start, end = _project(run_dir, build)(ids, mask, segments)
  model = transformers.AutoModelForQuestionAnswering.from_pretrained(out)
  outputs = _hf_outputs(torch, model, ids, mask, segments)
  np.testing.assert_allclose(outputs.start_logits.numpy(), start, atol=1e-5)
  np.testing.assert_allclose(outputs.end_logits.numpy(), end, atol=1e-5)


# ---------------------------------------------------------------------------
# Refusals (no PyTorch).


@pytest.mark.parametrize("head,rows,kwargs,expected", [
    ("classifier", 3, {"task": "ner"},
     "--task: the task is ner but the checkpoint has no token-classification "
     "head (cls/ner/*) (its heads: classifier)"),
    ("classifier", 3, {"task": "regression"},
     "--task: the task is regression but the classifier head has 3 outputs, "
     "expected 1"),
    ("classifier", 3, {"labels": ["a", "b"]},
     "--labels: 2 labels, but the classifier head (output_weights, "
     "output_bias) has 3 outputs"),
    ("ner", 2, {"task": "squad"},
     "the checkpoint has no SQuAD head (cls/squad/*) (its heads: ner)"),
])
def test_a_task_that_does_not_fit_the_head_is_one_line(tmp_path, head, rows,
                                                        kwargs, expected):
  run_dir = _run_dir(tmp_path, head, rows)
  out = tmp_path / "hf"
  with pytest.raises(ValueError) as error:
    convert_checkpoint.tf_to_hf(str(run_dir), str(out), **kwargs)
  assert expected in str(error.value) and "\n" not in str(error.value)
  assert not out.exists()


def test_export_labels_that_do_not_fit_and_bad_exports_are_named(tmp_path):
  run_dir = _run_dir(tmp_path, "classifier", 3)
  export = _export(tmp_path, kind="classifier", label_list=["a", "b"])
  with pytest.raises(ValueError, match=r"--export: .*1700000000: 2 labels, "
                     r"but the classifier head"):
    convert_checkpoint.tf_to_hf(str(run_dir), str(tmp_path / "a"),
                                export=export)
  with pytest.raises(ValueError, match="--export: .* holds no saved_model.pb "
                     "and no numbered version folder"):
    convert_checkpoint.tf_to_hf(str(run_dir), str(tmp_path / "b"),
                                export=str(run_dir))
  (tmp_path / "export" / "1700000000" / "assets.extra" /
   "serving_config.json").write_text('{"kind": "poem"}')
  with pytest.raises(ValueError, match="serving_config.json"):
    convert_checkpoint.tf_to_hf(str(run_dir), str(tmp_path / "c"),
                                export=export)


def test_card_names_the_init_checkpoint_the_training_run_recorded(tmp_path):
  run_dir = _run_dir(tmp_path, "classifier", 2)
  # A converted Hugging Face folder as --init_checkpoint: its source named.
  converted = tmp_path / "cache" / "bert-mini-0123"
  converted.mkdir(parents=True)
  (converted / "source.json").write_text(
      json.dumps({"kind": "hugging_face", "folder": "/models/bert-mini"}))
  for base, named in ((str(tmp_path / "uncased_L-2_H-128_A-2"),
                       str(tmp_path / "uncased_L-2_H-128_A-2")),
                      (str(converted), "/models/bert-mini")):
    held = checkpoints.start_training(str(run_dir), base)  # As training does.
    held.release()
    out = tmp_path / ("hf_" + os.path.basename(base))
    convert_checkpoint.tf_to_hf(str(run_dir), str(out), task="classifier")
    card = _read(str(out), "README.md")
    assert "base_model: %s\n" % json.dumps(named) in card
    assert "- Base checkpoint: %s\n" % named in card
  # --base_model, when given, is what the card names.
  convert_checkpoint.tf_to_hf(str(run_dir), str(tmp_path / "hf_given"),
                              task="classifier", base_model="my/base")
  assert "- Base checkpoint: my/base\n" in _read(str(tmp_path / "hf_given"),
                                                 "README.md")
  (run_dir / checkpoints.INIT_RECORD).write_text('{"init_checkpoint": 7}')
  with pytest.raises(ValueError, match="init_checkpoint.json"):
    convert_checkpoint.tf_to_hf(str(run_dir), str(tmp_path / "hf_bad"),
                                task="classifier")


@pytest.mark.slow
def test_command_line_flags_of_a_fine_tuned_conversion(tmp_path):
  run_dir = _run_dir(tmp_path, "classifier", 2)
  out = tmp_path / "hf"
  result = run_script("convert_checkpoint.py", [
      "--direction=tf_to_hf", "--input=%s" % run_dir, "--output=%s" % out,
      "--labels=negative,positive", "--task=classifier", "--nodo_lower_case",
      "--dataset=my reviews"])
  assert result.returncode == 0, result.stderr[-2000:]
  config = _read(str(out), "config.json")
  assert config["id2label"] == {"0": "negative", "1": "positive"}
  assert _read(str(out), "tokenizer_config.json")["do_lower_case"] is False
  assert "- Training data: my reviews" in _read(str(out), "README.md")
  result = run_script("convert_checkpoint.py", [
      "--direction=hf_to_tf", "--input=%s" % out,
      "--output=%s" % (tmp_path / "tf"), "--task=ner"])
  assert result.returncode == 1
  assert result.stderr.strip().splitlines()[-1] == (
      "error: --task applies to --direction=tf_to_hf only")
