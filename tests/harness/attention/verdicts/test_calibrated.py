"""The calibrated verdict: its rule on curves whose answer is known exactly, and its
calibration on the planted models of tests/planted.py, whose mechanism is known."""

from __future__ import annotations

import pytest

from harness.attention.verdicts import calibrated as rule
from harness.attention.verdicts.calibrated import calibrated_verdict, choose_count, choose_dose

GAIN = {"gain": 0.5, "low": 0.4, "high": 0.6}
SMALL = {"gain": 0.05, "low": -0.02, "high": 0.1}
NONE = {"gain": 0.0, "low": -0.05, "high": 0.05}


def pointer(gain=NONE, follow=0.0, rows=100):
    return {"gain": gain, "following": {"gain": {"gain": follow}, "rows": rows}}


def dose(c, reference=GAIN, pointers=None, random_max=0.0, id_exact=1.0):
    return {
        "strength": c,
        "threshold": None,
        "reference": reference,
        "pointers": pointers if pointers is not None else {"-3": pointer(), "+3": pointer()},
        "random_heads": {"max": random_max, "mean": random_max, "count": 3},
        "id": {"tf_exact": id_exact},
    }


def curve(*doses):
    return {"baseline": {"id": {"tf_exact": 1.0}}, "doses": list(doses)}


def errors(**shares):
    full = dict.fromkeys(("on_reference", "diluted", "misdirected", "elsewhere", "diffuse"), 0.0)
    return {"shares": full | shares, "instances": 40}


def test_the_dose_is_the_largest_validated_gain_with_id_holding_smallest_on_a_tie():
    ladder = curve(
        dose(0.1, SMALL),  # interval not above 0
        dose(0.3, GAIN),
        dose(1.0, GAIN),  # a tie: the smaller C wins
        dose(2.0, {"gain": 0.9, "low": 0.8, "high": 1.0}, id_exact=0.5),  # breaks ID
    )
    assert choose_dose(ladder)["strength"] == 0.3
    assert choose_dose(curve(dose(0.1, SMALL))) is None


def test_n_is_the_count_whose_best_dose_gains_most_smaller_on_a_tie_largest_when_none_gains():
    big = {"gain": 0.7, "low": 0.6, "high": 0.8}
    n, summary = choose_count(
        {1: curve(dose(0.5, SMALL)), 2: curve(dose(0.3, GAIN)), 4: curve(dose(0.1, big))}
    )
    assert n == 4
    assert summary[1] is None and summary[2]["C"] == 0.3 and summary[4]["gain"] == 0.7
    assert choose_count({1: curve(dose(0.3, GAIN)), 2: curve(dose(0.2, GAIN))})[0] == 1
    assert choose_count({1: curve(dose(0.5, SMALL)), 4: curve(dose(0.5, SMALL))})[0] == 4
    with pytest.raises(ValueError, match="at least one curve"):
        choose_count({})


def test_the_kind_of_error_decides_first():
    ladder = curve(dose(0.3))
    assert (
        calibrated_verdict(ladder, ladder, errors(on_reference=0.7, diluted=0.3))["verdict"]
        == "downstream"
    )
    out = calibrated_verdict(ladder, ladder, errors(misdirected=0.6, diffuse=0.4))
    assert out["verdict"] == "misdirected lookup" and "no shifted push" in out["reasons"][1]
    other = calibrated_verdict(ladder, ladder, errors(elsewhere=0.8, diffuse=0.2))
    assert other["verdict"] == "inconclusive" and "does not decide" in other["reasons"][0]
    mixed = calibrated_verdict(ladder, ladder, errors(diluted=0.4, diffuse=0.3, elsewhere=0.3))
    assert mixed["verdict"] == "inconclusive" and "half" in mixed["reasons"][0]
    assert calibrated_verdict(ladder, ladder, {"shares": {}, "instances": 0})["verdict"] == (
        "no failure"
    )


def test_a_diluted_lookup_is_nudge_repairable_only_when_every_control_says_so():
    good = curve(dose(0.3))
    assert calibrated_verdict(good, good, errors(diluted=0.9))["verdict"] == "nudge-repairable"
    cases = {
        "is followed": dose(0.3, pointers={"+3": pointer(follow=0.5)}),
        "gains about as much": dose(0.3, pointers={"+3": pointer(gain=GAIN)}),
        "random other heads gain as much": dose(0.3, random_max=0.45),
        "ID exact match falls 1.000 -> 0.900": dose(0.3, id_exact=0.9),
    }
    for reason, failing in cases.items():
        out = calibrated_verdict(good, curve(failing), errors(diluted=0.9))
        assert out["verdict"] == "inconclusive", reason
        assert any(reason in r for r in out["reasons"]), (reason, out["reasons"])
    # a following rate on too few rows says nothing
    few = dose(0.3, pointers={"+3": pointer(follow=0.9, rows=5)})
    assert calibrated_verdict(good, curve(few), errors(diluted=0.9))["verdict"] == (
        "nudge-repairable"
    )


def test_diffuse_errors_are_no_lookup_when_pushes_anywhere_are_followed():
    followed = dose(2.0, pointers={"-3": pointer(follow=0.6), "+3": pointer(follow=0.4)})
    ladder = curve(dose(0.3), followed)
    out = calibrated_verdict(ladder, ladder, errors(diffuse=0.8))
    assert out["verdict"] == "no lookup" and "C = 2" in out["reasons"][1]
    quiet = curve(dose(0.3), dose(2.0))
    assert calibrated_verdict(quiet, quiet, errors(diffuse=0.8))["verdict"] == "inconclusive"


def test_no_dose_that_gains_is_no_attention_effect():
    flat = curve(dose(0.3, NONE), dose(2.0, NONE))
    for kind in ("diluted", "diffuse"):
        out = calibrated_verdict(flat, flat, errors(**{kind: 0.9}))
        assert out["verdict"] == "no attention effect"
    assert rule.VERDICTS[-1] == "inconclusive"


# --- calibration: the planted models --------------------------------------------------------
PLANTED = {
    "dilution": "nudge-repairable",
    "slip": "misdirected lookup",
    "no_lookup": "no lookup",
    "downstream": "downstream",
}


@pytest.mark.slow
@pytest.mark.parametrize("shift", [0, 1])
@pytest.mark.parametrize("mechanism", sorted(PLANTED))
def test_each_planted_mechanism_gets_the_verdict_its_construction_implies(mechanism, shift):
    """Through the tool's own measurements: the head ranking on ID, the dose ladder on an
    OOD validation and an OOD test stream (other seeds of the same lengths), and where the
    errors look on test; with the top 1 head and the top 2 (the verdict must not change
    with the number of heads pushed)."""
    from harness.attention import diagnosis
    from harness.attention.dose import run_dose_ladder
    from harness.attention.heads import rank_heads
    from harness.attention.interventions import score_settings
    from harness.attention.sweep import BASELINE
    from harness.engine.scoring import Scorer
    from tests.planted import build, ood_instances

    model, tokenizer, ids, test, _ = build(mechanism, shift)
    validation = ood_instances(seed=1)[::2]
    test = test[::2]
    ranking = rank_heads(model, tokenizer, ids, shift=shift, batch_size=16)
    records = score_settings(model, tokenizer, test, [BASELINE], None, batch_size=16)
    verdicts, validation_curves = {}, {}
    for n in (1, 2):
        heads = ranking.top(n)
        ladder = {"doses": (0.05, 0.3, 1.0, 2.0), "draws": 3, "batch_size": 16}
        val = run_dose_ladder(model, tokenizer, None, ranking, n, validation, ids, **ladder)
        tst = run_dose_ladder(model, tokenizer, None, ranking, n, test, ids, **ladder)
        found = diagnosis.where_errors_look(
            Scorer(model, tokenizer, batch_size=16),
            test,
            records["baseline"],
            heads,
            shift=shift,
            level=diagnosis.id_level(ranking, heads, shift),
        )
        out = calibrated_verdict(val, tst, found)
        assert out["verdict"] == PLANTED[mechanism], (n, out)
        verdicts[n], validation_curves[n] = out["verdict"], val
    # as reproduce does: N chosen on validation among the counts a grid sweeps; whichever
    # counts it sweeps, the verdict read at the chosen N is the same
    for counts in ((1,), (2,), (1, 2)):
        n, _ = choose_count({k: validation_curves[k] for k in counts})
        assert verdicts[n] == PLANTED[mechanism], (counts, n)
