"""The multiple-choice head: one score per choice, softmax over the choices.

The BERT paper's SWAG head (Devlin et al. 2018, section 4.4): the encoder
reads each choice's `[CLS] A [SEP] B [SEP]` row on its own ([batch_size *
num_choices, seq_length]); one learned vector `cls/multiple_choice/
output_weights` [1, hidden_size] (and `output_bias` [1]) scores each row's
pooled `[CLS]` output (dropout 0.1 when training, as the classifier); the
scores of a question's rows are its logits, trained with softmax
cross-entropy on the right one. Hugging Face's `BertForMultipleChoice`
computes the same (`classifier.weight` [1, hidden_size], `classifier.bias`
[1]; `bert_tf/convert/` maps them).

Shapes: B batch (questions), C choices, S `max_seq_length`, H hidden size.
"""

import tensorflow.compat.v1 as tf

from bert_tf.tasks.multiple_choice import metrics as mc_metrics
from bert_tf.train import model_fn as model_fn_utils
from bert_tf.train import spec as spec_lib
import modeling

__all__ = ["SCOPE", "MultipleChoiceHead", "question_weights", "encoder_fn",
           "model_fn_builder"]

# The head's variable scope (SPEC section 3's heads live under cls/).
SCOPE = "cls/multiple_choice"
_SEQUENCE_KEYS = ("input_ids", "input_mask", "segment_ids")


def question_weights(features):
  """The loss weight of each question: float32 [B], 0 for TPU padding.

  Also `loop.Training.token_weights` of a training input: with gradient
  accumulation, the model_fn divides by the update's number of questions.
  """
  if "is_real_example" in features:
    return tf.cast(features["is_real_example"], tf.float32)
  return tf.ones(tf.shape(features["label_ids"])[:1], tf.float32)


def encoder_fn(bert_config, use_one_hot_embeddings, use_tpu,
               compute_dtype=tf.float32):
  """The `build_model_fn(encoder=...)` of multiple choice.

  Args:
    bert_config: `modeling.BertConfig`.
    use_one_hot_embeddings: bool.
    use_tpu: bool (weights are cast once off TPU in EVAL and PREDICT).
    compute_dtype: the encoder's compute dtype.

  Returns:
    `encoder(features, mode, dropout_seed=None) -> modeling.BertModel`
    over the choices' rows:
    `input_ids`, `input_mask`, `segment_ids` int32 [B, C, S] are read as
    [B * C, S].
  """

  def encoder(features, mode, dropout_seed=None):
    seq_length = modeling.get_shape_list(features["input_ids"],
                                         expected_rank=3)[2]
    rows = {key: tf.reshape(features[key], [-1, seq_length])  # [B * C, S]
            for key in _SEQUENCE_KEYS}
    return modeling.BertModel(
        config=bert_config, is_training=mode == spec_lib.ModeKeys.TRAIN,
        input_ids=rows["input_ids"], input_mask=rows["input_mask"],
        token_type_ids=rows["segment_ids"],
        use_one_hot_embeddings=use_one_hot_embeddings,
        compute_dtype=compute_dtype,
        cast_weights_once=model_fn_utils.cast_weights_once(mode, use_tpu),
        dropout_seed=dropout_seed)

  return encoder


class MultipleChoiceHead(model_fn_utils.Head):
  """Scores each choice's pooled output; softmax cross-entropy per question.

  Predictions: `logits` and `probabilities`, float32 [B, C]. EVAL metrics:
  `metrics.metric_fn` (`eval_accuracy`, `eval_loss`).
  """

  def build(self, model, features, mode, update_share=None):
    """See `model_fn.Head.build`; `features` as `features.py` gives them.

    Raises:
      ValueError: `input_ids` is not of rank 3 ([B, C, S]).
    """
    num_choices = modeling.get_shape_list(features["input_ids"],
                                          expected_rank=3)[1]
    logits = self.logits(model.get_pooled_output(), num_choices,
                         mode == spec_lib.ModeKeys.TRAIN,
                         model.dropout_seed)  # [B, C]
    probabilities = tf.nn.softmax(logits, axis=-1)
    if mode == spec_lib.ModeKeys.PREDICT:
      return model_fn_utils.HeadOutput(
          predictions={"logits": logits, "probabilities": probabilities})
    label_ids = features["label_ids"]
    log_probs = tf.nn.log_softmax(logits, axis=-1)
    per_example_loss = -tf.reduce_sum(
        tf.one_hot(label_ids, depth=num_choices, dtype=tf.float32) *
        log_probs, axis=-1)  # [B]
    is_real = question_weights(features)
    # The mean over the real questions of the update (under gradient
    # accumulation, of all its micro-batches; under a strategy, of the
    # global batch), as one batch on one device gives it.
    loss = model_fn_utils.weighted_mean_loss(per_example_loss, is_real,
                                             update_share)
    return model_fn_utils.HeadOutput(
        loss=loss, eval_metrics=(mc_metrics.metric_fn, [
            per_example_loss, label_ids, logits, is_real]))

  @staticmethod
  def logits(pooled_output, num_choices, is_training, dropout_seed=None):
    """The choices' scores.

    Args:
      pooled_output: float32 Tensor [B * C, H], the rows' pooled outputs,
        the choices of a question next to each other.
      num_choices: int, C.
      is_training: bool; dropout 0.1 on the pooled output when training.
      dropout_seed: (optional) `modeling.DropoutSeed`; None: stateful.

    Returns:
      float32 Tensor [B, C].
    """
    hidden_size = modeling.get_shape_list(pooled_output, expected_rank=2)[1]
    with tf.variable_scope(SCOPE):
      output_weights = tf.get_variable(
          "output_weights", [1, hidden_size],
          initializer=tf.truncated_normal_initializer(stddev=0.02))
      output_bias = tf.get_variable("output_bias", [1],
                                    initializer=tf.zeros_initializer())
      if is_training:
        pooled_output = modeling.dropout(pooled_output, 0.1, dropout_seed)
      scores = tf.matmul(tf.cast(pooled_output, tf.float32), output_weights,
                         transpose_b=True)
      scores = tf.nn.bias_add(scores, output_bias)  # [B * C, 1]
      return tf.reshape(scores, [-1, num_choices])  # [B, C]


def model_fn_builder(bert_config, init_checkpoint, use_tpu,
                     use_one_hot_embeddings, schedule=None,
                     compute_dtype=tf.float32):
  """The multiple-choice `model_fn`: `build_model_fn` with this head.

  Args:
    bert_config: `modeling.BertConfig`.
    init_checkpoint: str or None; every `bert/...` variable found is
      loaded, the head (new) starts from its initializer.
    use_tpu: bool.
    use_one_hot_embeddings: bool.
    schedule: `model_fn.TrainingSchedule`, or None (no training).
    compute_dtype: the encoder's compute dtype.

  Returns:
    `model_fn(features, labels, mode, params)`.
  """
  return model_fn_utils.build_model_fn(
      MultipleChoiceHead(), bert_config, init_checkpoint, use_tpu,
      use_one_hot_embeddings, schedule=schedule, compute_dtype=compute_dtype,
      encoder=encoder_fn(bert_config, use_one_hot_embeddings, use_tpu,
                         compute_dtype))
