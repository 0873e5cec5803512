"""harness.foundation.ownership end to end: `train --overwrite` and `reproduce --overwrite`
interrupted mid-run (SIGINT, SIGTERM, kill -9) in a subprocess, and --overwrite with a model
that cannot load: the earlier run is found as it was, byte for byte.

The rule these check (the module's docstring): the earlier run moves aside when the new one
starts and goes only when the new one is whole; an interruption puts it back at once, a
kill -9 on the next command that claims the folder.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from attentionspan_datasets.ownership import ASIDE, MANIFEST, write_manifest
from harness.foundation.ownership import claim_output
from harness.training.train import train
from tests.harness.launch import TINY_SCRATCH_ARGS
from tests.harness.test_train import tiny_config

REPO = Path(__file__).resolve().parents[2]
WAIT_S = 180  # for the new run to reach the point the signal is sent at


def snapshot(folder: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(folder)): p.read_bytes() if p.is_file() else None
        for p in sorted(folder.rglob("*"))
    }


def stamps(folder: Path) -> dict[str, tuple[int, int]]:
    """(inode, change time) of everything in the folder, hidden entries included: a move
    aside and back leaves the bytes as they were but not these (a rename sets the change
    time, the manifest is rewritten). The folder's own times are left out: the check that
    it can be written creates and removes a probe file in it."""
    return {
        str(p.relative_to(folder)): (p.lstat().st_ino, p.lstat().st_ctime_ns)
        for p in sorted(folder.rglob("*"))
    }


def start(args: list[str], cwd: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(process: subprocess.Popen, ready, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not ready():
        if process.poll() is not None:
            out, err = process.communicate()
            pytest.fail(f"ended ({process.returncode}) before {what}: {err[-2000:]}")
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"no {what} after {WAIT_S} s")
        time.sleep(0.1)


def stop(process: subprocess.Popen, how: str) -> tuple[int, str]:
    process.send_signal({"SIGINT": signal.SIGINT, "SIGTERM": signal.SIGTERM}.get(how, 9))
    try:
        _, err = process.communicate(timeout=WAIT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        raise
    return process.returncode, err


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A finished train run (tiny scratch model), as `train` leaves it with its manifest."""
    root = tmp_path_factory.mktemp("overwrite")
    run = root / "run"
    with claim_output("--output", run, "train"):
        train(tiny_config(run, max_steps=2, eval_size=2), progress=False)
    return run


def new_checkpoint(out: Path, old: set[str]):
    """True once the replacing run saved a checkpoint of its own (a whole one: renamed)."""

    def ready() -> bool:
        return any(p.name.startswith("checkpoint-") and p.name not in old for p in out.iterdir())

    return ready


# kill -9 is the fast one (the next command puts the earlier run back); the signals the
# command handles take as long again each
SIGNALS = [
    pytest.param("SIGINT", marks=pytest.mark.slow),
    pytest.param("SIGTERM", marks=pytest.mark.slow),
    "kill -9",
]


@pytest.mark.parametrize("how", SIGNALS)
def test_an_interrupted_train_overwrite_leaves_the_earlier_run(finished_run, tmp_path, how):
    out = Path(shutil.copytree(finished_run, tmp_path / "run"))
    before = snapshot(out)
    args = ["train", "--model", "scratch", "--config", "reversal_id", "--output", str(out)]
    args += [*TINY_SCRATCH_ARGS, "--max-steps", "100000", "--save-every", "2", "--no-progress"]
    process = start([*args, "--overwrite"], tmp_path)
    wait_for(process, new_checkpoint(out, {p.name for p in out.iterdir()}), "new checkpoint")
    time.sleep(1)  # a few steps past it, as a user's interruption would be
    status, err = stop(process, how)
    if how == "kill -9":
        assert status == -9
        assert (out / ASIDE).is_dir()  # nothing ran: the earlier run waits aside
        # the next command on the folder (a plain train) puts it back, then refuses
        done = start(args, tmp_path)
        _, err = done.communicate(timeout=WAIT_S)
        assert done.returncode == 2, err
        assert "the earlier run is back as it was" in err
        assert "holds a finished run of attentionspan train" in err
    else:
        assert status == {"SIGINT": 130, "SIGTERM": 143}[how], err
        assert "is kept as it was (the run replacing it did not finish" in err
        assert "--resume" not in err  # the new run is not kept: nothing to resume
    assert snapshot(out) == before


def earlier_reproduce(out: Path) -> None:
    """A reproduce folder as an earlier run leaves it, and a user's files beside it named as
    reproduce names its own."""
    (out / "stages").mkdir(parents=True)
    (out / "stages" / "reversal-eval.json").write_text('{"earlier": true}\n')
    (out / "settings.json").write_text('{"earlier": true}\n')
    (out / "report.md").write_text("# the earlier report\n")
    write_manifest(out, "reproduce", ["stages", "settings.json", "report.md"])
    (out / "reversal-notes.md").write_text("the user's\n")
    (out / "summary.png").write_bytes(b"the user's")


REPRODUCE_TINY = [
    "--config", "reversal", "--num-heads", "4", "--num-validation", "4", "--num-test", "4",
    "--num-attention", "3", "--batch-size", "4", "--counts", "1", "2", "--strengths", "1.0",
    "--control-seeds", "0", "--ood", "max_length=12", "--device", "cpu", "--no-progress",
]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "kill -9"])
def test_an_interrupted_reproduce_overwrite_leaves_the_earlier_run(finished_run, tmp_path, how):
    out = tmp_path / "repro"
    earlier_reproduce(out)
    before = snapshot(out)
    model = str(finished_run / "final")
    args = ["reproduce", "--model", model, "--output", str(out), *REPRODUCE_TINY]
    process = start([*args, "--overwrite"], tmp_path)

    # the new run's first stage file: it is well under way
    def new_stage() -> bool:  # the earlier run's stages wait aside meanwhile
        return (out / ASIDE).is_dir() and any((out / "stages").glob("*.json"))

    wait_for(process, new_stage, "stage of the new run")
    status, err = stop(process, how)
    if how == "kill -9":
        assert status == -9 and (out / ASIDE).is_dir()
        claim_output("--output", out, "reproduce")  # the next reproduce's claim
    else:
        assert status == {"SIGINT": 130, "SIGTERM": 143}[how], err
    assert snapshot(out) == before


def earlier_results(command: str, out: Path) -> None:
    out.mkdir()
    (out / "results.json").write_text('{"earlier": true}\n')
    (out / "attention.json").write_text('{"earlier": true}\n')
    (out / "report.md").write_text("# the earlier report\n")
    write_manifest(out, command, ["results.json", "attention.json", "report.md"])
    (out / "notes.txt").write_text("the user's\n")


BROKEN = ["no weights", "truncated weights", "torn config", "nan weights", "short context"]


@pytest.mark.parametrize("command", ["train", "eval", "attention", "reproduce", "pretrained"])
@pytest.mark.parametrize("broken", BROKEN)
def test_overwrite_with_a_model_that_cannot_serve_leaves_the_earlier_run(
    finished_run, tmp_path, command, broken, capsys
):
    """A typo in --model (a folder without weights), weights cut short, a config.json cut
    short, NaN weights, a context shorter than the task: refused in one line before the
    folder is touched: the earlier run byte-identical, and never moved aside and back
    (every entry's inode and time as they were, the hidden ones too)."""
    import json

    from harness.cli import main

    model = Path(shutil.copytree(finished_run / "final", tmp_path / "model"))
    if broken == "no weights":
        (model / "model.safetensors").unlink()
    elif broken == "truncated weights":
        weights = (model / "model.safetensors").read_bytes()
        (model / "model.safetensors").write_bytes(weights[: len(weights) // 2])
    elif broken == "torn config":
        config = (model / "config.json").read_text()
        (model / "config.json").write_text(config[: len(config) // 2])
    elif broken == "nan weights":
        from safetensors.torch import load_file, save_file

        weights = load_file(str(model / "model.safetensors"))
        first = sorted(weights)[0]
        weights[first] = weights[first] * float("nan")
        save_file(weights, str(model / "model.safetensors"), metadata={"format": "pt"})
    else:
        config = json.loads((model / "config.json").read_text())
        (model / "config.json").write_text(json.dumps({**config, "max_position_embeddings": 8}))
    if command == "train":
        out = Path(shutil.copytree(finished_run, tmp_path / "out"))
        args = ["train", "--model", str(model), "--config", "reversal_id", "--max-steps", "2"]
    else:
        out = tmp_path / "out"
        earlier_results("reproduce" if command == "pretrained" else command, out)
        args = {
            "eval": ["eval", "--model", str(model), "--configs", "reversal_id", "-n", "2"],
            "attention": ["attention", "--model", str(model), "--configs", "reversal_id"],
            "reproduce": ["reproduce", "--model", str(model), "--config", "reversal"],
            "pretrained": ["reproduce", "--pretrained", str(model), "--tasks", "reversal"],
        }[command]
    before, touched = snapshot(out), stamps(out)
    capsys.readouterr()
    assert main([*args, "--output", str(out), "--overwrite", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(model) in err[0], err
    assert snapshot(out) == before
    assert stamps(out) == touched
    assert not (out / MANIFEST).read_text().count('"open"')


def test_overwrite_with_a_dataset_that_does_not_exist_leaves_the_earlier_run(
    finished_run, tmp_path, monkeypatch, capsys
):
    """Refused in one line at once (offline: not after the Hub's retries and a
    ConnectionError traceback), before the folder is touched."""
    from harness.cli import main
    from harness.foundation import models

    monkeypatch.setattr(models, "hub_reachable", lambda: False)
    out = Path(shutil.copytree(finished_run, tmp_path / "out"))
    before = snapshot(out)
    args = ["train", "--model", "scratch", "--dataset", "nosuch_dataset", "--output", str(out)]
    assert main([*args, "--overwrite", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--dataset 'nosuch_dataset' is not a folder here" in err[0], err
    assert snapshot(out) == before
