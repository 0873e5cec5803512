"""The one vocabulary of judgement: every word a verdict rule may say, what it means, what it
rules out (and what it does not), and the thresholds the rules read, each said once.

    from harness.attention.verdicts.vocabulary import CALIBRATED, NUDGE_REPAIRABLE, MOSTLY
    CALIBRATED[NUDGE_REPAIRABLE].rules_out     # what a nudge-repairable verdict rules out

Three rules speak it, one module each in this folder: the calibrated verdict (`calibrated`,
the headline, read from the dose ladder and from where the errors look), repair or pointer
at the grid's chosen setting (`repair_or_pointer`) and the supervision study's verdict
(`supervision`). Reports, findings, summaries and tables import the words and thresholds
from here; none restates them. "inconclusive" belongs to every family, with the meaning its
family gives it. Round 1's thresholds were fixed before any measurement; round 2 changed the
calibrated rule after seeing round 1's results (first wrong rows, the lookup found rather than
assumed, a share named from a quarter) and was calibrated on the planted models
(tests/planted.py); docs/usage_analysis.md states the rules.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.attention.evidence import MIN_POINTER_ROWS as MIN_POINTER_ROWS
from harness.attention.evidence import POINTER_EXCESS as POINTER_EXCESS

# --- thresholds -------------------------------------------------------------------------------
# a kind of error "mostly": at least half the instances with an error (a lookup failure also
# NULL_EXCESS above its null)
MOSTLY = 0.5
# A shifted push is "followed" (POINTER_EXCESS, on MIN_POINTER_ROWS rows or more): said once
# in `harness.attention.evidence`, below the pointer control that names it and the rules here.
ID_TOLERANCE = 0.05  # ID exact match may fall this much under a push and still "hold"
NAMED = 0.25  # a kind of error holding this share of the instances or more is named
# A kind of lookup failure (diluted, misdirected, elsewhere, diffuse) is read as present only
# where its share of the first wrong rows exceeds its null share (the same classification on
# the correct ID rows, `harness.attention.diagnosis`) by this much: about two standard errors
# of a share near 0.1 over the 30 or so instances a test stream errs on (sqrt(.1 x .9 / 30)
# = 0.055), so a kind the heads show as often where the model works is never its failure.
NULL_EXCESS = 0.1
ON_REFERENCE = 0.5  # the supervision study's "most wrong instances": on_reference share >= this


# --- words ------------------------------------------------------------------------------------
INCONCLUSIVE = "inconclusive"
# the calibrated verdict
NUDGE_REPAIRABLE = "nudge-repairable"
MISDIRECTED_LOOKUP = "misdirected lookup"
NO_LOOKUP = "no lookup"
DOWNSTREAM = "downstream"
MIXED_FAILURE = "mixed failure"
CONFLICTING_EVIDENCE = "conflicting evidence"
NO_ATTENTION_EFFECT = "no attention effect"
NO_FAILURE = "no failure"
# repair or pointer
REPAIR = "repair"
POINTER = "pointer"
# the supervision study
GENERALISES = "supervision generalises"
NOT_SPECIFIC = "not specific to the reference"
REFERENCE_NOT_HEADS = "the reference, not these heads"
NOT_BOTTLENECK = "attention is not the bottleneck"
DID_NOT_TAKE = "supervision did not take"


@dataclass(frozen=True)
class Verdict:
    """One word of a family: `means` is when a rule says it, `rules_out` what it rules out
    and what it does not."""

    word: str
    means: str
    rules_out: str


def _family(*verdicts: Verdict) -> dict[str, Verdict]:
    return {v.word: v for v in verdicts}


CALIBRATED: dict[str, Verdict] = _family(
    Verdict(
        NUDGE_REPAIRABLE,
        "the OOD errors are mostly diluted (the reference keys still lead per key, weaker than "
        "in distribution; NULL_EXCESS above the share of correct ID rows read so), and at the "
        "dose chosen on validation the reference push gains on test, no shifted push is "
        "followed, each gains less, random other heads gain less and ID holds",
        "rules out a gain that any push anywhere would give, one that any heads would give and "
        "one bought by breaking the task; not that the ranked heads are the model's whole "
        "lookup, nor that it transfers to another model or seed",
    ),
    Verdict(
        MISDIRECTED_LOOKUP,
        "the OOD errors are mostly misdirected (NULL_EXCESS above the share of correct ID rows "
        "read so): one wrong key holds the heads and the model writes the task's result on it",
        "rules out a failure downstream of the lookup (the rest of the model computes "
        "correctly on whatever it is pointed at); not that a push repairs the lookup: it may "
        "supply the position",
    ),
    Verdict(
        NO_LOOKUP,
        "the OOD errors are mostly diffuse (nothing stands out, the reference keys not first per "
        "key, so uniform attention reads so whatever the reference's size; NULL_EXCESS above "
        "the share of correct ID rows read so), and at the dose chosen on validation a shifted "
        "push is followed",
        "rules out reading a gain as a mended lookup: a push anywhere is followed at the "
        "dose that gains",
    ),
    Verdict(
        DOWNSTREAM,
        "the OOD errors are mostly on the reference: each lookup head keeps its ID level as "
        "the correct ID rows do (at least 1 - tolerance of its mean, or as much as the lowest "
        "diagnosis.NULL_QUANTILE of those rows; no lookup failure exceeds its null), and it "
        "still writes wrong",
        "rules out that the model fails for not looking at the reference; a push that gains "
        "then supplies the answer",
    ),
    Verdict(
        MIXED_FAILURE,
        "two kinds of error or more each hold NAMED of the instances or more (a lookup failure "
        "also NULL_EXCESS above its null share): each is named with its share and the reading "
        "its kind gets at the chosen dose",
        "rules out one explanation for every failure; a repair, where one kind allows it, is "
        "partial (the report gives the share of OOD answers the dose repairs free-running)",
    ),
    Verdict(
        CONFLICTING_EVIDENCE,
        "the errors are mostly diffuse (no lookup), but at the chosen dose every condition of "
        "a repair holds (the reference push gains, no shifted push is followed, each gains "
        "less, random other heads gain less, ID holds): both lines are named",
        "rules out neither reading: where the model looks and what a push does disagree",
    ),
    Verdict(
        NO_ATTENTION_EFFECT,
        "the errors are diluted or diffuse and no dose gains on OOD validation with ID holding",
        "rules out that pushing the ranked heads helps at any dose of the ladder; not that "
        "other heads or another push would",
    ),
    Verdict(
        NO_FAILURE,
        "no OOD test answer has a wrong token to look at",
        "rules out nothing: there is no failure to explain",
    ),
    Verdict(
        INCONCLUSIVE,
        "the errors are mostly elsewhere or of no one kind (a lookup failure counting only "
        "where it exceeds its null), or a condition of the reading their kind suggests failed "
        "(the reasons name each)",
        "rules out little: the reasons say which condition failed",
    ),
)

REPAIR_OR_POINTER: dict[str, Verdict] = _family(
    Verdict(
        REPAIR,
        "at the grid's chosen setting the push gains, restoring the heads' ID weight gains "
        "too, no shifted push is followed and each gains less, and ID holds",
        "rules out a pointer handing the answer over and a gain bought by breaking the task; "
        "read at one chosen C (the calibrated verdict reads the ladder)",
    ),
    Verdict(
        POINTER,
        "the chosen setting gains, and a shifted push makes the model write the pointed-at "
        "character at least POINTER_EXCESS more often than without intervention",
        "rules out reading the gain as a repaired lookup: the push hands the answer over",
    ),
    Verdict(
        INCONCLUSIVE,
        "neither reading's conditions all hold (the reasons name each that failed)",
        "rules out little: the reasons say which condition failed",
    ),
)

SUPERVISION: dict[str, Verdict] = _family(
    Verdict(
        GENERALISES,
        "the chosen arm's OOD gain lies above 0 and above each control's, in every seed run",
        "rules out that the OOD failure lies downstream of where the model looks, and that "
        "the gain is training longer, supervising any heads or any attention target (each "
        "control gains less); not that it holds past these tiny models and this task",
    ),
    Verdict(
        NOT_SPECIFIC,
        "the chosen arm gains, but not above a control that pulls no head to the reference",
        "rules out reading the gain as the reference's: a control that pulls no head to the "
        "reference gains as much",
    ),
    Verdict(
        REFERENCE_NOT_HEADS,
        "the chosen arm gains in every seed run, but random heads pulled to the reference "
        "gain as much",
        "rules out that the gain is training longer or any attention target (the extra steps "
        "and the wrong mask gain less); not that the ranked heads matter: random heads pulled "
        "to the reference gain as much, nor that it holds past these tiny models",
    ),
    Verdict(
        NOT_BOTTLENECK,
        "no gain, and on at least ON_REFERENCE of the wrong OOD instances the supervised "
        "heads looked at the reference as much as in distribution",
        "rules out that the model fails OOD for not looking at the reference: on most wrong "
        "instances its supervised heads look there as much as in distribution, and "
        "supervision did not raise OOD accuracy; the failure is downstream of the lookup",
    ),
    Verdict(
        DID_NOT_TAKE,
        "no gain, and the supervised heads' OOD reference mass did not rise over the baseline's",
        "rules out nothing about the bottleneck: supervising the heads in distribution did "
        "not raise their reference mass out of distribution, so the test did not happen at "
        "these weights",
    ),
    Verdict(
        INCONCLUSIVE,
        "the gain holds in some seed runs only, or the heads' OOD reference mass rose but "
        "neither to the ID level on most errors nor into a gain",
        "rules out little: the supervised heads moved toward the reference out of "
        "distribution, but neither to their ID level on most errors nor into a gain every "
        "seed shares",
    ),
)

FAMILIES: dict[str, dict[str, Verdict]] = {
    "calibrated": CALIBRATED,
    "repair_or_pointer": REPAIR_OR_POINTER,
    "supervision": SUPERVISION,
}
