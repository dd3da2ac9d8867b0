"""The masked-LM head of pre-training (`cls/predictions`).

The reference release's `get_masked_lm_output` and `gather_indexes`
(Devlin et al. 2018, section 3.1, task 1): shared by `run_pretraining.py`,
which trains the head, and `predict_masked_lm.py`, which reads it.
"""

import tensorflow.compat.v1 as tf

from bert_tf.train import model_fn as model_fn_utils
import modeling

__all__ = ["gather_indexes", "get_masked_lm_output"]


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
