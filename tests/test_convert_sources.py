"""Tests for bert_tf/convert/sources.py: a Hugging Face folder as
`--init_checkpoint`, converted once into a cache and reused, the model flags
defaulting to the folder's, and bad folders refused in one line.

The Hugging Face folders are made here from the 2-layer, 32-wide
conformance checkpoint (`tf_to_hf`), so no hub is needed.
"""
import json
import os
import shutil

from absl import flags
import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from bert_tf.convert import folders
from bert_tf.convert import keras_names
from bert_tf.convert import sources
from bert_tf.tasks.classifier import model as classifier_model
from helpers import data_path
from helpers import extract_features_twice
from helpers import import_or_skip
from helpers import run_script
import modeling

_TINY = os.path.dirname(data_path("conformance", "modeling",
                                  "bert_config.json"))


@pytest.fixture(scope="module")
def hf_folder_once(tmp_path_factory):
  out = str(tmp_path_factory.mktemp("hf_once") / "tiny_hf")
  folders.tf_to_hf(_TINY, out)
  return out


@pytest.fixture
def hf_folder(hf_folder_once, tmp_path):
  """A fresh copy of the tiny Hugging Face folder (the tests change it)."""
  out = str(tmp_path / "tiny_hf")
  shutil.copytree(hf_folder_once, out)
  return out


def _flag_values(*args, lower_case=True):
  """The four model flags of a script, parsed from `args`."""
  values = flags.FlagValues()
  for name in ("init_checkpoint", "bert_config_file", "vocab_file"):
    flags.DEFINE_string(name, None, "", flag_values=values)
  if lower_case is not None:
    flags.DEFINE_bool("do_lower_case", lower_case, "", flag_values=values)
  values(["script"] + list(args))
  return values


def test_hf_folder_is_recognised_and_tf_folders_are_not(hf_folder, tmp_path):
  assert sources.folder_kind(hf_folder) is sources.HUGGING_FACE
  assert sources.folder_kind(_TINY) is None  # bert_model.ckpt.index
  assert sources.folder_kind(str(tmp_path)) is None
  assert sources.folder_kind(os.path.join(hf_folder, "config.json")) is None
  (tmp_path / "run").mkdir()
  shutil.copy(os.path.join(hf_folder, "config.json"), tmp_path / "run")
  (tmp_path / "run" / "checkpoint").write_text("")  # A training output_dir.
  (tmp_path / "run" / "model.safetensors").write_text("")
  assert sources.folder_kind(str(tmp_path / "run")) is None


def test_another_layout_plugs_in_as_one_entry(tmp_path, hf_folder):
  made = []
  kind = sources.FolderKind(
      "Toy", lambda folder: os.path.isfile(os.path.join(folder, "toy.txt")),
      lambda folder: [os.path.join(folder, "toy.txt")],
      lambda folder, out: (made.append(folder),
                           shutil.copytree(_TINY, out)),
      lambda folder: False)
  toy = tmp_path / "toy"
  toy.mkdir()
  (toy / "toy.txt").write_text("weights")
  assert sources.folder_kind(str(toy), kinds=(kind,)) is kind
  assert sources.folder_kind(hf_folder, kinds=(kind,)) is None
  converted = sources.convert_cached(str(toy), kind, str(tmp_path / "c"))
  assert made == [str(toy)] and converted.lower_case is False
  assert os.path.isfile(converted.checkpoint + ".index")


def test_flags_default_to_the_folder_and_the_conversion_is_reused(
    hf_folder, tmp_path):
  cache = str(tmp_path / "cache")
  values = _flag_values("--init_checkpoint=" + hf_folder)
  converted = sources.resolve_model_flags(values, cache)
  assert not converted.reused
  assert os.path.dirname(converted.folder) == os.path.join(cache, "converted")
  assert os.path.basename(converted.folder).startswith("tiny_hf-")
  assert values.init_checkpoint == converted.folder
  assert values.bert_config_file == converted.bert_config_file
  assert values.vocab_file == converted.vocab_file
  assert values.do_lower_case is True
  with open(converted.bert_config_file) as f, open(
      os.path.join(_TINY, "bert_config.json")) as g:
    assert json.load(f) == json.load(g)
  with open(os.path.join(converted.folder, "source.json")) as f:
    record = json.load(f)
  assert record["folder"] == os.path.realpath(hf_folder)
  assert "model.safetensors" in [name for name, _, _ in record["files"]]
  # Unchanged source: the same folder, not converted again.
  again = sources.resolve_model_flags(
      _flag_values("--init_checkpoint=" + hf_folder), cache)
  assert again.reused and again.folder == converted.folder
  # A changed source file: a new conversion.
  path = os.path.join(hf_folder, "config.json")
  os.utime(path, ns=(0, os.stat(path).st_mtime_ns + 10 ** 9))
  changed = sources.resolve_model_flags(
      _flag_values("--init_checkpoint=" + hf_folder), cache)
  assert not changed.reused and changed.folder != converted.folder


def test_casing_comes_from_the_tokenizer_config(hf_folder, tmp_path):
  path = os.path.join(hf_folder, "tokenizer_config.json")
  with open(path) as f:
    config = json.load(f)
  config["do_lower_case"] = False
  with open(path, "w") as f:
    json.dump(config, f)
  values = _flag_values("--init_checkpoint=" + hf_folder)
  sources.resolve_model_flags(values, str(tmp_path / "cache"))
  assert values.do_lower_case is False
  with pytest.raises(ValueError, match=r"--do_lower_case=True differs from "
                     r"the folder's tokenizer \(do_lower_case False\)"):
    sources.resolve_model_flags(_flag_values(
        "--init_checkpoint=" + hf_folder, "--do_lower_case"),
                                str(tmp_path / "cache"))


def test_explicit_flags_that_agree_are_kept(hf_folder, tmp_path):
  config = os.path.join(_TINY, "bert_config.json")
  vocab = os.path.join(_TINY, "vocab.txt")
  values = _flag_values("--init_checkpoint=" + hf_folder,
                        "--bert_config_file=" + config,
                        "--vocab_file=" + vocab, "--do_lower_case=true")
  converted = sources.resolve_model_flags(values, str(tmp_path / "cache"))
  assert (values.bert_config_file, values.vocab_file) == (config, vocab)
  assert values.init_checkpoint == converted.folder


def test_explicit_flags_that_differ_are_named_in_one_line(hf_folder,
                                                          tmp_path):
  config = tmp_path / "bert_config.json"
  with open(os.path.join(_TINY, "bert_config.json")) as f:
    content = json.load(f)
  content["num_hidden_layers"] = 3
  config.write_text(json.dumps(content))
  vocab = tmp_path / "vocab.txt"
  vocab.write_text("[PAD]\n[CLS]\n")
  values = _flag_values("--init_checkpoint=" + hf_folder,
                        "--bert_config_file=%s" % config,
                        "--vocab_file=%s" % vocab, "--nodo_lower_case")
  with pytest.raises(ValueError) as error:
    sources.resolve_model_flags(values, str(tmp_path / "cache"))
  message = str(error.value)
  assert "\n" not in message
  assert message.startswith("--init_checkpoint=%s is a Hugging Face folder"
                            % hf_folder)
  assert "num_hidden_layers is 3 there, 2 in the folder" in message
  assert "--vocab_file=%s differs from the folder's (line 2 is" % vocab in (
      message)
  assert "--do_lower_case=False differs" in message
  assert values.init_checkpoint == hf_folder  # Nothing changed.


def test_scripts_without_casing_flag_and_tf_checkpoints_are_left_alone(
    hf_folder, tmp_path):
  values = _flag_values("--init_checkpoint=" + hf_folder, lower_case=None)
  assert sources.resolve_model_flags(values, str(tmp_path / "c")) is not None
  for source in (_TINY, os.path.join(_TINY, "bert_model.ckpt"), None):
    args = ["--init_checkpoint=" + source] if source else []
    values = _flag_values(*args)
    assert sources.resolve_model_flags(values, str(tmp_path / "c")) is None
    assert values.init_checkpoint == source
    assert values.vocab_file is None
  assert not os.path.exists(tmp_path / "c" / "converted" / "modeling-")


def test_a_run_that_loses_the_race_uses_the_winners_folder(hf_folder,
                                                           tmp_path):
  cache = str(tmp_path / "cache")

  def convert_while_another_run_finishes(folder, out):
    sources.convert_cached(folder, sources.HUGGING_FACE, cache)
    sources.HUGGING_FACE.convert(folder, out)

  racing = sources.FolderKind(
      "Hugging Face", sources.HUGGING_FACE.detect,
      sources.HUGGING_FACE.source_files, convert_while_another_run_finishes,
      sources.HUGGING_FACE.lower_case)
  converted = sources.convert_cached(hf_folder, racing, cache)
  assert converted.reused
  # Only the winner's folder is left: no temporary folder.
  assert os.listdir(os.path.join(cache, "converted")) == [
      os.path.basename(converted.folder)]


def test_cache_root_follows_the_environment():
  assert sources.cache_root({"BERT_TF_CACHE": "/c"}) == "/c"
  assert sources.cache_root({"XDG_CACHE_HOME": "/x"}) == "/x/bert_tf"
  assert sources.cache_root({}).endswith(os.path.join(".cache", "bert_tf"))


def _resolve_error(folder, tmp_path):
  with pytest.raises((ValueError, FileNotFoundError)) as error:
    sources.resolve_model_flags(_flag_values("--init_checkpoint=" + folder),
                                str(tmp_path / "cache"))
  assert "\n" not in str(error.value)
  assert not os.path.exists(tmp_path / "cache" / "converted") or not [
      name for name in os.listdir(tmp_path / "cache" / "converted")
      if not name.startswith(".")]
  return str(error.value)


def test_pickle_only_folder_is_refused_with_the_fix(hf_folder, tmp_path):
  os.rename(os.path.join(hf_folder, "model.safetensors"),
            os.path.join(hf_folder, "pytorch_model.bin"))
  message = _resolve_error(hf_folder, tmp_path)
  assert "has pytorch_model.bin but no model.safetensors" in message
  assert "never unpickles" in message


@pytest.fixture(scope="module")
def tf_bert_folders(tmp_path_factory):
  """A tiny TFBertForSequenceClassification of transformers 4.x, saved as
  its users have it (tf_model.h5) and with safe_serialization=True, and its
  logits on two inputs. Skipped where transformers' TensorFlow classes do
  not run (Keras 3 on TensorFlow 2.21, transformers v5)."""
  transformers = import_or_skip("transformers", "./setup.sh --test")
  environ = dict(os.environ)
  try:
    return _save_tf_bert(transformers, tmp_path_factory)
  finally:
    # transformers' TensorFlow classes set TF_USE_LEGACY_KERAS, which
    # breaks the scripts that later tests run in subprocesses.
    os.environ.clear()
    os.environ.update(environ)


def _save_tf_bert(transformers, tmp_path_factory):
  try:
    config = transformers.BertConfig(
        vocab_size=1000, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=64, hidden_act="gelu", num_labels=3)
    tf_bert = transformers.TFBertForSequenceClassification(config)
  except Exception as e:  # pylint: disable=broad-except
    pytest.skip("transformers' TensorFlow classes do not run here (%s)" %
                " ".join(str(e).split())[:200])
  ids = np.array([[101, 500, 600, 102, 0, 0], [101, 700, 102, 800, 900, 102]],
                 np.int32)
  mask = np.array([[1, 1, 1, 1, 0, 0], [1] * 6], np.int32)
  segments = np.array([[0] * 6, [0, 0, 0, 1, 1, 1]], np.int32)
  logits = tf_bert(input_ids=ids, attention_mask=mask,
                   token_type_ids=segments).logits.numpy()
  root = tmp_path_factory.mktemp("tf_bert")
  made = {}
  for name, safe in (("h5", False), ("safetensors", True)):
    folder = str(root / name)
    tf_bert.save_pretrained(folder, safe_serialization=safe)
    shutil.copy(os.path.join(_TINY, "vocab.txt"), folder)
    made[name] = folder
  assert os.listdir(made["h5"]) and "tf_model.h5" in os.listdir(made["h5"])
  return made, (ids, mask, segments), logits


@pytest.mark.slow
def test_tf_bert_folders_of_transformers_4_run_as_they_are(tf_bert_folders,
                                                           tmp_path):
  made, (ids, mask, segments), expected = tf_bert_folders
  for name, folder in sorted(made.items()):
    values = _flag_values("--init_checkpoint=" + folder)
    converted = sources.resolve_model_flags(values, str(tmp_path / name))
    config = modeling.BertConfig.from_json_file(values.bert_config_file)
    with tf.Graph().as_default():
      _, _, logits, _ = classifier_model.create_model(
          config, False, tf.constant(ids), tf.constant(mask),
          tf.constant(segments), tf.zeros([2], tf.int32), 3, False)
      with tf.Session() as sess:
        tf.train.Saver().restore(sess, converted.checkpoint)
        got = sess.run(logits)
    np.testing.assert_allclose(got, expected, atol=1e-5, err_msg=name)


def test_keras_names_and_layouts_become_the_pytorch_classes():
  tensors = {
      "tf_bert_model/bert/encoder/layer_._11/attention/self/query/kernel:0":
          np.arange(6.0).reshape(2, 3),
      "bert/embeddings/position_embeddings/embeddings": np.zeros((4, 2)),
      "mlm___cls/predictions/transform/LayerNorm/gamma:0": np.ones(2),
      "nsp___cls/seq_relationship/bias:0": np.zeros(2),
      "classifier/kernel": np.zeros((2, 5)),
  }
  renamed = keras_names.keras_to_hf_names(tensors, "f")
  assert sorted(renamed) == [
      "bert.embeddings.position_embeddings.weight",
      "bert.encoder.layer.11.attention.self.query.weight",
      "classifier.weight", "cls.predictions.transform.LayerNorm.weight",
      "cls.seq_relationship.bias"]
  np.testing.assert_array_equal(
      renamed["bert.encoder.layer.11.attention.self.query.weight"],
      np.arange(6.0).reshape(2, 3).T)
  assert renamed["classifier.weight"].shape == (5, 2)


def test_damaged_tf_model_h5_is_named(hf_folder, tmp_path):
  os.remove(os.path.join(hf_folder, "model.safetensors"))
  with open(os.path.join(hf_folder, "tf_model.h5"), "wb") as f:
    f.write(b"not hdf5 at all")
  message = _resolve_error(hf_folder, tmp_path)
  assert message == ("%s: not an HDF5 file (expected Keras weights that "
                     "TFBert*.save_pretrained wrote)" %
                     os.path.join(hf_folder, "tf_model.h5"))


@pytest.mark.parametrize("file_name,change,expected", [
    ("tokenizer_config.json", {"tokenizer_class": "RobertaTokenizer"},
     "tokenizer_config.json: tokenizer_class is 'RobertaTokenizer', "
     "expected BertTokenizer or BertTokenizerFast"),
    ("tokenizer_config.json", {"strip_accents": False},
     "tokenizer_config.json: strip_accents is false with do_lower_case true"),
    ("tokenizer.json", {"model": {"type": "BPE", "vocab": {}}},
     "tokenizer.json: model.type is 'BPE', expected \"WordPiece\""),
    ("config.json", {"model_type": "roberta"},
     "config.json: model_type = 'roberta', expected 'bert'"),
    ("config.json", {"architectures": ["ElectraForPreTraining"]},
     "config.json: architectures = ['ElectraForPreTraining'], expected BERT "
     "classes"),
    ("config.json", {"hidden_size": 64},
     "has shape [1000, 32], expected [1000, 64] (the shape"),
])
def test_bad_folders_are_one_line_naming_the_file(hf_folder, tmp_path,
                                                  file_name, change,
                                                  expected):
  path = os.path.join(hf_folder, file_name)
  content = {}
  if os.path.exists(path):
    with open(path) as f:
      content = json.load(f)
  content.update(change)
  with open(path, "w") as f:
    json.dump(content, f)
  message = _resolve_error(hf_folder, tmp_path)
  assert os.path.join(hf_folder, file_name) in message
  assert expected in message, message


def test_missing_weights_and_vocabulary_are_named(hf_folder, tmp_path):
  os.remove(os.path.join(hf_folder, "vocab.txt"))
  assert "no vocab.txt" in _resolve_error(hf_folder, tmp_path)
  os.remove(os.path.join(hf_folder, "model.safetensors"))
  assert sources.folder_kind(hf_folder) is None  # No weights: not a model.


@pytest.mark.slow
def test_extract_features_runs_on_a_hf_folder_alone(hf_folder, tmp_path):
  on_folder, on_checkpoint, stderr = extract_features_twice(tmp_path,
                                                           hf_folder, _TINY)
  assert "is a Hugging Face folder; converted it to %s" % (
      tmp_path / "cache" / "converted") in stderr
  assert on_folder == on_checkpoint
  assert os.listdir(tmp_path / "cache" / "converted")[0].startswith(
      "tiny_hf-")
