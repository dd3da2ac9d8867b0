"""Fine-tunes BERT for named-entity recognition (token classification).

The BERT paper's CoNLL-2003 setup (Devlin et al. 2019, section 5.3): the
final hidden state of each word's first WordPiece goes through a dense layer
to the word's tag, trained with cross-entropy; no CRF. Any CoNLL-format task
works: one word per line with the label in `--label_column`, a blank line
between sentences, optional `-DOCSTART-` lines between documents; IOB1, IOB2
(BIO) and IOBES tags. `bert_tf/tasks/ner/` holds the reader, the tag
schemes, the features and the metrics.

Outputs in `--output_dir`: `label_list.txt` (the sorted labels of the
training file, read back when predicting without training),
`eval_results.txt` (sorted `key = value` lines, 0-1 scale: eval_precision,
eval_recall, eval_f1, eval_f1_<TYPE>, eval_accuracy, eval_loss, global_step,
loss), `dev_predictions.txt` and `test_predictions.txt` (`token gold pred`
lines for conlleval.pl), each written atomically.

Usage (see docs/finetuning.md):
  python run_ner.py --do_train --do_eval --do_predict \
    --data_dir=$CONLL_DIR --vocab_file=$BERT_DIR/vocab.txt \
    --bert_config_file=$BERT_DIR/bert_config.json \
    --init_checkpoint=$BERT_DIR/bert_model.ckpt --output_dir=/tmp/ner
"""

from bert_tf.cli import quiet  # First: TensorFlow's start-up lines off.
quiet.when_run_as_command(__name__)

import functools
import math
import os

from absl import flags
from absl import logging
import tensorflow.compat.v1 as tf

from bert_tf.checks.problems import Problems
from bert_tf.cli import flags as cli_flags
from bert_tf.cli import entry
from bert_tf.cli import startup
from bert_tf.export import saved_model as export_utils
from bert_tf.runner import loop
from bert_tf.tasks.ner import features as ner_features
from bert_tf.tasks.ner import metrics as ner_metrics
from bert_tf.tasks.ner import reader as ner_reader
from bert_tf.tasks.ner import tags as ner_tags
from bert_tf.train import accumulation
from bert_tf.train import best as best_lib
from bert_tf.train import checkpoints
from bert_tf.train import hooks as train_hooks
from bert_tf.train import input_fn as input_utils
from bert_tf.train import lengths as lengths_lib
from bert_tf.train import model_fn as model_fn_utils
from bert_tf.train import options as training_options
from bert_tf.train import spec as spec_lib
import modeling

__all__ = ["define_flags", "create_model", "metric_fn", "model_fn_builder",
           "main", "cli"]

FLAGS = flags.FLAGS


def define_flags():
  """Defines the script's flags: the shared ones and the CoNLL reader's."""
  flags.DEFINE_string("train_file", "eng.train",
                      "Training file in --data_dir (CoNLL-2003: eng.train).")
  flags.DEFINE_string("dev_file", "eng.testa",
                      "File evaluated by --do_eval, in --data_dir "
                      "(CoNLL-2003 dev: eng.testa).")
  flags.DEFINE_string("test_file", "eng.testb",
                      "File predicted by --do_predict, in --data_dir "
                      "(CoNLL-2003 test: eng.testb). It may have the token "
                      "column only.")
  flags.DEFINE_enum(
      "tag_scheme", "auto", ["auto", "IOB1", "IOB2", "IOBES"],
      "Tag scheme of the labels; auto detects it from the gold tags. Tag "
      "sequences invalid in it are counted and warned about; entities are "
      "always read with conlleval's chunking, valid for all three.")
  flags.DEFINE_bool(
      "document_context", False,
      "Encode each sentence with the words of the neighbouring sentences of "
      "its document around it, up to --max_seq_length (the paper's "
      "'maximal document context'); only the sentence's own words are "
      "labelled. False: each sentence alone.")
  cli_flags.define_flags(
      "data_dir", "label_column", cli_flags.MODEL_FLAGS, "max_seq_length",
      "bucket_by_length", "doc_stride", "do_eval", "eval_batch_size", cli_flags.FINE_TUNING_FLAGS,
      "export_dir", cli_flags.TRAINING_FLAGS, cli_flags.TPU_FLAGS,
      cli_flags.DISTRIBUTE_FLAGS, cli_flags.BEST_CHECKPOINT_FLAGS,
      doc_stride=64)
  for name in ("data_dir", "vocab_file", "bert_config_file", "output_dir"):
    flags.mark_flag_as_required(name)


# ----------------------------------------------------------------------------
# The model.
# ----------------------------------------------------------------------------


def create_model(bert_config, is_training, input_ids, input_mask, segment_ids,
                 label_ids, label_weights, num_labels, use_one_hot_embeddings,
                 compute_dtype=tf.float32, update_share=None,
                 cast_weights_once=False):
  """BERT, dropout, then one dense layer applied to every token.

  The head's variables are `cls/ner/output_weights` [num_labels, hidden_size]
  and `cls/ner/output_bias` [num_labels] (Hugging Face
  `BertForTokenClassification`'s `classifier.weight` / `classifier.bias`).

  Args:
    bert_config: `modeling.BertConfig`.
    is_training: bool; dropout (probability 0.1) only when training.
    input_ids, input_mask, segment_ids: int32 [batch_size, seq_length].
    label_ids: int32 [batch_size, seq_length].
    label_weights: float32 [batch_size, seq_length], 1 at the positions that
      carry a label (each word's first piece), else 0.
    num_labels: int.
    use_one_hot_embeddings: bool.
    compute_dtype: the encoder's compute dtype (see `modeling.BertModel`);
      the head and the loss are float32.
    update_share: (optional) float32 [batch_size], with gradient
      accumulation the micro-batch's share of its update's labelled tokens
      (`accumulation.with_update_shares`); None: its own count.
    cast_weights_once: bool, see `modeling.BertModel`: for prediction and
      evaluation graphs off TPU.

  Returns:
    `(loss, per_token_loss, logits, probabilities)`: the float32 scalar mean
    cross-entropy over the weighted positions (of the global batch, under a
    `tf.distribute` strategy), [batch_size, seq_length],
    and [batch_size, seq_length, num_labels] twice.
  """
  model = modeling.BertModel(
      config=bert_config, is_training=is_training, input_ids=input_ids,
      input_mask=input_mask, token_type_ids=segment_ids,
      use_one_hot_embeddings=use_one_hot_embeddings,
      compute_dtype=compute_dtype, cast_weights_once=cast_weights_once)
  sequence = model.get_sequence_output()  # [B, L, H]
  batch_size, seq_length, hidden_size = modeling.get_shape_list(
      sequence, expected_rank=3)
  with tf.variable_scope("cls/ner"):
    output_weights = tf.get_variable(
        "output_weights", [num_labels, hidden_size],
        initializer=tf.truncated_normal_initializer(stddev=0.02))
    output_bias = tf.get_variable("output_bias", [num_labels],
                                  initializer=tf.zeros_initializer())
    if is_training:
      sequence = modeling.dropout(sequence, 0.1)
    flat = tf.reshape(sequence, [-1, hidden_size])  # [B*L, H]
    logits = tf.nn.bias_add(
        tf.matmul(flat, output_weights, transpose_b=True), output_bias)
    logits = tf.reshape(logits, [batch_size, seq_length, num_labels])
    probabilities = tf.nn.softmax(logits, axis=-1)
    log_probs = tf.nn.log_softmax(logits, axis=-1)
    one_hot = tf.one_hot(label_ids, depth=num_labels, dtype=tf.float32)
    per_token_loss = -tf.reduce_sum(one_hot * log_probs, axis=-1)  # [B, L]
    # As the reference's masked-LM loss: a batch without labels gives 0.
    # Under a strategy: the mean over the labelled tokens of all replicas.
    loss = model_fn_utils.weighted_mean_loss(per_token_loss, label_weights,
                                             update_share)
  return loss, per_token_loss, logits, probabilities


def metric_fn(per_token_loss, label_weights):
  """In-graph eval metrics: `eval_loss`, the mean loss per labelled token.

  The entity scores need whole sentences (and the best window of each word),
  so they are computed from the predictions after the evaluation.
  """
  return {"eval_loss": tf.metrics.mean(values=per_token_loss,
                                       weights=label_weights)}


def _label_weights(features):
  """float32 [..., seq_length]: 1 where a real example's token has a label."""
  is_real = tf.cast(features["is_real_example"], tf.float32)
  return tf.cast(features["label_weights"], tf.float32) * is_real[..., None]


def model_fn_builder(bert_config, num_labels, init_checkpoint, learning_rate,
                     num_train_steps, num_warmup_steps, use_tpu,
                     use_one_hot_embeddings, options=None,
                     compute_dtype=tf.float32):
  """Returns a `model_fn` for `TPUEstimator`.

  `options` (optional `optimization.OptimizerOptions`) sets the optimizer
  (default the reference's), `compute_dtype` the encoder's arithmetic
  (`TrainingOptions.compute_dtype`; weights and losses stay float32).

  Predictions: `unique_ids` [batch_size], `probabilities` [batch_size,
  seq_length, num_labels] (float32) and `predictions` [batch_size,
  seq_length] (int32 label ids).
  """

  def model_fn(features, labels, mode, params):
    del labels, params  # Unused.
    is_training = mode == spec_lib.ModeKeys.TRAIN
    label_weights = _label_weights(features)
    loss, per_token_loss, logits, probabilities = create_model(
        bert_config, is_training, features["input_ids"],
        features["input_mask"], features["segment_ids"],
        features["label_ids"], label_weights, num_labels,
        use_one_hot_embeddings,
        compute_dtype=compute_dtype,
        update_share=accumulation.update_share(features, options, mode,
                                               use_tpu),
        cast_weights_once=model_fn_utils.cast_weights_once(
            mode, use_tpu))
    scaffold_fn = model_fn_utils.init_from_checkpoint(init_checkpoint,
                                                       use_tpu)
    if mode == spec_lib.ModeKeys.TRAIN:
      return model_fn_utils.train_spec(loss, learning_rate, num_train_steps,
                                        num_warmup_steps, use_tpu,
                                        scaffold_fn, options=options)
    if mode == spec_lib.ModeKeys.EVAL:
      return spec_lib.model_spec(
          mode=mode, loss=loss,
          eval_metrics=(metric_fn, [per_token_loss, label_weights]),
          scaffold_fn=scaffold_fn)
    predictions = {
        "unique_ids": features["unique_ids"],
        "probabilities": probabilities,
        "predictions": tf.argmax(logits, axis=-1, output_type=tf.int32),
    }
    return spec_lib.model_spec(
        mode=mode, predictions=predictions, scaffold_fn=scaffold_fn)

  return model_fn


# ----------------------------------------------------------------------------
# main.
# ----------------------------------------------------------------------------


def _flag_problems(flag_values):
  """This script's flag problems (the model's are `startup.prepare_model`'s)."""
  return startup.fine_tuning_flag_problems(flag_values, ("doc_stride",))


def _read_inputs(flag_values, run):
  """Reads and checks every file the run needs, and the label list.

  Args:
    flag_values: the parsed flags (files, columns, tag scheme).
    run: `training_options.RunOptions`: the steps this process runs.

  Returns:
    (files, label_list): dict split -> (path, list of `Sentence`) for
    "train", "dev", "test" as requested; the sorted training labels.
  """
  files = {}
  f = flag_values
  for split, wanted, name in (("train", run.do_train, f.train_file),
                              ("dev", run.do_eval, f.dev_file),
                              ("test", run.do_predict, f.test_file)):
    if wanted:
      path = os.path.join(flag_values.data_dir, name)
      files[split] = (path, ner_reader.read_conll_file(
          path, flag_values.label_column))
      logging.info("Read %d sentences from %s", len(files[split][1]), path)
  label_file = os.path.join(flag_values.output_dir, ner_reader.LABEL_LIST_FILE)
  if run.do_train:
    label_list = ner_reader.label_list_from(files["train"][1],
                                            files["train"][0])
    what = "the training file %s" % files["train"][0]
  else:
    label_list = ner_reader.read_label_list(label_file)
    what = "the label list %s" % label_file
  if "dev" in files and files["dev"][1][0].labels is None:
    raise ValueError("%s: no label column; --do_eval needs gold labels" %
                     files["dev"][0])
  for path, sentences in files.values():
    ner_reader.check_labels(sentences, label_list, path, what)
  scheme = flag_values.tag_scheme
  if scheme == "auto":
    gold = [s.labels for _, sentences in files.values() for s in sentences
            if s.labels is not None]
    scheme = ner_tags.detect_tag_scheme(gold)
    logging.info("Tag scheme: %s (detected)", scheme)
  for path, sentences in files.values():
    ner_tags.warn_invalid_tags(sentences, scheme, path)
  return files, label_list


def _features(flag_values, sentences, label_list, tokenizer, path,
              pad_to=None):
  """Features of one file; TPU runs pad them to a multiple of `pad_to`."""
  features, num_empty = ner_features.convert_sentences_to_features(
      sentences, label_list, tokenizer, flag_values.max_seq_length,
      flag_values.doc_stride, flag_values.document_context)
  if num_empty:
    logging.warning("%s: %d words became no WordPiece (control characters "
                    "only); they are predicted O", path, num_empty)
  logging.info("%s: %d sentences -> %d features", path, len(sentences),
               len(features))
  if pad_to:
    while len(features) % pad_to:
      features.append(ner_features.padding_feature(
          len(features), flag_values.max_seq_length))
  return features


def _record_file(flag_values, name):
  """`<output_dir>/<name>.tf_record`, where `_input_fn` writes features."""
  return os.path.join(flag_values.output_dir, name + ".tf_record")


def _input_fn(flag_values, features, name, is_training):
  record_file = _record_file(flag_values, name)
  ner_features.write_features(features, record_file)
  return input_utils.tfrecord_input_fn_builder(
      [record_file], ner_features.name_to_features(flag_values.max_seq_length),
      is_training=is_training,
      drop_remainder=is_training or flag_values.use_tpu,
      length_buckets=(lengths_lib.bucket_lengths(flag_values.max_seq_length)
                      if flag_values.bucket_by_length else None),
      sequence_keys=ner_features.SEQUENCE_KEYS)


def _predict_words(flag_values, steps, sentences, features, label_list,
                   name, checkpoint_path=None):
  """Runs prediction and returns each word's label (see word_predictions).

  `checkpoint_path` (the kept best) replaces the latest checkpoint.
  """
  batch_size = flag_values.predict_batch_size
  predictions = steps.predict(
      _input_fn(flag_values, features, name, is_training=False),
      records=[_record_file(flag_values, name)],
      num_batches=-(-len(features) // batch_size),
      checkpoint_path=checkpoint_path, batch_size=batch_size)
  return ner_metrics.word_predictions(sentences, features, predictions,
                                      label_list)


def _training(flag_values, run, train, label_list, tokenizer):
  """Writes the label list and the training features; their
  `loop.Training` (steps count updates, of --train_batch_size times
  --gradient_accumulation_steps; the loss a mean over each update's
  labelled tokens)."""
  path, sentences = train
  ner_reader.write_label_list(
      os.path.join(flag_values.output_dir, ner_reader.LABEL_LIST_FILE),
      label_list)
  features = _features(flag_values, sentences, label_list, tokenizer, path)
  if not features:
    raise ValueError("%s: no word of any sentence has a WordPiece; nothing "
                     "to train on" % path)
  num_train_steps, num_warmup_steps = model_fn_utils.fine_tuning_steps(
      len(features), run.examples_per_update, flag_values.num_train_epochs,
      flag_values.warmup_proportion)
  logging.info("Training on %d features", len(features))
  return loop.Training(
      input_fn=_input_fn(flag_values, features, "train", is_training=True),
      num_train_steps=num_train_steps, num_warmup_steps=num_warmup_steps,
      learning_rate=flag_values.learning_rate,
      records=[_record_file(flag_values, "train")],
      token_weights=_label_weights,
      progress_every=min(100, max(1, num_train_steps // 10)))


def _evaluate(flag_values, dev, features, label_list):
  """The `loop.run` evaluation of the dev file: the in-graph loss, then the
  entity scores of its predictions (also in TensorBoard), and
  dev_predictions.txt."""
  path, sentences = dev
  types = ner_tags.entity_types(label_list)

  def evaluate(steps):
    logging.info("***** Running evaluation: %d features *****",
                 len(features))
    use_tpu = flag_values.use_tpu
    result = steps.evaluate(
        _input_fn(flag_values, features, "eval", is_training=False),
        records=[_record_file(flag_values, "eval")],
        steps=len(features) // flag_values.eval_batch_size if use_tpu
        else None)
    predicted = _predict_words(flag_values, steps, sentences, features,
                               label_list, "eval")
    scores = ner_metrics.entity_scores([s.labels for s in sentences],
                                       predicted, types)
    entity_results = ner_metrics.eval_results_entries(scores)
    result.update(entity_results)
    train_hooks.write_eval_summaries(flag_values.output_dir, entity_results,
                                     result["global_step"])
    ner_metrics.write_conll_predictions(
        os.path.join(flag_values.output_dir, "dev_predictions.txt"),
        sentences, predicted)
    return result

  return evaluate


def _predict(flag_values, test, features, label_list, steps, checkpoint):
  """Writes test_predictions.txt; logs the scores when the file has
  labels."""
  path, sentences = test
  logging.info("  %d features", len(features))
  predicted = _predict_words(flag_values, steps, sentences, features,
                             label_list, "predict", checkpoint_path=checkpoint)
  ner_metrics.write_conll_predictions(
      os.path.join(flag_values.output_dir, "test_predictions.txt"), sentences,
      predicted)
  if sentences[0].labels is not None:
    scores = ner_metrics.entity_scores([s.labels for s in sentences],
                                       predicted,
                                       ner_tags.entity_types(label_list))
    logging.info("Test set (%s): precision %.4f, recall %.4f, F1 %.4f, "
                 "token accuracy %.4f", path, scores["precision"],
                 scores["recall"], scores["f1"], scores["accuracy"])


def _export(flag_values, bert_config, label_list, init_checkpoint,
            checkpoint=None):
  """Exports the fine-tuned model (`checkpoint`, the kept best, else the
  latest) under --export_dir (see export_utils)."""
  model_fn = model_fn_builder(
      bert_config=bert_config, num_labels=len(label_list),
      init_checkpoint=None, learning_rate=0.0, num_train_steps=None,
      num_warmup_steps=None, use_tpu=False, use_one_hot_embeddings=False)
  export_utils.export_saved_model(
      model_fn, checkpoint or checkpoints.checkpoint_to_export(
          flag_values.output_dir, init_checkpoint),
      flag_values.export_dir, flag_values.max_seq_length,
      kind=export_utils.NER, output_keys=["probabilities"],
      vocab_file=flag_values.vocab_file,
      bert_config_file=flag_values.bert_config_file,
      do_lower_case=flag_values.do_lower_case, label_list=label_list,
      extra_features=export_utils.NER_FEATURES,
      bucket_by_length=flag_values.bucket_by_length,
      extra_config={"doc_stride": flag_values.doc_stride,
                    "document_context": flag_values.document_context})


def main(_):
  logging.set_verbosity(logging.INFO)
  # 1. Flags, options, config, checkpoint, vocabulary: every problem
  # reported together, before any work; then the devices.
  problems = Problems(_flag_problems(FLAGS))
  run = training_options.from_flags(FLAGS, problems)
  bert_config, init_checkpoint, tokenizer = startup.prepare_model(
      FLAGS.bert_config_file, FLAGS.max_seq_length, FLAGS.init_checkpoint,
      FLAGS.do_lower_case, FLAGS.vocab_file, FLAGS.output_dir,
      problems=problems,
      export_now=bool(FLAGS.export_dir) and not FLAGS.do_train)
  problems.raise_if_any()
  loop.setup_devices(run)
  use_tpu = run.tpu.use_tpu

  # 2. Every input the run needs, read and checked up front. On TPU every
  # batch is whole; the dev features are both evaluated and predicted, so
  # they fill whole batches of both sizes.
  files, label_list = _read_inputs(FLAGS, run)
  if run.evaluation.keep_best_by:
    best_lib.check_key(run.evaluation.keep_best_by, {
        "eval_loss", "loss", "global_step", "eval_precision", "eval_recall",
        "eval_f1", "eval_accuracy"} | {
            "eval_f1_%s" % t for t in ner_tags.entity_types(label_list)})
  features = {}
  for split, pad_to in (
      ("dev", math.lcm(FLAGS.eval_batch_size, FLAGS.predict_batch_size)),
      ("test", FLAGS.predict_batch_size)):
    if split in files:
      features[split] = _features(FLAGS, files[split][1], label_list,
                                  tokenizer, files[split][0],
                                  pad_to if use_tpu else None)

  with loop.output_dir(FLAGS.output_dir, run):
    # 3. The training features, and the model.
    training = (_training(FLAGS, run, files["train"], label_list, tokenizer)
                if run.do_train else None)
    model_fn = model_fn_builder(
        bert_config=bert_config, num_labels=len(label_list),
        init_checkpoint=init_checkpoint, learning_rate=FLAGS.learning_rate,
        num_train_steps=training and training.num_train_steps,
        num_warmup_steps=training and training.num_warmup_steps,
        use_tpu=use_tpu, use_one_hot_embeddings=use_tpu,
        options=run.training.optimizer_options,
        compute_dtype=run.training.compute_dtype)
    # 4. Train (evaluating on the way), evaluate, predict, export.
    loop.run(
        model_fn, run, FLAGS.output_dir, training=training,
        evaluate=(_evaluate(FLAGS, files["dev"], features["dev"], label_list)
                  if run.do_eval else None),
        predict=functools.partial(_predict, FLAGS, files.get("test"),
                                  features.get("test"), label_list),
        export=(functools.partial(_export, FLAGS, bert_config, label_list,
                                  init_checkpoint)
                if FLAGS.export_dir else None),
        eval_batch_size=FLAGS.eval_batch_size,
        predict_batch_size=FLAGS.predict_batch_size)


def cli():
  """Command-line entry point: defines the flags, then runs `main`."""
  define_flags()
  entry.run_main(main)


if __name__ == "__main__":
  cli()
