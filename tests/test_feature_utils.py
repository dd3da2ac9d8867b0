"""Tests for bert_tf/tasks/features.py: packing and padding BERT inputs."""

from bert_tf.tasks import features as feature_utils

def test_pack_tokens_truncates_longer_side_from_the_end():
  tokens, segment_ids = feature_utils.pack_tokens(
      ["a1", "a2", "a3", "a4"], ["b1", "b2"], 7)
  assert tokens == ["[CLS]", "a1", "a2", "[SEP]", "b1", "b2", "[SEP]"]
  assert segment_ids == [0, 0, 0, 0, 1, 1, 1]
  tokens, _ = feature_utils.pack_tokens(["a1", "a2"], ["b1", "b2"], 6)
  assert tokens == ["[CLS]", "a1", "a2", "[SEP]", "b1", "[SEP]"]
  tokens, segment_ids = feature_utils.pack_tokens(["a1", "a2", "a3"], None, 4)
  assert tokens == ["[CLS]", "a1", "a2", "[SEP]"] and segment_ids == [0] * 4


def test_pad_input_builds_mask():
  ids, mask, segs = feature_utils.pad_input([5, 6], [0, 1], 4)
  assert (ids, mask, segs) == ([5, 6, 0, 0], [1, 1, 0, 0], [0, 1, 0, 0])
