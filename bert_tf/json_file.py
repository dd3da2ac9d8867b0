"""Reading a JSON file and checking its shape, each problem in one line.

Every JSON input loads through `load`/`loads` (depth limit `MAX_DEPTH`)
and takes values with `field`/`require`: a wrong type, a missing key or a
non-finite number is one `ValueError` naming the file, the key path
(`data[0].paragraphs[3].qas[1].id`) and what was expected.
"""

import json
import math
import os

__all__ = ["MAX_DEPTH", "MISSING", "load", "loads", "field", "require", "index_path",
           "key_path", "describe"]

# Deeper than any file the project reads (a SQuAD file is 6 levels deep);
# far below the parser's recursion limit.
MAX_DEPTH = 64

# `field`'s default when an absent key is an error.
MISSING = object()

# Kind name -> (test, what the message says was expected).
_KINDS = {
    "object": (lambda v: isinstance(v, dict), "an object"),
    "list": (lambda v: isinstance(v, list), "a list"),
    "string": (lambda v: isinstance(v, str), "a string"),
    "boolean": (lambda v: isinstance(v, bool), "true or false"),
    "integer": (lambda v: isinstance(v, int) and not isinstance(v, bool),
                "an integer"),
    "number": (lambda v: (isinstance(v, (int, float)) and
                          not isinstance(v, bool) and math.isfinite(v)),
               "a finite number"),
    "null": (lambda v: v is None, "null"),
    "any": (lambda v: True, "a value"),
}


def loads(text, source):
  """The JSON value of `text` (str, or UTF-8/16/32 bytes), at most
  `MAX_DEPTH` deep.

  Raises:
    ValueError: `<source>: not valid JSON (...)`, or nested too deeply.
  """
  try:
    value = json.loads(text)
  except RecursionError:
    raise _too_deep(source) from None
  except ValueError as e:  # JSONDecodeError and UnicodeDecodeError.
    raise ValueError("%s: not valid JSON (%s)" %
                     (source, " ".join(str(e).split()))) from None
  _check_depth(value, source)
  return value


def load(path, max_bytes=None):
  """The JSON value of the file `path` (local or `tf.io.gfile`), checked as
  `loads`; longer than `max_bytes` is refused.

  Raises:
    FileNotFoundError: `path` is not a file.
    ValueError: too long, not JSON, or nested too deeply (naming `path`).
  """
  if "://" in path:
    # Only a remote file needs TensorFlow's file systems.
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    if not tf.io.gfile.exists(path):
      raise FileNotFoundError("%s: no such file" % path)
    with tf.io.gfile.GFile(path, "rb") as f:
      data = f.read()
  else:
    if not os.path.isfile(path):
      raise FileNotFoundError("%s: no such file" % path)
    with open(path, "rb") as f:
      data = f.read(-1 if max_bytes is None else max_bytes + 1)
  if max_bytes is not None and len(data) > max_bytes:
    raise ValueError("%s: longer than %d bytes; expected a small JSON file" %
                     (path, max_bytes))
  return loads(data, path)


def _too_deep(source):
  return ValueError("%s: JSON nested deeper than %d levels" %
                    (source, MAX_DEPTH))


def _check_depth(value, source):
  """Raises when `value` nests lists/objects deeper than `MAX_DEPTH`."""
  stack = [(value, 1)]
  while stack:
    node, depth = stack.pop()
    if isinstance(node, dict):
      children = node.values()
    elif isinstance(node, list):
      children = node
    else:
      continue
    if depth > MAX_DEPTH:
      raise _too_deep(source)
    stack.extend((child, depth + 1) for child in children
                 if isinstance(child, (dict, list)))


def key_path(where, key):
  """`where.key` (or `key` at the top level, where `where` is "")."""
  return "%s.%s" % (where, key) if where else str(key)


def index_path(where, index):
  """`where[index]`."""
  return "%s[%d]" % (where, index)


def describe(value, limit=40):
  """A short repr of a JSON value for a message (long ones cut)."""
  if isinstance(value, dict):
    text = "an object" if value else "{}"
  elif isinstance(value, list):
    text = "a list" if value else "[]"
  else:
    text = repr(value)
  return text if len(text) <= limit else text[:limit - 3] + "..."


def require(value, kind, source, where, minimum=None, maximum=None):
  """`value`, checked to be of `kind` ("object", "list", "string",
  "boolean", "integer", "number" (finite), "null", "any", or a tuple) and
  within the inclusive `minimum`/`maximum`; `where` is its key path.

  Raises:
    ValueError: `<source>: <where> is <value>, expected <kind>`.
  """
  kinds = (kind,) if isinstance(kind, str) else tuple(kind)
  if not any(_KINDS[k][0](value) for k in kinds):
    raise _wrong(source, where, value,
                 " or ".join(_KINDS[k][1] for k in kinds))
  if isinstance(value, (int, float)) and not isinstance(value, bool):
    if ((minimum is not None and value < minimum) or
        (maximum is not None and value > maximum)):
      raise _wrong(source, where, value, "%s in [%s, %s]" % (
          " or ".join(_KINDS[k][1] for k in kinds),
          "-inf" if minimum is None else minimum,
          "inf" if maximum is None else maximum))
  return value


def field(obj, key, kind, source, where="", default=MISSING, minimum=None,
          maximum=None):
  """`obj[key]` checked by `require` (`where`: `obj`'s key path); `default`
  when absent, if given.

  Raises:
    ValueError: `obj` not an object, `key` missing, or a bad value.
  """
  require(obj, "object", source, where)
  if key not in obj:
    if default is not MISSING:
      return default
    kinds = (kind,) if isinstance(kind, str) else tuple(kind)
    raise ValueError("%s: %s has no %r field (expected %s)" % (
        source, where or "the top level", key,
        " or ".join(_KINDS[k][1] for k in kinds)))
  return require(obj[key], kind, source, key_path(where, key), minimum,
                 maximum)


def _wrong(source, where, value, expected):
  return ValueError("%s: %s is %s, expected %s" %
                    (source, where or "the top level", describe(value),
                     expected))
