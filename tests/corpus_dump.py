# coding=utf-8
"""Writes a small MediaWiki XML dump (the `pages-articles` export format).

The articles are the documents of `sample_data/pretrain_corpus.txt` (the
project's own text) wrapped in the markup that `prepare_corpus.py` removes:
an infobox template, bold text, links, references, a heading, a table, a
list, a file link, a closing References section and categories. The dump
also holds a redirect, a talk page and a template page, which it skips.

  python tests/corpus_dump.py /tmp/dump.xml.bz2   # .xml or .xml.bz2

Used by tests/test_corpus_prepare.py and the corpus recipe of
docs/pretraining.md.
"""

import bz2
import os
import sys
from xml.sax import saxutils

__all__ = ["sample_documents", "article_wikitext", "write_dump", "main"]

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_HEADER = """<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/" \
version="0.11" xml:lang="en">
  <siteinfo>
    <sitename>Sample</sitename>
    <dbname>samplewiki</dbname>
    <base>https://sample.invalid/wiki/Main_Page</base>
    <generator>MediaWiki 1.42</generator>
    <case>first-letter</case>
    <namespaces>
      <namespace key="0" case="first-letter" />
      <namespace key="1" case="first-letter">Talk</namespace>
      <namespace key="10" case="first-letter">Template</namespace>
      <namespace key="14" case="first-letter">Category</namespace>
    </namespaces>
  </siteinfo>
"""
_PAGE = """  <page>
    <title>%(title)s</title>
    <ns>%(ns)d</ns>
    <id>%(id)d</id>%(redirect)s
    <revision>
      <id>%(rev)d</id>
      <timestamp>2024-01-01T00:00:00Z</timestamp>
      <contributor><username>Sample</username><id>1</id></contributor>
      <model>wikitext</model>
      <format>text/x-wiki</format>
      <text bytes="%(bytes)d" xml:space="preserve">%(text)s</text>
      <sha1>0</sha1>
    </revision>
  </page>
"""


def sample_documents():
  """The documents of sample_data/pretrain_corpus.txt: lists of sentences."""
  path = os.path.join(_REPO, "sample_data", "pretrain_corpus.txt")
  with open(path, encoding="utf-8") as f:
    return [block.split("\n") for block in f.read().strip().split("\n\n")]


def article_wikitext(title, sentences):
  """An article whose prose is `sentences`: two paragraphs (the first word
  in bold, the last word of the first sentence a link, a reference), with a
  heading, a table, a list, a file link and a References section between
  and after them."""
  half = max(1, len(sentences) // 2)
  first = list(sentences[:half])
  words = first[0].split(" ")
  words[0] = "'''%s'''" % words[0]
  if len(words) > 2:
    last = words[-1].rstrip(".!?")
    words[-1] = "[[%s|%s]]%s" % (last.capitalize(), last,
                                 words[-1][len(last):])
  first[0] = " ".join(words)
  first[-1] += "<ref>{{cite book |title=A Sample Book |year=2001}}</ref>"
  return "\n".join([
      "{{Infobox topic\n| name = %s\n| image = Sample.jpg\n}}" % title,
      " ".join(first),
      "",
      "[[File:Sample.jpg|thumb|A picture caption that is not prose.]]",
      "== Details ==",
      " ".join(sentences[half:]) if sentences[half:] else "",
      "",
      "{| class=\"wikitable\"\n! Name !! Value\n|-\n| Table cell || 42\n|}",
      "* A list item that is not prose.",
      "* Another list item.",
      "",
      "== References ==",
      "{{Reflist}}",
      "",
      "== External links ==",
      "* [https://sample.invalid/ An external link]",
      "[[Category:Sample articles]]",
  ])


def _page(title, ns, page_id, text, redirect=None):
  escaped = saxutils.escape(text)
  return _PAGE % {
      "title": saxutils.escape(title), "ns": ns, "id": page_id,
      "rev": 1000 + page_id, "text": escaped,
      "bytes": len(text.encode("utf-8")),
      "redirect": ("\n    <redirect title=%s />" % saxutils.quoteattr(redirect)
                   if redirect else "")}


def write_dump(path, documents=None):
  """Writes the dump to `path` (bz2-compressed when it ends in `.bz2`).

  Args:
    path: str.
    documents: list of lists of sentences (default `sample_documents()`).

  Returns:
    list of (title, sentences) of the articles written, in order.
  """
  documents = sample_documents() if documents is None else documents
  articles = [("Sample article %d" % k, sentences)
              for k, sentences in enumerate(documents)]
  pages = [_HEADER]
  for k, (title, sentences) in enumerate(articles):
    pages.append(_page(title, 0, 10 + k, article_wikitext(title, sentences)))
    if k == 0:
      pages.append(_page("Sample redirect", 0, 5,
                         "#REDIRECT [[%s]]" % title, redirect=title))
      pages.append(_page("Talk:" + title, 1, 6,
                         "Talk page text that is not an article."))
      pages.append(_page("Template:Infobox topic", 10, 7,
                         "Template text that is not an article."))
  pages.append("</mediawiki>\n")
  data = "".join(pages).encode("utf-8")
  opener = bz2.open if path.endswith(".bz2") else open
  with opener(path, "wb") as f:
    f.write(data)
  return articles


def main(argv):
  if len(argv) != 2:
    sys.exit("usage: python tests/corpus_dump.py OUT.xml[.bz2]")
  articles = write_dump(argv[1])
  print("wrote %s: %d articles, a redirect, a talk page, a template page" %
        (argv[1], len(articles)))


if __name__ == "__main__":
  main(sys.argv)
