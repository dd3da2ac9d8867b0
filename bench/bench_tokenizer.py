"""Tokenizer throughput: FullTokenizer vs Hugging Face (Python) vs tokenizers (Rust).

Tokenizes the same real text, line by line, with the same vocab through
  * `tokenization.FullTokenizer` (this repo, pure Python),
  * `transformers.BertTokenizer` (4.57.*, the pure-Python one; same algorithm as
    the reference release), and
  * `tokenizers.BertWordPieceTokenizer` (Rust), per line and with
    `encode_batch` (multi-threaded),
in interleaved passes (the order rotates each repetition; every pass builds a
fresh tokenizer, untimed, so caches start cold). Prints a markdown table of
tokens/s (median and min-max over repetitions; each tokenizer's own token
count) and the ratio of medians against Hugging Face's Python tokenizer, then
how many lines each other tokenizer tokenizes differently from FullTokenizer,
and how many conformance rows (`conformance/tokenization/cases.jsonl`, golden
output of the original release) each one reproduces.

Run from the repo root (about a minute with the defaults):
  python bench/bench_tokenizer.py
  python bench/bench_tokenizer.py --corpus=zh --size_mb=1 --repetitions=3
Text and vocab come from $BERT_SHARED_DIR/data (default ../shared): `en` is
GLUE (MRPC, RTE, CoLA, SST-2) sentences, XQuAD/SQuAD v2 contexts and the BERT
sample text with the BERT-Base uncased vocab; `zh` is CMRC 2018 Wikipedia and
XNLI-zh text with the BERT-Base Chinese vocab.
"""

import json
import os
import statistics
import sys
import time

from absl import flags

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _REPO not in sys.path:
  sys.path.insert(0, _REPO)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # runner loads TF.

from bert_tf.cli import entry  # pylint: disable=g-import-not-at-top,wrong-import-position
import tokenization  # pylint: disable=g-import-not-at-top,wrong-import-position

FLAGS = flags.FLAGS

_HF_PY = "transformers.BertTokenizer (Python)"
_OURS = "tokenization.FullTokenizer"
_RUST = "tokenizers.BertWordPieceTokenizer (Rust), per line"
_RUST_BATCH = "tokenizers.BertWordPieceTokenizer (Rust), encode_batch"


def define_flags():
  flags.DEFINE_enum("corpus", "en", ["en", "zh"], "Which real text to use.")
  flags.DEFINE_float("size_mb", 2.0, "Megabytes (UTF-8) of text per pass.")
  flags.DEFINE_integer("repetitions", 5, "Timed passes per tokenizer.")
  flags.DEFINE_string("shared_dir", None,
                      "Shared data folder (default $BERT_SHARED_DIR or "
                      "../shared beside the repo).")
  flags.DEFINE_string("vocab_file", None,
                      "Vocab to use (default: the corpus's real BERT vocab).")
  flags.DEFINE_bool("do_lower_case", True, "Lowercase and strip accents.")


# ---------------------------------------------------------------------------
# Corpus


def _read_text(path):
  with open(path, encoding="utf-8") as f:
    return f.read().replace("\r", "")


def _tsv_column(path, column, skip_header=True):
  rows = _read_text(path).split("\n")[1 if skip_header else 0:]
  return [r.split("\t")[column] for r in rows if len(r.split("\t")) > column]


def _squad_contexts(path):
  with open(path, encoding="utf-8") as f:
    data = json.load(f)["data"]
  return [p["context"] for article in data for p in article["paragraphs"]]


def _corpus_sources(data_dir, corpus):
  """Lists of lines per source, real text only."""
  join = lambda *p: os.path.join(data_dir, *p)
  if corpus == "zh":
    return [
        _read_text(join("pretrain", "zh_cmrc2018_dev_wiki.txt")).split("\n"),
        _tsv_column(join("xnli", "ernie_zh", "test.tsv"), 0),
        _tsv_column(join("xnli", "ernie_zh", "test.tsv"), 1),
    ]
  glue = lambda *p: join("glue", *p)
  return [
      _tsv_column(glue("MRPC", "train.tsv"), 3),
      _tsv_column(glue("MRPC", "train.tsv"), 4),
      _tsv_column(glue("RTE", "train.tsv"), 1),
      _tsv_column(glue("RTE", "train.tsv"), 2),
      _tsv_column(glue("CoLA", "train.tsv"), 3, skip_header=False),
      _tsv_column(glue("SST-2", "train.tsv"), 0),
      _squad_contexts(join("squad", "xquad_en_dev_v1.1", "xquad.en.json")),
      _squad_contexts(join("squad", "haystack_dev_v2.0_small", "small.json")),
      _read_text(join("pretrain", "sample_text.txt")).split("\n"),
  ]


def build_corpus(data_dir, corpus, size_mb):
  """Round-robin lines from every source until `size_mb` MB of UTF-8 text."""
  sources = [[l for l in s if l.strip()] for s in _corpus_sources(data_dir,
                                                                   corpus)]
  budget = int(size_mb * 1e6)
  lines, size, i = [], 0, 0
  while size < budget and any(i < len(s) for s in sources):
    for source in sources:
      if i < len(source) and size < budget:
        lines.append(source[i])
        size += len(source[i].encode("utf-8")) + 1
    i += 1
  return lines, size


# ---------------------------------------------------------------------------
# Tokenizers: name -> (build(), run(tokenizer, lines) -> list of token lists)


def _tokenizer_specs(vocab_file, do_lower_case):
  """Builders and runners for each tokenizer under test."""
  from tokenizers import BertWordPieceTokenizer  # pylint: disable=g-import-not-at-top
  from transformers import BertTokenizer  # pylint: disable=g-import-not-at-top

  def rust():
    return BertWordPieceTokenizer(vocab_file, lowercase=do_lower_case)

  def per_line(tok, lines):
    return [tok.tokenize(line) for line in lines]

  return {
      _OURS: (lambda: tokenization.FullTokenizer(vocab_file, do_lower_case),
              per_line),
      _HF_PY: (lambda: BertTokenizer(vocab_file, do_lower_case=do_lower_case),
               per_line),
      _RUST: (rust, lambda tok, lines: [
          tok.encode(l, add_special_tokens=False).tokens for l in lines]),
      _RUST_BATCH: (rust, lambda tok, lines: [
          e.tokens for e in tok.encode_batch(lines, add_special_tokens=False)]),
  }


def time_interleaved(specs, lines, repetitions):
  """Per tokenizer: list of (seconds, n_tokens), passes interleaved."""
  names = list(specs)
  timings = {name: [] for name in names}
  for rep in range(repetitions):
    order = names[rep % len(names):] + names[:rep % len(names)]
    for name in order:
      build, run = specs[name]
      tokenizer = build()
      start = time.perf_counter()
      output = run(tokenizer, lines)
      seconds = time.perf_counter() - start
      timings[name].append((seconds, sum(len(t) for t in output)))
    print("repetition %d/%d done" % (rep + 1, repetitions), file=sys.stderr)
  return timings


def count_differences(specs, lines):
  """Per other tokenizer: (differing lines, first example) vs FullTokenizer."""
  outputs = {name: run(build(), lines) for name, (build, run) in specs.items()}
  ours = outputs[_OURS]
  result = {}
  for name, output in outputs.items():
    diffs = [i for i, (a, b) in enumerate(zip(ours, output)) if a != b]
    example = None
    if diffs:
      i = diffs[0]
      example = (lines[i][:80], ours[i][:12], output[i][:12])
    result[name] = (len(diffs), example)
  return result


def conformance_matches(specs, cases_file, do_lower_case):
  """Per tokenizer: (rows matching the original's tokens, rows checked, first
  differing row's (text, original, this tokenizer) or None)."""
  with open(cases_file, encoding="utf-8") as f:
    rows = [json.loads(l) for l in f]
  rows = [r for r in rows if r["do_lower_case"] == do_lower_case]
  texts = [r["text"] for r in rows]
  result = {}
  for name, (build, run) in specs.items():
    output = run(build(), texts)
    diffs = [(r["text"][:60], r["tokens"][:10], o[:10])
             for o, r in zip(output, rows) if o != r["tokens"]]
    result[name] = (len(rows) - len(diffs), len(rows),
                    diffs[0] if diffs else None)
  return result


# ---------------------------------------------------------------------------
# Report


def _table(timings):
  lines = ["| tokenizer | tokens/s (median) | min - max | s/pass (median) "
           "| vs HF Python |", "|---|---:|---:|---:|---:|"]
  rates = {name: [n / s for s, n in runs] for name, runs in timings.items()}
  hf_median = statistics.median(rates[_HF_PY])
  for name, runs in timings.items():
    r = rates[name]
    lines.append("| %s | %s | %s - %s | %.3f | %.2fx |" % (
        name, _fmt(statistics.median(r)), _fmt(min(r)), _fmt(max(r)),
        statistics.median([s for s, _ in runs]),
        statistics.median(r) / hf_median))
  return "\n".join(lines)


def _fmt(rate):
  return "{:,.0f}".format(rate)


def main(argv):
  del argv
  data_dir = os.path.join(FLAGS.shared_dir or os.environ.get(
      "BERT_SHARED_DIR", os.path.join(_REPO, "..", "shared")), "data")
  if not os.path.isdir(data_dir):
    raise FileNotFoundError("--shared_dir: %s not found (set BERT_SHARED_DIR)"
                            % data_dir)
  model = ("chinese_L-12_H-768_A-12" if FLAGS.corpus == "zh"
           else "uncased_L-12_H-768_A-12")
  vocab_file = FLAGS.vocab_file or os.path.join(data_dir, "vocab", model,
                                                "vocab.txt")
  lines, size = build_corpus(data_dir, FLAGS.corpus, FLAGS.size_mb)
  specs = _tokenizer_specs(vocab_file, FLAGS.do_lower_case)
  import tokenizers, transformers  # pylint: disable=g-import-not-at-top,multiple-imports
  print("corpus %s: %d lines, %.2f MB, %.1f%% of lines non-ASCII; vocab %s; "
        "do_lower_case=%s; %d repetitions; %d CPUs; transformers %s, "
        "tokenizers %s; Python %s\n" % (
            FLAGS.corpus, len(lines), size / 1e6,
            100.0 * sum(not l.isascii() for l in lines) / len(lines),
            vocab_file, FLAGS.do_lower_case, FLAGS.repetitions, os.cpu_count(),
            transformers.__version__, tokenizers.__version__,
            sys.version.split()[0]))
  print(_table(time_interleaved(specs, lines, FLAGS.repetitions)))
  print("\nOutput vs tokenization.FullTokenizer on the %d corpus lines:" %
        len(lines))
  for name, (n_diff, example) in count_differences(specs, lines).items():
    if name != _OURS:
      print("- %s: %d lines differ%s" % (
          name, n_diff, "; first: %r" % (example,) if example else ""))
  cases = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(
      __file__))), "tests", "data", "conformance", "tokenization",
                       "cases.jsonl")
  if os.path.exists(cases) and FLAGS.corpus == "en" and not FLAGS.vocab_file:
    print("\nConformance rows (original release's output, uncased vocab, "
          "do_lower_case=%s) reproduced exactly:" % FLAGS.do_lower_case)
    for name, (ok, total, example) in conformance_matches(
        specs, cases, FLAGS.do_lower_case).items():
      print("- %s: %d/%d%s" % (name, ok, total,
                               "; first miss: %r" % (example,) if example
                               else ""))


if __name__ == "__main__":
  define_flags()
  entry.run_main(main)
