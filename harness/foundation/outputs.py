"""Output paths: checked before any work, and a write that fails is one line naming the path.

    check_output_folder("--output", "runs/rev/eval")      # before the model is loaded
    check_output_file("--output", "runs/rev/heads.json")
    with writing("runs/rev/eval", discard=True):           # around the command's work
        write_reports(...)

`check_output_*` refuse at once, as one `WriteError` line, a path that cannot be written: a
file where a folder should be (`harness.foundation.caps`' checks), a read-only or full disk, a
folder
this user may not write. Permission bits cannot tell (root passes them all), so a probe
file is created, written and removed in the deepest folder of the path that exists.

`writing` turns what still fails inside it (the disk filled up during the run) into one
line, `cannot write PATH: no space left on the device (...)`: an OSError of a write, and
the errors safetensors and torch.save raise for the same causes. On the way out of a failed
block it removes the folders the block created (only the empty ones, or wholly with
`discard`: for a command whose folder holds nothing but what it writes at the end). It
also makes SIGTERM raise `Terminated` (a KeyboardInterrupt) instead of ending the process
on the spot, so the temporary files of atomic writes (`attentionspan_datasets.atomic`) are
removed and the command ends as an interruption (status 143, as SIGTERM's); after a
`kill -9` the next write of the same file removes them. Data layer: nothing of the harness above it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from attentionspan_datasets.guard import UsageError

# Errors a write alone raises, with what to do about them.
FULL = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "disk quota exceeded"}
WRITE_ONLY = {
    **FULL,
    errno.EROFS: "read-only file system",
    errno.EFBIG: "file too large for the file system",
}
# Errors of any access (a read too): worded without "write" unless the path is an output.
ACCESS = {
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ENOTDIR: "a file stands where a folder should be",
    errno.EISDIR: "a folder stands where a file should be",
    errno.ENAMETOOLONG: "file name too long",
}
ADVICE = {
    **dict.fromkeys(FULL, "free some space, or write to another disk"),
    errno.EROFS: "write to another disk",
    errno.EACCES: "write to a folder you may write",
    errno.EPERM: "write to a folder you may write",
}
PROBE_BYTES = 4096  # a full disk may still create an empty file; it refuses data
NEARLY_FULL = 1 << 20  # bytes: under this free, a torch.save that failed ran out of space
_RUST_OS_ERROR = re.compile(r"os error (\d+)")  # safetensors: "... (os error 28)"
_TORCH_WRITER = ("PytorchStreamWriter", "inline_container")  # torch.save's writer


class WriteError(UsageError):
    """A path that cannot be written: one line naming it (status 2)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the process stands (inside `writing`) so cleanups run; the
    command then exits as a process ended by SIGTERM would (128 + 15)."""

    exit_status = 143


def reason(code: int) -> str:
    return WRITE_ONLY.get(code) or ACCESS.get(code) or os.strerror(code).lower()


def _known(code: int | None) -> int | None:
    return code if code in WRITE_ONLY or code in ACCESS else None


def _existing(path: Path) -> Path:
    """The deepest folder of `path` (itself included) that exists."""
    for folder in (path, *path.parents):
        if folder.is_dir():
            return folder
    return Path(".")


def _nearly_full(path: Path) -> bool:
    try:
        usage = shutil.disk_usage(_existing(path))
    except OSError:
        return False
    return usage.free < NEARLY_FULL


def write_errno(error: BaseException, path: str | os.PathLike) -> int | None:
    """The errno of a failed write (one of WRITE_ONLY or ACCESS), or None when `error` is
    something else: an OSError's own; the OS error a safetensors message quotes; for torch's
    stream writer (which says only "unexpected pos"), ENOSPC when the disk of `path` is
    (nearly) full."""
    if isinstance(error, OSError):
        return _known(error.errno)
    text = str(error)
    match = _RUST_OS_ERROR.search(text)
    if match:
        return _known(int(match.group(1)))
    if isinstance(error, RuntimeError) and any(w in text for w in _TORCH_WRITER):
        return errno.ENOSPC if _nearly_full(Path(path)) else None
    return None


def _within(name: str, folder: Path) -> bool:
    try:
        return Path(os.fsdecode(name)).resolve().is_relative_to(folder.resolve())
    except (OSError, TypeError, ValueError):
        return False


def write_message(path: str | os.PathLike, code: int, filename: str | None = None) -> str:
    """`cannot write PATH: REASON (ADVICE)`; an access error on a file outside `path` (a
    model file read) names that file without saying "write"."""
    name = os.fsdecode(filename) if filename else str(path)
    text = reason(code)
    if code in ACCESS and filename and not _within(filename, Path(path)):
        return f"{name}: {text}"
    advice = f" ({ADVICE[code]})" if code in ADVICE else ""
    return f"cannot write {name}: {text}{advice}"


# --- before any work ---------------------------------------------------------------------
def _probe(folder: Path) -> None:
    """Create, write and remove a file in `folder`; the OSError of whatever fails."""
    fd, name = tempfile.mkstemp(prefix=".attentionspan-probe-", dir=folder)
    try:
        os.write(fd, b"\0" * PROBE_BYTES)
    finally:
        try:
            os.close(fd)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(name)


def _check_writable(name: str, path: Path, what: str, advice: str | None = None) -> None:
    folder = _existing(path if what == "folder" else path.parent)
    try:
        _probe(folder)
    except OSError as error:
        code = error.errno or errno.EIO
        where = "" if folder == path else f"{str(folder)!r}: "
        advice = advice or ADVICE.get(code)
        advice = f"; {advice}" if advice else ""
        # a folder that exists and still answers "no such file" (a pseudo file system such
        # as /proc) takes no new files: say that, not that something is missing
        why = (
            "files cannot be created there"
            if code == errno.ENOENT and folder.is_dir()
            else reason(code)
        )
        raise WriteError(f"{name} {str(path)!r} cannot be written ({where}{why}){advice}") from None


def check_output_folder(
    name: str, path: str | os.PathLike | None, advice: str | None = None
) -> None:
    """WriteError (one line naming `name` and `path`, and `advice` if given, else what to do
    about the error) unless `path` is a folder this process can create or write into;
    nothing is left behind. None: nothing to check."""
    from harness.foundation.caps import check_output_dir

    if path is None:
        return
    check_output_dir(name, path)  # empty, a file, or under a file
    _check_writable(name, Path(path), "folder", advice)


def check_output_file(name: str, path: str | os.PathLike | None) -> None:
    """WriteError unless the file `path` can be written (atomically: a temporary file in its
    folder, renamed); None: nothing to check."""
    from harness.foundation.caps import check_output_file as check_file_path

    if path is None:
        return
    check_file_path(name, path)  # empty, a folder, or under a file
    _check_writable(name, Path(path), "file")


# --- while writing -----------------------------------------------------------------------
@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM raises `Terminated` inside the block (main thread, where nothing else handles
    SIGTERM), so `finally` blocks and atomic writes clean up; the handler is put back after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield  # someone handles it already (an outer block, or the training loop)
        return

    def stop(signum, frame):
        raise Terminated("terminated (SIGTERM)")

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def missing_folders(folder: str | os.PathLike) -> list[Path]:
    """The folders of `folder` (itself included) that do not exist yet, deepest first: what
    `mkdir(parents=True)` would create, and so what a refused run must remove."""
    missing = []
    for candidate in (Path(folder), *Path(folder).parents):
        if candidate.exists() or candidate.is_symlink():
            break
        missing.append(candidate)
    return missing


def _first_missing(folder: Path) -> Path | None:
    """The outermost folder of `folder` (itself included) that does not exist yet."""
    missing = missing_folders(folder)
    return missing[-1] if missing else None


def _remove_created(top: Path, folder: Path, wholly: bool) -> None:
    if wholly:
        shutil.rmtree(top, ignore_errors=True)
        return
    for candidate in (folder, *folder.parents):  # deepest first, empty ones only
        with contextlib.suppress(OSError):
            candidate.rmdir()
        if candidate == top:
            break


@contextlib.contextmanager
def writing(
    path: str | os.PathLike | None, *, file: bool = False, discard: bool = False
) -> Iterator[None]:
    """Around a command's work that writes `path` (a folder, or a file with `file`): a
    failed write inside is one `WriteError` line naming the file (or `path` when the error
    does not say); the folders of `path` that the block created are removed when it fails
    (the empty ones, or wholly with `discard`); SIGTERM raises `Terminated`."""
    target = Path(path) if path is not None else None
    folder = target.parent if (target is not None and file) else target
    top = _first_missing(folder) if folder is not None else None
    with terminate_as_interrupt():
        try:
            yield
        except WriteError:
            _cleanup(top, folder, discard)
            raise
        except BaseException as error:
            _cleanup(top, folder, discard)
            code = write_errno(error, target if target is not None else Path("."))
            if code is None:
                raise
            filename = getattr(error, "filename", None)
            if target is None and filename is None:
                raise WriteError(f"a write failed: {reason(code)}") from None
            raise WriteError(write_message(target or filename, code, filename)) from None


def _cleanup(top: Path | None, folder: Path | None, discard: bool) -> None:
    if top is not None and folder is not None and top.is_dir():
        _remove_created(top, folder, discard)
