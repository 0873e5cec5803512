"""The per-instance values behind a dose curve: what every statistic of the curve is a mean
of, kept beside it so that a reader can compute the curve again from them, or resample the
instances (`harness.attention.verdicts.readings`).

    from harness.attention.instance_values import curve_values, rung_values
    curve["per_instance"]              # {"keys": [[config, index], ...], "baseline": [...], ...}
    curve["doses"][3]["per_instance"]  # {"reference": [...], "id": [...], "controls": {...}}

Every list is in the order of the curve's baseline records (the order `pair_records` pairs
them in, so the means and the bootstrap intervals come out bit for bit the same from them),
one value per instance, the values unrounded (a float rounded to 6 places moves a bootstrap
interval's end). The dose curve (`harness.attention.dose.dose_curve`) adds them under a key
of their own that no reader of the curve's statistics reads; this module reads the records
only, never changing a number of the curve.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.attention.controls.base import LadderContext


def _key(record: Mapping[str, Any]) -> list[Any]:
    return [record.get("config", ""), record["index"]]


def _after(context: LadderContext, treated: Sequence[Mapping[str, Any]], field: str) -> list:
    """`field` of `treated`'s records in the baseline's order (`pair_records`)."""
    from harness.foundation.stats import pair_records

    return [float(b[field]) for _, b in pair_records(context.baseline, treated)]


def curve_values(
    context: LadderContext, id_baseline: Sequence[Mapping[str, Any]] | None
) -> dict[str, Any]:
    """The curve's instances (their keys, in order), the baseline's metric per instance, the
    ID stream's keys and baseline teacher-forced exact match (None without ID records), and
    the bootstrap options the curve's intervals were computed with."""
    return {
        "metric": context.metric,
        "keys": [_key(r) for r in context.baseline],
        # each instance's target length: its token accuracy is a count of these
        "tokens": [r.get("target_len") for r in context.baseline],
        "baseline": [float(r[context.metric]) for r in context.baseline],
        "id_keys": None if id_baseline is None else [_key(r) for r in id_baseline],
        "id_baseline": None if id_baseline is None else [float(r["tf_exact"]) for r in id_baseline],
        "stats": dict(context.stats),
    }


def _pointer(context: LadderContext, setting) -> dict[str, Any]:
    """One shifted push per instance: its metric, and (on the instances with rows where the
    displaced answer differs from the gold one) how many such rows and the share of them
    whose argmax is that answer, at baseline and under the push (`pointer.following`)."""
    from harness.attention.controls.pointer import displaced, follow_share
    from harness.foundation.stats import pair_records, record_key

    k = setting.shift - context.shift
    wanted_by = displaced(context, k)
    rows, before, after = [], [], []
    for a, b in pair_records(context.baseline, context.records[setting.name]):
        wanted = wanted_by.get(record_key(a), {})
        rows.append(len(wanted))
        before.append(follow_share(a, wanted) if wanted else None)
        after.append(follow_share(b, wanted) if wanted else None)
    return {
        "shift": k,
        "after": _after(context, context.records[setting.name], context.metric),
        "following": {"rows": rows, "before": before, "after": after},
    }


def _control(context: LadderContext, role: str, settings) -> Any:
    """One control's settings at a rung, per instance: the pointer's pushes by "+k", the
    other heads' draws in seed order, any other control's settings by name (their metric)."""
    if role == "pointer":
        pushes = [_pointer(context, s) for s in settings]
        return {f"{p['shift']:+d}": p for p in sorted(pushes, key=lambda p: p["shift"])}
    if role == "other_heads":
        return [
            {"seed": s.seed, "after": _after(context, context.records[s.name], context.metric)}
            for s in sorted(settings, key=lambda s: s.seed)
        ]
    return {
        s.name: {"after": _after(context, context.records[s.name], context.metric)}
        for s in settings
    }


def rung_values(
    context: LadderContext,
    rung,
    id_records: Mapping[str, Sequence[Mapping[str, Any]]] | None,
) -> dict[str, Any]:
    """One rung per instance: the push's metric, its ID teacher-forced exact match (in the
    ID baseline's order; None without ID records) and each ladder control's values by role
    (None where the rung carries no controls)."""
    from harness.attention.setting import BASELINE
    from harness.foundation.stats import pair_records

    top = rung.top
    out: dict[str, Any] = {
        "reference": _after(context, context.records[top.name], context.metric),
        "id": None,
        "controls": None,
    }
    if id_records is not None and top.name in id_records:
        pairs = pair_records(id_records[BASELINE.name], id_records[top.name])
        out["id"] = [float(b["tf_exact"]) for _, b in pairs]
    if rung.controls:
        out["controls"] = {role: _control(context, role, made) for role, made in rung.controls}
    return out
