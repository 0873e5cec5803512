"""Metrics on inputs whose scores are known exactly."""

from __future__ import annotations

import pytest

from attentionspan_datasets.metrics import (
    ALL_METRICS,
    METRICS,
    bucket_metric_name,
    clean_prediction,
    exact_match,
    partial_accuracy,
    score,
)


@pytest.mark.parametrize(
    "prediction, target, em, partial",
    [
        ("8916", "8916", 1.0, 1.0),
        ("8917", "8916", 0.0, 0.75),  # right but the last character
        ("", "8916", 0.0, 0.0),  # empty
        (None, "8916", 0.0, 0.0),
        ("89", "8916", 0.0, 0.5),  # too short: missing characters are wrong
        ("89160000", "8916", 0.0, 1.0),  # too long: right prefix, but not exact
        ("  8916 \n", "8916", 1.0, 1.0),  # stray whitespace
        ("8916</s>junk", "8916", 1.0, 1.0),  # EOS text
        ("8916<|im_end|>", "8916", 1.0, 1.0),
        ("8916\n12+3=", "8916", 1.0, 1.0),  # the model runs on into a new line
        ("235 236", "235 236", 1.0, 1.0),  # inner spaces are part of some targets
        ("9916", "8916", 0.0, 0.75),
    ],
)
def test_scores(prediction, target, em, partial):
    assert exact_match(prediction, target) == em
    assert partial_accuracy(prediction, target) == partial
    assert score(prediction, target) == {"exact_match": em, "partial_acc": partial}


def test_the_one_list_of_metrics_starts_with_an_answer_s_scores():
    assert METRICS == tuple(score("8916", "8916")) == ALL_METRICS[:2]
    assert ALL_METRICS == ("exact_match", "partial_acc", "tf_token_acc")  # the report order


def test_clean_prediction_keeps_inner_text():
    assert clean_prediction(" a b </s> c") == "a b"


def test_bucket_metric_name_sorts_by_length():
    names = [bucket_metric_name("exact_match", n) for n in (10, 2, 1)]
    assert sorted(names) == ["exact_match_len_01", "exact_match_len_02", "exact_match_len_10"]


def test_length_bins():
    from attentionspan_datasets.metrics import bin_of, length_bins

    assert length_bins([3, 1, 2]) == [(1, 1), (2, 2), (3, 3)]
    assert length_bins(range(11, 51)) == [(s, s + 3) for s in range(11, 51, 4)]
    assert length_bins([11, 100]) == [(11, 19), (92, 100)]  # no empty bins
    assert length_bins([11, 20, 100]) == [(11, 19), (20, 28), (92, 100)]
    assert length_bins([10, 20]) == [(10, 11), (20, 20)]
    assert length_bins([20] * 5 + [30] * 5) == [(20, 21), (30, 30)]
    assert length_bins([]) == []
    bins = length_bins(range(11, 51))
    assert bin_of(12, bins) == (11, 14) and bin_of(50, bins) == (47, 50)
    assert bin_of(51, bins) is None
    assert bucket_metric_name("exact_match", 11, 14) == "exact_match_len_11_14"
    assert bucket_metric_name("exact_match", 7, 7) == "exact_match_len_07"


def test_aggregate_on_known_scores():
    from attentionspan_datasets.metrics import aggregate, record

    records = [
        record("ab", "ab", 2),  # 1, 1
        record("ax", "ab", 2),  # 0, 0.5
        record("abc", "abc", 3),  # 1, 1
        record("", "abcd", 4),  # 0, 0
        record("abcx", "abcd", 4),  # 0, 0.75
    ]
    result = aggregate(records)
    assert (result.count, result.exact_match, result.partial_acc) == (5, 2 / 5, 3.25 / 5)
    assert {k: (v.count, v.exact_match, v.partial_acc) for k, v in result.per_length.items()} == {
        2: (2, 0.5, 0.75),
        3: (1, 1.0, 1.0),
        4: (2, 0.0, 0.375),
    }
    # three lengths, at most ten bins: one bin per length
    assert list(result.per_bin) == [(2, 2), (3, 3), (4, 4)]
    assert result.flat() == {
        "exact_match": 0.4,
        "partial_acc": 0.65,
        "exact_match_len_02": 0.5,
        "exact_match_len_03": 1.0,
        "exact_match_len_04": 0.0,
    }
    # fixed bins, e.g. a preset's lm-eval bins; a length outside them gets its own bin
    binned = aggregate(records, bins=[(1, 3)])
    assert {k: (v.count, v.exact_match) for k, v in binned.per_bin.items()} == {
        (1, 3): (3, 2 / 3),
        (4, 4): (2, 0.0),
    }
    assert binned.flat()["exact_match_len_01_03"] == 2 / 3
    assert aggregate(records, max_bins=1).per_bin[(2, 4)].count == 5
    assert result.to_dict()["per_length"]["2"] == {
        "count": 2,
        "exact_match": 0.5,
        "partial_acc": 0.75,
    }
    assert result.to_dict()["per_bin"]["4"]["count"] == 2


def test_aggregate_of_nothing_and_of_bad_records():
    import math

    from attentionspan_datasets.metrics import aggregate

    empty = aggregate([])
    assert empty.count == 0 and math.isnan(empty.exact_match) and empty.per_bin == {}
    with pytest.raises(ValueError, match="lacks partial_acc"):
        aggregate([{"exact_match": 1.0, "length": 2}])
    custom = aggregate([{"exact_match": 1.0, "partial_acc": 1.0, "n": 7}], length_key="n")
    assert list(custom.per_length) == [7]
