"""Statistics over instances: paired gains over a baseline with bootstrap 95% intervals,
overall and per length; correct versus wrong tokens counting instances, not tokens.

    from harness.foundation.stats import paired_gain, gain_table, correct_vs_wrong
    paired_gain([0.2, 0.5, 0.1], [0.6, 0.5, 0.4])   # {'gain': 0.233, 'low': ..., 'high': ...}
    gain_table(baseline_records, intervened_records, metrics=("exact_match", "partial_acc"))
    correct_vs_wrong(token_records)   # cluster bootstrap, paired, length/position-matched

Every intervention is scored on the same instances as its baseline, so a gain is the mean of
per-instance differences and its interval comes from resampling instances (a paired
bootstrap: `scipy.stats.bootstrap` over the differences, BCa, falling back to the percentile
interval where BCa is undefined, e.g. when every difference is equal). Tokens of one
instance are not independent either: `correct_vs_wrong` resamples, pairs and permutes whole
instances (the paper's pooled test over tokens is `harness.attention.scores.compare`).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

from attentionspan_datasets.metrics import METRICS  # the answer's scores

N_RESAMPLES = 2000
CONFIDENCE = 0.95
# The cluster bootstrap's interval needs this many instances holding a correct token and as
# many holding a wrong one: with k of n, a resample misses them all with probability about
# e^-k (37% for one, under 1% for five), and the interval would only describe the resamples
# that happened to draw them.
MIN_KIND_INSTANCES = 5


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


def record_key(record: dict[str, Any]) -> tuple:
    """What names an instance's record: (config, index)."""
    return (record.get("config", ""), record["index"])


def pair_records(
    baseline: Sequence[dict[str, Any]], treated: Sequence[dict[str, Any]]
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Records of the same instance (config, index), in the baseline's order."""
    by_key = {record_key(r): r for r in treated}
    pairs = [(r, by_key[record_key(r)]) for r in baseline if record_key(r) in by_key]
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


def overall(summary: dict[str, Any]) -> dict[str, Any]:
    """A `summarise` result's overall means, without its per-length bins."""
    return {k: v for k, v in summary.items() if k != "per_length"}


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
    """`+12.3 [+4.1, +20.0]` (points by default); `n/a` when not measured (None, as a
    digest holds it, or NaN: a gain over no rows)."""
    if gain.get("gain") is None or not math.isfinite(gain["gain"]):
        return "n/a"
    return f"{gain['gain'] * scale:+.1f} [{gain['low'] * scale:+.1f}, {gain['high'] * scale:+.1f}]"


def above_zero(gain: dict[str, float] | None) -> bool:
    """The interval of a gain (`paired_gain`) lies above 0 (False when there is none)."""
    return bool(gain) and math.isfinite(gain.get("low", math.nan)) and gain["low"] > 0


def below_zero(gain: dict[str, float] | None) -> bool:
    """The interval of a gain lies below 0."""
    return bool(gain) and math.isfinite(gain.get("high", math.nan)) and gain["high"] < 0


def format_number(value, digits: int = 3) -> str:
    """`0.123`, or `n/a` for a missing or non-finite value."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    return f"{value:.{digits}f}"


# --- correct versus wrong tokens, counting instances (Table 2) ----------------------------
# The tokens of one instance share its length, its prompt and its failure (one wrong
# character often drags the rest down), so a test that treats tokens as independent draws
# (the pooled Welch test of the paper's Table 2) overstates its precision: on 200 OOD
# instances of the scratch reversal model the pooled interval was half as wide as a
# bootstrap over instances, and the within-instance difference 3.4x smaller than the pooled
# one (a reviewer's measurement on main, 2026-11).
DIRECTIONS = ("correct > wrong", "wrong > correct", "no difference at 5%")
UNDETERMINED = "too few instances to tell"
NOTHING_TO_COMPARE = {True: "no wrong tokens to compare", False: "no correct tokens to compare"}


def json_safe(value):
    """JSON-safe: nan and inf become None, numpy scalars plain numbers, recursively."""
    import numpy as np

    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def instance_tokens(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The scored tokens of `records` as arrays: `cluster` (instance number, 0..n-1, one per
    (config, index)), `share`, `correct` (bool), `length`, `position`; and the counts left
    out: `no_reference` (share nan: a token without a reference has no score) and `unknown`
    (correct None or nan)."""
    import numpy as np

    ids: dict[tuple, int] = {}
    cluster, share, correct, length, position = [], [], [], [], []
    no_reference = unknown = 0
    for r in records:
        ok = r.get("correct")
        if ok is None or (isinstance(ok, float) and math.isnan(ok)):
            unknown += 1
            continue
        value = r.get("share")
        if value is None or not math.isfinite(float(value)):
            no_reference += 1
            continue
        cluster.append(ids.setdefault(record_key(r), len(ids)))
        share.append(float(value))
        correct.append(bool(ok))
        length.append(int(r.get("length", 0)))
        position.append(int(r.get("position", 0)))
    if len(set(zip(cluster, position))) != len(cluster):
        raise ValueError(
            "records give one instance two tokens at the same position: pass one (config, "
            "mode) at a time"
        )
    return {
        "cluster": np.asarray(cluster, dtype=np.int64),
        "share": np.asarray(share, dtype=np.float64),
        "correct": np.asarray(correct, dtype=bool),
        "length": np.asarray(length, dtype=np.int64),
        "position": np.asarray(position, dtype=np.int64),
        "no_reference": no_reference,
        "unknown": unknown,
    }


def _counts(cluster, mask=None) -> dict[str, int]:
    import numpy as np

    chosen = cluster if mask is None else cluster[mask]
    return {"n_tokens": int(chosen.size), "n_instances": int(np.unique(chosen).size)}


def scarce_kind(boot: dict[str, Any]) -> str | None:
    """The kind of token ("wrong", else "correct") that some but fewer than
    MIN_KIND_INSTANCES instances hold, so that `cluster_bootstrap_difference` gives no
    interval; None where both kinds are held by enough instances (or one by none)."""
    for kind in ("wrong", "correct"):
        held = boot.get(f"instances_{kind}")
        if held is not None and 0 < held < MIN_KIND_INSTANCES:
            return kind
    return None


def cluster_bootstrap_difference(
    share,
    correct,
    cluster,
    confidence: float = CONFIDENCE,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
) -> dict[str, Any]:
    """mean(share of correct tokens) - mean(share of wrong tokens) over all tokens (the
    pooled difference, the paper's estimate) with a percentile interval from a cluster
    bootstrap: instances are drawn with replacement and each keeps all its tokens.

    Written with numpy rather than `scipy.stats.bootstrap`: the statistic is a ratio of
    per-instance sums, undefined in a resample that draws no correct (or no wrong) token;
    such resamples are skipped and counted (`undefined_resamples`), which scipy's interval
    cannot do. A resample's sums are sums of per-instance sums, so the tokens are read once.
    No token of one kind: None. Fewer than MIN_KIND_INSTANCES instances holding a correct
    (or a wrong) token: the difference, but no interval (`instances_correct` and
    `instances_wrong` say how many)."""
    import numpy as np

    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    n = int(cluster.max()) + 1 if cluster.size else 0
    out: dict[str, Any] = {
        "difference": None,
        "low": None,
        "high": None,
        "confidence": confidence,
        "n_resamples": n_resamples,
        "undefined_resamples": None,
        **_counts(cluster),
    }
    if n == 0 or correct.all() or not correct.any():
        return out
    # Per instance: the sum and count of the shares of its correct and of its wrong tokens.
    sums = np.stack(
        [
            np.bincount(cluster, weights=np.where(correct, share, 0.0), minlength=n),
            np.bincount(cluster, weights=correct.astype(float), minlength=n),
            np.bincount(cluster, weights=np.where(correct, 0.0, share), minlength=n),
            np.bincount(cluster, weights=(~correct).astype(float), minlength=n),
        ],
        axis=1,
    )  # [instances, 4]
    total = sums.sum(0)
    out["difference"] = float(total[0] / total[1] - total[2] / total[3])
    out["instances_correct"] = int((sums[:, 1] > 0).sum())
    out["instances_wrong"] = int((sums[:, 3] > 0).sum())
    if scarce_kind(out):
        return out
    rng = np.random.default_rng(seed)
    draws = []
    chunk = max(1, 500_000 // n)  # resamples at a time, to bound memory
    for start in range(0, n_resamples, chunk):
        size = min(chunk, n_resamples - start)
        drawn = rng.integers(0, n, size=(size, n))  # [size, n]: the instances of a resample
        t = sums[drawn].sum(1)  # [size, 4]
        with np.errstate(invalid="ignore", divide="ignore"):
            draws.append(t[:, 0] / t[:, 1] - t[:, 2] / t[:, 3])
    values = np.concatenate(draws)
    finite = values[np.isfinite(values)]
    out["undefined_resamples"] = int(values.size - finite.size)
    if finite.size:
        tail = (1 - confidence) / 2 * 100
        low, high = np.percentile(finite, [tail, 100 - tail])
        out["low"], out["high"] = float(low), float(high)
    return out


def paired_difference(
    share,
    correct,
    cluster,
    confidence: float = CONFIDENCE,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
) -> dict[str, Any]:
    """Within instances: for each instance with both kinds of token, mean(correct) -
    mean(wrong); their mean with a bootstrap interval over instances (`mean_interval`), and
    the Wilcoxon signed-rank test (scipy.stats.wilcoxon) that their median is 0. Length,
    prompt and failure are held fixed by construction. Wilcoxon needs a nonzero difference
    (None otherwise); the interval needs 2 instances."""
    import numpy as np
    from scipy import stats

    n = int(cluster.max()) + 1 if cluster.size else 0
    n_right = np.bincount(cluster, weights=correct.astype(float), minlength=n)
    n_wrong = np.bincount(cluster, weights=(~correct).astype(float), minlength=n)
    both = (n_right > 0) & (n_wrong > 0)
    sum_right = np.bincount(cluster, weights=np.where(correct, share, 0.0), minlength=n)
    sum_wrong = np.bincount(cluster, weights=np.where(correct, 0.0, share), minlength=n)
    diffs = sum_right[both] / n_right[both] - sum_wrong[both] / n_wrong[both]
    out: dict[str, Any] = {
        "mean_difference": float(diffs.mean()) if diffs.size else None,
        "low": None,
        "high": None,
        "confidence": confidence,
        "wilcoxon_statistic": None,
        "wilcoxon_p": None,
        **_counts(cluster, both[cluster]),
    }
    if diffs.size >= 2:
        interval = mean_interval(list(diffs), confidence, n_resamples, seed)
        out["low"], out["high"] = interval["low"], interval["high"]
    # All-zero differences leave Wilcoxon nothing to rank (scipy would warn and give nan).
    if np.any(diffs != 0):
        test = stats.wilcoxon(diffs)
        out["wilcoxon_statistic"] = float(test.statistic)
        out["wilcoxon_p"] = float(test.pvalue)
    return out


def matched_permutation(
    share,
    correct,
    cluster,
    length,
    position,
    n_permutations: int = N_RESAMPLES,
    seed: int = 0,
) -> dict[str, Any]:
    """Correct versus wrong with length and position held fixed: a stratified permutation
    test that swaps whole instances' label vectors between instances of the same length.

    `difference`: in each (length, position) cell, mean share of its correct tokens minus
    that of its wrong ones, averaged over cells with weights n_correct * n_wrong / n (the
    Mantel-Haenszel weights; the same number as the coefficient of `correct` in a linear
    model of the share with one mean per cell). Its numerator is the sum, over correct
    tokens, of the share minus its cell's mean; that sum is the permutation statistic (with
    every position scored, as in the teacher-forced pass, the weights do not change under
    the permutations below, so the two tests coincide).
    Null: the share says nothing about correctness once length and position are known. Under
    it, with instances drawn independently, an instance's vector of correct/wrong labels is
    exchangeable with that of any other instance of its length, so a permutation gives each
    instance the label vector of another of its length, label i staying at position i. That
    matches length and position exactly and keeps each instance's labels together (errors
    that follow an error stay together), which token-level shuffling would not: shuffling
    tokens within (length, position) cells breaks that dependence and narrows the null as the
    pooled test does; shuffling within an instance would not match position.
    Chosen over a mixed-effects logistic regression (correct ~ score + length + position,
    instance as group): statsmodels fits that only by variational Bayes
    (BinomialBayesMixedGLM, no frequentist p-value) and slowly on thousands of tokens, and
    the test here needs no model of how the score enters.
    p: two-sided, (1 + #{|U*| >= |U|}) / (1 + n_permutations), U the numerator. Instances
    alone at their length cannot be permuted and are left out (`n_instances`, `n_tokens`
    count the rest); None when no length has two instances or no cell has both kinds."""
    import numpy as np

    out: dict[str, Any] = {
        "difference": None,
        "p": None,
        "n_permutations": n_permutations,
        "n_strata": 0,
        "n_tokens": 0,
        "n_instances": 0,
    }
    if not cluster.size:
        return out
    n = int(cluster.max()) + 1
    inst_length = np.zeros(n, dtype=np.int64)
    inst_length[cluster] = length
    _, stratum, per_stratum = np.unique(inst_length, return_inverse=True, return_counts=True)
    # Instances alone at their length have no partner to swap labels with.
    kept = per_stratum[stratum] >= 2
    tokens = kept[cluster]
    if not tokens.any():
        return out
    # Renumber the kept instances 0..m-1; a token is then (row, col) = (instance, position).
    number = np.cumsum(kept) - 1
    rows, cols = number[cluster[tokens]], position[tokens]
    m, width = int(kept.sum()), int(cols.max()) + 1
    values, labels = share[tokens], correct[tokens]
    cell_of, residual = _cell_residuals(values, stratum[cluster[tokens]] * width + cols)
    inst_stratum = stratum[kept]
    out.update(
        n_strata=int(np.unique(inst_stratum).size),
        n_tokens=int(tokens.sum()),
        n_instances=m,
    )
    blocks = _swap_blocks(inst_stratum, rows, cols, residual, labels)
    weight = _mantel_haenszel_weight(cell_of, labels)
    if weight == 0:
        return out
    observed = float(sum(np.trace(b) for b in blocks))
    out["difference"] = observed / weight
    draws = _permuted_numerators(blocks, n_permutations, seed)
    # A tolerance so that a permutation equal to the observed one counts despite rounding.
    extreme = int(np.sum(np.abs(draws) >= abs(observed) - 1e-12))
    out["p"] = (1 + extreme) / (1 + n_permutations)
    return out


def _cell_residuals(values, cell):
    """(cell index of each token, its share minus the mean of its (length, position) cell)."""
    import numpy as np

    _, cell_of = np.unique(cell, return_inverse=True)
    cell_mean = np.bincount(cell_of, weights=values) / np.bincount(cell_of)
    return cell_of, values - cell_mean[cell_of]


def _swap_blocks(inst_stratum, rows, cols, residual, labels) -> list:
    """Per stratum of k instances, a [k, k] block whose [a, b] is what instance a's tokens
    add to the statistic's numerator (the sum of the residuals of the correct tokens) when
    a takes instance b's labels: a permutation's numerator is then a sum of k gathered
    cells per stratum, whatever the number of tokens."""
    import numpy as np

    m = inst_stratum.size
    blocks = []
    for s in np.unique(inst_stratum):
        members = np.flatnonzero(inst_stratum == s)
        local = np.full(m, -1)
        local[members] = np.arange(members.size)
        mine = np.isin(rows, members)
        r, c = local[rows[mine]], cols[mine]
        res, right = np.zeros((2, members.size, int(c.max()) + 1))
        res[r, c], right[r, c] = residual[mine], labels[mine]
        blocks.append(res @ right.T)  # [k, k]
    return blocks


def _mantel_haenszel_weight(cell_of, labels) -> float:
    """The sum of the cells' weights n_correct * n_wrong / n: cells with one kind only
    weigh 0."""
    import numpy as np

    n_cell = np.bincount(cell_of)
    n_right = np.bincount(cell_of, weights=labels.astype(float))
    return float(np.sum(n_right * (n_cell - n_right) / n_cell))


def _permuted_numerators(blocks: list, n_permutations: int, seed: int):
    """The statistic's numerator under `n_permutations` random permutations within each
    stratum (float [n_permutations])."""
    import numpy as np

    rng = np.random.default_rng(seed)
    draws = np.zeros(n_permutations)
    for b in blocks:
        k = b.shape[-1]
        step = max(1, 2_000_000 // k)  # permutations at a time, to bound memory
        for first in range(0, n_permutations, step):
            size = min(step, n_permutations - first)
            order = np.argsort(rng.random((size, k)), axis=1)  # random permutations
            # Instance a takes the labels of instance order[a]: gather cell [a, order[a]].
            draws[first : first + size] += b[np.arange(k), order].sum(-1)
    return draws


def direction(low: float | None, high: float | None) -> str:
    """A plain-language verdict from an interval for correct - wrong."""
    if low is None or high is None:
        return UNDETERMINED
    if low > 0:
        return DIRECTIONS[0]
    if high < 0:
        return DIRECTIONS[1]
    return DIRECTIONS[2]


def correct_vs_wrong(
    records: Sequence[dict[str, Any]],
    confidence: float = CONFIDENCE,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
) -> dict[str, Any]:
    """Instance-aware statistics for correct versus wrong tokens, JSON-safe (None where a
    figure is undefined, never an exception on degenerate input).

        correct_vs_wrong(records)   # records: index (and config), length, position,
                                    # share (nan: no reference), correct

    `cluster_bootstrap` (interval over instances for the pooled difference), `paired`
    (within instances, Wilcoxon), `matched` (length- and position-matched permutation test);
    `direction` is read from the cluster bootstrap interval, never from a test that counts
    tokens as independent (where the bootstrap has no interval, neither has the paired
    test: both need two instances; with one kind of token only, it says which is missing).
    Tokens without a reference (`no_reference`) or of unknown correctness (`unknown`) are
    left out and counted. The same seed gives the same figures."""
    data = instance_tokens(records)
    share, correct, cluster = data["share"], data["correct"], data["cluster"]
    boot = cluster_bootstrap_difference(share, correct, cluster, confidence, n_resamples, seed)
    paired = paired_difference(share, correct, cluster, confidence, n_resamples, seed)
    matched = matched_permutation(
        share, correct, cluster, data["length"], data["position"], n_resamples, seed
    )
    verdict = direction(boot["low"], boot["high"])
    if correct.size and (correct.all() or not correct.any()):
        verdict = NOTHING_TO_COMPARE[bool(correct[0])]  # e.g. in distribution: all right
    return json_safe(
        {
            "direction": verdict,
            **_counts(cluster),
            "no_reference": data["no_reference"],
            "unknown": data["unknown"],
            "cluster_bootstrap": boot,
            "paired": paired,
            "matched": matched,
        }
    )
