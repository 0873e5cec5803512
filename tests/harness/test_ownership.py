"""harness.foundation.ownership: a command's claim on its --output folder."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from attentionspan_datasets.ownership import ASIDE, MANIFEST, write_manifest
from harness.foundation.outputs import Terminated
from harness.foundation.ownership import check_own_file, claim_output, json_with


def manifest(folder):
    return json.loads((folder / MANIFEST).read_text())


def test_a_new_folder_is_claimed_and_what_was_written_recorded(tmp_path):
    out = tmp_path / "a" / "eval"
    with claim_output("--output", out, "eval"):
        assert manifest(out)["files"] == []  # written before the work: a kill -9 run is known
        (out / "results.json").write_text("{}")
        (out / "predictions-x.jsonl").write_text("")
    assert manifest(out) == {**manifest(out), "command": "eval"}
    assert manifest(out)["files"] == ["predictions-x.jsonl", "results.json"]


def test_a_claim_that_wrote_nothing_leaves_nothing(tmp_path):
    out = tmp_path / "a" / "b"
    with pytest.raises(RuntimeError), claim_output("--output", out, "eval"):
        raise RuntimeError("refused after the claim")
    assert list(tmp_path.iterdir()) == []


def snapshot(folder):
    """Every file under `folder` (the manifest too) and its bytes, and every folder."""
    return {
        str(p.relative_to(folder)): p.read_bytes() if p.is_file() else None
        for p in sorted(folder.rglob("*"))
    }


def train_checkpoint(folder, name="checkpoint-9"):
    """A checkpoint as train writes it: known by its run file and training state."""
    (folder / name).mkdir()
    (folder / name / "attentionspan_run.json").write_text("{}")
    (folder / name / "training_state.pt").write_bytes(b"state")


def finished_train(out):
    out.mkdir()
    for name in ("log.jsonl", "train_config.json", "notes.txt"):
        (out / name).write_text(name)
    (out / "final").mkdir()
    (out / "final" / "attentionspan_run.json").write_text("{}")
    write_manifest(out, "train", ["log.jsonl", "train_config.json", "final"])


def test_overwrite_replaces_what_the_command_wrote_and_nothing_else(tmp_path):
    """Recorded entries and a killed run's checkpoint (by its files) are replaced; a user's
    look-alike (`checkpoint-best/` without the trainer's files) and notes stay."""
    out = tmp_path / "run"
    finished_train(out)
    train_checkpoint(out)  # a kill -9 run's last checkpoint: not recorded
    (out / "checkpoint-best").mkdir()  # the user's, named as train names its checkpoints
    (out / "checkpoint-best" / "weights.bin").write_bytes(b"mine")
    with pytest.raises(ValueError, match="a finished run of attentionspan train: --overwrite"):
        claim_output("--output", out, "train")
    with claim_output("--output", out, "train", overwrite=True) as claim:
        assert claim.replacing
        assert sorted(p.name for p in out.iterdir()) == [
            ASIDE,
            MANIFEST,
            "checkpoint-best",
            "notes.txt",
        ]
        (out / "log.jsonl").write_text("new")
    assert sorted(p.name for p in out.iterdir()) == [
        MANIFEST,
        "checkpoint-best",
        "log.jsonl",
        "notes.txt",
    ]
    assert (out / "checkpoint-best" / "weights.bin").read_bytes() == b"mine"
    assert manifest(out)["files"] == ["log.jsonl"] and "open" not in manifest(out)


@pytest.mark.parametrize(
    "command,look_alike",
    [
        ("eval", "predictions-notes.jsonl"),
        ("attention", "my-figure.png"),
        ("reproduce", "reversal-notes.md"),
        ("reproduce", "summary.png"),
    ],
)
def test_overwrite_keeps_a_users_file_named_as_the_command_names_its_own(
    tmp_path, command, look_alike
):
    out = tmp_path / "run"
    out.mkdir()
    (out / "results.json").write_text("old")
    (out / look_alike).write_text("the user's")
    write_manifest(out, command, ["results.json"])
    with claim_output("--output", out, command, overwrite=True):
        (out / "results.json").write_text("new")
    assert (out / look_alike).read_text() == "the user's"
    assert (out / "results.json").read_text() == "new"
    assert manifest(out)["files"] == ["results.json"]


@pytest.mark.parametrize("error", [ValueError("refused"), KeyboardInterrupt(), Terminated()])
def test_a_replacement_that_fails_or_is_interrupted_puts_the_earlier_run_back(
    tmp_path, error, capsys
):
    out = tmp_path / "run"
    finished_train(out)
    before = snapshot(out)
    with pytest.raises(type(error)), claim_output("--output", out, "train", overwrite=True):
        (out / "log.jsonl").write_text("the new run's")
        (out / "checkpoint-1").mkdir()
        raise error
    assert snapshot(out) == before
    said = capsys.readouterr().err
    assert ("is kept as it was" in said) == isinstance(error, KeyboardInterrupt)


def ended_pid() -> int:
    """The pid of a process that has ended (as one killed with -9 has)."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_after_kill_9_the_next_command_puts_the_earlier_run_back(tmp_path, capsys):
    out = tmp_path / "run"
    finished_train(out)
    before = snapshot(out)
    claim_output("--output", out, "train", overwrite=True).__enter__()  # no __exit__: killed
    (out / "log.jsonl").write_text("the new run's")
    train_checkpoint(out, "checkpoint-2")
    (out / ".lock").write_text("")
    record = manifest(out)
    assert record["open"]["aside"] == ASIDE and (out / ASIDE / "final").is_dir()
    record["open"]["pid"] = ended_pid()  # the process that claimed it is gone
    (out / MANIFEST).write_text(json.dumps(record))
    with pytest.raises(ValueError, match="holds a finished run"):  # the next plain train
        claim_output("--output", out, "train")
    assert snapshot(out) == before
    assert "the earlier run is back as it was" in capsys.readouterr().err


def test_a_folder_a_live_run_writes_is_said_to_be_in_use(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    write_manifest(out, "train", [], {"pid": os.getppid(), "host": socket.gethostname()})
    for overwrite in (False, True):
        with pytest.raises(
            ValueError, match=rf"in use by attentionspan train \(pid {os.getppid()}"
        ):
            claim_output("--output", out, "train", overwrite=overwrite)


def test_a_killed_runs_additions_are_recorded_as_its_own(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    write_manifest(
        out,
        "reproduce",
        [],
        {"pid": ended_pid(), "host": socket.gethostname(), "before": ["notes.txt"]},
    )
    (out / "stages").mkdir()
    (out / "settings.json").write_text("{}")
    claim_output("--output", out, "reproduce")
    assert manifest(out)["files"] == ["settings.json", "stages"] and "open" not in manifest(out)


def test_a_train_run_stopped_before_its_first_checkpoint_starts_again(tmp_path):
    """Nothing to continue there: plain train starts it again, and --resume says so rather
    than sending the user back to plain train's refusal."""
    out = tmp_path / "run"
    out.mkdir()
    for name in ("log.jsonl", "train_config.json", ".lock"):
        (out / name).write_text(name)
    write_manifest(out, "train", ["log.jsonl", "train_config.json", ".lock"])
    with pytest.raises(ValueError, match="the train command that began it, without --resume"):
        claim_output("--output", out, "train", resume=True)
    with claim_output("--output", out, "train") as claim:
        assert claim.replacing and not (out / "log.jsonl").exists()
    assert not (out / ASIDE).exists()


def test_resume_and_overwrite_exclude_each_other(tmp_path):
    with pytest.raises(ValueError, match="give one of them"):
        claim_output("--output", tmp_path, "train", resume=True, overwrite=True)


def test_a_file_where_the_folder_should_be_is_said_as_such(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(ValueError, match="is a file; give a folder"):
        claim_output("--output", tmp_path / "f", "eval")


def test_only_the_main_process_of_a_launch_claims(tmp_path, monkeypatch):
    """The other processes would see the main process's manifest and refuse: they neither
    check nor write."""
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("x")
    monkeypatch.setenv("RANK", "1")
    with claim_output("--output", out, "eval"):
        pass
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    monkeypatch.setenv("RANK", "0")
    with pytest.raises(ValueError, match="did not write"):
        claim_output("--output", out, "eval")


def test_an_output_file_is_replaced_only_when_the_command_wrote_it(tmp_path):
    path = tmp_path / "heads.json"
    check_own_file("--output", path, "heads", json_with("scores"))  # none yet
    path.write_text('{"scores": []}')
    check_own_file("--output", path, "heads", json_with("scores"))
    path.write_text("notes")
    with pytest.raises(ValueError, match="is a file attentionspan heads did not write"):
        check_own_file("--output", path, "heads", json_with("scores"))


def test_a_link_to_a_folder_that_does_not_exist_is_refused_at_once(tmp_path):
    (tmp_path / "link").symlink_to(tmp_path / "nowhere" / "x")
    with pytest.raises(ValueError, match="is a symbolic link to .*which does not exist"):
        claim_output("--output", tmp_path / "link", "eval")
    (tmp_path / "there").mkdir()
    (tmp_path / "to-there").symlink_to(tmp_path / "there", target_is_directory=True)
    with claim_output("--output", tmp_path / "to-there", "eval"):  # a link to a folder: fine
        (tmp_path / "to-there" / "results.json").write_text("{}")
    assert manifest(tmp_path / "there")["files"] == ["results.json"]


def test_a_folder_inside_a_run_that_replaces_another_is_said_to_be_replacing(tmp_path):
    """What an interrupted model training inside reproduce or supervision reads to know
    whether an interruption keeps its checkpoint (a plain run) or puts the earlier run back
    (--overwrite replacing one): only the latter is `replacing`."""
    from harness.foundation.ownership import replacing

    out = tmp_path / "run"
    finished_train(out)
    inside = out / "models" / "reversal"
    assert not replacing(inside) and not replacing(out)  # a finished run: nothing open
    with claim_output("--output", out, "train", overwrite=True) as claim:
        assert claim.replacing and replacing(inside) and replacing(out)
    assert not replacing(inside)  # whole: the earlier run went
    fresh = tmp_path / "fresh"
    with claim_output("--output", fresh, "train"):  # a run under way, replacing nothing
        assert (fresh / MANIFEST).is_file() and not replacing(fresh / "models")
    (tmp_path / MANIFEST).write_text("{torn")  # a user's file of that name above: no answer
    assert not replacing(inside)
