"""Scores on captured attention: per-head share, rollout, the paper's rollout score, and the
correct-versus-wrong comparison (Table 2).

    from harness.attention import scores
    table = scores.head_shares(record.head_rows)              # [layers, heads] mean share
    roll = scores.rollout(record.layer_maps)                  # [batch, T, T] (Abnar & Zuidema)
    score = scores.rollout_scores(roll, ref, task_columns)    # [batch, T], nan: no reference
    correct = scores.per_row(target_index, tf.correct)        # [batch, T] from per-character lists
    rows = target_index >= 0
    scores.compare(score[rows], correct[rows])                # means, n, Welch t and p, d and g
    scores.compare_by(score[rows], correct[rows], keys)       # the same per config / length

Definitions (paper v2 Section 4.2 and Appendix C; DESIGN.md "The analysis layer"): rollout is,
per layer, the head mean of the post-softmax map plus the identity, rows renormalised, and the
product over layers from the first layer up. The score of a target token is the share of its
rollout row on its reference columns over its task-text columns (instruction, few-shot block
and template columns left out, as the authors do). Rows whose reference is empty are counted
apart (`empty`), never as zeros (the authors count them as 0).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Hashable, Sequence
from typing import Any


def head_shares(head_rows):
    """[layers, heads]: each head's mean share on the references over the rows that have
    references (`record.head_rows` is [batch, L, layers, heads], nan elsewhere). A row's
    weights sum to 1, so its mass on the references is its share."""
    import torch

    rows = head_rows.reshape(-1, *head_rows.shape[-2:])
    counted = ~rows.isnan()
    n = counted.sum(0).clamp(min=1)
    return torch.where(counted, rows, torch.zeros_like(rows)).sum(0) / n


def rollout(layer_maps: Sequence[Any], add_identity: bool = True):
    """[batch, T, T]: attention rollout (Abnar and Zuidema, 2020) of per-layer head-mean maps
    ([batch, T, T] each, layer 0 first): each map plus the identity, rows renormalised,
    multiplied from the first layer up (R_l = A_l R_{l-1})."""
    import torch

    if not layer_maps:
        raise ValueError("rollout needs at least one layer map (capture with rollout=True)")
    first = layer_maps[0].float()
    eye = torch.eye(first.shape[-1], dtype=first.dtype, device=first.device)
    result = None
    for layer_map in layer_maps:
        a = layer_map.float()
        if add_identity:
            a = a + eye
        a = a / a.sum(-1, keepdim=True).clamp(min=torch.finfo(a.dtype).tiny)
        result = a if result is None else torch.matmul(a, result)
    return result


def _fit(mask, length: int):
    """Crop or zero-pad the last two (or one) dims of a bool mask to `length`."""
    import torch

    size = mask.shape[-1]
    if size == length:
        return mask
    if size > length:
        return mask[..., :length, :length] if mask.dim() == 3 else mask[..., :length]
    shape = (*mask.shape[:-2], length, length) if mask.dim() == 3 else (*mask.shape[:-1], length)
    out = torch.zeros(shape, dtype=mask.dtype, device=mask.device)
    if mask.dim() == 3:
        out[..., :size, :size] = mask
    else:
        out[..., :size] = mask
    return out


def rollout_scores(rolled, reference, columns):
    """[batch, T]: per query row, the rollout mass on the reference columns over the mass on
    the task-text columns (`columns`: bool [batch, L], positions.task_columns); nan for rows
    without a reference. Masks longer or shorter than the rollout are cropped or padded."""
    import torch

    length = rolled.shape[-1]
    ref = _fit(reference.to(rolled.device), length)
    cols = _fit(columns.to(rolled.device), length)
    mass = (rolled * ref).sum(-1)
    total = (rolled * cols[:, None, :]).sum(-1)
    share = mass / total.clamp(min=torch.finfo(rolled.dtype).tiny)
    return torch.where(ref.any(-1), share, torch.full_like(share, float("nan")))


def per_row(target_index, per_char: Sequence[Sequence[Any]], fill: float = float("nan")):
    """float [batch, L]: `per_char[b][i]` (e.g. TeacherForced.correct) placed on the row that
    predicts target[i] (`positions.target_index`), `fill` elsewhere and past a row's list."""
    import torch

    out = torch.full(target_index.shape, fill, dtype=torch.float32)
    for b, values in enumerate(per_char):
        idx = target_index[b]
        rows = (idx >= 0) & (idx < len(values))
        if bool(rows.any()):
            vals = torch.tensor([float(v) for v in values], dtype=torch.float32)
            out[b, rows] = vals[idx[rows]]
    return out


def _summary(values) -> dict[str, float]:
    n = len(values)
    mean = float(values.mean()) if n else float("nan")
    std = float(values.std(ddof=1)) if n > 1 else float("nan")
    return {"mean": mean, "n": n, "std": std}


def compare(scores, correct) -> dict[str, Any]:
    """Correct versus wrong tokens: per group mean, n and standard deviation; Welch's t-test
    (scipy.stats.ttest_ind, equal_var=False) t and p; Cohen's d (pooled SD) and Hedges' g.
    `scores`: one value per target token, nan where the reference is empty (counted in
    `empty`, left out of the means); `correct`: bool (or 0/1) per token, nan where unknown
    (such tokens are left out entirely)."""
    import numpy as np
    from scipy import stats

    values = np.asarray(_to_numpy(scores), dtype=np.float64).reshape(-1)
    right = np.asarray(_to_numpy(correct), dtype=np.float64).reshape(-1)
    if values.shape != right.shape:
        raise ValueError(f"scores has {values.size} values, correct {right.size}")
    # Tokens of unknown correctness (nan, e.g. `per_row` past what a model wrote) are left out.
    known = ~np.isnan(right)
    values, right = values[known], right[known].astype(bool)
    empty = np.isnan(values)
    good, bad = values[right & ~empty], values[~right & ~empty]
    out: dict[str, Any] = {
        "correct": _summary(good),
        "error": _summary(bad),
        "empty": int(empty.sum()),
        "welch_t": float("nan"),
        "welch_p": float("nan"),
        "cohens_d": float("nan"),
        "hedges_g": float("nan"),
    }
    n1, n2 = len(good), len(bad)
    if n1 > 1 and n2 > 1:
        if good.var() > 0 or bad.var() > 0:
            # Groups equal to float precision (a spread of 1e-17) make scipy warn "Precision
            # loss ... Results may be unreliable" on stderr with no context: no test there.
            with warnings.catch_warnings():
                warnings.filterwarnings("error", "Precision loss", RuntimeWarning)
                try:
                    test = stats.ttest_ind(good, bad, equal_var=False)
                    out["welch_t"], out["welch_p"] = float(test.statistic), float(test.pvalue)
                except RuntimeWarning:
                    pass  # t and p stay nan, as for groups without spread
        pooled = ((n1 - 1) * good.var(ddof=1) + (n2 - 1) * bad.var(ddof=1)) / (n1 + n2 - 2)
        if pooled > 0:
            d = (good.mean() - bad.mean()) / math.sqrt(pooled)
            out["cohens_d"] = float(d)
            out["hedges_g"] = float(d * (1 - 3 / (4 * (n1 + n2) - 9)))
    return out


def compare_by(scores, correct, keys: Sequence[Hashable]) -> dict[Hashable, dict[str, Any]]:
    """`compare` per group: `keys[j]` is token j's group (a config name, a length, or a
    tuple of both); groups in sorted order when sortable, else in order of appearance."""
    import numpy as np

    values = np.asarray(_to_numpy(scores), dtype=np.float64).reshape(-1)
    right = np.asarray(_to_numpy(correct)).reshape(-1)
    keys = list(keys)
    if len(keys) != values.size:
        raise ValueError(f"keys has {len(keys)} entries, scores {values.size}")
    order = list(dict.fromkeys(keys))
    try:
        order = sorted(order)
    except TypeError:
        pass
    out = {}
    for key in order:
        chosen = np.array([k == key for k in keys])
        out[key] = compare(values[chosen], right[chosen])
    return out


def _to_numpy(values):
    if hasattr(values, "detach"):
        return values.detach().cpu().numpy()
    return values
