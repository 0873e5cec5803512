"""harness.foundation.ownership: a command's claim on its --output folder."""

from __future__ import annotations

import json

import pytest

from attentionspan_datasets.ownership import MANIFEST, write_manifest
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


def test_overwrite_removes_what_the_command_wrote_and_nothing_else(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    for name in ("log.jsonl", "train_config.json", "notes.txt"):
        (out / name).write_text(name)
    (out / "checkpoint-9").mkdir()  # a kill -9 run's last checkpoint: not recorded
    write_manifest(out, "train", ["log.jsonl", "train_config.json"])
    with pytest.raises(ValueError, match="an interrupted run of attentionspan train: --resume"):
        claim_output("--output", out, "train")
    with claim_output("--output", out, "train", overwrite=True):
        assert sorted(p.name for p in out.iterdir()) == [MANIFEST, "notes.txt"]


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
