"""Packing one or two token sequences into BERT's fixed-length input.

Shared by sentence(-pair) classification and feature extraction, which build
their inputs the same way in the reference release:
`[CLS] a [SEP]` with segment 0, then `b [SEP]` with segment 1, padded with 0.
"""

from bert_tf import io as io_utils

__all__ = [
    "truncate_seq_pair", "pack_tokens", "pad_input",
]


def truncate_seq_pair(tokens_a, tokens_b, max_length):
  """Shortens a pair in place until it holds at most `max_length` tokens.

  One token at a time is removed from the END of the longer list (from
  `tokens_b` when both are equal), as the reference does: this keeps the most
  of the shorter text, which usually carries more information per token.

  Args:
    tokens_a: list of str, modified in place.
    tokens_b: list of str, modified in place.
    max_length: int, the budget for both lists together.
  """
  while len(tokens_a) + len(tokens_b) > max_length:
    if len(tokens_a) > len(tokens_b):
      tokens_a.pop()
    else:
      tokens_b.pop()


def pack_tokens(tokens_a, tokens_b, max_seq_length):
  """Truncates and frames one text or a pair with `[CLS]` and `[SEP]`.

  A pair is truncated longest-first to `max_seq_length - 3` tokens; a single
  text is cut to `max_seq_length - 2`. The inputs are not modified.

  Args:
    tokens_a: list of str, the first text's WordPiece tokens.
    tokens_b: list of str or None, the second text's tokens.
    max_seq_length: int, the model's input length.

  Returns:
    (tokens, segment_ids): the framed, unpadded tokens and their segment ids
    (0 for `[CLS] a [SEP]`, 1 for `b [SEP]`).

  Raises:
    ValueError: when `max_seq_length` cannot hold the special tokens.
  """
  tokens_a = list(tokens_a)
  if tokens_b is not None:
    if max_seq_length < 3:
      raise ValueError("max_seq_length=%d cannot hold a pair: it needs at "
                       "least 3 positions for [CLS] and two [SEP]" %
                       max_seq_length)
    tokens_b = list(tokens_b)
    truncate_seq_pair(tokens_a, tokens_b, max_seq_length - 3)
  else:
    if max_seq_length < 2:
      raise ValueError("max_seq_length=%d cannot hold [CLS] and [SEP]" %
                       max_seq_length)
    tokens_a = tokens_a[:max_seq_length - 2]
  tokens = ["[CLS]"] + tokens_a + ["[SEP]"]
  segment_ids = [0] * len(tokens)
  if tokens_b is not None:
    tokens += tokens_b + ["[SEP]"]
    segment_ids += [1] * (len(tokens_b) + 1)
  return tokens, segment_ids


def pad_input(input_ids, segment_ids, max_seq_length):
  """Pads ids with 0 and builds the attention mask.

  Args:
    input_ids: list of int, at most `max_seq_length` long.
    segment_ids: list of int, same length.
    max_seq_length: int.

  Returns:
    (input_ids, input_mask, segment_ids), each a new list of
    `max_seq_length` ints; `input_mask` is 1 for real tokens, 0 for padding.
  """
  return (io_utils.pad_to(input_ids, max_seq_length),
          io_utils.pad_to([1] * len(input_ids), max_seq_length),
          io_utils.pad_to(segment_ids, max_seq_length))
