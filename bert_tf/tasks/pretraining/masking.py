"""Dynamic masking: the reference's masking rule, run in the input pipeline.

`run_pretraining.py --dynamic_masking` reads the unmasked records of
`create_pretraining_data.py --dynamic_masking` and masks each sequence as it
is read, with `instances.create_masked_lm_predictions` (the same code as the
records' masking: 15% of the tokens by default, of which 80% `[MASK]`, 10% a
random word, 10% kept; whole-word and Chinese whole-word groups), so every
epoch sees new masks (Liu et al. 2019, RoBERTa, section 4.1).

Each sequence draws from its own `random.Random` seeded by the pipeline's
seed and the sequence's place in the stream read (counting on across
epochs): a run with a fixed seed (`--deterministic`) masks the same way
every time, and a sequence read again gets new masks.
"""

import random

import numpy as np
import tensorflow.compat.v1 as tf

from bert_tf.tasks.pretraining import instances
from bert_tf.tasks.pretraining import whole_words

__all__ = ["Masker"]


class Masker(object):
  """Masks unmasked pre-training features (numpy, or in a `tf.data` map).

  Args:
    tokenizer: a `tokenization.FullTokenizer` (`vocab`, `inv_vocab`): the
      vocabulary the records were written with.
    max_predictions_per_seq: int, the most masked positions (the length of
      the `masked_lm_*` features).
    masked_lm_prob: float in (0, 1], the share of tokens to mask.
    do_whole_word_mask: bool, mask the WordPieces of a word together.
    word_marks: bool, the records carry `word_continues`
      (`--do_chinese_whole_word_mask`): Chinese words are masked whole too.
  """

  def __init__(self, tokenizer, max_predictions_per_seq, masked_lm_prob=0.15,
               do_whole_word_mask=False, word_marks=False):
    self._vocab = tokenizer.vocab
    self._inv_vocab = tokenizer.inv_vocab
    self._vocab_words = list(tokenizer.vocab.keys())
    self.max_predictions_per_seq = max_predictions_per_seq
    self.masked_lm_prob = masked_lm_prob
    self.do_whole_word_mask = do_whole_word_mask or word_marks
    self.word_marks = word_marks

  def mask_ids(self, input_ids, num_tokens, rng, word_continues=None):
    """Masks one sequence's ids by the reference's rule.

    Args:
      input_ids: sequence of int, `[CLS] A [SEP] (B [SEP])` then padding.
      num_tokens: int, the tokens before the padding.
      rng: `random.Random`, the masking's only source of randomness.
      word_continues: (optional) sequence of 0/1 like `input_ids`: 1 where a
        token continues the Chinese word before it.

    Returns:
      (input_ids, masked_lm_positions, masked_lm_ids, masked_lm_weights):
      int32 [len(input_ids)], int32, int32 and float32
      [max_predictions_per_seq] numpy arrays (positions increasing, zeros
      after the last).
    """
    tokens = [self._inv_vocab[int(i)] for i in input_ids[:num_tokens]]
    if word_continues is not None:
      tokens = [whole_words.WordContinuation(token) if mark else token
                for token, mark in zip(tokens, word_continues)]
    masked, positions, labels = instances.create_masked_lm_predictions(
        tokens, self.masked_lm_prob, self.max_predictions_per_seq,
        self._vocab_words, rng, do_whole_word_mask=self.do_whole_word_mask)
    output_ids = np.array(input_ids, np.int32)
    output_ids[:num_tokens] = [self._vocab[token] for token in masked]
    size = self.max_predictions_per_seq
    masked_positions = np.zeros(size, np.int32)
    masked_ids = np.zeros(size, np.int32)
    weights = np.zeros(size, np.float32)
    masked_positions[:len(positions)] = positions
    masked_ids[:len(labels)] = [self._vocab[token] for token in labels]
    weights[:len(positions)] = 1.0
    return output_ids, masked_positions, masked_ids, weights

  def mask_features(self, features, index, seed):
    """The `tf.data` form of `mask_ids`: a dict of one sequence's tensors
    (`input_ids`, `input_mask`, maybe `word_continues`, which is dropped)
    with the three `masked_lm_*` features added and `input_ids` masked.

    `index` (int64 scalar tensor): the sequence's place in the stream;
    `seed` (int or None: a fresh one, drawn here): with `index`, the
    sequence's `random.Random`.
    """
    if seed is None:
      seed = random.SystemRandom().getrandbits(63)
    features = dict(features)
    continues = features.pop("word_continues", None)

    def mask(input_ids, input_mask, position, *marks):
      rng = random.Random((seed << 64) + int(position))
      return self.mask_ids(input_ids, int(input_mask.sum()), rng,
                           marks[0] if marks else None)

    inputs = [features["input_ids"], features["input_mask"], index]
    if continues is not None:
      inputs.append(continues)
    outputs = tf.numpy_function(
        mask, inputs, [tf.int32, tf.int32, tf.int32, tf.float32],
        stateful=False)
    shapes = [features["input_ids"].shape] + (
        [[self.max_predictions_per_seq]] * 3)
    for output, shape in zip(outputs, shapes):
      output.set_shape(shape)
    (features["input_ids"], features["masked_lm_positions"],
     features["masked_lm_ids"], features["masked_lm_weights"]) = outputs
    return features
