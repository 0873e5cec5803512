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

import dataclasses
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from harness.engine.modes import INTERVENTION_MODES
from harness.stats import gain_table, mean
from harness.stats import summarise as summarise_metrics

HEAD_CHOICES = ("none", "top", "random", "bottom")
POSITION_CHOICES = ("reference", "random")
DEFAULT_STRENGTHS = (0.3, 0.5, 1.0, 1.5, 2.0)
SELECT_METRICS = ("partial_acc", "exact_match")
POINTER_SHIFTS = (-3, 3)  # the pointer-shift control: the chosen push at ref-3 and ref+3


@dataclass(frozen=True)
class Setting:
    """One intervention, or none.

    heads: which heads (`top`/`bottom` of the ranking, `random` drawn with `seed`);
    n, strength (C), mode, threshold (conditional), renormalise: as in
    `harness.engine.capture.Intervention` ("restore" sets each head's weight on the cells
    to its ID level from the ranking, `harness.attention.controls`); positions: `reference`
    (the reference cells, moved by `shift`) or `random` (as many random non-reference keys
    per row, drawn with `seed`: the positions control).
    """

    heads: str = "none"
    n: int = 0
    strength: float = 0.0
    mode: str = "standard"
    threshold: float = 0.0
    positions: str = "reference"
    shift: int = 0
    seed: int = 0
    renormalise: bool = False

    def __post_init__(self) -> None:
        if self.heads not in HEAD_CHOICES:
            raise ValueError(f"heads must be one of {', '.join(HEAD_CHOICES)}, got {self.heads!r}")
        if self.mode not in INTERVENTION_MODES:
            modes = ", ".join(INTERVENTION_MODES)
            raise ValueError(f"mode must be one of {modes}, got {self.mode!r}")
        if self.positions not in POSITION_CHOICES:
            raise ValueError(
                f"positions must be one of {', '.join(POSITION_CHOICES)}, got {self.positions!r}"
            )
        if self.heads != "none" and self.n < 1:
            raise ValueError(f"n (number of heads) must be >= 1 for heads={self.heads!r}")
        if self.threshold < 0:
            raise ValueError(f"threshold must be >= 0, got {self.threshold}")

    @property
    def is_baseline(self) -> bool:
        return self.heads == "none"

    @property
    def name(self) -> str:
        """A short, unique, file-name-safe label: `top4-C1-standard`, `random4-C1-s2`."""
        if self.is_baseline:
            return "baseline"
        parts = [f"{self.heads}{self.n}"]
        if self.mode in ("knockout", "restore"):
            parts.append(self.mode)
        else:
            parts.append(f"C{self.strength:g}")
            if self.mode == "conditional":
                parts.append(f"thr{self.threshold:g}")
        if self.positions == "random":
            parts.append("randpos")
        if self.shift:
            parts.append(f"shift{self.shift:+d}")
        if self.renormalise:
            parts.append("renorm")
        if self.heads == "random" or self.positions == "random":
            parts.append(f"s{self.seed}")
        return "-".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Setting:
        return cls(**values)


BASELINE = Setting()


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
    if mode in ("knockout", "restore"):
        raise ValueError("the sweep reinforces: mode must be 'standard' or 'conditional'")
    thresholds = list(thresholds) if mode == "conditional" else [0.0]
    return [
        Setting(heads="top", n=n, strength=float(c), mode=mode, threshold=float(t), shift=shift)
        for n in counts
        for c in strengths
        for t in thresholds
    ]


def control_settings(
    chosen: Setting,
    seeds: Iterable[int] = (0, 1, 2),
    pointer_shifts: Sequence[int] = POINTER_SHIFTS,
    restore: bool = True,
) -> list[Setting]:
    """The controls of a chosen setting: the same N and C on random heads (one per seed) and
    at random non-reference positions of the chosen heads; the bottom-N heads; the
    knock-out of the chosen heads; and the repair-or-pointer controls
    (`harness.attention.controls`): the chosen push at ref + k for each pointer shift, and
    the chosen heads restored to their ID weight on the reference."""
    if chosen.is_baseline:
        return []
    seeds = list(seeds)
    controls = [dataclasses.replace(chosen, heads="random", seed=s) for s in seeds]
    controls.append(dataclasses.replace(chosen, positions="random", seed=seeds[0] if seeds else 0))
    controls.append(dataclasses.replace(chosen, heads="bottom"))
    controls.append(knockout_of(chosen))
    controls += pointer_settings(chosen, pointer_shifts) if pointer_shifts else []
    if restore:
        controls.append(restore_setting(chosen))
    return controls


def pointer_settings(chosen: Setting, shifts: Sequence[int] = POINTER_SHIFTS) -> list[Setting]:
    """The chosen heads and C with their cells moved to `ref + k` for each k."""
    if chosen.is_baseline:
        return []
    bad = [k for k in shifts if k == 0]
    if bad:
        raise ValueError(f"pointer shifts must be non-zero, got {list(shifts)}")
    return [dataclasses.replace(chosen, shift=chosen.shift + int(k)) for k in shifts]


def restore_setting(chosen: Setting) -> Setting | None:
    """The chosen heads restored to their ID weight on the reference (mode "restore")."""
    if chosen.is_baseline:
        return None
    return dataclasses.replace(chosen, mode="restore", strength=0.0, threshold=0.0)


def knockout_of(setting: Setting) -> Setting:
    return dataclasses.replace(setting, mode="knockout", strength=0.0, threshold=0.0)


def summarise(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Means overall and per length of the metrics the records carry."""
    every = ("exact_match", "partial_acc", "tf_token_acc")
    metrics = [m for m in every if records and m in records[0]]
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
    eligible = scored
    guard: dict[str, Any] = {}
    if id_guard is not None:
        if id_guard < 0:
            raise ValueError(f"id_guard must be >= 0, got {id_guard}")
        say(f"id validation (guard {id_guard}): baseline and {len(settings)} settings")
        id_validation = evaluate([BASELINE, *settings], "id_validation")
        floor = score_of(id_validation[BASELINE.name], "exact_match") - id_guard
        kept = [n for n in scored if score_of(id_validation[n], "exact_match") >= floor - 1e-12]
        eligible = {n: scored[n] for n in kept} or scored
        guard = {
            "id_guard": id_guard,
            "id_guard_kept": kept,
            "id_validation": {n: summarise(r) for n, r in id_validation.items()},
        }
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
