#!/usr/bin/env bash
# SmolLM2-135M-Instruct fine-tuned on a task, then `reproduce`, on one GPU machine.
# The GGUF (98 MB) is larger than one device call may carry, so it travels in parts over
# consecutive calls (parts in /tmp/smol/ there); this script runs once all parts are there:
#
#   GGUF=/tmp/smol/SmolLM2-135M-Instruct.Q4_1.gguf bash benchmarks/gpu/smollm2_story.sh reversal
set -u
task=${1:?task}; shift
out=${OUT:-/tmp/out}; mkdir -p "$out"
export PYTHONPATH=/tmp/site:$PWD ATTENTIONSPAN_NO_AUTOREGISTER=1 PYTHONUNBUFFERED=1
export TOKENIZERS_PARALLELISM=false
model=/tmp/smollm2-135m-instruct
start=$(date +%s)
[ -d "$model" ] || python3 -c "from pathlib import Path; from harness.models import convert_gguf; \
convert_gguf(Path('$GGUF'), Path('$model'))" || exit 1
echo "convert_seconds=$(( $(date +%s) - start ))"
run=runs/gpu-smollm2-$task
start=$(date +%s)
python3 -m harness.commands.train --model "$model" --config "${task}_id" --instruction default \
  --lr "${LR:-5e-5}" --batch-size 16 --max-steps "${STEPS:-600}" --train-size $(( ${STEPS:-600} * 16 )) \
  --mixed-precision bf16 --output "$run" --no-progress --log-every 200 2>&1 | tail -n 6
echo "train_seconds=$(( $(date +%s) - start ))"
start=$(date +%s)
python3 -m harness.commands.reproduce --model "$run/final" --config "$task" \
  --output "$run-reproduce" --device cuda --no-progress "$@" 2>&1 | tail -n 30
echo "reproduce_seconds=$(( $(date +%s) - start ))"
tar czf "$out/smollm2-$task.tgz" "$run-reproduce" "$run/log.jsonl" "$run/final/attentionspan_run.json" 2>/dev/null
ls -la "$out"
