"""The supervision study's numbers over seeds, and its verdict by fixed rules.

    pooled_mean([[0.2, 0.5], [0.4, 0.1, 0.3]])       # {'mean': .., 'low': .., 'high': .., ...}
    summary = summarise_study(arms, by_seed, metric)   # accuracy, gains, masses, diagnosis
    study_verdict(summary)["verdict"]                  # one of VERDICTS

Combining seeds: within a seed run the instances are the independent unit (every arm of the
run is scored on the same instances, so a gain is paired per instance); a figure over seeds
is the mean of the per-seed means (each seed weighs the same), and its 95% interval comes
from a stratified bootstrap: instances are resampled within each seed, independently, and
the per-seed means averaged again (percentile interval, as the cluster bootstrap of
`harness.foundation.stats`). The interval is thus conditional on the models trained (three seeds say
little about the spread of the training itself), so the verdict also asks that the gain
be positive in every seed run, and each seed's figure is kept beside the pooled one.

The rules (docs/usage_analysis.md, "Does supervised attention generalise"), read on the
arm the ladder chose on OOD validation, its gain on OOD test (`metric`):
1. the gain's interval lies above 0:
   - a control it does not beat (the chosen arm's paired gain over the control not above
     0) that pulls no head to the reference (the wrong mask, or the extra steps): "not
     specific to the reference", naming those controls (whatever the seeds say: such a
     control helping as much explains the gain without attending right);
   - else, random heads pulled to the reference gain as much, and every seed run gains:
     "the reference, not these heads": attending to the reference helps, whichever heads
     are made to (the wrong mask and the extra steps gain less);
   - else, every seed run gains: "supervision generalises";
   - else (some seeds only): "inconclusive";
2. no such gain, and on at least ON_REFERENCE of the chosen arm's wrong OOD instances the
   supervised heads looked at the reference as much as in distribution (the diagnosis'
   on_reference share): "attention is not the bottleneck";
3. no gain, and the supervised heads' OOD reference mass did not rise over the baseline's
   (its interval not above 0): "supervision did not take";
4. otherwise "inconclusive": the mass rose, but neither to the ID level on most errors nor
   into a gain.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from harness.foundation.stats import CONFIDENCE, N_RESAMPLES, above_zero, below_zero, format_gain

VERDICTS = (
    "supervision generalises",
    "not specific to the reference",
    "the reference, not these heads",
    "attention is not the bottleneck",
    "supervision did not take",
    "inconclusive",
)
# What each verdict rules out (and what it does not), written beside it in every report.
RULES_OUT = {
    "supervision generalises": (
        "rules out that the OOD failure lies downstream of where the model looks, and that "
        "the gain is training longer, supervising any heads or any attention target (each "
        "control gains less); not that it holds past these tiny models and this task"
    ),
    "not specific to the reference": (
        "rules out reading the gain as the reference's: a control that pulls no head to the "
        "reference gains as much"
    ),
    "the reference, not these heads": (
        "rules out that the gain is training longer or any attention target (the extra steps "
        "and the wrong mask gain less); not that the ranked heads matter: random heads pulled "
        "to the reference gain as much, nor that it holds past these tiny models"
    ),
    "attention is not the bottleneck": (
        "rules out that the model fails OOD for not looking at the reference: on most wrong "
        "instances its supervised heads look there as much as in distribution, and "
        "supervision did not raise OOD accuracy; the failure is downstream of the lookup"
    ),
    "supervision did not take": (
        "rules out nothing about the bottleneck: supervising the heads in distribution did "
        "not raise their reference mass out of distribution, so the test did not happen at "
        "these weights"
    ),
    "inconclusive": (
        "rules out little: the supervised heads moved toward the reference out of "
        "distribution, but neither to their ID level on most errors nor into a gain every "
        "seed shares"
    ),
}
ON_REFERENCE = 0.5  # "most wrong instances": the diagnosis' on_reference share at least this
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
    return {"instances": instances, "tokens": tokens, "shares": shares}


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


# --- the verdict ------------------------------------------------------------------------------
def study_verdict(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The verdict of one task (module docstring), with the numbers it read, the reason
    in words and what it rules out."""
    chosen, metric = summary["chosen"], summary["metric"]
    gain = summary["gains"]["ood"][chosen][metric]
    per_seed = [g for g in gain.get("seeds", []) if g is not None]
    versus = {name: summary["versus_controls"][name][metric] for name in summary["controls"]}
    mass = summary["mass_gains"]["ood"][chosen]
    looks = ((summary["diagnosis"].get(chosen) or {}).get("ood") or {}).get("shares", {})
    on_reference = looks.get("on_reference")
    numbers = {
        "chosen": chosen,
        "metric": metric,
        "gain": gain,
        "versus_controls": versus,
        "mass_gain": mass,
        "on_reference": on_reference,
    }
    said = f"{chosen}'s OOD {metric} gain {format_gain(gain)} points"
    if above_zero(gain):
        unbeaten = [name for name, d in versus.items() if not above_zero(d)]
        roles = summary.get("control_roles", {})
        # random heads pulled to the reference attend right too: they question the heads
        elsewhere = [name for name in unbeaten if roles.get(name) != "random_heads"]
        every_seed = bool(per_seed) and min(per_seed) > 0

        def listed(names) -> str:  # "wrong3-w1 (+10.2 [+8.8, +11.6]), ..."
            return ", ".join(f"{name} ({format_gain(versus[name])})" for name in names)

        if elsewhere:
            verdict = "not specific to the reference"
            reason = f"{said}, but not above {listed(elsewhere)}"
        elif unbeaten and every_seed:
            verdict = "the reference, not these heads"
            beaten = [name for name in versus if name not in unbeaten]
            reason = (
                f"{said}, in every seed run, above {listed(beaten)}, "
                f"but not above {listed(unbeaten)}"
            )
        elif not every_seed:
            verdict = "inconclusive"
            above = "above each control" if not unbeaten else "not above " + ", ".join(unbeaten)
            reason = f"{said}, {above}, but not in every seed run ({_seeds(per_seed)})"
        else:
            verdict = "supervision generalises"
            reason = f"{said}, in every seed run, above each control"
    else:
        hurt = " (a loss)" if below_zero(gain) else ""
        if on_reference is not None and on_reference >= ON_REFERENCE:
            verdict = "attention is not the bottleneck"
            reason = (
                f"{said}{hurt}, while on {on_reference:.2f} of its wrong OOD instances the "
                "supervised heads looked at the reference as much as in distribution"
            )
        elif not above_zero(mass):
            verdict = "supervision did not take"
            reason = (
                f"{said}{hurt}; the supervised heads' OOD reference mass moved "
                f"{format_gain(mass)} points over the baseline's"
            )
        else:
            verdict = "inconclusive"
            shown = "n/a" if on_reference is None else f"{on_reference:.2f}"
            reason = (
                f"{said}{hurt}; the heads' OOD reference mass rose {format_gain(mass)} points, "
                f"yet they looked there as in distribution on {shown} of the wrong instances"
            )
    return {
        "verdict": verdict,
        "reason": reason,
        "rules_out": RULES_OUT[verdict],
        "numbers": numbers,
    }


def _seeds(values: Sequence[float]) -> str:
    return "per seed " + ", ".join(f"{v * 100:+.1f}" for v in values) if values else "none"
