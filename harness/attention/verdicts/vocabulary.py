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
# A lookup exists before it is judged (the calibrated verdict's first gate):
# - the model works in distribution: ID exact match (the ladder's baseline on the ID test
#   stream, teacher-forced: for greedy decoding the same as free-running exact match) at
#   least ID_WORKS. Half: below it the model fails in distribution on most answers, so
#   the ID levels every diagnosis compares with are those of a failing model; every model
#   judged so far works there (ID exact 0.81-1.00) and a model that writes nothing reads 0;
ID_WORKS = 0.5
# - a head counts as looking up only when its ID level at the offset lies NULL_MARGIN of
#   the way from its null (attention spread evenly over the same visible keys: cells /
#   visible keys per row, averaged as the level is) to all of the row's weight:
#   level - null >= NULL_MARGIN x (1 - null). A quarter: a previous-token head whose whole
#   weight lands on the reference on the first row of each answer reads 1 / (mean answer
#   length), 0.18 on answers of 1-10 characters (0.165 measured, against a null of 0.095:
#   a bar of 0.32), and a head spreading its weight evenly reads its null; the lookups
#   measured on trained models read 0.42-0.89 at their offset (top heads' mean).
NULL_MARGIN = 0.25


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


# --- the calibrated rule's exceptions, each said once -----------------------------------------
# (condition id, sentence): the rule (`calibrated`) records the id wherever it takes the
# exception, and the `means` of every word it can then say carries the sentence, so a test
# holds the two together (tests/harness/attention/verdicts/test_vocabulary.py).
NO_RANDOM_HEADS = "no_random_heads"
ALIKE_KINDS = "alike_kinds"
WHOLE_CURVE_DOSE = "whole_curve_dose"
EXCEPTIONS: dict[str, str] = {
    NO_RANDOM_HEADS: "with no head left outside the N pushed to draw random other heads from "
    "(N = all heads), the shifted pushes are the control in their place",
    ALIKE_KINDS: "two kinds of error or more that each hold NAMED of the instances and read "
    "alike give that one word, each kind named with its share",
    WHOLE_CURVE_DOSE: "a kind with no OOD validation instance of its own (or a validation "
    "stream not split by kind) is read at the dose chosen on the whole validation curve, and "
    "its reasons say so",
}
# the words each exception can give (`calibrated` checks every exception it takes is here)
EXCEPTIONS_OF: dict[str, tuple[str, ...]] = {
    NUDGE_REPAIRABLE: (NO_RANDOM_HEADS,),
    CONFLICTING_EVIDENCE: (NO_RANDOM_HEADS,),
    MIXED_FAILURE: (NO_RANDOM_HEADS, WHOLE_CURVE_DOSE),
    NO_ATTENTION_EFFECT: (ALIKE_KINDS, WHOLE_CURVE_DOSE),
    INCONCLUSIVE: (ALIKE_KINDS, WHOLE_CURVE_DOSE),
}
# What "not measured" means, said once: a condition whose numbers are absent (a rung the
# test curve lacks, a control not run there, ID not scored) or too few (a following rate on
# under MIN_POINTER_ROWS rows) is not measured, and no word whose `means` names it is said.
NOT_MEASURED = "not measured"


def _unless(word: str) -> str:
    """The sentences of the exceptions `word` can be said under."""
    said = [EXCEPTIONS[e] for e in EXCEPTIONS_OF.get(word, ())]
    return ("; except: " + "; ".join(said)) if said else ""


# The ladder's shifted pushes (the pointer control's default there,
# `controls.pointer.LADDER_POINTER_SHIFTS`; the controls import this module's thresholds
# through `lookup`, so a test holds the two together: test_vocabulary.py).
SHIFTED_PUSHES = "at ref-3, -2, -1, +1, +2 and +3"
_REPAIR = (
    "at the dose chosen on validation the reference push gains on test (interval above 0), no "
    f"shifted push ({SHIFTED_PUSHES}) is followed (each measured on MIN_POINTER_ROWS rows or "
    "more), each gains less, random other heads gain less, the heads' output rescaled to its "
    "ID norm with the pattern unchanged (the output-scale control) gains less and ID holds, "
    "every one of these "
    "measured at that rung of the test ladder"
)

CALIBRATED: dict[str, Verdict] = _family(
    Verdict(
        NUDGE_REPAIRABLE,
        "the OOD errors are mostly diluted (the reference keys still lead per key, weaker than "
        "in distribution; NULL_EXCESS above the share of correct ID rows read so), and "
        + _REPAIR
        + _unless(NUDGE_REPAIRABLE),
        "rules out a gain that any push anywhere would give (a push next to the reference, at "
        "ref+-1 or +-2, that carries what it does among them), one that any heads would give, "
        "one that giving the heads' shrunken output its ID length back would give without "
        "moving any weight (vanishing variance) and one bought by breaking the task; not that "
        "the ranked heads are the model's whole "
        "lookup, nor that it transfers to another model or seed; where N = all heads, not "
        "that other heads would gain as much (none is left to push)",
    ),
    Verdict(
        MISDIRECTED_LOOKUP,
        "the OOD errors are mostly misdirected (NULL_EXCESS above the share of correct ID rows "
        "read so): one wrong key holds the heads and the model writes the task's result on it "
        "(whether the shifted pushes at the dose are followed is reported where it was "
        "measured, and said not measured where it was not)",
        "rules out a failure downstream of the lookup (the rest of the model computes "
        "correctly on whatever it is pointed at); not that a push repairs the lookup: it may "
        "supply the position",
    ),
    Verdict(
        NO_LOOKUP,
        "before anything else is read: the model does not work in distribution (ID exact "
        "match under ID_WORKS), or no head at the lookup's offset beats its null (its ID "
        "level NULL_MARGIN of the way above what attention spread evenly over the same keys "
        "would give); or, a lookup existing, the OOD errors are mostly diffuse (nothing "
        "stands out, the reference keys not first per key, so uniform attention reads so "
        "whatever the reference's size; NULL_EXCESS above the share of correct ID rows read "
        "so) and at the dose chosen on validation a shifted push "
        f"({SHIFTED_PUSHES}) is followed (on MIN_POINTER_ROWS rows or more)",
        "rules out judging where a lookup fails when there is none to judge (a model that "
        "fails in distribution, heads that weigh the reference no more than even attention "
        "or by coincidence, as a previous-token head on one row per answer); and reading a "
        "gain as a mended lookup when a push anywhere is followed at the dose that gains. "
        "Not that no other heads, offsets or positions hold a lookup",
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
        "two kinds of error or more each hold NAMED of the instances or more (a lookup "
        "failure also NULL_EXCESS above its null share) and read differently: each is named "
        "with its share and the reading its kind gets at the dose chosen on the OOD "
        "validation instances of that kind (the test ladder's controls run at every such "
        "dose)" + _unless(MIXED_FAILURE),
        "rules out one explanation for every failure; a repair, where one kind allows it, is "
        "partial (the report gives the share of OOD answers the dose repairs free-running); "
        "each kind's conditions are read on the whole test curve at its dose, not on its "
        "instances alone",
    ),
    Verdict(
        CONFLICTING_EVIDENCE,
        "the errors are mostly diffuse (no lookup), but "
        + _REPAIR
        + ": both lines are named"
        + _unless(CONFLICTING_EVIDENCE),
        "rules out neither reading: where the model looks and what a push does disagree",
    ),
    Verdict(
        NO_ATTENTION_EFFECT,
        "the errors are diluted or diffuse and no dose of the OOD validation ladder (measured, "
        "with at least one rung) gains with ID holding" + _unless(NO_ATTENTION_EFFECT),
        "rules out that pushing the ranked heads helps at any dose of the ladder; not that "
        "other heads or another push would",
    ),
    Verdict(
        NO_FAILURE,
        "no OOD test answer is wrong, read from the eval's exact match (an over-long answer, "
        "the right one and then more, is wrong though it has no wrong row)",
        "rules out nothing: there is no failure to explain",
    ),
    Verdict(
        INCONCLUSIVE,
        "the errors are mostly elsewhere or of no one kind (a lookup failure counting only "
        "where it exceeds its null), or a condition of the reading their kind suggests failed "
        "or was " + NOT_MEASURED + " (the reasons name each), or answers are wrong with no "
        "wrong row to look at (over-long answers)" + _unless(INCONCLUSIVE),
        "rules out little: the reasons say which condition failed or was not measured",
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
