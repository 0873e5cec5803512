"""`attentionspan export`: files written, and bad input as one line with exit status 2."""

from __future__ import annotations

import datasets
import pytest

from attentionspan_datasets.cli import main

SIZE_ARGS = ["--num-train", "12", "--num-validation", "4", "--num-test", "4"]


def run_cli(capsys, *argv):
    code = main([str(arg) for arg in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_export_writes_a_folder_load_dataset_reads(tmp_path, capsys):
    out = tmp_path / "data"
    code, stdout, err = run_cli(
        capsys, "export", "reversal_ood", "--out", out, "--seed", "3",
        "--cache-dir", tmp_path / "cache", *SIZE_ARGS,
    )  # fmt: skip
    assert code == 0 and stdout.strip() == f"wrote {out}"
    assert "note:" not in err  # reversal_ood has no small space
    ds = datasets.load_dataset(str(out), "reversal_ood", cache_dir=str(tmp_path / "read"))
    assert ds.num_rows == {"train": 12, "validation": 4, "test": 4}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["reversal_idd"], "unknown config(s) reversal_idd; allowed: reversal_id"),
        (["reversal_id", "--num-train", "-5"], "--num-train must be a non-negative integer"),
        (["reversal_id", "--push-to-hub", "org/name"], "cannot push to the Hub"),
        (
            ["reversal_id", "--num-train", "1000000000000"],
            "--num-train is 1,000,000,000,000, above the cap of 10,000,000 rows per split; "
            "pass --force",
        ),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys, monkeypatch, args, message):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    code, _, err = run_cli(capsys, "export", *args, "--out", tmp_path / "data")
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("attentionspan export: error: ")
    assert message in err
    assert not (tmp_path / "data").exists()


def test_non_empty_folder_needs_overwrite(tmp_path, capsys):
    out = tmp_path / "data"
    out.mkdir()
    (out / "x").write_text("x")
    code, _, err = run_cli(capsys, "export", "reversal_ood", "--out", out, *SIZE_ARGS)
    assert code == 2 and "pass --overwrite" in err
    code, _, _ = run_cli(
        capsys, "export", "reversal_ood", "--out", out, "--overwrite",
        "--cache-dir", tmp_path / "cache", *SIZE_ARGS,
    )  # fmt: skip
    assert code == 0 and not (out / "x").exists()


def test_a_small_space_is_noted_on_stderr(tmp_path, capsys):
    code, stdout, err = run_cli(
        capsys, "export", "reversal_id", "--out", tmp_path / "data",
        "--cache-dir", tmp_path / "cache", *SIZE_ARGS,
    )  # fmt: skip
    assert code == 0
    [note] = [line for line in err.splitlines() if "note:" in line]
    assert note.startswith("attentionspan export: note: attentionspan config 'reversal_id' has")
    assert "Warning" not in err  # the builder's warning is not printed as well


def test_the_data_cli_runs_alone_and_never_imports_the_harness(tmp_path):
    import subprocess
    import sys

    code = (
        "import sys, runpy\n"
        "sys.argv = ['attentionspan_datasets', '--help']\n"
        "try:\n"
        "    runpy.run_module('attentionspan_datasets', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('HARNESS' if any(m.split('.')[0] in ('harness', 'lm_eval_tasks', 'torch')\n"
        "      for m in sys.modules) else 'CLEAN')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=True
    )
    assert result.stdout.strip().endswith("CLEAN")
    assert "export" in result.stdout and "generate" in result.stdout
    assert "train" not in result.stdout.split("positional arguments")[1]


def test_add_data_commands_gives_a_parser_above_the_data_commands():
    import argparse

    from attentionspan_datasets.cli import DATA_COMMAND_MODULES, add_data_commands

    parser = argparse.ArgumentParser(prog="top")
    add_data_commands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["export", "reversal_id", "--out", "x", "--force"])
    assert args.force and callable(args.func)
    assert not any("harness" in name for name in DATA_COMMAND_MODULES)
