# coding=utf-8
"""Tests of prepare_corpus.py: MediaWiki dumps and text to sentence shards.

The dump is built here (tests/corpus_dump.py: the export format, with a
redirect, a talk page and a template page). Markup removal on one
article-shaped page, exactly; skipped pages; the pipeline's shards (every
article's sentences, deterministic, atomic); one-line errors. Skips when
the `beam` extra is not installed (fails under CI).
"""

import os

import pytest

import corpus_dump
from helpers import import_or_skip
from helpers import run_script
from bert_tf.corpus import prepare
from bert_tf.corpus import wiki

_HINT = "pip install .[beam] (or ./setup.sh --beam)"
_IN_PROCESS = "--runner=DirectRunner,--direct_running_mode=in_memory"

_PAGE = """{{Infobox person|name=Ada|birth_date={{birth date|1815|12|10}}}}
'''Ada Lovelace''' (10 December 1815 – 27 November 1852) was an English \
[[mathematician]] and [[writer|author]].<ref>{{cite book|title=X}}</ref> She \
is known for work on [[Charles Babbage]]'s [[Analytical Engine]].\
<ref name="a"/>

[[File:Ada Lovelace portrait.jpg|thumb|upright|Portrait of [[Ada]], 1840.]]
== Early life ==
Ada was born in London. Her father was Lord Byron, the poet.<!-- a comment \
--> See [http://example.com the site].

{| class="wikitable"
! Year !! Event
|-
| 1815 || Born
|}
* A list item.
;Term
:Definition here.

== References ==
{{reflist}}
== External links ==
* [http://x.org Official]
[[Category:1815 births]]
[[fr:Ada Lovelace]]
"""


def _libraries():
  for name in ("mwxml", "mwparserfromhell", "sentencex"):
    import_or_skip(name, _HINT)


def test_article_markup_is_removed_and_prose_split_into_sentences():
  _libraries()
  assert wiki.page_document(_PAGE) == [
      "Ada Lovelace (10 December 1815 – 27 November 1852) was an English "
      "mathematician and author.",
      "She is known for work on Charles Babbage's Analytical Engine.",
      "Ada was born in London.",
      "Her father was Lord Byron, the poet.",
      "See the site.",
  ]


def test_dump_skips_redirects_and_other_namespaces(tmp_path):
  _libraries()
  path = str(tmp_path / "dump.xml.bz2")
  articles = corpus_dump.write_dump(path, [["One a.", "One b."],
                                           ["Two a."]])
  skipped = []
  pages = list(wiki.read_pages(path, on_skip=lambda: skipped.append(1)))
  assert [title for _, title, _ in pages] == [t for t, _ in articles]
  assert len(skipped) == 3  # The redirect, the talk and the template page.
  assert all("not an article" not in text for _, _, text in pages)


def test_not_a_dump_is_one_error(tmp_path):
  _libraries()
  path = tmp_path / "notes.xml"
  path.write_text("<notes><note>hi</note></notes>\n", encoding="utf-8")
  with pytest.raises(ValueError, match="notes.xml is not a MediaWiki XML "
                     "export"):
    list(wiki.read_pages(str(path)))


def _shard_documents(paths):
  documents = []
  for path in paths:
    with open(path, encoding="utf-8") as f:
      text = f.read()
    assert not text or text.endswith("\n\n")
    documents += [block.split("\n") for block in text.split("\n\n")
                  if block.strip()]
  return documents


def test_pipeline_writes_every_article_and_text_document_once(tmp_path):
  import_or_skip("apache_beam", _HINT)
  _libraries()
  dump = str(tmp_path / "dump.xml.bz2")
  articles = corpus_dump.write_dump(dump)
  text = tmp_path / "books.txt"
  text.write_text("A book starts here. It goes on.\nA new paragraph.\n\n\n"
                  "Another book.\n", encoding="utf-8")
  out_dir = tmp_path / "out"
  counts = prepare.run([dump, str(text)], [str(out_dir / "c.txt")], 3,
                       _IN_PROCESS)
  names = sorted(os.listdir(out_dir))
  assert names == ["c.txt-%05d-of-00003" % k for k in range(3)]
  documents = _shard_documents([str(out_dir / n) for n in names])
  expected = [sentences for _, sentences in articles] + [
      ["A book starts here.", "It goes on.", "A new paragraph."],
      ["Another book."]]
  assert sorted(documents) == sorted(expected)
  assert counts["documents"] == len(expected)
  assert counts["pages"] == len(articles) and counts["skipped"] == 3
  first = [(out_dir / n).read_bytes() for n in names]
  prepare.run([dump, str(text)], [str(out_dir / "c.txt")], 3, _IN_PROCESS)
  assert [(out_dir / n).read_bytes() for n in names] == first
  assert sorted(os.listdir(out_dir)) == names  # No temporary left.


def test_pipeline_error_in_a_worker_is_one_line_and_leaves_nothing(tmp_path):
  import_or_skip("apache_beam", _HINT)
  _libraries()
  bad = tmp_path / "bad.xml"
  bad.write_text("<notes/>\n", encoding="utf-8")
  with pytest.raises(ValueError, match=r"^--input_file: .*bad.xml is not a "
                     "MediaWiki XML export"):
    prepare.run([str(bad)], [str(tmp_path / "out" / "c.txt")], 2,
                _IN_PROCESS)
  assert not os.listdir(tmp_path / "out")


def test_one_shard_takes_one_path(tmp_path):
  import_or_skip("apache_beam", _HINT)
  with pytest.raises(ValueError, match="with --num_shards=1 give one"):
    prepare.run(["x"], ["a", "b"], 1, _IN_PROCESS)


@pytest.mark.e2e
@pytest.mark.slow
def test_cli_dump_to_shards(tmp_path):
  import_or_skip("apache_beam", _HINT)
  _libraries()
  dump = str(tmp_path / "dump.xml")
  articles = corpus_dump.write_dump(dump)
  proc = run_script("prepare_corpus.py", [
      "--input_file=" + dump, "--output_file=" + str(tmp_path / "c.txt"),
      "--num_shards=2"])
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "Done: %d documents" % len(articles) in proc.stderr
  # Neither the two workers' start-up lines nor the launcher's copies of
  # them (49 stderr lines before, each warning twice): Beam's import notes
  # in each worker, its first INFO line, and the script's own lines.
  lines = proc.stderr.strip().splitlines()
  assert not [line for line in lines if "Worker: severity" in line or
              "sdk_worker" in line or "harness" in line], lines
  assert len(lines) <= 8, lines
  documents = _shard_documents(
      [str(tmp_path / ("c.txt-%05d-of-00002" % k)) for k in range(2)])
  assert sorted(documents) == sorted(s for _, s in articles)
  bad = run_script("prepare_corpus.py", ["--input_file=" + dump,
                                         "--output_file=" + str(tmp_path),
                                         "--num_shards=0"])
  assert bad.returncode == 1
  assert bad.stderr.strip().splitlines()[-1] == (
      "error: --num_shards is 0; expected at least 1")
