"""The --output folder of a command: new, empty, or written by the same command, else refused
before any work; what the command writes is recorded in the folder's manifest.

    claim = claim_output("--output", "runs/rev", "train", resume=args.resume,
                         overwrite=args.overwrite)   # one-line refusal here, nothing written
    with writing("runs/rev"), claim:                  # --overwrite moves the old run aside
        train(...)                                    # the manifest records what it wrote

The rule, per folder (`attentionspan_datasets.ownership` holds the manifest):
- new or empty: written, and a manifest `.attentionspan.json` names the command;
- written by the same command: `train` continues it only with `--resume`, `eval` and
  `attention` replace their results only with `--overwrite`; `reproduce` and `supervision`
  continue (their runs resume by design: a rerun with the same options reuses what is done);
  a `train` run stopped before its first checkpoint holds nothing to keep or resume, and a
  plain `train` starts it again;
- `--overwrite` replaces only what the manifest records the command wrote (and a killed
  train run's checkpoints, known by the run file and training state inside them, not by
  their names): a user's file is kept whatever its name (`checkpoint-best/`, `my-figure.png`);
- the earlier run is replaced only when the new one is whole: its entries move into the
  hidden folder `.attentionspan-replaced` when the new run starts and are removed when it
  ends well; an error, Ctrl-C or SIGTERM puts them back as they were, and so does the next
  command on the folder after a `kill -9` (an interrupted `train --overwrite` is therefore
  not resumed: the earlier run stays);
- a folder a command is writing now (its manifest names a process that still runs) is
  refused as in use; written by another command, or holding files no command recorded (a
  user's `report.md`): refused, even with `--overwrite`, naming the folder and the ways out.

Folders written before manifests existed are recognised by what only the command writes (a
checkpoint's run file for train; reproduce's and supervision's settings.json with their
versions), so `--resume` and reruns keep working on them. In a multi-process launch only
the main process claims and writes: the others would see its manifest and refuse.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
from collections.abc import Callable
from pathlib import Path

from attentionspan_datasets.jsonfile import read_json
from attentionspan_datasets.ownership import (
    MANIFEST,
    Folder,
    inspect,
    listing,
    move_aside,
    open_record,
    put_back,
    read_manifest,
    running,
    settle,
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


def _train_checkpoint(path: Path) -> bool:
    """A checkpoint train wrote (a killed run's last one is not recorded): known by the run
    file and the training state inside it, so a user's `checkpoint-best/` is not taken."""
    from harness.foundation.runs import CHECKPOINT_PREFIX, RUN_CONFIG_FILE, TRAINING_STATE_FILE

    return (
        path.name.startswith(CHECKPOINT_PREFIX)
        and path.is_dir()
        and not path.is_symlink()
        and (path / RUN_CONFIG_FILE).is_file()
        and (path / TRAINING_STATE_FILE).is_file()
    )


def _settings_legacy(key: str) -> Callable[[Path], bool]:
    """A settings.json the pipeline wrote: its options (with `key`) and the versions."""

    def written(path: Path) -> bool:
        try:  # torn or absurdly deep: not the pipeline's (json's RecursionError included)
            data = read_json(path / "settings.json")
        except ValueError:
            return False
        return isinstance(data, dict) and "versions" in data and key in data

    return written


@dataclasses.dataclass(frozen=True)
class Rule:
    """How a command owns its folder."""

    # the names of what it writes there: read only for what a run of it added to its folder
    # (recorded as there before it started: a run killed with -9 recorded nothing after),
    # and in a folder from before manifests
    patterns: Callable[[], tuple[str, ...]]
    again: str  # a folder it wrote, no flag: "continue" (a rerun resumes) or "refuse"
    resume_flag: str | None = None  # the flag that continues it ("--resume"), if any
    legacy: Callable[[Path], bool] | None = None  # its folder from before manifests
    recognise: Callable[[Path], bool] | None = None  # an entry it wrote, known by its files


RULES = {
    "train": Rule(
        lambda: ("checkpoint-*", "final", "train_config.json", "log.jsonl", ".lock"),
        "refuse",
        "--resume",
        _train_legacy,
        _train_checkpoint,
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


def own_entries(folder: Folder, command: str) -> list[str]:
    """What `command` wrote in `folder`: what its manifest records, a killed run's checkpoint
    (by its files), the leftovers of atomic writes; in a folder from before manifests, what
    is named as the command names its files."""
    rule = RULES[command]
    names = LEFTOVERS + (rule.patterns() if folder.command is None else ())
    return folder.own(names, rule.recognise)


def recover(path: Path, command: str, option: str = "--output") -> Folder:
    """The folder as a run that ended without a word left it (`kill -9`): an earlier run it
    was replacing is put back (said on stderr), and what it added is recorded (what was not
    there when it started and is named as the command names its files). ValueError when the
    run still goes on."""
    folder = inspect(path)
    record = folder.open
    if record is None:
        return folder
    if running(record):
        raise ValueError(
            f"{option} {str(path)!r} is in use by attentionspan {folder.command} (pid "
            f"{record.get('pid')} on {record.get('host')}); wait for that run to end or give "
            f"another {option}"
        )
    rule = RULES.get(folder.command or "")
    patterns = (rule.patterns() if rule else ()) + LEFTOVERS
    if record.get("aside"):
        put_back(path, patterns)
        print(
            f"attentionspan: {str(path)!r}: the earlier run is back as it was (the run that "
            f"was replacing it, pid {record.get('pid')}, ended before it finished)",
            file=sys.stderr,
        )
    else:
        before = set(record.get("before", ()))
        added = [e for e in folder.own(patterns) if e not in before]
        write_manifest(path, folder.command, [*folder.files, *added])
    return inspect(path)


class Claim:
    """A command's hold on its output folder: entered around its work (inside `writing`),
    it writes the manifest before the first file (with the `open` record of this process,
    so a run killed with -9 is still known as the command's), moves the earlier run aside
    when it replaces one, and when the work ends records what it added and removes the
    earlier run, or, when the work failed or was interrupted, puts the earlier run back as
    it was; a folder it made that ends empty goes."""

    def __init__(
        self, path: Path | None, command: str, folder: Folder | None, overwrite: bool
    ) -> None:
        self.path, self.command, self.folder, self.overwrite = path, command, folder, overwrite
        self.replacing = False  # an earlier run is aside while the work runs
        self._before: set[str] = set()
        self._made: list[Path] = []
        self._had_manifest = False

    @property
    def active(self) -> bool:
        return self.path is not None and is_main_process()

    @property
    def will_replace(self) -> bool:
        """Entering will move an earlier run aside: what could refuse the work is best
        checked before, so that a refusal never touches the earlier run (put back as it was
        all the same, but moved twice)."""
        return (
            self.active
            and self.overwrite
            and self.folder is not None
            and bool(own_entries(self.folder, self.command))
        )

    def patterns(self) -> tuple[str, ...]:
        return RULES[self.command].patterns() + LEFTOVERS

    def __enter__(self) -> Claim:
        if not self.active:
            return self
        from harness.foundation.outputs import missing_folders

        self._made = missing_folders(self.path)
        self.path.mkdir(parents=True, exist_ok=True)
        now = inspect(self.path)
        self._had_manifest = (self.path / MANIFEST).is_file()
        own = own_entries(now, self.command)
        self._before = set(now.entries)
        if self.overwrite and own:
            # the earlier run waits aside until this one is whole
            try:
                move_aside(self.path, own, self.command, now.entries)
            except BaseException:  # a move refused half-way (or Ctrl-C): all back
                with contextlib.suppress(OSError, ValueError):
                    put_back(self.path, self.patterns())
                raise
            self.replacing = True
            self._before -= set(own)
        else:  # what is there already is the command's (checked): recorded before any work
            write_manifest(self.path, self.command, own, open_record(now.entries))
        return self

    def __exit__(self, kind, error, traceback) -> None:
        if not self.active or not self.path.is_dir():
            return
        if self.replacing and kind is not None:
            with contextlib.suppress(OSError, ValueError):  # else the next command does it
                put_back(self.path, self.patterns())
                if issubclass(kind, KeyboardInterrupt):
                    print(
                        f"the earlier run in {str(self.path)!r} is kept as it was (the run "
                        "replacing it did not finish, and nothing of it is kept); to replace "
                        "it, run the command again with --overwrite (it starts over)",
                        file=sys.stderr,
                    )
            return
        with contextlib.suppress(OSError, ValueError):
            now = inspect(self.path)
            added = [e for e in now.entries if e not in self._before]
            files = set(own_entries(now, self.command)) | set(added)
            if self.replacing:
                settle(self.path, self.command, files)  # whole: the earlier run goes
                return
            # a refused run that added nothing leaves the folder as it found it
            failed_bare = kind is not None and not added and not self._had_manifest
            if (files or self._had_manifest) and not failed_bare:
                write_manifest(self.path, self.command, files)
                return
            (self.path / MANIFEST).unlink()
            for made in self._made:  # deepest first; a folder with anything in it stays
                made.rmdir()


def replacing(path: str | os.PathLike) -> bool:
    """Whether `path` lies in (or is) a folder whose run now replaces an earlier run (the
    manifest's open record names the folder the earlier run waits in): an interruption then
    puts the earlier run back and keeps nothing of this one, so there is nothing to
    continue. A model folder of reproduce or supervision is asked about by its own path."""
    for folder in (Path(path), *Path(path).parents):
        try:
            manifest = read_manifest(folder)
        except (OSError, ValueError):  # a manifest no run of this package wrote
            continue
        record = (manifest or {}).get("open")
        if isinstance(record, dict) and record.get("aside"):
            return True
    return False


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
    naming `option`, the folder and the ways out. Nothing is written here, except that a run
    killed with -9 is settled first (`recover`: the earlier run it was replacing is put
    back). Only the main process checks (see `is_main_process`); None: no folder, nothing
    to claim."""
    if path is None or not is_main_process():
        return Claim(None if path is None else Path(path), command, None, overwrite)
    from harness.foundation.caps import check_output_dir

    check_output_dir(option, path)  # a file, or under one: said as such
    path = Path(path)
    if path.is_symlink() and not path.exists():  # else mkdir fails after the model loads
        raise ValueError(
            f"{option} {str(path)!r} is a symbolic link to {os.readlink(path)!r}, which does "
            f"not exist; create that folder, or give another {option}"
        )
    rule = RULES[command]
    if resume and overwrite:
        raise ValueError(
            f"{rule.resume_flag} continues the run in {option} {str(path)!r} and --overwrite "
            "replaces it: give one of them"
        )
    folder = recover(path, command, option)  # in use: refused; killed: put back
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
    if command == "train" and not _train_legacy(path):
        # no checkpoint and no final model (a run stopped before its first checkpoint):
        # nothing to continue, nothing worth keeping; a plain train starts it again
        if resume:
            raise ValueError(
                f"--resume: no checkpoint to resume in {option} {str(path)!r} (its run "
                "stopped before its first checkpoint): start it again with the train command "
                "that began it, without --resume"
            )
        return Claim(path, command, folder, True)
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
        try:  # torn or absurdly deep: not the command's (json's RecursionError included)
            data = read_json(path)
        except ValueError:
            return False
        return isinstance(data, dict) and all(k in data for k in keys)

    return written
