"""The supervision study's numbers over seeds: pooled means, paired gains and diagnoses.

    pooled_mean([[0.2, 0.5], [0.4, 0.1, 0.3]])       # {'mean': .., 'low': .., 'high': .., ...}
    summary = summarise_study(arms, by_seed, metric)   # accuracy, gains, masses, diagnosis

Combining seeds: within a seed run the instances are the independent unit (every arm of the
run is scored on the same instances, so a gain is paired per instance); a figure over seeds
is the mean of the per-seed means (each seed weighs the same), and its 95% interval comes
from a stratified bootstrap: instances are resampled within each seed, independently, and
the per-seed means averaged again (percentile interval, as the cluster bootstrap of
`harness.foundation.stats`). The interval is thus conditional on the models trained (three seeds say
little about the spread of the training itself), so the verdict also asks that the gain
be positive in every seed run, and each seed's figure is kept beside the pooled one.

The verdict these numbers feed: `harness.attention.verdicts.supervision`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from harness.foundation.stats import CONFIDENCE, N_RESAMPLES

STREAMS = ("id", "ood")


# --- over seeds -------------------------------------------------------------------------------
def pooled_mean(
    samples: Sequence[Sequence[float]],
    seed: int = 0,
    n_resamples: int = N_RESAMPLES,
    confidence: float = CONFIDENCE,
) -> dict[str, Any]:
    """The mean of the per-seed means of `samples` (one list of per-instance values per
    seed run; an empty one is left out) and its stratified bootstrap interval (module
    docstring); `seeds`: each seed's mean (None where it had no values), `n`: the values."""
    import numpy as np

    arrays = [np.asarray(s, dtype=float) for s in samples]
    kept = [a for a in arrays if a.size]
    out: dict[str, Any] = {
        "mean": None,
        "low": None,
        "high": None,
        "n": int(sum(a.size for a in kept)),
        "seeds": [float(a.mean()) if a.size else None for a in arrays],
    }
    if not kept:
        return out
    mean = float(np.mean([a.mean() for a in kept]))
    out["mean"] = out["low"] = out["high"] = mean
    if all(np.all(a == a[0]) for a in kept):
        return out  # no spread within any seed: the interval is the point
    rng = np.random.default_rng(seed)
    draws = np.zeros(n_resamples)
    for a in kept:
        drawn = rng.integers(0, a.size, size=(n_resamples, a.size))
        draws += a[drawn].mean(1)
    draws /= len(kept)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(draws, [tail, 100 - tail])
    out["low"], out["high"] = float(low), float(high)
    return out


def as_gain(pooled: Mapping[str, Any]) -> dict[str, Any]:
    """A `pooled_mean` of differences in the shape of `harness.foundation.stats.paired_gain` (gain,
    low, high), which `above_zero` and `format_gain` read."""
    gain = {k: (math.nan if pooled[k] is None else pooled[k]) for k in ("mean", "low", "high")}
    return {
        "gain": gain["mean"],
        "low": gain["low"],
        "high": gain["high"],
        "n": pooled["n"],
        "seeds": pooled["seeds"],
    }


def paired_differences(
    base: Sequence[Mapping[str, Any]], treated: Sequence[Mapping[str, Any]], key: str
) -> list[float]:
    """`treated[key] - base[key]` per instance of one seed run, paired by (config, index)."""
    from harness.foundation.stats import pair_records

    return [float(b[key]) - float(a[key]) for a, b in pair_records(base, treated)]


# --- length bins ------------------------------------------------------------------------------
def length_bins(records_by_seed: Sequence[Sequence[Mapping[str, Any]]]) -> list[tuple[int, int]]:
    """The bins of the lengths of every seed's records (`attentionspan_datasets.metrics`),
    one set for every arm: they are scored on the same instances."""
    from attentionspan_datasets.metrics import length_bins as bins_of

    lengths = [int(r["length"]) for records in records_by_seed for r in records]
    return bins_of(lengths) if lengths else []


def in_bin(records: Sequence[Mapping[str, Any]], first: int, last: int) -> list:
    return [r for r in records if first <= int(r["length"]) <= last]


def accuracy(
    records_by_seed: Sequence[Sequence[Mapping[str, Any]]],
    metrics: Sequence[str],
    bins: Sequence[tuple[int, int]],
) -> dict[str, Any]:
    """Per metric the pooled mean over seeds, overall and per length bin."""
    from harness.foundation.stats import length_label

    out: dict[str, Any] = {
        m: pooled_mean([[r[m] for r in records] for records in records_by_seed]) for m in metrics
    }
    out["per_length"] = {}
    for first, last in bins:
        chosen = [in_bin(records, first, last) for records in records_by_seed]
        out["per_length"][length_label(first, last)] = {
            "n": sum(len(c) for c in chosen),
            **{m: pooled_mean([[r[m] for r in c] for c in chosen]) for m in metrics},
        }
    return out


def gains(
    base_by_seed: Sequence[Sequence[Mapping[str, Any]]],
    arm_by_seed: Sequence[Sequence[Mapping[str, Any]]],
    metrics: Sequence[str],
    bins: Sequence[tuple[int, int]] = (),
) -> dict[str, Any]:
    """Per metric the gain of an arm over another, paired per instance within each seed
    run, pooled over seeds (`as_gain`), overall and per length bin."""
    from harness.foundation.stats import length_label

    def table(base, arm):
        return {
            m: as_gain(pooled_mean([paired_differences(b, a, m) for b, a in zip(base, arm)]))
            for m in metrics
        }

    out = table(base_by_seed, arm_by_seed)
    out["per_length"] = {
        length_label(first, last): table(
            [in_bin(b, first, last) for b in base_by_seed],
            [in_bin(a, first, last) for a in arm_by_seed],
        )
        for first, last in bins
    }
    return out


def mass_gain(base: Sequence[Mapping[str, Any]], arm: Sequence[Mapping[str, Any]], key: str):
    """The gain of the heads' reference mass (`key`: "supervised" or "random"), paired per
    instance within each seed run, pooled over seeds; `base`, `arm`: one stream's masses
    per seed run ({"index": [...], key: [...]})."""
    samples = []
    for b, a in zip(base, arm):
        of_base = dict(zip(b["index"], b[key]))
        samples.append([v - of_base[i] for i, v in zip(a["index"], a[key]) if i in of_base])
    return as_gain(pooled_mean(samples))


def pooled_diagnosis(found: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The diagnoses of one arm and stream over seeds: instances and tokens summed, each
    class's share the mean over every seed's wrong instances (each instance counts once)."""
    instances = sum(d.get("instances") or 0 for d in found)
    tokens = sum(d.get("tokens") or 0 for d in found)
    classes = list(next((d["shares"] for d in found if d.get("shares")), {}))
    shares = {
        k: (
            sum((d["shares"].get(k) or 0.0) * (d.get("instances") or 0) for d in found) / instances
            if instances
            else None
        )
        for k in classes
    }
    # which rows the shares read (`diagnosis.BASIS`); None for a diagnosis made before it
    bases = {d.get("basis") for d in found}
    return {
        "instances": instances,
        "tokens": tokens,
        "shares": shares,
        "basis": bases.pop() if len(bases) == 1 else None,
    }


def table2_row(result: Mapping[str, Any]) -> dict[str, Any]:
    """One config's Table 2 of one model, compact: per pass the mean rollout share of the
    correct and the wrong tokens and the instance-aware direction with its interval."""
    out = {}
    for mode, block in (("teacher_forced", result), ("generate", result.get("generate"))):
        if not block or "rollout" not in block:
            continue
        aware = block.get("instance_aware") or {}
        boot = aware.get("cluster_bootstrap") or {}
        out[mode] = {
            "correct": (block["rollout"].get("correct") or {}).get("mean"),
            "wrong": (block["rollout"].get("error") or {}).get("mean"),
            "direction": aware.get("direction"),
            "difference": boot.get("difference"),
            "low": boot.get("low"),
            "high": boot.get("high"),
            "token_accuracy": block.get("token_accuracy"),
        }
    return out
