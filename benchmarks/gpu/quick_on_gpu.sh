#!/usr/bin/env bash
# `reproduce --quick` on one GPU machine, in one call of the device tool: the same recipe
# as on the CPU, trained and read where CUDA's kernels round the floats (docs/results.md,
# "The same recipe on a GPU"). The run records the GPU (settings.json `accelerator`), so
# `attentionspan results-doc RUN --check docs/quick-run.json` says "made on another device".
#
#   bash benchmarks/gpu/quick_on_gpu.sh runs/quick-gpu --tasks reversal --seeds 3
#
# Needs: transformers 5.24.0 and what it imports that the GPU image lacks or has too old
# (huggingface_hub, tokenizers, safetensors, httpx2, httpcore2, truststore, idna, anyio,
# regex, click) as wheels in .whl/, and the project on PYTHONPATH (datasets and lm-eval are
# not needed); nothing is downloaded. The run folder, without checkpoints, is packed into
# $OUT/<run name>.tar.gz; `tar xzf` it here and run `results-doc` on it.
set -u
run=${1:?run folder}; shift
out=${OUT:-/tmp/out}
mkdir -p "$out"
. benchmarks/gpu/carried_env.sh || exit 1  # carried wheels, PYTHONPATH
nvidia-smi -L
/usr/bin/time -v timeout "${DEADLINE:-470}" python3 -m harness.commands.reproduce --quick \
  --output "$run" --no-progress "$@" 2>&1 | tail -n 40
tar czf "$out/$(basename "$run").tar.gz" --exclude='checkpoint-*' "$run"
