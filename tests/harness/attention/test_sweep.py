"""Sweep settings, grid and selection: chosen on validation, reported on test."""

from __future__ import annotations

import pytest

from harness.attention.sweep import (
    BASELINE,
    Setting,
    control_settings,
    grid,
    head_counts,
    run_sweep,
    select,
)


def records(score: float, n: int = 20):
    return [
        {"config": "c", "index": i, "length": 11 + i % 5, "exact_match": 0.0, "partial_acc": score}
        for i in range(n)
    ]


def test_head_counts_up_to_ten_percent():
    assert head_counts(16) == [1, 2, 4]
    assert head_counts(2) == [1, 2]
    assert head_counts(64) == [1, 2, 4, 6]
    assert head_counts(512) == [1, 2, 4, 8, 16, 32, 51]


def test_grid_and_names_are_unique():
    settings = grid(64, strengths=(0.5, 1.0))
    assert len(settings) == 8
    assert len({s.name for s in settings}) == 8
    conditional = grid(64, counts=[2], strengths=(1.0,), mode="conditional", thresholds=(0.01, 0.1))
    assert [s.name for s in conditional] == ["top2-C1-thr0.01", "top2-C1-thr0.1"]
    with pytest.raises(ValueError, match="head count"):
        grid(4, counts=[8])


def test_bad_setting_names_the_field():
    with pytest.raises(ValueError, match="mode must be one of"):
        Setting(heads="top", n=1, mode="louder")
    with pytest.raises(ValueError, match="n \\(number of heads\\)"):
        Setting(heads="top", n=0)


def test_controls_keep_n_and_c():
    chosen = Setting(heads="top", n=4, strength=1.5)
    controls = control_settings(chosen, seeds=(0, 1))
    kinds = [(c.heads, c.positions, c.mode) for c in controls]
    assert ("random", "reference", "standard") in kinds
    assert ("top", "random", "standard") in kinds
    assert ("top", "reference", "knockout") in kinds
    assert ("top", "reference", "restore") in kinds
    assert sorted(c.shift for c in controls if c.shift) == [-3, 3]
    assert all(c.n == 4 for c in controls)
    assert all(c.strength == 1.5 for c in controls if c.mode not in ("knockout", "restore"))
    assert len({c.name for c in controls}) == len(controls)
    plain = control_settings(chosen, seeds=(0,), pointer_shifts=(), restore=False)
    assert not any(c.shift or c.mode == "restore" for c in plain)


def test_select_on_validation_not_test():
    """Setting A is best on validation, B on test: the sweep must choose A and must not
    even score B on test (a selection on test would pick B)."""
    a = Setting(heads="top", n=1, strength=1.0)
    b = Setting(heads="top", n=2, strength=1.0)
    table = {
        ("baseline", "validation"): 0.2,
        (a.name, "validation"): 0.6,
        (b.name, "validation"): 0.4,
        ("baseline", "test"): 0.2,
        (a.name, "test"): 0.3,
        (b.name, "test"): 0.9,
    }
    calls = []

    def evaluate(settings, stream):
        calls.extend((s.name, stream) for s in settings)
        return {s.name: records(table.get((s.name, stream), 0.1)) for s in settings}

    result = run_sweep(evaluate, [a, b], control_seeds=(0,), with_id=False)
    assert result["chosen_name"] == a.name
    assert (b.name, "test") not in calls
    assert result["test"][a.name]["partial_acc"] == pytest.approx(0.3)
    assert result["test_gains"][a.name]["partial_acc"]["gain"] == pytest.approx(0.1)
    assert BASELINE.name in result["test"]


def test_select_tie_break_and_metric_check():
    assert select({"x": records(0.5), "y": records(0.5)}) == "x"
    with pytest.raises(ValueError, match="metric must be one of"):
        select({"x": records(0.5)}, metric="bleu")


def test_id_guard_excludes_settings_that_break_id():
    a = Setting(heads="top", n=1, strength=2.0)  # best on OOD validation, breaks ID
    b = Setting(heads="top", n=1, strength=1.0)

    def evaluate(settings, stream):
        def value(s):
            if stream == "id_validation":
                return {"baseline": 1.0, a.name: 0.0}.get(s.name, 1.0)
            return {a.name: 0.9, b.name: 0.5}.get(s.name, 0.2)

        return {
            s.name: [dict(r, exact_match=value(s)) for r in records(value(s))] for s in settings
        }

    assert run_sweep(evaluate, [a, b], control_seeds=(0,), with_id=False)["chosen_name"] == a.name
    guarded = run_sweep(evaluate, [a, b], control_seeds=(0,), with_id=False, id_guard=0.05)
    assert guarded["chosen_name"] == b.name
    assert guarded["id_guard_kept"] == [b.name]
