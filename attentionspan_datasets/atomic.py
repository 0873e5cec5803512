"""Atomic writes: a reader sees the old file (or folder) or the new one, never half of one.

    from attentionspan_datasets.atomic import atomic_path, atomic_write_bytes, atomic_write_text
    atomic_write_text("runs/x/config.json", text)
    with atomic_path("out/model.safetensors") as tmp:   # a temp path in the same folder
        save_file(tensors, tmp)                          # renamed over the target on success
    with atomic_path("attentionspan-data", directory=True) as staging:
        ...                                              # fill a folder, swapped in at the end

Everything is written next to the target (`.NAME.partial-PID-XXXX`, same file system, so the
final `os.replace` is atomic), flushed to disk with fsync, then renamed. On an exception the
temporary is removed; after a `kill -9` it stays behind, and the next atomic write to the same
target removes the leftovers of processes that no longer run (SIGTERM ends a process as a
`kill -9` does unless it is handled: `harness.foundation.outputs.writing` turns it into an
exception).
An OSError that escapes names the target, not the temporary, so a full or read-only disk
reads `[Errno 28] No space left on device: 'runs/x/config.json'`. Created files and folders
get the permissions the umask allows (0666 / 0777 minus umask), as `open` and `mkdir` would
give them, not the private 0600 / 0700 of `tempfile`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

_LEFTOVER = re.compile(r"^\.(?P<name>.+)\.(?:partial|old)-(?:(?P<pid>\d+)-)?[^.]*$")


def current_umask() -> int:
    """The process umask (read from /proc where it can be, so no other thread sees it
    change; else set and restored at once)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fsync_dir(folder: Path) -> None:
    # The rename is durable once the folder's entry is on disk (not possible everywhere).
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def clean_leftovers(path: str | os.PathLike) -> list[Path]:
    """Remove `.NAME.partial-*` / `.NAME.old-*` temporaries of `path` left by processes that
    no longer run (or by versions that did not record their process id); returns them."""
    path = Path(path)
    removed = []
    if not path.parent.is_dir():
        return removed
    for entry in path.parent.iterdir():
        match = _LEFTOVER.match(entry.name)
        if not match or match["name"] != path.name:
            continue
        if match["pid"] is not None and _alive(int(match["pid"])):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                entry.unlink()
        removed.append(entry)
    return removed


def _temp_prefix(path: Path, kind: str = "partial") -> str:
    return f".{path.name}.{kind}-{os.getpid()}-"


@contextlib.contextmanager
def atomic_path(
    path: str | os.PathLike, *, directory: bool = False, replace: bool = True
) -> Iterator[Path]:
    """Yield a temporary path next to `path`; on success it replaces `path`.

    For a file, the temporary exists (empty) and the caller writes it by name. With
    `directory=True` it is an empty folder; an existing `path` folder is moved aside, the new
    one renamed in, and the old one removed (two renames: a reader may briefly find no folder,
    never a partial one). With `replace=False` (folders only) the one rename that puts the
    folder in place fails with FileExistsError when `path` is a folder with anything in it
    by then: of two writers that both found `path` missing, only the first wins. Parents are
    created.
    """
    path = Path(path)
    temp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        clean_leftovers(path)
        umask = current_umask()
        if directory:
            temp = Path(tempfile.mkdtemp(prefix=_temp_prefix(path), dir=path.parent))
            os.chmod(temp, 0o777 & ~umask)
        else:
            fd, name = tempfile.mkstemp(prefix=_temp_prefix(path), dir=path.parent)
            temp = Path(name)
            os.close(fd)
            os.chmod(temp, 0o666 & ~umask)
        yield temp
        if directory:
            _replace_dir(temp, path, replace)
        else:
            with open(temp, "rb+") as handle:
                os.fsync(handle.fileno())
            os.replace(temp, path)
        _fsync_dir(path.parent)
    except BaseException as error:
        if temp is not None:
            _remove(temp)
        if isinstance(error, OSError) and error.errno is not None:  # not a message of ours
            _name_the_target(error, path)
        raise


def _remove(temp: Path) -> None:
    if temp.is_dir() and not temp.is_symlink():
        shutil.rmtree(temp, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()


def _name_the_target(error: OSError, path: Path) -> None:
    """An OSError that names no file (`write` on a full disk) or only the temporary names
    `path`, the file the user asked for, so its one-line message says what failed."""
    name = error.filename
    if name is None or Path(os.fsdecode(name)).name.startswith(f".{path.name}."):
        error.filename = str(path)
        error.filename2 = None


REPLACE_ATTEMPTS = 20


def _replace_dir(staging: Path, path: Path, replace: bool = True) -> None:
    for root, _, files in os.walk(staging):
        for name in files:
            with open(os.path.join(root, name), "rb") as handle:
                os.fsync(handle.fileno())
    if not replace:
        # rename(2) of a folder onto an existing one succeeds only if that one is empty:
        # the check and the replacement are one atomic step.
        try:
            os.rename(staging, path)
        except OSError as error:
            if error.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
                raise
            what = "a file" if path.exists() and not path.is_dir() else "a folder that is not empty"
            raise FileExistsError(
                f"{path} became {what} while this process was writing it (another writer?); "
                f"it was left as it is"
            ) from None
        return
    # Replacing is two renames (the old folder aside, the new one in): a concurrent writer
    # can place its folder between them, or move the old one first. Either way the folder
    # at `path` is some writer's whole export, so try again rather than fail.
    for _ in range(REPLACE_ATTEMPTS):
        old = None
        if path.exists() or path.is_symlink():
            if not path.is_dir() or path.is_symlink():
                raise FileExistsError(f"{path} exists and is not a folder")
            old = Path(tempfile.mkdtemp(prefix=_temp_prefix(path, "old"), dir=path.parent))
        try:
            if old is not None:
                os.rename(path, old / "data")
            os.rename(staging, path)
            return
        except FileNotFoundError:
            continue  # another writer moved the old folder aside first
        except OSError as error:
            if error.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
            continue  # another writer's folder arrived in between
        finally:
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
    raise FileExistsError(
        f"{path} was replaced by other writers {REPLACE_ATTEMPTS} times while this process "
        "tried to place its own; it was left as it is"
    )


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write `data` to `path` atomically; returns the path."""
    with atomic_path(path) as temp:
        temp.write_bytes(data)
    return Path(path)


def atomic_write_text(path: str | os.PathLike, text: str, encoding: str = "utf-8") -> Path:
    """Write `text` to `path` atomically (no newline translation); returns the path."""
    return atomic_write_bytes(path, text.encode(encoding))
