"""Scores on captured attention: rollout by hand, the rollout score, head shares, Welch."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from harness.attention import scores


def test_rollout_by_hand():
    """Two layers, three tokens: (A + I) rows renormalised, multiplied from layer 0 up."""
    a0 = torch.tensor([[1.0, 0, 0], [0.5, 0.5, 0], [0.2, 0.3, 0.5]])
    a1 = torch.tensor([[1.0, 0, 0], [1.0, 0.0, 0], [0.0, 1.0, 0.0]])
    r0 = (a0 + torch.eye(3)) / 2
    r1 = (a1 + torch.eye(3)) / 2
    expected = r1 @ r0
    got = scores.rollout([a0[None], a1[None]])
    torch.testing.assert_close(got[0], expected)
    # Row 2 by hand: r1[2] = [0, .5, .5], r0[1] = [.25, .75, 0], r0[2] = [.1, .15, .75].
    torch.testing.assert_close(got[0, 2], torch.tensor([0.175, 0.45, 0.375]))
    torch.testing.assert_close(got.sum(-1), torch.ones(1, 3))
    with pytest.raises(ValueError, match="at least one layer map"):
        scores.rollout([])


def test_rollout_scores_use_task_columns_and_leave_empty_rows_out():
    rolled = torch.tensor([[[1.0, 0, 0, 0], [0.2, 0.8, 0, 0], [0.1, 0.2, 0.3, 0.4], [0, 0, 0, 1]]])
    ref = torch.zeros(1, 4, 4, dtype=torch.bool)
    ref[0, 2, 2] = True
    ref[0, 1, 1] = True
    cols = torch.tensor([[False, True, True, True]])  # column 0: instruction, left out
    got = scores.rollout_scores(rolled, ref, cols)
    assert math.isclose(float(got[0, 2]), 0.3 / 0.9, rel_tol=1e-6)
    assert math.isclose(float(got[0, 1]), 1.0)
    assert got[0, 0].isnan() and got[0, 3].isnan()
    # A longer mask (generation sized for more steps) is cropped.
    longer = torch.zeros(1, 6, 6, dtype=torch.bool)
    longer[:, :4, :4] = ref
    torch.testing.assert_close(
        scores.rollout_scores(rolled, longer, torch.nn.functional.pad(cols, (0, 2))),
        got,
        equal_nan=True,
    )


def test_head_shares_average_rows_with_references():
    rows = torch.full((2, 3, 1, 2), float("nan"))
    rows[0, 1, 0] = torch.tensor([0.2, 0.4])
    rows[1, 2, 0] = torch.tensor([0.6, 0.0])
    torch.testing.assert_close(scores.head_shares(rows), torch.tensor([[0.4, 0.2]]))


def test_compare_matches_scipy_and_counts_empty_rows_apart():
    rng = np.random.default_rng(0)
    good = rng.normal(0.2, 0.05, 40)
    bad = rng.normal(0.1, 0.08, 70)
    values = np.concatenate([good, bad, [np.nan, np.nan]])
    correct = np.array([True] * 40 + [False] * 70 + [True, False])
    out = scores.compare(torch.tensor(values), torch.tensor(correct))
    expected = stats.ttest_ind(good, bad, equal_var=False)
    assert math.isclose(out["welch_t"], expected.statistic) and math.isclose(
        out["welch_p"], expected.pvalue
    )
    assert out["correct"]["n"] == 40 and out["error"]["n"] == 70 and out["empty"] == 2
    assert math.isclose(out["correct"]["mean"], good.mean())
    pooled = math.sqrt((39 * good.var(ddof=1) + 69 * bad.var(ddof=1)) / 108)
    d = (good.mean() - bad.mean()) / pooled
    assert math.isclose(out["cohens_d"], d)
    assert math.isclose(out["hedges_g"], d * (1 - 3 / (4 * 110 - 9)))


def test_compare_small_groups_and_by_group():
    out = scores.compare([0.5, 0.7], [1.0, float("nan")])  # unknown correctness: left out
    assert out["correct"]["n"] == 1 and out["error"]["n"] == 0 and math.isnan(out["welch_p"])
    values = [0.1, 0.2, 0.3, 0.4, 0.9, 0.8, 0.7]
    correct = [False, False, True, True, True, False, True]
    keys = [("a", 2), ("a", 2), ("a", 2), ("a", 2), ("b", 5), ("b", 5), ("b", 5)]
    by = scores.compare_by(values, correct, keys)
    assert list(by) == [("a", 2), ("b", 5)]
    assert by[("a", 2)]["correct"]["mean"] == pytest.approx(0.35)
    assert by[("b", 5)]["error"]["n"] == 1
    with pytest.raises(ValueError, match="keys has 2 entries"):
        scores.compare_by(values, correct, keys[:2])


def test_per_row_places_characters_on_their_rows():
    index = torch.tensor([[-1, 0, 1, 2, -1], [-1, -1, 0, 1, -1]])
    got = scores.per_row(index, [[True, False, True], [False]])
    assert got[0, 1:4].tolist() == [1.0, 0.0, 1.0]
    assert got[1, 2].item() == 0.0 and got[1, 3].isnan()


def test_compare_groups_equal_to_float_precision_warn_nothing_and_test_nothing():
    """A spread of 1e-17 made scipy print "Precision loss ... unreliable" with no context;
    such groups get no t-test (nan), as groups without spread do."""
    import warnings

    import numpy as np

    from harness.attention.scores import compare

    good = np.array([0.1 + 1e-16 * i for i in range(5)])
    bad = np.array([0.2, 0.2, 0.2, 0.2, 0.2 + 2.7e-17])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = compare(np.concatenate([good, bad]), np.array([1] * 5 + [0] * 5))
    assert np.isnan(result["welch_t"]) and np.isnan(result["welch_p"])
    assert result["correct"]["n"] == 5 and result["error"]["n"] == 5
