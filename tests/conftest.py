"""Shared test fixtures: locating ../shared and small helpers.

The conformance vectors, bug-report cases and real data live outside the repo in
``$BERT_SHARED_DIR`` (default ``../shared`` next to the checkout). Outside CI a
missing directory skips the tests that need it, with a message saying how to
provide it; under CI (``CI=true``) it is a failure.
"""
import os
import sys

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
  sys.path.insert(0, REPO_ROOT)


def shared_dir():
  """Absolute path of the shared folder (may not exist)."""
  return os.path.abspath(
      os.environ.get("BERT_SHARED_DIR", os.path.join(REPO_ROOT, "..", "shared")))


def shared_path(*parts):
  """Path under the shared folder; skips (or fails under CI) when it is absent."""
  path = os.path.join(shared_dir(), *parts)
  if not os.path.exists(path):
    msg = ("%s not found: set BERT_SHARED_DIR to the team's shared folder "
           "(default ../shared beside the checkout)." % path)
    if os.environ.get("CI", "").lower() == "true":
      pytest.fail(msg)
    pytest.skip(msg)
  return path


@pytest.fixture
def shared():
  """Fixture form of ``shared_path``: ``shared("conformance", "modeling")``."""
  return shared_path
