"""The README and docs/ speak to users about the project: no numbers of this
project's issue tracker and no words about how the work was done (sessions
of work, helpers, rounds, other jobs on the machine).

What is allowed, because it means something else:
- a citation of another project's issue or pull request, written
  `owner/repo #N` (or GitHub's `owner/repo#N`);
- `#` followed by digits inside a URL (a fragment), an HTML character
  reference (`&#8212;`), an inline code span or a fenced code block (a shell
  comment, a TSV header such as `#1 ID`);
- TensorFlow's sessions: "session runner", `tf.Session`, `MonitoredSession`,
  "each session run", "session config", ... (only "this session",
  "previous session" and the like are flagged);
- `tests/helpers.py` and "a checking helper" (only helper sessions, agents
  or engineers are flagged); benchmark "rounds" (only "this round", "last
  round", "previous round", ... are flagged).

No TensorFlow: this file reads Markdown only.
"""

import glob
import os
import re

import pytest

__all__ = []

# The repo root, found from this file (not from helpers, which imports
# TensorFlow).
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A citation of another project's tracker: `owner/repo #N`, `owner/repo#N`.
_CITATION = re.compile(r"\b[\w.-]+/[\w.-]+ ?#\d+")
_URL = re.compile(r"https?://[^\s)>\]]+")
_LINK_TARGET = re.compile(r"\]\([^)]*\)")
_CHAR_REFERENCE = re.compile(r"&#\d+;")
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_FENCE = re.compile(r"^(```|~~~)")

# (pattern, what it is): matched on the text outside code, URLs and
# citations, case-insensitively except "CEO".
_PHRASES = (
    (r"(?<![\w&])#\d+", "an issue number of this project's tracker"),
    (r"\bissues? #", "an issue number of this project's tracker"),
    (r"\b(this|that|previous|last|earlier|prior|later|next|another|other)"
     r"\s+(work\s+)?sessions?\b", "a session of work"),
    (r"\bhelpers?\s+(sessions?|agents?|engineers?)\b", "a helper of the work"),
    (r"\b(this|last|previous|earlier|next|later)\s+round\b",
     "a round of work"),
    (r"\brounds?\s+of\s+(work|review)\b", "a round of work"),
    (r"\bCEO\b", "a person of the work"),
    (r"\bagents?\b", "an agent of the work"),
    (r"\bother\s+(jobs?|agents?|engineers?|helpers?)\b",
     "other jobs on the machine"),
    (r"\b(the|a|this|previous|last|earlier)\s+review\b", "a review of the work"),
    (r"\bCI run loaded\b", "other jobs on the machine"),
)
_COMPILED = tuple(
    (re.compile(pattern, 0 if pattern == r"\bCEO\b" else re.I), what)
    for pattern, what in _PHRASES)


def _pages():
  return [os.path.join(REPO_ROOT, "README.md")] + sorted(
      glob.glob(os.path.join(REPO_ROOT, "docs", "*.md")))


def _prose_lines(text):
  """(line number, text) of each line outside fenced blocks, with inline
  code, URLs, link targets, character references and citations removed."""
  in_fence = False
  for number, line in enumerate(text.split("\n"), 1):
    if _FENCE.match(line.lstrip()):
      in_fence = not in_fence
      continue
    if in_fence:
      continue
    for pattern in (_INLINE_CODE, _LINK_TARGET, _URL, _CHAR_REFERENCE,
                    _CITATION):
      line = pattern.sub(" ", line)
    yield number, line


def problems(text, name):
  """`name:line: what: "matched text"` for each flagged phrase of `text`."""
  found = []
  for number, line in _prose_lines(text):
    for pattern, what in _COMPILED:
      for match in pattern.finditer(line):
        found.append('%s:%d: %s: "%s"' % (name, number, what, match.group(0)))
  return found


def test_readme_and_docs_speak_about_the_project():
  found = []
  for page in _pages():
    with open(page, encoding="utf-8") as f:
      found += problems(f.read(), os.path.relpath(page, REPO_ROOT))
  assert not found, "\n".join(found)


@pytest.mark.parametrize("line", [
    "runner (`bert_tf/runner/`); since #31 the training sequence around it",
    "tests on it (load average 5 to 12 on 2 cores), on the tree before #33's",
    "**What keeps fp32 training below 80% of the probe (issue #32, item 3).**",
    "(23 GiB), `CI=true`, on 3 December 2026 while four other agents ran",
    "- **AdamW as one fused `ResourceApplyAdam`** (previous session): the",
    "this session's runs of the three benchmarks it was 1.64-1.85x",
    "2026-12-03 with other jobs loading the machine (load average 6 to 18)",
    "Measured in the last round, as in earlier sessions.",
    "A helper session measured it; the CEO asked for it.",
])
def test_work_notes_are_flagged(line):
  assert problems(line, "page.md"), line


@pytest.mark.parametrize("line", [
    "through this project's own session runner (`--runner=session`)",
    "a plain `tf.Session` and a loaded SavedModel take two; each session run",
    "restores the conformance checkpoint through a `MonitoredSession` and",
    "under the same session config; `Session.close` waited; session-scoped",
    "as reported in google-research/bert #38 and microsoft/onnxruntime#6089",
    "see [the table](https://example.org/page.html#4) and `#1 ID\t#2 ID`",
    "CPU seconds are medians of 3 rounds; a value rounded to 6 decimals",
    "Shared helpers are in `tests/helpers.py`; one checking helper serves",
    "an em dash &#8212; in HTML",
    "(the lead is within seed-to-seed spread)",
])
def test_legitimate_uses_pass(line):
  assert not problems(line, "page.md"), line


def test_fenced_code_is_not_prose():
  text = "```bash\n# 1. set up\necho '#1 ID' # this session\n```\nprose\n"
  assert not problems(text, "page.md")
  assert problems("```\ncode\n```\nsince #31\n", "page.md") == [
      'page.md:4: an issue number of this project\'s tracker: "#31"']

