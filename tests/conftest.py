"""pytest's set-up for this suite: the repo root and tests/ on sys.path.

The helpers themselves are in `helpers.py`, imported by the tests; the test
data is under `data/` (see data/README.md).
"""
import importlib
import importlib.util
import os
import sys

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
for _path in (os.path.dirname(TESTS_DIR), TESTS_DIR):
  if _path not in sys.path:
    sys.path.insert(0, _path)

# TensorFlow 2.20 and later load their library with RTLD_GLOBAL, so a triton
# loaded after TensorFlow binds to TensorFlow's LLVM and crashes the process
# (SIGSEGV); the CUDA builds of torch import triton lazily (transformers'
# BERT does, through torch). Loaded first, where installed, it keeps its own.
if importlib.util.find_spec("triton") is not None:
  importlib.import_module("triton")
