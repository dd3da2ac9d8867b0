"""MediaWiki pages and plain text to documents (lists of sentences).

Dumps are read with mwxml (redirects and other namespaces skipped);
wikitext is parsed with mwparserfromhell, keeping text passages only
(Devlin et al. 2018, 3.1: no lists, tables or headers; no templates,
references, links or closing sections); sentences are split with
sentencex (rule-based, nothing to download).
"""

import bz2
import re

from bert_tf import io as io_utils
from bert_tf.corpus import beam_support

__all__ = ["is_dump", "read_pages", "wikitext_paragraphs", "split_sentences",
           "page_document", "text_documents"]

# Sections whose content is links and lists, not prose.
_SKIPPED_SECTIONS = (
    r"^\s*(see also|references|external links|further reading|notes|"
    r"notes and references|footnotes|bibliography|sources|citations|"
    r"works cited)\s*$")
# Link prefixes that are not prose: files, categories, and other wikis.
_NON_PROSE_LINK = re.compile(r"(?i)^\s*:?\s*(file|image|media|category|"
                             r"[a-z]{2,3}(-[a-z]+)?|wikt|wiktionary|"
                             r"commons|s|q|n|v|b|voy)\s*:")
_DROPPED_TAGS = ("table", "ref", "references", "gallery", "math", "pre",
                 "source", "syntaxhighlight", "timeline", "imagemap", "score",
                 "div", "center", "blockquote", "code", "chem", "hiero")
_LIST_TAGS = ("li", "dt", "dd")
# Stands for a removed line-level element (heading, list item) until the
# plain text is cut into lines.
_DROP_LINE = "\ue000"
_REDIRECT = re.compile(r"(?i)^\s*#redirect")


def is_dump(path):
  """Whether `path` names a MediaWiki XML dump (`.xml`, `.xml.bz2`)."""
  return bool(re.search(r"\.xml(\.bz2)?$", path, re.IGNORECASE))


def _open_dump(path):
  """A binary reader of the dump's XML (bz2 decompressed on the fly)."""
  raw = io_utils._open_bytes(path)  # pylint: disable=protected-access
  return bz2.BZ2File(raw) if path.lower().endswith(".bz2") else raw


def read_pages(path, namespaces=(0,), on_skip=None):
  """Yields `(page_id, title, wikitext)` of each page of a dump in
  `namespaces`, its last revision, redirects skipped (`on_skip()` called).

  Raises:
    ValueError: when the file is not a MediaWiki XML export.
  """
  mwxml = beam_support.import_module("mwxml", "input_file")
  with _open_dump(path) as reader:
    try:
      dump = mwxml.Dump.from_file(reader)
    except Exception as e:  # pylint: disable=broad-except
      raise ValueError("--input_file: %s is not a MediaWiki XML export (%s)"
                       % (path, " ".join(str(e).split())[:200])) from None
    for page in dump:
      text = None
      for revision in page:
        text = revision.text
      if (page.redirect or page.namespace not in namespaces or not text or
          _REDIRECT.match(text)):
        if on_skip:
          on_skip()
        continue
      yield page.id, page.title, text


def _remove(code, node):
  try:
    code.remove(node)
  except ValueError:  # Inside a node removed before.
    pass


def _replace(code, node, text):
  try:
    code.replace(node, text)
  except ValueError:
    pass


def wikitext_paragraphs(wikitext):
  """The prose paragraphs (lines of plain text) of an article's wikitext."""
  mwparserfromhell = beam_support.import_module("mwparserfromhell",
                                                "input_file")
  code = mwparserfromhell.parse(wikitext)
  for section in code.get_sections(levels=[2], matches=_SKIPPED_SECTIONS,
                                   flags=re.IGNORECASE):
    _remove(code, section)
  for node in code.filter_templates(recursive=False):
    _remove(code, node)
  for node in code.filter_tags():
    tag = str(node.tag).lower()
    if tag in _DROPPED_TAGS:
      _remove(code, node)
    elif tag in _LIST_TAGS:
      _replace(code, node, _DROP_LINE)
  for node in code.filter_wikilinks():
    if _NON_PROSE_LINK.match(str(node.title)):
      _remove(code, node)
  for node in code.filter_headings():
    _replace(code, node, _DROP_LINE)
  plain = code.strip_code(normalize=True, collapse=True)
  paragraphs = []
  for line in plain.split("\n"):
    line = " ".join(line.split())
    if line and _DROP_LINE not in line and not line.startswith(("{|", "|")):
      paragraphs.append(line)
  return paragraphs


def split_sentences(paragraph, language="en"):
  """Sentences of one paragraph (sentencex), stripped, empty ones dropped."""
  sentencex = beam_support.import_module("sentencex", "language")
  return [" ".join(s.split()) for s in sentencex.segment(language, paragraph)
          if s.strip()]


def page_document(wikitext, language="en"):
  """An article's sentences: `wikitext_paragraphs`, then `split_sentences`."""
  sentences = []
  for paragraph in wikitext_paragraphs(wikitext):
    sentences.extend(split_sentences(paragraph, language))
  return sentences


def text_documents(path):
  """Yields the documents of a plain-text file as lists of paragraphs.

  Blank lines separate documents; each other line is a paragraph (to be
  split into sentences). Lines are read as `create_pretraining_data.py`
  reads them (`bert_tf.io.read_lines`).
  """
  document = []
  for _, line in io_utils.read_lines(path):
    line = " ".join(line.split())
    if line:
      document.append(line)
    elif document:
      yield document
      document = []
  if document:
    yield document
