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


def _exception_cases():
    """Hand-made curves and diagnoses on which the calibrated rule takes each exception."""
    from tests.harness.attention.verdicts.test_calibrated import NONE, curve, dose, errors

    every = dose(0.3)
    every["random_heads"] = {"max": None, "count": 0}
    alone = curve(every) | {"random_draws": {"available": 0}}  # N = all heads
    good, flat = curve(dose(0.3)), curve(dose(0.3, NONE))
    few = curve(dose(0.3, pointers={"+3": {"gain": NONE, "following": {"rows": 3}}}))
    return [
        (good, alone, errors(diluted=0.9), None),
        (good, alone, errors(diffuse=0.9), None),
        (good, alone, errors(diluted=0.5, on_reference=0.5), None),
        (flat, flat, errors(diluted=0.5, diffuse=0.5), None),
        (good, few, errors(diluted=0.5, diffuse=0.5), None),
        (flat, flat, errors(diluted=0.5, diffuse=0.5), {"diluted": flat}),
        (good, good, errors(diluted=0.5, on_reference=0.5), {"diluted": good}),
    ]


def test_every_exception_the_rule_takes_is_named_by_the_words_means():
    """The calibrated rule's exceptions are said once (`vocabulary.EXCEPTIONS`): where the
    rule takes one, the word it says must list it (`EXCEPTIONS_OF`) and its `means` must
    carry the sentence; every declared pair is taken by some case (none is stale)."""
    for word, ids in vocabulary.EXCEPTIONS_OF.items():
        for e in ids:
            assert vocabulary.EXCEPTIONS[e] in vocabulary.CALIBRATED[word].means, (word, e)
    taken = set()
    for validation, test, found, by_kind in _exception_cases():
        out = calibrated.calibrated_verdict(validation, test, found, by_kind)
        for e in out["numbers"]["exceptions"]:
            assert e in vocabulary.EXCEPTIONS_OF.get(out["verdict"], ()), (out["verdict"], e)
            taken.add((out["verdict"], e))
    declared = {(w, e) for w, ids in vocabulary.EXCEPTIONS_OF.items() for e in ids}
    assert declared == taken, declared ^ taken


def test_the_words_name_every_shifted_push_the_ladder_makes():
    """A nudge-repairable verdict rests on every shifted push of the ladder (ref+-1 and +-2
    as well as +-3: a neighbour of the reference may carry what it does); its `means` says
    which, in the words of `SHIFTED_PUSHES`, kept equal to the pointer control's default."""
    from harness.attention.controls import LADDER_POINTER_SHIFTS

    said = vocabulary.SHIFTED_PUSHES.removeprefix("at ref").replace(" and ", ", ").split(", ")
    assert tuple(int(k) for k in said) == LADDER_POINTER_SHIFTS
    for word in ("nudge-repairable", "conflicting evidence", "no lookup"):
        assert vocabulary.SHIFTED_PUSHES in vocabulary.CALIBRATED[word].means, word
    rules_out = vocabulary.CALIBRATED["nudge-repairable"].rules_out
    assert "ref+-1 or +-2" in rules_out
