"""pytest's hooks for this suite: the repo root on sys.path, shared fixtures.

The helpers themselves are in `helpers.py`, imported by the tests.
"""
import os
import sys

import pytest

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
for _path in (os.path.dirname(TESTS_DIR), TESTS_DIR):
  if _path not in sys.path:
    sys.path.insert(0, _path)

from helpers import shared_path  # pylint: disable=g-import-not-at-top,wrong-import-position


@pytest.fixture
def shared():
  """Fixture form of ``shared_path``: ``shared("conformance", "modeling")``."""
  return shared_path
