"""The readings of a calibrated verdict: re-derived from them alone, bit for bit, and
resampled by instance; on hand-made readings whose verdict is known exactly, and on a
calibration model's whole pipeline of calls (tests/calibration_round3_verdict.py)."""

from __future__ import annotations

import copy
import json
import math

import pytest

from harness.attention.diagnosis import CLASSES
from harness.attention.verdicts import readings as module
from harness.attention.verdicts.readings import rederive, streams, verdict_inputs
from harness.attention.verdicts.vocabulary import NO_FAILURE, NUDGE_REPAIRABLE

BASE = [0.0, 0.25, 0.5, 0.5]
UP = [0.5, 0.75, 0.75, 1.0]  # the push at C = 0.5: +0.5, +0.5, +0.25, +0.5 (mean 0.4375)
LESS = [0.25, 0.5, 0.75, 1.0]  # at C = 1: +0.25 each but the last (+0.5; mean 0.3125)
ONES = [1.0, 1.0, 1.0, 1.0]


def stream(prefix: str, controls: bool) -> dict:
    out = {
        "n": 2,
        "shift": 0,
        "mode": "standard",
        "metric": "tf_token_acc",
        "pointer_shifts": [-3, 3] if controls else [],
        "config": prefix,
        "index": [0, 1, 2, 3],
        "id_config": "id",
        "id_index": [0, 1, 2, 3],
        "tokens": [4, 4, 4, 4],
        "rungs": [[0.5, None], [1.0, None]],
        "baseline": list(BASE),
        "reference": [list(UP), list(LESS)],
        "id_baseline": list(ONES),
        "id": [list(ONES), list(ONES)],
    }
    if controls:
        # at C = 0.5 only: the shifted pushes change nothing and are followed on one row of
        # ten of the last instance; one draw of other heads gains 0.125 on each instance, the
        # heads' output rescaled to its ID norm 0.0625
        push = {
            "after": list(BASE),
            "following": {"rows": [10] * 4, "before": [0.0] * 4, "after": [0.0, 0.0, 0.0, 0.1]},
        }
        other = [{"seed": 0, "after": [v + 0.125 for v in BASE]}]
        pushes = {"-3": push | {"shift": -3}, "+3": push | {"shift": 3}}
        scaled = {"top2-rescale": {"after": [v + 0.0625 for v in BASE]}}
        out["controls"] = [
            {"pointer": pushes, "other_heads": other, "output_scale": scaled},
            None,
        ]
        out["random_draws"] = {"available": 10}
    return out


def hand_readings() -> dict:
    """A diluted lookup the push at C = 0.5 repairs (every condition holds there): the
    verdict is nudge-repairable at C = 0.5, its gain 0.4375."""
    validation = stream("v", controls=False)
    validation["kind"] = ["diluted", "diluted", "diluted", "diffuse"]
    return {
        "format": module.FORMAT,
        "rule_version": "r-test",
        "unit": "instance",
        "held_fixed": dict(module.HELD_FIXED),
        "n": 2,
        "counts": {"1": None, "2": {"C": 0.5, "gain": 0.4375}},
        "controlled": [[0.5, 0.0], [1.0, 0.0]],
        "stats": {"seed": 0, "n_resamples": 500},
        "lookup": {"exists": True},
        "found": None,
        "validation": validation,
        "validation_by_kind": {
            "diluted": {
                "positions": [0, 1, 2],
                "baseline": BASE[:3],
                "reference": [UP[:3], LESS[:3]],
            },
            "diffuse": {"positions": [3], "baseline": BASE[3:], "reference": [UP[3:], LESS[3:]]},
        },
        "test": stream("t", controls=True),
        "diagnosis": {
            "classes": list(CLASSES),
            "kind": ["diluted", "diluted", "diluted", None],  # the last answer is right
            "wrong": [True, True, True, False],
            "over_long": [False] * 4,
            "null_counts": [[5, 0, 0, 0, 0]] * 4,  # every correct ID row on the reference
            "basis": "first wrong row of each instance",
            "null_basis": "rows the model gets right",
            "shift": 0,
            "kind_changes": False,
        },
    }


def test_hand_made_readings_give_the_verdict_their_values_make():
    out = rederive(hand_readings())
    assert out["verdict"] == NUDGE_REPAIRABLE, out["reasons"]
    numbers = out["numbers"]
    assert numbers["dose"] == {"C": 0.5, "threshold": None}
    assert numbers["reference_gain"]["gain"] == 0.4375
    assert numbers["reference_gain"]["treated"] == sum(UP) / 4
    assert numbers["random_heads_max"] == 0.125
    assert numbers["followed"] == {}
    assert numbers["errors"] == {k: (1.0 if k == "diluted" else 0.0) for k in CLASSES}
    assert numbers["null"] == {k: (1.0 if k == "on_reference" else 0.0) for k in CLASSES}
    assert numbers["answers"] == {"total": 4, "wrong": 3, "diagnosed": 3, "over_long": 0}
    assert streams(hand_readings()) == {"validation": 4, "id_validation": 4, "test": 4, "id": 4}


def test_every_instance_once_gives_the_curves_the_ladder_would_record():
    """The shapes `calibrated_verdict` reads: the pointer's following counted over the
    instances with rows, the draws' mean gain, ID exact match, each kind's own curve."""
    inputs = verdict_inputs(hand_readings())
    test = inputs["test"]
    at = test["doses"][0]
    follow = at["pointers"]["+3"]["following"]
    assert (follow["rows"], follow["instances"]) == (40, 4)
    assert follow["gain"]["gain"] == pytest.approx(0.025)
    assert at["pointers"]["-3"]["gain"]["gain"] == 0.0
    assert at["random_heads"]["draws"] == [{"seed": 0, "gain": 0.125}]
    assert test["doses"][1]["pointers"] is None and test["doses"][1]["random_heads"] is None
    assert test["baseline"]["id"] == {"n": 4, "tf_exact": 1.0}
    assert test["random_draws"] == {"available": 10}
    assert sorted(inputs["by_kind"]) == ["diffuse", "diluted"]
    diluted = inputs["by_kind"]["diluted"]
    assert diluted["instances"] == 3 and diluted["doses"][0]["reference"]["gain"] == 0.5 - 0.25 / 3
    assert diluted["doses"][0]["id"] == {"n": 4, "tf_exact": 1.0}  # the whole stream's ID
    assert inputs["lookup"] == {"exists": True}


def test_a_draw_of_one_instance_reads_that_instance_alone():
    """Every position the same instance: each mean is that instance's value and its interval
    the point; the diagnosis counts it four times, and with no wrong answer the verdict is
    *no failure*."""
    readings = hand_readings()
    inputs = verdict_inputs(readings, draw={"test": [0, 0, 0, 0]})
    reference = inputs["test"]["doses"][0]["reference"]
    assert (reference["gain"], reference["low"], reference["high"]) == (0.5, 0.5, 0.5)
    assert inputs["diagnosis"]["answers"] == {
        "total": 4,
        "wrong": 4,
        "diagnosed": 4,
        "over_long": 0,
    }
    # the validation stream is not drawn: read whole
    assert inputs["validation"]["doses"][0]["reference"]["gain"] == 0.4375
    right = verdict_inputs(readings, draw={"test": [3, 3, 3, 3]})
    assert right["diagnosis"]["instances"] == 0 and right["diagnosis"]["answers"]["wrong"] == 0
    assert right["test"]["doses"][0]["pointers"]["+3"]["following"]["gain"]["gain"] == 0.1
    assert rederive(readings, draw={"test": [3, 3, 3, 3]})["verdict"] == NO_FAILURE


def test_a_validation_draw_keeps_only_the_kinds_it_holds_and_the_id_draw_moves_id():
    readings = hand_readings()
    inputs = verdict_inputs(readings, draw={"validation": [0, 1, 0], "id": [1, 1]})
    assert list(inputs["by_kind"]) == ["diluted"]
    assert inputs["by_kind"]["diluted"]["instances"] == 3
    assert inputs["test"]["baseline"]["id"]["n"] == 2
    readings["test"]["id"][0] = [1.0, 0.0, 1.0, 1.0]
    readings["diagnosis"]["null_counts"] = [[5, 0, 0, 0, 0], [0, 3, 0, 0, 2], [5, 0, 0, 0, 0]] + [
        [5, 0, 0, 0, 0]
    ]
    drawn = verdict_inputs(readings, draw={"id": [1, 1]})
    assert drawn["test"]["doses"][0]["id"]["tf_exact"] == 0.0
    assert drawn["diagnosis"]["null"]["id"] == {
        "rows": 10,
        "shares": {k: {"diluted": 0.6, "diffuse": 0.4}.get(k, 0.0) for k in CLASSES},
    }


def test_stats_options_reach_the_intervals_and_bad_draws_are_refused():
    readings = hand_readings()
    few = verdict_inputs(readings, stats={"n_resamples": 50, "seed": 3})
    many = verdict_inputs(readings)
    assert few["test"]["doses"][0]["reference"]["gain"] == 0.4375
    assert few["test"]["doses"][0]["reference"] != many["test"]["doses"][0]["reference"]
    with pytest.raises(ValueError, match="names no stream"):
        verdict_inputs(readings, draw={"ood": [0]})
    with pytest.raises(ValueError, match="outside 0..3"):
        verdict_inputs(readings, draw={"test": [4]})
    with pytest.raises(ValueError, match="format"):
        verdict_inputs(readings | {"format": 99})


def test_values_are_kept_as_counts_only_where_that_is_exact():
    """A token accuracy is kept as the count of its instance's tokens, and read back bit for
    bit; a list with one value that is no count of its size is kept as it is."""
    tokens = [12, 7, 3]
    values = [7 / 12, 1 / 7, 1.0]
    counts = module._pack(values, tokens)
    assert counts == [7, 1, 3] and module._unpack(counts, tokens) == values
    assert module._pack([0.5, 0.123], [2, 3]) == [0.5, 0.123]
    assert module._unpack([0.5, 0.123], [2, 3]) == [0.5, 0.123]
    assert module._pack([None, 0.5], [0, 4]) == [None, 2]
    assert module._unpack([None, 2], [0, 4]) == [None, 0.5]


def test_stages_made_before_per_instance_values_have_no_readings():
    curve = {"doses": [{"strength": 1.0}]}
    stage = {"n": 1, "validation": curve, "test": curve}
    assert module.verdict_readings(stage, {"per_instance": {}}, None) is None


# --- a calibration model through the pipeline's calls --------------------------------------
def _json(value):
    return json.loads(json.dumps(value))


def _mismatches(rebuilt, recorded, path="") -> list[str]:
    """Every leaf of `rebuilt` that `recorded` lacks or holds otherwise (floats to 1e-9)."""
    if isinstance(rebuilt, dict):
        return [
            m
            for k, v in rebuilt.items()
            for m in (
                _mismatches(v, recorded[k], f"{path}.{k}")
                if isinstance(recorded, dict) and k in recorded
                else [f"{path}.{k}: missing"]
            )
        ]
    if isinstance(rebuilt, list):
        if not isinstance(recorded, list) or len(recorded) != len(rebuilt):
            return [f"{path}: {rebuilt!r} against {recorded!r}"]
        return [
            m for i, v in enumerate(rebuilt) for m in _mismatches(v, recorded[i], f"{path}[{i}]")
        ]
    if isinstance(rebuilt, float) and isinstance(recorded, (int, float)):
        same = math.isclose(rebuilt, recorded, rel_tol=0, abs_tol=1e-9)
        return [] if same or (math.isnan(rebuilt) and math.isnan(recorded)) else [path]
    return [] if rebuilt == recorded else [f"{path}: {rebuilt!r} against {recorded!r}"]


def recorded_fields_match(readings, dose, diagnosis) -> list[str]:
    """What `verdict_inputs` with no draw makes, against the recorded curves and diagnosis
    (every field it makes must be there, equal)."""
    inputs = verdict_inputs(readings)
    return [
        *_mismatches(inputs["validation"], dose["validation"], "validation"),
        *_mismatches(inputs["test"], dose["test"], "test"),
        *_mismatches(inputs["by_kind"] or {}, dose.get("validation_by_kind") or {}, "by_kind"),
        *_mismatches(inputs["diagnosis"], diagnosis, "diagnosis"),
    ]


@pytest.fixture(scope="module")
def judged():
    """The mixed failure of tests/calibration_round3_verdict.py (a diluted kind read at its
    own dose, a misdirected one), through the calls `reproduce` makes."""
    from tests.calibration_round3_verdict import build, judge_by_kind

    out = judge_by_kind(build("dilution_and_misdirection"), seed=0)
    stage = {
        "n": out["n"],
        "counts": {str(k): v for k, v in out["counts"].items()},
        "validation": out["validation"],
        "validation_by_kind": out["by_kind"],
        "test": out["test"],
        "controlled": [list(r) for r in out["rungs"]],
    }
    # as the stages hand them on: through JSON
    return _json(stage), _json(out["diagnosis"]), _json(out["verdict"])


def test_a_calibration_models_verdict_is_rederived_from_its_readings_alone(judged):
    stage, diagnosis, verdict = judged
    readings = _json(module.verdict_readings(stage, diagnosis, None))
    assert verdict["verdict"] == "mixed failure"
    # every ladder control is rebuilt from its per-instance values, none held as recorded
    assert "controls" not in readings["held_fixed"]
    assert any(d.get("output_scale") for d in stage["test"]["doses"])  # the rescale's too
    again = rederive(readings)
    assert again == verdict  # the word, the reasons and every number, bit for bit
    assert recorded_fields_match(readings, stage, diagnosis) == []
    sizes = streams(readings)
    assert sizes["test"] == stage["test"]["instances"]
    assert sizes["id"] == stage["test"]["id_instances"]
    assert sizes["validation"] == stage["validation"]["instances"]
    # a resample is another reading of the same readings: never the recorded one changed
    kept = copy.deepcopy(readings)
    rederive(readings, draw={"test": [0] * sizes["test"]})
    assert readings == kept


def test_a_control_no_rebuild_knows_is_kept_as_recorded_and_said_held_fixed(judged, monkeypatch):
    """A ladder control added to the registry without a rebuild from per-instance values
    (here the other heads, as if unknown): its numbers are kept as recorded at each rung,
    `held_fixed` names it, and the verdict is still re-derived bit for bit."""
    stage, diagnosis, verdict = judged
    monkeypatch.setattr(module, "REBUILT", ("pointer",))
    readings = _json(module.verdict_readings(stage, diagnosis, None))
    assert "other_heads" in readings["held_fixed"]["controls"]
    assert rederive(readings) == verdict
    drawn = verdict_inputs(readings, draw={"test": [0] * streams(readings)["test"]})
    recorded = [d["random_heads"] for d in stage["test"]["doses"]]
    assert [d["random_heads"] for d in drawn["test"]["doses"]] == recorded
