"""The heads of pre-training: masked LM and next sentence, as values.

The reference release's `get_masked_lm_output`, `gather_indexes` and
`get_next_sentence_output` (Devlin et al. 2018, section 3.1, tasks 1 and
2), and the same layers as `model_fn.Head`s: `MaskedLmHead`
(`cls/predictions`; trained by `run_pretraining.py`, read by
`predict_masked_lm.py`), `NextSentenceHead` (`cls/seq_relationship`) and
`Heads`, their sum, which pre-training trains (`pretraining_head`).
"""

import tensorflow.compat.v1 as tf

from bert_tf.train import accumulation
from bert_tf.train import model_fn as model_fn_utils
from bert_tf.train import packing
from bert_tf.train import spec as spec_lib
import modeling

__all__ = ["gather_indexes", "get_masked_lm_output",
           "get_next_sentence_output", "MaskedLmHead", "NextSentenceHead",
           "Heads", "pretraining_head"]


def gather_indexes(sequence_tensor, positions):
  """Picks the vectors at `positions` of each sequence.

  Args:
    sequence_tensor: float Tensor of shape [batch_size, seq_length, width].
    positions: int32 Tensor of shape [batch_size, num_positions], indexes
      into each row's sequence.

  Returns:
    float Tensor of shape [batch_size * num_positions, width], rows in
    batch-major order.
  """
  batch_size, seq_length, width = modeling.get_shape_list(
      sequence_tensor, expected_rank=3, name="sequence_tensor")
  row_starts = tf.reshape(tf.range(0, batch_size, dtype=tf.int32) * seq_length,
                          [-1, 1])  # [B, 1]
  flat_positions = tf.reshape(positions + row_starts, [-1])  # [B*P]
  flat_sequence = tf.reshape(sequence_tensor,
                             [batch_size * seq_length, width])  # [B*T, W]
  return tf.gather(flat_sequence, flat_positions)  # [B*P, W]


def get_masked_lm_output(bert_config, input_tensor, output_weights, positions,
                         label_ids, label_weights, update_share=None):
  """Masked LM head: loss and log-probabilities of the masked tokens.

  Variables `cls/predictions/transform/dense/{kernel,bias}`,
  `cls/predictions/transform/LayerNorm/{beta,gamma}` and
  `cls/predictions/output_bias`; the output projection is tied to the word
  embeddings.

  Args:
    bert_config: `modeling.BertConfig`.
    input_tensor: float Tensor of shape [batch_size, seq_length,
      hidden_size], the encoder's sequence output.
    output_weights: float Tensor of shape [vocab_size, hidden_size], the word
      embedding table.
    positions: int32 Tensor of shape [batch_size, max_predictions_per_seq].
    label_ids: int32 Tensor of shape [batch_size, max_predictions_per_seq],
      the original token ids.
    label_weights: float32 Tensor of shape [batch_size,
      max_predictions_per_seq], 1.0 for real predictions, 0.0 for padding.
    update_share: (optional, an addition) float32 [batch_size], with
      gradient accumulation the micro-batch's share of its update's masked
      tokens (`accumulation.with_update_shares`); None: its own count.

  Returns:
    (loss, per_example_loss, log_probs): float32 scalar
    sum(w * loss) / (sum(w) + 1e-5) (the sums over the global batch under a
    strategy: `model_fn_utils.weighted_mean_loss`); float32 Tensor [batch_size *
    max_predictions_per_seq]; float32 Tensor [batch_size *
    max_predictions_per_seq, vocab_size].
  """
  input_tensor = gather_indexes(input_tensor, positions)  # [B*P, W]
  with tf.variable_scope("cls/predictions"):
    with tf.variable_scope("transform"):
      input_tensor = modeling.dense_layer(
          input_tensor, bert_config.hidden_size,
          activation=modeling.get_activation(bert_config.hidden_act),
          initializer_range=bert_config.initializer_range, name="dense")
      input_tensor = modeling.layer_norm(input_tensor)
    output_bias = tf.get_variable(
        "output_bias", shape=[bert_config.vocab_size],
        initializer=tf.zeros_initializer())
    logits = tf.matmul(input_tensor, output_weights, transpose_b=True)
    logits = tf.nn.bias_add(logits, output_bias)  # [B*P, V]
    log_probs = tf.nn.log_softmax(logits, axis=-1)

    label_ids = tf.reshape(label_ids, [-1])  # [B*P]
    label_weights = tf.reshape(label_weights, [-1])  # [B*P]
    one_hot_labels = tf.one_hot(label_ids, depth=bert_config.vocab_size,
                                dtype=tf.float32)
    per_example_loss = -tf.reduce_sum(log_probs * one_hot_labels, axis=[-1])
    # Padded prediction slots have weight 0; 1e-5 avoids 0 / 0. Under a
    # strategy the mean is over the global batch's predictions.
    loss = model_fn_utils.weighted_mean_loss(per_example_loss, label_weights,
                                             update_share)
  return loss, per_example_loss, log_probs


def get_next_sentence_output(bert_config, input_tensor, labels):
  """Next sentence head: is segment B the real continuation (0) or random (1)?

  Variables `cls/seq_relationship/output_weights` [2, hidden_size] and
  `cls/seq_relationship/output_bias` [2].

  Args:
    bert_config: `modeling.BertConfig`.
    input_tensor: float Tensor of shape [batch_size, hidden_size], the
      pooled output.
    labels: int32 Tensor of shape [batch_size] or [batch_size, 1].

  Returns:
    (loss, per_example_loss, log_probs): float32 scalar mean loss, float32
    Tensor [batch_size], float32 Tensor [batch_size, 2].
  """
  with tf.variable_scope("cls/seq_relationship"):
    output_weights = tf.get_variable(
        "output_weights", shape=[2, bert_config.hidden_size],
        initializer=modeling.create_initializer(bert_config.initializer_range))
    output_bias = tf.get_variable(
        "output_bias", shape=[2], initializer=tf.zeros_initializer())
    logits = tf.matmul(input_tensor, output_weights, transpose_b=True)
    logits = tf.nn.bias_add(logits, output_bias)  # [B, 2]
    log_probs = tf.nn.log_softmax(logits, axis=-1)
    labels = tf.reshape(labels, [-1])
    one_hot_labels = tf.one_hot(labels, depth=2, dtype=tf.float32)
    per_example_loss = -tf.reduce_sum(one_hot_labels * log_probs, axis=-1)
    loss = tf.reduce_mean(per_example_loss)
  return loss, per_example_loss, log_probs


def _masked_lm_metrics(example_loss, log_probs, label_ids, label_weights):
  """Weighted accuracy and mean loss of the masked tokens."""
  predictions = tf.argmax(log_probs, axis=-1, output_type=tf.int32)
  label_ids = tf.reshape(label_ids, [-1])
  label_weights = tf.reshape(label_weights, [-1])
  return {
      "masked_lm_accuracy": tf.metrics.accuracy(
          labels=label_ids, predictions=predictions, weights=label_weights),
      "masked_lm_loss": tf.metrics.mean(
          values=tf.reshape(example_loss, [-1]), weights=label_weights),
  }


def _next_sentence_metrics(example_loss, log_probs, labels, weights=None):
  """Accuracy and mean loss of the next-sentence labels (`weights`: packed
  rows' real slots)."""
  predictions = tf.argmax(log_probs, axis=-1, output_type=tf.int32)
  labels = tf.reshape(labels, [-1])
  return {
      "next_sentence_accuracy": tf.metrics.accuracy(
          labels=labels, predictions=predictions, weights=weights),
      "next_sentence_loss": tf.metrics.mean(values=example_loss,
                                            weights=weights),
  }


class MaskedLmHead(model_fn_utils.Head):
  """The masked-LM head (`get_masked_lm_output`) as a value.

  Reads `masked_lm_positions` [batch_size, max_predictions_per_seq] and,
  to train or evaluate, `masked_lm_ids` and `masked_lm_weights`; its loss is
  the weighted mean over the masked tokens of each update. EVAL metrics:
  `masked_lm_accuracy`, `masked_lm_loss`. PREDICT (with `top_k`):
  `unique_id` [batch_size]; `top_ids` int32 and `top_probabilities`
  float32 [batch_size, max_predictions_per_seq, top_k], the likeliest
  WordPieces at each position and their softmax probabilities.
  """

  def __init__(self, bert_config, top_k=None):
    self.bert_config = bert_config
    self.top_k = top_k

  def build(self, model, features, mode, update_share=None):
    positions = features["masked_lm_positions"]
    if mode == spec_lib.ModeKeys.PREDICT:  # No labels: zero weights.
      label_ids = tf.zeros_like(positions)
      label_weights = tf.zeros(tf.shape(positions), tf.float32)
    else:
      label_ids = features["masked_lm_ids"]
      label_weights = features["masked_lm_weights"]
    loss, example_loss, log_probs = get_masked_lm_output(
        self.bert_config, model.get_sequence_output(),
        model.get_embedding_table(), positions, label_ids, label_weights,
        update_share=update_share)
    if mode == spec_lib.ModeKeys.PREDICT:
      top_log_probs, top_ids = tf.nn.top_k(log_probs, k=self.top_k)
      shape = tf.concat([tf.shape(positions), [self.top_k]], axis=0)
      return model_fn_utils.HeadOutput(predictions={
          "unique_id": features["unique_ids"],
          "top_ids": tf.reshape(top_ids, shape),
          "top_probabilities": tf.reshape(tf.exp(top_log_probs), shape)})
    return model_fn_utils.HeadOutput(loss=loss, eval_metrics=(
        _masked_lm_metrics,
        [example_loss, log_probs, label_ids, label_weights]))


class NextSentenceHead(model_fn_utils.Head):
  """The next-sentence head (`get_next_sentence_output`) as a value.

  Reads `next_sentence_labels` [batch_size, 1], or of packed rows
  (`packing`) [batch_size, K] with `is_real_example` [batch_size, K], each
  slot's label read at its `[CLS]`, the loss the mean over real slots
  (with gradient accumulation, over the update's: `accumulation.slot_share`);
  EVAL metrics: `next_sentence_accuracy`, `next_sentence_loss`.
  """

  modes = (spec_lib.ModeKeys.TRAIN, spec_lib.ModeKeys.EVAL)

  def __init__(self, bert_config):
    self.bert_config = bert_config

  def build(self, model, features, mode, update_share=None):
    del mode
    labels, pooled = features["next_sentence_labels"], model.get_pooled_output()
    if pooled.shape.ndims == 2:  # A per-example mean, as the reference.
      loss, example_loss, log_probs = get_next_sentence_output(
          self.bert_config, pooled, labels)
      return model_fn_utils.HeadOutput(loss=loss, eval_metrics=(
          _next_sentence_metrics, [example_loss, log_probs, labels]))
    # Packed rows [B, K, W]: one entry a slot; empty slots weigh 0.
    labels = packing.slots(labels)
    is_real = tf.cast(packing.slots(features["is_real_example"]), tf.float32)
    _, example_loss, log_probs = get_next_sentence_output(
        self.bert_config, packing.slots(pooled), labels)
    return model_fn_utils.HeadOutput(
        loss=model_fn_utils.weighted_mean_loss(
            example_loss, is_real,
            accumulation.slot_share(features, update_share)),
        eval_metrics=(_next_sentence_metrics,
                      [example_loss, log_probs, labels, is_real]))


class Heads(model_fn_utils.Head):
  """Several heads on one encoder, trained on the sum of their losses.

  The heads are built in their order (their variables and ops too); the
  evaluation reports every head's metrics. TRAIN and EVAL only.
  """

  modes = (spec_lib.ModeKeys.TRAIN, spec_lib.ModeKeys.EVAL)

  def __init__(self, heads):
    self.heads = tuple(heads)

  def prepare(self, features, mode):
    for head in self.heads:
      features = head.prepare(features, mode)
    return features

  def build(self, model, features, mode, update_share=None):
    outputs = [head.build(model, features, mode, update_share)
               for head in self.heads]
    loss = outputs[0].loss
    for output in outputs[1:]:
      loss += output.loss
    functions = [output.eval_metrics[0] for output in outputs]
    sizes = [len(output.eval_metrics[1]) for output in outputs]

    def metric_fn(*tensors):
      metrics, start = {}, 0
      for function, size in zip(functions, sizes):
        metrics.update(function(*tensors[start:start + size]))
        start += size
      return metrics

    return model_fn_utils.HeadOutput(loss=loss, eval_metrics=(
        metric_fn, [t for output in outputs for t in output.eval_metrics[1]]))


def pretraining_head(bert_config, next_sentence=True):
  """BERT's pre-training: the masked LM, plus the next sentence (the
  reference) unless `next_sentence` is False."""
  heads = [MaskedLmHead(bert_config)]
  if next_sentence:
    heads.append(NextSentenceHead(bert_config))
  return Heads(heads)
