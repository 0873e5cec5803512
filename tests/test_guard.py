"""attentionspan_datasets.guard: one line and status 2 for a user's mistake, 130 for Ctrl-C,
the traceback on request; the harness's commands use this one copy."""

from __future__ import annotations

import pytest

from attentionspan_datasets.guard import OneLineParser, UsageError, run_guarded
from harness.foundation.outputs import Terminated


def fail_with(error):
    def func(args):
        raise error

    return func


@pytest.mark.parametrize(
    "error,status,line",
    [
        (ValueError("'n' must be >= 1,\ngot 0"), 2, "attentionspan generate: error: 'n' must be"),
        (UsageError("bad"), 2, "attentionspan generate: error: bad"),
        (FileExistsError(), 2, "attentionspan generate: error: FileExistsError"),
        (KeyboardInterrupt(), 130, "attentionspan generate: interrupted"),
        (Terminated(), 143, "attentionspan generate: interrupted"),  # SIGTERM's 128 + 15
    ],
)
def test_one_line_and_its_status(error, status, line, capsys):
    assert run_guarded("generate", fail_with(error), None) == status
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(line)


def test_status_of_a_command_and_the_traceback_on_request(monkeypatch):
    assert run_guarded("generate", lambda args: None, None) == 0
    assert run_guarded("generate", lambda args: 3, None) == 3
    monkeypatch.setenv("ATTENTIONSPAN_TRACEBACK", "1")
    with pytest.raises(ValueError, match="shown"):
        run_guarded("generate", fail_with(ValueError("shown")), None)
    with pytest.raises(RuntimeError):  # not a user's mistake: never swallowed
        monkeypatch.delenv("ATTENTIONSPAN_TRACEBACK")
        run_guarded("generate", fail_with(RuntimeError("bug")), None)


def test_the_data_commands_and_the_harness_share_one_copy():
    import attentionspan_datasets.cli
    import harness.foundation.options

    assert attentionspan_datasets.cli.run_guarded is run_guarded
    assert (
        harness.foundation.options.UsageError is UsageError is attentionspan_datasets.cli.UsageError
    )
    assert (
        harness.foundation.options.OneLineParser
        is OneLineParser
        is attentionspan_datasets.cli.OneLineParser
    )
    # The harness's guard is the data layer's, with torch's thread count chosen first: a
    # mistake is the same one line, and the wrapper keeps no second copy of the handling.
    status = harness.foundation.options.run_guarded("eval", fail_with(ValueError("bad -n")), None)
    assert status == 2


def test_a_sigint_ignored_at_start_still_interrupts(capsys):
    """A script's background job starts with SIGINT ignored; train's loop answered it anyway
    and the rest of a command did not (a lost Ctrl-C, exit 0). Every command answers it."""
    import signal

    from attentionspan_datasets import guard

    def work(args):
        signal.raise_signal(signal.SIGINT)
        return 0

    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        assert guard.run_guarded("x", work, None) == 130
    finally:
        signal.signal(signal.SIGINT, previous)
    assert capsys.readouterr().err.strip() == "attentionspan x: interrupted"
