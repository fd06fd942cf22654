#!/usr/bin/env bash
# Issue 16's accelerator run, one command: decode throughput (the engine's batched path and its
# one-by-one path) and train-step throughput of the Qwen3 0.6B and 1.7B presets (bf16, random
# weights) on the device JAX finds, with the fraction of memory bandwidth (decode) and MFU (train)
# against that device's peak (bench/device_peaks.py).
#
# Needs: the project installed with a JAX for the accelerator, JetStream 0.2.2 (pip install
# --no-deps google-jetstream==0.2.2), and TOOLORCH_DATA_DIR (the serving benchmark trains its
# tokenizer on GSM8K questions). Tunix and transformers are left out (ours alone; see bench/README.md).
#
#   bench/accelerator.sh [OUT_DIR]        # default runs/bench/accelerator
#   PYTHON=.venv/bin/python CONFIGS="qwen3-0.6b" bench/accelerator.sh
#   PARTS="train one_by_one" CONFIGS=qwen3-1.7b bench/accelerator.sh   # what an earlier run left
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
OUT=${1:-runs/bench/accelerator}
CONFIGS=${CONFIGS:-"qwen3-0.6b qwen3-1.7b"}
PARTS=${PARTS:-"serving train one_by_one"}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

"$PYTHON" -c "import jax; print('devices:', jax.devices())"
serving=(bench/serving_throughput.py --configs $CONFIGS --concurrency 1 16 32 --prompt-len 128
         --new-tokens 128 --skip-tunix --skip-transformers)
# the engine's path first, then the train step, then the one-by-one path (the before of issue 16)
for part in $PARTS; do
  case $part in
    serving) "$PYTHON" "${serving[@]}" --out "$OUT/serving" ;;
    train) "$PYTHON" bench/train_step_throughput.py --configs $CONFIGS --batch 8 --seq-len 1024 \
             --steps 5 --skip-tunix --skip-transformers --out "$OUT/train" ;;
    one_by_one) "$PYTHON" "${serving[@]}" --one-by-one --out "$OUT/serving_one_by_one" ;;
    *) echo "accelerator.sh: PARTS has '$part'; the parts are serving, train, one_by_one" >&2; exit 2 ;;
  esac
done
cat "$OUT"/serving/results.md "$OUT"/train/train_step.md "$OUT"/serving_one_by_one/results.md 2>/dev/null || true
