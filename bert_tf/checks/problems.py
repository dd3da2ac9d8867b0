"""`Problems`: every start-up problem of a run, reported together.

Each check adds what it finds to the one value the script passes down (or
returns a list of one-line messages; none both adds and raises); the
script calls `raise_if_any()` once, before any work: one `error:` line.
"""

import re

__all__ = ["Problems"]


class Problems(object):
  """The one-line problems that the start-up checks found, in order.

  Attributes:
    lines: list of str, one message each.
  """

  def __init__(self, lines=()):
    self.lines = list(lines)

  def add(self, message):
    """Adds one problem (a one-line message)."""
    self.lines.append(message)

  def extend(self, messages):
    """Adds several problems (an iterable of one-line messages)."""
    self.lines.extend(messages)

  def extend_unnamed(self, messages):
    """Adds the messages about a flag (`--name...` at their start) that no
    problem so far names: a flag that two checks refuse is reported once,
    by the first."""
    named = {name for line in self.lines
             for name in re.findall(r"--(\w+)", line)}
    for message in messages:
      match = re.match(r"--(\w+)", message)
      if not (match and match.group(1) in named):
        self.lines.append(message)

  def attempt(self, check, *args):
    """`check(*args)`, or None with its `ValueError`/`OSError` added.

    Args:
      check: a function raising `ValueError` or `OSError` on bad input.
      *args: its arguments.
    """
    try:
      return check(*args)
    except (ValueError, OSError) as e:
      self.add(str(e))
      return None

  def __bool__(self):
    return bool(self.lines)

  def __len__(self):
    return len(self.lines)

  def raise_if_any(self):
    """Raises one `ValueError` holding every problem, joined by "; " (one
    line: one per line would hide all but the last from an `error:`
    line); does nothing when there is none."""
    if self.lines:
      raise ValueError("; ".join(self.lines))
