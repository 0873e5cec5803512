"""`attentionspan train / eval / models`: end to end on tiny models, one-line errors, and no
torch import for commands that do not need it."""

from __future__ import annotations

import json
import os
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
        (["eval", "--model", "{tmp}/missing"], "model directory '{tmp}/missing' does not exist"),
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
    message = message.format(tmp=tmp_path)
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
    from harness.foundation.options import resolve_instruction

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
        assert "analy" not in parser.description  # no promise of what is not there


def test_each_module_registers_exactly_the_commands_listed_for_it():
    import argparse
    import importlib

    from harness.cli import COMMAND_MODULES, build_parser

    for module, names in COMMAND_MODULES.items():
        parser = argparse.ArgumentParser()
        subparsers = parser.add_subparsers(dest="command")
        importlib.import_module(module).add_parser(subparsers)
        assert tuple(subparsers.choices) == names, module
        only = build_parser(names[0])._subparsers._group_actions[0].choices
        assert tuple(only) == names  # a named command builds its own module's parsers only
    every = build_parser("--help")._subparsers._group_actions[0].choices
    assert list(every) == [n for names in COMMAND_MODULES.values() for n in names]


def test_every_command_module_is_registered_under_its_own_name():
    """`attentionspan CMD` and `python -m harness.commands.CMD` run one module: every module of
    harness/commands/ is in COMMAND_MODULES under the command its file names (a dash for an
    underscore), can run alone, and harness.commands' docstring names it."""
    import importlib

    import harness.commands
    from harness.cli import COMMAND_MODULES

    folder = REPO / "harness" / "commands"
    modules = {f"harness.commands.{p.stem}" for p in folder.glob("*.py") if p.stem != "__init__"}
    assert modules == {m for m in COMMAND_MODULES if m.startswith("harness.")}
    for module in modules:
        name = module.rsplit(".", 1)[1].replace("_", "-")
        assert COMMAND_MODULES[module] == (name,), module
        assert callable(importlib.import_module(module).main), module
        assert name in harness.commands.__doc__, name


@pytest.mark.parametrize(
    "module,argv,line",
    [
        ("baselines_table", ["missing.json"], "attentionspan baselines-table: error: "),
        ("results_doc", ["missing"], "attentionspan results-doc: error: --command, --machine"),
    ],
)
def test_python_m_a_document_command_gives_the_one_line_error(module, argv, line, tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", f"harness.commands.{module}", *argv],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and done.stderr.startswith(line), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("given", [["--command", "made it"], ["--check", "digest.json"]])
def test_a_document_command_errs_under_its_own_name(given, tmp_path, capsys):
    # results-doc's --command (the command that made the run) is not the command's name
    argv = ["results-doc", str(tmp_path), *given, "--machine", "m", "--date", "2026-11-28"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("attentionspan results-doc: error: "), err
    assert len(err.strip().splitlines()) == 1


def test_generate_starts_without_importing_the_harness_commands():
    import subprocess
    import sys

    code = (
        "import sys; from harness.cli import main; main(['generate', 'reversal_id', '-n', '1']);"
        "print(sorted(m for m in sys.modules if m.startswith(('harness.training.train', 'torch'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize(
    "error,status,line",
    [
        (ValueError("'x' must be >= 1,\ngot 0"), 2, "attentionspan train: error: 'x' must be"),
        (FileNotFoundError("no such file"), 2, "attentionspan train: error: no such file"),
        (KeyboardInterrupt(), 130, "attentionspan train: interrupted"),
    ],
)
def test_errors_are_one_line_with_their_status(error, status, line, capsys):
    from harness.foundation.options import run_guarded

    def fail(args):
        raise error

    assert run_guarded("train", fail, None) == status
    assert one_error_line(capsys).startswith(line)


def test_python_m_the_train_command_gives_the_same_one_line_error(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "harness.commands.train", "--output", str(tmp_path), "--lr", "nan"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert (
        done.stderr.strip() == "attentionspan train: error: 'lr' must be a finite number, got nan"
    )


@pytest.mark.slow
@pytest.mark.parametrize("module", ["harness.commands.eval", "harness.commands.heads"])
def test_python_m_a_command_module_gives_the_one_line_error(module, tmp_path):
    """The command modules run alone (as `accelerate launch -m` runs them)."""
    done = subprocess.run(
        [sys.executable, "-m", module, "--model", str(tmp_path / "missing")],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    command = "heads" if module.endswith("heads") else "eval"
    assert done.returncode == 2
    assert done.stderr.startswith(f"attentionspan {command}: error: model directory")
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.fixture(scope="module")
def interrupted_run(tmp_path_factory):
    """A run folder with a checkpoint at step 2 of 4 (killed there, as by kill -9)."""
    from harness.training.train import TrainConfig, train
    from tests.harness.test_train import TINY

    out = tmp_path_factory.mktemp("interrupted") / "run"
    config = TrainConfig(
        output=str(out), lr=1e-3, max_steps=4, save_every=2, eval_size=4, scratch=TINY
    )
    train(config, stop_after=2, progress=False)
    return out


def copy_of(folder, tmp_path, name="copy"):
    import shutil

    return Path(shutil.copytree(folder, tmp_path / name))


def with_run_file(tmp_path, tiny, content):
    folder = copy_of(tiny, tmp_path)
    (folder / "attentionspan_run.json").write_text(content)
    return folder


def with_pickled_weights(tmp_path, tiny):
    import pickle

    from safetensors.torch import load_file

    folder = copy_of(tiny, tmp_path)
    weights = load_file(str(folder / "model.safetensors"))
    (folder / "model.safetensors").unlink()
    weights["payload"] = Payload()
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps(weights))
    return folder


def with_pickled_state(tmp_path, run):
    import pickle

    folder = copy_of(run, tmp_path)
    state = {"optimizer": Payload(), "scheduler": {}}
    (folder / "checkpoint-2" / "training_state.pt").write_bytes(pickle.dumps(state))
    return folder


class Payload:
    def __reduce__(self):
        return (print, ("payload ran",))


TRAIN = ["train", "--model", "scratch", "--max-steps", "1", "--no-progress", *TINY_SCRATCH_ARGS]
BAD_INPUTS = [
    # (arguments, a fragment of the one error line); {out}: a fresh folder
    (["--lr", "inf"], "'lr' must be a finite number, got inf"),
    (["--max-grad-norm", "nan"], "'max_grad_norm' must be a finite number, got nan"),
    (["--adam-eps=-inf"], "'adam_eps' must be a finite number, got -inf"),
    (["--warmup-ratio", "nan"], "'warmup_ratio' must be a finite number"),
    (["--scratch-max-positions", "16"], "context (max_position_embeddings = 16"),
    # 301 characters at most, plus BOS and EOS
    (["--config", "ffml_ood", "--scratch-max-positions", "64"], "'ffml_ood': 303 tokens"),
    (["--resume"], "no checkpoint to resume"),
]


@pytest.mark.parametrize("args,message", BAD_INPUTS)
def test_bad_training_input_is_one_line_naming_the_field(args, message, tmp_path, capsys):
    assert main([*TRAIN, "--output", str(tmp_path / "out"), *args]) == 2
    line = one_error_line(capsys)
    assert line.startswith("attentionspan train: error:") and message in line, line
    assert not (tmp_path / "out" / "final").exists()


@pytest.mark.parametrize(
    "make,message",
    [
        (lambda tmp, tiny: tmp / "nonexistent", "does not exist"),
        (
            lambda tmp, tiny: with_run_file(tmp, tiny, "{broken"),
            "attentionspan_run.json: not valid JSON",
        ),
        (
            lambda tmp, tiny: with_run_file(tmp, tiny, '{"prompt": {"colour": 1}}'),
            "attentionspan_run.json: unknown key(s) prompt.colour",
        ),
        (
            lambda tmp, tiny: with_run_file(tmp, tiny, '{"prompt": {"num_fewshot": "x"}}'),
            "attentionspan_run.json: 'prompt'",
        ),
        (with_pickled_weights, "refused to unpickle"),
    ],
)
def test_bad_model_folders_are_one_line(make, message, tmp_path, tiny_model_dirs, capsys):
    folder = make(tmp_path, tiny_model_dirs["llama"])
    assert main(["eval", "--model", str(folder), "--configs", "reversal_id", "-n", "2"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert "payload ran" not in captured.out + captured.err


def test_a_pickled_training_state_is_refused_on_resume(interrupted_run, tmp_path, capsys):
    folder = with_pickled_state(tmp_path, interrupted_run)
    assert main(["train", "--output", str(folder), "--resume", "--no-progress"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "training_state.pt: not a tensors-only file (refused" in err[0], err
    assert "payload ran" not in captured.out + captured.err


def test_resume_refuses_options_that_differ_from_the_saved_run(interrupted_run, capsys):
    out = str(interrupted_run)
    args = ["train", "--output", out, "--resume", "--lr", "5e-6", "--config", "addition_id"]
    assert main(args) == 2
    line = one_error_line(capsys)
    assert "--resume continues the saved run unchanged; these options differ from it:" in line
    assert "--lr 5e-06 (saved: 0.001)" in line
    assert "--config 'addition_id' (saved: 'reversal_id')" in line
    # Giving the saved values again is fine (--lr 1e-3), and so is --no-progress.
    from harness.training.train import TrainConfig, train

    config = TrainConfig(output=out)
    assert train(config, resume=True, stop_after=1, progress=False, requested={"lr": 1e-3})


def test_a_second_run_in_the_same_folder_is_refused(tmp_path, capsys):
    from harness.foundation.runs import RunLock

    with RunLock(tmp_path / "out"):
        assert main([*TRAIN, "--output", str(tmp_path / "out")]) == 2
    line = one_error_line(capsys)
    assert f"run folder {str(tmp_path / 'out')!r} is in use by pid {os.getpid()}" in line


@pytest.mark.slow
def test_ctrl_c_saves_a_checkpoint_that_resume_continues(tmp_path):
    import signal
    import time

    out = tmp_path / "run"
    command = [
        sys.executable,
        "-m",
        "harness.commands.train",
        "--output",
        str(out),
        "--max-steps",
        "100000",
        "--log-every",
        "1",
        "--lr",
        "1e-3",
        "--no-progress",
        *TINY_SCRATCH_ARGS,
    ]
    process = subprocess.Popen(command, cwd=REPO, stderr=subprocess.PIPE, text=True)
    log = out / "log.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and not (log.is_file() and len(log.read_text().splitlines()) >= 3):
        time.sleep(0.2)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err[-2000:]
    lines = err.strip().splitlines()
    assert lines[-1] == "attentionspan train: interrupted"
    assert "continue with: attentionspan train --output" in lines[-2]
    checkpoints = list(out.glob("checkpoint-*"))
    assert len(checkpoints) == 1
    step = int(checkpoints[0].name.split("-")[1])
    assert step >= 3
    from harness.training.train import TrainConfig, train

    train(TrainConfig(output=str(out)), resume=True, stop_after=1, progress=False)
    last = json.loads(log.read_text().splitlines()[-1])
    assert last["step"] == step + 1


def test_the_commands_read_the_prompt_options_over_a_base_prompt_alike():
    import argparse

    from attentionspan_datasets.instructions import instruction_for
    from harness.commands import claim_output_folder, prompt_given, prompt_over
    from harness.foundation.data import PromptConfig
    from harness.foundation.options import DEFAULT_INSTRUCTION

    saved = PromptConfig(instruction="Reverse it.", num_fewshot=2, chat=True)
    none = argparse.Namespace(instruction=None, num_fewshot=None, chat=None)
    assert not prompt_given(none) and prompt_over(saved, none, ["reversal_id"]) == saved
    given = argparse.Namespace(instruction=DEFAULT_INSTRUCTION, num_fewshot=0, chat=False)
    assert prompt_given(given)
    assert prompt_over(saved, given, ["reversal_id", "reversal_ood"]) == PromptConfig(
        instruction=instruction_for("string_reversal")
    )
    with pytest.raises(ValueError, match="--instruction default needs configs of one task"):
        prompt_over(saved, given, ["reversal_id", "addition_id"])
    with pytest.raises(ValueError, match="--output"):  # a file: refused before any claim
        claim_output_folder(__file__, "eval", overwrite=False)
