"""Paired bootstrap gains: intervals cover a known gain, pairing is by instance."""

from __future__ import annotations

import random

import pytest

from harness.stats import format_gain, gain_table, paired_gain, summarise


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
