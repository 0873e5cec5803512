"""Rule G of the calibrated verdict (harness.attention.verdicts.exists): a lookup exists
before it is judged. A model that fails in distribution, or whose heads at the offset do not
beat their null, is *no lookup* whatever its errors and its dose say; each figure is kept
beside its bar or null."""

from __future__ import annotations

from harness.attention.verdicts.calibrated import calibrated_verdict
from harness.attention.verdicts.exists import lookup_gate
from harness.attention.verdicts.vocabulary import ID_WORKS, NO_LOOKUP

GAIN = {"gain": 0.5, "low": 0.4, "high": 0.6}
NONE = {"gain": 0.0, "low": -0.05, "high": 0.05}


def dose(c: float) -> dict:
    """A dose whose reference push gains and whose controls do not (a clean repair)."""
    pointer = {"gain": NONE, "following": {"gain": {"gain": 0.0}, "rows": 100}}
    return {
        "strength": c,
        "threshold": None,
        "reference": GAIN,
        "pointers": {"-3": pointer, "+3": pointer},
        "random_heads": {"max": 0.0, "mean": 0.0, "count": 3},
        "id": {"tf_exact": 1.0},
    }


def curve(*doses) -> dict:
    return {"baseline": {"id": {"tf_exact": 1.0}}, "doses": list(doses)}


def errors(**shares) -> dict:
    full = dict.fromkeys(("on_reference", "diluted", "misdirected", "elsewhere", "diffuse"), 0.0)
    return {"shares": full | shares, "instances": 40}


def evidence(level: float, null: float = 0.095, offset: int = 0) -> dict:
    beats = level - null >= 0.25 * (1 - null)
    return {
        "offset": offset,
        "null": null,
        "margin": 0.25,
        "exists": beats,
        "heads": [{"head": [0, 1], "level": level, "null": null, "beats": beats}],
    }


def id_curve(id_exact: float, *doses) -> dict:
    return {**curve(*doses), "baseline": {"id": {"tf_exact": id_exact}}}


def test_a_model_that_works_nowhere_is_no_lookup_not_downstream():
    """Every OOD first wrong row on the reference (its previous-token head keeps its 0.165
    there) reads downstream, but the model writes nothing right in distribution."""
    on_ref = errors(on_reference=1.0)
    assert calibrated_verdict(curve(dose(1.0)), curve(dose(1.0)), on_ref)["verdict"] == (
        "downstream"
    )
    out = calibrated_verdict(id_curve(1.0), id_curve(0.0, dose(1.0)), on_ref, lookup=evidence(0.9))
    assert out["verdict"] == NO_LOOKUP, out
    assert "does not work in distribution: ID exact match 0.00, under 0.5" in out["reasons"][0]
    assert out["numbers"]["exists"]["id_exact"] == 0.0
    assert out["numbers"]["exists"]["id_works"] == ID_WORKS == 0.5


def test_no_head_beating_its_null_is_no_lookup_with_the_level_beside_the_null():
    on_ref = errors(on_reference=1.0)
    out = calibrated_verdict(curve(dose(1.0)), curve(dose(1.0)), on_ref, lookup=evidence(0.165))
    assert out["verdict"] == NO_LOOKUP
    assert out["reasons"] == [
        "no head at the reference beats its null: the top head's ID level 0.165, attention "
        "spread evenly over the same keys gives 0.095, and a lookup head needs 0.321 (0.25 of "
        "the way to all of it)"
    ]
    assert out["numbers"]["exists"]["lookup"]["heads"][0] == {
        "head": [0, 1],
        "level": 0.165,
        "null": 0.095,
        "beats": False,
    }


def test_a_working_model_with_a_lookup_is_read_as_before():
    on_ref = errors(on_reference=1.0)
    out = calibrated_verdict(
        curve(dose(1.0)), id_curve(0.5, dose(1.0)), on_ref, lookup=evidence(0.9)
    )
    assert out["verdict"] == "downstream"  # ID exact exactly at the bar works
    assert out["numbers"]["exists"]["works"] is True


def test_an_unmeasured_figure_claims_nothing():
    figures, failed = lookup_gate({"doses": []}, None)
    assert failed == [] and figures["id_exact"] is None and figures["works"] is None
    unknown = {**evidence(0.165), "exists": None}
    assert lookup_gate(curve(), unknown)[1] == []
