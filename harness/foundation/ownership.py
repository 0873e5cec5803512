"""The --output folder of a command: new, empty, or written by the same command, else refused
before any work; what the command writes is recorded in the folder's manifest.

    claim = claim_output("--output", "runs/rev", "train", resume=args.resume,
                         overwrite=args.overwrite)   # one-line refusal here, nothing written
    with writing("runs/rev"), claim:                  # --overwrite removes the old run here
        train(...)                                    # the manifest records what it wrote

The rule, per folder (`attentionspan_datasets.ownership` holds the manifest):
- new or empty: written, and a manifest `.attentionspan.json` names the command;
- written by the same command: `train` continues it only with `--resume`, `eval` and
  `attention` replace their results only with `--overwrite`; `reproduce` and `supervision`
  continue (their runs resume by design: a rerun with the same options reuses what is done);
- `--overwrite` first removes what the manifest's command wrote (the recorded files and
  those named as it names its files), never anything else;
- written by another command, or holding files no command recorded (a user's
  `report.md`): refused, even with `--overwrite`, naming the folder and the ways out.

Folders written before manifests existed are recognised by what only the command writes (a
checkpoint's run file for train; reproduce's and supervision's settings.json with their
versions), so `--resume` and reruns keep working on them. In a multi-process launch only
the main process claims and writes: the others would see its manifest and refuse.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from collections.abc import Callable
from pathlib import Path

from attentionspan_datasets.ownership import (
    MANIFEST,
    Folder,
    inspect,
    listing,
    remove_entries,
    write_manifest,
)

# what an atomic write leaves behind after kill -9 (attentionspan_datasets.atomic)
LEFTOVERS = (".*.partial-*", ".*.old-*")


def _task_names() -> tuple[str, ...]:
    """reproduce's and supervision's per-task folders: the short name, `-seedK` runs."""
    from attentionspan_datasets.presets import SHORT_NAMES

    return tuple(p for short in SHORT_NAMES for p in (short, f"{short}-*"))


def _train_legacy(path: Path) -> bool:
    from harness.foundation.runs import FINAL, RUN_CONFIG_FILE, checkpoints

    return bool(checkpoints(path)) or (path / FINAL / RUN_CONFIG_FILE).is_file()


def _settings_legacy(key: str) -> Callable[[Path], bool]:
    """A settings.json the pipeline wrote: its options (with `key`) and the versions."""

    def written(path: Path) -> bool:
        try:
            data = json.loads((path / "settings.json").read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            return False
        return isinstance(data, dict) and "versions" in data and key in data

    return written


@dataclasses.dataclass(frozen=True)
class Rule:
    """How a command owns its folder."""

    patterns: Callable[[], tuple[str, ...]]  # the names of what it writes there
    again: str  # a folder it wrote, no flag: "continue" (a rerun resumes) or "refuse"
    resume_flag: str | None = None  # the flag that continues it ("--resume"), if any
    legacy: Callable[[Path], bool] | None = None  # its folder from before manifests


RULES = {
    "train": Rule(
        lambda: ("checkpoint-*", "final", "train_config.json", "log.jsonl", ".lock"),
        "refuse",
        "--resume",
        _train_legacy,
    ),
    "eval": Rule(lambda: ("results.json", "results.md", "predictions-*.jsonl"), "refuse"),
    "attention": Rule(
        lambda: ("attention.json", "attention.md", "attention.html", "*.png"), "refuse"
    ),
    "reproduce": Rule(
        lambda: (
            ("settings.json", "report.md", "results.json", "models", "stages", "*.png")
            + _task_names()
        ),
        "continue",
        legacy=_settings_legacy("counts"),
    ),
    "supervision": Rule(
        lambda: (
            ("settings.json", "report.md", "results.json", "models", "arms", "*.png")
            + _task_names()
        ),
        "continue",
        legacy=_settings_legacy("weights"),
    ),
}


def is_main_process() -> bool:
    """Rank 0, or no launcher: read from the environment torchrun / accelerate set, since
    the claim comes before the Accelerator (and its process group) exists."""
    return os.environ.get("RANK", "0") in ("0", "")


class Claim:
    """A command's hold on its output folder: entered around its work (inside `writing`),
    it applies --overwrite, writes the manifest before the first file (so a run killed with
    -9 is still known as the command's) and records what the work added when it ends; a
    folder it made that ends empty goes."""

    def __init__(
        self, path: Path | None, command: str, folder: Folder | None, overwrite: bool
    ) -> None:
        self.path, self.command, self.folder, self.overwrite = path, command, folder, overwrite
        self._before: set[str] = set()
        self._made: list[Path] = []
        self._had_manifest = False

    @property
    def active(self) -> bool:
        return self.path is not None and is_main_process()

    def patterns(self) -> tuple[str, ...]:
        return RULES[self.command].patterns() + LEFTOVERS

    def __enter__(self) -> Claim:
        if not self.active:
            return self
        from harness.foundation.outputs import missing_folders

        folder = self.folder
        if self.overwrite and folder is not None and folder.command == self.command:
            remove_entries(self.path, folder.own(self.patterns()))
        self._made = missing_folders(self.path)
        self.path.mkdir(parents=True, exist_ok=True)
        now = inspect(self.path)
        self._before = set(now.entries)
        self._had_manifest = (self.path / MANIFEST).is_file()
        # what is there already is the command's (checked): recorded before any work
        write_manifest(self.path, self.command, now.own(self.patterns()))
        return self

    def __exit__(self, kind, error, traceback) -> None:
        if not self.active or not self.path.is_dir():
            return
        with contextlib.suppress(OSError, ValueError):
            now = inspect(self.path)
            added = [e for e in now.entries if e not in self._before]
            files = set(now.own(self.patterns())) | set(added)
            # a refused run that added nothing leaves the folder as it found it
            failed_bare = kind is not None and not added and not self._had_manifest
            if files and not failed_bare:
                write_manifest(self.path, self.command, files)
                return
            if not self._had_manifest:
                (self.path / MANIFEST).unlink()
            for made in self._made:  # deepest first; a folder with anything in it stays
                made.rmdir()


def _runs_state(command: str, path: Path) -> str:
    if command == "train":
        from harness.foundation.runs import finished_run

        return "a finished run" if finished_run(path) is not None else "an interrupted run"
    return "the results of an earlier run"


def claim_output(
    option: str,
    path: str | os.PathLike | None,
    command: str,
    *,
    resume: bool = False,
    overwrite: bool = False,
) -> Claim:
    """The claim on `path` for `command` (see the module's rule), or ValueError: one line
    naming `option`, the folder and the ways out. Nothing is written here. Only the main
    process checks (see `is_main_process`); None: no folder, nothing to claim."""
    if path is None or not is_main_process():
        return Claim(None if path is None else Path(path), command, None, overwrite)
    from harness.foundation.caps import check_output_dir

    check_output_dir(option, path)  # a file, or under one: said as such
    path = Path(path)
    rule = RULES[command]
    if resume and overwrite:
        raise ValueError(
            f"{rule.resume_flag} continues the run in {option} {str(path)!r} and --overwrite "
            "replaces it: give one of them"
        )
    folder = inspect(path)
    name = f"attentionspan {command}"
    if not folder.exists or folder.empty:
        return Claim(path, command, folder, overwrite)
    if folder.command is None and rule.legacy is not None and rule.legacy(path):
        folder = dataclasses.replace(folder, command=command)  # written before manifests
    if folder.command is not None and folder.command != command:
        raise ValueError(
            f"{option} {str(path)!r} was written by attentionspan {folder.command}; give "
            f"another {option} ({name} writes only into a new or empty folder, or its own)"
        )
    if folder.command is None:
        foreign = folder.foreign()
        replaces = " (--overwrite replaces only what attentionspan wrote)" if overwrite else ""
        raise ValueError(
            f"{option} {str(path)!r} holds files {name} did not write ({listing(foreign)}); "
            f"give a new or empty folder as {option}{replaces}"
        )
    if overwrite or resume or rule.again == "continue":
        return Claim(path, command, folder, overwrite)
    state = _runs_state(command, path)
    ways = [f"--overwrite to replace it, or another {option}"]
    if rule.resume_flag and state == "an interrupted run":
        ways.insert(0, f"{rule.resume_flag} to continue it")
    raise ValueError(f"{option} {str(path)!r} holds {state} of {name}: {', '.join(ways)}")


def check_own_file(
    option: str, path: str | os.PathLike | None, command: str, written: Callable[[Path], bool]
) -> None:
    """ValueError (one line naming `option` and the file) when `path` is a file that
    `command` did not write: `written(path)` tells its own (a ranking, a baselines record).
    A file cannot carry a manifest beside it (it may sit in the user's own folder), so what
    it holds says who wrote it; the command's own file is replaced, or resumed."""
    if path is None:
        return
    path = Path(path)
    if not path.is_file() or written(path):
        return
    raise ValueError(
        f"{option} {str(path)!r} is a file attentionspan {command} did not write; give "
        f"another {option} (it would be replaced)"
    )


def json_with(*keys: str) -> Callable[[Path], bool]:
    """`written` for check_own_file: a JSON object holding `keys`."""

    def written(path: Path) -> bool:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            return False
        return isinstance(data, dict) and all(k in data for k in keys)

    return written
