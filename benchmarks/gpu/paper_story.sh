#!/usr/bin/env bash
# The paper's story on one GPU machine, in one call of the device tool (see docs/results.md):
# train a from-scratch Llama on a task, then `reproduce` (ID/OOD eval, attention on reference
# tokens, head ranking, the N x C sweep chosen on OOD validation, controls on OOD test and ID).
#
#   bash benchmarks/gpu/paper_story.sh reversal  [extra reproduce flags...]
#
# Needs: transformers 5.23 as a wheel in .whl/ (the GPU image has an older one) and the project
# on PYTHONPATH; nothing is downloaded. Results (no weights) are packed into $OUT/<task>.tgz.
set -u
task=${1:?task}; shift
out=${OUT:-/tmp/out}
mkdir -p "$out"
. benchmarks/gpu/carried_env.sh || exit 1  # carried wheels, PYTHONPATH
export TOKENIZERS_PARALLELISM=false
layers=${LAYERS:-8}; heads=${HEADS:-8}; hidden=${HIDDEN:-256}; steps=${STEPS:-2000}
seed=${SEED:-0}
run=runs/gpu-$task-${layers}x$heads-s$seed
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
start=$(date +%s)
python3 -m harness.commands.train --model scratch --config "${task}_id" --scratch-num-layers "$layers" \
  --scratch-num-heads "$heads" --scratch-hidden-size "$hidden" \
  --scratch-intermediate-size $((hidden * 4)) --lr "${LR:-1e-3}" --batch-size 64 \
  --max-steps "$steps" --scratch-seed "$seed" --train-size $((steps * 64)) --output "$run" --no-progress \
  --log-every 500 2>&1 | tail -n 8
echo "train_seconds=$(( $(date +%s) - start ))"
start=$(date +%s)
python3 -m harness.commands.reproduce --model "$run/final" --config "$task" \
  --output "$run-reproduce" --device cuda --no-progress "$@" 2>&1 | tail -n 40
echo "reproduce_seconds=$(( $(date +%s) - start ))"
cp "$run/final/attentionspan_run.json" "$run-reproduce/" 2>/dev/null
tar czf "$out/$task-s$seed.tgz" "$run-reproduce" "$run/log.jsonl" 2>/dev/null
ls -la "$out"
