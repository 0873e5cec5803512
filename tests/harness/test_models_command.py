"""`attentionspan models fetch` (harness.commands.models): a disk without room for the fetch
is refused in one line before its first progress line."""

from __future__ import annotations

import shutil
from collections import namedtuple

from harness.commands import models as command
from harness.foundation import models


def test_a_disk_without_room_for_the_fetch_is_one_line_before_any_progress(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("ATTENTIONSPAN_CACHE", str(tmp_path / "cache"))
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(10**9, 10**9 - 10**6, 10**6))

    def never(*args, **kwargs):
        raise AssertionError("fetched before the refusal")

    monkeypatch.setattr(models, "fetch", never)
    assert command.main(["fetch", "smollm2-135m-instruct"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "cannot take smollm2-135m-instruct: no space left on the device" in err[0]
    assert "needs about 0.8 GB, 0.00 GB free" in err[0]
    assert not (tmp_path / "cache" / "models").exists()


def test_a_disk_with_room_goes_on_to_the_fetch(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ATTENTIONSPAN_CACHE", str(tmp_path / "cache"))
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(10**10, 0, 10**10))
    monkeypatch.setattr(models, "fetch", lambda name, force, log: tmp_path / "fetched")
    assert command.main(["fetch", "smollm2-135m-instruct"]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "fetched")
