"""`attentionspan supervision-doc`: put a supervision study's findings into a doc.

    attentionspan supervision-doc runs/sup-reversal --doc docs/results.md \\
        --digest docs/supervision-reversal.json --date 2026-12-01 --machine "2-core CPU" \\
        --command "attentionspan supervision --tasks reversal --seeds 3 --output runs/sup-reversal"
    python -m harness.commands.supervision_doc runs/sup-reversal ...

The parser and the glue; the digest and the block are `harness.report.supervision_doc`'s.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from harness.foundation.options import add_config_arguments, cli, main_for, one_line

COMMAND = "supervision-doc"


@dataclass
class SupervisionDocOptions:
    """The options of `attentionspan supervision-doc`: the study, its description, where."""

    run: str = field(
        default="",
        metadata=cli("the `attentionspan supervision --output` folder", positional=True),
    )
    command: str | None = field(
        default=None, metadata=cli("the command that made the run", required=True)
    )
    machine: str | None = field(default=None, metadata=cli("where it ran, in words", required=True))
    date: str | None = field(default=None, metadata=cli("when it ran, YYYY-MM-DD", required=True))
    doc: str = field(default="docs/results.md", metadata=cli("the Markdown file to update"))
    digest: str | None = field(
        default=None,
        metadata=cli(
            "the digest to write, e.g. docs/supervision-reversal.json (its name names the "
            "doc's block)",
            required=True,
        ),
    )


def add_arguments(parser) -> None:
    add_config_arguments(parser, SupervisionDocOptions, defaults=True)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        COMMAND,
        help="write a supervision study's findings into a doc (and its digest)",
        description="Write a supervision study's findings into a doc (and its digest).",
    )
    add_arguments(parser)
    parser.set_defaults(func=run_command)


def run_command(args) -> int:
    from pathlib import Path

    from harness.report.supervision_doc import write

    with one_line(ValueError, OSError):  # a bad file or folder: one line, status 2
        print(
            write(
                Path(args.run),
                Path(args.doc),
                Path(args.digest),
                command=args.command,
                machine=args.machine,
                date=args.date,
            )
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    return main_for(COMMAND, add_arguments, run_command, argv)


if __name__ == "__main__":
    sys.exit(main())
