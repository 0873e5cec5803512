"""other_heads: at every dose of the ladder, the same push on n heads drawn from the heads
*other* than the top n (`Setting(heads="other")`), one setting per seed whose draw differs
(`harness.attention.interventions.other_seeds`). A gain that other heads also give is not
specific to the ranked ones. (At the grid's chosen setting the random-heads control draws
from every head: `random_heads`.)"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from harness.attention.controls.base import (
    AtDose,
    Column,
    Control,
    Option,
    Reading,
    Series,
    mean_or_none,
)
from harness.foundation.stats import format_number as _n

KEY = "random_heads"  # its field in each dose entry of the ladder's curve


def make_at_dose(top, options):
    return [dataclasses.replace(top, heads="other", seed=int(s)) for s in options.random_seeds]


def read(context, top, settings) -> dict[str, Any]:
    """Each draw's mean gain over the baseline, and their mean and range."""
    from harness.foundation.stats import pair_records

    def gain(records) -> float:
        pairs = pair_records(context.baseline, records)
        return sum(float(b[context.metric]) - float(a[context.metric]) for a, b in pairs) / len(
            pairs
        )

    gains = [
        {"setting": s.name, "seed": s.seed, "gain": gain(context.records[s.name])}
        for s in sorted(settings, key=lambda s: s.seed)
    ]
    values = [g["gain"] for g in gains]
    return {
        "draws": gains,
        "count": len(values),
        "mean": mean_or_none(values),
        "min": min(values) if values else None,
        "max": max(values) if values else None,
    }


def _drawn(entry: Mapping[str, Any]) -> Mapping[str, Any]:
    return entry.get(KEY) or {}


def columns(curve: Mapping[str, Any]) -> list[Column]:
    def cell(entry):
        if entry.get(KEY) is None:
            return "-"  # no controls at this rung (`dose_ladder(controlled=...)`)
        drawn = _drawn(entry)
        return f"{_n(drawn.get('mean'))} ({_n(drawn.get('max'))})"

    return [Column("random other heads: mean (max)", cell)]


def series(curve: Mapping[str, Any], entries) -> list[Series]:
    """The draws' mean with their min-max band, where any dose has a draw."""
    drawn = [_drawn(e) for e in entries]
    if not any(d.get("count") for d in drawn):
        return []
    count = max(int(d.get("count") or 0) for d in drawn)
    return [
        Series(
            "gain",
            f"random other heads ({count} draws)",
            lambda e: _drawn(e).get("mean"),
            "^",
            "C7",
            band=(lambda e: _drawn(e).get("min"), lambda e: _drawn(e).get("max")),
        )
    ]


def best_draw(entry: Mapping[str, Any] | None) -> float | None:
    return _drawn(entry).get("max") if entry else None


CONTROL = Control(
    "other_heads",
    None,
    ladder=AtDose(
        KEY,
        make_at_dose,
        read,
        columns,
        series,
        numbers=(Reading("random_heads_max", "chosen", best_draw),),
        # seeds whose head draws differ (`interventions.other_seeds`); none: no draw
        options=(Option("random_seeds", ()),),
    ),
)
