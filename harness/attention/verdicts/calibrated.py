"""The calibrated verdict: read from the dose-response curve and from where the model looks
when it errs, never from one chosen C.

    from harness.attention.verdicts.calibrated import calibrated_verdict
    out = calibrated_verdict(validation_curve, test_curve, diagnosis)
    out["verdict"]      # nudge-repairable, misdirected lookup, no lookup, downstream, ...
    out["reasons"]      # the conditions it rests on, or those that failed

The rule (docs/usage_analysis.md, "The calibrated verdict"; calibrated on the planted models
of tests/planted.py and on the calibration models of tests/calibration_models.py, which
behave like real ones: they keep writing after an error, slip to repeated characters, share
a lookup between two heads, rank a decoy first, read ref+1, fail in two ways at once):

0. The lookup is read where it reads (`harness.attention.heads.rank_lookup`: the offset of
   the ranking's profile where the top heads weigh most, unless --shift gives one); the
   ladder, the diagnosis and this verdict all use that offset. Where another offset's top
   heads weigh within OFFSET_MARGIN of the largest (a near tie, `heads.second_lookup`), the
   pipeline reads this verdict at both offsets and reports both; it never picks one.
1. How many of the ranked heads are pushed (N) is chosen on OOD validation, from the ladder
   of every N the grid sweeps (`choose_count`): the N whose best dose gains the most; counts
   whose gain lies inside the best one's interval tie with it, and a tie goes to the
   smallest N that holds every lookup head in distribution (`heads.lookup_heads`: ID weight
   at the offset at least half the top head's), so a redundant partner is pushed with its
   twin, never drawn as a random other head.
2. The dose is chosen on the OOD *validation* curve (`harness.attention.dose`): among the
   doses whose reference gain's interval lies above 0 and under which ID exact match holds
   (falls by at most ID_TOLERANCE), the one with the largest gain, the smallest on a tie.
   Every condition below is read on the *test* curve at that dose, never at another.
3. Where the model looks when it errs (`harness.attention.diagnosis`, OOD test, the first
   wrong row of each instance: later rows read the model's own wrong characters) gives each
   instance a kind, beside its null: the same reading on the rows the model gets right in
   distribution. A kind of lookup failure (diluted, misdirected, elsewhere, diffuse) counts
   only where its share exceeds its null share by NULL_EXCESS (`null_shares`,
   `exceeds_null`); on reference always counts (correct ID rows pass its test by
   construction). Every kind that counts holding NAMED of the instances or more is named:
   - two kinds or more: *mixed failure*, each kind with its share and its own reading
     below (the report adds the share of OOD answers the dose repairs free-running); when
     every named kind reads the same verdict (diluted and diffuse errors no dose helps:
     *no attention effect*), that verdict, each kind named with its share;
   - one kind, holding MOSTLY or more, is read:
     - on the reference: *downstream* (the heads look there as much as where the model
       works, and it still writes wrong; a push that gains supplies the answer);
     - misdirected (the keys that would give what the model wrote hold the heads):
       *misdirected lookup*, saying whether the shifted pushes at the dose are followed;
     - diluted (the reference still leads, weaker than in distribution): *nudge-repairable*
       when at the dose the reference push gains (interval above 0), no shifted push is
       followed (following gain under POINTER_EXCESS), each gains less than the reference
       push (its interval's top under the reference gain's bottom), random other heads
       gain less (their best draw under that bottom; with no head left outside the N
       pushed, N = all heads, the shifted pushes are the control) and ID holds; otherwise
       *inconclusive*, naming each condition that failed;
     - diffuse (nothing stands out): *no lookup* when a shifted push is followed at the
       dose; *conflicting evidence* when instead every repair condition holds there (the
       errors say no lookup, the dose says a repairable lookup: both are named); otherwise
       *inconclusive*;
     - elsewhere (a wrong key holds the heads but its result is not written): *inconclusive*;
   - no kind that counts holding MOSTLY (or none counting): *inconclusive*.
4. With no dose that gains on validation, a diluted or diffuse failure is *no attention
   effect* (the diagnosis then reads the lookup heads in distribution); with no errors to
   look at out of distribution, *no failure*.

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

from harness.attention.controls import at_dose, ladder_readings
from harness.attention.evidence import finite, followed
from harness.attention.verdicts.vocabulary import (
    CALIBRATED,
    CONFLICTING_EVIDENCE,
    DOWNSTREAM,
    ID_TOLERANCE,
    INCONCLUSIVE,
    MIN_POINTER_ROWS,
    MISDIRECTED_LOOKUP,
    MIXED_FAILURE,
    MOSTLY,
    NAMED,
    NO_ATTENTION_EFFECT,
    NO_FAILURE,
    NO_LOOKUP,
    NUDGE_REPAIRABLE,
    NULL_EXCESS,
    POINTER_EXCESS,
)
from harness.foundation.stats import above_zero

VERDICTS = tuple(CALIBRATED)  # the words it may say (`vocabulary.CALIBRATED`: what each means)
KIND_WORDS = {
    "on_reference": "on reference",
    "diluted": "diluted",
    "misdirected": "misdirected",
    "elsewhere": "elsewhere",
    "diffuse": "diffuse",
}


def id_holds(curve: Mapping[str, Any], dose: Mapping[str, Any]) -> bool | None:
    """ID exact match under the dose within ID_TOLERANCE of the baseline's (None: not
    measured)."""
    base = (curve.get("baseline") or {}).get("id")
    at = dose.get("id")
    if not base or not at or base.get("tf_exact") is None or at.get("tf_exact") is None:
        return None
    return at["tf_exact"] >= base["tf_exact"] - ID_TOLERANCE


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


def reading_rungs(validation: Mapping[str, Any]) -> list[tuple[float, float]]:
    """The rungs where the calibrated verdict reads the controls, from the validation curve
    alone (it is chosen before the test stream is scored): the dose chosen on it
    (`choose_dose`) and the ladder's top rung (the controls reported there). Each as
    (strength, threshold), threshold 0.0 outside a threshold mode. Why: the random draws and
    shifted pushes at every rung were about three quarters of the test ladder's settings, and
    the verdict reads none of the others (issue 45)."""

    def rung(entry) -> tuple[float, float]:
        return (float(entry["strength"]), float(entry.get("threshold") or 0.0))

    doses = validation.get("doses") or []
    if not doses:
        raise ValueError("reading_rungs needs a validation curve with doses")
    chosen = choose_dose(validation)
    picked = [rung(chosen)] if chosen else []
    top = max(doses, key=lambda e: (e.get("threshold") or 0.0, e["strength"]))
    return list(dict.fromkeys([*picked, rung(top)]))


def choose_count(
    curves: Mapping[int, Mapping[str, Any]], lookup: int = 0
) -> tuple[int, dict[str, Any]]:
    """Rule 0: how many of the ranked heads the ladder pushes, chosen on the OOD validation
    curves of each count n (`{n: curve}`): the n whose chosen dose (`choose_dose`) gains the
    most. Counts whose gain lies inside that best gain's interval tie with it; among them the
    smallest n that holds every lookup head in distribution (`lookup`: how many of the top
    ranked heads that takes; `harness.attention.heads.lookup_heads`), so that a redundant
    partner is pushed with its twin and never drawn as a "random other head"; the smallest
    tied n when none holds them all. When no n has a dose that qualifies, the smallest n
    that holds the lookup heads (the largest n when none does). Returns (n, {n: the chosen
    dose's C, threshold, gain and interval, or None})."""
    if not curves:
        raise ValueError("choose_count needs at least one curve")
    if lookup < 0:
        raise ValueError(f"lookup must be >= 0, got {lookup}")
    chosen = {int(n): choose_dose(curve) for n, curve in curves.items()}
    summary = {
        n: None
        if dose is None
        else {
            "C": dose["strength"],
            "threshold": dose.get("threshold"),
            "gain": dose["reference"]["gain"],
            "low": dose["reference"].get("low"),
            "high": dose["reference"].get("high"),
        }
        for n, dose in sorted(chosen.items())
    }
    gaining = {n: d for n, d in summary.items() if d is not None}
    counts = sorted(summary)
    if not gaining:
        holding = [n for n in counts if n >= lookup]
        return (holding[0] if holding else counts[-1]), summary
    best = max(gaining, key=lambda n: (round(gaining[n]["gain"], 12), -n))
    floor = gaining[best]["low"] if finite(gaining[best].get("low")) else gaining[best]["gain"]
    tied = sorted(n for n, d in gaining.items() if d["gain"] >= floor)
    holding = [n for n in tied if n >= lookup]
    return (holding[0] if holding else tied[0]), summary


def control_numbers(at: Mapping[str, Any] | None, top: Mapping[str, Any] | None) -> dict[str, Any]:
    """The numbers every ladder control of the registry declares (`Reading`), read from the
    test curve's entry at the chosen dose (`at`) and at the top dose (`top`, reported only:
    no condition is read there)."""
    entries = {"chosen": at, "top": top}
    return {
        reading.name: reading.read(entries[where])
        for where in ("chosen", "top")
        for reading in ladder_readings()
        if reading.at == where
    }


def _at(curve: Mapping[str, Any], chosen: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for dose in curve.get("doses", []):
        if dose["strength"] == chosen["strength"] and dose.get("threshold") == chosen.get(
            "threshold"
        ):
            return dose
    return None


def _shares(diagnosis: Mapping[str, Any]) -> dict[str, float]:
    return {k: v for k, v in (diagnosis.get("shares") or {}).items() if v is not None}


def _share_text(shares: Mapping[str, float]) -> str:
    return ", ".join(f"{KIND_WORDS.get(k, k)} {v:.2f}" for k, v in shares.items() if v)


def null_shares(diagnosis: Mapping[str, Any]) -> dict[str, float]:
    """Each kind's null share: the same classification, with the same heads and levels, on
    the rows the model gets right in distribution (`diagnosis.where_errors_look`'s
    `null["id"]`); empty for a diagnosis made without them (every kind then counts)."""
    null = ((diagnosis.get("null") or {}).get("id") or {}).get("shares") or {}
    return {k: v for k, v in null.items() if v is not None}


def exceeds_null(kind: str, share: float, nulls: Mapping[str, float]) -> bool:
    """Whether a kind of error is present: a lookup failure only where its share exceeds its
    null share by NULL_EXCESS; on reference always (its null is the calibration of the
    on-reference test itself: correct ID rows pass it by construction)."""
    excess = round(share - nulls.get(kind, 0.0), 12)  # exactly NULL_EXCESS above counts
    return kind == "on_reference" or kind not in nulls or excess >= NULL_EXCESS


def _no_random_heads(curve: Mapping[str, Any]) -> bool:
    """True when no head outside the N pushed is left to draw from (N = all heads, or every
    other head looks up in distribution)."""
    drawn = curve.get("random_draws") or {}
    return drawn.get("available") == 0


def repair_conditions(curve: Mapping[str, Any], dose: Mapping[str, Any]) -> list[str]:
    """What keeps a gain at `dose` (on the test curve) from being a nudge repair: [] when
    every control at the same dose says the reference itself matters. With no head left to
    draw random heads from, the shifted pushes are the control (they must gain less and not
    be followed, as always)."""
    failed = []
    reference = dose.get("reference") or {}
    if not above_zero(reference):
        failed.append("the reference push does not gain on test (interval)")
    pushes = at_dose(dose, "pointer")
    for k, excess in followed(pushes).items():
        failed.append(f"the push at ref{k} is followed ({excess:+.2f})")
    low = reference.get("low", math.nan)
    for k, pointer in (pushes or {}).items():
        high = (pointer.get("gain") or {}).get("high", math.nan)
        if not (finite(high) and finite(low) and high < low):
            failed.append(f"the push at ref{k} gains about as much as at the reference")
    if not pushes:
        failed.append("no shifted push was measured")
    best = (at_dose(dose, "other_heads") or {}).get("max")
    if best is None:
        if not _no_random_heads(curve):
            failed.append("random other heads were not measured")
    elif not (finite(low) and best < low):
        failed.append(f"random other heads gain as much ({best:+.3f})")
    holds = id_holds(curve, dose)
    if holds is None:
        failed.append("ID exact match under the dose was not measured")
    elif not holds:
        base = curve["baseline"]["id"]["tf_exact"]
        failed.append(f"ID exact match falls {base:.3f} -> {dose['id']['tf_exact']:.3f}")
    return failed


def _gain(gain: Mapping[str, Any]) -> str:
    return f"{gain['gain']:+.3f} [{gain['low']:+.3f}, {gain['high']:+.3f}]"


def read_kind(
    kind: str,
    test: Mapping[str, Any],
    chosen: Mapping[str, Any] | None,
    at: Mapping[str, Any] | None,
) -> tuple[str, list[str]]:
    """What one kind of error says, read with the dose evidence at the chosen dose: (the
    verdict it supports, the reasons). Every condition is read at that dose."""
    dose_text = f"at C = {chosen['strength']:g} (chosen on validation)" if chosen else ""
    pushes = followed(at_dose(at, "pointer")) if at else {}
    pushed = ", ".join(f"ref{k}" for k in pushes)
    if kind == "on_reference":
        reasons = [
            "the heads look at the reference as much as where the model works, and it still "
            "writes wrong: the failure is downstream of the lookup"
        ]
        if at is not None and above_zero(at.get("reference")):
            reasons.append(
                f"{dose_text} a push gains {_gain(at['reference'])}: it supplies the answer, "
                "it does not locate the failure"
            )
        return DOWNSTREAM, reasons
    if kind == "misdirected":
        note = (
            f"the shifted pushes {dose_text} are followed ({pushed}): a push supplies the position"
            if pushes
            else f"no shifted push {dose_text or 'at any dose'} is followed"
        )
        return MISDIRECTED_LOOKUP, [
            "the keys that would give what the model wrote hold the heads: the lookup finds "
            "the wrong key and the model computes on it",
            note,
        ]
    if kind == "elsewhere":
        return INCONCLUSIVE, [
            "one wrong key holds the heads, but the model does not write what the task gives "
            "there: these heads' lookup does not decide the answer"
        ]
    if chosen is None or at is None:
        what = "a diluted lookup" if kind == "diluted" else "no key stands out"
        return NO_ATTENTION_EFFECT, [f"{what}; no dose gains on validation with ID holding"]
    failed = repair_conditions(test, at)
    if kind == "diluted":
        if failed:
            return INCONCLUSIVE, ["a diluted lookup, but " + failed[0], *failed[1:]]
        return NUDGE_REPAIRABLE, [
            "the reference still leads, weaker than in distribution",
            f"{dose_text} the reference push gains {_gain(at['reference'])}; no shifted push "
            "is followed and each gains less; "
            + (
                "random other heads gain less"
                if not _no_random_heads(test)
                else "no head is left outside the N pushed to draw random heads from "
                "(the shifted pushes are the control)"
            )
            + "; ID holds",
        ]
    # diffuse
    if pushes:
        return NO_LOOKUP, [
            "no key stands out",
            f"{dose_text} the shifted pushes are followed ({pushed}): a push anywhere is "
            "followed as much as at the reference",
        ]
    if not failed:
        return CONFLICTING_EVIDENCE, [
            "the errors say no lookup (no key stands out)",
            f"but {dose_text} the reference push gains {_gain(at['reference'])}, no shifted "
            "push is followed and each gains less, random other heads gain less and ID "
            "holds: the dose evidence says a repairable lookup",
        ]
    return INCONCLUSIVE, [f"no key stands out, but no shifted push {dose_text} is followed"]


def calibrated_verdict(
    validation: Mapping[str, Any], test: Mapping[str, Any], diagnosis: Mapping[str, Any]
) -> dict[str, Any]:
    """The verdict of the module docstring, with its reasons and the numbers it read."""
    chosen = choose_dose(validation)
    at = _at(test, chosen) if chosen else None
    shares = _shares(diagnosis)
    # a kind of lookup failure counts only above its null (the same reading on correct rows)
    nulls = null_shares(diagnosis)
    present = {k: v for k, v in shares.items() if v and exceeds_null(k, v, nulls)}
    named = {k: v for k, v in sorted(present.items(), key=lambda kv: -kv[1]) if v >= NAMED}
    numbers = {
        "dose": None
        if chosen is None
        else {"C": chosen["strength"], "threshold": chosen.get("threshold")},
        "reference_gain": at.get("reference") if at else None,
        # what each ladder control declares the verdict reads (`controls.Reading`): at the
        # chosen dose, and for the reader at the top dose
        **control_numbers(at, (test.get("doses") or [None])[-1]),
        "errors": shares,
        "null": nulls,
        "kinds": named,
        # whether the dominant kind changes with the heads read (top 1, top 4, N)
        "kind_changes": diagnosis.get("kind_changes"),
        "error_instances": diagnosis.get("instances"),
        "basis": diagnosis.get("basis"),
        "shift": diagnosis.get("shift"),
        "rule": {
            "mostly": MOSTLY,
            "named": NAMED,
            "null_excess": NULL_EXCESS,
            "pointer_excess": POINTER_EXCESS,
            "min_pointer_rows": MIN_POINTER_ROWS,
            "id_tolerance": ID_TOLERANCE,
        },
    }

    def out(verdict: str, reasons: list[str], **extra) -> dict[str, Any]:
        return {"verdict": verdict, "reasons": reasons, "numbers": numbers | extra}

    if not shares or not diagnosis.get("instances"):
        return out(NO_FAILURE, ["no OOD test answer has a wrong token to look at"])
    basis = diagnosis.get("basis") or "every wrong row"
    where = f"errors ({basis}): {_share_text(shares)} (over {diagnosis['instances']} instances)"
    if nulls:
        where += f"; on the correct ID rows: {_share_text(nulls)}"
    readings = {k: read_kind(k, test, chosen, at) for k in named}
    words = {readings[k][0] for k in named}
    if len(named) >= 2 and len(words) == 1 and MIXED_FAILURE not in words:
        # kinds that read alike (a diluted and a diffuse failure no dose helps): one verdict,
        # every kind named with its share
        (word,) = words
        parts = [f"{KIND_WORDS[k]} {v:.2f}" for k, v in named.items()]
        reasons = [f"{where}: {' and '.join(parts)} both read {word}"]
        for k in named:
            reasons += [f"{KIND_WORDS[k]}: {r}" for r in readings[k][1]]
        return out(word, reasons)
    if len(named) >= 2:
        parts = [f"{KIND_WORDS[k]} {v:.2f}: {readings[k][0]}" for k, v in named.items()]
        reasons = [f"{where}: kinds holding a quarter or more: {'; '.join(parts)}"]
        for k in named:
            reasons += [f"{KIND_WORDS[k]}: {r}" for r in readings[k][1]]
        return out(
            MIXED_FAILURE,
            reasons,
            mixed=[{"kind": k, "share": v, "verdict": readings[k][0]} for k, v in named.items()],
        )
    if not present:
        return out(INCONCLUSIVE, [f"{where}: no kind of error exceeds its null by {NULL_EXCESS}"])
    top = max(present, key=lambda k: present[k])
    if present[top] < MOSTLY:
        return out(INCONCLUSIVE, [f"{where}: no kind of error holds half the instances"])
    verdict, reasons = readings.get(top) or read_kind(top, test, chosen, at)
    return out(verdict, [where, *reasons])
