"""The calibrated verdict: its rule on curves whose answer is known exactly, and its
calibration on the planted models of tests/planted.py, whose mechanism is known."""

from __future__ import annotations

import pytest

from harness.attention.verdicts import calibrated as rule
from harness.attention.verdicts.calibrated import (
    calibrated_verdict,
    choose_count,
    choose_dose,
    reading_rungs,
)

GAIN = {"gain": 0.5, "low": 0.4, "high": 0.6}
SMALL = {"gain": 0.05, "low": -0.02, "high": 0.1}
NONE = {"gain": 0.0, "low": -0.05, "high": 0.05}


def pointer(gain=NONE, follow=0.0, rows=100):
    return {"gain": gain, "following": {"gain": {"gain": follow}, "rows": rows}}


def dose(c, reference=GAIN, pointers=None, random_max=0.0, id_exact=1.0, rescaled=NONE):
    return {
        "strength": c,
        "threshold": None,
        "reference": reference,
        "pointers": pointers if pointers is not None else {"-3": pointer(), "+3": pointer()},
        "random_heads": {"max": random_max, "mean": random_max, "count": 3},
        # the output-scale control: the heads' output rescaled to its ID norm
        "output_scale": {"setting": "top2-rescale", "gain": rescaled},
        "id": {"tf_exact": id_exact},
    }


def curve(*doses):
    return {"baseline": {"id": {"tf_exact": 1.0}}, "doses": list(doses)}


def errors(**shares):
    full = dict.fromkeys(("on_reference", "diluted", "misdirected", "elsewhere", "diffuse"), 0.0)
    answers = {"total": 40, "wrong": 40, "diagnosed": 40, "over_long": 0}
    return {"shares": full | shares, "instances": 40, "answers": answers}


def no_errors(wrong=0, over_long=0):
    """A diagnosis with no wrong row: the eval says `wrong` answers are wrong anyway."""
    answers = {"total": 40, "wrong": wrong, "diagnosed": 0, "over_long": over_long}
    return {"shares": {}, "instances": 0, "answers": answers}


def test_the_dose_is_the_largest_validated_gain_with_id_holding_smallest_on_a_tie():
    ladder = curve(
        dose(0.1, SMALL),  # interval not above 0
        dose(0.3, GAIN),
        dose(1.0, GAIN),  # a tie: the smaller C wins
        dose(2.0, {"gain": 0.9, "low": 0.8, "high": 1.0}, id_exact=0.5),  # breaks ID
    )
    assert choose_dose(ladder)["strength"] == 0.3
    assert choose_dose(curve(dose(0.1, SMALL))) is None


def test_the_controls_are_read_at_the_chosen_dose_and_the_top_one():
    """Where the analysis runs the ladder's controls on test (`reading_rungs`): chosen on
    validation alone, as (strength, threshold)."""
    ladder = curve(dose(0.1, SMALL), dose(0.3, GAIN), dose(2.0, SMALL))
    assert reading_rungs(ladder) == [(0.3, 0.0), (2.0, 0.0)]
    assert reading_rungs(curve(dose(0.3, SMALL), dose(2.0, GAIN))) == [(2.0, 0.0)]
    assert reading_rungs(curve(dose(0.3, SMALL), dose(2.0, SMALL))) == [(2.0, 0.0)]
    # a threshold mode: the top rung is the largest threshold's largest C
    by_threshold = [dose(c, SMALL) | {"threshold": t} for t in (0.1, 0.2) for c in (0.5, 2.0)]
    by_threshold[2]["reference"] = GAIN
    assert reading_rungs(curve(*by_threshold)) == [(0.5, 0.2), (2.0, 0.2)]
    with pytest.raises(ValueError, match="doses"):
        reading_rungs(curve())


def test_n_is_the_count_whose_best_dose_gains_most_and_a_tie_holds_every_lookup_head():
    big = {"gain": 0.7, "low": 0.6, "high": 0.8}
    n, summary = choose_count(
        {1: curve(dose(0.5, SMALL)), 2: curve(dose(0.3, GAIN)), 4: curve(dose(0.1, big))}
    )
    assert n == 4
    assert summary[1] is None and summary[2]["C"] == 0.3 and summary[4]["gain"] == 0.7
    assert summary[4]["low"] == 0.6 and summary[4]["high"] == 0.8
    # a tie (a gain inside the best one's interval): the smallest N ...
    tie = {1: curve(dose(0.3, GAIN)), 2: curve(dose(0.2, GAIN)), 4: curve(dose(0.2, GAIN))}
    assert choose_count(tie)[0] == 1
    # ... that holds every lookup head in distribution (two redundant heads: N = 2)
    assert choose_count(tie, lookup=2)[0] == 2
    assert choose_count(tie, lookup=3)[0] == 4
    # a gain under the best one's interval is no tie, lookup heads or not
    apart = {1: curve(dose(0.3, {"gain": 0.3, "low": 0.2, "high": 0.4})), 2: curve(dose(0.3))}
    assert choose_count(apart)[0] == 2
    assert choose_count({1: curve(dose(0.3)), 2: curve(dose(0.3, SMALL))}, lookup=2)[0] == 1
    # no count gains: the smallest holding the lookup heads (the largest when none does)
    flat = {1: curve(dose(0.5, SMALL)), 2: curve(dose(0.5, SMALL)), 4: curve(dose(0.5, SMALL))}
    assert choose_count(flat)[0] == 1
    assert choose_count(flat, lookup=2)[0] == 2
    assert choose_count(flat, lookup=8)[0] == 4
    with pytest.raises(ValueError, match="at least one curve"):
        choose_count({})
    with pytest.raises(ValueError, match="lookup"):
        choose_count(flat, lookup=-1)


def test_the_kind_of_error_decides_first():
    ladder = curve(dose(0.3))
    out = calibrated_verdict(ladder, ladder, errors(on_reference=0.8, diluted=0.2))
    assert out["verdict"] == "downstream"
    # a push that gains is named beside it: it supplies the answer
    assert any("supplies the answer" in r for r in out["reasons"])
    out = calibrated_verdict(ladder, ladder, errors(misdirected=0.8, diffuse=0.2))
    assert out["verdict"] == "misdirected lookup" and "no shifted push" in out["reasons"][2]
    other = calibrated_verdict(ladder, ladder, errors(elsewhere=0.8, diffuse=0.2))
    assert other["verdict"] == "inconclusive" and "does not decide" in other["reasons"][1]
    spread = {"diluted": 0.24, "diffuse": 0.24, "elsewhere": 0.24, "misdirected": 0.28}
    out = calibrated_verdict(ladder, ladder, errors(**spread))
    assert out["verdict"] == "inconclusive" and "half" in out["reasons"][0]
    assert calibrated_verdict(ladder, ladder, no_errors())["verdict"] == "no failure"


def test_every_kind_holding_a_quarter_is_named_with_its_share_and_reading():
    """Dilution in half the instances, a downstream failure in the other half: one verdict
    would hide either; the mixed failure names both, each read at the chosen dose."""
    ladder = curve(dose(0.3))
    out = calibrated_verdict(ladder, ladder, errors(diluted=0.5, on_reference=0.5))
    assert out["verdict"] == "mixed failure"
    assert "diluted 0.50: nudge-repairable" in out["reasons"][0]
    assert "on reference 0.50: downstream" in out["reasons"][0]
    assert out["numbers"]["kinds"] == {"diluted": 0.5, "on_reference": 0.5}
    readings = {m["kind"]: m["verdict"] for m in out["numbers"]["mixed"]}
    assert readings == {"diluted": "nudge-repairable", "on_reference": "downstream"}
    # 0.7 and 0.3: still both named (0.3 >= a quarter); 0.8 and 0.2: one verdict
    out = calibrated_verdict(ladder, ladder, errors(diluted=0.7, on_reference=0.3))
    assert out["verdict"] == "mixed failure"
    out = calibrated_verdict(ladder, ladder, errors(diluted=0.8, on_reference=0.2))
    assert out["verdict"] == "nudge-repairable"
    # kinds that read alike are one verdict, each named: no dose helps either
    flat = curve(dose(0.3, NONE))
    out = calibrated_verdict(flat, flat, errors(diluted=0.53, diffuse=0.47))
    assert out["verdict"] == "no attention effect"
    assert "diluted 0.53 and diffuse 0.47 both read no attention effect" in out["reasons"][0]


def with_null(found, **null):
    """`found` with the same classification's shares on the correct ID rows beside it."""
    full = dict.fromkeys(("on_reference", "diluted", "misdirected", "elsewhere", "diffuse"), 0.0)
    return found | {"null": {"id": {"rows": 200, "shares": full | null}, "ood": None}}


def test_a_kind_of_lookup_failure_counts_only_above_its_null():
    """The same heads read diffuse on 75% of the rows the model gets right: diffuse on 80% of
    its first wrong rows is no evidence of a missing lookup (0.05 over its null, under
    NULL_EXCESS), and what is left (on reference 0.2) holds no half: inconclusive. Far above
    its null (0.05) the same share is read as before."""
    from harness.attention.verdicts.vocabulary import NULL_EXCESS

    ladder = curve(dose(0.3, pointers={"-3": pointer(follow=0.5), "+3": pointer()}))
    found = errors(diffuse=0.8, on_reference=0.2)
    assert calibrated_verdict(ladder, ladder, with_null(found, diffuse=0.05))["verdict"] == (
        "no lookup"
    )
    out = calibrated_verdict(ladder, ladder, with_null(found, diffuse=0.75, on_reference=0.25))
    assert out["verdict"] == "inconclusive" and "half" in out["reasons"][0], out
    assert out["numbers"]["kinds"] == {}, out["numbers"]
    assert out["numbers"]["null"]["diffuse"] == 0.75
    assert "on the correct ID rows: on reference 0.25, diffuse 0.75" in out["reasons"][0]
    # exactly NULL_EXCESS above counts; a hair under does not
    edge = errors(diluted=0.6, on_reference=0.4)
    assert (
        "diluted"
        in calibrated_verdict(ladder, ladder, with_null(edge, diluted=0.6 - NULL_EXCESS))[
            "numbers"
        ]["kinds"]
    )
    assert (
        "diluted"
        not in calibrated_verdict(
            ladder, ladder, with_null(edge, diluted=0.6 - NULL_EXCESS + 0.01)
        )["numbers"]["kinds"]
    )
    # on reference needs no excess: its null is the on-reference test's own calibration
    out = calibrated_verdict(ladder, ladder, with_null(errors(on_reference=0.9), on_reference=0.95))
    assert out["verdict"] == "downstream", out
    # no kind above its null at all: inconclusive, saying so
    out = calibrated_verdict(ladder, ladder, with_null(errors(diffuse=1.0), diffuse=0.95))
    assert out["verdict"] == "inconclusive" and "exceeds its null" in out["reasons"][0]


def test_a_diluted_lookup_is_nudge_repairable_only_when_every_control_says_so():
    good = curve(dose(0.3))
    assert calibrated_verdict(good, good, errors(diluted=0.9))["verdict"] == "nudge-repairable"
    cases = {
        "is followed": dose(0.3, pointers={"+3": pointer(follow=0.5)}),
        "gains about as much": dose(0.3, pointers={"+3": pointer(gain=GAIN)}),
        "random other heads gain as much": dose(0.3, random_max=0.45),
        "ID exact match falls 1.000 -> 0.900": dose(0.3, id_exact=0.9),
        "the shifted pushes were not measured": dose(0.3, pointers={}),
        # the rescale repairs as well (a shrunken output, not a missing weight), or all but
        # as well: its gain inside the push's interval is no margin
        "rescaling the heads' output to its ID norm, pattern unchanged, gains as much": dose(
            0.3, rescaled=GAIN
        ),
        "gains as much (+0.420)": dose(0.3, rescaled={"gain": 0.42, "low": 0.3, "high": 0.5}),
        "the output-scale control (the heads' output rescaled to its ID norm, pattern "
        "unchanged) was not measured": _without(dose(0.3), "output_scale"),
    }
    for reason, failing in cases.items():
        out = calibrated_verdict(good, curve(failing), errors(diluted=0.9))
        assert out["verdict"] == "inconclusive", reason
        assert any(reason in r for r in out["reasons"]), (reason, out["reasons"])
    # a following rate on too few rows is not measured: the push's following is unknown,
    # so "no shifted push is followed" cannot be claimed (it was, before: counted as not
    # followed, which said nudge-repairable with no following evidence at all)
    few = dose(0.3, pointers={"+3": pointer(follow=0.9, rows=5)})
    out = calibrated_verdict(good, curve(few), errors(diluted=0.9))
    assert out["verdict"] == "inconclusive"
    assert any("ref+3 is followed was not measured (5 rows" in r for r in out["reasons"])
    # N = all heads: no head is left to draw; the shifted pushes are the control
    every = dose(0.3)
    every["random_heads"] = {"max": None, "count": 0}
    alone = curve(every) | {"random_draws": {"available": 0}}
    out = calibrated_verdict(good, alone, errors(diluted=0.9))
    assert out["verdict"] == "nudge-repairable"
    assert "shifted pushes are the control" in out["reasons"][-1]
    assert out["numbers"]["exceptions"] == ["no_random_heads"]
    unmeasured = curve(every)  # draws were possible but none was measured
    assert calibrated_verdict(good, unmeasured, errors(diluted=0.9))["verdict"] == "inconclusive"


def test_every_condition_is_read_at_the_chosen_dose_never_at_the_top():
    """Every copying lookup follows a push at C = 2: a following at the top dose is no
    evidence of anything. The chosen dose here is 0.3."""
    followed = dose(2.0, {"gain": 0.1, "low": 0.05, "high": 0.15})
    followed["pointers"] = {"-3": pointer(follow=0.6), "+3": pointer(follow=0.4)}
    ladder = curve(dose(0.3), followed)
    assert calibrated_verdict(ladder, ladder, errors(diluted=0.9))["verdict"] == (
        "nudge-repairable"
    )
    out = calibrated_verdict(ladder, ladder, errors(diffuse=0.8))
    assert out["verdict"] != "no lookup"


def test_diffuse_errors_are_no_lookup_when_pushes_are_followed_at_the_chosen_dose():
    followed = dose(0.3, pointers={"-3": pointer(follow=0.6), "+3": pointer(follow=0.4)})
    ladder = curve(followed)
    out = calibrated_verdict(ladder, ladder, errors(diffuse=0.8))
    assert out["verdict"] == "no lookup" and "C = 0.3" in out["reasons"][2]
    quiet = curve(dose(0.3, pointers={"-3": pointer(gain=GAIN), "+3": pointer()}))
    assert calibrated_verdict(quiet, quiet, errors(diffuse=0.8))["verdict"] == "inconclusive"


def test_diffuse_errors_against_a_clean_repair_are_conflicting_evidence():
    """The audit's case: at the chosen dose the reference push gains, no shifted push gains
    or is followed, random heads gain nothing and ID holds, yet the errors read diffuse. A
    verdict of either kind would be printed against the numbers beside it."""
    ladder = curve(dose(0.3))
    out = calibrated_verdict(ladder, ladder, errors(diffuse=0.8))
    assert out["verdict"] == "conflicting evidence"
    assert "no lookup" in out["reasons"][1] and "repairable lookup" in out["reasons"][2]


def test_no_dose_that_gains_is_no_attention_effect():
    flat = curve(dose(0.3, NONE), dose(2.0, NONE))
    for kind in ("diluted", "diffuse"):
        out = calibrated_verdict(flat, flat, errors(**{kind: 0.9}))
        assert out["verdict"] == "no attention effect"
    assert rule.VERDICTS[-1] == "inconclusive"


def test_the_numbers_name_the_basis_and_the_offset_of_the_diagnosis():
    ladder = curve(dose(0.3))
    found = errors(diluted=0.9) | {"basis": "first wrong row of each instance", "shift": 1}
    out = calibrated_verdict(ladder, ladder, found)
    assert out["numbers"]["basis"] == "first wrong row of each instance"
    assert out["numbers"]["shift"] == 1
    assert "first wrong row of each instance" in out["reasons"][0]


# --- no condition claimed unmeasured --------------------------------------------------------
def _without(entry, *fields):
    return {k: (None if k in fields else v) for k, v in entry.items()}


SIX = ("-3", "-2", "-1", "+1", "+2", "+3")  # the ladder's shifted pushes (its default)


def test_every_shifted_push_of_the_ladder_is_a_condition_named_by_its_shift():
    """The ladder pushes at ref+-1 and +-2 as well as +-3: a neighbour of the reference may
    carry what it does. A nudge repair needs each of the six measured, not followed and
    gaining less; a failing one is named by its shift, each on its own, and the verdict's
    reasons say which pushes were read when it holds."""
    six = {k: pointer() for k in SIX}
    good = curve(dose(0.3, pointers=six))
    out = calibrated_verdict(good, good, errors(diluted=0.9))
    assert out["verdict"] == "nudge-repairable", out["reasons"]
    assert (
        "no shifted push (ref-3, ref-2, ref-1, ref+1, ref+2, ref+3) is followed"
        in (out["reasons"][-1])
    )
    for k in SIX:
        for broken, said in (
            (pointer(gain=GAIN), f"the push at ref{k} gains about as much as at the reference"),
            (pointer(follow=0.5), f"the push at ref{k} is followed (+0.50)"),
        ):
            test = curve(dose(0.3, pointers=six | {k: broken}))
            out = calibrated_verdict(good, test, errors(diluted=0.9))
            assert out["verdict"] == "inconclusive", (k, out["reasons"])
            named = [r for r in out["reasons"] if "the push at ref" in r]
            assert len(named) == 1 and said in named[0], (k, out["reasons"])
    # two neighbours at once: both named
    test = curve(dose(0.3, pointers=six | {"-1": pointer(gain=GAIN), "+2": pointer(gain=GAIN)}))
    reasons = " ".join(calibrated_verdict(good, test, errors(diluted=0.9))["reasons"])
    assert "ref-1 gains about as much" in reasons and "ref+2 gains about as much" in reasons


@pytest.mark.parametrize("k", ["-1", "+1"])
def test_a_push_next_to_the_reference_on_19_rows_is_not_measured_never_holding(k):
    """A push at ref+-1 whose displaced answer differs from the gold one on only 19 rows
    (under MIN_POINTER_ROWS) cannot say whether it is followed: not measured, so no
    nudge repair, even though it neither gains nor is followed on those rows; on 20 rows
    it counts."""
    from harness.attention.verdicts.vocabulary import MIN_POINTER_ROWS

    six = {s: pointer() for s in SIX}
    good = curve(dose(0.3, pointers=six))
    few = curve(dose(0.3, pointers=six | {k: pointer(rows=MIN_POINTER_ROWS - 1)}))
    out = calibrated_verdict(good, few, errors(diluted=0.9))
    assert out["verdict"] == "inconclusive", out["reasons"]
    said = f"whether the push at ref{k} is followed was not measured (19 rows where it points"
    assert any(said in r for r in out["reasons"]), out["reasons"]
    assert not any(f"ref{k}" in r for r in out["reasons"] if "not measured" not in r)
    enough = curve(dose(0.3, pointers=six | {k: pointer(rows=MIN_POINTER_ROWS)}))
    assert calibrated_verdict(good, enough, errors(diluted=0.9))["verdict"] == "nudge-repairable"
    # a misdirected lookup reports it as not measured too, never as "not followed"
    out = calibrated_verdict(good, few, errors(misdirected=0.9))
    assert out["verdict"] == "misdirected lookup"
    assert f"ref{k}" in out["reasons"][-1] and "not measured" in out["reasons"][-1]


def _unmeasured_cases():
    """(case, validation, test, diagnosis, the word that would be said were the condition
    measured and holding): each word's `means` names the condition left unmeasured here."""
    good = curve(dose(0.3))
    few = {"-3": pointer(rows=19), "+3": pointer()}  # one push on 19 rows: not measured
    lacking = curve(dose(2.0))  # the test ladder lacks the chosen rung (0.3)
    bare = curve(_without(dose(0.3), "pointers", "random_heads", "output_scale"))  # none run
    # the output scale alone not run (a digest made before it, a ranking without ID norms)
    unscaled = curve(_without(dose(0.3), "output_scale"))
    no_id = curve(_without(dose(0.3), "id"))
    no_ref = curve(dose(0.3, reference={}))
    return [
        (
            "following on 19 rows",
            good,
            curve(dose(0.3, pointers=few)),
            errors(diluted=0.9),
            "nudge-repairable",
        ),
        (
            "following on 19 rows",
            good,
            curve(dose(0.3, pointers=few)),
            errors(diffuse=0.9),
            "conflicting evidence",
        ),
        ("rung missing on test", good, lacking, errors(diluted=0.9), "nudge-repairable"),
        ("rung missing on test", good, lacking, errors(diffuse=0.9), "no attention effect"),
        ("controls not run", good, bare, errors(diluted=0.9), "nudge-repairable"),
        ("controls not run", good, bare, errors(diffuse=0.9), "conflicting evidence"),
        ("output scale not run", good, unscaled, errors(diluted=0.9), "nudge-repairable"),
        ("output scale not run", good, unscaled, errors(diffuse=0.9), "conflicting evidence"),
        ("ID not scored", good, no_id, errors(diluted=0.9), "nudge-repairable"),
        ("reference gain not read", good, no_ref, errors(diluted=0.9), "nudge-repairable"),
        ("no validation rung", curve(), good, errors(diffuse=0.9), "no attention effect"),
        ("eval not read", good, good, {"shares": {}, "instances": 0}, "no failure"),
        ("over-long answers", good, good, no_errors(wrong=5, over_long=5), "no failure"),
    ]


@pytest.mark.parametrize("case", _unmeasured_cases(), ids=lambda c: f"{c[0]}: {c[4]}")
def test_no_word_is_said_while_a_condition_it_means_was_not_measured(case):
    """Each word's `means` names conditions; here one of them was not measured (or too few
    rows measure it), and the word is not said: the reasons say what was not measured."""
    name, validation, test, diagnosis, word = case
    out = calibrated_verdict(validation, test, diagnosis)
    assert out["verdict"] != word, (name, out["reasons"])
    assert out["verdict"] == "inconclusive", (name, out["verdict"])
    said = " ".join(out["reasons"])
    assert "not measured" in said or "over-long" in said, (name, out["reasons"])


def test_over_long_answers_are_failures_with_no_wrong_row():
    """An over-long answer (the right one, then more) is wrong by the eval and has no wrong
    row: a model whose only failures are over-long is not told it does not fail, and where
    other answers are diagnosed the over-long ones are named beside the shares."""
    ladder = curve(dose(0.3))
    out = calibrated_verdict(ladder, ladder, no_errors(wrong=5, over_long=5))
    assert out["verdict"] == "inconclusive"
    assert "5 of 40 OOD test answers are wrong" in out["reasons"][0]
    assert "5 over-long" in out["reasons"][0]
    found = errors(diluted=0.9)
    found["answers"] = {"total": 40, "wrong": 22, "diagnosed": 17, "over_long": 5}
    out = calibrated_verdict(ladder, ladder, found)
    assert out["verdict"] == "nudge-repairable"
    assert any("5 of the 22 wrong OOD test answers have no wrong row" in r for r in out["reasons"])


def test_a_misdirected_lookup_says_only_what_was_read_of_the_pushes():
    """With no dose nothing was pushed: the reasons do not say that no push is followed."""
    flat = curve(dose(0.3, NONE))
    out = calibrated_verdict(flat, flat, errors(misdirected=0.9))
    assert out["verdict"] == "misdirected lookup"
    assert "not read" in out["reasons"][2] and "no shifted push" not in out["reasons"][2]
    few = curve(dose(0.3, pointers={"-3": pointer(rows=3), "+3": pointer()}))
    out = calibrated_verdict(curve(dose(0.3)), few, errors(misdirected=0.9))
    assert "ref-3" in out["reasons"][2] and "not measured" in out["reasons"][2]
    bare = curve(_without(dose(0.3), "pointers"))
    out = calibrated_verdict(curve(dose(0.3)), bare, errors(misdirected=0.9))
    assert "not measured" in out["reasons"][2]


def _split(**kinds):
    """Validation curves of each kind's own instances."""
    return {k: curve(*doses) for k, doses in kinds.items()}


def test_each_kind_of_a_mixed_failure_is_read_at_the_dose_it_chooses():
    """Dilution gains at C = 0.3 on its own validation instances; misdirection needs C = 1.
    The whole curve chooses C = 1, where the shifted pushes are followed: read there the
    diluted kind is inconclusive; read at its own dose it is nudge-repairable."""
    strong = {"gain": 0.8, "low": 0.7, "high": 0.9}
    followed = {"-3": pointer(follow=0.6), "+3": pointer(follow=0.5)}
    validation = curve(dose(0.3), dose(1.0, strong))
    test = curve(dose(0.3), dose(1.0, strong, pointers=followed))
    by_kind = _split(
        diluted=(dose(0.3), dose(1.0)),  # a tie: the smaller C
        misdirected=(dose(0.3, SMALL), dose(1.0, strong)),
    )
    found = errors(diluted=0.5, misdirected=0.5)
    out = calibrated_verdict(validation, test, found, by_kind)
    assert out["verdict"] == "mixed failure"
    readings = {m["kind"]: (m["verdict"], m["dose"]["C"]) for m in out["numbers"]["mixed"]}
    assert readings == {
        "diluted": ("nudge-repairable", 0.3),
        "misdirected": ("misdirected lookup", 1.0),
    }
    assert "diluted 0.50: nudge-repairable at C = 0.3" in out["reasons"][0]
    assert reading_rungs(validation, by_kind) == [(1.0, 0.0), (0.3, 0.0)]
    # not split: each kind at the whole curve's dose, and the reasons say so
    unsplit = calibrated_verdict(validation, test, found)
    readings = {m["kind"]: m["verdict"] for m in unsplit["numbers"]["mixed"]}
    assert readings["diluted"] == "inconclusive"
    assert "whole_curve_dose" in unsplit["numbers"]["exceptions"]
    # a kind's dose whose rung the test ladder lacks: not measured, not a reading
    out = calibrated_verdict(validation, curve(dose(1.0, strong)), found, by_kind)
    diluted = next(m for m in out["numbers"]["mixed"] if m["kind"] == "diluted")
    assert diluted["verdict"] == "inconclusive"
    assert "not measured" in diluted["reasons"][0]


def test_a_kind_without_validation_instances_of_its_own_takes_the_whole_curves_dose():
    validation = curve(dose(0.3))
    found = errors(diluted=0.5, on_reference=0.5)
    out = calibrated_verdict(validation, validation, found, _split(diluted=(dose(0.3),)))
    mixed = {m["kind"]: m for m in out["numbers"]["mixed"]}
    assert mixed["diluted"]["dose_from"] == "the diluted validation instances"
    assert mixed["on_reference"]["dose_from"] == "the whole validation curve"
    assert out["numbers"]["exceptions"] == ["whole_curve_dose"]


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
    """Through the calls `reproduce` makes (tests/calibration_models.py's `judge`: the
    ranking finding the offset by itself, the ladder of each count on OOD validation, N
    chosen, the chosen N's ladder with controls on OOD test, where the errors look), with
    the counts 1, 2 and 4: the verdict must not change with the counts a grid sweeps."""
    from tests.calibration_models import judge
    from tests.planted import build

    built = build(mechanism, shift)
    # A model with no lookup has no offset to find: the two-layer one's previous-token head
    # weighs the reference on row 0 only (its query is the separator, the key before it row
    # 0's reference) and ranks first at the reference on that alone; it is judged where it
    # was built to be read, as --shift 1 does. Every model with a lookup finds its offset.
    given = shift if mechanism == "no_lookup" and shift else None
    for counts in ((1,), (2,), (1, 2, 4)):
        out = judge(built, counts=counts, shift=given)
        assert out["offset"]["offset"] == shift, out["offset"]
        assert out["verdict"]["verdict"] == PLANTED[mechanism], (counts, out["verdict"])
