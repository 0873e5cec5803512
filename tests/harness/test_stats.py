"""Paired bootstrap gains: intervals cover a known gain, pairing is by instance."""

from __future__ import annotations

import contextlib
import json
import math
import random
import warnings

import numpy as np
import pytest

from harness.foundation.stats import (
    DIRECTIONS,
    MIN_KIND_INSTANCES,
    UNDETERMINED,
    correct_vs_wrong,
    format_gain,
    gain_table,
    paired_gain,
    summarise,
)


def synthetic(n: int, gain: float, seed: int = 0):
    rng = random.Random(seed)
    base = [
        {"config": "x", "index": i, "length": rng.randint(11, 50), "partial_acc": rng.random() / 2}
        for i in range(n)
    ]
    treated = [dict(b, partial_acc=b["partial_acc"] + gain + rng.gauss(0, 0.1)) for b in base]
    for rows in (base, treated):
        for r in rows:
            r["exact_match"] = 0.0
    return base, treated


def test_interval_contains_known_gain_and_excludes_zero():
    base, treated = synthetic(200, gain=0.2)
    result = gain_table(base, treated, seed=1)["partial_acc"]
    assert result["low"] < 0.2 < result["high"]
    assert result["low"] > 0.1  # a real effect: the interval is far from 0
    assert result["high"] - result["low"] < 0.1


def test_no_effect_interval_contains_zero():
    base, treated = synthetic(200, gain=0.0, seed=3)
    result = paired_gain([b["partial_acc"] for b in base], [t["partial_acc"] for t in treated])
    assert result["low"] < 0 < result["high"]


def test_pairing_is_by_instance_not_order():
    base, treated = synthetic(50, gain=0.3)
    shuffled = list(reversed(treated))
    assert gain_table(base, shuffled)["partial_acc"]["gain"] == pytest.approx(
        gain_table(base, treated)["partial_acc"]["gain"]
    )


def test_constant_differences_give_a_point_interval():
    result = paired_gain([0.0] * 10, [1.0] * 10)
    assert result == {"gain": 1.0, "low": 1.0, "high": 1.0, "n": 10}


def test_mismatched_records_name_the_counts():
    base, treated = synthetic(10, gain=0.1)
    with pytest.raises(ValueError, match="do not pair up"):
        gain_table(base, treated[:-1])
    with pytest.raises(ValueError, match="equal lengths"):
        paired_gain([1.0], [1.0, 2.0])


def test_per_length_bins_and_summary():
    base, treated = synthetic(100, gain=0.2)
    table = gain_table(base, treated)
    assert 1 <= len(table["per_length"]) <= 10
    assert sum(row["n"] for row in table["per_length"].values()) == 100
    summary = summarise(base)
    assert summary["n"] == 100 and set(summary["per_length"]) == set(table["per_length"])
    assert format_gain(table["partial_acc"]).startswith("+")
    # not measured: None (as a digest holds it) or NaN (a gain over no rows)
    assert format_gain({"gain": None, "low": None, "high": None}) == "n/a"
    assert format_gain({"gain": float("nan"), "low": 0.0, "high": 0.0}) == "n/a"
    assert format_gain({"gain": 0.1234, "low": 0.1, "high": 0.15}) == "+12.3 [+10.0, +15.0]"


# --- correct versus wrong tokens, counting instances ---------------------------------------
def token(index, length, position, share, correct, **extra):
    return {
        "index": index,
        "length": length,
        "position": position,
        "share": share,
        "correct": correct,
        **extra,
    }


@contextlib.contextmanager
def no_warnings():
    """A context in which any warning (scipy's precision-loss RuntimeWarning) fails."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


def test_every_instance_differing_by_a_tenth_gives_a_paired_difference_of_a_tenth():
    # Instance i: base 0.1 + 0.05 i, its correct tokens at base + 0.1, its wrong ones at base;
    # the better instances have more correct tokens, so the pooled difference is larger.
    records = []
    for i in range(10):
        base = 0.1 + 0.05 * i
        labels = [True] * (i + 1) + [False] * (10 - i)
        for p, ok in enumerate(labels):
            records.append(token(i, 11, p, base + 0.1 if ok else base, ok))
    out = correct_vs_wrong(records)
    paired = out["paired"]
    assert paired["mean_difference"] == pytest.approx(0.1, abs=1e-12)
    assert paired["low"] == pytest.approx(0.1, abs=1e-9)
    assert paired["high"] == pytest.approx(0.1, abs=1e-9)
    assert paired["n_instances"] == 10 and paired["n_tokens"] == 110
    # Ten positive differences: the exact two-sided signed-rank p is 2 / 2**10.
    assert paired["wilcoxon_p"] == pytest.approx(2 / 2**10)
    right = [r["share"] for r in records if r["correct"]]
    wrong = [r["share"] for r in records if not r["correct"]]
    pooled = sum(right) / len(right) - sum(wrong) / len(wrong)
    assert pooled > 0.2  # confounded by instance quality
    boot = out["cluster_bootstrap"]
    assert boot["difference"] == pytest.approx(pooled)
    assert boot["low"] < pooled < boot["high"]
    assert out["direction"] == "correct > wrong"
    assert out["n_tokens"] == 110 and out["n_instances"] == 10


def one_long_failing_instance():
    """20 instances of length 6 whose correct and wrong tokens differ by +0.02 in half of
    them and -0.02 in the other half, and one instance of length 200 that gets every token
    wrong with a low share."""
    records = []
    for i in range(20):
        base = 0.25 + 0.01 * (i % 5)
        sign = 1 if i % 2 else -1
        right = {(i + k) % 6 for k in (0, 2, 3)}  # three correct positions, varying
        for p in range(6):
            ok = p in right
            records.append(token(i, 6, p, base + sign * (0.01 if ok else -0.01), ok))
    for p in range(200):
        records.append(token(20, 200, p, 0.05 + 0.001 * (p % 7), False))
    return records


def test_one_long_failing_instance_fools_only_the_pooled_test():
    records = one_long_failing_instance()
    with no_warnings():
        out = correct_vs_wrong(records)
    from scipy import stats

    right = [r["share"] for r in records if r["correct"]]
    wrong = [r["share"] for r in records if not r["correct"]]
    assert stats.ttest_ind(right, wrong, equal_var=False).pvalue < 1e-20  # the paper's test
    boot = out["cluster_bootstrap"]
    assert boot["low"] < 0 < boot["high"]
    assert out["direction"] == "no difference at 5%"
    paired = out["paired"]
    assert paired["mean_difference"] == pytest.approx(0.0, abs=1e-12)
    assert paired["n_instances"] == 20 and paired["wilcoxon_p"] == pytest.approx(1.0)
    matched = out["matched"]
    # The long instance is alone at its length: it cannot be matched and is left out.
    assert matched["n_instances"] == 20 and matched["n_tokens"] == 120
    assert matched["p"] > 0.05


def confounded_by_position(effect: float, seed: int = 0):
    """Lengths 8-10, 30 instances each: later positions attend less AND fail more often, so
    the pooled comparison sees a difference with no effect; `effect` is added to the share
    of every correct token."""
    rng = np.random.default_rng(seed)
    records = []
    for i in range(90):
        length = 8 + i % 3
        for p in range(length):
            ok = bool(rng.random() < 0.9 - 0.08 * p)
            share = 0.4 - 0.03 * p + effect * ok + rng.normal(0, 0.02)
            records.append(token(i, length, p, share, ok))
    return records


def test_the_matched_permutation_test_finds_a_planted_effect_and_no_confounded_one():
    planted = correct_vs_wrong(confounded_by_position(0.05), seed=1)["matched"]
    assert planted["difference"] == pytest.approx(0.05, abs=0.01)
    assert planted["p"] == pytest.approx(1 / 2001)  # no permutation reaches it
    assert planted["n_strata"] == 3 and planted["n_instances"] == 90
    null = confounded_by_position(0.0)
    out = correct_vs_wrong(null, seed=1)
    # Position alone makes a difference over tokens and within instances (later positions
    # attend less and fail more); matched on position, none is left.
    assert out["cluster_bootstrap"]["low"] > 0.02 and out["paired"]["low"] > 0.02
    assert abs(out["matched"]["difference"]) < 0.005 and out["matched"]["p"] > 0.05


def test_the_matched_statistic_by_hand():
    # Two instances of length 2. Cell means: position 0 (0.5 + 0.2) / 2, position 1
    # (0.1 + 0.4) / 2, so the residuals are +-0.15; correct tokens average +0.15, wrong ones
    # -0.15. Swapping the two label vectors gives -0.3: every permutation is as extreme.
    records = [
        token(0, 2, 0, 0.5, True),
        token(0, 2, 1, 0.1, False),
        token(1, 2, 0, 0.2, False),
        token(1, 2, 1, 0.4, True),
    ]
    out = correct_vs_wrong(records, n_resamples=200)["matched"]
    assert out["difference"] == pytest.approx(0.3)
    assert out["p"] == 1.0 and out["n_strata"] == 1 and out["n_tokens"] == 4


def test_the_same_seed_gives_the_same_figures():
    records = confounded_by_position(0.02, seed=4)
    first = correct_vs_wrong(records, seed=7)
    assert correct_vs_wrong(records, seed=7) == first
    other = correct_vs_wrong(records, seed=8)
    assert other["cluster_bootstrap"]["low"] != first["cluster_bootstrap"]["low"]
    assert json.loads(json.dumps(first, allow_nan=False)) == first


def test_degenerate_inputs_give_none_not_errors():
    with no_warnings():
        empty = correct_vs_wrong([])
        assert empty["n_tokens"] == 0 and empty["cluster_bootstrap"]["difference"] is None
        assert empty["paired"]["mean_difference"] is None and empty["matched"]["p"] is None
        assert empty["direction"] == UNDETERMINED
        # No wrong token: nothing to compare.
        all_right = [token(i, 5, p, 0.3, True) for i in range(3) for p in range(5)]
        out = correct_vs_wrong(all_right)
        assert out["cluster_bootstrap"]["difference"] is None
        assert out["paired"]["n_instances"] == 0 and out["paired"]["wilcoxon_p"] is None
        assert out["matched"]["difference"] is None
        assert out["direction"] == "no wrong tokens to compare"
        # One instance: a difference, but no interval over instances.
        one = [token(0, 4, p, 0.1 * (p + 1), p < 2) for p in range(4)]
        out = correct_vs_wrong(one)
        assert out["cluster_bootstrap"]["difference"] == pytest.approx(0.15 - 0.35)
        assert out["cluster_bootstrap"]["low"] is None
        assert out["paired"]["mean_difference"] == pytest.approx(-0.2)
        assert out["paired"]["low"] is None and out["matched"]["p"] is None
        assert out["direction"] == UNDETERMINED
        # Identical values everywhere: no spread, no scipy warning.
        flat = [token(i, 3, p, 0.2, p == 0) for i in range(5) for p in range(3)]
        out = correct_vs_wrong(flat)
        assert out["paired"]["mean_difference"] == 0.0 and out["paired"]["wilcoxon_p"] is None
        assert out["cluster_bootstrap"]["low"] == 0.0 and out["direction"] == DIRECTIONS[2]
    # Tokens without a reference (nan share) and of unknown correctness are counted apart.
    records = confounded_by_position(0.05)
    extra = [token(500, 8, 0, math.nan, True), token(500, 8, 1, 0.3, None)]
    out = correct_vs_wrong(records + extra)
    assert out["no_reference"] == 1 and out["unknown"] == 1
    assert out["n_tokens"] == len(records) and out["n_instances"] == 90


def test_a_kind_held_by_few_instances_gets_no_interval():
    """One wrong token in 32 instances: a resample misses it 37% of the time, so the
    bootstrap gives the difference but no interval, and no direction is read from it."""
    records = [token(i, 5, p, 0.4, not (i == 0 and p == 0)) for i in range(32) for p in range(5)]
    records[0]["share"] = 0.3
    out = correct_vs_wrong(records)
    boot = out["cluster_bootstrap"]
    assert boot["difference"] == pytest.approx(0.1)
    assert boot["low"] is None and boot["high"] is None
    assert (boot["instances_correct"], boot["instances_wrong"]) == (32, 1)
    assert out["direction"] == UNDETERMINED
    # Wrong tokens in MIN_KIND_INSTANCES instances: an interval again.
    for i in range(1, MIN_KIND_INSTANCES):
        records[5 * i]["correct"], records[5 * i]["share"] = False, 0.3
    boot = correct_vs_wrong(records)["cluster_bootstrap"]
    assert boot["instances_wrong"] == MIN_KIND_INSTANCES and boot["low"] == pytest.approx(0.1)


def test_instances_are_told_apart_by_config_and_repeats_are_refused():
    a = [token(0, 3, p, 0.1 * p, p == 1, config="x") for p in range(3)]
    b = [token(0, 3, p, 0.1 * p, p != 1, config="y") for p in range(3)]
    assert correct_vs_wrong(a + b)["n_instances"] == 2
    with pytest.raises(ValueError, match="two tokens at the same position"):
        correct_vs_wrong([dict(r, config="x") for r in a + b])


def test_gain_intervals_and_numbers_read_the_same_everywhere():
    from harness.foundation.stats import above_zero, below_zero, format_number

    assert above_zero({"gain": 0.2, "low": 0.1, "high": 0.3})
    assert not above_zero({"gain": 0.2, "low": 0.0, "high": 0.3})  # touching 0 is not above
    assert not above_zero({"gain": math.nan, "low": math.nan, "high": math.nan})
    assert not above_zero(None) and not above_zero({})
    assert below_zero({"gain": -0.2, "low": -0.3, "high": -0.1})
    assert not below_zero({"gain": -0.2, "low": -0.3, "high": 0.0})
    assert format_number(0.12345) == "0.123" and format_number(1, 2) == "1.00"
    assert format_number(None) == format_number(math.nan) == "n/a"
