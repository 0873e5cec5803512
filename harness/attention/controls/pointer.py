"""pointer: the push with its cells moved to ref + k for each pointer shift, at the grid's
chosen setting and at every dose of the ladder. A repaired lookup has no reason to copy what
sits k keys away; a pointer does (at the grid the repair-or-pointer verdict reads how often
the answer follows, `harness.attention.controls.following`; on the ladder, how often the
teacher-forced answer is what the task gives on the text moved by k).

The two places push at different shifts, each its own option default. The ladder
(`LADDER_POINTER_SHIFTS`) pushes at ref-3, -2, -1, +1, +2 and +3: a neighbour of the
reference may carry what the reference does (on addition ref-1, the carry's digits, holds a
third of the ID mass), so a push at ref+-1 or +-2 that gains as much as the reference push
must be seen before a gain is read as a mended lookup (the calibrated verdict requires each
to be measured, not followed and to gain less). The grid (`POINTER_SHIFTS`) keeps ref-3 and
ref+3: the older repair-or-pointer rule reads them there, and its behaviour and cost stay
as they were."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from harness.attention.controls.base import (
    AtDose,
    Column,
    Control,
    LadderContext,
    Option,
    Reading,
    Series,
    mean_or_none,
)
from harness.attention.evidence import followed
from harness.foundation.stats import format_gain, record_key
from harness.foundation.stats import format_number as _n

POINTER_SHIFTS = (-3, 3)  # at the grid's chosen setting: the push at ref-3 and ref+3
LADDER_POINTER_SHIFTS = (-3, -2, -1, 1, 2, 3)  # on the ladder, at the rungs the verdict reads
KEY = "pointers"  # its field in each dose entry of the ladder's curve


def pointer_settings(chosen, shifts=POINTER_SHIFTS):
    """The chosen heads and C with their cells moved to `ref + k` for each k."""
    if chosen.is_baseline:
        return []
    check_shifts(shifts)
    return [dataclasses.replace(chosen, shift=chosen.shift + int(k)) for k in shifts]


def check_shifts(shifts: Sequence[int]) -> None:
    if any(int(k) == 0 for k in shifts):
        raise ValueError(f"pointer shifts must be non-zero, got {list(shifts)}")


def make(chosen, options):
    return pointer_settings(chosen, options.pointer_shifts) if options.pointer_shifts else []


# --- at every dose of the ladder ---------------------------------------------------------------
def make_at_dose(top, options):
    """The top-n push at shift + k for each pointer shift k."""
    check_shifts(options.pointer_shifts)
    return [dataclasses.replace(top, shift=top.shift + int(k)) for k in options.pointer_shifts]


def displaced(context: LadderContext, k: int) -> dict[tuple, dict[int, str]]:
    """Per instance, the rows whose displaced answer (the task's function on the text moved
    by k, `harness.attention.diagnosis.displaced_answer`) exists and differs from the gold
    character: row -> that answer. Once per curve."""
    from harness.attention.diagnosis import displaced_answer

    if ("displaced", k) not in context.cache:
        out = {}
        for x in context.instances:
            rows = {}
            for i, gold in enumerate(x.target):
                answer = displaced_answer(x, x.text, i, k)
                if answer is not None and answer != gold:
                    rows[i] = answer
            out[record_key({"config": x.config, "index": x.index})] = rows
        context.cache[("displaced", k)] = out
    return context.cache[("displaced", k)]


def follow_share(record: Mapping[str, Any], rows: Mapping[int, str]) -> float:
    """The share of `rows` whose teacher-forced argmax is the displaced answer."""
    predicted = record["tf_prediction"]
    hits = sum(1 for i, answer in rows.items() if i < len(predicted) and predicted[i] == answer)
    return hits / len(rows)


def following(context: LadderContext, treated, k: int) -> dict[str, Any]:
    """How often the answer follows the push at ref + k, per instance, against the same
    rows at baseline (rate, baseline, the paired gain, rows and instances counted)."""
    from harness.foundation.stats import pair_records, paired_gain

    wanted_by = displaced(context, k)
    before, after, rows = [], [], 0
    for a, b in pair_records(context.baseline, treated):
        wanted = wanted_by.get(record_key(a), {})
        if not wanted:
            continue
        before.append(follow_share(a, wanted))
        after.append(follow_share(b, wanted))
        rows += len(wanted)
    return {
        "rate": mean_or_none(after),
        "baseline": mean_or_none(before),
        "gain": paired_gain(before, after, **context.stats),
        "rows": rows,
        "instances": len(after),
    }


def _shift_of(context: LadderContext, setting) -> int:
    return setting.shift - context.shift


def read(context: LadderContext, top, settings) -> dict[str, Any]:
    """{"+k": the push's gain and how often it is followed} at one dose."""
    out = {}
    for s in sorted(settings, key=lambda s: _shift_of(context, s)):
        k = _shift_of(context, s)
        records = context.records[s.name]
        out[f"{k:+d}"] = {
            "setting": s.name,
            "gain": context.paired(records),
            "following": following(context, records, k),
        }
    return out


def shifts_of(context: LadderContext, made) -> list[int]:
    return sorted({_shift_of(context, s) for s in made})


def curve_fields(context: LadderContext, made) -> dict[str, Any]:
    return {"pointer_shifts": shifts_of(context, made)}


def baseline_fields(context: LadderContext, made) -> dict[str, Any]:
    """How often the baseline already writes each displaced answer."""
    return {
        "following": {
            f"{k:+d}": mean_or_none(
                [
                    follow_share(r, displaced(context, k)[record_key(r)])
                    for r in context.baseline
                    if displaced(context, k).get(record_key(r))
                ]
            )
            for k in shifts_of(context, made)
        }
    }


def _shown(curve: Mapping[str, Any]) -> list[str]:
    return [f"{int(k):+d}" for k in curve.get("pointer_shifts") or []]


def columns(curve: Mapping[str, Any]) -> list[Column]:
    def cell(k):
        def at(entry):
            if entry.get(KEY) is None:
                return "-"  # no controls at this rung (`dose_ladder(controlled=...)`)
            p = entry[KEY].get(k) or {}
            follow = (p.get("following") or {}).get("gain") or {}
            gain = format_gain(p["gain"]) if p.get("gain") else "-"
            return f"{gain}, {_n(follow.get('gain'))}"

        return at

    return [Column(f"push at ref{k}: gain, following", cell(k)) for k in _shown(curve)]


NEAR_ALPHA = 0.45  # the figure's nearer pushes: lighter than the farthest (ref+-3), as now
MARKERS = ("s", "^", "v", "D", "P")  # by distance from the reference, farthest first


def style(shown: Sequence[str]) -> dict[str, tuple[str, str, float]]:
    """Each shown shift's (colour, marker, alpha) in the dose figure: the pushes before the
    reference in one colour and those after it in another (C2, C3: the ref-3 and ref+3 lines
    keep the colours they had), the farthest on each side drawn full and the nearer ones
    lighter with their own markers, so six shifts stay readable beside the reference."""
    distances = sorted({abs(int(k)) for k in shown}, reverse=True)
    out = {}
    for k in shown:
        rank = distances.index(abs(int(k)))
        out[k] = (
            "C2" if int(k) < 0 else "C3",
            MARKERS[min(rank, len(MARKERS) - 1)],
            1.0 if rank == 0 else NEAR_ALPHA,
        )
    return out


def series(curve: Mapping[str, Any], entries) -> list[Series]:
    def push(entry, k):
        return (entry.get(KEY) or {}).get(k) or {}

    out = []
    shown = _shown(curve)
    for k, (colour, marker, alpha) in style(shown).items():

        def gain(entry, k=k):
            return (push(entry, k).get("gain") or {}).get("gain")

        def rate(entry, k=k):
            return (push(entry, k).get("following") or {}).get("rate")

        out.append(Series("gain", f"pointer ref{k}", gain, marker, colour, alpha=alpha))
        out.append(Series("rate", f"follows ref{k}", rate, marker, colour, alpha=alpha))
    return out


def followed_at(entry: Mapping[str, Any] | None) -> dict[str, float]:
    """The shifted pushes followed at one dose entry (`harness.attention.evidence`)."""
    return followed((entry or {}).get(KEY))


# the offsets k of the pushes at ref + k: at the grid, and on the ladder (module docstring)
SHIFTS = Option("pointer_shifts", POINTER_SHIFTS)
LADDER_SHIFTS = Option("pointer_shifts", LADDER_POINTER_SHIFTS)

CONTROL = Control(
    "pointer",
    make,
    "`*shift-3`, `*shift+3` the chosen push at ref-3 / ref+3 (pointer shift)",
    AtDose(
        KEY,
        make_at_dose,
        read,
        columns,
        series,
        numbers=(
            Reading("followed", "chosen", followed_at),
            Reading("followed_at_top", "top", followed_at),
        ),
        curve_fields=curve_fields,
        baseline_fields=baseline_fields,
        options=(LADDER_SHIFTS,),
    ),
    options=(SHIFTS,),
)
