"""Tag schemes of entity labels: IOB1, IOB2 (BIO) and IOBES.

IOB1 is CoNLL-2003's original scheme (an entity starts with I-X; B-X only
right after another X entity), IOB2 starts every entity with B-X, IOBES adds
E-X (an entity's last token) and S-X (a one-token entity).
`detect_tag_scheme` tells them apart from the gold tags; `find_invalid_tags`
counts the sentences whose tags break the declared scheme (they are kept:
entities are read with conlleval's chunking, which accepts any sequence).
"""

from absl import logging

__all__ = ["TAG_SCHEMES", "parse_tag", "entity_types", "detect_tag_scheme",
           "find_invalid_tags", "warn_invalid_tags"]

TAG_SCHEMES = ("IOB1", "IOB2", "IOBES")


def parse_tag(tag):
  """Splits a tag such as `B-PER` into its prefix and entity type.

  Args:
    tag: str.

  Returns:
    (prefix, type): ("B", "PER") for B-PER (prefixes B, I, E, S); ("O",
    None) for O; (None, None) for a malformed tag.
  """
  if tag == "O":
    return "O", None
  prefix, sep, entity_type = tag.partition("-")
  if not sep or prefix not in ("B", "I", "E", "S") or not entity_type:
    return None, None
  return prefix, entity_type


def entity_types(label_list):
  """The sorted entity types of a label list (`B-PER`, `I-PER` -> `PER`)."""
  return sorted({t for t in (parse_tag(l)[1] for l in label_list) if t})


def detect_tag_scheme(label_sequences):
  """Tells IOB1, IOB2 and IOBES apart from gold tag sequences.

  IOBES uses E- or S- tags. IOB1 starts an entity with I-X (B-X only right
  after another X entity); IOB2 starts every entity with B-X. The scheme with
  more entity starts in its own style wins; no entity at all gives IOB2.

  Args:
    label_sequences: iterable of lists of str tags.

  Returns:
    "IOB1", "IOB2" or "IOBES".
  """
  i_starts, b_starts = 0, 0
  for tags in label_sequences:
    previous_type = None
    for tag in tags:
      prefix, entity_type = parse_tag(tag)
      if prefix in ("E", "S"):
        return "IOBES"
      if prefix == "I" and entity_type != previous_type:
        i_starts += 1
      elif prefix == "B" and entity_type != previous_type:
        b_starts += 1
      previous_type = entity_type
  return "IOB1" if i_starts > b_starts else "IOB2"


def _tag_is_valid(previous, tag, following, scheme):
  """Whether `tag` may stand between `previous` and `following`."""
  prefix, entity_type = parse_tag(tag)
  if prefix == "O":
    return True
  if prefix is None:
    return False
  prev_prefix, prev_type = parse_tag(previous) if previous else ("O", None)
  continues = prev_type == entity_type and prev_prefix in ("B", "I")
  if scheme == "IOB1":
    # B-X only separates two adjacent X entities.
    return prefix == "I" or (prefix == "B" and prev_type == entity_type)
  if scheme == "IOB2":
    return prefix == "B" or (prefix == "I" and continues)
  next_prefix, next_type = (parse_tag(following) if following
                            else ("O", None))
  goes_on = next_type == entity_type and next_prefix in ("I", "E")
  if prefix == "S":
    return True
  if prefix == "B":
    return goes_on
  if prefix == "I":
    return continues and goes_on
  return continues  # E-X.


def find_invalid_tags(sentences, scheme):
  """Counts the sentences whose tag sequence breaks `scheme`.

  Such sequences are kept as they are (they are only counted): entities are
  always read with conlleval's chunking, which accepts any sequence.

  Args:
    sentences: list of `reader.Sentence` with labels.
    scheme: one of `TAG_SCHEMES`.

  Returns:
    (count, first): the number of such sentences, and for the first one a
    `(line, tag, previous tag)` tuple, or None.
  """
  count, first = 0, None
  for sentence in sentences:
    tags = sentence.labels
    if tags is None:
      return 0, None
    for i, tag in enumerate(tags):
      previous = tags[i - 1] if i else None
      following = tags[i + 1] if i + 1 < len(tags) else None
      if not _tag_is_valid(previous, tag, following, scheme):
        count += 1
        if first is None:
          first = (sentence.lines[i], tag, previous or "the sentence start")
        break
  return count, first


def warn_invalid_tags(sentences, scheme, path):
  """Logs one warning when some of `sentences` break `scheme`.

  Returns:
    The number of such sentences.
  """
  count, first = find_invalid_tags(sentences, scheme)
  if count:
    logging.warning(
        "%s: %d of %d sentences have a tag sequence that is invalid in %s "
        "(first: line %d, %r after %r); they are kept as they are", path,
        count, len(sentences), scheme, first[0], first[1], first[2])
  return count
