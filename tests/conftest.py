"""pytest's set-up for this suite: the repo root and tests/ on sys.path.

The helpers themselves are in `helpers.py`, imported by the tests; the test
data is under `data/` (see data/README.md).
"""
import os
import sys

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
for _path in (os.path.dirname(TESTS_DIR), TESTS_DIR):
  if _path not in sys.path:
    sys.path.insert(0, _path)
