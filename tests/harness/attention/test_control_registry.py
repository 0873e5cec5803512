"""The controls registry (harness.attention.controls): the settings of every control with
their roles, roles read back from names alone, the report legend, and a new control added as
one module and one registry line."""

from __future__ import annotations

import dataclasses
import types

import pytest

from harness.attention import controls
from harness.attention.setting import BASELINE, Setting
from harness.attention.sweep import run_sweep
from harness.report.findings import intervention_findings

CHOSEN = Setting(heads="top", n=4, strength=2.0)


def test_every_control_makes_its_settings_with_its_role():
    made = controls.control_settings(CHOSEN, seeds=(0, 1))
    assert [(s.name, s.role) for s in made] == [
        ("random4-C2-s0", "random_heads"),
        ("random4-C2-s1", "random_heads"),
        ("top4-C2-randpos-s0", "random_positions"),
        ("bottom4-C2", "bottom_heads"),
        ("top4-knockout", "knockout"),
        ("top4-C2-shift-3", "pointer"),
        ("top4-C2-shift+3", "pointer"),
        ("top4-restore", "restore"),
    ]
    assert controls.control_settings(BASELINE) == []


def test_roles_come_back_from_the_names_alone():
    """A digest keeps only names (docs/quick-run*.json): the roles are the controls' own,
    made again from the chosen setting, whatever the names look like."""
    names = [
        "baseline",
        CHOSEN.name,
        "top2-C1",  # another grid point
        *(s.name for s in controls.control_settings(CHOSEN, seeds=(5, 0))),
        "random4-C1-s0",  # random heads, but not at the chosen C: no control of this sweep
        "not a setting",
    ]
    roles = controls.roles_of(CHOSEN.name, names)
    assert roles["baseline"] == "baseline" and roles[CHOSEN.name] == "chosen"
    assert roles["top2-C1"] == roles["random4-C1-s0"] == roles["not a setting"] == "intervention"
    assert [n for n in names if roles[n] == "random_heads"] == ["random4-C2-s5", "random4-C2-s0"]
    assert roles["top4-C2-randpos-s5"] == "random_positions"
    assert roles["top4-restore"] == "restore" and roles["top4-C2-shift+3"] == "pointer"


def test_the_legend_lists_every_control():
    assert controls.legend() == (
        "`random*` the same N and C on random heads (one row per seed); `*randpos*` the chosen "
        "heads at as many random non-reference keys per row; `bottom*` the lowest-ranked "
        "heads; `*knockout` the chosen heads' reference weights set to 0; `*shift-3`, "
        "`*shift+3` the chosen push at ref-3 / ref+3 (pointer shift); `*restore` each chosen "
        "head's reference weight set to its ID level, the row renormalised"
    )


def records(score: float, n: int = 20):
    return [
        {"config": "c", "index": i, "length": 11 + i % 5, "exact_match": 0.0, "partial_acc": score}
        for i in range(n)
    ]


def test_a_new_control_is_one_module_and_one_registry_line(monkeypatch):
    """A toy control, the chosen heads at twice C, written as a user would: one module that
    defines CONTROL, and one line adding it to the registry. The sweep scores it on test,
    its settings carry its role, reports find it by that role and list it in the legend."""
    toy = types.ModuleType("double_strength")  # the new module

    def make(chosen, options):
        return [dataclasses.replace(chosen, strength=2 * chosen.strength)]

    toy.CONTROL = controls.Control("double_strength", make, "`*C2x` the chosen heads at 2C")
    monkeypatch.setattr(controls, "CONTROLS", (*controls.CONTROLS, toy.CONTROL))  # the line

    made = controls.control_settings(CHOSEN, seeds=(0,))
    assert (made[-1].name, made[-1].role) == ("top4-C4", "double_strength")
    scored = []

    def evaluate(settings, stream):
        scored.extend((s.name, stream) for s in settings)
        return {s.name: records(0.5 if s.name == "top4-C4" else 0.2) for s in settings}

    sweep = run_sweep(evaluate, [CHOSEN], control_seeds=(0,), with_id=False)
    assert ("top4-C4", "test") in scored
    assert sweep["test_gains"]["top4-C4"]["partial_acc"]["gain"] == pytest.approx(0.3)
    roles = controls.roles_of(sweep["chosen_name"], sweep["test_gains"])
    assert roles["top4-C4"] == "double_strength"
    assert controls.legend().endswith("; `*C2x` the chosen heads at 2C")
    # Not a random-head control: the findings do not call it one.
    assert not any("Random heads" in line for line in intervention_findings({"sweep": sweep}))


def test_a_control_is_found_by_its_role_and_writes_its_own_field():
    """Readers ask the registry for a ladder control's field by role; the keys are the
    curves' and digests' own ("pointers", "random_heads"), never restated by a reader."""
    assert controls.control("pointer") is controls.CONTROLS[4]
    assert controls.dose_field("pointer") == "pointers"
    assert controls.dose_field("other_heads") == "random_heads"
    entry = {"pointers": {"+3": {}}, "random_heads": {"max": 0.1}}
    assert controls.at_dose(entry, "other_heads") == {"max": 0.1}
    assert controls.at_dose(None, "pointer") is None and controls.at_dose({}, "pointer") is None
    with pytest.raises(ValueError, match="no control has the role 'nope'"):
        controls.control("nope")
    with pytest.raises(ValueError, match="does not run on the ladder"):
        controls.dose_field("knockout")


def test_the_options_are_the_ones_the_controls_declare():
    grid = controls.ControlOptions()
    assert (grid.seeds, grid.pointer_shifts) == ((0, 1, 2), (-3, 3))  # the controls' defaults
    ladder = controls.LadderOptions(random_seeds=[4, "5"])
    # the same option, its own default in each set: the ladder pushes next to the reference
    # too, the grid (the older rule's evidence) keeps ref+-3
    assert (ladder.pointer_shifts, ladder.random_seeds) == ((-3, -2, -1, 1, 2, 3), (4, 5))
    assert controls.LadderOptions(pointer_shifts=(3,)).pointer_shifts == (3,)
    with pytest.raises(ValueError, match=r"no control declares the option\(s\) \['draws'\]"):
        controls.LadderOptions(draws=3)
    with pytest.raises(AttributeError, match="seeds"):
        getattr(ladder, "seeds")  # noqa: B009 (a grid option: no ladder control declares it)
    with pytest.raises(ValueError, match="different defaults"):
        controls.Options([controls.Option("seeds", (0,)), controls.Option("seeds", (1,))])


def test_a_new_control_brings_its_own_option(monkeypatch):
    def make(chosen, options):
        return [dataclasses.replace(chosen, strength=f * chosen.strength) for f in options.factors]

    factors = controls.Option("factors", (3,), convert=tuple)  # floats: not the int default
    toy = controls.Control("scaled", make, "`*Cx` the chosen heads at f C", options=(factors,))
    monkeypatch.setattr(controls, "CONTROLS", (*controls.CONTROLS, toy))
    made = controls.control_settings(CHOSEN, seeds=(0,))
    assert made[-1].name == "top4-C6"  # its default
    made = controls.control_settings(CHOSEN, seeds=(0,), factors=(0.5,))
    assert made[-1].name == "top4-C1"
    with pytest.raises(ValueError, match="no control declares"):
        controls.control_settings(CHOSEN, draws=(1,))


def test_no_control_imports_a_verdict():
    """The verdicts read the controls (their readings, their fields); a control importing a
    verdict would close a circle between the two packages."""
    from tests.harness.test_imports import graph

    edges = graph()
    reaching = {
        name: sorted(t for t in targets if t.startswith("harness.attention.verdicts"))
        for name, targets in edges.items()
        if name.startswith("harness.attention.controls")
    }
    assert not any(reaching.values()), reaching
