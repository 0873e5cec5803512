"""Stability and flip margin on word functions whose answers are known exactly."""

import numpy as np
import pytest
from scipy import stats as scipy_stats

from harness.attention.verdicts.stability import (
    INNER_RESAMPLES,
    STABLE,
    as_changes,
    flip_margin,
    stability,
    unstable_as,
    verdict_stability,
)


def ones(n: int, k: int) -> np.ndarray:
    """n instances, the first k of them ones."""
    return np.array([1] * k + [0] * (n - k))


def threshold_word(values: dict[str, np.ndarray], at_least: dict[str, int]):
    """ "A" when every stream holds at least its count of ones (over the draw), else "B"."""

    def word_of(draw):
        def count(stream):
            picked = values[stream] if draw is None else values[stream][np.asarray(draw[stream])]
            return int(picked.sum())

        return "A" if all(count(s) >= k for s, k in at_least.items()) else "B"

    return word_of


def changed(word_of, sizes, changes):
    """The word after the reported changes."""
    draw = {s: np.arange(n) for s, n in sizes.items()}
    for c in changes:
        draw[c["stream"]][c["position"]] = c["copy_of"]
    return word_of(draw)


def test_threshold_share_is_the_binomial_probability():
    # 33 ones of 64, "A" at 32 or more: a resample's count is Binomial(64, 33/64)
    word_of = threshold_word({"test": ones(64, 33)}, {"test": 32})
    out = stability(word_of, {"test": 64}, resamples=2000, seed=1)
    p = scipy_stats.binom.sf(31, 64, 33 / 64)
    error = np.sqrt(p * (1 - p) / 2000)
    assert out["word"] == "A"
    assert abs(out["share"] - p) < 4 * error, (out["share"], p)
    assert out["words"]["A"] + out["words"]["B"] == pytest.approx(1.0)
    # p is about 0.64: under STABLE, reported between the two words, never as one
    assert not out["stable"]
    assert out["reported_as"].startswith("unstable: A / B (")


def test_threshold_margin_is_exactly_two():
    # 33 ones: one change leaves 32 (still A), two leave 31 (B)
    sizes = {"test": 64}
    values = ones(64, 33)
    word_of = threshold_word({"test": values}, {"test": 32})
    out = flip_margin(word_of, sizes, resamples=200, budget=6000)
    assert out["margin"] == 2 and out["exact"] and out["at_least"] == 2, out
    assert out["reported_as"] == "exactly 2 instances"
    assert out["single_checked"] and out["minimal"] and out["calls"] <= 6000
    assert out["to"] == "B" and changed(word_of, sizes, out["changes"]) == "B"
    # each change turns a one into a copy of a zero
    assert all(values[c["position"]] == 1 and values[c["copy_of"]] == 0 for c in out["changes"])


def test_margin_without_the_single_check_is_an_upper_bound():
    # 64 * 63 one-instance changes do not fit 1000 calls: the shrink finds 2, said "at most"
    word_of = threshold_word({"test": ones(64, 33)}, {"test": 32})
    out = flip_margin(word_of, {"test": 64}, resamples=200)
    assert out["margin"] == 2 and not out["exact"] and not out["single_checked"]
    assert out["reported_as"] == "at most 2 instances"
    assert out["calls"] <= out["budget"]


def test_the_change_found_is_one_minimal():
    # reverting any one of the changes gives the word back
    sizes = {"test": 40}
    word_of = threshold_word({"test": ones(40, 30)}, {"test": 25})
    out = flip_margin(word_of, sizes, resamples=300)
    assert out["minimal"] and out["margin"] == 6, out  # 30 -> 24 ones
    for i in range(len(out["changes"])):
        rest = out["changes"][:i] + out["changes"][i + 1 :]
        assert changed(word_of, sizes, rest) == "A"


def test_a_word_decided_by_two_streams():
    # A needs 16 ones of 30 in validation (it holds 20: five changes away) and 16 of 32 in
    # test (it holds 17: two away); resampled independently, the share is the product
    values = {"validation": ones(30, 20), "test": ones(32, 17)}
    sizes = {"validation": 30, "test": 32}
    word_of = threshold_word(values, {"validation": 16, "test": 16})
    out = stability(word_of, sizes, resamples=2000, seed=3)
    p = scipy_stats.binom.sf(15, 30, 20 / 30) * scipy_stats.binom.sf(15, 32, 17 / 32)
    assert abs(out["share"] - p) < 4 * np.sqrt(p * (1 - p) / 2000), (out["share"], p)
    margin = flip_margin(word_of, sizes, resamples=300)
    assert margin["margin"] == 2, margin
    assert {c["stream"] for c in margin["changes"]} == {"test"}


def test_a_word_that_never_changes():
    out = stability(lambda draw: "no lookup", {"test": 10, "id": 8})
    assert out["share"] == 1.0 and out["stable"] and out["reported_as"] == "no lookup"
    assert out["words"] == {"no lookup": 1.0} and out["resamples"] == 1000
    margin = flip_margin(lambda draw: "no lookup", {"test": 10, "id": 8})
    assert margin["margin"] is None and margin["changes"] == [] and margin["flipping"] == 0
    # 10*9 + 8*7 one-instance changes fit the budget: none changes the word
    assert margin["single_checked"] and margin["at_least"] == 2
    assert margin["reported_as"] == (
        "none found in 1000 resamples; no one-instance change changes it"
    )
    big = flip_margin(lambda draw: "no lookup", {"test": 500}, resamples=50)
    assert big["reported_as"] == "none found in 50 resamples" and not big["single_checked"]


def test_a_word_that_flips_on_one_instance():
    # B as soon as instance 7 of test is left out; 200 instances: too many for the
    # one-instance check, so the shrink itself names it
    def word_of(draw):
        return "A" if draw is None or 7 in set(int(i) for i in draw["test"]) else "B"

    out = flip_margin(word_of, {"test": 200, "validation": 50}, resamples=100)
    assert out["margin"] == 1 and out["exact"] and out["reported_as"] == "exactly 1 instance"
    assert [(c["stream"], c["position"]) for c in out["changes"]] == [("test", 7)]
    assert out["changes"][0]["copy_of"] != 7 and not out["single_checked"]


def test_the_one_instance_check_finds_what_resamples_miss():
    # B only when instance 4 alone is replaced by a copy of instance 3: a resample of twenty
    # instances draws that multiset with probability 20! / 2 / 20^20, about 2e-8
    def word_of(draw):
        if draw is None:
            return "A"
        counts = np.bincount(np.asarray(draw["test"]), minlength=20)
        target = np.ones(20, dtype=int)
        target[3], target[4] = 2, 0
        return "B" if np.array_equal(counts, target) else "A"

    out = flip_margin(word_of, {"test": 20}, resamples=100)
    assert out["flipping"] == 0 and out["single_checked"]
    assert out["margin"] == 1 and out["exact"]
    assert out["changes"] == [{"stream": "test", "position": 4, "copy_of": 3}]


def test_the_budget_bounds_the_search_and_the_bound_still_flips():
    sizes = {"test": 300}
    word_of = threshold_word({"test": ones(300, 160)}, {"test": 150})
    out = flip_margin(word_of, sizes, resamples=500, seed=2, budget=5)
    assert out["calls"] <= 5 and out["flipping"] > 0
    assert out["margin"] is not None and not out["exact"]
    assert changed(word_of, sizes, out["changes"]) == "B"


def test_seeded_results_are_reproducible():
    word_of = threshold_word({"test": ones(64, 33)}, {"test": 32})
    first = stability(word_of, {"test": 64}, resamples=300, seed=5)
    assert stability(word_of, {"test": 64}, resamples=300, seed=5) == first
    assert stability(word_of, {"test": 64}, resamples=300, seed=6)["share"] != first["share"]
    margin = flip_margin(word_of, {"test": 64}, resamples=100, seed=5)
    assert flip_margin(word_of, {"test": 64}, resamples=100, seed=5) == margin


def test_unstable_names_the_main_words_most_taken_first():
    shares = {"inconclusive": 0.55, "nudge-repairable": 0.42, "no lookup": 0.03}
    assert unstable_as("nudge-repairable", shares) == (
        "unstable: inconclusive / nudge-repairable (0.55 / 0.42)"
    )
    # the sample's own word is named even when few resamples give it
    assert unstable_as("no lookup", shares) == (
        "unstable: inconclusive / nudge-repairable / no lookup (0.55 / 0.42 / 0.03)"
    )
    assert STABLE == 0.8


def test_a_resample_is_its_fewest_changes():
    # instances 1 and 3 left out; the extra copies of 0 and 2 take their places
    assert as_changes({"test": [0, 0, 2, 2]}) == [("test", 1, 0), ("test", 3, 2)]
    assert as_changes({"test": [3, 2, 1, 0]}) == []


def test_verdict_stability_rederives_with_cheaper_intervals():
    readings = {"test": ones(40, 21)}
    asked = []

    def streams(r):
        return {"test": len(r["test"])}

    def rederive(r, draw=None, stats=None):
        asked.append(stats)
        picked = r["test"] if draw is None else r["test"][np.asarray(draw["test"])]
        if draw is None and stats is not None:
            return {"verdict": "inconclusive"}  # the sample at the inner intervals differs
        return {"verdict": "nudge-repairable" if picked.sum() >= 20 else "inconclusive"}

    held = ["the lookup", "the choice of N"]
    out = verdict_stability(
        readings, rederive, streams, resamples=200, held_fixed=held, rechosen=["the dose"]
    )
    assert out["word"] == "nudge-repairable" and out["word_at_inner"] == "inconclusive"
    # what the re-derivation holds fixed is said as its caller gave it, never a list of its own
    assert out["held_fixed"] == ["the lookup", "the choice of N"]
    assert out["rechosen"] == ["the dose"]
    assert out["inner"] == {"n_resamples": INNER_RESAMPLES}
    assert asked[0] is None and all(s == {"n_resamples": INNER_RESAMPLES} for s in asked[1:])
    assert out["resamples"] == 200 and out["flip_margin"]["margin"] == 2
    assert out["reported_as"].startswith("unstable: ")
