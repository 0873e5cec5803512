"""harness.report.plots: every figure is written as a non-empty PNG at the asked path, and
bad input fails with a ValueError that names the argument."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from harness.report import plots

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def assert_png(path, expected):
    assert path == expected
    data = expected.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 2000
    # atomic: no temporary files left beside it
    assert [p.name for p in expected.parent.iterdir() if p.name.startswith(".")] == []


def test_rollout_map_with_mask_labels_and_wrong_rows(tmp_path):
    rng = np.random.default_rng(0)
    matrix = rng.random((6, 10))
    mask = np.zeros((6, 10), dtype=bool)
    mask[np.arange(6), 9 - np.arange(6)] = True  # a mirrored reference, as in reversal
    out = plots.rollout_map(
        torch.tensor(matrix),  # tensors are accepted as well as arrays
        tmp_path / "sub" / "rollout.png",
        mask=mask,
        keys=list("ab cd\nefgh"),
        queries=list("=hgfed"),
        title="reversal_ood #3",
        wrong_rows=[4, 5],
    )
    assert_png(out, tmp_path / "sub" / "rollout.png")


def test_rollout_map_rejects_bad_input(tmp_path):
    with pytest.raises(ValueError, match="'mask' has shape"):
        plots.rollout_map(np.ones((3, 4)), tmp_path / "x.png", mask=np.ones((4, 4), bool))
    with pytest.raises(ValueError, match="'keys' has 3 labels for 4 positions"):
        plots.rollout_map(np.ones((3, 4)), tmp_path / "x.png", keys="abc")
    with pytest.raises(ValueError, match="'matrix' must have 2 dimension"):
        plots.rollout_map(np.ones(4), tmp_path / "x.png")
    with pytest.raises(ValueError, match="'wrong_rows'"):
        plots.rollout_map(np.ones((3, 4)), tmp_path / "x.png", wrong_rows=[3])
    assert not (tmp_path / "x.png").exists()


def test_head_heatmap_panels_share_one_scale(tmp_path):
    out = plots.head_heatmap(
        {"reversal_id": np.random.rand(4, 4), "reversal_ood": np.random.rand(4, 4)},
        tmp_path / "heads.png",
        title="mean share on reference",
    )
    assert_png(out, tmp_path / "heads.png")
    single = plots.head_heatmap(np.random.rand(18, 4), tmp_path / "one.png")
    assert_png(single, tmp_path / "one.png")
    with pytest.raises(ValueError, match="'panels' must share one"):
        plots.head_heatmap({"a": np.ones((4, 4)), "b": np.ones((4, 2))}, tmp_path / "bad.png")
    with pytest.raises(ValueError, match=r"panels\['a'\]"):
        plots.head_heatmap({"a": np.ones(4)}, tmp_path / "bad.png")


def test_score_distribution_and_by_position(tmp_path):
    rng = np.random.default_rng(1)
    correct, wrong = rng.beta(4, 20, 300), rng.beta(2, 30, 200)
    out = plots.score_distribution(
        {
            "reversal_id": {"correct": correct, "wrong": []},
            "reversal_ood": {"correct": correct, "wrong": wrong},
        },
        tmp_path / "scores.png",
    )
    assert_png(out, tmp_path / "scores.png")
    positions_c, positions_w = rng.integers(0, 20, 300), rng.integers(0, 20, 200)
    out = plots.score_by_position(
        {"correct": (positions_c, correct), "wrong": (positions_w, wrong)},
        tmp_path / "position.png",
    )
    assert_png(out, tmp_path / "position.png")
    with pytest.raises(ValueError, match=r"series\['wrong'\]: 199 positions but 200 scores"):
        plots.score_by_position({"wrong": (positions_w[:-1], wrong)}, tmp_path / "bad.png")
    with pytest.raises(ValueError, match="'panels' holds no finite score"):
        plots.score_distribution({"a": {"correct": [np.nan]}}, tmp_path / "bad.png")
    with pytest.raises(ValueError, match="'series' must be a non-empty mapping"):
        plots.score_by_position({}, tmp_path / "bad.png")


def test_accuracy_by_length_with_bands(tmp_path):
    lengths = np.arange(11, 21)
    base = np.linspace(0.8, 0.05, 10)
    out = plots.accuracy_by_length(
        lengths,
        {
            "baseline": {"mean": base, "low": base - 0.05, "high": base + 0.05},
            "top-8 heads, C=1": {"mean": base + 0.3},
            "random heads": {"mean": base, "low": base - 0.1, "high": base + 0.1},
        },
        tmp_path / "length.png",
    )
    assert_png(out, tmp_path / "length.png")
    with pytest.raises(ValueError, match=r"series\['b'\]\['low'\] has 9 values for 10 lengths"):
        plots.accuracy_by_length(
            lengths, {"b": {"mean": base, "low": base[1:], "high": base}}, tmp_path / "bad.png"
        )
    with pytest.raises(ValueError, match="needs both 'low' and 'high'"):
        plots.accuracy_by_length(lengths, {"b": {"mean": base, "low": base}}, tmp_path / "b.png")


def test_sweep_heatmap(tmp_path):
    values = np.random.rand(4, 5)
    out = plots.sweep_heatmap(
        values,
        [1, 2, 4, 8],
        [0.3, 0.6, 1.0, 1.5, 2.0],
        tmp_path / "sweep.png",
        baseline=0.4,
        chosen=(2, 3),
    )
    assert_png(out, tmp_path / "sweep.png")
    with pytest.raises(ValueError, match=r"'values' has shape \(4, 5\), expected \(3, 5\)"):
        plots.sweep_heatmap(values, [1, 2, 4], [0.3, 0.6, 1.0, 1.5, 2.0], tmp_path / "bad.png")
    with pytest.raises(ValueError, match="'chosen'"):
        plots.sweep_heatmap(
            values, [1, 2, 4, 8], [1, 2, 3, 4, 5], tmp_path / "b.png", chosen=(4, 0)
        )


def test_rollout_map_has_a_legend_for_its_marks(tmp_path, monkeypatch):
    seen = []
    save = plots._save
    monkeypatch.setattr(plots, "_save", lambda fig, path: seen.append(fig) or save(fig, path))
    mask = np.eye(4, dtype=bool)
    plots.rollout_map(np.ones((4, 4)), tmp_path / "a.png", mask=mask, wrong_rows=[1])
    plots.rollout_map(np.ones((4, 4)), tmp_path / "b.png")  # no marks, no legend
    labels = [t.get_text() for t in seen[0].axes[0].get_legend().get_texts()]
    assert labels == ["reference", "wrong token (gold->predicted)"]
    assert seen[1].axes[0].get_legend() is None


def dose_curve_of(thresholds=(None,)):
    """A dose curve as `harness.attention.dose.dose_curve` returns it, made by hand."""
    doses = []
    for t, threshold in enumerate(thresholds):
        for i, c in enumerate((0.05, 0.1, 0.3, 1.0, 2.0)):
            gain = 0.2 * i - 0.05 * t
            doses.append(
                {
                    "strength": c,
                    "threshold": threshold,
                    "reference": {"gain": gain, "low": gain - 0.1, "high": gain + 0.1, "n": 40},
                    "pointers": {
                        k: {
                            "gain": {"gain": -0.05 * i, "low": -0.1, "high": 0.0, "n": 40},
                            "following": {"rate": min(1.0, 0.3 * i), "rows": 90, "instances": 40},
                        }
                        for k in ("-3", "+3")
                    },
                    "random_heads": {"count": 3, "mean": 0.01 * i, "min": 0.0, "max": 0.02 * i},
                    "id": {"n": 30, "tf_exact": 1.0 - 0.1 * i, "tf_token_acc": 1.0},
                }
            )
    return {"pointer_shifts": [-3, 3], "doses": doses}


def test_dose_response_draws_gain_following_random_heads_and_id(tmp_path):
    out = plots.dose_response(dose_curve_of(), tmp_path / "dose.png", title="reversal_ood")
    assert_png(out, tmp_path / "dose.png")
    # conditional: one set of lines per threshold; an ID-less curve draws too
    curve = dose_curve_of((0.1, 0.2))
    for dose in curve["doses"][:3]:
        dose["id"] = None
        dose["pointers"] = {}
    out = plots.dose_response(curve, tmp_path / "conditional.png")
    assert_png(out, tmp_path / "conditional.png")


def test_six_shifted_pushes_stay_readable_the_nearer_ones_lighter(tmp_path, monkeypatch):
    """The ladder pushes at ref+-1, +-2 and +-3: the ref-3 and ref+3 lines keep their colours
    and full strength, the nearer ones are drawn lighter with their own markers, pushes
    before the reference in one colour and after it in another; a curve with only +-3 (an
    older run) draws as before."""
    from matplotlib.colors import to_rgb

    figures = []
    save = plots._save
    monkeypatch.setattr(plots, "_save", lambda fig, path: figures.append(fig) or save(fig, path))
    curve = dose_curve_of()
    six = ("-3", "-2", "-1", "+1", "+2", "+3")
    for dose in curve["doses"]:
        dose["pointers"] = {k: dose["pointers"]["-3"] for k in six}
    curve["pointer_shifts"] = [int(k) for k in six]
    assert_png(plots.dose_response(curve, tmp_path / "six.png"), tmp_path / "six.png")
    old = plots.dose_response(dose_curve_of(), tmp_path / "old.png")
    assert_png(old, tmp_path / "old.png")

    def lines(fig):
        return {
            line.get_label(): line
            for line in fig.axes[0].get_lines()
            if line.get_label().startswith("pointer")
        }

    drawn, before = lines(figures[0]), lines(figures[1])
    assert list(drawn) == [f"pointer ref{k}" for k in six] and list(before) == [
        "pointer ref-3",
        "pointer ref+3",
    ]
    for k in ("-3", "+3"):  # as before: full strength, the same colour and marker
        line, was = drawn[f"pointer ref{k}"], before[f"pointer ref{k}"]
        assert (line.get_alpha() or 1.0) == 1.0 and to_rgb(line.get_color()) == to_rgb(
            was.get_color()
        )
        assert line.get_marker() == was.get_marker() == "s"
    for k in ("-2", "-1", "+1", "+2"):
        line = drawn[f"pointer ref{k}"]
        assert line.get_alpha() < 1.0 and line.get_marker() != "s", k
        side = drawn["pointer ref-3" if k.startswith("-") else "pointer ref+3"]
        assert to_rgb(line.get_color()) == to_rgb(side.get_color()), k
    assert len({drawn[f"pointer ref{k}"].get_marker() for k in ("-3", "-2", "-1")}) == 3


def test_dose_response_rejects_bad_input(tmp_path):
    with pytest.raises(ValueError, match="non-empty 'doses'"):
        plots.dose_response({"doses": []}, tmp_path / "x.png")
    curve = dose_curve_of()
    curve["doses"][0]["strength"] = 0.0
    with pytest.raises(ValueError, match="strength C > 0"):
        plots.dose_response(curve, tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()
