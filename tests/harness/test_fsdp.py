"""FSDP through accelerate's config runs the training DDP runs: two CPU processes (gloo)
launched with docs/accelerate/fsdp_cpu.yaml log the DDP run's losses and evaluations, save
its weights and optimizer state (full, in the same files), and resume to the uninterrupted
run; FSDP1, which accelerate 1.15 cannot run without GPUs, is refused in one line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from harness.foundation.runs import RUN_CONFIG_FILE, TRAINING_STATE_FILE
from harness.training.train import train
from tests.harness.launch import (
    ACCELERATE_TWO_CPU_FSDP_PROCESSES,
    ACCELERATE_TWO_CPU_PROCESSES,
    TINY_SCRATCH_ARGS,
    launch_train,
)
from tests.harness.test_train import REPO, log_lines, tiny_config, weights

STEPS, SAVE_EVERY = 6, 3
QUIET = ["--no-progress"]
OPTIONS = [
    "--model",
    "scratch",
    "--lr",
    "1e-3",
    "--max-steps",
    str(STEPS),
    "--batch-size",
    "2",
    "--log-every",
    "1",
    "--eval-every",
    str(SAVE_EVERY),  # an evaluation during training: on a gathered copy under FSDP
    "--eval-size",
    "6",
    "--save-every",
    str(SAVE_EVERY),
    *QUIET,
    *TINY_SCRATCH_ARGS,
]


def launch(launch_args: list[str], *options: str) -> str:
    """Run the command; its stderr."""
    done = subprocess.run(
        launch_train(launch_args, *options),
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stderr


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The same run (options, seed, data) under DDP and under FSDP."""
    out = {}
    for name, launch_args in (
        ("ddp", ACCELERATE_TWO_CPU_PROCESSES),
        ("fsdp", ACCELERATE_TWO_CPU_FSDP_PROCESSES),
    ):
        out[name] = tmp_path_factory.mktemp(name)
        stderr = launch(launch_args, "--output", str(out[name]), *OPTIONS)
        # accelerate 1.15 alone would have run DDP here: the FSDP run says it sharded
        assert ("FSDP2: the model is sharded over 2 processes" in stderr) == (name == "fsdp")
    return out


def losses(folder) -> list[tuple[int, float]]:
    return [(r["step"], r["loss"]) for r in log_lines(folder) if "loss" in r]


def optimizer(folder):
    return torch.load(Path(folder) / TRAINING_STATE_FILE, weights_only=True)["optimizer"]


@pytest.mark.slow
def test_fsdp_trains_evaluates_and_saves_as_ddp_does(runs):
    ddp, fsdp = runs["ddp"], runs["fsdp"]
    assert [step for step, _ in losses(fsdp)] == list(range(1, STEPS + 1))
    for (_, a), (_, b) in zip(losses(fsdp), losses(ddp), strict=True):
        assert a == pytest.approx(b, rel=1e-5)
    evaluations = [[r for r in log_lines(run) if "eval" in r] for run in (fsdp, ddp)]
    assert evaluations[0] == evaluations[1] and len(evaluations[0]) == 1
    assert evaluations[0][0]["eval"]["count"] == 6  # gathered from both processes
    final = [json.loads((run / "final" / RUN_CONFIG_FILE).read_text()) for run in (fsdp, ddp)]
    assert final[0]["final_eval"] == final[1]["final_eval"]
    # The final model as a DDP run saves it (the tied lm_head once): `attentionspan eval` reads it.
    for name in (f"checkpoint-{SAVE_EVERY}", "final"):
        a, b = weights(fsdp / name), weights(ddp / name)
        assert a.keys() == b.keys()
        for key in b:
            torch.testing.assert_close(a[key], b[key], rtol=0, atol=1e-6)
    # The optimizer state, gathered: numbered and full as a lone optimizer's.
    a, b = optimizer(fsdp / f"checkpoint-{SAVE_EVERY}"), optimizer(ddp / f"checkpoint-{SAVE_EVERY}")
    assert a["param_groups"] == b["param_groups"]
    assert a["state"].keys() == b["state"].keys()
    for index, state in b["state"].items():
        for key, value in state.items():
            torch.testing.assert_close(a["state"][index][key], value, rtol=0, atol=1e-6)


@pytest.mark.slow
def test_an_fsdp_checkpoint_resumes_under_fsdp_to_the_uninterrupted_run(runs, tmp_path):
    # The run as a crash after step SAVE_EVERY leaves it: only its first checkpoint.
    shutil.copytree(runs["fsdp"], tmp_path, dirs_exist_ok=True)
    for later in ("final", f"checkpoint-{STEPS}"):
        shutil.rmtree(tmp_path / later)
    stderr = launch(
        ACCELERATE_TWO_CPU_FSDP_PROCESSES, "--output", str(tmp_path), "--resume", *QUIET
    )
    assert "FSDP2: the model is sharded over 2 processes" in stderr
    assert losses(tmp_path) == losses(runs["fsdp"])
    resumed, uninterrupted = weights(tmp_path / "final"), weights(runs["fsdp"] / "final")
    for key in uninterrupted:  # the optimizer's moments were loaded into the shards
        torch.testing.assert_close(resumed[key], uninterrupted[key], rtol=0, atol=1e-7)


@pytest.mark.skipif(torch.cuda.is_available(), reason="accelerate runs FSDP1 on GPUs")
def test_fsdp1_without_gpus_is_refused_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    monkeypatch.setenv("FSDP_VERSION", "1")
    with pytest.raises(ValueError, match="FSDP without GPUs needs fsdp_version 2"):
        train(tiny_config(tmp_path / "run"), progress=False)
    assert not (tmp_path / "run").exists()
