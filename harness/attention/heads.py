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
target row at ref-2 .. ref+2, tells which case a model is in.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.engine.positions import causal_valid, shift_mask  # noqa: F401  (re-exported)

HEADS_FILE = "heads.json"
OFFSETS = (-2, -1, 0, 1, 2)
DEFAULT_NUM = 30  # ID instances, as in the paper


@dataclass
class HeadRanking:
    """Scores per (layer, head) and the order they give.

    `scores[l][h]`: summed weight on the (shifted) reference keys over all target rows;
    `per_row[l][h]`: the same divided by the number of target rows with a reference (the
    mean weight a row puts there, 0..1); `order`: (layer, head) pairs, best first;
    `offsets[str(k)][l][h]`: mean weight per row at ref + k; `source`: where it came from.
    """

    scores: list[list[float]]
    per_row: list[list[float]]
    order: list[tuple[int, int]]
    offsets: dict[str, list[list[float]]] = field(default_factory=dict)
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
        import json

        path = Path(path)
        if path.is_dir():
            path = path / HEADS_FILE
        return cls.from_dict(json.loads(path.read_text()))


RANKED = "ranked"  # the named reference of the ranking itself when it is thresholded


def _batch_masses(scorer, batch, reference, wanted, shift: int, threshold: float):
    """{k: [layers, heads] summed weight on `ref + k` cells} for one batch, and with a
    threshold {RANKED: the same at `shift`, counting only weights above it}, every one
    recorded in ONE teacher-forced forward. The offsets are always the plain weights: they
    are the heads' levels (the offset profile, restore's ID level), whatever the ranking
    counts."""
    from harness.engine.capture import AttentionPlan, Reference

    references = {
        str(k): Reference(causal_valid(shift_mask(reference, k), batch.attention_mask))
        for k in wanted
    }
    if threshold > 0:
        references[RANKED] = Reference(references[str(shift)].mask, threshold)
    record = scorer.forward(batch, AttentionPlan(references=references), attention_only=True)
    return {k: record.mass(k) for k in references}


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
    rows = 0
    start = time.perf_counter()

    def one_batch(chunk, encodings):
        nonlocal rows
        batch = collate_left(encodings, scorer.char_tok.pad_id)
        reference = batch.reference_mask()
        rows += int(reference.any(-1).sum())
        for k, mass in _batch_masses(scorer, batch, reference, wanted, shift, threshold).items():
            sums[k] += mass.detach().float().cpu()

    batches = math.ceil(len(instances) / batch_size)
    with tqdm(total=batches, desc="heads", disable=not progress, dynamic_ncols=True) as bar:
        scorer.run(instances, one_batch, lambda _n: bar.update(1))
    scores = sums[ranked]
    flat = scores.flatten()
    # Stable order: ties (e.g. all zero) keep (layer, head) order.
    order = sorted(range(flat.numel()), key=lambda i: (-float(flat[i]), i))
    per_row = scores / max(rows, 1)
    return HeadRanking(
        scores=scores.tolist(),
        per_row=per_row.tolist(),
        order=[(i // num_heads, i % num_heads) for i in order],
        # the plain mean weight per row at every offset, the ranking's own shift included
        offsets={str(k): (sums[str(k)] / max(rows, 1)).tolist() for k in wanted},
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
