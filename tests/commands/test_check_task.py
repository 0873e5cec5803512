"""`attentionspan check-task` (attentionspan_datasets/commands/check_task.py): through the
data layer's own CLI and the `attentionspan` one; a failing task in tests/test_plugins.py."""

from __future__ import annotations

import pytest

from attentionspan_datasets.cli import main as data_main
from harness.cli import main


def test_a_built_in_task_passes_through_both_clis(capsys):
    assert data_main(["check-task", "successor_id", "-n", "20"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "ok   successor: presets successor_id, successor_ood"
    assert lines[-1] == "1 task(s): all checks pass, 1 warn/note line(s) above"
    assert lines[-2].startswith("note successor: not checked: whether paper follows")
    assert all(line.startswith("ok   ") for line in lines[:-2])
    assert main(["check-task", "reversal", "string_reversal", "-n", "10"]) == 0
    assert capsys.readouterr().out.count("ok   oracle reversal_ood") == 1  # one task, once


@pytest.mark.parametrize(
    "args, needle",
    [
        (["no_such_task"], "unknown config 'no_such_task'"),
        (["reversal", "-n", "0"], "-n/--instances must be in [1, 1,000,000], got 0"),
        (["reversal", "--seed", str(2**64)], "--seed must be in"),
    ],
)
def test_bad_input_is_one_line_and_status_2(args, needle, capsys):
    assert main(["check-task", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("attentionspan check-task: error: ")
    assert needle in err[0]
