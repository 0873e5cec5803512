"""Intervention settings, the N x C (x threshold) grid, and choosing on validation only.

    from harness.attention.sweep import Setting, grid, run_sweep
    settings = grid(total_heads=64, strengths=(0.5, 1.0, 2.0))
    sweep = run_sweep(evaluate, settings, control_seeds=(0, 1, 2))
    sweep["chosen_name"], sweep["test_gains"]["top4-C1"]["partial_acc"]  # gain, low, high

`evaluate(settings, stream) -> {setting.name: records}` scores settings on one stream
("validation" or "test" of the OOD config, "id" for the ID config), per-instance records
with `index`, `length`, `exact_match`, `partial_acc`; all settings of a stream come in one
call, so the evaluator can share work between them (one prefill per batch).

The paper tunes N on the data it reports; here every grid point is scored on the OOD
*validation* stream, the best one is chosen there, and only the chosen setting, the
baseline and the controls are scored on the *test* stream, so the reported gain is not
selected on the numbers it reports.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from attentionspan_datasets.metrics import ALL_METRICS, METRICS
from harness.attention.controls import control_settings
from harness.attention.setting import BASELINE, Setting
from harness.engine.modes import MODES, SWEEP_MODES
from harness.foundation.stats import gain_table, mean
from harness.foundation.stats import summarise as summarise_metrics

DEFAULT_STRENGTHS = (0.3, 0.5, 1.0, 1.5, 2.0)
# What a sweep can choose by: an answer's scores, partial_acc (the default) first.
SELECT_METRICS = METRICS[::-1]


def head_counts(total_heads: int, max_share: float = 0.1, at_least: int = 4) -> list[int]:
    """1, 2, 4, ... up to `max_share` of all heads (the paper: "typically <10%"), but at
    least up to `at_least` heads, so a 16-head model is swept at 1, 2 and 4; the cap itself
    is included when it is not a power of two."""
    if total_heads < 1:
        raise ValueError(f"total_heads must be >= 1, got {total_heads}")
    cap = max(1, math.floor(total_heads * max_share), min(at_least, total_heads))
    counts = []
    n = 1
    while n <= cap:
        counts.append(n)
        n *= 2
    if counts[-1] != cap:
        counts.append(cap)
    return counts


def grid(
    total_heads: int,
    counts: Sequence[int] | None = None,
    strengths: Sequence[float] = DEFAULT_STRENGTHS,
    mode: str = "standard",
    thresholds: Sequence[float] = (0.0,),
    shift: int = 0,
    max_share: float = 0.1,
) -> list[Setting]:
    """The settings to sweep: top-N heads for every N x C (x threshold, conditional mode)."""
    counts = list(counts) if counts else head_counts(total_heads, max_share)
    for n in counts:
        if not 1 <= n <= total_heads:
            raise ValueError(f"head count must be in 1..{total_heads}, got {n}")
    if mode not in SWEEP_MODES:
        raise ValueError(f"the sweep reinforces: mode must be one of {', '.join(SWEEP_MODES)}")
    # Only a mode that reads the threshold (conditional) is swept over it.
    thresholds = list(thresholds) if "threshold" in MODES[mode].reads else [0.0]
    return [
        Setting(heads="top", n=n, strength=float(c), mode=mode, threshold=float(t), shift=shift)
        for n in counts
        for c in strengths
        for t in thresholds
    ]


def summarise(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Means overall and per length of the metrics the records carry."""
    metrics = [m for m in ALL_METRICS if records and m in records[0]]
    return summarise_metrics(records, metrics)


def score_of(records: Sequence[dict[str, Any]], metric: str) -> float:
    return mean(r[metric] for r in records)


def select(
    validation: dict[str, Sequence[dict[str, Any]]],
    metric: str = "partial_acc",
    tie_break: str = "exact_match",
) -> str:
    """The name of the best setting by `metric` on validation records (ties: `tie_break`,
    then the name order given, i.e. smaller N and C first in `grid` order)."""
    if metric not in SELECT_METRICS:
        raise ValueError(f"metric must be one of {', '.join(SELECT_METRICS)}, got {metric!r}")
    if not validation:
        raise ValueError("select needs at least one scored setting")
    best = None
    for name, records in validation.items():
        key = (score_of(records, metric), score_of(records, tie_break))
        if best is None or key > best[0]:
            best = (key, name)
    return best[1]


Evaluate = Callable[[Sequence[Setting], str], dict[str, list[dict[str, Any]]]]


def run_sweep(
    evaluate: Evaluate,
    settings: Sequence[Setting],
    control_seeds: Iterable[int] = (0, 1, 2),
    metric: str = "partial_acc",
    with_id: bool = True,
    progress: Callable[[str], None] | None = None,
    id_guard: float | None = None,
) -> dict[str, Any]:
    """Score the grid on validation, choose there, report the choice and controls on test.

    Returns JSON-ready results: `validation` (summary per setting and the grid),
    `chosen` (the setting), `test` (summary and paired gains over the baseline per setting),
    `id` (the same settings on the ID stream, where the intervention must not break the
    task), and `records` (per-instance records of every test / ID setting, for plots).

    With `id_guard`, every grid point is also scored on the ID *validation* stream
    ("id_validation"), and only settings whose ID exact match stays within `id_guard` of the
    baseline's may be chosen (docs/results.md: on a shallow model the top heads' reinforcement
    lifts OOD and collapses ID); if none does, the choice is made among all and
    `id_guard_kept` is empty.
    """
    say = progress or (lambda message: None)
    settings = list(settings)
    if not settings:
        raise ValueError("run_sweep needs at least one setting")
    say(f"validation: baseline and {len(settings)} settings")
    validation_records = evaluate([BASELINE, *settings], "validation")
    scored = {k: v for k, v in validation_records.items() if k != BASELINE.name}
    eligible, guard = scored, {}
    if id_guard is not None:
        eligible, guard = _id_guarded(evaluate, settings, scored, id_guard, say)
    chosen_name = select(eligible, metric)
    chosen = next(s for s in settings if s.name == chosen_name)

    reported = [BASELINE, chosen, *control_settings(chosen, control_seeds)]
    say(f"test: {', '.join(s.name for s in reported)}")
    test_records = evaluate(reported, "test")
    baseline = test_records[BASELINE.name]
    result: dict[str, Any] = {
        "metric": metric,
        "chosen": chosen.to_dict(),
        "chosen_name": chosen.name,
        "settings": {s.name: s.to_dict() for s in [BASELINE, *settings, *reported]},
        "validation": {name: summarise(records) for name, records in validation_records.items()},
        "validation_gains": {
            name: gain_table(validation_records[BASELINE.name], records, per_length=False)
            for name, records in scored.items()
        },
        "test": {name: summarise(records) for name, records in test_records.items()},
        "test_gains": {
            name: gain_table(baseline, records)
            for name, records in test_records.items()
            if name != BASELINE.name
        },
        "records": {"test": test_records},
        **guard,
    }
    if with_id:
        say(f"id: {', '.join(s.name for s in reported)}")
        id_records = evaluate(reported, "id")
        result["id"] = {name: summarise(records) for name, records in id_records.items()}
        result["id_gains"] = {
            name: gain_table(id_records[BASELINE.name], records, per_length=False)
            for name, records in id_records.items()
            if name != BASELINE.name
        }
        result["records"]["id"] = id_records
    return result


def _id_guarded(evaluate: Evaluate, settings, scored, id_guard: float, say):
    """(the settings that may be chosen, the guard's fields of the results): every grid
    point scored on the ID validation stream, those whose ID exact match stays within
    `id_guard` of the baseline's kept (all of them when none does)."""
    if id_guard < 0:
        raise ValueError(f"id_guard must be >= 0, got {id_guard}")
    say(f"id validation (guard {id_guard}): baseline and {len(settings)} settings")
    id_validation = evaluate([BASELINE, *settings], "id_validation")
    floor = score_of(id_validation[BASELINE.name], "exact_match") - id_guard
    kept = [n for n in scored if score_of(id_validation[n], "exact_match") >= floor - 1e-12]
    guard = {
        "id_guard": id_guard,
        "id_guard_kept": kept,
        "id_validation": {n: summarise(r) for n, r in id_validation.items()},
    }
    return ({n: scored[n] for n in kept} or scored), guard
