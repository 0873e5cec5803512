"""harness.attention.verdicts.rule_version: code and thresholds move the version, comments,
docstrings and formatting do not."""

from __future__ import annotations

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
