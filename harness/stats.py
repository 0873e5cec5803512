"""Paired gains over a baseline with bootstrap 95% intervals, overall and per length.

    from harness.stats import paired_gain, gain_table
    paired_gain([0.2, 0.5, 0.1], [0.6, 0.5, 0.4])   # {'gain': 0.233, 'low': ..., 'high': ...}
    gain_table(baseline_records, intervened_records, metrics=("exact_match", "partial_acc"))

Every intervention is scored on the same instances as its baseline, so a gain is the mean of
per-instance differences and its interval comes from resampling instances (a paired
bootstrap: `scipy.stats.bootstrap` over the differences, BCa, falling back to the percentile
interval where BCa is undefined, e.g. when every difference is equal).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

METRICS = ("exact_match", "partial_acc")
N_RESAMPLES = 2000
CONFIDENCE = 0.95


def mean(values: Iterable[float]) -> float:
    values = list(values)
    return sum(values) / len(values) if values else math.nan


def paired_gain(
    baseline: Sequence[float],
    treated: Sequence[float],
    confidence: float = CONFIDENCE,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
) -> dict[str, float]:
    """Mean of `treated - baseline` (paired by position) and its bootstrap interval."""
    import numpy as np
    from scipy import stats

    if len(baseline) != len(treated):
        raise ValueError(
            f"paired_gain needs equal lengths, got baseline {len(baseline)} and "
            f"treated {len(treated)}"
        )
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    diff = np.asarray(treated, dtype=float) - np.asarray(baseline, dtype=float)
    n = len(diff)
    if n == 0:
        return {"gain": math.nan, "low": math.nan, "high": math.nan, "n": 0}
    gain = float(diff.mean())
    if n == 1 or np.all(diff == diff[0]):
        # No spread to resample: the interval is the point (scipy would warn and give nan).
        return {"gain": gain, "low": gain, "high": gain, "n": n}
    low = high = math.nan
    for method in ("BCa", "percentile"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = stats.bootstrap(
                (diff,),
                np.mean,
                confidence_level=confidence,
                n_resamples=n_resamples,
                method=method,
                rng=np.random.default_rng(seed),
            )
        low, high = (float(x) for x in result.confidence_interval)
        if math.isfinite(low) and math.isfinite(high):
            break
    return {"gain": gain, "low": low, "high": high, "n": n}


def mean_interval(
    values: Sequence[float],
    confidence: float = CONFIDENCE,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
) -> dict[str, float]:
    """Mean of `values` and its bootstrap interval (the band of an accuracy curve)."""
    return paired_gain([0.0] * len(values), values, confidence, n_resamples, seed)


def _key(record: dict[str, Any]) -> tuple:
    return (record.get("config", ""), record["index"])


def pair_records(
    baseline: Sequence[dict[str, Any]], treated: Sequence[dict[str, Any]]
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Records of the same instance (config, index), in the baseline's order."""
    by_key = {_key(r): r for r in treated}
    pairs = [(r, by_key[_key(r)]) for r in baseline if _key(r) in by_key]
    if len(pairs) != len(baseline) or len(pairs) != len(treated):
        raise ValueError(
            f"records do not pair up: baseline {len(baseline)}, treated {len(treated)}, "
            f"common {len(pairs)} instances"
        )
    return pairs


def length_label(first: int, last: int) -> str:
    return str(first) if first == last else f"{first}-{last}"


def by_length(items: Sequence[Any], length_of, max_bins: int = 10) -> dict[str, list]:
    """Items grouped into at most `max_bins` equal-width length bins (the bins of
    `attentionspan_datasets.metrics.length_bins`, so reports and lm-eval agree), in order."""
    from attentionspan_datasets.metrics import bin_of, length_bins

    bins = length_bins([length_of(x) for x in items], max_bins=max_bins)
    groups: dict[str, list] = {length_label(*b): [] for b in bins}
    for x in items:
        groups[length_label(*bin_of(length_of(x), bins))].append(x)
    return {k: v for k, v in groups.items() if v}


def summarise(
    records: Sequence[dict[str, Any]], metrics: Sequence[str] = METRICS, max_bins: int = 10
) -> dict:
    """Means over instances, overall and per length bin (`record["length"]`)."""
    groups = by_length(records, lambda r: int(r["length"]), max_bins)
    return {
        "n": len(records),
        **{m: mean(r[m] for r in records) for m in metrics},
        "per_length": {
            label: {"n": len(rows), **{m: mean(r[m] for r in rows) for m in metrics}}
            for label, rows in groups.items()
        },
    }


def gain_table(
    baseline: Sequence[dict[str, Any]],
    treated: Sequence[dict[str, Any]],
    metrics: Sequence[str] = METRICS,
    per_length: bool = True,
    seed: int = 0,
    n_resamples: int = N_RESAMPLES,
    max_bins: int = 10,
) -> dict[str, Any]:
    """Paired gains of `treated` over `baseline` per metric, overall and per length."""
    pairs = pair_records(baseline, treated)
    table: dict[str, Any] = {
        m: paired_gain(
            [a[m] for a, _ in pairs], [b[m] for _, b in pairs], seed=seed, n_resamples=n_resamples
        )
        for m in metrics
    }
    if per_length:
        groups = by_length(pairs, lambda pair: int(pair[0]["length"]), max_bins)
        table["per_length"] = {
            label: {"n": len(rows)}
            | {
                m: paired_gain(
                    [a[m] for a, _ in rows],
                    [b[m] for _, b in rows],
                    seed=seed,
                    n_resamples=n_resamples,
                )
                for m in metrics
            }
            for label, rows in groups.items()
        }
    return table


def format_gain(gain: dict[str, float], scale: float = 100.0) -> str:
    """`+12.3 [+4.1, +20.0]` (points by default)."""
    if not math.isfinite(gain["gain"]):
        return "n/a"
    return f"{gain['gain'] * scale:+.1f} [{gain['low'] * scale:+.1f}, {gain['high'] * scale:+.1f}]"
