"""Atomic writes: all or nothing, umask permissions, leftovers of killed writers cleaned."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from attentionspan_datasets.atomic import (
    atomic_path,
    atomic_write_bytes,
    atomic_write_text,
    clean_leftovers,
    current_umask,
)


@pytest.fixture
def umask_027():
    old = os.umask(0o027)
    yield 0o027
    os.umask(old)


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_write_text_and_bytes_replace_the_file(tmp_path):
    target = tmp_path / "sub" / "a.json"
    atomic_write_text(target, "one\n")
    assert target.read_text() == "one\n"
    atomic_write_bytes(target, b"two")
    assert target.read_bytes() == b"two"
    assert os.listdir(target.parent) == ["a.json"]


def test_files_and_folders_get_the_umask_permissions(tmp_path, umask_027):
    assert current_umask() == 0o027
    atomic_write_text(tmp_path / "f.txt", "x")
    assert _mode(tmp_path / "f.txt") == 0o640
    with atomic_path(tmp_path / "out", directory=True) as staging:
        (staging / "data.txt").write_text("x")
    assert _mode(tmp_path / "out") == 0o750
    assert (tmp_path / "out" / "data.txt").read_text() == "x"


def test_an_error_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "a.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_path(target) as temp:
            temp.write_text("half")
            raise RuntimeError("boom")
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["a.txt"]


def test_a_folder_is_swapped_whole(tmp_path):
    out = tmp_path / "out"
    with atomic_path(out, directory=True) as staging:
        (staging / "one").write_text("1")
    with atomic_path(out, directory=True) as staging:
        (staging / "two").write_text("2")
    assert sorted(os.listdir(out)) == ["two"]
    assert sorted(os.listdir(tmp_path)) == ["out"]
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileExistsError, match="not a folder"):
        with atomic_path(tmp_path / "file", directory=True):
            pass


@pytest.mark.parametrize("race", ["placed between", "moved first"])
def test_replacing_a_folder_survives_a_concurrent_writer(tmp_path, monkeypatch, race):
    """Another writer acts between our two renames: it places its folder where ours was to
    go, or moves the old folder aside before us. Ours still ends up there, whole."""
    from attentionspan_datasets import atomic

    out = tmp_path / "out"
    if race == "moved first":
        out.mkdir()
        (out / "old").write_text("0")
    rename, raced = os.rename, []

    def rename_racing(src, dst):
        if not raced:
            raced.append(True)
            if race == "placed between" and str(dst) == str(out):
                out.mkdir()
                (out / "other").write_text("x")
            if race == "moved first":
                rename(out, tmp_path / "elsewhere")
        return rename(src, dst)

    monkeypatch.setattr(atomic.os, "rename", rename_racing)
    with atomic_path(out, directory=True) as staging:
        (staging / "mine").write_text("1")
    assert raced and sorted(os.listdir(out)) == ["mine"]
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".")]  # no temporaries left


def test_leftovers_of_a_killed_writer_are_removed_on_the_next_write(tmp_path):
    # A child reserves a staging folder and dies without cleaning up (as kill -9 would).
    code = (
        "import os, sys\n"
        "from attentionspan_datasets.atomic import atomic_path\n"
        "with atomic_path(sys.argv[1], directory=True) as staging:\n"
        "    (staging / 'part.parquet').write_text('x')\n"
        "    os._exit(9)\n"
    )
    out = tmp_path / "data"
    subprocess.run([sys.executable, "-c", code, str(out)], check=False)
    left = [name for name in os.listdir(tmp_path) if name.startswith(".data.partial-")]
    assert len(left) == 1
    (tmp_path / ".data.partial-abc123").mkdir()  # the name older versions used (no pid)
    (tmp_path / ".other.partial-1-abc").mkdir()  # another target's: not ours to remove
    atomic_write_text(tmp_path / "data", "done")
    assert sorted(os.listdir(tmp_path)) == [".other.partial-1-abc", "data"]


def test_a_live_writers_temporary_is_kept(tmp_path):
    live = tmp_path / f".data.partial-{os.getpid()}-abcd"
    live.mkdir()
    assert clean_leftovers(tmp_path / "data") == []
    assert live.exists()


def test_without_replace_only_the_first_of_two_writers_wins(tmp_path):
    """replace=False: the rename onto a folder another writer filled meanwhile fails, and
    that folder is left as the first writer made it; an empty folder is still replaced."""
    out = tmp_path / "out"
    with pytest.raises(FileExistsError, match="became a folder that is not empty"):
        with atomic_path(out, directory=True, replace=False) as first:
            with atomic_path(out, directory=True, replace=False) as second:
                (second / "second").write_text("2")
            (first / "first").write_text("1")
    assert os.listdir(out) == ["second"]
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileExistsError, match="became a file"):
        with atomic_path(tmp_path / "file", directory=True, replace=False):
            pass
    (tmp_path / "file").unlink()
    assert sorted(os.listdir(tmp_path)) == ["out"]  # no temporary left
    empty = tmp_path / "empty"
    empty.mkdir()
    with atomic_path(empty, directory=True, replace=False) as staging:
        (staging / "x").write_text("x")
    assert os.listdir(empty) == ["x"]
