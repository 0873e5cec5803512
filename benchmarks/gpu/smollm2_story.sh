#!/usr/bin/env bash
# `reproduce --pretrained` on SmolLM2-135M-Instruct at the paper's sizes (200 test
# instances, the full N x C grid, 3 control seeds), on one GPU machine, in one device call.
# The GGUF (98 MB) is larger than one device call may carry, so it travels in parts over
# consecutive calls (parts in /tmp/smol/ there); this script runs once all parts are there:
#
#   GGUF=/tmp/smol/SmolLM2-135M-Instruct.Q4_1.gguf bash benchmarks/gpu/smollm2_story.sh reversal
#
# The fine-tune is the CPU's recipe (harness.pipeline.settings.PRETRAINED_RECIPES); the run
# folder without its model weights is packed into $OUT/smollm2-<task>.tgz, whose digest is
# written here with `attentionspan results-doc RUN --block smollm2-<task>-gpu ...`.
set -u
task=${1:?task}; shift
out=${OUT:-/tmp/out}; mkdir -p "$out"
export PYTHONPATH=/tmp/site:$PWD ATTENTIONSPAN_NO_AUTOREGISTER=1 PYTHONUNBUFFERED=1
export TOKENIZERS_PARALLELISM=false
model=/tmp/smollm2-135m-instruct
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
start=$(date +%s)
[ -d "$model" ] || python3 -c "from pathlib import Path; from harness.foundation.models import convert_gguf; \
convert_gguf(Path('$GGUF'), Path('$model'))" || exit 1
echo "convert_seconds=$(( $(date +%s) - start ))"
run=runs/gpu-smollm2-$task
start=$(date +%s)
python3 -m harness.commands.reproduce --pretrained "$model" --tasks "$task" --device cuda \
  --output "$run" --num-test 200 --num-validation 100 --num-attention 100 --batch-size 32 \
  --counts 1 2 4 8 16 27 --strengths 0.3 0.5 1 1.5 2 --control-seeds 0 1 2 \
  --no-progress "$@" 2>&1 | tail -n 40
echo "reproduce_seconds=$(( $(date +%s) - start ))"
tar czf "$out/smollm2-$task.tgz" --exclude='*.safetensors' --exclude='training_state.pt' "$run"
ls -la "$out"
