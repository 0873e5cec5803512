#!/usr/bin/env bash
# A from-scratch Llama of 25-100M parameters trained and analysed on one GPU machine, with
# the time each stage took, in one call of the device tool:
#
#   DEADLINE=480 bash benchmarks/gpu/scratch_stages.sh reversal addition
#
# Each task runs benchmarks/gpu/paper_story.sh (train, then `reproduce` at its default sizes:
# 200 test instances, the full grid) and is packed into $OUT/<task>-s<seed>.tgz as it ends, so
# a task cut short by the call's limit loses only itself. A task is started only while more
# than MIN_LEFT seconds of DEADLINE remain; each task's steps and lr are set below. Model size: LAYERS, HEADS, HIDDEN (MLP 4x).
set -u
export LAYERS=${LAYERS:-8} HEADS=${HEADS:-8} HIDDEN=${HIDDEN:-512}
deadline=$(( $(date +%s) + ${DEADLINE:-480} ))
for task in "$@"; do
  left=$(( deadline - $(date +%s) ))
  if [ "$left" -lt "${MIN_LEFT:-200}" ]; then echo "skip $task: ${left}s left"; continue; fi
  echo "== $task (${LAYERS}x${HEADS}, hidden $HIDDEN; ${left}s left)"
  # addition: the quick recipe's lower lr and longer run (its reference is not the answer)
  case $task in addition) steps=3000 lr=5e-4 ;; *) steps=2000 lr=1e-3 ;; esac
  STEPS=$steps LR=$lr timeout "$left" bash benchmarks/gpu/paper_story.sh "$task" 2>&1 | tail -n 60
done
