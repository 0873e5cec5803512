"""The shared prefill of a batch: the prompt's KV cache computed once, continued by every
setting's rows; and the loop that runs a batch under many settings on it.

    from harness.engine.prefill import cache_copy, prompt_prefix_cache, setting_groups
    prefix = prompt_prefix_cache(model, prompts)   # prompts: collate_left(..., with_answer=False)
    scorer.generate(rows, plan, max_new, **cache_copy(model, prefix, repeat=settings))
    for group in setting_groups(scorer, encodings, len(settings), plan_of, per_group=4):
        group.generation.ids[group.row(b, s)]      # instance b under the group's s-th setting

No intervention changes a prompt row but the last (the row that predicts target[0]), so the
columns before it are the same under every setting: a dose ladder's or a grid's settings of
one batch share that prefill, each row forwarding only its last prompt column and its answer
(`harness.attention.interventions`, which says what each group's plan is and makes the
records; the batching and the copies are this module's). Generation and teacher forcing
accept the copy as their KV cache (`harness.engine.inference`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from harness.engine.capture import AttentionPlan, capture_attention
from harness.engine.inference import Batch, cache_argument, collate_left, last_logits_only
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


@dataclass
class SettingGroup:
    """One group of a batch's settings and its passes: `members` (the settings' indices, in
    order), the greedy `generation` (None without one) and the `forced` teacher-forced pass
    (None without one), whose rows are the batch's instances x `members`, instance-major."""

    members: list[int]
    generation: Any | None
    forced: Any | None

    def row(self, instance: int, member: int) -> int:
        """The row of instance `instance` under the group's `member`-th setting."""
        return instance * len(self.members) + member


def setting_groups(
    scorer,
    encodings: Sequence[Any],
    count: int,
    plan_of: Callable[[list[int]], AttentionPlan],
    *,
    per_group: int,
    generate: bool = True,
    teacher_forced: bool = True,
    reuse_prefill: bool = True,
) -> Iterator[SettingGroup]:
    """The passes of one batch under `count` settings: the settings split into groups of
    `per_group` (so a large grid does not hold one huge KV cache), each group one greedy
    generation (`generate`) and one teacher-forced forward (`teacher_forced`) over the
    instances x its settings, under `plan_of(members)`. With `reuse_prefill`, one prefill of
    the prompt (`prompt_prefix_cache`) is shared by every pass, each continuing a private
    copy (`cache_copy`), the teacher-forced pass the same prefill the generation
    continued. ValueError before any pass when neither is asked for."""
    if not generate and not teacher_forced:
        raise ValueError("setting_groups needs a pass: generate or teacher_forced")
    if per_group < 1:
        raise ValueError(f"per_group must be >= 1, got {per_group}")
    return _groups(
        scorer, encodings, count, plan_of, per_group, generate, teacher_forced, reuse_prefill
    )


def _groups(scorer, encodings, count, plan_of, per_group, generate, teacher_forced, reuse_prefill):
    model = scorer.model
    prompts = collate_left(encodings, scorer.char_tok.pad_id, with_answer=False)
    # One prefill per batch, shared by every setting: no setting changes a prompt row.
    prefix = None
    if reuse_prefill and prompts.prompt_width > 1:
        prefix = prompt_prefix_cache(model, prompts)

    def copied(repeat: int) -> dict[str, Any]:
        return cache_copy(model, prefix, repeat) if prefix is not None else {}

    for first in range(0, count, per_group):
        members = list(range(first, min(first + per_group, count)))
        rows = [enc for enc in encodings for _ in members]
        plan = plan_of(members)
        generation = forced = None
        if generate:
            # The generation extends its copy, freed when it returns: the forced pass then
            # continues a copy of its own.
            generation, _ = scorer.generate(rows, plan, **copied(len(members)))
        if teacher_forced:
            forced = scorer.teacher_force(rows, plan, **copied(len(members)))[0]
        yield SettingGroup(members, generation, forced)
