"""Folders the tool owns: a small manifest names the command that wrote a folder and what
it wrote, so that no command ever replaces or mixes in a user's files.

    runs/rev/.attentionspan.json   {"command": "train", "version": "0.1.0",
                                    "files": ["checkpoint-200", "final", "log.jsonl", ...]}

    folder = inspect("runs/rev")          # what is there, and who wrote it
    folder.command                        # "train" (None: no manifest)
    folder.foreign(patterns)              # names neither recorded nor of the command's own
    write_manifest("runs/rev", "train", ["final", "log.jsonl"])
    remove_entries("runs/rev", ["final", "log.jsonl"])

A run that replaces an earlier one (--overwrite) moves the earlier run's entries into the
hidden folder `.attentionspan-replaced` inside the folder (`move_aside`), with a copy of its
manifest, and the manifest's `open` record names it; the earlier run is removed only when the
new one is whole, and put back as it was (`put_back`) when it is not: an error, Ctrl-C,
SIGTERM, or a `kill -9` found by the next command (the `open` record names a process that no
longer runs).

A command writes into a folder that is new, empty, or carries its own manifest; anything
else is refused before the work, naming the folder (`harness.foundation.ownership` for the
harness's commands, `attentionspan_datasets.hub_export` for export). The manifest is a dot
file so that listings and globs over the folder (`*.png`, `checkpoint-*`) do not see it.
Data layer: nothing of the harness.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import json
import os
import shutil
import socket
from collections.abc import Callable, Iterable
from pathlib import Path

from attentionspan_datasets.atomic import atomic_write_text
from attentionspan_datasets.jsonfile import parse_json

MANIFEST = ".attentionspan.json"
ASIDE = ".attentionspan-replaced"  # the earlier run while a new one replaces it
FORMAT = 1  # of the manifest; a later format adds keys, never changes these


def package_version() -> str:
    from attentionspan_datasets import __version__

    return __version__


@dataclasses.dataclass(frozen=True)
class Folder:
    """What a folder holds, as far as ownership goes."""

    path: Path
    exists: bool
    entries: tuple[str, ...]  # its top-level names, the manifest left out
    command: str | None  # the command its manifest names (None: no manifest)
    files: tuple[str, ...]  # what the manifest says that command wrote
    # a run that has not ended yet (or was killed): {"pid", "host", "before": the entries
    # there when it started, "aside": ASIDE when it replaces an earlier run}
    open: dict | None = None

    @property
    def empty(self) -> bool:
        return not self.entries and self.command is None

    def own(
        self, patterns: Iterable[str] = (), recognise: Callable[[Path], bool] | None = None
    ) -> list[str]:
        """The entries the manifest's command wrote: recorded, matching `patterns` (names
        only the tool makes: an atomic write's leftovers), or recognised by what they hold
        (`recognise(path)`: a run killed with -9 had no chance to record its last
        checkpoint, which holds the files only the tool writes)."""
        patterns = tuple(patterns)
        recorded = set(self.files)
        return [
            e
            for e in self.entries
            if e in recorded
            or matches(e, patterns)
            or (recognise is not None and recognise(self.path / e))
        ]

    def foreign(
        self, patterns: Iterable[str] = (), recognise: Callable[[Path], bool] | None = None
    ) -> list[str]:
        """The entries nobody recorded and that are not recognised as the command's own."""
        own = set(self.own(patterns, recognise))
        return [e for e in self.entries if e not in own]


def matches(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def read_manifest(folder: str | os.PathLike) -> dict | None:
    """The manifest of `folder`, None when there is none; ValueError naming the file when
    it is not one this package wrote (a user's file of the same name, or torn)."""
    path = Path(folder) / MANIFEST
    if not path.is_file():
        if path.exists() or path.is_symlink():
            raise ValueError(f"{str(path)!r} is not a manifest attentionspan wrote")
        return None
    try:
        data = parse_json(path.read_bytes(), str(path))  # absurd nesting too: ValueError
    except (OSError, ValueError) as error:
        why = getattr(error, "strerror", None) or "not JSON"
        raise ValueError(f"{str(path)!r} is not a manifest attentionspan wrote ({why})") from None
    command, files = (data.get("command"), data.get("files")) if isinstance(data, dict) else (0, 0)
    if (
        not isinstance(command, str)
        or not isinstance(files, list)
        or not all(isinstance(f, str) for f in files)
    ):
        raise ValueError(
            f"{str(path)!r} is not a manifest attentionspan wrote (it needs 'command', a "
            "string, and 'files', a list of names)"
        )
    return data


def inspect(path: str | os.PathLike) -> Folder:
    """What `path` holds (a folder that does not exist holds nothing)."""
    path = Path(path)
    if not path.is_dir():
        return Folder(path, path.exists(), (), None, ())
    manifest = read_manifest(path)
    entries = tuple(sorted(e.name for e in path.iterdir() if e.name not in (MANIFEST, ASIDE)))
    if manifest is None:
        return Folder(path, True, entries, None, ())
    record = manifest.get("open")
    return Folder(
        path,
        True,
        entries,
        manifest["command"],
        tuple(manifest["files"]),
        record if isinstance(record, dict) else None,
    )


def write_manifest(
    folder: str | os.PathLike, command: str, files: Iterable[str], open: dict | None = None
) -> Path:
    """Record (atomically) that `command` wrote `files` (top-level names) in `folder`, and
    `open`, the record of a run under way (see `Folder.open`)."""
    data = {
        "format": FORMAT,
        "command": command,
        "version": package_version(),
        "files": sorted(set(files)),
    }
    if open is not None:
        data["open"] = open
    return atomic_write_text(Path(folder) / MANIFEST, json.dumps(data, indent=1) + "\n")


# --- a run under way, and the earlier run it replaces ------------------------------------
def open_record(before: Iterable[str], aside: bool = False) -> dict:
    """The `open` record of a run this process starts: who runs it, what was there."""
    record = {"pid": os.getpid(), "host": socket.gethostname(), "before": sorted(before)}
    started = _start_time(os.getpid())
    if started is not None:  # so that a pid reused by another process is not taken for it
        record["started"] = started
    if aside:
        record["aside"] = ASIDE
    return record


def running(record: dict) -> bool:
    """Whether the process an `open` record names still runs (on another host: assumed so,
    as nothing here can tell)."""
    pid, host = record.get("pid"), record.get("host")
    if host != socket.gethostname():
        return True
    if not isinstance(pid, int) or pid <= 0:
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    fields = _stat(pid)
    if fields is None:
        return True  # no /proc to ask: it answered the signal
    if fields[0] == "Z":  # ended, waiting for its parent to read its status
        return False
    started = record.get("started")
    return started is None or _start_time(pid) == started


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first); None without."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rsplit(")", 1)[-1].split()
    except OSError:
        return None


def _start_time(pid: int) -> int | None:
    """When the process started (clock ticks after boot, /proc/PID/stat's 22nd field)."""
    fields = _stat(pid)
    try:
        return int(fields[19]) if fields else None
    except (IndexError, ValueError):
        return None


def move_aside(folder: str | os.PathLike, names: Iterable[str], command: str, before) -> None:
    """Move `names` (the earlier run) into `folder/ASIDE`, with a copy of the manifest as it
    was; the manifest's `open` record names the aside folder before the first entry moves,
    so a run killed at any point is put back (`put_back`)."""
    folder = Path(folder)
    aside = folder / ASIDE
    if aside.exists():  # left by a swap that finished (see `settle`): not the earlier run
        remove_entries(folder, [ASIDE])
    aside.mkdir()
    manifest = folder / MANIFEST
    if manifest.is_file():
        shutil.copy2(manifest, aside / MANIFEST)
    names = list(names)
    write_manifest(folder, command, [], open_record(before, aside=True))
    for name in names:
        os.rename(folder / name, aside / name)


def put_back(folder: str | os.PathLike, patterns: Iterable[str]) -> None:
    """The earlier run back as it was: what the replacing run added goes (an entry named as
    one moved aside, or an entry that was not there before and is named as the command names
    its files), the entries aside move back, and so does the manifest's copy (no copy: the
    folder had no manifest)."""
    folder = Path(folder)
    aside = folder / ASIDE
    state = inspect(folder)
    before = set((state.open or {}).get("before", ()))
    moved = {p.name for p in aside.iterdir() if p.name != MANIFEST} if aside.is_dir() else set()
    patterns = tuple(patterns)
    added = [e for e in state.entries if e in moved or (e not in before and matches(e, patterns))]
    remove_entries(folder, added)
    for name in sorted(moved):
        os.rename(aside / name, folder / name)
    if (aside / MANIFEST).is_file():
        os.replace(aside / MANIFEST, folder / MANIFEST)
    else:
        with contextlib.suppress(FileNotFoundError):
            (folder / MANIFEST).unlink()
    if aside.is_dir():
        aside.rmdir()


def settle(folder: str | os.PathLike, command: str, files: Iterable[str]) -> None:
    """The run is whole: the manifest records `files` and no `open` run, then the earlier
    run aside goes (a kill -9 between the two leaves an aside folder no record names, which
    the next `move_aside` or `settle` removes)."""
    folder = Path(folder)
    write_manifest(folder, command, files)
    if (folder / ASIDE).exists():
        remove_entries(folder, [ASIDE])


def remove_entries(folder: str | os.PathLike, names: Iterable[str]) -> None:
    """Remove these top-level entries of `folder` (a link is removed, never followed)."""
    for name in names:
        path = Path(folder) / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


def listing(names: Iterable[str], limit: int = 3) -> str:
    """`'a', 'b', 'c' and 2 more`: the names a refusal shows."""
    names = list(names)
    shown = ", ".join(repr(n) for n in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")
