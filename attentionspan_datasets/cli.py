"""The data layer's commands: `python -m attentionspan_datasets COMMAND`.

    python -m attentionspan_datasets generate addition_ood -n 5 --format text
    python -m attentionspan_datasets show reversal_id
    python -m attentionspan_datasets export reversal_id --out data

The `attentionspan` console script is the top layer (harness/cli.py); it offers these
commands and the model commands. This module knows nothing above the data layer: a parser
above adds the data commands with `add_data_commands(subparsers)` (or by importing the
modules of DATA_COMMAND_MODULES). Each command module offers `add_parser(subparsers)`; its
parser sets `func`. A command's heavy imports stay inside its run function. Errors a user
can fix (`ValueError`, `UsageError`) print one line and exit with status 2.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

DATA_COMMAND_MODULES = [
    "attentionspan_datasets.commands.generate",
    "attentionspan_datasets.commands.export",
]
COMMAND_MODULES = DATA_COMMAND_MODULES  # the name older code imports


class UsageError(Exception):
    """A problem with the user's input that is not a bad task parameter."""


class _OneLineParser(argparse.ArgumentParser):
    """Errors in one line that names the subcommand and its --help, as the `attentionspan`
    console script prints them (harness.options.OneLineParser; this layer cannot import
    it): argparse would print the usage block and name only the top-level program for an
    unknown option of a subcommand."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        if extras and not hasattr(namespace, "_unrecognized_prog"):
            namespace._unrecognized_prog = self.prog  # the innermost parser left them
        return namespace, extras

    def parse_args(self, args=None, namespace=None):
        namespace, extras = self.parse_known_args(args, namespace)
        prog = vars(namespace).pop("_unrecognized_prog", self.prog)
        if extras:
            message = f"unrecognized arguments: {' '.join(extras)}"
            self.exit(2, f"{prog}: error: {message} (see {prog} --help)\n")
        return namespace


def build_parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(
        prog="attentionspan",
        description="Algorithmic tasks with reference attention masks: generate, draw and "
        "export the data.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    add_data_commands(subparsers)
    return parser


def add_data_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add every data command (generate, show, export) to `subparsers`."""
    for name in DATA_COMMAND_MODULES:
        importlib.import_module(name).add_parser(subparsers)


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
