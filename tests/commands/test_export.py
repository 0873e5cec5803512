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
        (
            ["reversal_idd"],
            "unknown config(s) reversal_idd (did you mean 'reversal_id'?); allowed: reversal_id",
        ),
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
    """An earlier export is replaced only with --overwrite; a folder with a user's file in it
    never is (the whole folder is swapped), with or without --overwrite."""
    out = tmp_path / "data"
    args = ["export", "reversal_ood", "--out", out, "--cache-dir", tmp_path / "cache", *SIZE_ARGS]
    assert run_cli(capsys, *args)[0] == 0
    code, _, err = run_cli(capsys, *args)
    assert code == 2 and "pass --overwrite" in err
    assert run_cli(capsys, *args, "--overwrite")[0] == 0
    (out / "x").write_text("x")
    for extra in ([], ["--overwrite"]):
        code, _, err = run_cli(capsys, *args, *extra)
        assert code == 2 and len(err.strip().splitlines()) == 1 and "'x'" in err, err
        assert (out / "x").read_text() == "x"


def test_a_symbolic_link_as_out_is_refused_before_building(tmp_path, capsys, monkeypatch):
    """The new folder is renamed into place: over a link that failed after the whole build,
    saying to pass the --overwrite that was given. Refused first, in one line."""
    from attentionspan_datasets import hub_export

    def never(*args, **kwargs):
        raise AssertionError("built before the refusal")

    monkeypatch.setattr(hub_export, "build_config", never)
    (tmp_path / "target").mkdir()
    (tmp_path / "target" / "README.md").write_text("an earlier export's card\n")
    (tmp_path / "link").symlink_to(tmp_path / "target", target_is_directory=True)
    for extra in ([], ["--overwrite"]):
        code, _, err = run_cli(capsys, "export", "reversal_id", "--out", tmp_path / "link", *extra)
        assert code == 2 and err.count("\n") == 1, err
        assert "is a symbolic link" in err and "give the folder it points to" in err
    assert (tmp_path / "link").is_symlink()
    assert (tmp_path / "target" / "README.md").read_text() == "an earlier export's card\n"


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


# --- where the folder goes ----------------------------------------------------------------


def test_two_exports_into_one_folder_do_not_both_succeed(tmp_path, monkeypatch):
    """Both find --out missing and build; without --overwrite the second rename fails
    (one line naming the folder) and the first's folder stays whole. With --overwrite both
    succeed and the folder is one export's, complete."""
    import threading

    from attentionspan_datasets import hub_export

    write_parquet = hub_export.write_parquet
    both_built = threading.Barrier(2, timeout=60)

    def write_after_both_built(dataset_dict, folder, config):
        both_built.wait()  # neither renames before the other has passed every check
        return write_parquet(dataset_dict, folder, config)

    monkeypatch.setattr(hub_export, "write_parquet", write_after_both_built)
    sizes = {"num_train": 12, "num_validation": 4, "num_test": 4}

    for overwrite in (False, True):
        out = tmp_path / f"data-{overwrite}"
        results = {}

        def run(name, out=out, overwrite=overwrite, results=results):
            try:
                hub_export.export(
                    ["reversal_ood"], out, overwrite=overwrite,
                    cache_dir=str(tmp_path / f"cache-{name}"), **sizes,
                )  # fmt: skip
                results[name] = "ok"
            except FileExistsError as error:
                results[name] = str(error)

        threads = [threading.Thread(target=run, args=(name,)) for name in "ab"]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        outcomes = sorted(results.values())
        if overwrite:
            assert outcomes == ["ok", "ok"]
        else:
            assert outcomes[1] == "ok", outcomes
            assert str(out) in outcomes[0] and "pass --overwrite" in outcomes[0]
            assert "\n" not in outcomes[0]
        ds = datasets.load_dataset(str(out), "reversal_ood", cache_dir=str(tmp_path / "read"))
        assert ds.num_rows == {"train": 12, "validation": 4, "test": 4}
        assert sorted(p.name for p in out.iterdir()) == [
            ".attentionspan.json",
            "README.md",
            "reversal_ood",
        ]
    assert sorted(p.name for p in tmp_path.glob(".data*")) == []  # no temporary left


def test_two_export_processes_into_one_folder(tmp_path):
    """The same race between two processes, through the console command: one succeeds
    without --overwrite, the other is refused in one line, and the folder is whole."""
    import subprocess
    import sys

    out = tmp_path / "data"
    command = [sys.executable, "-m", "attentionspan_datasets", "export", "reversal_ood"]
    command += ["--out", str(out), *SIZE_ARGS]
    runs = [
        subprocess.Popen(
            [*command, "--cache-dir", str(tmp_path / f"cache{i}")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for i in range(2)
    ]
    results = [(run.wait(120), run.stderr.read()) for run in runs]
    # Whether the loser saw the winner's folder at its first check or only at its rename,
    # it is refused the same way.
    assert sorted(code for code, _ in results) == [0, 2], results
    refused = [err for code, err in results if code == 2][0]
    lines = [line for line in refused.splitlines() if "error:" in line]
    assert len(lines) == 1 and str(out) in lines[0], refused
    assert "not empty" in lines[0] and "--overwrite" in lines[0]
    ds = datasets.load_dataset(str(out), "reversal_ood", cache_dir=str(tmp_path / "read"))
    assert ds.num_rows == {"train": 12, "validation": 4, "test": 4}


def test_a_full_disk_is_one_line_naming_the_folder(tmp_path, capsys, monkeypatch):
    import errno

    from attentionspan_datasets import hub_export

    def full(dataset_dict, folder, config):
        (folder / config).mkdir()
        path = folder / config / "train-00000-of-00001.parquet"
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(hub_export, "write_parquet", full)
    out = tmp_path / "data"
    code, _, err = run_cli(
        capsys, "export", "reversal_id", "--out", out, "--cache-dir", tmp_path / "cache",
        *SIZE_ARGS,
    )  # fmt: skip
    assert code == 2
    [line] = [line for line in err.splitlines() if "error" in line]
    assert line.startswith(f"attentionspan export: error: export to --out '{out}' failed")
    assert line.endswith(": No space left on device") and "train-00000" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]  # no half folder


def _mount_tmpfs(folder, options):
    import subprocess

    folder.mkdir(exist_ok=True)
    command = ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)]
    try:
        done = subprocess.run(command, capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _umount(folder):
    import subprocess

    subprocess.run(["umount", str(folder)], capture_output=True, timeout=10, check=False)


@pytest.fixture
def tiny_disk(tmp_path):
    """A 200 KB file system (needs root: `mount -t tmpfs`); skipped where none can be had.
    test_a_full_disk_is_one_line_naming_the_folder covers the same path without it."""
    import os

    folder = tmp_path / "tiny"
    if os.geteuid() != 0 or not _mount_tmpfs(folder, "size=200k"):
        pytest.skip("mounting a tmpfs needs root")
    yield folder
    _umount(folder)


def test_a_really_full_disk(tiny_disk, tmp_path, capsys):
    out = tiny_disk / "data"
    code, _, err = run_cli(
        capsys, "export", "reversal_id", "--out", out, "--cache-dir", tmp_path / "cache"
    )
    assert code == 2
    [line] = [line for line in err.splitlines() if "error" in line]
    assert f"--out '{out}' failed" in line and "No space left on device" in line
    assert list(tiny_disk.iterdir()) == []  # the temporary folder is removed


@pytest.fixture
def read_only_dir(tmp_path):
    """A folder nobody may write in: mode 0555 for a user, a read-only tmpfs for root (who
    ignores modes); skipped where neither works."""
    import os

    folder = tmp_path / "read-only"
    if os.geteuid() != 0:
        folder.mkdir()
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)
        return
    if not _mount_tmpfs(folder, "ro,size=64k"):
        pytest.skip("no read-only folder: root cannot mount here")
    yield folder
    _umount(folder)


def test_a_read_only_out_or_cache_is_refused_before_building(read_only_dir, tmp_path, capsys):
    import time

    started = time.perf_counter()
    code, _, err = run_cli(capsys, "export", "reversal_id", "--out", read_only_dir / "data")
    assert code == 2 and err.count("\n") == 1
    assert f"--out '{read_only_dir / 'data'}': cannot write in '{read_only_dir}'" in err
    assert "Read-only file system" in err or "Permission denied" in err
    code, _, err = run_cli(
        capsys, "export", "reversal_id", "--out", tmp_path / "data",
        "--cache-dir", read_only_dir / "cache",
    )  # fmt: skip
    assert code == 2 and err.count("\n") == 1
    assert f"--cache-dir '{read_only_dir / 'cache'}' cannot be written" in err
    assert time.perf_counter() - started < 5  # nothing was built
    assert not (tmp_path / "data").exists()


def test_the_api_refuses_a_read_only_cache_dir(read_only_dir):
    import attentionspan_datasets as api

    with pytest.raises(ValueError, match="'cache_dir' .* cannot be written") as error:
        api.load("reversal_id", cache_dir=str(read_only_dir))
    assert "\n" not in str(error.value)
    with pytest.raises(ValueError, match="'cache_dir' .* cannot be written"):
        datasets.load_dataset("attentionspan", "reversal_id", cache_dir=str(read_only_dir / "c"))


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (
            ["generate", "reversal", "--bogus"],
            "attentionspan generate: error: unrecognized arguments: --bogus "
            "(see attentionspan generate --help)",
        ),
        (
            ["export", "reversal_id", "--out", "x", "--num-trian", "5"],
            "attentionspan export: error: unrecognized arguments: --num-trian 5 "
            "(see attentionspan export --help)",
        ),
        (
            ["show", "--index", "x"],
            "attentionspan show: error: argument --index: invalid int value: 'x' "
            "(see attentionspan show --help)",
        ),
    ],
)
def test_the_data_cli_names_the_subcommand_in_one_line(capsys, argv, line):
    """`python -m attentionspan_datasets` refuses as `attentionspan` does."""
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 2
    assert capsys.readouterr().err == line + "\n"
