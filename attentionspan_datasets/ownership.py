"""Folders the tool owns: a small manifest names the command that wrote a folder and what
it wrote, so that no command ever replaces or mixes in a user's files.

    runs/rev/.attentionspan.json   {"command": "train", "version": "0.1.0",
                                    "files": ["checkpoint-200", "final", "log.jsonl", ...]}

    folder = inspect("runs/rev")          # what is there, and who wrote it
    folder.command                        # "train" (None: no manifest)
    folder.foreign(patterns)              # names neither recorded nor of the command's own
    write_manifest("runs/rev", "train", ["final", "log.jsonl"])
    remove_entries("runs/rev", ["final", "log.jsonl"])   # --overwrite: only these

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
from collections.abc import Iterable
from pathlib import Path

from attentionspan_datasets.atomic import atomic_write_text
from attentionspan_datasets.jsonfile import parse_json

MANIFEST = ".attentionspan.json"
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

    @property
    def empty(self) -> bool:
        return not self.entries and self.command is None

    def own(self, patterns: Iterable[str] = ()) -> list[str]:
        """The entries the manifest's command wrote: recorded, or named as it names its
        files (a run killed with -9 had no chance to record its last checkpoint)."""
        patterns = tuple(patterns)
        recorded = set(self.files)
        return [e for e in self.entries if e in recorded or matches(e, patterns)]

    def foreign(self, patterns: Iterable[str] = ()) -> list[str]:
        """The entries nobody recorded and that are not named as the command's own."""
        own = set(self.own(patterns))
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
    entries = tuple(sorted(e.name for e in path.iterdir() if e.name != MANIFEST))
    if manifest is None:
        return Folder(path, True, entries, None, ())
    return Folder(path, True, entries, manifest["command"], tuple(manifest["files"]))


def write_manifest(folder: str | os.PathLike, command: str, files: Iterable[str]) -> Path:
    """Record (atomically) that `command` wrote `files` (top-level names) in `folder`."""
    data = {
        "format": FORMAT,
        "command": command,
        "version": package_version(),
        "files": sorted(set(files)),
    }
    return atomic_write_text(Path(folder) / MANIFEST, json.dumps(data, indent=1) + "\n")


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
