"""harness.foundation.outputs: an output path that cannot be written is refused before
any
work, a write that fails later is one line naming the file with nothing half-written left
(temporary files included), and SIGTERM lets every atomic write remove its temporary.

Tests run as root, and root passes every permission bit: a read-only folder is simulated by
making the probe's write fail (`failing_write`); a full disk by an OSError(ENOSPC) where the
write happens. `test_a_folder_without_write_permission_is_refused` is the real thing when
the tests do not run as root."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from attentionspan_datasets.atomic import atomic_path, atomic_write_text
from harness.foundation import outputs
from harness.foundation.outputs import (
    Terminated,
    WriteError,
    check_output_file,
    check_output_folder,
    writing,
)

REPO = Path(__file__).resolve().parents[2]


def no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


class _FailingWrite:
    """`os` for harness.foundation.outputs, with `write` failing with `code` (only the probe
    writes)."""

    def __init__(self, code: int):
        self.code = code

    def __getattr__(self, name):
        return getattr(os, name)

    def write(self, fd, data):
        raise OSError(self.code, os.strerror(self.code))


def failing_write(monkeypatch, code: int) -> None:
    monkeypatch.setattr(outputs, "os", _FailingWrite(code))


# --- before any work -----------------------------------------------------------------------
def test_a_file_where_the_folder_should_be_is_refused(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(ValueError, match="is a file"):
        check_output_folder("--output", tmp_path / "f")
    with pytest.raises(ValueError, match="lies under the file"):
        check_output_folder("--output", tmp_path / "f" / "run")
    with pytest.raises(
        ValueError, match="/f' is a file"
    ):  # harness.foundation.caps names the folder
        check_output_file("--output", tmp_path / "f" / "heads.json")
    with pytest.raises(ValueError, match="is a folder"):
        check_output_file("--output", tmp_path)


@pytest.mark.parametrize(
    "code,reason,advice",
    [
        (errno.EROFS, "read-only file system", "write to another disk"),
        (errno.ENOSPC, "no space left on the device", "free some space"),
        (errno.EDQUOT, "disk quota exceeded", "free some space"),
        (errno.EACCES, "permission denied", "a folder you may write"),
        # an existing folder that answers "no such file" (/proc): it takes no new files
        (errno.ENOENT, "files cannot be created there", ""),
    ],
)
def test_a_folder_that_cannot_be_written_is_one_line_and_leaves_nothing(
    tmp_path, monkeypatch, code, reason, advice
):
    failing_write(monkeypatch, code)
    target = tmp_path / "runs" / "rev"
    for check in (check_output_folder, check_output_file):
        with pytest.raises(WriteError) as error:
            check("--output", target)
        text = str(error.value)
        assert text.startswith(f"--output {str(target)!r} cannot be written"), text
        assert f"{str(tmp_path)!r}: {reason}" in text and advice in text and "\n" not in text
    assert os.listdir(tmp_path) == []  # the probe is gone, and no folder was made


def test_a_writable_folder_passes_and_keeps_no_probe(tmp_path):
    check_output_folder("--output", tmp_path / "new" / "run")
    check_output_folder("--output", tmp_path)
    check_output_file("--output", tmp_path / "heads.json")
    check_output_folder("--output", None)
    assert os.listdir(tmp_path) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder anyway")
def test_a_folder_without_write_permission_is_refused(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    try:
        with pytest.raises(WriteError, match="permission denied"):
            check_output_folder("--output", locked / "run")
    finally:
        locked.chmod(0o755)


# --- while writing -------------------------------------------------------------------------
def test_a_full_disk_inside_an_atomic_write_names_the_file_and_leaves_nothing(tmp_path):
    out = tmp_path / "eval"
    with pytest.raises(WriteError) as error, writing(out, discard=True):
        atomic_write_text(out / "results.json", "{}")
        with atomic_path(out / "results.md") as temp:
            temp.write_text("half")
            no_space()
    assert str(error.value) == (
        f"cannot write {out / 'results.md'}: no space left on the device (free some space, or "
        "write to another disk)"
    )
    assert os.listdir(tmp_path) == []  # the folder this block made went, whole


def test_without_discard_only_the_empty_folders_it_made_go(tmp_path):
    out = tmp_path / "a" / "b"
    with pytest.raises(WriteError), writing(out):
        out.mkdir(parents=True)
        no_space()
    assert os.listdir(tmp_path) == []
    with pytest.raises(WriteError), writing(out):
        out.mkdir(parents=True)
        (out / "stage.json").write_text("{}")  # finished work: kept for the rerun
        no_space()
    assert (out / "stage.json").is_file()


@pytest.mark.parametrize(
    "error",
    [
        OSError(errno.ENOSPC, "No space left on device"),
        OSError(errno.EROFS, "Read-only file system"),
        Exception("Error while serializing: I/O error: No space left on device (os error 28)"),
    ],
    ids=["oserror", "read-only", "safetensors"],
)
def test_write_failures_of_every_kind_are_one_line(tmp_path, error):
    with pytest.raises(WriteError) as raised, writing(tmp_path / "model"):
        raise error
    assert str(raised.value).startswith(f"cannot write {tmp_path / 'model'}: ")


def test_torch_s_stream_writer_error_is_a_full_disk_only_when_the_disk_is_full(
    tmp_path, monkeypatch
):
    failure = RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534")
    with pytest.raises(RuntimeError), writing(tmp_path):
        raise failure
    monkeypatch.setattr(outputs, "_nearly_full", lambda path: True)
    with pytest.raises(WriteError, match="no space left on the device"), writing(tmp_path):
        raise failure


def test_other_errors_pass_unchanged_and_a_read_error_does_not_say_write(tmp_path):
    with pytest.raises(KeyError), writing(tmp_path / "out"):
        raise KeyError("x")
    model = tmp_path / "model" / "model.safetensors"
    denied = PermissionError(errno.EACCES, "Permission denied", str(model))
    with pytest.raises(WriteError) as error, writing(tmp_path / "out"):
        raise denied
    assert str(error.value) == f"{model}: permission denied"


def test_sigterm_inside_writing_is_an_interruption_and_the_handler_comes_back(tmp_path):
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt) as error, writing(tmp_path / "out"):
        with atomic_path(tmp_path / "out" / "stage.json") as temp:
            temp.write_text("half")
            signal.raise_signal(signal.SIGTERM)
    assert isinstance(error.value, Terminated)
    assert signal.getsignal(signal.SIGTERM) == before
    assert os.listdir(tmp_path) == []


# --- interrupted figures -------------------------------------------------------------------
KILLED_WHILE_SAVING = """
import os, signal, sys
import matplotlib.figure
from harness.report import plots

def savefig(self, fname, *args, **kwargs):
    os.kill(os.getpid(), signal.SIGTERM)  # no handler: the process ends here

matplotlib.figure.Figure.savefig = savefig
plots.head_heatmap({"reversal_id": [[0.1, 0.2], [0.3, 0.4]]}, sys.argv[1])
"""


def test_a_figure_temporary_left_by_sigterm_is_removed_by_the_rerun(tmp_path):
    """The issue: SIGTERM while reproduce wrote its figures left a 0-byte hidden file that
    the rerun kept. A figure is written through atomic_path now: the rerun's write of the
    same figure removes the temporary of the process that died."""
    from harness.report import plots

    target = tmp_path / "heads.png"
    done = subprocess.run(
        [sys.executable, "-c", KILLED_WHILE_SAVING, str(target)],
        cwd=REPO,
        capture_output=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == -signal.SIGTERM, done.stderr[-2000:]
    (left,) = os.listdir(tmp_path)
    assert left.startswith(".heads.png.partial-") and (tmp_path / left).stat().st_size == 0
    plots.head_heatmap({"reversal_id": [[0.1, 0.2], [0.3, 0.4]]}, target)
    assert os.listdir(tmp_path) == ["heads.png"]


def test_sigterm_while_a_figure_is_written_removes_its_temporary(tmp_path, monkeypatch):
    import matplotlib.figure

    from harness.report import plots

    def savefig(self, fname, *args, **kwargs):
        Path(fname).write_bytes(b"\x89PNG")
        signal.raise_signal(signal.SIGTERM)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", savefig)
    with pytest.raises(Terminated), writing(tmp_path):
        plots.head_heatmap({"reversal_id": [[0.1, 0.2], [0.3, 0.4]]}, tmp_path / "heads.png")
    assert os.listdir(tmp_path) == []


# --- train: a refused run and a full disk ---------------------------------------------------
def _train_args(output, *more):
    from tests.harness.launch import TINY_SCRATCH_ARGS

    return [
        "train",
        "--model",
        "scratch",
        "--config",
        "reversal_id",
        "--output",
        str(output),
        "--max-steps",
        "4",
        "--batch-size",
        "2",
        "--eval-size",
        "2",
        "--no-progress",
        *TINY_SCRATCH_ARGS,
        *more,
    ]


def test_a_refused_train_leaves_no_folder(tmp_path, capsys):
    from harness.cli import main

    output = tmp_path / "runs" / "rev"
    assert main([*_train_args(output), "--scratch-charset", "ab"]) == 2
    assert "--scratch-charset" in capsys.readouterr().err
    assert os.listdir(tmp_path) == []  # neither runs/ nor runs/rev/ nor its .lock
    (tmp_path / "kept").mkdir()  # a folder that was there stays, empty as it was
    assert main([*_train_args(tmp_path / "kept"), "--scratch-charset", "ab"]) == 2
    assert os.listdir(tmp_path / "kept") == []


def _full_disk_at_checkpoint(monkeypatch, fail_at: int) -> None:
    """The run file of the `fail_at`-th folder save (checkpoint or final) meets a full disk."""
    import harness.foundation.runs

    real, calls = harness.foundation.runs.write_run_file, []

    def write_run_file(folder, info):
        calls.append(folder)
        if len(calls) == fail_at:
            no_space()
        real(folder, info)

    monkeypatch.setattr(harness.foundation.runs, "write_run_file", write_run_file)


def test_a_full_disk_before_the_first_checkpoint_keeps_nothing(tmp_path, monkeypatch, capsys):
    from harness.cli import main

    _full_disk_at_checkpoint(monkeypatch, fail_at=1)
    output = tmp_path / "rev"
    assert main([*_train_args(output), "--save-every", "2", "--log-every", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (
        f"attentionspan train: error: cannot write {output / 'checkpoint-2'}: no space left "
        "on the device (free some space, or write to another disk); nothing of the run was "
        f"kept in {output} (it had no checkpoint yet)"
    )
    assert os.listdir(tmp_path) == []  # no .lock, log.jsonl, train_config.json, staging


def test_a_full_disk_after_a_checkpoint_keeps_it_and_says_how_to_go_on(
    tmp_path, monkeypatch, capsys
):
    from harness.cli import main

    _full_disk_at_checkpoint(monkeypatch, fail_at=2)
    output = tmp_path / "rev"
    assert main([*_train_args(output), "--save-every", "2", "--log-every", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"attentionspan train: error: cannot write {output / 'checkpoint-4'}")
    assert err.endswith(
        f"the run stopped at step 4; its latest checkpoint is {output / 'checkpoint-2'}: make "
        f"room, then continue with: attentionspan train --output {output} --resume"
    )
    names = sorted(os.listdir(output))
    assert names == [
        ".attentionspan.json",
        ".lock",
        "checkpoint-2",
        "log.jsonl",
        "train_config.json",
    ]


def test_a_log_line_cut_by_a_full_disk_is_taken_back(tmp_path, monkeypatch):
    import harness.foundation.runs
    from harness.foundation.runs import append_line

    log = tmp_path / "log.jsonl"
    append_line(log, '{"step": 1}\n')

    class HalfThenFull:
        def __getattr__(self, name):
            return getattr(os, name)

        def write(self, fd, data):
            os.write(fd, bytes(data[:5]))
            return no_space()

    monkeypatch.setattr(harness.foundation.runs, "os", HalfThenFull())
    with pytest.raises(OSError):
        append_line(log, '{"step": 2, "loss": 1.0}\n')
    assert log.read_text() == '{"step": 1}\n'


def test_a_torn_last_log_line_is_dropped_on_resume(tmp_path):
    from harness.training.checkpoints import trim_log

    log = tmp_path / "log.jsonl"
    log.write_text('{"step": 1}\n{"step": 2}\n{"st')
    trim_log(log, 2)
    assert log.read_text() == '{"step": 1}\n{"step": 2}\n'


# --- reproduce --quick: an interruption names reproduce --------------------------------------
@pytest.fixture
def sigterm_after_a_step(monkeypatch):
    """reproduce --quick's recipe made tiny (4 steps), and SIGTERM after its first step."""
    import harness.training.train
    from harness.pipeline import settings

    tiny = {"hidden_size": 32, "num_layers": 2, "num_heads": 2, "intermediate_size": 64}
    recipe = {"max_steps": 4, "batch_size": 2, "lr": 2e-3, "eval_size": 2, "scratch": tiny}
    monkeypatch.setattr(settings, "QUICK_TRAIN", recipe)
    real_step = harness.training.train.train_step

    def step_then_sigterm(run, stop_requested):
        loss, tokens, _ = real_step(run, stop_requested)
        signal.raise_signal(signal.SIGTERM)  # the loop stops after this step
        return loss, tokens, True

    monkeypatch.setattr(harness.training.train, "train_step", step_then_sigterm)


def test_an_interrupted_quick_training_says_to_rerun_reproduce(
    tmp_path, sigterm_after_a_step, capsys
):
    """The issue: SIGTERM during `reproduce --quick`'s training said `attentionspan train
    --output OUT/models/reversal --resume`; rerunning reproduce is what resumes it (and
    reuses the finished stages), without --overwrite (which would start it over)."""
    from harness.pipeline.prepare import task_model
    from harness.pipeline.settings import ReproduceConfig

    out = tmp_path / "rq"
    cfg = ReproduceConfig(quick=True, tasks=["reversal"], output=str(out), progress=False)
    with pytest.raises(KeyboardInterrupt):
        task_model(cfg, cfg.task_values[0], out, lambda message: None)
    err = capsys.readouterr().err
    assert "continue with: the same attentionspan reproduce command" in err, err
    assert f"(--output {out}; without --overwrite" in err and "train --resume" not in err
    assert (out / "models" / "reversal" / "checkpoint-1").is_dir()


def test_an_interrupted_quick_training_that_replaces_a_run_says_it_is_kept(
    tmp_path, sigterm_after_a_step, capsys
):
    """reproduce --overwrite interrupted while it trains: the earlier run is put back and
    nothing of the new one kept, so no line says to continue it (a rerun would resume the
    earlier run, not this one); the one line about it says the earlier run is kept and how
    to replace it."""
    from attentionspan_datasets.ownership import write_manifest
    from harness.foundation.ownership import claim_output
    from harness.pipeline.prepare import task_model
    from harness.pipeline.settings import ReproduceConfig

    out = tmp_path / "rq"
    (out / "stages").mkdir(parents=True)
    (out / "stages" / "reversal-eval.json").write_text('{"earlier": true}\n')
    (out / "report.md").write_text("# the earlier report\n")
    write_manifest(out, "reproduce", ["stages", "report.md"])
    before = {str(p): p.read_bytes() if p.is_file() else None for p in sorted(out.rglob("*"))}
    cfg = ReproduceConfig(quick=True, tasks=["reversal"], output=str(out), progress=False)
    with pytest.raises(KeyboardInterrupt):
        with claim_output("--output", out, "reproduce", overwrite=True) as claim:
            assert claim.replacing
            task_model(cfg, cfg.task_values[0], out, lambda message: None)
    said = capsys.readouterr().err.strip().splitlines()
    err = [line for line in said if not line.startswith("Writing model shards")]  # a bar
    assert err[0] == "interrupted at step 1 of 4", err
    assert len(err) == 2 and f"the earlier run in {str(out)!r} is kept as it was" in err[1], err
    assert "run the command again with --overwrite (it starts over)" in err[1], err
    after = {str(p): p.read_bytes() if p.is_file() else None for p in sorted(out.rglob("*"))}
    assert after == before
