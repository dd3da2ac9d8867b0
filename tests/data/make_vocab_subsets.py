# coding=utf-8
"""Writes the conformance kit's vocabularies as subsets of the released ones.

The conformance vectors were computed with the released BERT-Base uncased,
cased and Chinese vocabularies. Those files are real data of the team's shared
folder (`$BERT_SHARED_DIR/data/vocab`), which the repo must not hold a copy
of. What the tests need of them is smaller: the id of every token that
WordPiece can reach on the tests' texts, and the vocab's length (ids are line
numbers; pre-training data draws random tokens by index over the whole vocab).

So each vocab here keeps the released file's lines that the tests can reach
and replaces every other line by a placeholder `[~N]` (N = the 0-based line
number). A placeholder is unique and can never match: the basic tokenizer
splits `[`, `~` and `]` off any word. A line is kept when its token is

* a special token (`[PAD]`, `[unusedN]`, `[UNK]`, `<S>`, ...), a token that is
  a single ASCII character (with or without `##`), or a line that `strip()`
  changes (e.g. U+2028, which loads as the empty token);
* a whole string of the test data (expected token lists);
* or any piece (`w[:j]`, or `##` + `w[i:j]`) of a word that the basic
  tokenizer makes of a string of the test data, lower-cased and cased.

The strings are every JSON string (keys too) and every line of the data files
under tests/data, and every string constant of the tests (tests/*.py) but
docstrings. Kept lines are byte-identical to the released file, so tokens and
ids are those of the release on every text the tests tokenize (the
conformance and case tests compare them with the release's output);
`tests/test_helpers.py` checks each line against `$BERT_SHARED_DIR` when it is
there.

Run from the repo root after changing test data or texts:

  python tests/data/make_vocab_subsets.py [--shared_dir=../shared]
"""

import argparse
import ast
import glob
import json
import os
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
for _path in (REPO_ROOT, os.path.join(REPO_ROOT, "tests")):
  if _path not in sys.path:
    sys.path.insert(0, _path)

# pylint: disable=g-import-not-at-top,wrong-import-position
import helpers
import tokenization
# pylint: enable=g-import-not-at-top,wrong-import-position

__all__ = ["VOCAB_SUBSETS", "PLACEHOLDER", "tested_strings", "reachable_tokens",
           "subset_lines", "main"]


# Released vocab (under $BERT_SHARED_DIR/data/vocab) -> the subsets written
# from it (under tests/data).
VOCAB_SUBSETS = {
    "uncased_L-12_H-768_A-12": [
        "conformance/tokenization/vocab.txt",
        "conformance/classifier/CoLA/vocab.txt",
        "conformance/classifier/MNLI/vocab.txt",
        "conformance/classifier/MRPC/vocab.txt",
        "conformance/squad/vocab.txt",
        "conformance/pretraining_data/vocab.txt",
    ],
    "cased_L-12_H-768_A-12": ["conformance/tokenization/vocab_cased.txt"],
    "chinese_L-12_H-768_A-12": [
        "conformance/tokenization/vocab_chinese.txt",
        "conformance/classifier/XNLI/vocab.txt",
        "conformance/pretraining_data/vocab_chinese.txt",
    ],
}

PLACEHOLDER = "[~%d]"

# The files under tests/data whose text the tests may tokenize (the others
# are binary, code or documentation).
_TEXT_SUFFIXES = (".json", ".jsonl", ".txt", ".tsv")


def _json_strings(value, out):
  """Adds every str in the JSON value `value` (dict keys too) to `out`."""
  if isinstance(value, str):
    out.add(value)
  elif isinstance(value, dict):
    for key, item in value.items():
      out.add(key)
      _json_strings(item, out)
  elif isinstance(value, list):
    for item in value:
      _json_strings(item, out)


def tested_strings(shared_dir, skip=()):
  """Every string the tests may tokenize (a set of str).

  Args:
    shared_dir: str, the shared folder, for the inputs of
      `helpers.READ_FROM_SHARED`.
    skip: iterable of absolute paths not to read (the vocab subsets).

  Returns:
    The JSON strings and text lines of the data files of tests/data (but
    `skip`) and of the inputs the tests read from the shared folder instead,
    and the str constants of tests/*.py that are not docstrings.
  """
  skip = set(skip)
  strings = set()
  inputs = glob.glob(os.path.join(helpers.DATA_DIR, "**", "*"), recursive=True)
  inputs += [os.path.join(shared_dir, *parts)
             for parts in helpers.READ_FROM_SHARED.values()]
  for path in sorted(inputs):
    if (os.path.isdir(path) or path in skip or
        not path.endswith(_TEXT_SUFFIXES)):
      continue
    with open(path, encoding="utf-8") as f:
      text = f.read()
    if path.endswith(".json"):
      _json_strings(json.loads(text), strings)
    elif path.endswith(".jsonl"):
      for line in text.splitlines():
        _json_strings(json.loads(line), strings)
    else:
      strings.update(text.split("\n"))
  for path in sorted(glob.glob(os.path.join(REPO_ROOT, "tests", "*.py"))):
    with open(path, encoding="utf-8") as f:
      tree = ast.parse(f.read(), path)
    docstrings = {id(node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Expr)}
    strings.update(node.value for node in ast.walk(tree)
                   if isinstance(node, ast.Constant) and
                   isinstance(node.value, str) and id(node) not in docstrings)
  return strings


def reachable_tokens(vocab, strings):
  """The tokens of `vocab` that WordPiece can reach on `strings` (a set).

  Args:
    vocab: set of str, the released vocab's tokens.
    strings: iterable of str.

  Returns:
    The strings that are tokens themselves, plus every vocab token that is a
    piece of a basic-tokenized word (lower-cased or not) of 200 characters or
    fewer (longer words become `[UNK]` without a look-up).
  """
  longest = max(len(token) for token in vocab)
  basic = {lower: tokenization.BasicTokenizer(do_lower_case=lower)
           for lower in (True, False)}
  words = set()
  found = set()
  for text in strings:
    if text in vocab:
      found.add(text)
    for lower in (True, False):
      words.update(basic[lower].tokenize(text))
  for word in words:
    if len(word) > 200:
      continue
    for start in range(len(word)):
      prefix = "##" if start else ""
      for end in range(start + 1, min(len(word), start + longest) + 1):
        piece = prefix + word[start:end]
        if piece in vocab:
          found.add(piece)
  return found


def _always_kept(line, token):
  """True for special, single-ASCII-character and odd-whitespace lines."""
  bare = token[2:] if token.startswith("##") else token
  return (line != token or not token or
          (token[0], token[-1]) in (("[", "]"), ("<", ">")) or
          (len(bare) == 1 and ord(bare) < 128))


def subset_lines(released_lines, keep):
  """The subset's lines: released lines whose token is kept, else `[~N]`.

  Args:
    released_lines: list of str, the released vocab's lines without `\\n`.
    keep: set of str, tokens to keep.

  Returns:
    list of str, as many lines as `released_lines`.

  Raises:
    ValueError: a placeholder would equal a released token.
  """
  tokens = {line.strip() for line in released_lines}
  lines = []
  for number, line in enumerate(released_lines):
    token = line.strip()
    if token in keep or _always_kept(line, token):
      lines.append(line)
    else:
      placeholder = PLACEHOLDER % number
      if placeholder in tokens:
        raise ValueError("placeholder %s is a released token" % placeholder)
      lines.append(placeholder)
  return lines


def _read_lines(path):
  """The `\\n`-separated lines of UTF-8 file `path` (no final empty one)."""
  with open(path, "rb") as f:
    data = f.read().decode("utf-8")
  if not data.endswith("\n"):
    raise ValueError("%s does not end with a newline" % path)
  return data[:-1].split("\n")


def main(argv=None):
  """Writes every subset of VOCAB_SUBSETS; prints what each keeps."""
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--shared_dir", default=os.environ.get(
      "BERT_SHARED_DIR", os.path.join(REPO_ROOT, "..", "shared")))
  args = parser.parse_args(argv)
  outputs = [os.path.join(helpers.DATA_DIR, p)
             for ps in VOCAB_SUBSETS.values() for p in ps]
  strings = tested_strings(args.shared_dir, skip=outputs)
  for name, subsets in sorted(VOCAB_SUBSETS.items()):
    released = _read_lines(os.path.join(args.shared_dir, "data", "vocab",
                                        name, "vocab.txt"))
    keep = reachable_tokens({line.strip() for line in released}, strings)
    lines = subset_lines(released, keep)
    kept = sum(a == b for a, b in zip(lines, released))
    for path in subsets:
      with open(os.path.join(helpers.DATA_DIR, path), "wb") as f:
        f.write(("\n".join(lines) + "\n").encode("utf-8"))
    print("%s: kept %d of %d lines -> %s" % (name, kept, len(released),
                                              ", ".join(subsets)))


if __name__ == "__main__":
  main()
