"""Setting (harness.attention.setting): checked values, its name read back, and its role."""

from __future__ import annotations

import dataclasses

import pytest

from harness.attention.controls import control_settings
from harness.attention.setting import BASELINE, Setting
from harness.attention.sweep import grid
from harness.engine import modes


@pytest.mark.parametrize(
    "values, field",
    [
        (dict(strength=float("nan")), r"strength \(C\)"),
        (dict(strength=-1.0), r"strength \(C\)"),
        (dict(strength=float("inf")), r"strength \(C\)"),
        (dict(threshold=float("nan"), mode="conditional"), "threshold"),
        (dict(threshold=1.5, mode="conditional"), "threshold"),
        (dict(threshold=-0.1), "threshold"),
        (dict(n=2.0), r"n \(number of heads\)"),
        (dict(n=True), r"n \(number of heads\)"),
        (dict(n=0), r"n \(number of heads\)"),
        (dict(mode="louder"), "mode must be one of"),
    ],
)
def test_bad_values_raise_naming_the_field(values, field):
    with pytest.raises(ValueError, match=field):
        Setting(**{"heads": "top", "n": 2, "strength": 1.0, **values})


def test_the_grid_checks_its_values_and_reinforces_only():
    with pytest.raises(ValueError, match=r"strength \(C\) must be finite"):
        grid(16, strengths=(1.0, float("nan")))
    with pytest.raises(ValueError, match="threshold must be finite and in"):
        grid(16, strengths=(1.0,), mode="conditional", thresholds=(2.0,))
    with pytest.raises(ValueError, match="the sweep reinforces"):
        grid(16, mode="knockout")


def every_kind_of_setting():
    chosen = [
        *grid(64, strengths=(0.3, 1e-05, 2.0), shift=2),
        *grid(64, counts=[4], strengths=(1.5,), mode="conditional", thresholds=(1e-05, 0.1)),
        Setting(heads="bottom", n=3, strength=2.0, renormalise=True, shift=-1),
    ]
    return [BASELINE, *chosen, *(c for s in chosen for c in control_settings(s, (0, 7, -2)))]


def test_a_name_reads_back_as_its_setting():
    for setting in every_kind_of_setting():
        assert Setting.from_name(setting.name) == setting, setting.name
    for bad in ("top4", "top4-C1-s0", "top-C1", "top4-Cx", "left4-C1", "top4-louder", ""):
        with pytest.raises(ValueError, match="is not the name of a setting"):
            Setting.from_name(bad)


def test_the_role_is_not_what_a_setting_computes():
    chosen = Setting(heads="top", n=4, strength=2.0)
    control = dataclasses.replace(chosen, role="restore")
    assert control == chosen and hash(control) == hash(chosen)  # the same computation
    assert "role" not in control.to_dict()  # stage files and the sweep's JSON as before
    assert Setting.from_dict(control.to_dict()).role == "intervention"
    assert BASELINE.role == "baseline" and chosen.role == "intervention"


def test_a_new_mode_names_its_settings(monkeypatch):
    """A mode that reads no strength is its own part of a name (as knockout is)."""
    toy = modes.Mode("halve", lambda weights, cells, args: weights)
    monkeypatch.setitem(modes.MODES, toy.name, toy)
    setting = Setting(heads="top", n=2, mode="halve")
    assert setting.name == "top2-halve" and Setting.from_name("top2-halve") == setting
