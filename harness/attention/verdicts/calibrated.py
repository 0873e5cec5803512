"""The calibrated verdict: read from the dose-response curve and from where the model looks
when it errs, never from one chosen C.

    from harness.attention.verdicts.calibrated import calibrated_verdict
    out = calibrated_verdict(validation_curve, test_curve, diagnosis)
    out["verdict"]      # nudge-repairable, misdirected lookup, no lookup, downstream, ...
    out["reasons"]      # the conditions it rests on, or those that failed

The rule (docs/usage_analysis.md, "The calibrated verdict"; fixed before any measurement,
and calibrated on the planted models of tests/planted.py, whose mechanism is known):

0. How many of the ranked heads are pushed (N) is chosen on OOD validation too, from the
   ladder of every N the grid sweeps (`choose_count`): the N whose best dose gains the most.
   So neither N nor the dose depends on the grid's top C or on the setting it chose.
1. The dose is chosen on the OOD *validation* curve (`harness.attention.dose`): among the
   doses whose reference gain's interval lies above 0 and under which ID exact match holds
   (falls by at most ID_TOLERANCE), the one with the largest gain, the smallest on a tie.
   Everything below is read on the *test* curve, at that dose.
2. Where the model looks when it errs (`harness.attention.diagnosis`, OOD test) decides the
   kind of failure; "mostly" is a share of at least MOSTLY of the instances with an error:
   - *downstream*: mostly on the reference: the heads look there as much as where the
     model works, and it still writes wrong. The failure is not in where it looks,
     whatever a push does (a push that gains then supplies the answer).
   - *misdirected lookup*: mostly misdirected: one wrong key holds the heads and the model
     writes the task's result on it. The lookup finds the wrong key; the rest of the model
     computes correctly on whatever it is pointed at, and a push helps by supplying the
     position (the report says whether the pushes at the chosen dose are followed).
   - *nudge-repairable*: mostly diluted (the reference still leads, weaker than in
     distribution), and at the chosen dose on test: the reference push gains (interval
     above 0), no shifted push is followed (following gain under POINTER_EXCESS), each
     gains less than the reference push (its interval's top under the reference gain's
     bottom), random other heads gain less (their best draw under the reference gain's
     bottom), and ID holds. Otherwise *inconclusive*, naming each condition that failed.
   - *no lookup*: mostly diffuse (nothing stands out, the reference not first), and at the
     ladder's top dose a shifted push is followed: any push anywhere is followed.
     Otherwise *inconclusive*.
   - mostly elsewhere (one wrong key holds the heads, but the model does not write its
     result: the ranked heads' lookup does not decide the answer), or no kind holds most
     errors (mixed): *inconclusive*.
3. With no dose that gains on validation, a diluted or diffuse failure is *no attention
   effect* (pushing the ranked heads does not help at any dose); and with no errors to look
   at out of distribution, *no failure*.

What it rules out and what it does not: the ladder's controls at the same dose rule out a
gain that any push anywhere would give (pointers), one that any heads would give (random
other heads) and one bought by breaking the task (ID). The diagnosis needs no push, so it
answers the objection that reinforcement needs the true pattern where it applies. Neither
says the ranked heads are the model's whole lookup, and a verdict on one model and seed
does not transfer to another: `reproduce --seeds K` reports each seed's and whether they
agree.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from harness.attention.verdicts.vocabulary import (
    CALIBRATED,
    DOWNSTREAM,
    ID_TOLERANCE,
    INCONCLUSIVE,
    MIN_POINTER_ROWS,
    MISDIRECTED_LOOKUP,
    MOSTLY,
    NO_ATTENTION_EFFECT,
    NO_FAILURE,
    NO_LOOKUP,
    NUDGE_REPAIRABLE,
    POINTER_EXCESS,
)
from harness.foundation.stats import above_zero

VERDICTS = tuple(CALIBRATED)  # the words it may say (`vocabulary.CALIBRATED`: what each means)


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def id_holds(curve: Mapping[str, Any], dose: Mapping[str, Any]) -> bool | None:
    """ID exact match under the dose within ID_TOLERANCE of the baseline's (None: not
    measured)."""
    base = (curve.get("baseline") or {}).get("id")
    at = dose.get("id")
    if not base or not at or base.get("tf_exact") is None or at.get("tf_exact") is None:
        return None
    return at["tf_exact"] >= base["tf_exact"] - ID_TOLERANCE


def followed(dose: Mapping[str, Any]) -> dict[str, float]:
    """{pointer shift: following gain} of the shifted pushes the model follows at a dose."""
    out = {}
    for k, pointer in (dose.get("pointers") or {}).items():
        follow = pointer.get("following") or {}
        gain = (follow.get("gain") or {}).get("gain")
        if follow.get("rows", 0) >= MIN_POINTER_ROWS and _finite(gain) and gain >= POINTER_EXCESS:
            out[k] = gain
    return out


def choose_dose(validation: Mapping[str, Any]) -> dict[str, Any] | None:
    """The validation curve's dose (rule 1): the largest reference gain whose interval is
    above 0 and under which ID holds; the smallest C on a tie. None when no dose qualifies."""
    best = None
    for dose in validation.get("doses", []):
        if not above_zero(dose.get("reference")) or id_holds(validation, dose) is False:
            continue
        key = (round(dose["reference"]["gain"], 12), -dose["strength"])
        if best is None or key > best[0]:
            best = (key, dose)
    return best[1] if best else None


def choose_count(curves: Mapping[int, Mapping[str, Any]]) -> tuple[int, dict[str, Any]]:
    """Rule 0: how many of the ranked heads the ladder pushes, chosen on the OOD validation
    curves of each count n (`{n: curve}`): the n whose chosen dose (`choose_dose`) gains the
    most, the smaller n on a tie. When no n has a dose that qualifies, the largest n: the
    strongest push that still does not help, and the strictest test of whether shifted
    pushes are followed. Returns (n, {n: the chosen dose's C and gain, or None})."""
    if not curves:
        raise ValueError("choose_count needs at least one curve")
    chosen = {int(n): choose_dose(curve) for n, curve in curves.items()}
    summary = {
        n: None
        if dose is None
        else {
            "C": dose["strength"],
            "threshold": dose.get("threshold"),
            "gain": dose["reference"]["gain"],
        }
        for n, dose in sorted(chosen.items())
    }
    gaining = [(round(d["gain"], 12), -n) for n, d in summary.items() if d is not None]
    n = -max(gaining)[1] if gaining else max(summary)
    return n, summary


def _at(curve: Mapping[str, Any], chosen: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for dose in curve.get("doses", []):
        if dose["strength"] == chosen["strength"] and dose.get("threshold") == chosen.get(
            "threshold"
        ):
            return dose
    return None


def _kind(diagnosis: Mapping[str, Any]) -> tuple[str | None, dict[str, float]]:
    shares = {k: v for k, v in (diagnosis.get("shares") or {}).items() if v is not None}
    if not shares:
        return None, shares
    kind = max(shares, key=lambda k: shares[k])
    return (kind if shares[kind] >= MOSTLY else "mixed"), shares


def _share_text(shares: Mapping[str, float]) -> str:
    return ", ".join(f"{k.replace('_', ' ')} {v:.2f}" for k, v in shares.items() if v)


def repair_conditions(curve: Mapping[str, Any], dose: Mapping[str, Any]) -> list[str]:
    """What keeps a gain at `dose` (on the test curve) from being a nudge repair: [] when
    every control at the same dose says the reference itself matters."""
    failed = []
    reference = dose.get("reference") or {}
    if not above_zero(reference):
        failed.append("the reference push does not gain on test (interval)")
    for k, excess in followed(dose).items():
        failed.append(f"the push at ref{k} is followed ({excess:+.2f})")
    low = reference.get("low", math.nan)
    for k, pointer in (dose.get("pointers") or {}).items():
        high = (pointer.get("gain") or {}).get("high", math.nan)
        if not (_finite(high) and _finite(low) and high < low):
            failed.append(f"the push at ref{k} gains about as much as at the reference")
    best = (dose.get("random_heads") or {}).get("max")
    if best is None:
        failed.append("random other heads were not measured")
    elif not (_finite(low) and best < low):
        failed.append(f"random other heads gain as much ({best:+.3f})")
    holds = id_holds(curve, dose)
    if holds is None:
        failed.append("ID exact match under the dose was not measured")
    elif not holds:
        base = curve["baseline"]["id"]["tf_exact"]
        failed.append(f"ID exact match falls {base:.3f} -> {dose['id']['tf_exact']:.3f}")
    return failed


def calibrated_verdict(
    validation: Mapping[str, Any], test: Mapping[str, Any], diagnosis: Mapping[str, Any]
) -> dict[str, Any]:
    """The verdict of the module docstring, with its reasons and the numbers it read."""
    chosen = choose_dose(validation)
    at = _at(test, chosen) if chosen else None
    kind, shares = _kind(diagnosis)
    top = (test.get("doses") or [None])[-1]
    numbers = {
        "dose": None
        if chosen is None
        else {"C": chosen["strength"], "threshold": chosen.get("threshold")},
        "reference_gain": at.get("reference") if at else None,
        "followed": followed(at) if at else {},
        "random_heads_max": (at.get("random_heads") or {}).get("max") if at else None,
        "followed_at_top": followed(top) if top else {},
        "errors": shares,
        "error_instances": diagnosis.get("instances"),
        "rule": {
            "mostly": MOSTLY,
            "pointer_excess": POINTER_EXCESS,
            "min_pointer_rows": MIN_POINTER_ROWS,
            "id_tolerance": ID_TOLERANCE,
        },
    }

    def out(verdict: str, reasons: list[str]) -> dict[str, Any]:
        return {"verdict": verdict, "reasons": reasons, "numbers": numbers}

    if kind is None or not diagnosis.get("instances"):
        return out(NO_FAILURE, ["no OOD test answer has a wrong token to look at"])
    where = f"errors: {_share_text(shares)} (over {diagnosis['instances']} instances)"
    dose_text = f"at C = {chosen['strength']:g} (chosen on validation)" if chosen else "at no dose"
    if kind == "on_reference":
        return out(
            DOWNSTREAM,
            [
                f"{where}: the heads look at the reference as much as where the model works, "
                "and it still writes wrong"
            ],
        )
    if kind == "misdirected":
        pushes = followed(at) if at else {}
        note = (
            f"the pushes {dose_text} are followed ({', '.join(f'ref{k}' for k in pushes)}): "
            "a push supplies the position"
            if pushes
            else f"no shifted push {dose_text} is followed"
        )
        return out(
            MISDIRECTED_LOOKUP,
            [f"{where}: one wrong key holds the heads and the model writes its result", note],
        )
    if kind == "mixed":
        return out(INCONCLUSIVE, [f"{where}: no kind of error holds half the instances"])
    if kind == "elsewhere":
        return out(
            INCONCLUSIVE,
            [
                f"{where}: one wrong key holds the heads, but the model does not write what "
                "the task gives there: these heads' lookup does not decide the answer"
            ],
        )
    if chosen is None:
        return out(
            NO_ATTENTION_EFFECT,
            [f"{where}; no dose gains on validation with ID holding"],
        )
    if kind == "diluted":
        failed = repair_conditions(test, at) if at else ["the chosen dose is not on test"]
        if failed:
            return out(INCONCLUSIVE, [f"{where} (a diluted lookup)", *failed])
        return out(
            NUDGE_REPAIRABLE,
            [
                f"{where}: the reference still leads, weaker than in distribution",
                f"{dose_text} the reference push gains {_gain(at['reference'])}; no shifted "
                "push is followed and each gains less; random other heads gain less; ID holds",
            ],
        )
    # diffuse
    if followed(top):
        return out(
            NO_LOOKUP,
            [
                f"{where}: no key stands out",
                f"at C = {top['strength']:g} the shifted pushes are followed "
                f"({', '.join(f'ref{k}' for k in followed(top))}): any push is followed",
            ],
        )
    return out(
        INCONCLUSIVE,
        [f"{where}: no key stands out", "but no shifted push is followed, even at the top dose"],
    )


def _gain(gain: Mapping[str, Any]) -> str:
    return f"{gain['gain']:+.3f} [{gain['low']:+.3f}, {gain['high']:+.3f}]"
