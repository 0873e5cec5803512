"""The calibrated verdict: read from the dose-response curve and from where the model looks
when it errs, never from one chosen C.

    from harness.attention.verdicts.calibrated import calibrated_verdict
    out = calibrated_verdict(validation_curve, test_curve, diagnosis, lookup.evidence)
    out["verdict"]      # nudge-repairable, misdirected lookup, no lookup, downstream, ...
    out["reasons"]      # the conditions it rests on, or those that failed

The rule (docs/usage_analysis.md, "The calibrated verdict"; calibrated on the planted models
of tests/planted.py and on the calibration models of tests/calibration_models.py, which
behave like real ones: they keep writing after an error, slip to repeated characters, share
a lookup between two heads, rank a decoy first, read ref+1, fail in two ways at once):

G. A lookup exists before it is judged (`harness.attention.verdicts.exists`): the model
   works in distribution (the ladder's baseline ID exact match at least ID_WORKS) and a
   head at the offset beats its null (`harness.attention.lookup.Lookup.evidence`: ID level
   NULL_MARGIN of the way above attention spread evenly over the same keys). Otherwise
   *no lookup*, whatever the errors and the dose say: no lookup is there to fail.
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
   Every condition below is read on the *test* curve at that dose, never at another, and
   each must be *measured* there (NOT_MEASURED): a rung the test curve lacks, a control not
   run at it, ID not scored, or a shifted push whose following rests on fewer than
   MIN_POINTER_ROWS rows leaves its condition unmeasured, and no word whose `means` names
   that condition is said (*inconclusive*, the reasons naming what was not measured).
3. Where the model looks when it errs (`harness.attention.diagnosis`, OOD test, the first
   wrong row of each instance: later rows read the model's own wrong characters) gives each
   instance a kind, beside its null: the same reading on the rows the model gets right in
   distribution. A kind of lookup failure (diluted, misdirected, elsewhere, diffuse) counts
   only where its share exceeds its null share by NULL_EXCESS (`null_shares`,
   `exceeds_null`); on reference always counts (correct ID rows pass its test by
   construction). Every kind that counts holding NAMED of the instances or more is named:
   - two kinds or more: *mixed failure*, each kind with its share and its own reading
     below, at the dose *that kind* chooses (rule 2) on the OOD validation curve of its own
     instances (`by_kind`: the validation stream split by the kind of each instance's first
     wrong row; the test ladder's controls run at every such dose, `reading_rungs`); a kind
     with no validation instance of its own is read at the whole curve's dose and says so
     (WHOLE_CURVE_DOSE). The report adds the share of OOD answers the dose repairs
     free-running. When every named kind reads the same verdict (diluted and diffuse errors
     no dose helps: *no attention effect*), that verdict, each kind named (ALIKE_KINDS);
   - one kind, holding MOSTLY or more, is read:
     - on the reference: *downstream* (the heads look there as much as where the model
       works, and it still writes wrong; a push that gains supplies the answer);
     - misdirected (the keys that would give what the model wrote hold the heads):
       *misdirected lookup*, saying whether the shifted pushes at the dose are followed
       where that was measured (and that it was not read, with no dose);
     - diluted (the reference still leads, weaker than in distribution): *nudge-repairable*
       when at the dose the reference push gains (interval above 0), no shifted push (at
       ref-3, -2, -1, +1, +2 and +3: a neighbour of the reference may carry what it does, as
       the carry's digits at ref-1 on addition) is followed (following gain under
       POINTER_EXCESS), each gains less than the reference push (its interval's top under
       the reference gain's bottom; each shift named where it does not), random other heads
       gain less (their best draw under that bottom; with no head left outside the N
       pushed, N = all heads, the shifted pushes are the control: NO_RANDOM_HEADS), the
       output-scale control gains less (the N heads' pattern left as it is and each head's
       output rescaled to its ID norm, `controls/output_scale.py`: its gain under that
       bottom; a push that gives the reference its weight back also gives a shrunken output
       its length back, and a gain the rescale gives as well does not say the weight was
       missing) and ID holds, each measured; otherwise *inconclusive*, naming each condition
       that failed or was not measured;
     - diffuse (nothing stands out): *no lookup* when a shifted push is followed at the
       dose; *conflicting evidence* when instead every repair condition holds there (the
       errors say no lookup, the dose says a repairable lookup: both are named); otherwise
       *inconclusive*;
     - elsewhere (a wrong key holds the heads but its result is not written): *inconclusive*;
   - no kind that counts holding MOSTLY (or none counting): *inconclusive*.
4. With no dose that gains on validation (a ladder with rungs), a diluted or diffuse
   failure is *no attention effect* (the diagnosis then reads the lookup heads in
   distribution). *no failure* only when the eval says no OOD test answer is wrong
   (`diagnosis["answers"]`, over-long answers counted: the right answer and then more is
   wrong with no wrong row); answers wrong with no wrong row to look at are *inconclusive*,
   naming them; unread answers are not measured.

The exceptions the rule makes (NO_RANDOM_HEADS, ALIKE_KINDS, WHOLE_CURVE_DOSE) are said once,
in `vocabulary.EXCEPTIONS`; each word's `means` carries those it can be said under
(`vocabulary.EXCEPTIONS_OF`), and the verdict lists those it took (`numbers["exceptions"]`).

What it rules out and what it does not: the ladder's controls at the same dose rule out a
gain that any push anywhere would give (pointers, next to the reference as well as three keys
away), one that any heads would give (random other heads), one that restoring the heads'
output length alone would give (output scale) and one bought by breaking the task (ID). The
diagnosis needs no push, so it
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
from harness.attention.verdicts.exists import lookup_gate
from harness.attention.verdicts.vocabulary import (
    ALIKE_KINDS,
    CALIBRATED,
    CONFLICTING_EVIDENCE,
    DOWNSTREAM,
    EXCEPTIONS,
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
    NO_RANDOM_HEADS,
    NOT_MEASURED,
    NUDGE_REPAIRABLE,
    NULL_EXCESS,
    POINTER_EXCESS,
    WHOLE_CURVE_DOSE,
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


def reading_rungs(
    validation: Mapping[str, Any], by_kind: Mapping[str, Mapping[str, Any]] | None = None
) -> list[tuple[float, float]]:
    """The rungs where the calibrated verdict reads the controls, from the validation curves
    alone (they are chosen before the test stream is scored): the dose chosen on the whole
    curve (`choose_dose`), the dose each kind chooses on its own validation instances
    (`by_kind`: {kind: curve}; each kind of a mixed failure is read at its own,
    `kind_doses`) and the ladder's top rung (the controls reported there). Each as
    (strength, threshold), threshold 0.0 outside a threshold mode. Why not every rung: the
    random draws and shifted pushes at every rung were about three quarters of the test
    ladder's settings, and the verdict reads none of the others."""

    def rung(entry) -> tuple[float, float]:
        return (float(entry["strength"]), float(entry.get("threshold") or 0.0))

    doses = validation.get("doses") or []
    if not doses:
        raise ValueError("reading_rungs needs a validation curve with doses")
    chosen = [choose_dose(validation)]
    chosen += [choose_dose(c) for _, c in sorted((by_kind or {}).items()) if c.get("doses")]
    picked = [rung(c) for c in chosen if c]
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


def unmeasured_pushes(pushes: Mapping[str, Any] | None) -> dict[str, int]:
    """{pointer shift: rows} of the shifted pushes whose following cannot be read: fewer than
    MIN_POINTER_ROWS rows where the displaced answer differs from the gold one, or no
    following gain at all (`evidence.followed` counts such a push as not followed; the
    verdict counts it as not measured)."""
    out = {}
    for k, pointer in (pushes or {}).items():
        follow = pointer.get("following") or {}
        rows = int(follow.get("rows") or 0)
        if rows < MIN_POINTER_ROWS or not finite((follow.get("gain") or {}).get("gain")):
            out[k] = rows
    return out


def repair_conditions(curve: Mapping[str, Any], dose: Mapping[str, Any]) -> list[str]:
    """What keeps a gain at `dose` (on the test curve) from being a nudge repair: [] when
    every control at the same dose says the reference itself matters, each measured there.
    A condition whose numbers are absent or too few is named "not measured" (`NOT_MEASURED`),
    never counted as holding. With no head left to draw random heads from, the shifted
    pushes are the control (they must gain less and not be followed, as always)."""
    failed = []
    reference = dose.get("reference") or {}
    if not reference or not finite(reference.get("low")):
        failed.append(f"the reference push's gain on test was {NOT_MEASURED}")
    elif not above_zero(reference):
        failed.append("the reference push does not gain on test (interval)")
    pushes = at_dose(dose, "pointer")
    unread = unmeasured_pushes(pushes)
    for k, rows in unread.items():
        failed.append(
            f"whether the push at ref{k} is followed was {NOT_MEASURED} ({rows} rows where it "
            f"points at another answer, under {MIN_POINTER_ROWS})"
        )
    for k, excess in followed(pushes).items():
        failed.append(f"the push at ref{k} is followed ({excess:+.2f})")
    low = reference.get("low", math.nan)
    for k, pointer in (pushes or {}).items():
        high = (pointer.get("gain") or {}).get("high", math.nan)
        if not finite(high):
            failed.append(f"the gain of the push at ref{k} was {NOT_MEASURED}")
        elif not (finite(low) and high < low):
            failed.append(f"the push at ref{k} gains about as much as at the reference")
    if not pushes:
        failed.append(f"the shifted pushes were {NOT_MEASURED} at this dose")
    best = (at_dose(dose, "other_heads") or {}).get("max")
    if best is None:
        if not _no_random_heads(curve):
            failed.append(f"random other heads were {NOT_MEASURED} at this dose")
    elif not (finite(low) and best < low):
        failed.append(f"random other heads gain as much ({best:+.3f})")
    failed += _output_scale(dose, low)
    holds = id_holds(curve, dose)
    if holds is None:
        failed.append(f"ID exact match under the dose was {NOT_MEASURED}")
    elif not holds:
        base = curve["baseline"]["id"]["tf_exact"]
        failed.append(f"ID exact match falls {base:.3f} -> {dose['id']['tf_exact']:.3f}")
    return failed


def _output_scale(dose: Mapping[str, Any], low: float) -> list[str]:
    """The output-scale control at `dose`: the chosen heads' pattern left as it is, each
    head's output rescaled to its ID norm. The reference push must gain more: the rescale's
    gain under the reference gain's interval bottom (as the random heads' best draw), else
    a push may mend the output's shrunken length rather than the weight at the reference.
    Not run there (a ladder or digest without it, a ranking without ID norms): not
    measured."""
    rescaled = (at_dose(dose, "output_scale") or {}).get("gain") or {}
    if not finite(rescaled.get("gain")):
        return [
            f"the output-scale control (the heads' output rescaled to its ID norm, pattern "
            f"unchanged) was {NOT_MEASURED} at this dose"
        ]
    if not (finite(low) and rescaled["gain"] < low):
        return [
            f"rescaling the heads' output to its ID norm, pattern unchanged, gains as much "
            f"({rescaled['gain']:+.3f}): the push may restore the output's scale rather than "
            "the weight at the reference"
        ]
    return []


def _pushes(dose: Mapping[str, Any]) -> str:
    """The shifted pushes measured at a dose, named: "ref-3, ref-2, ..., ref+3"."""
    return ", ".join(f"ref{k}" for k in at_dose(dose, "pointer") or {})


def _gain(gain: Mapping[str, Any]) -> str:
    return f"{gain['gain']:+.3f} [{gain['low']:+.3f}, {gain['high']:+.3f}]"


def _dose_text(chosen: Mapping[str, Any], source: str = "") -> str:
    threshold = chosen.get("threshold")
    at = f"C = {chosen['strength']:g}" + (f", threshold {threshold:g}" if threshold else "")
    return f"at {at} (chosen on {source or 'validation'})"


def read_kind(
    kind: str,
    test: Mapping[str, Any],
    chosen: Mapping[str, Any] | None,
    at: Mapping[str, Any] | None,
    source: str = "",
) -> tuple[str, list[str]]:
    """What one kind of error says, read with the dose evidence at `chosen` (the dose chosen
    on validation; `source` says on which of its instances): (the verdict it supports, the
    reasons). Every condition is read at that dose on the test curve (`at`: its rung, None
    when the test curve lacks it); a condition not measured there is said so, never
    counted as holding or as failing."""
    if kind in ("on_reference", "misdirected", "elsewhere"):
        return _read_located(kind, chosen, at, source)
    if chosen is None:
        what = "a diluted lookup" if kind == "diluted" else "no key stands out"
        where = source or "validation"
        return NO_ATTENTION_EFFECT, [f"{what}; no dose gains on {where} with ID holding"]
    dose_text = _dose_text(chosen, source)
    if at is None:
        return INCONCLUSIVE, [
            f"the test curve has no rung {dose_text}: every condition there was {NOT_MEASURED}"
        ]
    failed = repair_conditions(test, at)
    if kind == "diluted":
        if failed:
            return INCONCLUSIVE, [f"a diluted lookup, but {dose_text} " + failed[0], *failed[1:]]
        return NUDGE_REPAIRABLE, [
            "the reference still leads, weaker than in distribution",
            f"{dose_text} the reference push gains {_gain(at['reference'])}; no shifted push "
            f"({_pushes(at)}) is followed (each on {MIN_POINTER_ROWS} rows or more) and each "
            "gains less; "
            + (
                "random other heads gain less"
                if not _no_random_heads(test)
                else EXCEPTIONS[NO_RANDOM_HEADS]
            )
            + "; the heads' output rescaled to its ID norm (pattern unchanged) gains less; "
            "ID holds",
        ]
    # diffuse
    pushes = followed(at_dose(at, "pointer"))
    if pushes:
        pushed = ", ".join(f"ref{k}" for k in pushes)
        return NO_LOOKUP, [
            "no key stands out",
            f"{dose_text} the shifted pushes are followed ({pushed}): a push anywhere is "
            "followed as much as at the reference",
        ]
    if not failed:
        return CONFLICTING_EVIDENCE, [
            "the errors say no lookup (no key stands out)",
            f"but {dose_text} the reference push gains {_gain(at['reference'])}, no shifted "
            "push is followed and each gains less, "
            + (
                "random other heads gain less"
                if not _no_random_heads(test)
                else EXCEPTIONS[NO_RANDOM_HEADS]
            )
            + ", the output rescaled to its ID norm gains less and ID holds: the dose evidence "
            "says a repairable lookup",
        ]
    return INCONCLUSIVE, [
        f"no key stands out, but {dose_text} no shifted push is seen followed (on "
        f"{MIN_POINTER_ROWS} rows or more) and not every condition of a repair holds",
        *failed,
    ]


def _read_located(
    kind: str, chosen: Mapping[str, Any] | None, at: Mapping[str, Any] | None, source: str
) -> tuple[str, list[str]]:
    """The kinds the diagnosis decides without a push (on the reference, misdirected,
    elsewhere); what the pushes at the dose did is added where it was measured."""
    if kind == "elsewhere":
        return INCONCLUSIVE, [
            "one wrong key holds the heads, but the model does not write what the task gives "
            "there: these heads' lookup does not decide the answer"
        ]
    dose_text = _dose_text(chosen, source) if chosen else ""
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
    pushes = at_dose(at, "pointer") if at else None
    if chosen is None:
        note = "no dose gains on validation, so whether a shifted push is followed was not read"
    elif not pushes:
        note = f"whether the shifted pushes {dose_text} are followed was {NOT_MEASURED}"
    elif followed(pushes):
        pushed = ", ".join(f"ref{k}" for k in followed(pushes))
        note = (
            f"the shifted pushes {dose_text} are followed ({pushed}): a push supplies the position"
        )
    elif unmeasured_pushes(pushes):
        unread = ", ".join(f"ref{k}" for k in unmeasured_pushes(pushes))
        note = (
            f"whether the pushes at {unread} {dose_text} are followed was {NOT_MEASURED} "
            f"(under {MIN_POINTER_ROWS} rows); the others are not followed"
        )
    else:
        note = f"no shifted push {dose_text} is followed"
    return MISDIRECTED_LOOKUP, [
        "the keys that would give what the model wrote hold the heads: the lookup finds "
        "the wrong key and the model computes on it",
        note,
    ]


def kind_doses(
    validation: Mapping[str, Any],
    by_kind: Mapping[str, Mapping[str, Any]] | None,
    kinds,
) -> dict[str, tuple[dict[str, Any] | None, str]]:
    """{kind: (its dose, where it was chosen)} for each kind: the dose `choose_dose` picks on
    the validation curve of that kind's own OOD validation instances (`by_kind`: {kind:
    curve}, the validation stream split by the kind of each instance's first wrong row);
    a kind without one (no validation instance of that kind, or a stream not split) gets the
    whole curve's dose (`WHOLE_CURVE_DOSE`)."""
    whole = choose_dose(validation)
    out = {}
    for kind in kinds:
        own = (by_kind or {}).get(kind)
        if own is not None and own.get("doses"):
            out[kind] = (choose_dose(own), f"the {KIND_WORDS.get(kind, kind)} validation instances")
        else:
            out[kind] = (whole, "the whole validation curve")
    return out


def _answers_verdict(diagnosis: Mapping[str, Any]) -> tuple[str, list[str]] | None:
    """*no failure* only when the eval says no OOD answer is wrong (over-long answers
    counted); a verdict of its own when answers are wrong but none has a wrong row to look
    at; None when the diagnosis has wrong rows to read."""
    answers = diagnosis.get("answers")
    if diagnosis.get("instances") and _shares(diagnosis):
        return None
    if not answers:
        return INCONCLUSIVE, [
            "no OOD test answer has a wrong row to look at, and whether any answer is wrong "
            f"(the eval's exact match) was {NOT_MEASURED}"
        ]
    if not answers.get("wrong"):
        return NO_FAILURE, [f"no OOD test answer is wrong (0 of {answers.get('total')})"]
    return INCONCLUSIVE, [
        f"{answers['wrong']} of {answers.get('total')} OOD test answers are wrong, but none has "
        f"a wrong row to look at ({answers.get('over_long', 0)} over-long: the right answer, "
        "then more): where the heads look cannot say why they fail"
    ]


def _answers_note(diagnosis: Mapping[str, Any]) -> list[str]:
    """The wrong answers the shares leave out (over-long ones have no wrong row)."""
    answers = diagnosis.get("answers") or {}
    left = (answers.get("wrong") or 0) - (answers.get("diagnosed") or 0)
    if left <= 0:
        return []
    return [
        f"{left} of the {answers['wrong']} wrong OOD test answers have no wrong row and are not "
        f"in the shares ({answers.get('over_long', 0)} over-long: the right answer, then more)"
    ]


def _taken(reasons: list[str]) -> list[str]:
    """The exceptions (`vocabulary.EXCEPTIONS`) whose sentence the reasons carry."""
    return [e for e, sentence in EXCEPTIONS.items() if any(sentence in r for r in reasons)]


def _read_kinds(validation, test, named, by_kind) -> dict[str, dict[str, Any]]:
    """Each named kind's reading at the dose it chooses (`kind_doses`)."""
    out = {}
    for kind, (chosen, source) in kind_doses(validation, by_kind, named).items():
        at = _at(test, chosen) if chosen else None
        verdict, reasons = read_kind(kind, test, chosen, at, source)
        if source == "the whole validation curve" and by_kind is not None:
            reasons = [*reasons, EXCEPTIONS[WHOLE_CURVE_DOSE]]
        elif by_kind is None:
            reasons = [*reasons, EXCEPTIONS[WHOLE_CURVE_DOSE] + " (not split here)"]
        out[kind] = {
            "verdict": verdict,
            "reasons": reasons,
            "dose": None
            if chosen is None
            else {"C": chosen["strength"], "threshold": chosen.get("threshold")},
            "dose_from": source,
        }
    return out


def _numbers(validation, test, diagnosis, chosen, at, shares, named, nulls) -> dict[str, Any]:
    return {
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
        "answers": diagnosis.get("answers"),
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


def calibrated_verdict(
    validation: Mapping[str, Any],
    test: Mapping[str, Any],
    diagnosis: Mapping[str, Any],
    by_kind: Mapping[str, Mapping[str, Any]] | None = None,
    lookup: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The verdict of the module docstring, with its reasons and the numbers it read.
    `by_kind`: the OOD validation curve of each kind's own instances ({kind: curve}, the
    validation stream split by the kind of each instance's first wrong row), from which each
    kind of a mixed failure chooses its dose; None: not split (each kind is read at the
    whole curve's dose, and says so). `lookup`: the lookup's evidence (`Lookup.evidence`, for
    rule G; None: not read)."""
    chosen = choose_dose(validation)
    at = _at(test, chosen) if chosen else None
    shares = _shares(diagnosis)
    # a kind of lookup failure counts only above its null (the same reading on correct rows)
    nulls = null_shares(diagnosis)
    present = {k: v for k, v in shares.items() if v and exceeds_null(k, v, nulls)}
    named = {k: v for k, v in sorted(present.items(), key=lambda kv: -kv[1]) if v >= NAMED}
    numbers = _numbers(validation, test, diagnosis, chosen, at, shares, named, nulls)

    def out(verdict: str, reasons: list[str], **extra) -> dict[str, Any]:
        # the exceptions taken, by id: `vocabulary.EXCEPTIONS_OF[verdict]` must hold each
        # (its `means` names them; tests/harness/attention/verdicts/test_vocabulary.py)
        taken = {"exceptions": _taken(reasons)}
        return {"verdict": verdict, "reasons": reasons, "numbers": numbers | extra | taken}

    numbers["exists"], absent = lookup_gate(test, lookup)
    if absent:  # rule G: no lookup is judged where none exists
        return out(NO_LOOKUP, absent)
    answered = _answers_verdict(diagnosis)
    if answered is not None:
        return out(*answered)
    if not validation.get("doses"):
        return out(INCONCLUSIVE, [f"the OOD validation ladder was {NOT_MEASURED} (no rung)"])
    basis = diagnosis.get("basis") or "every wrong row"
    where = f"errors ({basis}): {_share_text(shares)} (over {diagnosis['instances']} instances)"
    if nulls:
        where += f"; on the correct ID rows: {_share_text(nulls)}"
    left = _answers_note(diagnosis)
    if len(named) >= 2:
        readings = _read_kinds(validation, test, named, by_kind)
        return _mixed(out, where, left, named, readings)
    if not present:
        reasons = [f"{where}: no kind of error exceeds its null by {NULL_EXCESS}", *left]
        return out(INCONCLUSIVE, reasons)
    top = max(present, key=lambda k: present[k])
    if present[top] < MOSTLY:
        return out(INCONCLUSIVE, [f"{where}: no kind of error holds half the instances", *left])
    verdict, reasons = read_kind(top, test, chosen, at)
    return out(verdict, [where, *left, *reasons])


def _mixed(out, where, left, named, readings) -> dict[str, Any]:
    """Two kinds or more: *mixed failure*, each kind with its share, its dose and its
    reading; kinds that all read alike give that one word (`ALIKE_KINDS`)."""
    words = {r["verdict"] for r in readings.values()}
    mixed = [{"kind": k, "share": v, **readings[k]} for k, v in named.items()]

    def at(k):
        dose = readings[k]["dose"]
        return "" if dose is None else f" at C = {dose['C']:g}"

    details = [f"{KIND_WORDS[k]}: {r}" for k in named for r in readings[k]["reasons"]]
    if len(words) == 1:
        (word,) = words
        parts = [f"{KIND_WORDS[k]} {v:.2f}" for k, v in named.items()]
        head = f"{where}: {' and '.join(parts)} both read {word}; {EXCEPTIONS[ALIKE_KINDS]}"
        # not "mixed": one word, as a single kind's (reports show a mixed failure's kinds)
        return out(word, [head, *left, *details], kind_readings=mixed)
    parts = [f"{KIND_WORDS[k]} {v:.2f}: {readings[k]['verdict']}{at(k)}" for k, v in named.items()]
    head = f"{where}: kinds holding a quarter or more: {'; '.join(parts)}"
    return out(MIXED_FAILURE, [head, *left, *details], mixed=mixed)
