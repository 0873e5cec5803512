"""`attentionspan generate` / `show`: output formats, overrides and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from attentionspan_datasets import generate
from attentionspan_datasets.cli import main


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_generate_jsonl_matches_library(capsys):
    code, out, _ = run_cli(capsys, "generate", "reversal_id", "-n", "3", "--seed", "7")
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["index"] for r in rows] == [0, 1, 2]
    assert rows[2] == generate("reversal_id", seed=7, index=2).to_dict()


def test_generate_text_and_param_override(capsys):
    code, out, _ = run_cli(
        capsys,
        "generate",
        "reversal",
        "-n",
        "4",
        "--format",
        "text",
        "--param",
        "min_length=3",
        "--param",
        "max_length=3",
    )
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 4
    for line in lines:
        text, mask = line.split("\t")
        assert len(text) == 7  # 3 chars, '=', 3 reversed chars
        assert json.loads(mask) == [[2], [1], [0]]


def test_generate_start_offsets_the_index(capsys):
    _, out, _ = run_cli(capsys, "generate", "reversal_id", "-n", "1", "--start", "5")
    assert json.loads(out)["index"] == 5


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["generate", "reversal", "--param", "max_length=ten"], "'max_length' must be an integer"),
        (["generate", "reversal", "--param", "max_lenght=3"], "unknown parameter 'max_lenght'"),
        (["generate", "reversal", "--param", "max_length"], "KEY=VALUE"),
        (["generate", "reversal", "--param", "min_length=0"], "'min_length'"),
        (["generate", "nope_ood"], "unknown config 'nope_ood'"),
        (["generate", "reversal_id", "-n", "-1"], "-n/--num must be >= 0"),
        (["show", "reversal_id", "--index", "-2"], "--index must be >= 0"),
        (["show"], "either CONFIG or --all"),
    ],
)
def test_bad_input_is_one_line_and_status_2(capsys, argv, needle):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert needle in err


def test_show_draws_the_mask_grid(capsys):
    code, out, _ = run_cli(
        capsys,
        "show",
        "reversal",
        "--param",
        "min_length=3",
        "--param",
        "max_length=3",
        "--seed",
        "1",
    )
    assert code == 0
    instance = generate("reversal", seed=1, index=0, min_length=3, max_length=3)
    lines = out.splitlines()
    grid = lines[lines.index("   " + instance.text) + 1 :]
    assert grid[0].endswith("..#.")  # target[0] mirrors position 2, sees positions 0-3
    assert grid[2].split()[1].startswith("#")


def test_console_script_errors_without_traceback():
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "attentionspan_datasets.cli",
            "generate",
            "reversal",
            "--param",
            "charset=ab=c",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "'charset'" in proc.stderr and "reserved" in proc.stderr


def test_a_closed_pipe_is_not_an_error():
    """`attentionspan generate ... | head -1`: exit 0, no traceback."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "attentionspan_datasets.cli",
            "generate",
            "reversal_ood",
            "-n",
            "200000",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    first = proc.stdout.readline()
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0
    assert json.loads(first)["index"] == 0
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr
