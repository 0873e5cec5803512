"""The `evaluate` metric module: loaded offline from its path, same numbers as lm-eval."""

from __future__ import annotations

import math

import pytest

import lm_eval_tasks
from attentionspan_datasets.metrics import score

evaluate = pytest.importorskip("evaluate")


@pytest.fixture(scope="module")
def metric(tmp_path_factory, monkeypatch_module):
    monkeypatch_module.setenv("HF_HUB_OFFLINE", "1")
    cache = tmp_path_factory.mktemp("evaluate_cache")
    return evaluate.load(lm_eval_tasks.EVALUATE_METRIC, cache_dir=str(cache))


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def test_scores(metric):
    predictions = ["8916", "891", "", "  cba </s>", "cbacbacba"]
    references = ["8916", "8916", "8916", "cba", "cba"]
    result = metric.compute(predictions=predictions, references=references)
    rows = [score(p, r) for p, r in zip(predictions, references)]
    assert result == {
        "exact_match": sum(r["exact_match"] for r in rows) / 5,
        "partial_acc": sum(r["partial_acc"] for r in rows) / 5,
    }
    assert result["exact_match"] == pytest.approx(2 / 5)
    assert result["partial_acc"] == pytest.approx((1 + 0.75 + 0 + 1 + 1) / 5)


def test_per_length_bins(metric):
    result = metric.compute(
        predictions=["ab", "xy", "abc", "abcd"],
        references=["ab", "ab", "abc", "abcx"],
        lengths=[2, 2, 3, 4],
    )
    assert result["exact_match_len_02"] == 0.5
    assert result["exact_match_len_03"] == 1.0
    assert result["exact_match_len_04"] == 0.0
    wide = metric.compute(
        predictions=["a"] * 4, references=["a", "a", "b", "b"], lengths=[11, 14, 15, 50]
    )
    assert wide["exact_match_len_11_14"] == 1.0 and wide["exact_match_len_15_18"] == 0.0
    assert "exact_match_len_19_22" not in wide  # a bin with no instance is left out
    assert not any(isinstance(v, float) and math.isnan(v) for v in wide.values())


def test_bad_input(metric):
    with pytest.raises(ValueError, match="lengths"):
        metric.compute(predictions=["a"], references=["a"], lengths=[1, 2])
