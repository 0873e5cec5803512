"""Scores on captured attention: per-head share, rollout, the paper's rollout score, and the
correct-versus-wrong comparison (Table 2).

    from harness.attention import scores
    table = scores.head_shares(record.head_rows)              # [layers, heads] mean share
    roll = scores.rollout(record.layer_maps)                  # [batch, T, T] (Abnar & Zuidema)
    cols = scores.score_columns(batch)                        # the paper's denominator
    score = scores.rollout_scores(roll, ref, cols)            # [batch, T], nan: no reference
    cols = scores.score_columns(batch, "authors", tasks=[x.task for x in instances])
    score = scores.rollout_scores(roll, ref, cols, "authors", scores.score_rows(batch))
    correct = scores.per_row(target_index, tf.correct)        # [batch, T] from per-character lists
    rows = target_index >= 0
    scores.compare(score[rows], correct[rows])                # means, n, Welch t and p, d and g
    scores.compare_by(score[rows], correct[rows], keys)       # the same per config / length
    scores.table2_statistics(token_records)                   # + counting instances, not tokens

Definitions (paper v2 Section 4.2 and Appendix C; docs/architecture.md, "Measurement"):
rollout is, per layer, the head mean of the post-softmax map plus the identity, rows
renormalised, and the product over layers from the first layer up. The score of a target
token is the share of its rollout row on its reference columns over its task-text columns
(instruction, few-shot block and template columns left out, as the paper's text says). Rows
whose reference is empty are counted apart (`empty`), never as zeros. That is the `paper`
convention; `authors` computes the score as the authors' released code does, which differs
in three ways (`score_columns`, `score_rows`): string reversal's denominator leaves out the
prompt's first character, the chat template's columns between prompt and answer count, and
rows without a reference, the row that predicts EOS among them, score 0.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Hashable, Sequence
from typing import Any, Literal

Convention = Literal["paper", "authors"]
CONVENTIONS: tuple[str, ...] = ("paper", "authors")
# Prompt characters the authors' code leaves out of the denominator, per task: only their
# string-reversal generator cuts at `instruction_length + 1` (the others at
# `instruction_length`), with `instruction_length` already counting BOS.
AUTHORS_DROPPED_PROMPT_CHARS = {"string_reversal": 1}


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


def check_convention(convention: str) -> str:
    """`convention` if it is one of CONVENTIONS, else ValueError naming the allowed values."""
    if convention not in CONVENTIONS:
        raise ValueError(
            f"score convention must be one of {', '.join(CONVENTIONS)}, got {convention!r}"
        )
    return convention


def score_columns(
    batch: Any,
    convention: Convention = "paper",
    length: int | None = None,
    tasks: Sequence[str] | None = None,
):
    """bool [batch, L]: the columns of the score's denominator.

    - `paper` (v2 Appendix C, the default): the task text, `positions.task_columns` (the
      prompt's and the target's characters; instruction, few-shot block, chat template, BOS,
      EOS and padding left out).
    - `authors`: as their released code computes it. Their attention labels mark with -100
      the columns before `instruction_length` (BOS, instruction, few-shot block, the chat
      template's header) and keep every later column with label 0 or 1 in the denominator;
      so the chat template's pieces between the prompt and the answer (the assistant turn's
      header) count. String reversal cuts one column later, `attn_labels[:, :
      instruction_length+1]` in `generate_attention_labels` of their
      generators/string_reversal.py, where `instruction_length` already counts BOS: the
      prompt's first character is left out (an off-by-one; `AUTHORS_DROPPED_PROMPT_CHARS`).
      Here: every column from `prompt[d]` on, d = 1 for string reversal, else 0 (`tasks[b]`,
      required, names row b's task). Columns after a query carry no causal mass, so the end
      of the range does not matter. Their reference labels are written after the cut, so a
      reference on `prompt[0]` still counts: `rollout_scores` adds the reference cells."""
    import torch

    from harness.engine.positions import task_columns

    if check_convention(convention) == "paper":
        return task_columns(batch, length)
    encodings, shifts = batch.encodings, list(batch.shifts)
    if tasks is None or len(tasks) != len(encodings):
        raise ValueError(
            "convention='authors' needs tasks= (the task of each row of the batch: their code "
            f"drops prompt[0] for string_reversal only), got {tasks!r}"
        )
    length = int(batch.input_ids.shape[1]) if length is None else int(length)
    out = torch.zeros((len(encodings), length), dtype=torch.bool)
    for b, (enc, shift, task) in enumerate(zip(encodings, shifts, tasks)):
        out[b, shift + enc.prompt_offset + AUTHORS_DROPPED_PROMPT_CHARS.get(task, 0) :] = True
    return out


def score_rows(batch: Any, length: int | None = None):
    """bool [batch, L]: the rows the authors' code scores whether or not they have a
    reference: every row from the one that predicts target[0] to the one that predicts the
    EOS after the answer (their rows from `instruction_length + prompt_length +
    generation_prompt_length - 1` on). A row without a reference label, the EOS row among
    them, gets 0 from their `compute_percentages` and
    `evaluate_attention_prediction_correlation` (attention_evaluation/aggregation.py): the
    numerator is empty. Our encodings end the answer with one EOS, so one such row per
    sequence; their chat layout scores each closing token of the template the same way."""
    import torch

    encodings, shifts = batch.encodings, list(batch.shifts)
    length = int(batch.input_ids.shape[1]) if length is None else int(length)
    out = torch.zeros((len(encodings), length), dtype=torch.bool)
    for b, (enc, shift) in enumerate(zip(encodings, shifts)):
        first = shift + enc.target_offset - 1
        out[b, first : min(first + enc.target_len + 1, length)] = True  # + 1: the EOS row
    return out


def rollout_scores(rolled, reference, columns, convention: Convention = "paper", rows=None):
    """[batch, T]: per query row, the rollout mass on the reference columns over the mass on
    the denominator's columns (`columns`: bool [batch, L], `score_columns`).

    - `paper`: share = R[q, ref] / R[q, columns]; nan for rows without a reference (they
      are counted apart, never as zeros).
    - `authors`: share = R[q, ref] / R[q, columns | ref]; rows in `rows` (bool [batch, L],
      `score_rows`: the answer's rows and the EOS row) without a reference score 0, other
      rows without a reference nan.
    Masks longer or shorter than the rollout are cropped or padded."""
    import torch

    if check_convention(convention) == "authors" and rows is None:
        raise ValueError("convention='authors' needs rows= (score_rows(batch): the rows it scores)")
    length = rolled.shape[-1]
    ref = _fit(reference.to(rolled.device), length)
    cols = _fit(columns.to(rolled.device), length)[:, None, :]
    if convention == "authors":
        cols = cols | ref  # their reference labels are written after the column cut
    mass = (rolled * ref).sum(-1)
    total = (rolled * cols).sum(-1)
    share = mass / total.clamp(min=torch.finfo(rolled.dtype).tiny)
    empty = torch.full_like(share, float("nan"))
    if convention == "authors":
        scored = _fit(rows.to(rolled.device), length)
        empty = torch.where(scored, torch.zeros_like(share), empty)
    return torch.where(ref.any(-1), share, empty)


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


PAPER_TEST = "paper's test: pooled Welch t-test over tokens, as if tokens were independent"


def table2_statistics(
    records: Sequence[dict[str, Any]], n_resamples: int = 2000, seed: int = 0
) -> dict[str, Any]:
    """Correct versus wrong tokens of one (config, mode), JSON-safe (nan written as None):
    `paper_test` (`compare` over tokens, labelled as the paper's test) beside the
    instance-aware figures of `harness.foundation.stats.correct_vs_wrong` (cluster bootstrap over
    instances, within-instance paired test, length- and position-matched permutation test)
    and the `direction` read from them. `records`: one per token with `index` (and
    `config`), `length`, `position`, `share` (nan without a reference) and `correct`.

        table2_statistics(rows)["direction"]          # 'correct > wrong', ...
        table2_statistics(rows)["paper_test"]["welch_p"]
    """
    from harness.foundation.stats import correct_vs_wrong, json_safe

    out = correct_vs_wrong(records, n_resamples=n_resamples, seed=seed)
    # Unknown correctness (None or nan) is left out; a missing share counts as empty.
    paper = compare(
        [math.nan if r.get("share") is None else float(r["share"]) for r in records],
        [math.nan if r.get("correct") is None else float(r["correct"]) for r in records],
    )
    paper = {
        "label": PAPER_TEST,
        **paper,
        "n_tokens": paper["correct"]["n"] + paper["error"]["n"],
        "n_instances": out["n_instances"],  # the same tokens: a share and a known label
    }
    return {"direction": out.pop("direction"), "paper_test": json_safe(paper), **out}


def _to_numpy(values):
    if hasattr(values, "detach"):
        return values.detach().cpu().numpy()
    return values
