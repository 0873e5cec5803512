"""The dose-response ladder: the ranked heads pushed at every C of a ladder, with the
controls measured at the same dose, from teacher-forced passes (one forward per batch).

    from harness.attention.dose import dose_settings, dose_curve, run_dose_ladder
    curve = run_dose_ladder(model, tokenizer, prompt, ranking, 4, ood, id_instances)
    curve["doses"][3]["reference"]        # {'gain': .., 'low': .., 'high': .., 'n': ..}

A verdict read at one chosen C says little: a repairable lookup gains from a small dose, a
pointer follows wherever it is pushed, and any push large enough breaks the model. So the
ladder reads, at each dose C (and in conditional mode each threshold):
- reference: the top-n heads pushed at the reference (moved by the ranking's `shift`): the
  paired gain in teacher-forced token accuracy over the baseline, per instance, with its
  bootstrap 95% interval (`harness.foundation.stats.paired_gain`);
- pointers: the same push at ref + shift + k for each pointer shift k: its gain, and how
  often the model *follows* it: over the rows where the task's function on the text moved
  by k gives another character than the gold one (`harness.attention.diagnosis.
  displaced_answer`, which applies the task's oracle, so it holds for tasks whose reference
  is not the answer), the share whose teacher-forced argmax is that displaced answer, per
  instance, minus the same share at baseline;
- random heads: n heads drawn from the heads *other* than the top n (`Setting(heads=
  "other")`), several distinct draws (all of them when a model has fewer distinct sets),
  each draw's gain, their mean and range;
- ID: the same top-n push on ID instances, its teacher-forced exact match and token
  accuracy (a push that repairs OOD by breaking ID is no repair).

Every statistic is over instances, not tokens. Everything is teacher-forced
(`score_settings(..., generate=False)`): one forward per batch carries every setting of
the ladder as a per-row intervention. This module returns data and writes nothing (the
plot is `harness.report.plots.dose_response`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from harness.attention.setting import BASELINE, Setting
from harness.engine.modes import MODES
from harness.foundation.stats import record_key

DEFAULT_DOSES = (0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0)
POINTER_SHIFTS = (-3, 3)
DEFAULT_DRAWS = 8  # random other-heads draws per dose (fewer when fewer distinct sets exist)
METRIC = "tf_token_acc"

# Roles of the ladder's settings (`Setting.role`: not part of what a setting computes).
ROLE_DOSE, ROLE_POINTER, ROLE_OTHER = "dose", "pointer", "other_heads"


def _rungs(mode: str, doses: Sequence[float], thresholds: Sequence[float]):
    """(strength, threshold) of every rung, in order: per threshold, the doses."""
    if not doses:
        raise ValueError("doses must not be empty")
    reads = MODES[mode].reads if mode in MODES else ()
    if mode not in MODES or "strength" not in reads:
        strength_modes = [m for m, v in MODES.items() if "strength" in v.reads]
        raise ValueError(f"a dose ladder needs a mode with a strength C: {strength_modes}")
    if "threshold" in reads:
        if not thresholds:
            raise ValueError(f"mode {mode!r} needs at least one threshold")
        return [(float(c), float(t)) for t in thresholds for c in doses]
    return [(float(c), 0.0) for c in doses]


def dose_settings(
    n: int,
    doses: Sequence[float] = DEFAULT_DOSES,
    shift: int = 0,
    *,
    mode: str = "standard",
    thresholds: Sequence[float] = (),
    pointer_shifts: Sequence[int] = POINTER_SHIFTS,
    random_seeds: Sequence[int] = (),
) -> list[Setting]:
    """The baseline, then per rung (each dose C; in a mode with a threshold, each threshold
    x each dose): top-n at C at the ranking's `shift`, the same at shift + k for each
    pointer shift k, and one `other` setting (n heads drawn outside the top n) per seed of
    `random_seeds` (`harness.attention.interventions.other_seeds` gives seeds whose head
    sets differ)."""
    if any(int(k) == 0 for k in pointer_shifts):
        raise ValueError(f"pointer shifts must be non-zero, got {list(pointer_shifts)}")
    settings = [BASELINE]
    for strength, threshold in _rungs(mode, doses, thresholds):
        top = Setting(
            heads="top",
            n=n,
            strength=strength,
            mode=mode,
            threshold=threshold,
            shift=shift,
            role=ROLE_DOSE,
        )
        settings.append(top)
        settings += [
            dataclasses.replace(top, shift=shift + int(k), role=ROLE_POINTER)
            for k in pointer_shifts
        ]
        settings += [
            dataclasses.replace(top, heads="other", seed=int(s), role=ROLE_OTHER)
            for s in random_seeds
        ]
    names = [s.name for s in settings]
    if len(set(names)) != len(names):
        raise ValueError(f"the ladder's settings must be distinct, got {names}")
    return settings


# --- the curve ---------------------------------------------------------------------------
def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _paired(baseline, treated, metric: str, **stats) -> dict[str, Any]:
    """paired_gain of `metric` over instances, with both means beside it."""
    from harness.foundation.stats import pair_records, paired_gain

    pairs = pair_records(baseline, treated)
    before = [float(a[metric]) for a, _ in pairs]
    after = [float(b[metric]) for _, b in pairs]
    return {
        **paired_gain(before, after, **stats),
        "baseline": _mean(before),
        "treated": _mean(after),
    }


def _displaced(instances, k: int) -> dict[tuple, dict[int, str]]:
    """Per instance, the rows whose displaced answer (the task's function on the text moved
    by k) exists and differs from the gold character: row -> that answer."""
    from harness.attention.diagnosis import displaced_answer

    out = {}
    for x in instances:
        rows = {}
        for i, gold in enumerate(x.target):
            answer = displaced_answer(x, x.text, i, k)
            if answer is not None and answer != gold:
                rows[i] = answer
        out[record_key({"config": x.config, "index": x.index})] = rows
    return out


def _follow_share(record: Mapping[str, Any], rows: Mapping[int, str]) -> float:
    """The share of `rows` whose teacher-forced argmax is the displaced answer."""
    predicted = record["tf_prediction"]
    hits = sum(1 for i, answer in rows.items() if i < len(predicted) and predicted[i] == answer)
    return hits / len(rows)


def _following(baseline, treated, displaced, **stats) -> dict[str, Any]:
    from harness.foundation.stats import pair_records, paired_gain

    before, after, rows = [], [], 0
    for a, b in pair_records(baseline, treated):
        wanted = displaced.get(record_key(a), {})
        if not wanted:
            continue
        before.append(_follow_share(a, wanted))
        after.append(_follow_share(b, wanted))
        rows += len(wanted)
    return {
        "rate": _mean(after),
        "baseline": _mean(before),
        "gain": paired_gain(before, after, **stats),
        "rows": rows,
        "instances": len(after),
    }


def _draws_gain(baseline, treated, metric: str) -> float:
    from harness.foundation.stats import pair_records

    pairs = pair_records(baseline, treated)
    return sum(float(b[metric]) - float(a[metric]) for a, b in pairs) / len(pairs)


def dose_curve(
    instances: Sequence[Any],
    records_by_setting: Mapping[str, Sequence[Mapping[str, Any]]],
    shift: int = 0,
    id_records: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    *,
    seed: int = 0,
    n_resamples: int | None = None,
    confidence: float | None = None,
) -> dict[str, Any]:
    """The ladder read from teacher-forced records (`score_settings(..., generate=False)`)
    of `dose_settings`' settings on `instances` (OOD), keyed by setting name; `shift` is
    the ranking's (the pointers are the top-n settings at any other shift);
    `id_records`: the baseline and the top-n settings on ID instances (optional). Returns
    a JSON-serialisable dict: {"n", "shift", "mode", "pointer_shifts", "instances",
    "baseline": {...}, "doses": [one per rung, in the order of C within each threshold]}."""
    from harness.foundation.stats import mean_interval

    stats: dict[str, Any] = {"seed": seed}
    if n_resamples is not None:
        stats["n_resamples"] = n_resamples
    if confidence is not None:
        stats["confidence"] = confidence
    if BASELINE.name not in records_by_setting:
        raise ValueError("dose_curve needs the baseline's records")
    base = records_by_setting[BASELINE.name]
    parsed = [Setting.from_name(name) for name in records_by_setting if name != BASELINE.name]
    tops = [s for s in parsed if s.heads == "top" and s.shift == shift]
    if not tops:
        raise ValueError(f"no top-n setting at shift {shift} among the records")
    modes = {s.mode for s in tops}
    counts = {s.n for s in tops}
    if len(modes) != 1 or len(counts) != 1:
        raise ValueError(f"one mode and one n per ladder, got {sorted(modes)}, {sorted(counts)}")

    def rung(s: Setting) -> tuple[float, float]:
        return (s.threshold, s.strength)

    tops.sort(key=rung)
    pointer_shifts = sorted({s.shift - shift for s in parsed if s.heads == "top"} - {0})
    displaced = {k: _displaced(instances, k) for k in pointer_shifts}
    id_base = (id_records or {}).get(BASELINE.name)
    uses_threshold = "threshold" in MODES[tops[0].mode].reads
    doses = []
    for top in tops:
        treated = records_by_setting[top.name]
        entry: dict[str, Any] = {
            "strength": top.strength,
            "threshold": top.threshold if uses_threshold else None,
            "setting": top.name,
            "reference": _paired(base, treated, METRIC, **stats),
            "pointers": {},
        }
        for k in pointer_shifts:
            moved = dataclasses.replace(top, shift=shift + k)
            if moved.name not in records_by_setting:
                continue
            records = records_by_setting[moved.name]
            entry["pointers"][f"{k:+d}"] = {
                "setting": moved.name,
                "gain": _paired(base, records, METRIC, **stats),
                "following": _following(base, records, displaced[k], **stats),
            }
        draws = [
            s
            for s in parsed
            if s.heads == "other" and dataclasses.replace(s, heads="top", seed=0) == top
        ]
        gains = [
            {
                "setting": s.name,
                "seed": s.seed,
                "gain": _draws_gain(base, records_by_setting[s.name], METRIC),
            }
            for s in sorted(draws, key=lambda s: s.seed)
        ]
        values = [g["gain"] for g in gains]
        entry["random_heads"] = {
            "draws": gains,
            "count": len(values),
            "mean": _mean(values),
            "min": min(values) if values else None,
            "max": max(values) if values else None,
        }
        entry["id"] = None
        if id_base is not None and top.name in id_records:
            id_top = id_records[top.name]
            entry["id"] = {
                "n": len(id_top),
                "tf_exact": _mean([float(r["tf_exact"]) for r in id_top]),
                "tf_token_acc": _mean([float(r["tf_token_acc"]) for r in id_top]),
                "tf_token_acc_gain": _paired(id_base, id_top, METRIC, **stats),
            }
        doses.append(entry)
    baseline: dict[str, Any] = {
        "tf_token_acc": mean_interval([float(r[METRIC]) for r in base], **stats),
        "tf_exact": _mean([float(r["tf_exact"]) for r in base]),
        "following": {
            f"{k:+d}": _mean(
                [
                    _follow_share(r, displaced[k][record_key(r)])
                    for r in base
                    if displaced[k].get(record_key(r))
                ]
            )
            for k in pointer_shifts
        },
    }
    if id_base is not None:
        baseline["id"] = {
            "n": len(id_base),
            "tf_exact": _mean([float(r["tf_exact"]) for r in id_base]),
            "tf_token_acc": _mean([float(r["tf_token_acc"]) for r in id_base]),
        }
    return {
        "n": tops[0].n,
        "shift": shift,
        "mode": tops[0].mode,
        "metric": METRIC,
        "pointer_shifts": pointer_shifts,
        "instances": len(base),
        "id_instances": len(id_base) if id_base is not None else 0,
        "baseline": baseline,
        "doses": doses,
    }


# --- running it ----------------------------------------------------------------------------
def run_dose_ladder(
    model,
    tokenizer,
    prompt,
    ranking,
    n: int,
    ood_instances: Sequence[Any],
    id_instances: Sequence[Any] = (),
    batch_size: int = 16,
    *,
    doses: Sequence[float] = DEFAULT_DOSES,
    shift: int | None = None,
    mode: str = "standard",
    thresholds: Sequence[float] = (),
    pointer_shifts: Sequence[int] = POINTER_SHIFTS,
    draws: int = DEFAULT_DRAWS,
    seed: int = 0,
    n_resamples: int | None = None,
    on_batch: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """The dose curve of the top `n` heads of `ranking` (`dose_curve`), from teacher-forced
    passes: the whole ladder on `ood_instances` (one forward per batch, every setting a
    per-row intervention), the baseline and the top-n rungs on `id_instances`. `shift`:
    the ranking's own (`ranking.source["shift"]`) unless given. The curve gains "heads"
    (the top n) and "random_draws" (`other_seeds`: seeds, requested, available, exhausted,
    each draw's heads, and a note when every distinct set is used)."""
    from harness.attention.interventions import other_seeds, score_settings, select_heads

    if shift is None:
        shift = int(ranking.source.get("shift", 0))
    drawn = other_seeds(ranking.total, n, draws)
    settings = dose_settings(
        n,
        doses,
        shift,
        mode=mode,
        thresholds=thresholds,
        pointer_shifts=pointer_shifts,
        random_seeds=drawn["seeds"],
    )

    def score(instances, chosen):
        return score_settings(
            model,
            tokenizer,
            instances,
            chosen,
            ranking,
            prompt=prompt,
            batch_size=batch_size,
            on_batch=on_batch,
            generate=False,
        )

    records = score(ood_instances, settings)
    id_records = None
    if id_instances:
        id_records = score(id_instances, [s for s in settings if s.role in ("baseline", ROLE_DOSE)])
    curve = dose_curve(
        ood_instances, records, shift, id_records, seed=seed, n_resamples=n_resamples
    )
    curve["heads"] = [list(h) for h in ranking.top(n)]
    drawn["draws"] = [
        {
            "seed": s,
            "heads": [list(h) for h in select_heads(Setting(heads="other", n=n, seed=s), ranking)],
        }
        for s in drawn["seeds"]
    ]
    if drawn["exhausted"]:
        drawn["note"] = (
            f"only {drawn['available']} distinct sets of {n} heads lie outside the top {n}: "
            f"all of them are used ({len(drawn['seeds'])} of {drawn['requested']} draws asked)"
        )
    curve["random_draws"] = drawn
    return curve
