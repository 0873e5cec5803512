"""What the calibrated verdict reads, per instance: a digest a reader can re-derive, and
resample.

    from harness.attention.verdicts.readings import rederive, streams, verdict_readings
    readings = verdict_readings(dose_stage, ood_diagnosis, lookup.evidence)   # plain JSON
    rederive(readings)["verdict"]                # the recorded word, from the readings alone
    streams(readings)                            # {"validation": 64, "id_validation": 64, ...}
    rederive(readings, draw={"test": [3, 3, 0, ...]})   # one bootstrap resample of test

Every statistic the verdict reads is a mean over instances (the independent unit) or an
interval from resampling them, so the readings keep, per instance and in the order the
pipeline computed them in, the values those means are of:
- validation (the OOD validation stream of the chosen N): the baseline's teacher-forced
  token accuracy and the reference push's at every rung; each instance's kind (the class of
  its first wrong row, `validation_by_kind`: what each kind's own curve is made of, with
  that curve's own values); the ID validation stream's exact match at baseline and per rung;
- test (the OOD test stream): the same at every rung of the test ladder, and at the rungs
  with controls each control's values (the shifted pushes: their metric, and per instance
  the rows where the displaced answer differs and the share of them followed at baseline
  and under the push; the other heads: each draw's metric; how many draws were available);
  the ID test stream's exact match at baseline and per rung;
- diagnosis (the OOD test stream, paired with the test curve by instance): each instance's
  first-wrong-row kind, whether its answer is wrong and over-long; the null per ID test
  instance (its correct rows' count of each kind: `diagnosis._null` pools rows, so a
  resample sums the counts of the instances drawn).
Held fixed under resampling, and said so in `held_fixed`: the lookup's evidence (from the
ranking's own ID instances), the choice of N (every count's validation summary is kept:
the diagnosis is read with N's heads), the test rungs that carry the controls (chosen on
the recorded validation curves) and whether the dominant kind changes with the head set.

Values are never rounded (a per-instance value rounded to 6 places moves a bootstrap
interval's end): a token accuracy is kept as the count of its instance's target tokens
(`tokens`), a following share as the count of its rows, an exact match as 0 or 1, wherever
the count over its size gives the value back bit for bit (else the value itself), so the
lists stay short and `rederive` with no draw gives the recorded numbers bit for bit.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from harness.attention.controls import dose_field
from harness.attention.controls.base import mean_or_none
from harness.attention.diagnosis import CLASSES
from harness.attention.verdicts.calibrated import calibrated_verdict
from harness.attention.verdicts.rule_version import rule_version
from harness.foundation.stats import paired_gain

FORMAT = 1  # the layout of the readings (a reader refuses another)
STREAMS = ("validation", "id_validation", "test", "id")
HELD_FIXED = {
    "lookup": "the lookup's evidence (each lookup head's ID level beside its null, from the "
    "ranking's own ID instances)",
    "n": "the choice of N (every count's validation summary under `counts`): the ladders and "
    "the diagnosis are read with N's heads",
    "controlled": "the test rungs that carry the controls (chosen on the recorded validation "
    "curves): a dose chosen elsewhere on a resample finds its controls not measured",
    "kind_changes": "whether the dominant kind changes with the head set read (top 1, top 4, N)",
}
# What `rederive` chooses again on a resample (everything else it reads is `held_fixed`).
RECHOSEN = ("the dose C, chosen again on each resampled OOD validation stream",)
# the ladder controls rebuilt from per-instance values (any other: held as recorded)
REBUILT = ("pointer", "other_heads", "output_scale")


# --- recording ----------------------------------------------------------------------------
def verdict_readings(
    dose_stage: Mapping[str, Any],
    diagnosis: Mapping[str, Any],
    lookup_evidence: Mapping[str, Any] | None,
    found: Mapping[str, Any] | None = None,
) -> dict[str, Any] | None:
    """The readings of one verdict (module docstring), JSON-serialisable: from the dose
    stage (`lookup_stages.run_dose`: "n", "counts", "validation", "validation_by_kind",
    "test", "controlled"), the OOD test stream's diagnosis and the lookup's evidence;
    `found`: how the lookup's offset was found (`Lookup.found`; its text heads the verdict's
    reasons). None when the stages were made before per-instance values were kept."""
    validation, test = dose_stage.get("validation") or {}, dose_stage.get("test") or {}
    if not all(_valued(c) for c in (validation, test)) or not diagnosis.get("per_instance"):
        return None
    val = _stream(validation)
    by_kind, kinds = _by_kind(validation, dose_stage.get("validation_by_kind"))
    val["kind"] = kinds
    tested = _stream(test, controls=True)
    tested["random_draws"] = {"available": (test.get("random_draws") or {}).get("available")}
    return _converted(
        {
            "format": FORMAT,
            "rule_version": rule_version(),
            "unit": "instance",
            "held_fixed": HELD_FIXED | _unrebuilt(tested["controls"]),
            "n": dose_stage.get("n"),
            "counts": dose_stage.get("counts"),
            "controlled": dose_stage.get("controlled"),
            "stats": validation["per_instance"]["stats"],
            "lookup": lookup_evidence,
            "found": dict(found) if found else None,
            "validation": val,
            "validation_by_kind": by_kind,
            "test": tested,
            "diagnosis": _diagnosed(diagnosis, test),
        },
        _pack,
    )


def _unrebuilt(controls) -> dict[str, str]:
    """The ladder controls whose numbers are kept as recorded (no rebuild from per-instance
    values knows them), named as held fixed."""
    roles = sorted({role for rung in controls if rung for role in rung} - set(REBUILT))
    if not roles:
        return {}
    return {"controls": f"the numbers of {', '.join(roles)} at each rung, as recorded"}


def _named(keys, prefix: str) -> dict[str, Any]:
    """The instances' names: "config" (one, when they share it; else one per instance) and
    "index", each prefixed (`id_`: the ID stream's)."""
    if keys is None:
        return {f"{prefix}config": None, f"{prefix}index": None}
    configs = [k[0] for k in keys]
    shared = len(set(configs)) == 1
    return {
        f"{prefix}config": configs[0] if shared else configs,
        f"{prefix}index": [k[1] for k in keys],
    }


def _valued(curve: Mapping[str, Any]) -> bool:
    doses = curve.get("doses") or []
    return "per_instance" in curve and all("per_instance" in d for d in doses)


def _stream(curve: Mapping[str, Any], controls: bool = False) -> dict[str, Any]:
    """One curve's per-instance values: one list per reading, one row per rung."""
    values, doses = curve["per_instance"], curve.get("doses") or []
    out = {
        "n": curve.get("n"),
        "shift": curve.get("shift"),
        "mode": curve.get("mode"),
        "metric": values["metric"],
        "pointer_shifts": curve.get("pointer_shifts"),
        **_named(values["keys"], ""),
        **_named(values["id_keys"], "id_"),
        "tokens": values.get("tokens"),
        "rungs": [[d["strength"], d.get("threshold")] for d in doses],
        "baseline": values["baseline"],
        "reference": [d["per_instance"]["reference"] for d in doses],
        "id_baseline": values["id_baseline"],
        "id": [d["per_instance"]["id"] for d in doses],
    }
    if controls:
        out["controls"] = [_controls(d) for d in doses]
    return out


def _controls(entry: Mapping[str, Any]) -> dict[str, Any] | None:
    """A rung's controls per instance; a control no rebuild knows keeps its recorded field
    (held fixed under resampling)."""
    values = entry["per_instance"].get("controls")
    if values is None:
        return None
    return {
        role: v if role in REBUILT else {"recorded": entry.get(dose_field(role))}
        for role, v in values.items()
    }


def _by_kind(validation, by_kind) -> tuple[dict[str, Any], list[str | None]]:
    """Each kind's validation instances (their positions in the validation stream) with its
    own curve's values, and each validation instance's kind (None: no wrong row)."""
    position = {tuple(k): i for i, k in enumerate(validation["per_instance"]["keys"])}
    kinds: list[str | None] = [None] * len(position)
    out = {}
    for kind, curve in sorted((by_kind or {}).items()):
        if not _valued(curve):
            raise ValueError(f"the {kind} validation curve has no per-instance values")
        values = curve["per_instance"]
        places = [position[tuple(k)] for k in values["keys"]]
        for p in places:
            kinds[p] = kind
        out[kind] = {
            "positions": places,
            "baseline": values["baseline"],
            "reference": [d["per_instance"]["reference"] for d in curve["doses"]],
        }
    return out, kinds


def _diagnosed(diagnosis: Mapping[str, Any], test: Mapping[str, Any]) -> dict[str, Any]:
    """The diagnosis per test instance, in the test curve's order (the same stream), and
    the null per ID test instance, in the test curve's ID order."""
    mine = diagnosis["per_instance"]
    order = _order(mine["keys"], test["per_instance"]["keys"], "the OOD test stream")

    def aligned(values):
        return None if values is None else [values[i] for i in order]

    null = mine.get("id_null")
    counts = None
    if null is not None:
        id_keys = test["per_instance"]["id_keys"] or null["keys"]
        counts = [null["counts"][i] for i in _order(null["keys"], id_keys, "the ID test stream")]
    return {
        "classes": list(null["classes"]) if null else list(CLASSES),
        "kind": aligned(mine["kind"]),
        "wrong": aligned(mine["wrong"]),
        "over_long": aligned(mine["over_long"]),
        "null_counts": counts,
        "basis": diagnosis.get("basis"),
        "null_basis": (diagnosis.get("null") or {}).get("basis"),
        "shift": diagnosis.get("shift"),
        "kind_changes": diagnosis.get("kind_changes"),
    }


def _order(keys, wanted, stream: str) -> list[int]:
    """The positions in `keys` of each of `wanted`, in its order (ValueError unless both
    name the same instances: the diagnosis and the curve must be paired by instance)."""
    at = {tuple(k): i for i, k in enumerate(keys)}
    if len(at) != len(keys) or set(at) != {tuple(k) for k in wanted}:
        raise ValueError(f"the diagnosis and the dose curve read different instances of {stream}")
    return [at[tuple(k)] for k in wanted]


# --- reading --------------------------------------------------------------------------------
def streams(readings: Mapping[str, Any]) -> dict[str, int]:
    """How many instances each resampled stream holds: the OOD validation and test streams
    and their ID streams (`draw`'s keys in `verdict_inputs`)."""
    return {
        "validation": len(readings["validation"]["baseline"]),
        "id_validation": len(readings["validation"]["id_baseline"] or ()),
        "test": len(readings["test"]["baseline"]),
        "id": len(readings["test"]["id_baseline"] or ()),
    }


def _positions(readings, draw) -> dict[str, list[int]]:
    sizes = streams(readings)
    unknown = sorted(set(draw or {}) - set(sizes))
    if unknown:
        raise ValueError(f"draw names no stream {unknown}: the streams are {list(sizes)}")
    out = {}
    for name, size in sizes.items():
        chosen = list(range(size)) if not draw or name not in draw else [int(p) for p in draw[name]]
        if any(not 0 <= p < size for p in chosen):
            raise ValueError(f"draw[{name!r}] holds a position outside 0..{size - 1}")
        out[name] = chosen
    return out


def verdict_inputs(
    readings: Mapping[str, Any],
    draw: Mapping[str, Sequence[int]] | None = None,
    stats: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The arguments of `calibrated_verdict(validation, test, diagnosis, by_kind, lookup)`
    made from the readings, in the shapes it reads. `draw`: None (every instance once, in
    order: the recorded numbers exactly) or {stream: instance positions, repeats allowed}
    (a bootstrap resample; a stream not named is read whole); the OOD test stream's draw
    resamples the test curve and the diagnosis together, the ID test stream's the ID
    figures and the null together. `stats`: the intervals' options (`paired_gain`'s
    n_resamples, seed, confidence), default the pipeline's own (`readings["stats"]`)."""
    if readings.get("format") != FORMAT:
        raise ValueError(f"readings of format {readings.get('format')!r}, this reads {FORMAT}")
    options = {**(readings.get("stats") or {}), **(stats or {})}
    readings = _converted(readings, _unpack)
    at = _positions(readings, draw)
    val = readings["validation"]
    return {
        "validation": _curve(val, at["validation"], at["id_validation"], options),
        "test": _curve(readings["test"], at["test"], at["id"], options),
        "diagnosis": _diagnosis(readings["diagnosis"], at["test"], at["id"]),
        "by_kind": _kind_curves(readings, at["validation"], at["id_validation"], options),
        "lookup": readings.get("lookup"),
    }


def rederive(
    readings: Mapping[str, Any],
    draw: Mapping[str, Sequence[int]] | None = None,
    stats: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """`calibrated_verdict(**verdict_inputs(readings, draw, stats))`, the function the
    pipeline reads its verdict with, with the lookup's text first among the reasons and its
    offset among the numbers as the pipeline adds them (`lookup_stages.calibrated_verdict`)."""
    out = calibrated_verdict(**verdict_inputs(readings, draw, stats))
    found = readings.get("found")
    if found:
        out["reasons"].insert(0, str(found.get("text", "")))
        out["numbers"]["offset"] = dict(found)
    return out


def _paired(before, after, options) -> dict[str, Any]:
    """`controls.base.paired_means` of per-instance values."""
    return {
        **paired_gain(before, after, **options),
        "baseline": mean_or_none(before),
        "treated": mean_or_none(after),
    }


def _id(values, positions) -> dict[str, Any] | None:
    if values is None:
        return None
    return {"n": len(positions), "tf_exact": mean_or_none([values[p] for p in positions])}


def _curve(values, positions, id_positions, options, rows=None) -> dict[str, Any]:
    """A dose curve of the drawn instances, with the fields the verdict reads. `rows`: the
    reference values of another curve of the same ladder (a kind's), read at `positions`."""
    base = [(rows or values)["baseline"][p] for p in positions]
    reference = (rows or values)["reference"]
    controls = values.get("controls") if rows is None else None
    doses = []
    for r, (strength, threshold) in enumerate(values["rungs"]):
        entry: dict[str, Any] = {
            "strength": strength,
            "threshold": threshold,
            "reference": _paired(base, [reference[r][p] for p in positions], options),
        }
        if rows is None and "controls" in values:
            entry |= _control_fields(controls[r], base, positions, options)
        entry["id"] = _id(values["id"][r], id_positions)
        doses.append(entry)
    baseline: dict[str, Any] = {}
    if values["id_baseline"] is not None:
        baseline["id"] = _id(values["id_baseline"], id_positions)
    curve = {
        **{k: values.get(k) for k in ("n", "shift", "mode", "metric", "pointer_shifts")},
        "instances": len(positions),
        "id_instances": len(id_positions) if values["id_baseline"] is not None else 0,
        "baseline": baseline,
        "doses": doses,
    }
    if "random_draws" in values:
        curve["random_draws"] = dict(values["random_draws"])
    return curve


def _control_fields(controls, base, positions, options) -> dict[str, Any]:
    """Each ladder control's field of one dose entry, from its per-instance values (None
    where the rung carries no controls); a control no rebuild knows, as recorded."""
    from harness.attention.controls import ladder_controls

    out: dict[str, Any] = {dose_field(c.role): None for c in ladder_controls()}
    for role, values in (controls or {}).items():
        if _held(values):
            out[dose_field(role)] = values["recorded"]
        elif role == "pointer":
            out[dose_field(role)] = {
                k: _pointer(v, base, positions, options) for k, v in values.items()
            }
        elif role == "other_heads":
            out[dose_field(role)] = _draws(values, base, positions)
        elif role == "output_scale" and values:
            ((name, made),) = values.items()  # one setting, shared by the rungs
            after = [made["after"][p] for p in positions]
            out[dose_field(role)] = {"setting": name, "gain": _paired(base, after, options)}
    return out


def _held(values) -> bool:
    """A control's numbers kept as recorded (`_controls`), not per instance."""
    return isinstance(values, Mapping) and set(values) == {"recorded"}


def _pointer(values, base, positions, options) -> dict[str, Any]:
    """One shifted push (`controls.pointer.read`): its paired gain, and how often it is
    followed over the drawn instances that have rows to follow it on."""
    follow = values["following"]
    held = [p for p in positions if follow["rows"][p]]
    before = [follow["before"][p] for p in held]
    after = [follow["after"][p] for p in held]
    return {
        "gain": _paired(base, [values["after"][p] for p in positions], options),
        "following": {
            "rate": mean_or_none(after),
            "baseline": mean_or_none(before),
            "gain": paired_gain(before, after, **options),
            "rows": sum(follow["rows"][p] for p in positions),
            "instances": len(after),
        },
    }


def _draws(values, base, positions) -> dict[str, Any]:
    """The other heads' draws (`controls.other_heads.read`): each one's mean gain."""

    def gain(after) -> float | None:
        pairs = [(base[i], after[p]) for i, p in enumerate(positions)]
        return sum(b - a for a, b in pairs) / len(pairs) if pairs else None

    gains = [{"seed": d["seed"], "gain": gain(d["after"])} for d in values]
    numbers = [g["gain"] for g in gains if g["gain"] is not None]
    return {
        "draws": gains,
        "count": len(numbers),
        "mean": mean_or_none(numbers),
        "min": min(numbers) if numbers else None,
        "max": max(numbers) if numbers else None,
    }


def _kind_curves(readings, positions, id_positions, options) -> dict[str, Any] | None:
    """Each kind's validation curve over the drawn validation instances of that kind (its
    own curve's values), with the whole stream's ID figures (`dose.with_id_of`); None when
    the stream was not split."""
    by_kind = readings.get("validation_by_kind")
    if by_kind is None:
        return None
    val = readings["validation"]
    out = {}
    for kind, own in sorted(by_kind.items()):
        row_of = {p: r for r, p in enumerate(own["positions"])}
        rows = [row_of[p] for p in positions if val["kind"][p] == kind]
        if not rows:
            continue  # no instance of this kind drawn: it has no curve of its own
        out[kind] = _curve(val, rows, id_positions, options, rows=own)
    return out


def _diagnosis(diagnosed, positions, id_positions) -> dict[str, Any]:
    """The diagnosis fields the verdict reads, counted over the drawn instances: each kind's
    share of the instances with a wrong row, the null's shares of the drawn ID instances'
    correct rows, and the eval's wrong answers."""
    classes = diagnosed["classes"]
    erred = [diagnosed["kind"][p] for p in positions if diagnosed["kind"][p]]
    n = len(erred)
    null = None
    if diagnosed.get("null_counts") is not None:
        counts = diagnosed["null_counts"]
        totals = [sum(counts[p][j] for p in id_positions) for j in range(len(classes))]
        rows = sum(totals)
        if rows:
            null = {"rows": rows, "shares": {c: t / rows for c, t in zip(classes, totals)}}
    answers = None
    if diagnosed.get("wrong") is not None:
        answers = {
            "total": len(positions),
            "wrong": sum(1 for p in positions if diagnosed["wrong"][p]),
            "diagnosed": n,
            "over_long": sum(1 for p in positions if diagnosed["over_long"][p]),
        }
    return {
        "basis": diagnosed.get("basis"),
        "shift": diagnosed.get("shift"),
        "instances": n,
        "tokens": n,
        "shares": {k: (erred.count(k) / n if n else None) for k in classes},
        "null": {"basis": diagnosed.get("null_basis"), "id": null},
        "kind_changes": diagnosed.get("kind_changes"),
        "answers": answers,
    }


# --- compact and exact ----------------------------------------------------------------------
# A token accuracy is a count of an instance's target tokens over their number, a following
# share a count of its rows, an exact match 0 or 1: kept as the counts (where each count over
# its size gives the value back bit for bit; else the value itself), a list a few times
# shorter than its floats, and never rounded.
def _pack(values, sizes):
    """`values` as counts of `sizes` where every one is exactly its count over its size;
    else `values` unchanged (None entries stay None)."""
    if values is None or sizes is None or len(values) != len(sizes):
        return values
    counts = []
    for value, size in zip(values, sizes):
        if value is None:
            counts.append(None)
            continue
        if not isinstance(size, int) or size <= 0 or round(value * size) / size != value:
            return values
        counts.append(round(value * size))
    return counts


def _unpack(values, sizes):
    """The values `_pack` kept as counts (a list of ints), each over its size."""
    counted = values is not None and sizes is not None
    if not counted or any(isinstance(v, float) for v in values):
        return values
    return [None if c is None else c / size for c, size in zip(values, sizes)]


def _converted(readings: Mapping[str, Any], convert) -> dict[str, Any]:
    """A copy of the readings with every per-instance list passed through `convert`
    (`_pack` or `_unpack`) with its sizes."""
    out = copy.deepcopy(dict(readings))
    val = out["validation"]
    for stream in (val, out["test"]):
        _convert_stream(stream, convert)
    tokens = val.get("tokens")
    for own in (out.get("validation_by_kind") or {}).values():
        sizes = None if tokens is None else [tokens[p] for p in own["positions"]]
        own["baseline"] = convert(own["baseline"], sizes)
        own["reference"] = [convert(row, sizes) for row in own["reference"]]
    return out


def _convert_stream(stream: dict[str, Any], convert) -> None:
    tokens = stream.get("tokens")
    stream["baseline"] = convert(stream["baseline"], tokens)
    stream["reference"] = [convert(row, tokens) for row in stream["reference"]]
    if stream["id_baseline"] is not None:
        ones = [1] * len(stream["id_baseline"])
        stream["id_baseline"] = convert(stream["id_baseline"], ones)
        stream["id"] = [None if row is None else convert(row, ones) for row in stream["id"]]
    for rung in stream.get("controls") or ():
        rung = {role: v for role, v in (rung or {}).items() if not _held(v)}
        for push in (rung.get("pointer") or {}).values():
            push["after"] = convert(push["after"], tokens)
            follow = push["following"]
            follow["before"] = convert(follow["before"], follow["rows"])
            follow["after"] = convert(follow["after"], follow["rows"])
        for drawn in rung.get("other_heads") or ():
            drawn["after"] = convert(drawn["after"], tokens)
