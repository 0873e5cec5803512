"""`attentionspan train / eval / models`: end to end on tiny models, one-line errors, and no
torch import for commands that do not need it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main
from tests.harness.launch import TINY_SCRATCH_ARGS

REPO = Path(__file__).resolve().parents[2]


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_train_then_eval_with_the_saved_defaults(tmp_path, capsys):
    out = tmp_path / "run"
    assert (
        main(
            [
                "train",
                "--model",
                "scratch",
                "--output",
                str(out),
                "--max-steps",
                "3",
                "--lr",
                "1e-3",
                "--eval-size",
                "4",
                "--no-progress",
                *TINY_SCRATCH_ARGS,
            ]
        )
        == 0
    )
    assert capsys.readouterr().out.strip() == str(out / "final")
    # No --configs: the training preset and its OOD twin.
    assert (
        main(["eval", "--model", str(out / "final"), "-n", "3", "--output", str(tmp_path / "eval")])
        == 0
    )
    printed = capsys.readouterr().out
    assert "| reversal_id | 3 |" in printed and "| reversal_ood | 3 |" in printed
    report = json.loads((tmp_path / "eval" / "results.json").read_text())
    assert list(report["results"]) == ["reversal_id", "reversal_ood"]


@pytest.mark.parametrize(
    "args,message",
    [
        (["eval", "--model", "{tmp}/missing", "--configs", "reversal_id"], "does not exist"),
        (
            ["eval", "--model", "{tiny}", "--configs", "reversal_idd"],
            "unknown config 'reversal_idd'",
        ),
        (["eval", "--model", "{tiny}"], "no --configs given"),
        (
            ["train", "--model", "{tiny}", "--config", "nope", "--output", "{tmp}/o"],
            "unknown config 'nope'",
        ),
        (["train", "--model", "scratch", "--output", "{tmp}/o", "--lr", "-1"], "'lr' must be > 0"),
        (
            [
                "train",
                "--model",
                "scratch",
                "--scratch-charset",
                "0123456789=",
                "--output",
                "{tmp}/o",
                "--max-steps",
                "1",
            ],
            "no single token for the character",
        ),
    ],
)
def test_bad_input_is_one_line_and_status_2(args, message, tmp_path, tiny_model_dirs, capsys):
    args = [a.format(tmp=tmp_path, tiny=tiny_model_dirs["llama"]) for a in args]
    assert main(args) == 2
    line = one_error_line(capsys)
    assert message in line and line.startswith(f"attentionspan {args[0]}: error:")


def test_models_list(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("ATTENTIONSPAN_CACHE", str(tmp_path))
    assert main(["models", "list"]) == 0
    assert capsys.readouterr().out.startswith("smollm2-135m-instruct\t")
    with pytest.raises(SystemExit):
        main(["models", "fetch", "gpt-5"])


def test_parser_does_not_import_torch():
    code = (
        "import sys; from harness.cli import build_parser; build_parser(); "
        "print(sorted(m for m in ('torch', 'transformers', 'datasets') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_instruction_default_is_the_tasks_standard_line():
    from attentionspan_datasets.instructions import instruction_for
    from harness.options import resolve_instruction

    assert resolve_instruction(None, ["addition_id"]) is None
    assert resolve_instruction("Add.", ["addition_id"]) == "Add."
    expected = instruction_for("long_addition")
    assert resolve_instruction("default", ["addition_id", "addition_ood"]) == expected
    with pytest.raises(ValueError, match="configs of one task, got long_addition, string_rev"):
        resolve_instruction("default", ["addition_id", "reversal_id"])


def test_help_lists_the_registered_commands_and_promises_nothing_else():
    from harness.cli import COMMAND_MODULES, build_parser

    parser = build_parser()
    commands = set(parser._subparsers._group_actions[0].choices)
    assert {"generate", "show", "export", "train", "eval", "models"} <= commands
    assert len(COMMAND_MODULES) == len(set(COMMAND_MODULES))
    if not commands & {"reproduce", "heads", "intervene", "capture"}:
        assert "analy" not in parser.description  # issue 14: no promise of what is not there


@pytest.mark.parametrize(
    "error,status,line",
    [
        (ValueError("'x' must be >= 1,\ngot 0"), 2, "attentionspan train: error: 'x' must be"),
        (FileNotFoundError("no such file"), 2, "attentionspan train: error: no such file"),
        (KeyboardInterrupt(), 130, "attentionspan train: interrupted"),
    ],
)
def test_errors_are_one_line_with_their_status(error, status, line, capsys):
    from harness.options import run_guarded

    def fail(args):
        raise error

    assert run_guarded("train", fail, None) == status
    assert one_error_line(capsys).startswith(line)


def test_python_m_harness_train_gives_the_same_one_line_error(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "harness.train", "--output", str(tmp_path), "--lr", "nan"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert (
        done.stderr.strip() == "attentionspan train: error: 'lr' must be a finite number, got nan"
    )
