"""`attentionspan launch` (harness/commands/launch.py): a command over several processes whose
errors are one line, as in one process. Refusals before any process starts, a
process's refusal after the start passed on without the launcher's traceback, and (slow) two
real CPU processes that fail and that succeed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.cli import main as cli_main
from harness.commands import launch
from tests.harness.launch import (
    ACCELERATE_TWO_CPU_FSDP_PROCESSES,
    ACCELERATE_TWO_CPU_PROCESSES,
    TINY_SCRATCH_ARGS,
)

REPO = Path(__file__).resolve().parents[2]
FSDP = ACCELERATE_TWO_CPU_FSDP_PROCESSES
TRAIN = ["train", "--model", "scratch", "--config", "reversal_id", "--no-progress"]


@pytest.fixture
def no_processes(monkeypatch):
    """The launcher replaced by one that fails the test: nothing may start."""

    def started(args):
        raise AssertionError(f"processes started: {args.training_script}")

    monkeypatch.setattr(launch, "run_launcher", started)


def run(words: list[str], capsys) -> tuple[int, list[str], str]:
    """(status, stderr lines, stdout) of `attentionspan launch WORDS`, in this process."""
    try:
        status = cli_main(["launch", *words])
    except SystemExit as done:
        status = done.code
    captured = capsys.readouterr()
    return status, captured.err.splitlines(), captured.out


def test_a_bad_value_is_refused_before_any_process_starts(no_processes, tmp_path, capsys):
    out = tmp_path / "run"
    status, err, _ = run([*FSDP, *TRAIN, "--lr", "nan", "--output", str(out)], capsys)
    assert status == 2
    assert err == ["attentionspan train: error: 'lr' must be a finite number, got nan"]
    assert not out.exists()


@pytest.mark.parametrize(
    "words,line",
    [
        (["--bogus"], "attentionspan train: error: unrecognized arguments: --bogus"),
        (["--max-steps", "x"], "attentionspan train: error: argument --max-steps"),
    ],
    ids=["unknown-option", "not-a-number"],
)
def test_the_commands_own_parser_refuses_in_one_line(words, line, no_processes, capsys):
    status, err, _ = run([*FSDP, *TRAIN, *words], capsys)
    assert status == 2 and len(err) == 1 and err[0].startswith(line), err


def test_a_users_file_in_output_is_refused_and_kept(no_processes, tmp_path, capsys):
    """The ownership rule (harness.foundation.ownership), checked here: not one process."""
    notes = tmp_path / "notes.txt"
    notes.write_bytes(b"mine\n")
    status, err, _ = run([*FSDP, *TRAIN, "--output", str(tmp_path)], capsys)
    assert status == 2 and len(err) == 1, err
    assert err[0].startswith("attentionspan train: error: --output") and "notes.txt" in err[0]
    assert notes.read_bytes() == b"mine\n" and os.listdir(tmp_path) == ["notes.txt"]


@pytest.mark.parametrize(
    "words,line",
    [
        (
            ["--num_processes", "2", "trian"],
            "attentionspan launch: error: unknown command 'trian': launch runs train, eval, "
            "attention, heads or reproduce, given after the launcher options",
        ),
        (
            ["--num_processes", "2"],
            "attentionspan launch: error: give COMMAND (train, eval, attention, heads, reproduce) "
            "after the launcher options (see attentionspan launch --help)",
        ),
        (["--bogus", "2", "train"], "attentionspan launch: error: unrecognized arguments"),
    ],
    ids=["unknown-command", "no-command", "unknown-launcher-option"],
)
def test_a_wrong_command_or_launcher_option_is_one_line(words, line, no_processes, capsys):
    status, err, _ = run(words, capsys)
    assert status == 2 and len(err) == 1 and err[0].startswith(line), err


def test_help_says_what_it_is_and_shows_the_documented_launches(no_processes, capsys):
    for words in (["--help"], ["--multi_gpu", "-h", "train"]):
        status, err, out = run(words, capsys)
        assert status == 0 and err == []
        assert out.startswith("usage: attentionspan launch [LAUNCHER OPTIONS] COMMAND")
        assert "accelerate launch" in out and "one line" in out
        assert "launch --config_file docs/accelerate/fsdp_cpu.yaml train" in out
        assert "launch --multi_gpu --num_processes 2 train" in out
        assert all(command in out for command in launch.COMMANDS)


def test_the_command_help_after_it_is_the_commands(no_processes, capsys):
    status, _, out = run(["--multi_gpu", "train", "--help"], capsys)
    assert status == 0 and out.startswith("usage: attentionspan train")


def test_the_status_is_the_process_that_failed_on_its_own():
    """The main process refused (2); the launcher then ended the other (SIGTERM: -15), even
    when that is recorded first."""

    def failure(exitcode, timestamp):
        return SimpleNamespace(exitcode=exitcode, timestamp=timestamp)

    assert launch.failed_status([failure(2, 5), failure(-15, 5)]) == 2
    assert launch.failed_status([failure(-15, 4), failure(2, 5)]) == 2
    assert launch.failed_status([failure(1, 6), failure(2, 5)]) == 2
    assert launch.failed_status([failure(-9, 5)]) == 128 + 9  # killed: as a shell says


def test_a_single_process_failure_passes_on_its_status(monkeypatch):
    """One process runs as a subprocess (accelerate's simple launcher): CalledProcessError."""
    import accelerate.commands.launch

    def fails(args):
        raise subprocess.CalledProcessError(returncode=2, cmd=["python"])

    monkeypatch.setattr(accelerate.commands.launch, "launch_command", fails)
    assert launch.run_launcher(SimpleNamespace(debug=True)) == 2


def launch_command(*words: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness.commands.launch", *words],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        timeout=300,
    )


@pytest.mark.slow
def test_a_process_that_fails_after_the_start_is_one_line(tmp_path):
    """Two FSDP processes on the CPU; the scratch model's context is found too short once it
    is built (after the launch): the main process's line, its status, nothing else."""
    notes = tmp_path / "notes.txt"
    notes.write_bytes(b"mine\n")
    out = tmp_path / "run"
    done = launch_command(
        *FSDP, *TRAIN, *TINY_SCRATCH_ARGS, "--scratch-max-positions", "16", "--output", str(out)
    )
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and lines[0].startswith(
        "attentionspan train: error: model 'scratch': the model's context"
    ), done.stderr
    assert notes.read_bytes() == b"mine\n" and not out.exists()


@pytest.mark.slow
def test_two_processes_train(tmp_path):
    done = launch_command(
        *ACCELERATE_TWO_CPU_PROCESSES,
        *TRAIN,
        *TINY_SCRATCH_ARGS,
        "--lr",
        "1e-3",
        "--max-steps",
        "2",
        "--batch-size",
        "2",
        "--eval-size",
        "4",
        "--output",
        str(tmp_path),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "final" / "attentionspan_run.json").is_file()
    # the final folder, said by the main process alone; nothing of the launcher's
    assert done.stdout.splitlines() == [str(tmp_path / "final")]
    assert "torch.distributed" not in done.stderr and "Traceback" not in done.stderr


# --- tensor parallelism: what each process would refuse, refused before any starts -------
@pytest.fixture(scope="module")
def tp_models(tmp_path_factory):
    """A Llama of 4 query heads, a GPT-2 (no plan in transformers) and a BERT config."""
    from transformers import BertConfig

    from tests.harness.conftest import save_tiny_model

    root = tmp_path_factory.mktemp("tp_launch")
    BertConfig(
        hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64
    ).save_pretrained(root / "bert")
    return {
        "llama": str(save_tiny_model("llama", root / "llama")),
        "gpt2": str(save_tiny_model("gpt2", root / "gpt2")),
        "bert": str(root / "bert"),
    }


HEADS = ["heads", "--config", "reversal_id", "-n", "2", "--tp-plan", "auto"]


@pytest.mark.parametrize(
    "launcher, model, extra, line",
    [
        (
            ["--num_processes", "3"],
            "llama",
            [],
            "its 4 attention heads per layer cannot be split over 3 processes",
        ),
        (["--num_processes", "2"], "gpt2", [], "model_type 'gpt2' has no tensor-parallel plan"),
        (["--num_processes", "2"], "bert", [], "model_type 'bert' has no tensor-parallel plan"),
        (
            ["--num_processes", "2"],
            "llama",
            ["--device-map", "auto"],
            "--tp-plan and --device-map exclude each other",
        ),
        (
            ["--num_processes", "2"],
            "llama",
            ["--device", "cpu"],
            "give --device cpu or --tp-plan, not both",
        ),
        ([], "llama", [], "--tp-plan shards the model over the launched processes: give "),
        (["--num_processes", "1"], "llama", [], "--tp-plan shards the model over several"),
        (
            [*FSDP, "--num_processes", "2"],
            "llama",
            [],
            "without an accelerate config file, FSDP or DeepSpeed",
        ),
    ],
    ids=["3-for-4-heads", "gpt2", "bert", "device-map", "device", "no-count", "one", "fsdp"],
)
def test_tensor_parallelism_is_refused_before_any_process_starts(
    launcher, model, extra, line, tp_models, no_processes, tmp_path, capsys
):
    words = [*launcher, *HEADS, "--model", tp_models[model], *extra]
    status, err, _ = run([*words, "--output", str(tmp_path / "h.json")], capsys)
    assert status == 2 and len(err) == 1, err  # no torch elastic report: nothing started
    assert err[0].startswith("attentionspan heads: error: ") and line in err[0], err[0]
    assert not (tmp_path / "h.json").exists()


def test_eval_has_no_device_option_and_says_so(tp_models, no_processes, capsys):
    """`--device cpu` was read as --device-map cpu (an abbreviation), and beside --tp-plan
    refused as a device map no one gave."""
    words = ["--num_processes", "2", "eval", "--model", tp_models["llama"], "--tp-plan", "auto"]
    status, err, _ = run([*words, "--device", "cpu"], capsys)
    assert status == 2 and len(err) == 1, err
    assert err[0].startswith("attentionspan eval: error: eval has no --device option (argparse")
    assert "--device-map cpu" in err[0] and "exclude each other" not in err[0]


def test_a_tensor_parallel_launch_starts_torch_distributed_processes(
    tp_models, monkeypatch, tmp_path, capsys
):
    started = []
    monkeypatch.setattr(launch, "run_launcher", lambda args: started.append(args) or 0)
    words = ["--num_processes", "2", *HEADS, "--model", tp_models["llama"]]
    status, err, _ = run([*words, "--output", str(tmp_path / "h.json")], capsys)
    assert status == 0 and err == []
    (args,) = started
    assert args.multi_gpu and args.num_processes == 2  # gloo on a CPU, NCCL on GPUs
    assert args.training_script == "harness.commands.heads" and args.module


@pytest.mark.slow
def test_heads_sharded_over_two_launched_processes(tp_models, tmp_path):
    """What the single process ranks, with the process count recorded, and nothing of the
    launcher's on stderr."""
    import json

    from harness.cli import main

    options = [*HEADS[:-2], "--model", tp_models["llama"], "--no-progress", "--threads", "1"]
    assert main([*options, "--output", str(tmp_path / "one.json")]) == 0
    done = launch_command(
        "--num_processes",
        "2",
        *options,
        "--tp-plan",
        "auto",
        "--output",
        str(tmp_path / "two.json"),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "torch.distributed" not in done.stderr and "Traceback" not in done.stderr
    one, two = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("one", "two"))
    assert two["order"] == one["order"]
    assert (one["source"]["processes"], two["source"]["processes"]) == (1, 2)
