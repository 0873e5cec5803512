"""The dose-response ladder: the ranked heads pushed at every C of a ladder, with the
controls measured at the same dose, from teacher-forced passes (one forward per batch).

    from harness.attention.dose import dose_ladder, dose_curve, run_dose_ladder
    curve = run_dose_ladder(model, tokenizer, prompt, lookup, 4, ood, id_instances)
    curve["doses"][3]["reference"]        # {'gain': .., 'low': .., 'high': .., 'n': ..}
    curves = run_dose_ladders(model, tokenizer, prompt, lookup, [1, 2, 4], ood, id_instances)
    ladder = dose_ladder(4, random_seeds=(0, 1))   # the settings, as values, by rung

A verdict read at one chosen C says little: a repairable lookup gains from a small dose, a
pointer follows wherever it is pushed, and any push large enough breaks the model. So the
ladder reads, at each dose C (and in conditional mode each threshold):
- reference: the top-n heads pushed at the reference (moved by the lookup's offset): the
  paired gain in teacher-forced token accuracy over the baseline, per instance, with its
  bootstrap 95% interval (`harness.foundation.stats.paired_gain`);
- the controls of the registry that run on the ladder (`harness.attention.controls`, each
  one module; its `AtDose` says what it makes and reads), today:
  - pointers (`controls/pointer.py`): the same push at ref + shift + k for each pointer
    shift k (k = -3, -2, -1, +1, +2, +3 by default, `LADDER_POINTER_SHIFTS`: a neighbour of
    the reference may carry what it does): its gain, and how often the model *follows*
    it: over the rows where the task's function on the text moved by k gives another
    character than the gold one
    (`harness.attention.diagnosis.displaced_answer`, which applies the task's oracle, so
    it holds for tasks whose reference is not the answer), the share whose teacher-forced
    argmax is that displaced answer, per instance, minus the same share at baseline;
  - random heads (`controls/other_heads.py`): n heads drawn from the heads *other* than
    the top n (`Setting(heads="other")`), several distinct draws (all of them when a model
    has fewer distinct sets), each draw's gain, their mean and range;
  - output scale (`controls/output_scale.py`): the top n's pattern left as it is and each
    head's output rescaled to its ID norm (mode "rescale"), its paired gain: what giving
    the output its length back gives without moving any weight. It does not depend on C:
    one setting, shared by every rung that carries controls (`Ladder.settings` holds it
    once);
- ID: the same top-n push on ID instances, its teacher-forced exact match and token
  accuracy (a push that repairs OOD by breaking ID is no repair).

The controls may run at some rungs only (`controlled`; the analysis passes
`verdicts.calibrated.reading_rungs`: the dose chosen on validation, each kind of error's own
dose and the top rung, where the verdict reads them); a rung without them holds None in their
fields. A curve of some of the OOD instances (a kind's) carries the whole curve's ID figures
(`with_id_of`).

Every statistic is over instances, not tokens, and the curve keeps the per-instance values
beside them (`per_instance`, `harness.attention.instance_values`: a reader computes the
curve again from them, or resamples the instances, `verdicts.readings`). Everything is
teacher-forced (`score_settings(..., generate=False)`): one forward per batch carries every
setting of the ladder as a per-row intervention; the ladders of several counts
(`run_dose_ladders`, the choice of N) share that forward, so each batch's prompt is prefilled
and its baseline scored once for all of them. The settings are carried as values (`Ladder`),
never read back from their names. This module returns data and writes nothing (the plot is
`harness.report.plots.dose_response`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.attention.controls import (
    LADDER_POINTER_SHIFTS,
    Control,
    LadderContext,
    LadderOptions,
    ladder_controls,
)
from harness.attention.controls.base import mean_or_none, paired_means
from harness.attention.instance_values import curve_values, rung_values
from harness.attention.lookup import Lookup
from harness.attention.setting import BASELINE, Setting
from harness.engine.modes import MODES

DEFAULT_DOSES = (0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0)
DEFAULT_DRAWS = 8  # random other-heads draws per dose (fewer when fewer distinct sets exist)
METRIC = "tf_token_acc"
ROLE_DOSE = "dose"  # the top-n push of a rung (`Setting.role`); controls carry their own role


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


@dataclass(frozen=True)
class Rung:
    """One dose: the top-n push, and each ladder control's settings beside it (in registry
    order, by role; empty where the rung carries no controls)."""

    top: Setting
    controls: tuple[tuple[str, tuple[Setting, ...]], ...]

    def of(self, role: str) -> list[Setting]:
        return list(dict(self.controls).get(role, ()))


@dataclass(frozen=True)
class Ladder:
    """The settings of a ladder, carried as values: every rung in order (per threshold, the
    doses), the ranking's shift, and the controls that made their settings."""

    n: int
    shift: int
    mode: str
    rungs: tuple[Rung, ...]
    controls: tuple[Control, ...]

    @property
    def settings(self) -> list[Setting]:
        """The baseline, then per rung the push and its controls' settings: what is scored,
        each setting once (a control that does not depend on C, the output scale, makes the
        same setting at every rung)."""
        out = [BASELINE]
        for rung in self.rungs:
            out.append(rung.top)
            for _, made in rung.controls:
                out += made
        return _union([out])

    @property
    def id_settings(self) -> list[Setting]:
        """The baseline and the pushes: what ID exact match is read under."""
        return [BASELINE, *(rung.top for rung in self.rungs)]


def dose_ladder(
    n: int,
    doses: Sequence[float] = DEFAULT_DOSES,
    shift: int = 0,
    *,
    mode: str = "standard",
    thresholds: Sequence[float] = (),
    pointer_shifts: Sequence[int] = LADDER_POINTER_SHIFTS,
    random_seeds: Sequence[int] = (),
    controlled: Collection[tuple[float, float]] | None = None,
    output_scale: bool = True,
) -> Ladder:
    """The ladder: per rung (each dose C; in a mode with a threshold, each threshold x each
    dose) top-n at C at the ranking's `shift`, and beside it the settings of every control
    of the registry that runs on the ladder (`harness.attention.controls.ladder_controls`:
    the same push at shift + k for each pointer shift k, one `other` setting per seed of
    `random_seeds`, the top n's output rescaled to its ID norm unless `output_scale` is
    False), each carrying its control's role. `controlled`: the rungs (strength, threshold;
    threshold 0.0 outside a threshold mode) that carry the controls, the others only the
    push (`verdicts.calibrated.reading_rungs`: where the verdict reads them); None: every
    rung."""
    options = LadderOptions(
        pointer_shifts=tuple(int(k) for k in pointer_shifts),
        random_seeds=tuple(int(s) for s in random_seeds),
        output_scale=output_scale,
    )
    controls = ladder_controls()
    rungs = []
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
        made = tuple(
            (
                c.role,
                tuple(dataclasses.replace(s, role=c.role) for s in c.ladder.make(top, options)),
            )
            for c in controls
        )
        rungs.append(Rung(top, made if _carries(controlled, strength, threshold) else ()))
    ladder = Ladder(n, shift, mode, tuple(rungs), controls)
    ladder.settings  # noqa: B018  (two different settings under one name: ValueError here)
    return ladder


def _carries(controlled, strength: float, threshold: float) -> bool:
    if controlled is None:
        return True
    return (float(strength), float(threshold)) in {(float(c), float(t)) for c, t in controlled}


def dose_settings(n: int, doses: Sequence[float] = DEFAULT_DOSES, shift: int = 0, **options):
    """`dose_ladder(...).settings`: the baseline, then per rung the push and its controls'."""
    return dose_ladder(n, doses, shift, **options).settings


# --- the curve ---------------------------------------------------------------------------
def dose_curve(
    instances: Sequence[Any],
    ladder: Ladder,
    records_by_setting: Mapping[str, Sequence[Mapping[str, Any]]],
    id_records: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    *,
    seed: int = 0,
    n_resamples: int | None = None,
    confidence: float | None = None,
) -> dict[str, Any]:
    """The ladder read from teacher-forced records (`score_settings(..., generate=False)`)
    of `ladder`'s settings on `instances` (OOD), keyed by setting name; `id_records`: the
    baseline and the pushes on ID instances (optional). Every ladder control reads its own
    settings (`AtDose.read`) into its field of each dose entry. Returns a
    JSON-serialisable dict: {"n", "shift", "mode", "metric", the controls' curve fields
    ("pointer_shifts"), "instances", "id_instances", "baseline": {...}, "doses": [one per
    rung, in the order of C within each threshold], "per_instance": what each mean is a
    mean of (`instance_values`; each dose entry has its own)}."""
    from harness.foundation.stats import mean_interval

    stats: dict[str, Any] = {"seed": seed}
    if n_resamples is not None:
        stats["n_resamples"] = n_resamples
    if confidence is not None:
        stats["confidence"] = confidence
    missing = [s.name for s in ladder.settings if s.name not in records_by_setting]
    if missing:
        raise ValueError(f"dose_curve needs the records of every setting, missing {missing[:5]}")
    base = records_by_setting[BASELINE.name]
    context = LadderContext(instances, base, records_by_setting, ladder.shift, METRIC, stats)
    made = {c.role: [s for rung in ladder.rungs for s in rung.of(c.role)] for c in ladder.controls}
    id_base = (id_records or {}).get(BASELINE.name)
    doses = [
        _dose_entry(ladder, rung, context, id_records if id_base is not None else None)
        for rung in sorted(ladder.rungs, key=lambda r: (r.top.threshold, r.top.strength))
    ]
    baseline: dict[str, Any] = {
        "tf_token_acc": mean_interval([float(r[METRIC]) for r in base], **stats),
        "tf_exact": mean_or_none([float(r["tf_exact"]) for r in base]),
    }
    fields: dict[str, Any] = {}
    for c in ladder.controls:
        if c.ladder.baseline_fields:
            baseline |= c.ladder.baseline_fields(context, made[c.role])
        if c.ladder.curve_fields:
            fields |= c.ladder.curve_fields(context, made[c.role])
    if id_base is not None:
        baseline["id"] = {"n": len(id_base), **_id_means(id_base)}
    return {
        "n": ladder.n,
        "shift": ladder.shift,
        "mode": ladder.mode,
        "metric": METRIC,
        **fields,
        "instances": len(base),
        "id_instances": len(id_base) if id_base is not None else 0,
        "baseline": baseline,
        "doses": doses,
        # what every mean above is a mean of, per instance (a reader computes the curve
        # again from them, or resamples the instances: `verdicts.readings`)
        "per_instance": curve_values(context, id_base),
    }


def _dose_entry(
    ladder: Ladder,
    rung: Rung,
    context: LadderContext,
    id_records: Mapping[str, Sequence[Mapping[str, Any]]] | None,
) -> dict[str, Any]:
    """One rung of the curve: the push's paired gain, each control's reading (None where
    the rung carries no controls) and the push's ID figures (None without ID records)."""
    top, stats = rung.top, context.stats
    records = context.records
    entry: dict[str, Any] = {
        "strength": top.strength,
        "threshold": top.threshold if "threshold" in MODES[ladder.mode].reads else None,
        "setting": top.name,
        "reference": paired_means(context.baseline, records[top.name], METRIC, **stats),
    }
    for c in ladder.controls:
        # None: this rung carries no controls (`dose_ladder(controlled=...)`), not run
        read = c.ladder.read(context, top, rung.of(c.role)) if rung.controls else None
        entry[c.ladder.key] = read
    entry["id"] = None
    if id_records is not None and top.name in id_records:
        id_base, id_top = id_records[BASELINE.name], id_records[top.name]
        entry["id"] = {
            "n": len(id_top),
            **_id_means(id_top),
            "tf_token_acc_gain": paired_means(id_base, id_top, METRIC, **stats),
        }
    entry["per_instance"] = rung_values(context, rung, id_records)
    return entry


def _id_means(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return {
        "tf_exact": mean_or_none([float(r["tf_exact"]) for r in records]),
        "tf_token_acc": mean_or_none([float(r["tf_token_acc"]) for r in records]),
    }


# --- running it ----------------------------------------------------------------------------
def run_dose_ladder(
    model,
    tokenizer,
    prompt,
    lookup: Lookup,
    n: int,
    ood_instances: Sequence[Any],
    id_instances: Sequence[Any] = (),
    batch_size: int = 16,
    **options,
) -> dict[str, Any]:
    """The dose curve of the top `n` heads of the lookup's ranking (`dose_curve`) at the
    lookup's offset, from teacher-forced passes: the whole ladder on `ood_instances` (one
    forward per batch, every setting a per-row intervention), the baseline and the top-n
    rungs on `id_instances`. `options`: those of `run_dose_ladders`. The curve gains "heads"
    (the top n) and "random_draws" (`other_seeds`: seeds, requested, available, exhausted,
    each draw's heads, and a note when every distinct set is used)."""
    return run_dose_ladders(
        model, tokenizer, prompt, lookup, [n], ood_instances, id_instances, batch_size, **options
    )[n]


def run_dose_ladders(
    model,
    tokenizer,
    prompt,
    lookup: Lookup,
    counts: Sequence[int],
    ood_instances: Sequence[Any],
    id_instances: Sequence[Any] = (),
    batch_size: int = 16,
    *,
    doses: Sequence[float] = DEFAULT_DOSES,
    mode: str = "standard",
    thresholds: Sequence[float] = (),
    pointer_shifts: Sequence[int] = LADDER_POINTER_SHIFTS,
    draws: int = DEFAULT_DRAWS,
    controlled: Collection[tuple[float, float]] | None = None,
    output_scale: bool = True,
    seed: int = 0,
    n_resamples: int | None = None,
    on_batch: Callable[[int], None] | None = None,
) -> dict[int, dict[str, Any]]:
    """`run_dose_ladder` of every count in `counts` ({n: curve}), scored together: the
    ladders' settings (the baseline once, a setting two ladders share once) in one pass
    over the instances, so a batch's prompt is prefilled once for all of them and the
    baseline scored once, not once per count (the choice of N ladders every count on
    validation). A setting's records do not depend on the settings beside it
    (`score_settings`), so each curve is the one its ladder alone gives. Every ladder
    pushes at the lookup's offset (`lookup.offset`). `controlled`: the rungs that carry the
    controls (`dose_ladder`; None: all). `output_scale`: run the output-scale control there
    (False on validation, which runs no control); a ranking without ID output norms (saved
    before they were measured) cannot run it, and its curve holds None there (the verdict
    reads that as not measured)."""
    from harness.attention.interventions import other_pool, other_seeds, score_settings

    ranking = lookup.ranking
    counts = list(dict.fromkeys(int(n) for n in counts))
    if not counts:
        raise ValueError("run_dose_ladders needs at least one head count")
    drawn_of, ladders = {}, {}
    for n in counts:
        # drawn from the heads outside the top n that do not look up in distribution
        drawn_of[n] = other_seeds(ranking.total, n, draws, pool=len(other_pool(ranking, n)))
        ladders[n] = dose_ladder(
            n,
            doses,
            lookup.offset,
            mode=mode,
            thresholds=thresholds,
            pointer_shifts=pointer_shifts,
            random_seeds=drawn_of[n]["seeds"],
            controlled=controlled,
            output_scale=output_scale and bool(ranking.output_norms),
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

    records = score(ood_instances, _union(ladders[n].settings for n in counts))
    id_records = None
    if id_instances:
        id_records = score(id_instances, _union(ladders[n].id_settings for n in counts))
    curves = {}
    for n in counts:
        curve = dose_curve(
            ood_instances, ladders[n], records, id_records, seed=seed, n_resamples=n_resamples
        )
        curve["heads"] = [list(h) for h in ranking.top(n)]
        curve["random_draws"] = _with_draws(drawn_of[n], ranking, n)
        curves[n] = curve
    return curves


def _union(lists) -> list[Setting]:
    """The settings of several ladders (or of one ladder's rungs), each name once (a name
    says what it does); ValueError when two different settings share a name."""
    out: dict[str, Setting] = {}
    for setting in (s for settings in lists for s in settings):
        if out.setdefault(setting.name, setting) != setting:
            raise ValueError(f"two different settings share the name {setting.name}")
    return list(out.values())


def _with_draws(drawn: dict[str, Any], ranking, n: int) -> dict[str, Any]:
    """`other_seeds`' record with each draw's heads, and a note when every distinct set of
    n heads outside the top n and the lookup heads is used."""
    from harness.attention.interventions import select_heads

    drawn["draws"] = [
        {
            "seed": s,
            "heads": [list(h) for h in select_heads(Setting(heads="other", n=n, seed=s), ranking)],
        }
        for s in drawn["seeds"]
    ]
    if drawn["exhausted"]:
        drawn["note"] = (
            f"only {drawn['available']} distinct sets of {n} heads lie outside the top "
            f"{n} and the lookup heads: "
            f"all of them are used ({len(drawn['seeds'])} of {drawn['requested']} draws "
            "asked)"
        )
    return drawn


def with_id_of(curve: dict[str, Any], whole: Mapping[str, Any]) -> dict[str, Any]:
    """`curve` (the ladder on a subset of the OOD instances, scored without ID) with the ID
    figures of `whole` (the same ladder's curve on every instance, with ID): ID exact match
    under a push does not depend on which OOD instances are read, so a subset's curve
    carries the whole one's rather than scoring the ID stream again."""
    by_rung = {(d["strength"], d.get("threshold")): d.get("id") for d in whole.get("doses", [])}
    base_id = (whole.get("baseline") or {}).get("id")
    if base_id is not None:
        curve["baseline"]["id"] = base_id
    curve["id_instances"] = whole.get("id_instances", 0)
    for entry in curve.get("doses", []):
        entry["id"] = by_rung.get((entry["strength"], entry.get("threshold")))
    return curve
