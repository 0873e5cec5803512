"""Rank attention heads by their attention on reference positions (paper v2, Appendix G).

    attentionspan heads --model runs/rev/final --config reversal_id -n 30 --output OUT
    from harness.attention.heads import rank_heads
    ranking = rank_heads(model, tokenizer, instances, prompt)   # a HeadRanking
    ranking.top(4)                                              # [(layer, head), ...]

On in-distribution instances, teacher-forced (the model is right there, so the true prefix
is what it would have written), every (layer, head) gets the sum of its post-softmax weights
on the reference keys of every target row (`capture`'s `head_mass`), and heads are ranked in
descending order. Options: `threshold` counts only weights above it (the authors' variant),
`shift` ranks by the weight on key `ref + shift` instead (docs/results.md: a shallow model's lookup
heads read the token after the reference). Each head's offset profile, its mean weight per
target row at ref-2 .. ref+2, tells which case a model is in: `lookup_offset` reads it
and `rank_lookup` ranks at the offset where the top heads look most (unless told one).

Ties are broken by a measured quantity, not by where a head sits: heads with the same score
are ordered by their whole offset profile's mass (the weight they put near the reference at
any offset), and only heads equal on both keep (layer, head) order.

Each head's null (`HeadRanking.nulls`): what attention spread evenly over each row's visible
keys would weigh at ref + k, averaged as the levels are (no forward: it depends on the masks
alone). Only heads that beat it (`harness.attention.lookup.beats_null`) count in the offset
profile's masses, look up, or make a near tie or a split lookup (`second_lookup`).

Lookup heads in distribution (`HeadRanking.lookup`, `harness.attention.lookup.lookup_heads`):
the heads whose ID weight per row at the ranking's offset is at least LOOKUP_SHARE of the top
head's and that beat their null. They are the heads the verdict must push together (a
redundant partner is one of them), never draw as "random other heads", and read when no
push gains. The pipeline carries
them, with the offset, as one value (`harness.attention.lookup.Lookup`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.attention.lookup import LOOKUP_SHARE, beats_null, lookup_heads, null_at
from harness.engine.positions import causal_valid, shift_mask  # noqa: F401  (re-exported)

HEADS_FILE = "heads.json"
OFFSETS = (-2, -1, 0, 1, 2)
DEFAULT_NUM = 30  # ID instances, as in the paper
OFFSET_HEADS = 4  # lookup_offset compares the mean ID mass of the top 4 heads at each offset
# the lookup is read away from the reference only when the top heads weigh that offset more
# than 10% above the reference: the reference is the hypothesis the task states, and a near
# tie (SmolLM2 fine-tuned on reversal: 0.455 at ref+1, 0.436 at the reference) is no evidence
OFFSET_MARGIN = 0.10


@dataclass
class HeadRanking:
    """Scores per (layer, head) and the order they give.

    `scores[l][h]`: summed weight on the (shifted) reference keys over all target rows;
    `per_row[l][h]`: the same divided by the number of target rows with a reference (the
    mean weight a row puts there, 0..1); `order`: (layer, head) pairs, best first;
    `offsets[str(k)][l][h]`: mean weight per row at ref + k; `nulls[str(k)]`: what attention
    spread evenly over each row's visible keys would weigh at ref + k, averaged as the levels
    are (the same for every head: it depends on the masks alone; empty in a ranking saved
    before it was measured); `output_norms[l][h]`: the head's ID norm, the mean over the
    target rows (the rows with a reference: the ID answer rows, teacher-forced) of the L2
    norm of its output there (its weights @ values, per row, before the output projection),
    the length the output-scale control rescales each OOD row to (empty in a ranking saved
    before it was measured: that control is then not run); `source`: where it came from.
    """

    scores: list[list[float]]
    per_row: list[list[float]]
    order: list[tuple[int, int]]
    offsets: dict[str, list[list[float]]] = field(default_factory=dict)
    nulls: dict[str, float] = field(default_factory=dict)
    output_norms: list[list[float]] = field(default_factory=list)
    rows: int = 0
    source: dict[str, Any] = field(default_factory=dict)

    @property
    def num_layers(self) -> int:
        return len(self.scores)

    @property
    def num_heads(self) -> int:
        return len(self.scores[0]) if self.scores else 0

    @property
    def total(self) -> int:
        return self.num_layers * self.num_heads

    def top(self, n: int) -> list[tuple[int, int]]:
        return [tuple(x) for x in self.order[:n]]

    def bottom(self, n: int) -> list[tuple[int, int]]:
        return [tuple(x) for x in self.order[::-1][:n]]

    def lookup(self, share: float = LOOKUP_SHARE) -> list[tuple[int, int]]:
        """`lookup_heads(self, share)`: the heads that look up in distribution."""
        return lookup_heads(self, share)

    def profile(self, layer: int, head: int) -> dict[str, float]:
        """Mean weight per target row at each offset from the reference."""
        return {k: values[layer][head] for k, values in self.offsets.items()}

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["order"] = [list(x) for x in self.order]
        data["top"] = [
            {"layer": la, "head": h, "score": self.scores[la][h], "per_row": self.per_row[la][h]}
            | ({"offsets": self.profile(la, h)} if self.offsets else {})
            for la, h in self.top(min(16, self.total))
        ]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HeadRanking:
        return cls(
            scores=data["scores"],
            per_row=data["per_row"],
            order=[tuple(x) for x in data["order"]],
            offsets=data.get("offsets", {}),
            nulls=data.get("nulls", {}),
            output_norms=data.get("output_norms", []),
            rows=data.get("rows", 0),
            source=data.get("source", {}),
        )

    def save(self, path: str | Path) -> Path:
        import json

        from attentionspan_datasets.atomic import atomic_write_text

        path = Path(path)
        if path.is_dir() or not path.suffix:
            path = path / HEADS_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(self.to_dict(), indent=1) + "\n")
        return path

    @classmethod
    def load(cls, path: str | Path) -> HeadRanking:
        from attentionspan_datasets.jsonfile import read_json

        path = Path(path)
        if path.is_dir():
            path = path / HEADS_FILE
        return cls.from_dict(read_json(path, expect=dict))


RANKED = "ranked"  # the named reference of the ranking itself when it is thresholded


def _shifted_masks(batch, reference, wanted) -> dict[str, Any]:
    """{str(k): bool [batch, L, L] the `ref + k` cells a query may attend} for one batch."""
    from harness.engine.positions import task_columns

    # a moved reference keeps to the task text: ref-1 of the first prompt character is BOS
    # (or the chat template), where attention sinks put their weight whatever they look up
    text = task_columns(batch, reference.shape[-1])[:, None, :].to(reference.device)
    return {
        str(k): causal_valid(shift_mask(reference, k) & (text if k else True), batch.attention_mask)
        for k in wanted
    }


def _batch_masses(scorer, batch, reference, wanted, shift: int, threshold: float):
    """({k: [layers, heads] summed weight on `ref + k` cells} for one batch, and with a
    threshold {RANKED: the same at `shift`, counting only weights above it}; [layers, heads]
    each head's output norm summed over the answer rows), every one recorded in ONE
    teacher-forced forward. The offsets are always the plain weights: they are the heads'
    levels (the offset profile, restore's ID level), whatever the ranking counts. The answer
    rows are the rows with a reference (the rows the levels average over): a head's output
    there is what it writes where the model answers, the output-scale control's target."""
    from harness.engine.capture import AttentionPlan, Reference

    references = {k: Reference(m) for k, m in _shifted_masks(batch, reference, wanted).items()}
    if threshold > 0:
        references[RANKED] = Reference(references[str(shift)].mask, threshold)
    plan = AttentionPlan(references=references, output_rows=reference.any(-1))
    record = scorer.forward(batch, plan, attention_only=True)
    return {k: record.mass(k) for k in references}, record.output_norms.nan_to_num(0.0).sum((0, 1))


def _batch_nulls(batch, reference, wanted) -> dict[str, float]:
    """{str(k): the weight attention spread evenly over each row's visible keys would put on
    its `ref + k` cells (cells / visible keys), summed over the rows with a reference}: a
    head's null at k, summed as its level is (no forward: it depends on the masks alone)."""
    import torch

    rows = reference.any(-1)
    everything = torch.ones_like(reference, dtype=torch.bool)
    visible = causal_valid(everything, batch.attention_mask).sum(-1).clamp(min=1)
    return {
        k: float((mask.sum(-1) / visible)[rows].sum())
        for k, mask in _shifted_masks(batch, reference, wanted).items()
    }


def rank_heads(
    model,
    tokenizer,
    instances: Sequence[Any],
    prompt=None,
    threshold: float = 0.0,
    shift: int = 0,
    batch_size: int = 16,
    offsets: Sequence[int] = OFFSETS,
    source: dict[str, Any] | None = None,
    progress: bool = False,
) -> HeadRanking:
    """Rank every head of `model` on `instances` (teacher-forced, left-padded batches)."""
    import math

    import torch
    from tqdm.auto import tqdm

    from harness.engine.scoring import Scorer, collate_left, model_shape

    if not instances:
        raise ValueError("rank_heads needs at least one instance")
    if not 0 <= threshold < 1:  # nan fails too; weights are at most 1 and count when above it
        raise ValueError(f"threshold must be in [0, 1), got {threshold}")
    scorer = Scorer(model, tokenizer, prompt, batch_size)
    num_layers, num_heads = model_shape(model)
    wanted = sorted(set(offsets) | {shift})
    ranked = RANKED if threshold > 0 else str(shift)
    sums = {str(k): torch.zeros(num_layers, num_heads) for k in wanted}
    sums[ranked] = torch.zeros(num_layers, num_heads)
    nulls = {str(k): 0.0 for k in wanted}
    norm_sum = torch.zeros(num_layers, num_heads)  # each head's output norm, summed over rows
    rows = 0
    start = time.perf_counter()

    def one_batch(chunk, encodings):
        nonlocal rows
        batch = collate_left(encodings, scorer.char_tok.pad_id)
        reference = batch.reference_mask()
        rows += int(reference.any(-1).sum())
        masses, norms = _batch_masses(scorer, batch, reference, wanted, shift, threshold)
        for k, mass in masses.items():
            sums[k] += mass.detach().float().cpu()
        norm_sum.add_(norms.detach().float().cpu())
        for k, null in _batch_nulls(batch, reference, wanted).items():
            nulls[k] += null

    batches = math.ceil(len(instances) / batch_size)
    with tqdm(total=batches, desc="heads", disable=not progress, dynamic_ncols=True) as bar:
        scorer.run(instances, one_batch, lambda _n: bar.update(1))
    scores = sums[ranked]
    flat = scores.flatten()
    # Ties are broken by the head's whole offset profile (its weight near the reference at
    # any offset), then by (layer, head) where that is equal too (e.g. all zero).
    near = sum(sums[str(k)] for k in wanted).flatten()
    order = sorted(range(flat.numel()), key=lambda i: (-float(flat[i]), -float(near[i]), i))
    per_row = scores / max(rows, 1)
    return HeadRanking(
        scores=scores.tolist(),
        per_row=per_row.tolist(),
        order=[(i // num_heads, i % num_heads) for i in order],
        # the plain mean weight per row at every offset, the ranking's own shift included
        offsets={str(k): (sums[str(k)] / max(rows, 1)).tolist() for k in wanted},
        nulls={k: v / max(rows, 1) for k, v in nulls.items()},
        output_norms=(norm_sum / max(rows, 1)).tolist(),
        rows=rows,
        source={
            **(source or {}),
            "instances": len(instances),
            "threshold": threshold,
            "shift": shift,
            "prompt": dataclasses.asdict(scorer.prompt),
            "time_s": round(time.perf_counter() - start, 2),
        },
    )


# --- where the lookup reads ------------------------------------------------------------------
def offset_masses(ranking: HeadRanking, n: int = OFFSET_HEADS) -> dict[int, float]:
    """{offset k: the mean ID weight per row at ref + k of the n heads that weigh it most,
    among the heads that beat their null there} from the ranking's offset profile: a
    previous-token head whose weight lands on the reference on one row per answer, or heads
    spreading their weight evenly, are not a lookup and do not lift an offset (0.0 where no
    head beats its null; every head counts in a ranking without nulls)."""
    out = {}
    for k, values in ranking.offsets.items():
        null = null_at(ranking, int(k))
        flat = sorted(
            (v for layer in values for v in layer if null is None or beats_null(v, null)),
            reverse=True,
        )
        top = flat[: max(1, min(n, len(flat)))]
        out[int(k)] = sum(top) / len(top) if top else 0.0
    return dict(sorted(out.items()))


def lookup_offset(ranking: HeadRanking, n: int = OFFSET_HEADS) -> dict[str, Any]:
    """Where the lookup reads: the offset k whose top-n heads' ID mass at ref + k is largest
    (`offset_masses`: heads beating their null only; on a tie the offset nearest the
    reference, then the smaller), unless it is within OFFSET_MARGIN of the reference's (then
    the reference), with the masses and a sentence ("the lookup reads ref+1: ID mass 0.81, at
    the reference 0.17"; where no head beats its null anywhere, the reference, saying so).
    ValueError when the ranking has no offset profile."""
    masses = offset_masses(ranking, n)
    if not masses:
        raise ValueError("the ranking has no offset profile (rank_heads measures one)")
    best = max(masses, key=lambda k: (round(masses[k], 12), -abs(k), -k))
    if 0 in masses and masses[best] <= (1 + OFFSET_MARGIN) * masses[0]:
        best = 0
    text = offset_text(best, masses)
    if masses[best] <= 0 and ranking.nulls:
        text = (
            "no head beats its null at any offset (what attention spread evenly over the same "
            "keys would weigh there): no lookup to read; ranked at the reference"
        )
    return {
        "offset": best,
        "mass": masses[best],
        "masses": {f"{k:+d}" if k else "0": v for k, v in masses.items()},
        "heads": n,
        "text": text,
    }


def own_heads(ranking: HeadRanking, offset: int, chosen: int) -> list[tuple[int, int]]:
    """The lookup heads at `offset` (`lookup_heads` there: half the top head's weight and
    beating the null) that do not beat their null at `chosen`: heads that look up at
    `offset` and not at the chosen offset (empty in a ranking without nulls)."""
    null = null_at(ranking, chosen)
    there = ranking.offsets.get(str(int(chosen)))
    if null is None or there is None or null_at(ranking, offset) is None:
        return []
    return [
        (la, h)
        for la, h in lookup_heads(ranking, offset=offset)
        if not beats_null(there[la][h], null)
    ]


def second_lookup(
    ranking: HeadRanking, chosen: int, n: int = OFFSET_HEADS
) -> dict[str, Any] | None:
    """The second candidate lookup, or None. Two cases, the heads of both beating their null
    (`offset_masses`: an offset where none does weighs 0 and is never a candidate):
    - a near tie: offsets whose top-n heads' ID mass is within OFFSET_MARGIN of the largest
      (largest <= (1 + OFFSET_MARGIN) x theirs, and above 0);
    - a split lookup: an offset with heads of its own (`own_heads`: lookup heads there that
      do not beat their null at `chosen`) weighing LOOKUP_SHARE of the chosen offset's mass
      or more: part of the lookup reads there, and it is judged there too.
    At most two lookups are judged: `chosen` (`lookup_offset`'s offset, the first) and the
    candidate other than it with the largest mass (on a tie the nearest the reference, then
    the smaller). None when there is none (one lookup). SmolLM2 fine-tuned on reversal: 0.436
    at the reference (chosen, by the margin) and 0.455 at ref+1: ref+1 is the second."""
    masses = offset_masses(ranking, n)
    best = max(masses.values(), default=0.0)
    if best <= 0:
        return None
    tied = {
        k for k, v in masses.items() if k != chosen and v > 0 and best <= (1 + OFFSET_MARGIN) * v
    }
    split = {
        k
        for k, v in masses.items()
        if k != chosen
        and v > 0
        and v >= LOOKUP_SHARE * masses.get(chosen, 0.0)
        and own_heads(ranking, k, chosen)
    }
    if not tied | split:
        return None
    k = max(tied | split, key=lambda j: (round(masses[j], 12), -abs(j), -j))
    where = "the reference" if chosen == 0 else f"ref{chosen:+d}"
    here = "the reference" if k == 0 else f"ref{k:+d}"
    both = f"{where} (ID mass {masses.get(chosen, 0):.2f}) and {here} ({masses[k]:.2f})"
    if k in tied:
        text = (
            f"two candidate lookups: {both}, both within {OFFSET_MARGIN:.0%} of the largest: "
            "both are judged"
        )
    else:
        heads = ", ".join(f"({la}, {h})" for la, h in own_heads(ranking, k, chosen))
        text = (
            f"a lookup split across two offsets: {both}; heads {heads} look up at {here} and "
            f"not at {where}: both are judged"
        )
    return {
        "offset": k,
        "mass": masses[k],
        "masses": {f"{j:+d}" if j else "0": v for j, v in masses.items()},
        "heads": n,
        "found": True,
        "candidate": 2,
        "split": k not in tied,
        "text": text,
    }


def offset_text(offset: int, masses: dict[int, float], how: str = "") -> str:
    """ "the lookup reads ref+1: ID mass 0.81, at the reference 0.17" (`how`, e.g. "(--shift)",
    follows the offset)."""
    where = "the reference" if offset == 0 else f"ref{offset:+d}"
    text = f"the lookup reads {where}{' ' + how if how else ''}: ID mass {masses[offset]:.2f}"
    if offset != 0 and 0 in masses:
        text += f", at the reference {masses[0]:.2f}"
    elif offset == 0:
        others = {k: v for k, v in masses.items() if k != 0}
        if others:
            k = max(others, key=lambda j: (others[j], -abs(j)))
            if others[k] > masses[0]:  # kept by the margin: say so
                text += (
                    f"; ref{k:+d} {others[k]:.2f} is within {OFFSET_MARGIN:.0%} of it, too "
                    "close to move the lookup away from the reference"
                )
            else:
                text += f", next ref{k:+d} {others[k]:.2f}"
    return text


def rank_lookup(
    model, tokenizer, instances, prompt=None, shift: int | None = None, **options
) -> tuple[HeadRanking, dict[str, Any]]:
    """The ranking at the offset where the lookup reads: `rank_heads` at the reference, then,
    unless `shift` is given (--shift overrides), again at `lookup_offset`'s offset when it is
    not 0. Returns (ranking, offset: `lookup_offset`'s dict with "found" False when given)."""
    first = rank_heads(model, tokenizer, instances, prompt, shift=shift or 0, **options)
    found = lookup_offset(first)
    if shift is not None:
        masses = {int(k): v for k, v in found["masses"].items()}
        chosen = {
            **found,
            "offset": shift,
            "mass": masses.get(shift),
            "found": False,
            "text": offset_text(shift, masses, "(given by --shift)")
            if shift in masses
            else f"the lookup is read at ref{shift:+d} (given by --shift)",
        }
        return first, chosen
    found["found"] = True
    if found["offset"] == 0:
        return first, found
    return rank_heads(model, tokenizer, instances, prompt, shift=found["offset"], **options), found
