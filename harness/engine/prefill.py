"""The shared prefill of a batch: the prompt's KV cache computed once, continued by every
setting's rows.

    from harness.engine.prefill import cache_copy, prompt_prefix_cache
    prefix = prompt_prefix_cache(model, prompts)   # prompts: collate_left(..., with_answer=False)
    scorer.generate(rows, plan, max_new, **cache_copy(model, prefix, repeat=settings))

No intervention changes a prompt row but the last (the row that predicts target[0]), so the
columns before it are the same under every setting: a dose ladder's or a grid's settings of
one batch share that prefill, each row forwarding only its last prompt column and its answer
(`harness.attention.interventions`). Generation and teacher forcing accept the copy as their
KV cache (`harness.engine.inference`).
"""

from __future__ import annotations

import copy
from typing import Any

from harness.engine.capture import AttentionPlan, capture_attention
from harness.engine.inference import Batch, cache_argument, last_logits_only
from harness.foundation.dispatch import input_device


def prompt_prefix_cache(model, prompts: Batch):
    """The KV cache of every column of `prompts` (a `collate_left(..., with_answer=False)`
    batch) but the last, computed once so that every setting of a batch continues it
    (`cache_copy`): no intervention changes those rows (no reference row lies there). It
    runs under the capture function with nothing to record or change, so its arithmetic is
    that of the generations and forwards that reuse it; only the cache is kept (one column of
    logits, where the model takes `logits_to_keep`)."""
    import torch
    from transformers import DynamicCache

    with capture_attention(model, AttentionPlan()):
        cache = DynamicCache(config=model.config)
        inputs = prompts.model_inputs(input_device(model))
        inputs = {k: v[:, :-1] for k, v in inputs.items()}
        with torch.inference_mode():
            options = {cache_argument(model): cache, **last_logits_only(model)}
            model(**inputs, **options, use_cache=True)
    return cache


def cache_copy(model, prefix, repeat: int = 1) -> dict[str, Any]:
    """The keyword argument that hands a private copy of `prefix` (the pass extends the cache
    it is given) to `model`'s generation or forward, each row repeated `repeat` times (row b
    becomes rows b * repeat .. b * repeat + repeat - 1, as the settings' rows are laid out)."""
    cache = copy.deepcopy(prefix)
    if repeat > 1:
        cache.batch_repeat_interleave(repeat)
    return {cache_argument(model): cache}
