"""The NER model: one dense layer on every token of BERT's output.

The BERT paper's token classification (Devlin et al. 2019, section 5.3):
the final hidden state of each token goes through a dense layer
(`cls/ner/output_weights` [num_labels, hidden_size], `cls/ner/output_bias`
[num_labels]; Hugging Face `BertForTokenClassification`'s `classifier`) to
its label, trained with the cross-entropy of the labelled tokens (each
word's first WordPiece); no CRF. `TokenHead` is that layer as a
`model_fn.Head`; `run_ner.py` imports the public names from here.
"""

import tensorflow.compat.v1 as tf

from bert_tf.train import model_fn as model_fn_utils
from bert_tf.train import spec as spec_lib
import modeling

__all__ = ["TokenHead", "create_model", "metric_fn", "label_weights",
           "model_fn_builder"]


def label_weights(features):
  """float32 [..., seq_length]: 1 where a real example's token has a label.

  Args:
    features: dict with int32 `label_weights` [batch_size, seq_length] and
      `is_real_example` [batch_size].
  """
  weights = tf.cast(features["label_weights"], tf.float32)
  if features["is_real_example"].shape.ndims == 2:  # Packed rows, per slot:
    return weights  # empty slots and rows have no labelled token.
  is_real = tf.cast(features["is_real_example"], tf.float32)
  return weights * is_real[..., None]


def _token_outputs(model, label_ids, weights, num_labels, is_training,
                   update_share=None):
  """The head on `model`: (loss, per_token_loss, logits, probabilities)."""
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
      sequence = modeling.dropout(sequence, 0.1, model.dropout_seed)
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
    loss = model_fn_utils.weighted_mean_loss(per_token_loss, weights,
                                             update_share)
  return loss, per_token_loss, logits, probabilities


def create_model(bert_config, is_training, input_ids, input_mask, segment_ids,
                 label_ids, label_weights, num_labels, use_one_hot_embeddings,
                 compute_dtype=tf.float32, update_share=None,
                 cast_weights_once=False):
  """BERT, dropout, then one dense layer applied to every token.

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
  return _token_outputs(model, label_ids, label_weights, num_labels,
                        is_training, update_share)


def metric_fn(per_token_loss, label_weights):
  """In-graph eval metrics: `eval_loss`, the mean loss per labelled token.

  The entity scores need whole sentences (and the best window of each word),
  so they are computed from the predictions after the evaluation.
  """
  return {"eval_loss": tf.metrics.mean(values=per_token_loss,
                                       weights=label_weights)}


class TokenHead(model_fn_utils.Head):
  """A label per token: `cls/ner` on the sequence output.

  Predictions: `unique_ids` [batch_size], `probabilities` [batch_size,
  seq_length, num_labels] (float32) and `predictions` [batch_size,
  seq_length] (int32 label ids). EVAL's metric is `eval_loss`.
  """

  _WEIGHTS = "ner_label_weights"

  def __init__(self, num_labels):
    self.num_labels = num_labels

  def prepare(self, features, mode):
    # The label weights come before the encoder, as the model always built
    # them: under a graph seed, each random op's seed depends on the ops
    # made before it.
    del mode
    return dict(features, **{self._WEIGHTS: label_weights(features)})

  def build(self, model, features, mode, update_share=None):
    weights = features[self._WEIGHTS]
    loss, per_token_loss, logits, probabilities = _token_outputs(
        model, features["label_ids"], weights, self.num_labels,
        mode == spec_lib.ModeKeys.TRAIN, update_share)
    if mode == spec_lib.ModeKeys.PREDICT:
      # Packed rows: each slot's example and the tokens' slots
      # (`packing.unpack`) in place of the unique ids.
      keys = (("example_index", "input_mask") if "example_index" in features
              else ("unique_ids",))
      return model_fn_utils.HeadOutput(predictions=dict(
          {key: features[key] for key in keys},
          probabilities=probabilities,
          predictions=tf.argmax(logits, axis=-1, output_type=tf.int32)))
    return model_fn_utils.HeadOutput(
        loss=loss, eval_metrics=(metric_fn, [per_token_loss, weights]))


def model_fn_builder(bert_config, num_labels, init_checkpoint, learning_rate,
                     num_train_steps, num_warmup_steps, use_tpu,
                     use_one_hot_embeddings, options=None,
                     compute_dtype=tf.float32):
  """Returns a `model_fn` for `TPUEstimator`: `TokenHead` on BERT.

  `options` (optional `optimization.OptimizerOptions`) sets the optimizer
  (default the reference's), `compute_dtype` the encoder's arithmetic
  (`TrainingOptions.compute_dtype`; weights and losses stay float32).
  Predictions: see `TokenHead`.
  """
  return model_fn_utils.build_model_fn(
      TokenHead(num_labels), bert_config, init_checkpoint, use_tpu,
      use_one_hot_embeddings,
      schedule=model_fn_utils.TrainingSchedule(
          learning_rate, num_train_steps, num_warmup_steps, options),
      compute_dtype=compute_dtype, log_features=False)
