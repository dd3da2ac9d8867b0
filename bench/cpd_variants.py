# coding=utf-8
"""Runs `create_pretraining_data.py` with some of its speed tricks turned off.

  python bench/cpd_variants.py --without=shuffle,gc -- <the script's flags>

Each trick is replaced by the plain library call it stands for, by patching
the imported modules before `main` runs, so the production code carries no
switches. The output bytes must not change (the bench checks them). Used by
`bench_pretraining_data.py --ab`; `--without=` (nothing) is the script as is.

Tricks measured and removed because they changed the end-to-end time by
less than ~10% (see docs/performance.md): the ASCII shortcut that decided blank lines
without decoding when splitting the corpus, `os._exit` in the workers, and
`gc.freeze()` before forking them.
"""

import collections
import contextlib
import os
import sys

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, _REPO)

import create_pretraining_data as cpd  # pylint: disable=g-import-not-at-top
from bert_tf import io as io_utils  # pylint: disable=g-import-not-at-top
from bert_tf.tasks.pretraining import records as pretraining_records  # pylint: disable=g-import-not-at-top
from bert_tf.tasks.pretraining import shuffle as pretraining_shuffle  # pylint: disable=g-import-not-at-top
from bert_tf.cli import entry  # pylint: disable=g-import-not-at-top


def _without_serializer():
  """Records built the reference's way: an Example from an OrderedDict."""
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top

  def serialize(self, instance):
    features = collections.OrderedDict()
    for name, values in zip(pretraining_records.FEATURE_ORDER,
                            self.features(instance)):
      features[name] = (cpd.create_float_feature(values)
                        if name == "masked_lm_weights"
                        else cpd.create_int_feature(values))
    return tf.train.Example(
        features=tf.train.Features(feature=features)).SerializeToString()

  pretraining_records.ExampleSerializer.serialize = serialize


def _without_varint_table():
  pretraining_records._varint_of = pretraining_records._varint


def _without_shuffle():
  """`rng.shuffle` itself instead of the inlined copy."""
  pretraining_shuffle.shuffle = lambda items, rng: rng.shuffle(items)


def _without_gc():
  """The cyclic collector left running."""
  io_utils.gc_paused = contextlib.nullcontext


def _without_block_reader():
  """Lines read one `readline` at a time through `tf.io.gfile.GFile`, as
  the reference does, instead of splitting 1 MiB blocks."""

  def raw_lines(path, start, end):
    remaining = None if end is None else end - start
    with io_utils._gfile().GFile(path, "rb") as reader:
      if start:
        reader.seek(start)
      while remaining is None or remaining > 0:
        line = reader.readline()
        if not line:
          break
        if remaining is not None:
          remaining -= len(line)
        if line.endswith(b"\n"):
          yield line[:-1], True
        else:
          yield line, False

  io_utils._raw_lines = raw_lines


TRICKS = {
    "serializer": _without_serializer,
    "varint_table": _without_varint_table,
    "shuffle": _without_shuffle,
    "gc_paused": _without_gc,
    "block_reader": _without_block_reader,
}


def main():
  args = sys.argv[1:]
  if not args or not args[0].startswith("--without="):
    raise SystemExit("usage: cpd_variants.py --without=a,b -- FLAGS...")
  names = [n for n in args[0].split("=", 1)[1].split(",") if n]
  for name in names:
    if name not in TRICKS:
      raise SystemExit("unknown trick %r; expected one of %s" %
                       (name, ", ".join(TRICKS)))
    TRICKS[name]()
  rest = args[1:]
  if rest and rest[0] == "--":
    rest = rest[1:]
  sys.argv = [os.path.join(_REPO, "create_pretraining_data.py")] + rest
  cpd.define_flags()
  entry.run_main(cpd.main)


if __name__ == "__main__":
  main()
