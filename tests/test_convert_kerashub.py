"""Tests for KerasHub BERT presets <-> this project's checkpoints.

The proof is KerasHub's own forward pass: a tiny `BertBackbone` (2 layers,
hidden 32, every weight random) saved with `save_to_preset`, converted, and
run by `modeling.BertModel` gives the backbone's sequence and pooled outputs
to 1e-5; a checkpoint of this project converted to a preset and loaded by
`BertBackbone.from_preset` (or `BertTextClassifier.from_preset`) gives
`modeling.BertModel`'s. KerasHub's `BertTokenizer` on a converted preset's
vocabulary gives `tokenization.FullTokenizer`'s ids on real text.

keras-hub needs Keras 3: these tests skip on the TensorFlow 2.15 stack, and
where it is not installed (`./setup.sh --kerashub`). The checks of bad
folders that need no keras-hub run on both stacks.
"""
import csv
import json
import os
import shutil
import sys
import unicodedata

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from helpers import data_path
from helpers import extract_features_twice
from helpers import import_or_skip
from helpers import read_lines
from helpers import run_script
from helpers import shared_path
from bert_tf.convert import files
from bert_tf.convert import keras_saved_model
from bert_tf.convert import kerashub
from bert_tf.convert import sources
import modeling
import tokenization

# Sizes of the tiny backbone: 2 layers, hidden 32, 4 heads.
TINY = {"vocabulary_size": 60, "num_layers": 2, "num_heads": 4,
        "hidden_dim": 32, "intermediate_dim": 37, "max_sequence_length": 24,
        "num_segments": 2}
TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def keras_hub():
  """keras_hub, or a skip: the TensorFlow 2.15 stack cannot have it."""
  if sys.version_info < (3, 12):
    # Not an install left out: Keras 3 does not exist for TensorFlow 2.15.
    pytest.skip("keras-hub needs Keras 3: the TensorFlow 2.21 stack only")
  return import_or_skip("keras_hub", "./setup.sh --kerashub")


def _vocab(folder, size=TINY["vocabulary_size"]):
  """A vocab.txt of `size` tokens (the special ones first); its path."""
  tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
  tokens += ["w%d" % i for i in range(size - len(tokens))]
  path = os.path.join(str(folder), "vocab.txt")
  with open(path, "w", encoding="utf-8") as f:
    f.write("".join(t + "\n" for t in tokens))
  return path


def _randomize(variables, seed):
  """Gives every variable random values (biases and layer norms included,
  so a swapped or mis-reshaped one shows)."""
  rng = np.random.RandomState(seed)
  for variable in variables:
    variable.assign(rng.normal(0, 0.3, variable.shape).astype(np.float32))


def _tiny_backbone(keras_hub, seed=1):
  backbone = keras_hub.models.BertBackbone(dtype="float32", **TINY)
  _randomize(backbone.weights, seed)
  return backbone


def _inputs(seed=0, batch=3, length=11):
  """token ids, mask (rows padded to 11, 7, 4 tokens) and segment ids."""
  rng = np.random.RandomState(seed)
  ids = rng.randint(5, TINY["vocabulary_size"], (batch, length)).astype(
      np.int32)
  mask = np.zeros((batch, length), np.int32)
  segments = np.zeros((batch, length), np.int32)
  for row, used in enumerate((length, 7, 4)[:batch]):
    mask[row, :used] = 1
    segments[row, used // 2:used] = 1
  ids *= mask
  return ids, mask, segments


def _keras_outputs(backbone, ids, mask, segments):
  out = backbone({"token_ids": ids, "segment_ids": segments,
                  "padding_mask": mask}, training=False)
  return (np.asarray(out["sequence_output"]),
          np.asarray(out["pooled_output"]))


def _project_outputs(prefix, bert_config, ids, mask, segments):
  """(sequence, pooled, variables) of modeling.BertModel on a checkpoint."""
  config = modeling.BertConfig.from_dict(bert_config)
  with tf.Graph().as_default():
    model = modeling.BertModel(config, is_training=False,
                               input_ids=tf.constant(ids),
                               input_mask=tf.constant(mask),
                               token_type_ids=tf.constant(segments))
    assignment, _ = modeling.get_assignment_map_from_checkpoint(
        tf.trainable_variables(), prefix)
    tf.train.init_from_checkpoint(prefix, assignment)
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      sequence, pooled = sess.run([model.get_sequence_output(),
                                   model.get_pooled_output()])
  return sequence, pooled, len(assignment)


def _read_checkpoint(prefix):
  reader = tf.train.load_checkpoint(prefix)
  return {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}


def _assert_close(got, expected):
  assert got.shape == expected.shape
  np.testing.assert_allclose(got, expected, atol=TOLERANCE, rtol=0)


def _save_preset(keras_hub, folder, backbone, vocab_path, num_classes=None):
  tokenizer = keras_hub.models.BertTokenizer(vocabulary=vocab_path,
                                             lowercase=True)
  if num_classes is None:
    backbone.save_to_preset(str(folder))
    tokenizer.save_to_preset(str(folder))
    return None
  preprocessor = keras_hub.models.BertTextClassifierPreprocessor(
      tokenizer, sequence_length=TINY["max_sequence_length"])
  classifier = keras_hub.models.BertTextClassifier(
      backbone, num_classes, preprocessor=preprocessor)
  _randomize(classifier.output_dense.weights, seed=7)
  classifier.save_to_preset(str(folder))
  return classifier


# ---------------------------------------------------------------------------
# Preset -> checkpoint, checked by KerasHub's own forward pass.


def test_preset_converts_to_a_checkpoint_with_the_backbones_outputs(
    keras_hub, tmp_path):
  backbone = _tiny_backbone(keras_hub)
  preset = tmp_path / "preset"
  _save_preset(keras_hub, preset, backbone, _vocab(tmp_path))
  out = str(tmp_path / "tf")
  converted = kerashub.kerashub_to_tf(str(preset), out)
  assert sorted(os.listdir(out)) == [
      "bert_config.json", "bert_model.ckpt.data-00000-of-00001",
      "bert_model.ckpt.index", "vocab.txt"]
  assert converted.groups == {"embeddings", "encoder", "pooler"}
  assert converted.lower_case is True
  with open(os.path.join(out, "bert_config.json"), encoding="utf-8") as f:
    bert_config = json.load(f)
  assert bert_config == {
      "vocab_size": 60, "hidden_size": 32, "num_hidden_layers": 2,
      "num_attention_heads": 4, "intermediate_size": 37, "hidden_act": "gelu",
      "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
      "max_position_embeddings": 24, "type_vocab_size": 2,
      "initializer_range": 0.02}
  assert read_lines(os.path.join(out, "vocab.txt")) == read_lines(
      str(tmp_path / "vocab.txt"))
  ids, mask, segments = _inputs()
  sequence, pooled, restored = _project_outputs(
      os.path.join(out, "bert_model.ckpt"), bert_config, ids, mask, segments)
  assert restored == 5 + 2 * 16 + 2  # Every variable came from the preset.
  expected_sequence, expected_pooled = _keras_outputs(backbone, ids, mask,
                                                      segments)
  _assert_close(sequence, expected_sequence)
  _assert_close(pooled, expected_pooled)


def test_backbones_saved_model_export_converts_with_its_outputs(
    keras_hub, tmp_path):
  # KerasHub's own TF SavedModel export: object-based checkpoint keys, the
  # Keras paths in the object graph, read without keras-hub.
  backbone = _tiny_backbone(keras_hub, seed=3)
  saved = str(tmp_path / "saved_model")
  backbone.export(saved, format="tf_saved_model")
  out = str(tmp_path / "tf")
  bert_config = keras_saved_model.saved_model_to_tf(saved, out)
  assert sorted(os.listdir(out)) == [
      "bert_config.json", "bert_model.ckpt.data-00000-of-00001",
      "bert_model.ckpt.index"]
  assert (bert_config["num_attention_heads"], bert_config["intermediate_size"],
          bert_config["max_position_embeddings"]) == (4, 37, 24)
  ids, mask, segments = _inputs()
  sequence, pooled, restored = _project_outputs(
      os.path.join(out, "bert_model.ckpt"), bert_config, ids, mask, segments)
  assert restored == 5 + 2 * 16 + 2
  loaded = tf.saved_model.load_v2(saved)  # Kept: serve uses its variables.
  served = loaded.serve(
      {"token_ids": ids, "segment_ids": segments, "padding_mask": mask})
  _assert_close(sequence, np.asarray(served["sequence_output"]))
  _assert_close(pooled, np.asarray(served["pooled_output"]))
  keras = sys.modules["keras"]  # Imported by keras_hub.
  dense = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
  dense.export(str(tmp_path / "dense"), format="tf_saved_model")
  with pytest.raises(ValueError, match="no variable token_embedding/"
                     "embeddings; expected a KerasHub BertBackbone's"):
    keras_saved_model.read_backbone(str(tmp_path / "dense"))


def test_classifier_preset_converts_with_its_head(keras_hub, tmp_path):
  backbone = _tiny_backbone(keras_hub, seed=2)
  preset = tmp_path / "preset"
  classifier = _save_preset(keras_hub, preset, backbone, _vocab(tmp_path),
                            num_classes=3)
  prefix = str(tmp_path / "ckpt" / "model.ckpt")
  converted = kerashub.preset_to_checkpoint(str(preset), prefix)
  assert converted.groups == {"embeddings", "encoder", "pooler",
                              "classifier"}
  assert sorted(os.listdir(tmp_path / "ckpt")) == [
      "model.ckpt.data-00000-of-00001", "model.ckpt.index"]
  tensors = _read_checkpoint(prefix)
  assert tensors["output_weights"].shape == (3, 32)
  ids, mask, segments = _inputs(seed=3)
  _, pooled, _ = _project_outputs(prefix, converted.bert_config, ids, mask,
                                  segments)
  # run_classifier.py's head: logits = pooled . output_weights^T + bias.
  logits = pooled @ tensors["output_weights"].T + tensors["output_bias"]
  expected = np.asarray(classifier({"token_ids": ids, "segment_ids": segments,
                                    "padding_mask": mask}, training=False))
  _assert_close(logits, expected)


# ---------------------------------------------------------------------------
# Checkpoint -> preset, loaded by KerasHub.


def _conformance_dir():
  return os.path.dirname(data_path("conformance", "modeling",
                                   "bert_config.json"))


def test_checkpoint_converts_to_a_preset_that_from_preset_runs(
    keras_hub, tmp_path, caplog):
  """The conformance checkpoint (2 layers, hidden 32, 4 heads, with the
  pre-training heads, which KerasHub's backbone leaves out)."""
  folder = _conformance_dir()
  out = str(tmp_path / "preset")
  with caplog.at_level("WARNING"):
    groups = kerashub.checkpoint_to_preset(folder, out, do_lower_case=True)
  assert groups == {"embeddings", "encoder", "pooler"}
  assert "the masked-LM head (cls/predictions/*) is left out" in caplog.text
  assert kerashub.looks_like_preset(out)
  for name in ("config.json", "model.weights.h5", "tokenizer.json",
               kerashub.VOCABULARY_PATH):
    assert os.path.isfile(os.path.join(out, name)), name
  with open(os.path.join(folder, "bert_config.json"), encoding="utf-8") as f:
    bert_config = json.load(f)
  backbone = keras_hub.models.BertBackbone.from_preset(out)
  inputs = _inputs(seed=4)
  expected = _project_outputs(os.path.join(folder, "bert_model.ckpt"),
                              bert_config, *inputs)
  got = _keras_outputs(backbone, *inputs)
  _assert_close(got[0], expected[0])
  _assert_close(got[1], expected[1])
  tokenizer = keras_hub.models.BertTokenizer.from_preset(out)
  assert tokenizer.lowercase and tokenizer.strip_accents


def test_classifier_checkpoint_converts_to_a_text_classifier(
    keras_hub, tmp_path):
  folder = _conformance_dir()
  tensors = {name: value for name, value in
             _read_checkpoint(os.path.join(folder, "bert_model.ckpt")).items()
             if name.startswith("bert/")}
  rng = np.random.RandomState(5)
  tensors["output_weights"] = rng.normal(0, 0.3, (4, 32)).astype(np.float32)
  tensors["output_bias"] = rng.normal(0, 0.3, (4,)).astype(np.float32)
  source = tmp_path / "fine_tuned"
  source.mkdir()
  files.write_tf_checkpoint(tensors, str(source / "model.ckpt-10"))
  out = str(tmp_path / "preset")
  groups = kerashub.checkpoint_to_preset(
      str(source / "model.ckpt-10"), out,
      bert_config_file=os.path.join(folder, "bert_config.json"),
      vocab_file=os.path.join(folder, "vocab.txt"))
  assert groups == {"embeddings", "encoder", "pooler", "classifier"}
  classifier = keras_hub.models.BertTextClassifier.from_preset(out)
  with open(os.path.join(folder, "bert_config.json"), encoding="utf-8") as f:
    bert_config = json.load(f)
  ids, mask, segments = _inputs(seed=6)
  _, pooled, _ = _project_outputs(str(source / "model.ckpt-10"), bert_config,
                                  ids, mask, segments)
  expected = pooled @ tensors["output_weights"].T + tensors["output_bias"]
  got = np.asarray(classifier({"token_ids": ids, "segment_ids": segments,
                               "padding_mask": mask}, training=False))
  _assert_close(got, expected)
  # And back: the same variables, exactly.
  back = str(tmp_path / "back" / "model.ckpt")
  kerashub.preset_to_checkpoint(out, back)
  again = _read_checkpoint(back)
  assert sorted(again) == sorted(tensors)
  for name, value in tensors.items():
    np.testing.assert_array_equal(again[name], value, err_msg=name)


# ---------------------------------------------------------------------------
# The tokenizer.


def _shared_texts():
  """A few hundred lines of real text: the English pre-training sample and
  MRPC dev sentences."""
  lines = [line for line in read_lines(shared_path("data", "pretrain",
                                                   "sample_text.txt"))
           if line.strip()]
  with open(shared_path("data", "glue", "MRPC", "dev.tsv"),
            encoding="utf-8") as f:
    rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
  for row in rows[:150]:
    lines += [row[3], row[4]]
  return lines


@pytest.mark.parametrize("model,lower", [
    ("uncased_L-12_H-768_A-12", True), ("cased_L-12_H-768_A-12", False)])
def test_preset_tokenizer_gives_full_tokenizers_ids(keras_hub, tmp_path,
                                                    model, lower):
  """The same ids on every line, but where KerasHub's lowercasing (Unicode
  case folding with NFKC) changes a compatibility character that the
  reference's (str.lower, then accents stripped) keeps: there KerasHub's
  ids are the reference's on the NFKC form (µ becomes Greek mu, the
  modifier letters of `ᴵᴺᵀᵃ` plain letters)."""
  vocab = shared_path("data", "vocab", model, "vocab.txt")
  vocab_size = len(read_lines(vocab))
  checkpoint = tmp_path / "ckpt"
  checkpoint.mkdir()
  config = dict(files.read_json(os.path.join(_conformance_dir(),
                                             "bert_config.json")),
                vocab_size=vocab_size)
  tensors = {name: value for name, value in _read_checkpoint(os.path.join(
      _conformance_dir(), "bert_model.ckpt")).items()
             if name.startswith("bert/")}
  tensors["bert/embeddings/word_embeddings"] = np.zeros((vocab_size, 32),
                                                        np.float32)
  files.write_tf_checkpoint(tensors, str(checkpoint / "bert_model.ckpt"))
  with open(checkpoint / "bert_config.json", "w", encoding="utf-8") as f:
    json.dump(config, f)
  out = str(tmp_path / "preset")
  kerashub.checkpoint_to_preset(str(checkpoint), out, vocab_file=vocab,
                                do_lower_case=lower)
  theirs = keras_hub.models.BertTokenizer.from_preset(out)
  ours = tokenization.FullTokenizer(vocab, do_lower_case=lower)
  texts = _shared_texts()
  assert len(texts) >= 300
  got = [[int(i) for i in np.asarray(ids)] for ids in theirs(texts)]
  different = []
  for text, ids in zip(texts, got):
    if ids != ours.convert_tokens_to_ids(ours.tokenize(text)):
      different.append(text)
      assert lower and ids == ours.convert_tokens_to_ids(
          ours.tokenize(unicodedata.normalize("NFKC", text))), text
  assert lower or not different, different


# ---------------------------------------------------------------------------
# Bad folders: one line naming the file and what was expected. The checks
# before keras-hub is needed run on both stacks.


def _fake_preset(folder, class_name="BertBackbone", weights=True, **config):
  folder.mkdir()
  body = dict(TINY, **config)
  with open(folder / "config.json", "w", encoding="utf-8") as f:
    json.dump({"module": "keras_hub.src.models", "class_name": class_name,
               "config": body, "registered_name": "keras_hub>" + class_name},
              f)
  if weights:
    (folder / "model.weights.h5").write_bytes(b"")
  return str(folder)


def test_looks_like_preset_tells_presets_from_other_folders(tmp_path):
  assert kerashub.looks_like_preset(_fake_preset(tmp_path / "preset"))
  assert kerashub.looks_like_preset(
      _fake_preset(tmp_path / "gpt2", class_name="GPT2Backbone"))
  hf = tmp_path / "hf"
  hf.mkdir()
  (hf / "config.json").write_text('{"model_type": "bert"}', encoding="utf-8")
  assert not kerashub.looks_like_preset(str(hf))
  assert not kerashub.looks_like_preset(_conformance_dir())
  broken = tmp_path / "broken"
  broken.mkdir()
  (broken / "config.json").write_text("{", encoding="utf-8")
  assert not kerashub.looks_like_preset(str(broken))
  assert not kerashub.looks_like_preset(str(tmp_path / "absent"))


def test_missing_weights_file_is_named(tmp_path):
  folder = _fake_preset(tmp_path / "preset", weights=False)
  with pytest.raises(FileNotFoundError,
                     match=r"preset: no model\.weights\.h5 \(the backbone's "
                           r"weights; found: config\.json\)"):
    kerashub.kerashub_to_tf(folder, str(tmp_path / "out"))
  assert not os.path.exists(tmp_path / "out")


def test_another_architecture_is_named(tmp_path):
  folder = _fake_preset(tmp_path / "preset", class_name="GPT2Backbone")
  with pytest.raises(ValueError, match=r"preset/config\.json: class_name is "
                                       r"'GPT2Backbone', expected "
                                       r"'BertBackbone'"):
    kerashub.preset_to_checkpoint(folder, str(tmp_path / "out" / "ckpt"))


@pytest.mark.parametrize("key,value,match", [
    ("num_layers", "2", r"config\.num_layers"),
    ("hidden_dim", 30, r"hidden_size"),  # Not a multiple of the 4 heads.
])
def test_bad_config_key_is_named(tmp_path, key, value, match):
  folder = _fake_preset(tmp_path / "preset", **{key: value})
  with pytest.raises(ValueError, match=r"preset/config\.json.*" + match):
    kerashub.kerashub_to_tf(folder, str(tmp_path / "out"))


def test_folder_without_config_is_named(tmp_path):
  with pytest.raises(FileNotFoundError, match=r"no config\.json \(expected "
                                              r"a KerasHub preset folder"):
    kerashub.kerashub_to_tf(str(tmp_path), str(tmp_path / "out"))


def test_weights_of_other_shapes_are_named(keras_hub, tmp_path):
  preset = tmp_path / "preset"
  _save_preset(keras_hub, preset, _tiny_backbone(keras_hub), _vocab(tmp_path))
  path = preset / "config.json"
  config = json.loads(path.read_text(encoding="utf-8"))
  config["config"]["vocabulary_size"] = 70
  path.write_text(json.dumps(config), encoding="utf-8")
  with pytest.raises(ValueError) as error:
    kerashub.kerashub_to_tf(str(preset), str(tmp_path / "out"))
  message = str(error.value)
  assert "\n" not in message
  assert message == (
      "%s: layer 'token_embedding' holds weights of shapes [[60, 32]], "
      "expected [[70, 32]] (from %s)" % (preset / "model.weights.h5", path))
  assert not os.path.exists(tmp_path / "out")


def test_damaged_weights_file_is_named(keras_hub, tmp_path):
  preset = tmp_path / "preset"
  _save_preset(keras_hub, preset, _tiny_backbone(keras_hub), _vocab(tmp_path))
  (preset / "model.weights.h5").write_bytes(b"not HDF5")
  with pytest.raises(ValueError, match=r"preset/model\.weights\.h5: not Keras "
                                       r"weights that fit .*config\.json"):
    kerashub.kerashub_to_tf(str(preset), str(tmp_path / "out"))


def test_classifier_without_task_weights_is_named(keras_hub, tmp_path):
  preset = tmp_path / "preset"
  _save_preset(keras_hub, preset, _tiny_backbone(keras_hub), _vocab(tmp_path),
               num_classes=2)
  os.remove(preset / "task.weights.h5")
  with pytest.raises(FileNotFoundError, match=r"preset: no task\.weights\.h5"):
    kerashub.preset_to_checkpoint(str(preset), str(tmp_path / "c" / "ckpt"))


def test_another_activation_is_refused_before_writing(tmp_path):
  folder = _conformance_dir()
  with pytest.raises(ValueError, match=r"bert_config_relu\.json: hidden_act "
                                       r"= 'relu', expected 'gelu'"):
    kerashub.checkpoint_to_preset(
        folder, str(tmp_path / "out"),
        bert_config_file=os.path.join(folder, "bert_config_relu.json"))
  assert not os.path.exists(tmp_path / "out")


def test_without_keras_hub_the_conversion_says_how_to_get_it(
    tmp_path, monkeypatch):
  monkeypatch.setitem(sys.modules, "keras_hub", None)  # Import fails.
  with pytest.raises(kerashub.KerasHubUnavailable) as error:
    kerashub.import_keras_hub()
  message = str(error.value)
  assert "\n" not in message
  if sys.version_info < (3, 12):
    assert "the TensorFlow 2.15 stack (Python 3." in message
  assert "./setup.sh --kerashub" in message


@pytest.mark.slow
def test_command_line_errors_are_one_line(tmp_path):
  folder = _fake_preset(tmp_path / "preset", weights=False)
  result = run_script("convert_checkpoint.py", [
      "--direction=kerashub_to_tf", "--input=" + folder,
      "--output=" + str(tmp_path / "out")])
  assert result.returncode == 1
  assert result.stderr.strip().splitlines() == [
      "error: %s: no model.weights.h5 (the backbone's weights; found: "
      "config.json)" % folder]
  shutil.rmtree(folder)
  folder = _fake_preset(tmp_path / "preset")
  result = run_script("convert_checkpoint.py", [
      "--direction=kerashub_to_tf", "--input=" + folder,
      "--output=" + str(tmp_path / "out"), "--vocab_file=v.txt"])
  assert result.stderr.strip().splitlines() == [
      "error: --vocab_file applies to --direction=tf_to_hf or tf_to_kerashub "
      "only"]


@pytest.mark.slow
def test_command_line_round_trip_gives_every_variable_back(keras_hub,
                                                           tmp_path):
  """tf_to_kerashub then kerashub_to_tf as a user runs them: the
  backbone's variables come back exactly, the heads KerasHub lacks are
  named in the log."""
  del keras_hub  # The scripts import it; this fixture only skips.
  folder = _conformance_dir()
  preset, back = str(tmp_path / "preset"), str(tmp_path / "back")
  result = run_script("convert_checkpoint.py", [
      "--direction=tf_to_kerashub", "--input=" + folder, "--output=" + preset,
      "--do_lower_case=False"])
  assert result.returncode == 0, result.stderr[-2000:]
  assert "next-sentence head (cls/seq_relationship/*) is left out" in (
      result.stderr)
  result = run_script("convert_checkpoint.py", [
      "--direction=kerashub_to_tf", "--input=" + preset, "--output=" + back])
  assert result.returncode == 0, result.stderr[-2000:]
  assert "pass --do_lower_case=False" in result.stderr
  original = {name: value for name, value in _read_checkpoint(
      os.path.join(folder, "bert_model.ckpt")).items()
              if name.startswith("bert/")}
  again = _read_checkpoint(os.path.join(back, "bert_model.ckpt"))
  assert sorted(again) == sorted(original)
  for name, value in original.items():
    np.testing.assert_array_equal(again[name], value, err_msg=name)


# ---------------------------------------------------------------------------
# A preset as --init_checkpoint (bert_tf/convert/sources.py).


def test_a_preset_is_a_folder_kind_of_init_checkpoint(tmp_path):
  preset = tmp_path / "preset"
  _fake_preset(preset)
  assert sources.folder_kind(str(preset)) is sources.KERAS_HUB
  assert [os.path.basename(p) for p in kerashub.preset_source_files(
      str(preset))] == ["config.json", "model.weights.h5"]
  os.remove(preset / "model.weights.h5")
  with pytest.raises(FileNotFoundError, match="no model.weights.h5"):
    kerashub.preset_source_files(str(preset))


@pytest.mark.slow
def test_extract_features_runs_on_a_preset_alone(keras_hub, tmp_path):
  backbone = _tiny_backbone(keras_hub)
  preset = tmp_path / "preset"
  _save_preset(keras_hub, preset, backbone, _vocab(tmp_path))
  converted = str(tmp_path / "tf")
  kerashub.kerashub_to_tf(str(preset), converted)
  on_preset, on_converted, _ = extract_features_twice(tmp_path, preset,
                                                     converted)
  assert on_preset == on_converted
  assert os.listdir(tmp_path / "cache" / "converted")[0].startswith(
      "preset-")
