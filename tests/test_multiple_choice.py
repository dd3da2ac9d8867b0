"""The multiple-choice task (SWAG): reader, features, head, conversion.

The model is a tiny random BERT made here (2 layers, 32 wide) over a
vocabulary of the shared SWAG sample's words (`data/swag/sample.json`, 10
questions of 4 endings): its scores equal Hugging Face's
`BertForMultipleChoice` on the converted folder, the conversion goes back
exactly, and a short training run learns the sample.
"""

import json
import os

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from helpers import import_or_skip
from helpers import shared_path
from bert_tf.tasks import features as feature_utils
from bert_tf.tasks.multiple_choice import data as mc_data
from bert_tf.tasks.multiple_choice import features as mc_features
from bert_tf.tasks.multiple_choice import head as mc_head
from bert_tf.tasks.multiple_choice import predictions as mc_predictions
from bert_tf.train import model_fn as model_fn_utils
from bert_tf.train import spec as spec_lib
import convert_checkpoint
import modeling
import tokenization

SEQ_LENGTH = 64
SWAG_HEADER = ("video-id,fold-ind,startphrase,sent1,sent2,gold-source,"
               "ending0,ending1,ending2,ending3,label")


def _sample_path():
  return shared_path("data", "swag", "sample.json")


def _write(path, text):
  with open(path, "w", encoding="utf-8") as f:
    f.write(text)
  return str(path)


def _vocab_file(folder, examples):
  """A vocabulary of the special tokens and every word of `examples`."""
  basic = tokenization.BasicTokenizer(do_lower_case=True)
  words = set()
  for example in examples:
    for text in (example.context,) + tuple(example.choice_texts()):
      words.update(basic.tokenize(text))
  tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + sorted(words)
  return _write(os.path.join(str(folder), "vocab.txt"),
                "\n".join(tokens) + "\n")


def _config(vocab_size, initializer_range=0.02):
  return modeling.BertConfig(
      vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2,
      num_attention_heads=4, intermediate_size=37, hidden_act="gelu",
      max_position_embeddings=SEQ_LENGTH, type_vocab_size=2,
      initializer_range=initializer_range)


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
  """(examples, tokenizer, features as int32 arrays [10, 4, S], labels,
  folder with vocab.txt and bert_config.json)."""
  examples = mc_data.read_examples(_sample_path())
  folder = tmp_path_factory.mktemp("swag_model")
  vocab = _vocab_file(folder, examples)
  tokenizer = tokenization.FullTokenizer(vocab, do_lower_case=True)
  rows = [mc_features.convert_example(e, SEQ_LENGTH, tokenizer)
          for e in examples]
  arrays = {key: np.array([getattr(r, key) for r in rows], np.int32)
            for key in ("input_ids", "input_mask", "segment_ids")}
  labels = np.array([e.label for e in examples], np.int32)
  config = _config(len(tokenizer.vocab))
  _write(folder / "bert_config.json", config.to_json_string())
  return examples, tokenizer, arrays, labels, folder


# ---------------------------------------------------------------------------
# Reading.


def test_sample_json_lines_read_as_ten_questions_of_four_endings():
  examples = mc_data.read_examples(_sample_path())
  assert len(examples) == 10
  assert all(len(e.endings) == 4 for e in examples)
  first = examples[0]
  assert first.context.startswith("Members of the procession walk")
  assert first.start == "A drum line" and first.label == 0
  assert first.choice_texts()[0] == (
      "A drum line passes by walking down the street playing their "
      "instruments.")


def test_swag_csv_is_read_by_its_header_and_test_split_needs_no_label(
    tmp_path):
  row = ('0,lsmdc0001,1,Someone opens the door.,Someone opens the door.,'
         'He,gold,walks in.,"sits, then waits.",runs.,flies.,2')
  train = _write(tmp_path / "train.csv",
                 "," + SWAG_HEADER + "\n" + row + "\n")
  (example,) = mc_data.read_examples(train)
  assert example.endings == ("walks in.", "sits, then waits.", "runs.",
                             "flies.")
  assert (example.context, example.start, example.label) == (
      "Someone opens the door.", "He", 2)
  test_header = "," + SWAG_HEADER.rsplit(",", 1)[0]
  test = _write(tmp_path / "test.csv",
                test_header + "\n" + row.rsplit(",", 1)[0] + "\n")
  (example,) = mc_data.read_examples(test, labelled=False)
  assert example.label is None and len(example.endings) == 4


def test_any_number_of_endings_from_two(tmp_path):
  lines = [json.dumps({"sent1": "a b", "sent2": "c", "ending0": "d",
                       "ending1": "e", "ending2": "f", "ending3": "g",
                       "ending4": "h", "label": 4}),
           json.dumps({"sent1": "a", "sent2": "", "ending0": "d",
                       "ending1": "e", "ending2": "f", "ending3": "g",
                       "ending4": "h", "label": 0})]
  examples = mc_data.read_examples(_write(tmp_path / "val.json",
                                          "\n".join(lines) + "\n"))
  assert [len(e.endings) for e in examples] == [5, 5]
  assert examples[1].choice_texts()[0] == "d"  # No start: the ending alone.
  two = _write(tmp_path / "two.csv", "\ufeffsent1,sent2,ending0,ending1,"
               "label\nx,y,z,w,1\n")
  assert mc_data.read_examples(two)[0].label == 1


@pytest.mark.parametrize("name,text,message", [
    ("train.csv", "sent1,sent2,ending0,ending1,ending2,label\n"
     "a,b,c,d,e,0\na,b,c,d,,1\n",
     r"train.csv:3: ending2 is missing \(every question has 3 endings\)$"),
    ("train.csv", "sent1,sent2,ending0,ending1,label\na,b,c,d,2\n",
     r"train.csv:2: label 2 is out of range for 2 endings "
     r"\(expected 0..1\)$"),
    ("val.json", '{"sent1": "a", "sent2": "b", "ending0": "c", '
     '"ending1": "d", "label": 0}\n{"sent1": "a", "sent2": "b", '
     '"ending0": "c", "label": 0}\n',
     r"val.json:2: expected columns ending0, ending1, ... \(at least 2 "
     r"endings\), got ending0$"),
    ("val.json", '{"sent1": "a", "sent2": "b", "ending0": "c", '
     '"ending2": "d", "label": 0}\n',
     r"val.json:1: ending1 is missing \(the endings are numbered"),
    ("val.json", '{"sent1": "a", "sent2": "b", "ending0": "c", '
     '"ending1": "d", "label": -1}\n',
     r"val.json:1: label -1 is out of range for 2 endings"),
    ("train.csv", "sent1,sent2,ending0,ending1\na,b,c,d\n",
     r"train.csv:1: no label column in the header"),
    ("val.json", '{"sent1": "a", "sent2": "b", "ending0": "c", '
     '"ending1": "d", "label": "x"}\n',
     r"val.json:1: label 'x' is not an integer \(expected 0..1\)$"),
])
def test_bad_rows_are_one_line_naming_file_and_row(tmp_path, name, text,
                                                   message):
  path = _write(tmp_path / name, text)
  with pytest.raises(ValueError, match=message) as raised:
    mc_data.read_examples(path)
  assert "\n" not in str(raised.value)
  assert str(raised.value).startswith(path)


def test_split_files_are_train_val_test_in_one_layout(tmp_path):
  _write(tmp_path / "val.csv", "")
  assert mc_data.split_file(str(tmp_path), "dev").endswith("val.csv")
  _write(tmp_path / "val.json", "")
  with pytest.raises(ValueError, match="val.csv and val.json are both the "
                     "dev split; keep one"):
    mc_data.split_file(str(tmp_path), "dev")
  with pytest.raises(ValueError, match="no train file; expected one of "
                     "train.csv, train.json, train.jsonl"):
    mc_data.split_file(str(tmp_path), "train")


# ---------------------------------------------------------------------------
# Features.


def test_each_choice_is_the_context_pair_truncated_as_the_classifier(
    sample):
  examples, tokenizer, _, _, _ = sample
  example = examples[3]
  features = mc_features.convert_example(example, 16, tokenizer)
  assert np.array(features.input_ids).shape == (4, 16)
  for k, text in enumerate(example.choice_texts()):
    tokens, segments = feature_utils.pack_tokens(
        tokenizer.tokenize(example.context), tokenizer.tokenize(text), 16)
    assert len(tokens) == 16  # Truncated longest-first.
    assert features.input_ids[k] == tokenizer.convert_tokens_to_ids(tokens)
    assert features.segment_ids[k] == segments
    assert features.input_mask[k] == [1] * 16
  assert features.label_id == example.label


def test_records_read_back_as_batch_choices_length(sample, tmp_path):
  examples, tokenizer, arrays, labels, _ = sample
  path = str(tmp_path / "train.tf_record")
  assert mc_features.write_records(examples, SEQ_LENGTH, tokenizer, path,
                                   batch_multiple=4) == 12
  input_fn = mc_features.file_based_input_fn_builder(
      path, 4, SEQ_LENGTH, is_training=False, drop_remainder=False)
  with tf.Graph().as_default():
    batch = tf.data.make_one_shot_iterator(
        input_fn({"batch_size": 12})).get_next()
    with tf.Session() as sess:
      got = sess.run(batch)
  assert got["input_ids"].shape == (12, 4, SEQ_LENGTH)
  np.testing.assert_array_equal(got["input_ids"][:10], arrays["input_ids"])
  np.testing.assert_array_equal(got["segment_ids"][:10],
                                arrays["segment_ids"])
  np.testing.assert_array_equal(got["label_ids"][:10], labels)
  assert got["is_real_example"].tolist() == [1] * 10 + [0, 0]
  assert not got["input_mask"][10:].any()


def test_test_results_hold_probabilities_then_the_choice(tmp_path):
  path = str(tmp_path / "test_results.tsv")
  predictions = [{"probabilities": np.array([0.1, 0.6, 0.3], np.float32)},
                 {"probabilities": np.array([0.5, 0.2, 0.3], np.float32)},
                 {"probabilities": np.array([0.2, 0.2, 0.6], np.float32)}]
  assert mc_predictions.write_test_results(path, predictions, 2) == 2
  with open(path, encoding="utf-8") as f:
    assert f.read() == "0.1\t0.6\t0.3\t1\n0.5\t0.2\t0.3\t0\n"
  with pytest.raises(ValueError, match="got 3 predictions for 4 test"):
    mc_predictions.write_test_results(path, predictions, 4)


# ---------------------------------------------------------------------------
# The model.


def _model_fn(config, schedule=None):
  return model_fn_utils.build_model_fn(
      mc_head.MultipleChoiceHead(), config, None, use_tpu=False,
      use_one_hot_embeddings=False, schedule=schedule,
      encoder=mc_head.encoder_fn(config, False, False))


def _features(arrays, labels):
  features = {key: tf.constant(value) for key, value in arrays.items()}
  features["label_ids"] = tf.constant(labels)
  return features


def _evaluate(config, arrays, labels, prefix):
  """(mean loss, predicted endings) of the checkpoint `prefix`."""
  with tf.Graph().as_default():
    spec = _model_fn(config)(_features(arrays, labels), None,
                             spec_lib.ModeKeys.EVAL, {})
    logits = spec.eval_metrics[1][2]  # [10, 4]
    with tf.Session() as sess:
      tf.train.Saver().restore(sess, prefix)
      return sess.run([spec.loss, tf.argmax(logits, axis=-1,
                                            output_type=tf.int32)])


@pytest.mark.slow
def test_a_short_training_run_learns_the_sample(sample, tmp_path):
  _, tokenizer, arrays, labels, _ = sample
  config = _config(len(tokenizer.vocab))
  steps = 30
  with tf.Graph().as_default():
    tf.set_random_seed(1)
    spec = _model_fn(config, model_fn_utils.TrainingSchedule(
        learning_rate=2e-3, num_train_steps=steps, num_warmup_steps=0))(
            _features(arrays, labels), None, spec_lib.ModeKeys.TRAIN, {})
    saver = tf.train.Saver()
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      before = saver.save(sess, str(tmp_path / "before"),
                          write_meta_graph=False)
      for _ in range(steps):
        sess.run(spec.train_op)
      after = saver.save(sess, str(tmp_path / "after"),
                         write_meta_graph=False)
  loss_before, predicted_before = _evaluate(config, arrays, labels, before)
  loss_after, predicted_after = _evaluate(config, arrays, labels, after)
  assert loss_before == pytest.approx(np.log(4.0), abs=0.05)
  assert loss_after < 0.3 < loss_before
  assert np.mean(predicted_after == labels) == 1.0
  assert np.mean(predicted_before == labels) < 1.0


def _random_checkpoint(config, arrays, prefix):
  """Saves a random model with the multiple-choice head; returns its
  logits [10, 4] on `arrays`. Weights far from the usual 0.02 scale, so
  that the choices' scores differ clearly."""
  with tf.Graph().as_default():
    tf.set_random_seed(3)
    spec = _model_fn(config)(_features(arrays, np.zeros([10], np.int32)),
                             None, spec_lib.ModeKeys.PREDICT, {})
    head = {v.name: v for v in tf.global_variables()
            if v.name.startswith("cls/multiple_choice/")}
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      sess.run([
          head["cls/multiple_choice/output_weights:0"].assign(
              tf.random.normal([1, 32], seed=4)),
          head["cls/multiple_choice/output_bias:0"].assign([0.25])])
      logits = sess.run(spec.predictions["logits"])
      tf.train.Saver().save(sess, prefix, write_meta_graph=False)
  return logits


def _read_checkpoint(prefix):
  reader = tf.train.load_checkpoint(prefix)
  return {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}


def test_conversion_round_trip_keeps_the_head_as_multiple_choice(
    sample, tmp_path):
  _, tokenizer, arrays, _, folder = sample
  prefix = str(tmp_path / "bert_model.ckpt")
  _random_checkpoint(_config(len(tokenizer.vocab)), arrays, prefix)
  hf_dir, back = str(tmp_path / "hf"), str(tmp_path / "back")
  groups = convert_checkpoint.tf_to_hf(
      prefix, hf_dir, bert_config_file=str(folder / "bert_config.json"),
      vocab_file=str(folder / "vocab.txt"))
  assert "multiple_choice" in groups
  with open(os.path.join(hf_dir, "config.json")) as f:
    assert json.load(f)["architectures"] == ["BertForMultipleChoice"]
  convert_checkpoint.hf_to_tf(hf_dir, back)
  got = _read_checkpoint(os.path.join(back, "bert_model.ckpt"))
  expected = _read_checkpoint(prefix)
  assert sorted(got) == sorted(expected)
  assert got["cls/multiple_choice/output_weights"].shape == (1, 32)
  for name, value in expected.items():
    np.testing.assert_array_equal(got[name], value, err_msg=name)


def test_a_one_label_sequence_classifier_stays_a_classifier():
  # BertForSequenceClassification with one label (regression) has the
  # same classifier.* shapes; the config's architectures decide.
  table = convert_checkpoint.tensor_table(
      {"hidden_size": 32, "intermediate_size": 37, "vocab_size": 9,
       "type_vocab_size": 2, "max_position_embeddings": 8,
       "num_hidden_layers": 1}, multiple_choice=False)
  names = {e.tf_name for e in table if e.hf_name == "classifier.weight"}
  assert names == {"output_weights"}


@pytest.mark.slow
def test_scores_equal_bert_for_multiple_choice_after_conversion(
    sample, tmp_path):
  torch = import_or_skip("torch", "./setup.sh --test")
  transformers = import_or_skip("transformers", "./setup.sh --test")
  torch.set_num_threads(1)
  _, tokenizer, arrays, _, folder = sample
  prefix = str(tmp_path / "bert_model.ckpt")
  logits = _random_checkpoint(_config(len(tokenizer.vocab), 0.2), arrays,
                              prefix)
  hf_dir = str(tmp_path / "hf")
  convert_checkpoint.tf_to_hf(
      prefix, hf_dir, bert_config_file=str(folder / "bert_config.json"),
      vocab_file=str(folder / "vocab.txt"))
  model, info = transformers.BertForMultipleChoice.from_pretrained(
      hf_dir, output_loading_info=True)
  assert info["missing_keys"] == [] and info["unexpected_keys"] == []
  model.eval()
  with torch.no_grad():
    hf_logits = model(
        input_ids=torch.tensor(arrays["input_ids"], dtype=torch.long),
        attention_mask=torch.tensor(arrays["input_mask"], dtype=torch.long),
        token_type_ids=torch.tensor(arrays["segment_ids"],
                                    dtype=torch.long)).logits.numpy()
  assert hf_logits.shape == (10, 4)
  np.testing.assert_allclose(hf_logits, logits, atol=1e-5, rtol=0)
  # The scores differ between choices (the comparison is not vacuous).
  assert np.ptp(logits, axis=-1).min() > 1e-2
