"""The SQuAD model: BERT and the reference's per-token start/end layer
(Devlin et al. 2018, 4.2): `cls/squad/output_weights` [2, hidden_size] and
`cls/squad/output_bias` [2], trained on the mean of the start and end
cross-entropies (`SpanHead`); the reference's `model_fn_builder` and the
`input_fn` over a `FeatureWriter` file."""

import tensorflow.compat.v1 as tf

from bert_tf.train import model_fn as model_fn_utils
from bert_tf.train import spec as spec_lib
from bert_tf.train import input_fn as input_utils
import modeling

__all__ = ["SpanHead", "create_model", "span_loss", "model_fn_builder",
           "input_fn_builder"]


def _span_logits(model):
  """(start_logits, end_logits), float32 [batch_size, seq_length]."""
  final_hidden = model.get_sequence_output()
  batch_size, seq_length, hidden_size = modeling.get_shape_list(
      final_hidden, expected_rank=3)
  # Kept for parity: a fixed stddev of 0.02, not config.initializer_range.
  output_weights = tf.get_variable(
      "cls/squad/output_weights", [2, hidden_size],
      initializer=tf.truncated_normal_initializer(stddev=0.02))
  output_bias = tf.get_variable("cls/squad/output_bias", [2],
                                initializer=tf.zeros_initializer())
  # [B, S, H] -> [B * S, H]
  hidden_matrix = tf.reshape(final_hidden,
                             [batch_size * seq_length, hidden_size])
  logits = tf.matmul(hidden_matrix, output_weights, transpose_b=True)
  logits = tf.nn.bias_add(logits, output_bias)
  # [B * S, 2] -> [B, S, 2] -> [2, B, S]
  logits = tf.reshape(logits, [batch_size, seq_length, 2])
  logits = tf.transpose(logits, [2, 0, 1])
  start_logits, end_logits = tf.unstack(logits, axis=0)
  return start_logits, end_logits


def create_model(bert_config, is_training, input_ids, input_mask, segment_ids,
                 use_one_hot_embeddings, compute_dtype=tf.float32,
                 cast_weights_once=False):
  """BERT with a per-token start/end classifier: (start_logits,
  end_logits), float32 [batch_size, seq_length], of int32 [batch_size,
  seq_length] inputs. `compute_dtype`, `cast_weights_once`: see
  `modeling.BertModel`."""
  return _span_logits(modeling.BertModel(
      config=bert_config, is_training=is_training, input_ids=input_ids,
      input_mask=input_mask, token_type_ids=segment_ids,
      use_one_hot_embeddings=use_one_hot_embeddings,
      compute_dtype=compute_dtype, cast_weights_once=cast_weights_once))


def span_loss(start_logits, end_logits, start_positions, end_positions):
  """Mean of the start and end cross-entropies over the batch (float32
  scalar) of logits [batch_size, seq_length] and int32 positions
  [batch_size]."""
  seq_length = modeling.get_shape_list(start_logits, expected_rank=2)[1]

  def cross_entropy(logits, positions):
    one_hot = tf.one_hot(positions, depth=seq_length, dtype=tf.float32)
    log_probs = tf.nn.log_softmax(logits, axis=-1)
    return -tf.reduce_mean(tf.reduce_sum(one_hot * log_probs, axis=-1))

  return (cross_entropy(start_logits, start_positions) +
          cross_entropy(end_logits, end_positions)) / 2.0


class SpanHead(model_fn_utils.Head):
  """An answer span: start and end logits of every token (`cls/squad`).

  TRAIN: `span_loss` (built in TRAIN only: prediction features have no
  positions). PREDICT: `unique_ids` [batch_size], `start_logits` and
  `end_logits` [batch_size, seq_length] (float32). No EVAL mode: SQuAD is
  scored from the predictions (`predictions.score_predictions`).
  """

  modes = (spec_lib.ModeKeys.TRAIN, spec_lib.ModeKeys.PREDICT)

  def build(self, model, features, mode, update_share=None):
    del update_share  # A per-example mean, as the reference.
    start_logits, end_logits = _span_logits(model)
    if mode == spec_lib.ModeKeys.TRAIN:
      return model_fn_utils.HeadOutput(loss=span_loss(
          start_logits, end_logits, features["start_positions"],
          features["end_positions"]))
    return model_fn_utils.HeadOutput(predictions={
        "unique_ids": features["unique_ids"], "start_logits": start_logits,
        "end_logits": end_logits})


def model_fn_builder(bert_config, init_checkpoint, learning_rate,
                     num_train_steps, num_warmup_steps, use_tpu,
                     use_one_hot_embeddings, options=None,
                     compute_dtype=tf.float32):
  """Returns the `model_fn` for `TPUEstimator`: `SpanHead` on BERT.

  TRAIN and PREDICT modes (another raises `ValueError`); PREDICT yields
  `unique_ids`, `start_logits` and `end_logits` per feature. `options`
  (optional `optimization.OptimizerOptions`) sets the optimizer,
  `compute_dtype` the encoder's compute dtype; default the reference's.
  """
  return model_fn_utils.build_model_fn(
      SpanHead(), bert_config, init_checkpoint, use_tpu,
      use_one_hot_embeddings,
      schedule=model_fn_utils.TrainingSchedule(
          learning_rate, num_train_steps, num_warmup_steps, options),
      compute_dtype=compute_dtype, log_features=False)


def input_fn_builder(input_file, seq_length, is_training, drop_remainder):
  """An `input_fn` over a `FeatureWriter` TFRecord file."""
  name_to_features = {
      "unique_ids": tf.io.FixedLenFeature([], tf.int64),
      "input_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
      "input_mask": tf.io.FixedLenFeature([seq_length], tf.int64),
      "segment_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
  }
  if is_training:
    name_to_features["start_positions"] = tf.io.FixedLenFeature([], tf.int64)
    name_to_features["end_positions"] = tf.io.FixedLenFeature([], tf.int64)
  return input_utils.tfrecord_input_fn_builder(
      [input_file], name_to_features, is_training, drop_remainder)
