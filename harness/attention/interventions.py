"""Reinforce (or knock out) the reference attention of chosen heads while a model answers.

    from harness.attention.interventions import score_settings
    records = score_settings(model, tokenizer, instances, [setting, ...], ranking)
    records["top4-C1"][0]   # {'index', 'length', 'prediction', 'exact_match', 'partial_acc', ...}

For each batch the answers come from free-running, KV-cached greedy generation with the
intervention active at every generated token (the i-th generated token is predicted by the
query at `prompt_width + i - 1`, which uses reference row i of the gold instance), and the
teacher-forced token accuracy from one forward over prompt + gold answer with the same
intervention. The heads come from a `HeadRanking` (top, bottom) or are drawn at random; the
cells are the reference (optionally `ref + shift`) or, for the positions control, as many
random non-reference keys per row. One prefill of the prompt (all but its last token, a
part no setting changes: no reference row lies there) is computed once per batch and
copied for every setting.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Sequence
from typing import Any

from attentionspan_datasets.metrics import score
from harness.attention.controls import restore_levels
from harness.attention.heads import HeadRanking, causal_valid, shift_mask
from harness.attention.sweep import Setting


def select_heads(setting: Setting, ranking: HeadRanking) -> list[tuple[int, int]]:
    """The (layer, head) pairs a setting acts on."""
    if setting.is_baseline:
        return []
    if setting.n > ranking.total:
        raise ValueError(f"n must be <= {ranking.total} (the model's heads), got {setting.n}")
    if setting.heads == "top":
        return ranking.top(setting.n)
    if setting.heads == "bottom":
        return ranking.bottom(setting.n)
    every = [(la, h) for la in range(ranking.num_layers) for h in range(ranking.num_heads)]
    # A string seed is hashed the same way in every process (random's SHA-512 path).
    return sorted(random.Random(f"heads/{setting.seed}").sample(every, setting.n))


def heads_tensor(pairs: Sequence[tuple[int, int]], num_layers: int, num_heads: int):
    import torch

    mask = torch.zeros(num_layers, num_heads, dtype=torch.bool)
    for layer, head in pairs:
        mask[layer, head] = True
    return mask


def random_positions(reference, allowed_keys, seed: int, avoid=None):
    """bool [batch, L, L]: per query row with r reference keys, r keys drawn uniformly from
    the keys it may attend (`allowed_keys` [batch, L], causal) that are not references
    (nor in `avoid`, e.g. the unshifted reference when `reference` is ref + k).

    The positions control: the same heads, the same C, the same number of cells per row,
    none of them a reference. Rows with fewer candidates than references get them all.
    """
    import torch

    batch, length, _ = reference.shape
    candidates = causal_valid(torch.ones_like(reference), allowed_keys) & ~reference
    if avoid is not None:
        candidates &= ~avoid
    counts = reference.sum(-1, keepdim=True)  # [b, q, 1]
    generator = torch.Generator().manual_seed(int(seed))
    noise = torch.rand(reference.shape, generator=generator)
    noise = noise.masked_fill(~candidates, -1.0)
    # Rank of every key among its row's candidates by the noise: keep the first `counts`.
    rank = noise.argsort(-1, descending=True).argsort(-1)
    return (rank < counts) & candidates


def intervention_for(setting: Setting, ranking: HeadRanking, reference, allowed_keys):
    """A capture `Intervention` for `setting` on one batch, or None for the baseline."""
    from harness.attention.capture import Intervention

    if setting.is_baseline:
        return None
    heads = heads_tensor(select_heads(setting, ranking), ranking.num_layers, ranking.num_heads)
    cells = causal_valid(shift_mask(reference, setting.shift), allowed_keys)
    if setting.positions == "random":
        cells = random_positions(cells, allowed_keys, setting.seed, avoid=reference)
    levels = restore_levels(ranking, setting.shift) if setting.mode == "restore" else None
    return Intervention(
        heads=heads,
        strength=setting.strength,
        mode=setting.mode,
        levels=levels,
        threshold=setting.threshold,
        renormalise=setting.renormalise,
        # The row predicting target[0] is the last prompt row: it is reinforced too (the
        # prefix before it has no reference rows, so nothing else in the prompt changes).
        prefill=True,
        positions=cells,
    )


def _prefix_cache(model, prompts):
    """The KV cache of every prompt column but the last (no setting changes those rows)."""
    import torch
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    inputs = prompts.model_inputs(model.device)
    inputs = {k: v[:, :-1] for k, v in inputs.items()}
    with torch.inference_mode():
        model(**inputs, past_key_values=cache, use_cache=True)
    return cache


def score_batch(
    model,
    char_tok,
    chunk: Sequence[Any],
    encodings,
    settings: Sequence[Setting],
    ranking: HeadRanking | None,
    teacher_forced: bool = True,
    reuse_prefill: bool = True,
) -> dict[str, list[dict[str, Any]]]:
    """Records of one batch under every setting."""
    import torch

    from harness.attention.capture import AttentionPlan, capture_attention
    from harness.inference import collate_left, generate_batch, teacher_forced_batch

    full = collate_left(encodings, char_tok.pad_id, with_answer=True)
    reference = full.reference_mask()
    # Keys a query may use: the prompt's real tokens, and every answer column (in
    # generation those hold what the model wrote; in teacher forcing the gold answer).
    allowed = full.attention_mask.bool().clone()
    allowed[:, full.prompt_width :] = True
    max_new = max(e.target_len for e in encodings) + 1
    prompts = collate_left(encodings, char_tok.pad_id, with_answer=False)
    prefix = None
    if reuse_prefill and prompts.prompt_width > 1:
        with capture_attention(model, AttentionPlan()):
            prefix = _prefix_cache(model, prompts)
    out: dict[str, list[dict[str, Any]]] = {}
    for setting in settings:
        if not setting.is_baseline and ranking is None:
            raise ValueError(f"setting {setting.name} needs a head ranking")
        iv = intervention_for(setting, ranking, reference, allowed) if ranking else None
        plan = AttentionPlan(reference=reference, head_mass=False, intervention=iv)
        extra = {}
        if prefix is not None:
            extra["past_key_values"] = copy.deepcopy(prefix)
        with capture_attention(model, plan):
            gen = generate_batch(model, char_tok, encodings, max_new, **extra)
        forced = None
        if teacher_forced:
            with capture_attention(model, plan), torch.inference_mode():
                forced = teacher_forced_batch(model, char_tok, encodings)
        rows = []
        for b, (instance, enc) in enumerate(zip(chunk, encodings)):
            # Cut at target length + 1 so an answer does not depend on its batch mates.
            answer = char_tok.decode(gen.ids[b][: enc.target_len + 1], skip_special_tokens=True)
            metrics = score(answer, instance.target)
            record = {
                "config": instance.config,
                "index": instance.index,
                "length": int(instance.params.get("length", len(instance.target))),
                "target_len": enc.target_len,
                "prediction": answer,
                "exact_match": metrics["exact_match"],
                "partial_acc": metrics["partial_acc"],
            }
            if forced is not None:
                tf = forced.correct[b]
                record["tf_token_acc"] = sum(tf) / len(tf) if tf else 1.0
            rows.append(record)
        out[setting.name] = rows
    return out


def score_settings(
    model,
    tokenizer,
    instances: Sequence[Any],
    settings: Sequence[Setting],
    ranking: HeadRanking | None = None,
    prompt=None,
    batch_size: int = 16,
    teacher_forced: bool = True,
    reuse_prefill: bool = True,
    on_batch: Callable[[int], None] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Per-instance records of every setting on `instances` (same instances, same order,
    so any two settings pair up for `harness.stats.gain_table`)."""
    from harness.data import PromptConfig
    from harness.tokenization import CharTokenizer

    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    names = [s.name for s in settings]
    if len(set(names)) != len(names):
        raise ValueError(f"settings must be distinct, got {names}")
    char_tok = tokenizer if isinstance(tokenizer, CharTokenizer) else CharTokenizer(tokenizer)
    prompt = prompt or PromptConfig()
    for instance in instances:  # a character the tokenizer lacks: fail before any model call
        char_tok.check_text(instance.text)
    out: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    was_training = model.training
    model.eval()
    try:
        for first in range(0, len(instances), batch_size):
            chunk = instances[first : first + batch_size]
            encodings = [prompt.encode(char_tok, x) for x in chunk]
            batch = score_batch(
                model, char_tok, chunk, encodings, settings, ranking, teacher_forced, reuse_prefill
            )
            for name, rows in batch.items():
                out[name].extend(rows)
            if on_batch is not None:
                on_batch(len(chunk))
    finally:
        model.train(was_training)
    return out
