"""lm-evaluation-harness tasks for AttentionSpan: `lm_eval --tasks 'attnspan_*'`.

    lm_eval --model hf --model_args pretrained=DIR --tasks 'attnspan_*'
    lm_eval --model hf --model_args pretrained=DIR --tasks attnspan \\
        --include_path "$(python -c 'import lm_eval_tasks; print(lm_eval_tasks.TASKS_DIR)')"

This folder holds the YAML files (`attnspan_<preset>.yaml`, the template
`_attnspan_template_yaml`, the group `_attnspan.yaml`) and the Python they call:
`dataset` (data from the generator, prompts, metrics), `models` (the `attnspan-hf` model
type, one token per character) and `registration` (what makes lm-eval find both without
flags). Importing this package imports neither lm-eval nor torch.
"""

from __future__ import annotations

from pathlib import Path

TASKS_DIR = str(Path(__file__).resolve().parent)
# `evaluate.load(EVALUATE_METRIC)`: the same scores as an `evaluate` metric, offline.
EVALUATE_METRIC = str(Path(TASKS_DIR, "attentionspan_accuracy.py"))

__all__ = ["EVALUATE_METRIC", "TASKS_DIR"]
