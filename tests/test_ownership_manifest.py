"""attentionspan_datasets.ownership: the manifest that says which command wrote a folder."""

from __future__ import annotations

import json

import pytest

from attentionspan_datasets.ownership import (
    ASIDE,
    MANIFEST,
    inspect,
    listing,
    move_aside,
    open_record,
    put_back,
    read_manifest,
    remove_entries,
    running,
    settle,
    write_manifest,
)


def test_a_folder_that_does_not_exist_or_is_empty_is_free(tmp_path):
    assert inspect(tmp_path / "new").empty and not inspect(tmp_path / "new").exists
    assert inspect(tmp_path).empty and inspect(tmp_path).exists


def test_the_manifest_records_the_command_and_its_files(tmp_path):
    (tmp_path / "final").mkdir()
    (tmp_path / "log.jsonl").write_text("{}\n")
    (tmp_path / "notes.txt").write_text("mine\n")
    write_manifest(tmp_path, "train", ["final", "log.jsonl", "final"])
    data = json.loads((tmp_path / MANIFEST).read_text())
    assert data["command"] == "train" and data["files"] == ["final", "log.jsonl"]
    assert data["format"] == 1 and data["version"]
    folder = inspect(tmp_path)
    assert folder.command == "train" and MANIFEST not in folder.entries
    assert folder.own() == ["final", "log.jsonl"] and folder.foreign() == ["notes.txt"]
    # a name the command writes counts as its own though unrecorded (a kill -9 run's)
    (tmp_path / "checkpoint-7").mkdir()
    assert folder.foreign(("checkpoint-*",)) == ["notes.txt"]


@pytest.mark.parametrize(
    "text", ["{torn", "[]", '{"command": 1, "files": []}', '{"command": "x", "files": [1]}']
)
def test_a_manifest_not_ours_is_refused_naming_it(tmp_path, text):
    (tmp_path / MANIFEST).write_text(text)
    with pytest.raises(ValueError, match="is not a manifest attentionspan wrote") as error:
        read_manifest(tmp_path)
    assert MANIFEST in str(error.value) and "\n" not in str(error.value)


def test_removing_entries_never_follows_a_link(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep\n")
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "link").symlink_to(outside, target_is_directory=True)
    (folder / "sub").mkdir()
    (folder / "sub" / "x").write_text("x")
    remove_entries(folder, ["link", "sub", "missing"])
    assert sorted(p.name for p in folder.iterdir()) == []
    assert (outside / "keep.txt").read_text() == "keep\n"


def test_listing_shows_three_names_and_counts_the_rest():
    assert listing(["a", "b"]) == "'a', 'b'"
    assert listing(list("abcde")) == "'a', 'b', 'c' and 2 more"


def test_a_run_record_names_a_live_process_and_not_one_that_reused_its_pid():
    import os
    import socket

    record = open_record(["a"])
    assert record["pid"] == os.getpid() and record["before"] == ["a"] and running(record)
    parent = {**record, "pid": os.getppid()}
    parent.pop("started", None)
    assert running(parent)  # alive, start unknown: taken as the same process
    if "started" in record:
        from attentionspan_datasets.ownership import _start_time

        assert running({**parent, "started": _start_time(os.getppid())})
        assert not running({**parent, "started": -1})  # the pid now names another process
    assert running({**parent, "host": socket.gethostname() + "-elsewhere"})  # cannot tell


def test_moved_aside_then_put_back_is_the_folder_as_it_was(tmp_path):
    (tmp_path / "final").mkdir()
    (tmp_path / "final" / "w").write_bytes(b"old")
    (tmp_path / "log.jsonl").write_text("old\n")
    (tmp_path / "notes.txt").write_text("mine\n")
    write_manifest(tmp_path, "train", ["final", "log.jsonl"])
    before = {p.name: p.read_bytes() if p.is_file() else None for p in tmp_path.rglob("*")}
    move_aside(tmp_path, ["final", "log.jsonl"], "train", ["final", "log.jsonl", "notes.txt"])
    assert sorted(inspect(tmp_path).entries) == ["notes.txt"]
    assert inspect(tmp_path).open["aside"] == ASIDE
    (tmp_path / "log.jsonl").write_text("new\n")  # the new run's, named as the earlier one's
    (tmp_path / "checkpoint-2").mkdir()  # the new run's, named as the command names its own
    (tmp_path / "mine-too.txt").write_text("the user's, added meanwhile\n")
    put_back(tmp_path, ("checkpoint-*", "log.jsonl", "final"))
    after = {p.name: p.read_bytes() if p.is_file() else None for p in tmp_path.rglob("*")}
    assert after == {**before, "mine-too.txt": b"the user's, added meanwhile\n"}


def test_settle_records_the_new_run_and_drops_the_earlier(tmp_path):
    (tmp_path / "log.jsonl").write_text("old\n")
    write_manifest(tmp_path, "eval", ["log.jsonl"])
    move_aside(tmp_path, ["log.jsonl"], "eval", ["log.jsonl"])
    (tmp_path / "results.json").write_text("{}")
    settle(tmp_path, "eval", ["results.json"])
    assert sorted(p.name for p in tmp_path.iterdir()) == [MANIFEST, "results.json"]
    assert inspect(tmp_path).open is None and inspect(tmp_path).files == ("results.json",)
