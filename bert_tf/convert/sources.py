"""Model folders of other layouts as `--init_checkpoint`, converted once.

Every script's `--init_checkpoint` takes, besides a TensorFlow checkpoint
(a released model folder, a prefix, a training `output_dir`), a folder of
another layout listed in `KINDS`: a Hugging Face BERT folder
(`config.json`, `model.safetensors` or its shards or the `tf_model.h5` of
transformers 4.x's `TFBert*` classes, `vocab.txt` or a WordPiece
`tokenizer.json`), or a KerasHub BERT preset folder (`config.json` naming
`BertBackbone` or `BertTextClassifier`, `model.weights.h5`,
`assets/tokenizer/vocabulary.txt`; reading one needs the kerashub extra,
on the TensorFlow 2.21 stack). Such a folder is converted to the release
layout once, into a cache folder the log names
(`$BERT_TF_CACHE/converted/<name>-<key>/`, `BERT_TF_CACHE` defaulting to
`$XDG_CACHE_HOME/bert_tf`, else `~/.cache/bert_tf`), and reused while the
source files are unchanged (the key hashes the folder's real path and each
source file's name, size and modification time). The conversion is written
under a temporary name and renamed into place whole, so runs started
together never see half a folder; when two convert at once, the first
rename wins and the other run uses it.

`--bert_config_file`, `--vocab_file` and `--do_lower_case` then default to
what the folder holds; one given explicitly must agree with the folder, or
the run stops with one line naming each flag that differs.

Another layout is one more `FolderKind` in `KINDS`: how to recognise its
folder, which files it reads, how to convert it and how it tells the casing.
"""

import dataclasses
import hashlib
import json
import os
from typing import Callable, Optional

from absl import logging

from bert_tf import io as io_utils
from bert_tf import json_file
from bert_tf.convert import files
from bert_tf.convert import folders
from bert_tf.convert import kerashub

__all__ = ["FolderKind", "KINDS", "HUGGING_FACE", "KERAS_HUB", "CACHE_ENV", "cache_root",
           "folder_kind", "Converted", "convert_cached", "hf_lower_case",
           "check_hf_tokenizer", "resolve_model_flags"]

# The environment variable naming the cache of converted folders.
CACHE_ENV = "BERT_TF_CACHE"
# Part of every cache key: a change of the converters' output bumps it, so
# folders converted by an older version are not reused.
_CACHE_FORMAT = 1
# Written last into each converted folder: where it came from.
_SOURCE_FILE = "source.json"


@dataclasses.dataclass(frozen=True)
class FolderKind:
  """A layout of model folders that `--init_checkpoint` takes.

  Attributes:
    name: str, the layout's name in messages ("Hugging Face").
    detect: `detect(folder) -> bool`, whether a folder is of this layout
      (cheap: file names only).
    source_files: `source_files(folder) -> list of str`, the existing files
      the conversion reads (their stats make the cache key); raises
      `FileNotFoundError` / `ValueError` in one line for a folder that
      cannot be converted (no weights, pickled weights only).
    convert: `convert(folder, output_dir)`, writes `bert_config.json`,
      `bert_model.ckpt.*` and `vocab.txt` into the new folder `output_dir`.
    lower_case: `lower_case(folder) -> bool or None`, the casing its
      tokenizer uses (None: the folder does not say); raises `ValueError`
      for a tokenizer this project cannot reproduce.
  """

  name: str
  detect: Callable[[str], bool]
  source_files: Callable[[str], list]
  convert: Callable[[str, str], object]
  lower_case: Callable[[str], Optional[bool]]


# ---------------------------------------------------------------------------
# The Hugging Face layout.

_HF_WEIGHT_NAMES = ("model.safetensors", "model.safetensors.index.json",
                    "pytorch_model.bin", "pytorch_model.bin.index.json",
                    "tf_model.h5")
_HF_OTHER_FILES = ("config.json", "vocab.txt", "tokenizer.json",
                   "tokenizer_config.json")
# Tokenizer classes of transformers that are BERT's WordPiece tokenizer.
_WORDPIECE_CLASSES = ("BertTokenizer", "BertTokenizerFast")


def _is_hf_folder(folder):
  return os.path.isfile(os.path.join(folder, "config.json")) and any(
      os.path.exists(os.path.join(folder, name)) for name in _HF_WEIGHT_NAMES)


def _hf_source_files(folder):
  """config.json, the weight files and the tokenizer files present.

  Raises:
    FileNotFoundError: no safetensors weights nor `tf_model.h5` (pickles
      are never read), naming the folder.
  """
  weights = files.weight_files(folder)
  names = [os.path.join(folder, name) for name in _HF_OTHER_FILES]
  index = os.path.join(folder, "model.safetensors.index.json")
  if os.path.isfile(index):
    names.append(index)
  return [path for path in names if os.path.isfile(path)] + weights


def check_hf_tokenizer(folder):
  """Refuses a Hugging Face tokenizer that is not BERT's WordPiece.

  Reads `tokenizer_config.json` (its `tokenizer_class`, and `strip_accents`
  against `do_lower_case`: this project's tokenizer strips accents exactly
  when it lower-cases) and `tokenizer.json` (its `model.type`), when there.

  Raises:
    ValueError: one line naming the file, the key and what was expected.
  """
  path = os.path.join(folder, "tokenizer_config.json")
  if os.path.isfile(path):
    config = files.read_json(path)
    name = json_file.field(config, "tokenizer_class", ("string", "null"),
                           path, default=None)
    if name is not None and name not in _WORDPIECE_CLASSES:
      raise ValueError("%s: tokenizer_class is %r, expected %s (BERT's "
                       "WordPiece)" % (path, name,
                                       " or ".join(_WORDPIECE_CLASSES)))
    lower = json_file.field(config, "do_lower_case", ("boolean", "null"),
                            path, default=None)
    strip = json_file.field(config, "strip_accents", ("boolean", "null"),
                            path, default=None)
    if strip is not None and lower is not None and strip != lower:
      raise ValueError("%s: strip_accents is %s with do_lower_case %s, "
                       "expected them equal or strip_accents null (this "
                       "project's tokenizer strips accents exactly when it "
                       "lower-cases)" % (path, json.dumps(strip),
                                         json.dumps(lower)))
  path = os.path.join(folder, "tokenizer.json")
  if os.path.isfile(path):
    model = json_file.field(files.read_json(path), "model", "object", path,
                            default={})
    kind = json_file.field(model, "type", ("string", "null"), path, "model",
                           default=None)
    if kind not in (None, "WordPiece"):
      raise ValueError("%s: model.type is %r, expected \"WordPiece\" (BERT's "
                       "tokenizer)" % (path, kind))


def hf_lower_case(folder):
  """Whether a Hugging Face folder's tokenizer lower-cases, or None.

  `tokenizer_config.json`'s `do_lower_case` when set; else the
  `lowercase` of `tokenizer.json`'s `BertNormalizer`; else True when
  `tokenizer_config.json` names a BERT tokenizer (its default); else None.

  Raises:
    ValueError: a tokenizer that is not BERT's WordPiece
      (`check_hf_tokenizer`).
  """
  check_hf_tokenizer(folder)
  path = os.path.join(folder, "tokenizer_config.json")
  config = files.read_json(path) if os.path.isfile(path) else {}
  if config.get("do_lower_case") is not None:
    return bool(config["do_lower_case"])
  path = os.path.join(folder, "tokenizer.json")
  if os.path.isfile(path):
    normalizer = files.read_json(path).get("normalizer")
    if isinstance(normalizer, dict) and (
        normalizer.get("type") == "BertNormalizer"):
      lower = normalizer.get("lowercase", True)
      if isinstance(lower, bool):
        return lower
  if config.get("tokenizer_class") in _WORDPIECE_CLASSES:
    return True
  return None


def _hf_convert(folder, output_dir):
  check_hf_tokenizer(folder)
  folders.hf_to_tf(folder, output_dir, log_casing=False)


HUGGING_FACE = FolderKind("Hugging Face", _is_hf_folder, _hf_source_files,
                          _hf_convert, hf_lower_case)


def _kerashub_convert(folder, output_dir):
  kerashub.kerashub_to_tf(folder, output_dir)


# A KerasHub preset folder (needs the kerashub extra: the TensorFlow 2.21
# stack); the other layout is told apart by config.json's Keras class name.
KERAS_HUB = FolderKind("KerasHub", kerashub.looks_like_preset,
                       kerashub.preset_source_files, _kerashub_convert,
                       kerashub.read_lower_case)

# Every layout `--init_checkpoint` takes besides TensorFlow checkpoints, in
# the order they are tried.
KINDS = (HUGGING_FACE, KERAS_HUB)


# ---------------------------------------------------------------------------
# Detection and the cache.


def folder_kind(path, kinds=KINDS):
  """The `FolderKind` of `path`, or None for anything else.

  A folder holding a TensorFlow checkpoint (`bert_model.ckpt.index`, or a
  `checkpoint` state file) is None: it is read as before.
  """
  if not path or "://" in path or not os.path.isdir(path):
    return None
  if os.path.exists(os.path.join(path, "bert_model.ckpt.index")) or (
      os.path.exists(os.path.join(path, "checkpoint"))):
    return None
  for kind in kinds:
    if kind.detect(path):
      return kind
  return None


def cache_root(environ=None):
  """The folder converted models go to (see the module docstring)."""
  environ = os.environ if environ is None else environ
  if environ.get(CACHE_ENV):
    return environ[CACHE_ENV]
  base = environ.get("XDG_CACHE_HOME") or os.path.join(
      os.path.expanduser("~"), ".cache")
  return os.path.join(base, "bert_tf")


@dataclasses.dataclass(frozen=True)
class Converted:
  """A converted folder in the release layout.

  Attributes:
    folder: str, the cache folder (`bert_config.json`, `bert_model.ckpt.*`,
      `vocab.txt`, `source.json`).
    kind: the source's `FolderKind`.
    lower_case: bool or None, the source tokenizer's casing.
    reused: bool, whether an earlier run made it.
  """

  folder: str
  kind: FolderKind
  lower_case: Optional[bool]
  reused: bool

  @property
  def checkpoint(self):
    return os.path.join(self.folder, "bert_model.ckpt")

  @property
  def bert_config_file(self):
    return os.path.join(self.folder, "bert_config.json")

  @property
  def vocab_file(self):
    return os.path.join(self.folder, "vocab.txt")


def _source_record(folder, kind):
  """What the cache key hashes: the layout, real path and file stats."""
  real = os.path.realpath(folder)
  stats = []
  for path in kind.source_files(folder):
    stat = os.stat(path)
    stats.append([os.path.relpath(path, folder), stat.st_size,
                  stat.st_mtime_ns])
  return {"format": _CACHE_FORMAT, "kind": kind.name, "folder": real,
          "files": sorted(stats)}


def convert_cached(folder, kind, root=None):
  """The conversion of `folder` to the release layout, made once.

  Args:
    folder: str, a folder of layout `kind`.
    kind: a `FolderKind`.
    root: str, the cache folder (default `cache_root()`); conversions go
      to `<root>/converted/`.

  Returns:
    `Converted`.

  Raises:
    FileNotFoundError, ValueError: a folder that does not convert, in one
      line naming the file (from the layout's converter).
  """
  lower_case = kind.lower_case(folder)
  record = _source_record(folder, kind)
  key = hashlib.sha256(json.dumps(record, sort_keys=True).encode(
      "utf-8")).hexdigest()[:16]
  name = os.path.basename(os.path.normpath(record["folder"])) or "model"
  target = os.path.join(root or cache_root(), "converted",
                        "%s-%s" % (name, key))
  if os.path.isfile(os.path.join(target, _SOURCE_FILE)):
    return Converted(target, kind, lower_case, reused=True)
  try:
    with io_utils.atomic_path(target) as temp:
      kind.convert(folder, temp)
      record["do_lower_case"] = lower_case
      with open(os.path.join(temp, _SOURCE_FILE), "w",
                encoding="utf-8") as f:
        f.write(json.dumps(record, indent=2) + "\n")
  except (ValueError, OSError):
    # Another run renamed its conversion into place first: use that one.
    if not os.path.isfile(os.path.join(target, _SOURCE_FILE)):
      raise
    return Converted(target, kind, lower_case, reused=True)
  return Converted(target, kind, lower_case, reused=False)


# ---------------------------------------------------------------------------
# The flags.


def _read_tokens(path):
  """The tokens of a vocab.txt as the tokenizer reads them (stripped)."""
  return [text.strip() for _, text in io_utils.read_lines(path)]


def _config_difference(path, converted):
  """How the config at `path` differs from the converted one, or None."""
  try:
    given = files.read_json(path)
  except (OSError, ValueError):
    return None  # The start-up checks report a bad file in their words.
  own = files.read_json(converted.bert_config_file)
  for key in sorted(own):
    if given.get(key) != own[key]:
      return "%s is %s there, %s in the folder" % (
          key, json.dumps(given.get(key)), json.dumps(own[key]))
  return None


def _vocab_difference(path, converted):
  """How the vocabulary at `path` differs from the converted one, or None."""
  if not os.path.isfile(path):
    return None  # The start-up checks report it.
  given, own = _read_tokens(path), _read_tokens(converted.vocab_file)
  for i, (a, b) in enumerate(zip(given, own)):
    if a != b:
      return "line %d is %r there, %r in the folder" % (i + 1, a, b)
  if len(given) != len(own):
    return "%d tokens there, %d in the folder" % (len(given), len(own))
  return None


def resolve_model_flags(flag_values, root=None):
  """Points a script's model flags at the conversion of a foreign folder.

  When `--init_checkpoint` names a folder of a layout in `KINDS`, it is
  converted (or its earlier conversion reused, `convert_cached`) and
  `--init_checkpoint` becomes the converted folder; `--bert_config_file`,
  `--vocab_file` and `--do_lower_case`, those the script defines, take
  the folder's values unless given on the command line, and a given one
  must agree with the folder (the config's keys, the vocabulary's tokens,
  the casing when the folder tells it). Anything else leaves the flags as
  they are.

  Args:
    flag_values: parsed absl `FlagValues` of a script.
    root: str, the cache folder (default `cache_root()`).

  Returns:
    `Converted`, or None when `--init_checkpoint` is not such a folder.

  Raises:
    ValueError: one line naming each given flag that differs from the
      folder, or the folder's file that does not convert.
    FileNotFoundError: a folder without weights this project reads.
  """
  if "init_checkpoint" not in flag_values:
    return None
  source = flag_values.init_checkpoint
  kind = folder_kind(source)
  if kind is None:
    return None
  converted = convert_cached(source, kind, root)
  logging.info("--init_checkpoint: %s is a %s folder; %s %s (reused while "
               "the source is unchanged)", source, kind.name,
               "using its conversion made earlier in" if converted.reused
               else "converted it to", converted.folder)
  differences = []
  checks = (("bert_config_file", converted.bert_config_file,
             _config_difference),
            ("vocab_file", converted.vocab_file, _vocab_difference))
  for name, value, difference in checks:
    if name not in flag_values:
      continue
    if flag_values[name].present and flag_values[name].value:
      found = difference(flag_values[name].value, converted)
      if found:
        differences.append("--%s=%s differs from the folder's (%s)" %
                           (name, flag_values[name].value, found))
    else:
      flag_values[name].value = value
  if "do_lower_case" in flag_values and converted.lower_case is not None:
    if not flag_values["do_lower_case"].present:
      flag_values["do_lower_case"].value = converted.lower_case
    elif flag_values.do_lower_case != converted.lower_case:
      differences.append("--do_lower_case=%s differs from the folder's "
                         "tokenizer (do_lower_case %s)" %
                         (flag_values.do_lower_case, converted.lower_case))
  if differences:
    raise ValueError("--init_checkpoint=%s is a %s folder, but %s; leave "
                     "those flags out to use the folder's" %
                     (source, kind.name, "; ".join(differences)))
  flag_values["init_checkpoint"].value = converted.folder
  return converted
