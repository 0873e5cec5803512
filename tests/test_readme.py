"""The README's set-up commands are the ones CI runs."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def setup_commands() -> list[str]:
    text = (REPO / "README.md").read_text()
    block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line and not line.startswith("#")]


def test_readme_opens_with_two_setup_commands():
    main_job, tests = setup_commands()
    assert main_job.endswith("attentionspan show")
    assert tests.endswith("python -m pytest -q -n 2")


def test_the_main_job_needs_no_extra():
    """The main job installs the lean base; the tests' packages are an extra."""
    main_job, tests = setup_commands()
    assert "pip install -e . &&" in main_job and "[" not in main_job
    assert 'pip install -q -e ".[dev]"' in tests


def test_ci_runs_the_readme_test_command():
    _, tests = setup_commands()
    venv_part = "python3 -m venv .venv && . .venv/bin/activate && "
    assert tests.startswith(venv_part)
    ci = (REPO / ".ci" / "run").read_text()
    assert tests[len(venv_part) :] in ci


def test_the_quick_command_leaves_out_the_slow_tests_and_ci_runs_them():
    """Command 2 deselects the tests marked slow (pyproject's addopts); CI runs the
    slow set after it, so every test still runs there."""
    config = (REPO / "pyproject.toml").read_text()  # text: tomllib is not in Python 3.10
    assert "addopts = \"-ra -m 'not slow'\"" in config
    assert '    "slow: ' in config  # registered, so any test may carry it
    assert "python -m pytest -q -n 2 -m slow" in (REPO / ".ci" / "run").read_text()


def test_the_readme_names_every_calibrated_verdict_word():
    """The README's sentence on the calibrated verdict lists the vocabulary's words, all of
    them and no other: a word added to the rule shows up here as a failure until it is named."""
    import re

    from harness.attention.verdicts.vocabulary import CALIBRATED

    text = " ".join((REPO / "README.md").read_text().split())
    sentence = text.split("one of nine words: ", 1)[1].split(", by a rule", 1)[0]
    named = re.findall(r"\*([^*]+)\*", sentence)
    assert sorted(named) == sorted(CALIBRATED), (named, sorted(CALIBRATED))
    assert len(CALIBRATED) == 9, "the README says 'one of nine words'"
