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
  """Shortens a pair in place to at most `max_length` tokens, removing from
  the END of the longer list (`tokens_b` on ties), as the reference."""
  while len(tokens_a) + len(tokens_b) > max_length:
    if len(tokens_a) > len(tokens_b):
      tokens_a.pop()
    else:
      tokens_b.pop()


def pack_tokens(tokens_a, tokens_b, max_seq_length):
  """(tokens, segment_ids) of one text or a pair framed with `[CLS]` and
  `[SEP]`, unpadded: a pair truncated longest-first to `max_seq_length -
  3`, one text cut to `- 2`; segment 0 for `[CLS] a [SEP]`, 1 for `b
  [SEP]`. The inputs are not modified.

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
  """(input_ids, input_mask, segment_ids): new lists of `max_seq_length`
  ints, padded with 0; the mask 1 for real tokens."""
  return (io_utils.pad_to(input_ids, max_seq_length),
          io_utils.pad_to([1] * len(input_ids), max_seq_length),
          io_utils.pad_to(segment_ids, max_seq_length))
