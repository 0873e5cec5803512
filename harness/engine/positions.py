"""Reference rows of Instances as token positions of a collated batch.

    from harness.engine.inference import collate_left
    from harness.engine.positions import reference_mask, task_columns, shift_mask
    batch = collate_left(encodings, pad_id)             # or generate_batch(...).batch
    ref = reference_mask(batch)                         # bool [batch, L, L] (teacher-forced)
    ref = reference_mask(batch, length=batch.prompt_width + max_new_tokens)   # generation
    cols = task_columns(batch, length=ref.shape[-1])    # bool [batch, L]: prompt + target text
    ref_plus_1 = shift_mask(ref, 1)                     # the ref+k analysis

An Encoding already holds its reference in absolute token positions of its own sequence
(instruction, few-shot block, chat template and BOS included, `harness.foundation.tokenization`); a
batch only adds the padding before each row (`batch.shifts[b]`). The row for `target[i]` is
the query that predicts it, the token before it: `shift + target_offset + i - 1`.

Free-running generation: in the shared layout of `harness.engine.inference` every prompt ends at
column `prompt_width`, so the i-th generated token sits where `target[i]` would; the gold
reference row i serves it unchanged. Size the mask `prompt_width + max_new_tokens` so that
it covers every step (rows past the gold answer stay empty).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def _layout(batch: Any, length: int | None) -> tuple[Sequence[Any], Sequence[int], int]:
    """(encodings, shifts, length) of a `harness.engine.inference.Batch`-like object."""
    encodings = batch.encodings
    shifts = list(batch.shifts)
    if len(shifts) != len(encodings):
        raise ValueError(f"batch has {len(encodings)} encodings but {len(shifts)} shifts")
    if length is None:
        length = int(batch.input_ids.shape[1])
    return encodings, shifts, int(length)


def reference_mask(batch: Any, length: int | None = None):
    """bool [batch, L, L]: [b, q, k] when the query at q (predicting the token at q + 1) must
    attend key k. `length` defaults to the batch's width; generation needs
    `prompt_width + max_new_tokens`. References that would fall past `length` raise.
    (The one builder, `harness.foundation.data.reference_mask`, on a batch's layout.)"""
    from harness.foundation.data import reference_mask as build

    encodings, shifts, length = _layout(batch, length)
    return build(encodings, shifts, length)


def target_index(batch: Any, length: int | None = None):
    """long [batch, L]: for each query row, the index i of the target character it predicts
    (`target[i]` of that row's instance), -1 for other rows. Joins rows with per-character
    results such as `TeacherForced.correct[b][i]`."""
    import torch

    encodings, shifts, length = _layout(batch, length)
    out = torch.full((len(encodings), length), -1, dtype=torch.long)
    for b, (enc, shift) in enumerate(zip(encodings, shifts)):
        first = shift + enc.target_offset - 1
        stop = min(first + enc.target_len, length)
        if stop > first:
            out[b, first:stop] = torch.arange(stop - first)
    return out


def task_columns(batch: Any, length: int | None = None):
    """bool [batch, L]: the columns of the task text (the prompt's and the target's
    characters); instruction, few-shot block, chat template, BOS, EOS and padding are left
    out, as the paper's text defines the rollout score's denominator (v2 Appendix C). The
    authors' released code differs in three ways (`harness.attention.scores`, its
    `authors` convention)."""
    import torch

    encodings, shifts, length = _layout(batch, length)
    out = torch.zeros((len(encodings), length), dtype=torch.bool)
    for b, (enc, shift) in enumerate(zip(encodings, shifts)):
        start = shift + enc.prompt_offset
        out[b, start : min(start + enc.prompt_len, length)] = True
        start = shift + enc.target_offset
        out[b, start : min(start + enc.target_len, length)] = True
    return out


def shift_mask(mask, shift: int):
    """The mask moved `shift` keys to the right (`ref + shift`), cells that leave the
    sequence dropped. bool [batch, query_pos, key_pos]."""
    import torch

    if shift == 0:
        return mask
    out = torch.zeros_like(mask)
    if shift > 0:
        out[..., shift:] = mask[..., :-shift]
    else:
        out[..., :shift] = mask[..., -shift:]
    return out


def causal_valid(mask, attention_mask):
    """Keep only cells a query may attend: key <= query and a real (unpadded) key."""
    import torch

    length = mask.shape[-1]
    causal = torch.ones(length, length, dtype=torch.bool).tril()
    return mask & causal & attention_mask.bool()[:, None, :]
