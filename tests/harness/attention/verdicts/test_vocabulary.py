"""The one vocabulary: every rule says only its family's words, each word says what it means
and rules out, and no module outside the verdicts' folder restates a verdict word."""

import ast
from pathlib import Path

from harness.attention.verdicts import calibrated, repair_or_pointer, supervision, vocabulary

REPO = Path(__file__).resolve().parents[4]
ROOM = REPO / "harness" / "attention" / "verdicts"


def test_each_rule_speaks_its_family_in_the_order_reports_list_it():
    assert calibrated.VERDICTS == (
        "nudge-repairable",
        "misdirected lookup",
        "no lookup",
        "downstream",
        "mixed failure",
        "conflicting evidence",
        "no attention effect",
        "no failure",
        "inconclusive",
    )
    assert repair_or_pointer.VERDICTS == ("repair", "pointer", "inconclusive")
    assert supervision.VERDICTS == (
        "supervision generalises",
        "not specific to the reference",
        "the reference, not these heads",
        "attention is not the bottleneck",
        "supervision did not take",
        "inconclusive",
    )
    assert set(vocabulary.FAMILIES) == {"calibrated", "repair_or_pointer", "supervision"}


def test_every_word_says_what_it_means_and_rules_out():
    for family in vocabulary.FAMILIES.values():
        for word, verdict in family.items():
            assert verdict.word == word and verdict.means and verdict.rules_out, word


def test_the_thresholds_are_the_rules_fixed_values():
    # Changing one changes every verdict: this test is the place that says so.
    assert vocabulary.MOSTLY == 0.5 and vocabulary.ON_REFERENCE == 0.5
    assert vocabulary.POINTER_EXCESS == 0.2 and vocabulary.MIN_POINTER_ROWS == 20
    assert vocabulary.ID_TOLERANCE == 0.05 and vocabulary.NAMED == 0.25


def _literals(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        if id(node) not in docstrings
    }


def test_no_module_outside_the_room_restates_a_verdict_word():
    """Reports import the words; a literal copy would drift from the rule that says it.
    Words that are also ordinary names elsewhere (a control's role "pointer", the word
    "inconclusive" in prose) are left to review: the distinctive ones are checked."""
    distinctive = {
        word
        for family in vocabulary.FAMILIES.values()
        for word in family
        if word not in (vocabulary.INCONCLUSIVE, vocabulary.REPAIR, vocabulary.POINTER)
    }
    found = {}
    for package in ("harness", "lm_eval_tasks"):
        for path in (REPO / package).rglob("*.py"):
            if ROOM in path.parents:
                continue
            said = _literals(path) & distinctive
            if said:
                found[str(path.relative_to(REPO))] = sorted(said)
    assert not found, found
