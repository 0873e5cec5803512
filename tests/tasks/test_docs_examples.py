"""The `$ attentionspan show ...` blocks of docs/tasks.md are what the command prints.

A change to generation or to a mask rule makes this fail until the docs are regenerated.
"""

from __future__ import annotations

import os
import re
import shlex

import pytest

from attentionspan_datasets.cli import main

DOCS = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "tasks.md")
BLOCK = re.compile(r"```\n\$ attentionspan show (.*?)\n(.*?)\n```", re.S)


def blocks() -> list[tuple[str, str]]:
    with open(DOCS, encoding="utf-8") as handle:
        return BLOCK.findall(handle.read())


def test_the_docs_have_worked_examples_for_every_mask_variant():
    commands = [command for command, _ in blocks()]
    assert len(commands) >= 12
    assert any("mask=sufficient" in c for c in commands)
    assert any("mask=minimal" in c for c in commands)


@pytest.mark.parametrize("command, expected", blocks())
def test_docs_example_is_what_show_prints(capsys, monkeypatch, command, expected):
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["show", *shlex.split(command)]) == 0
    out = capsys.readouterr().out
    drawn = out.split("\n\n", 1)[1].rstrip("\n")  # the legend comes first
    assert drawn == expected
