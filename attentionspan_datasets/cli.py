"""The `attentionspan` command line.

    attentionspan generate addition_ood -n 5 --format text
    attentionspan show reversal_id
    attentionspan --help

Each command module offers `add_parser(subparsers)`; its parser sets `func`. Modules are
named here as strings and imported on start, so a command's heavy imports (torch,
transformers) must stay inside its run function: `generate` never loads torch.
Errors a user can fix (`ValueError`, `UsageError`) print one line and exit with status 2.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

COMMAND_MODULES = [
    "attentionspan_datasets.commands.generate",
    "attentionspan_datasets.commands.export",
]


class UsageError(Exception):
    """A problem with the user's input that is not a bad task parameter."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="attentionspan",
        description="Algorithmic tasks with reference attention masks: generate, draw and "
        "export the data.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args) or 0
    except (ValueError, UsageError, FileNotFoundError, FileExistsError) as error:
        if os.environ.get("ATTENTIONSPAN_TRACEBACK"):
            raise
        print(f"attentionspan {args.command}: error: {error}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # `attentionspan generate ... | head`: the reader is gone, which is not an error.
        # Point stdout at devnull so the interpreter's final flush does not complain.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print(f"attentionspan {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
