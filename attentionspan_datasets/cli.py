"""The data layer's commands: `python -m attentionspan_datasets COMMAND`.

    python -m attentionspan_datasets generate addition_ood -n 5 --format text
    python -m attentionspan_datasets show reversal_id
    python -m attentionspan_datasets export reversal_id --out data
    python -m attentionspan_datasets check-task string_rotation

The `attentionspan` console script is the top layer (harness/cli.py); it offers these
commands and the model commands. This module knows nothing above the data layer: a parser
above adds the data commands with `add_data_commands(subparsers)` (or by importing the
modules of DATA_COMMAND_MODULES). Each command module offers `add_parser(subparsers)`; its
parser sets `func`. A command's heavy imports stay inside its run function. Errors a user
can fix (`ValueError`, `UsageError`) print one line and exit with status 2
(`attentionspan_datasets.guard.run_guarded`, which the harness's commands share).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from attentionspan_datasets.guard import (  # noqa: F401  (UsageError: re-exported)
    OneLineParser,
    UsageError,
    run_guarded,
)

DATA_COMMAND_MODULES = [
    "attentionspan_datasets.commands.generate",
    "attentionspan_datasets.commands.export",
    "attentionspan_datasets.commands.check_task",
]
COMMAND_MODULES = DATA_COMMAND_MODULES  # the name older code imports


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="attentionspan",
        description="Algorithmic tasks with reference attention masks: generate, draw and "
        "export the data.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    add_data_commands(subparsers)
    return parser


def add_data_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add every data command (generate, show, export, check-task) to `subparsers`."""
    for name in DATA_COMMAND_MODULES:
        importlib.import_module(name).add_parser(subparsers)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return run_guarded(args.command, args.func, args)


if __name__ == "__main__":
    sys.exit(main())
