"""harness.attention.verdicts.rule_version: code and thresholds move the version, comments,
docstrings and formatting do not."""

from __future__ import annotations

import ast
import re

from harness.attention.verdicts import rule_version as rv


def test_the_version_is_stable_and_names_itself():
    version = rv.rule_version()
    assert re.fullmatch(r"r-[0-9a-f]{12}", version)
    assert rv.rule_version() == version


def test_docstrings_comments_and_formatting_keep_a_module_digest():
    code = 'X = 0.5  # a threshold\n\ndef f(a):\n    """Why."""\n    return a > X\n'
    reworded = (
        'X = 0.5\n\n\ndef f(a):\n    """Why, said better."""\n    # the rule\n    return (a > X)\n'
    )
    assert rv.module_digest(code) == rv.module_digest(reworded)


def test_a_threshold_or_a_condition_moves_a_module_digest():
    code = "X = 0.5\n\ndef f(a):\n    return a > X\n"
    assert rv.module_digest(code) != rv.module_digest(code.replace("0.5", "0.25"))
    assert rv.module_digest(code) != rv.module_digest(code.replace(">", ">="))


def test_the_version_covers_the_calibrated_rule_and_what_it_reads():
    assert "harness.attention.verdicts.calibrated" in rv.RULE_MODULES
    assert "harness.attention.verdicts.vocabulary" in rv.RULE_MODULES  # the thresholds
    assert "harness.attention.diagnosis" in rv.RULE_MODULES  # where the errors look


def test_the_tree_is_written_as_python_3_11_writes_it_on_every_python():
    """The text hashed is 3.11's `ast.dump(tree, annotate_fields=False)` (written out below, as
    3.11.7 printed it), also on 3.12 (which adds `type_params`) and 3.13 (which leaves empty
    fields out): the same rule keeps its version on the GPU machine's Python 3.12."""
    code = (
        "def f(x: int, *a, k=1, **kw) -> str:\n"
        '    return f"{x!r:>4}" + kw.get("k")\n'
        "class C(B):\n"
        "    y: int = 0\n"
    )
    assert rv._tree_text(ast.parse(code)) == (
        "Module([FunctionDef('f', arguments([], [arg('x', Name('int', Load()))], arg('a'), "
        "[arg('k')], [Constant(1)], arg('kw'), []), [Return(BinOp(JoinedStr([FormattedValue("
        "Name('x', Load()), 114, JoinedStr([Constant('>4')]))]), Add(), Call(Attribute(Name("
        "'kw', Load()), 'get', Load()), [Constant('k')], [])))], [], Name('str', Load())), "
        "ClassDef('C', [Name('B', Load())], [], [AnnAssign(Name('y', Store()), Name('int', "
        "Load()), Constant(0), 1)], [])], [])"
    )


def test_the_supervision_rule_has_its_own_version_over_its_own_modules():
    """The supervision study's word is read by another rule (`verdicts.supervision`): its
    version names itself `s-`, covers that module, the words and thresholds and the interval
    tests, and the calibrated version is still the one every committed digest records."""
    version = rv.supervision_rule_version()
    assert re.fullmatch(r"s-[0-9a-f]{12}", version)
    assert rv.SUPERVISION_RULE_MODULES == (
        "harness.attention.verdicts.supervision",
        "harness.attention.verdicts.vocabulary",
        "harness.foundation.stats",
    )
    assert rv.modules_version(rv.SUPERVISION_RULE_MODULES, "s-") == version
    assert rv.modules_version(rv.RULE_MODULES, "r-") == rv.rule_version()
    assert rv.modules_version(rv.RULE_MODULES[:-1], "r-") != rv.rule_version()
