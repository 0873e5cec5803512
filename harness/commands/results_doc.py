"""`attentionspan results-doc`: put a `reproduce` run's findings into docs/results.md.

    attentionspan results-doc runs/quick --date 2026-11-24 --machine "2-core CPU" \\
        --command "attentionspan reproduce --quick --output runs/quick"
    attentionspan results-doc runs/quick-va --block value_assignment ...   # a block of its own
    attentionspan results-doc runs/quick --check docs/quick-run.json       # exit 1: it moved
    attentionspan results-doc --rederive docs/quick-run.json   # every verdict from its readings
    python -m harness.commands.results_doc runs/quick --check docs/quick-run.json

The parser and the glue; the digest, the block and the check are
`harness.report.results_doc`'s.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from harness.foundation.options import (
    UsageError,
    add_config_arguments,
    cli,
    main_for,
    one_line,
)

COMMAND = "results-doc"


@dataclass
class ResultsDocOptions:
    """The options of `attentionspan results-doc`: the run, what to write or check, where."""

    run: str = field(
        default="",
        metadata=cli(
            "the reproduce --output folder (none with --rederive)", positional=True, nargs="?"
        ),
    )
    command: str | None = field(
        default=None, metadata=cli("the command that made the run (required to write)")
    )
    machine: str | None = field(
        default=None, metadata=cli("where it ran, in words (required to write)")
    )
    date: str | None = field(
        default=None, metadata=cli("when it ran, YYYY-MM-DD (required to write)")
    )
    check: str | None = field(
        default=None,
        metadata=cli(
            "write nothing: compare the run with this committed digest; exit 1 naming the "
            "figures that differ and the versions and weights behind them",
            metavar="DIGEST",
        ),
    )
    rederive: str | None = field(
        default=None,
        metadata=cli(
            "write nothing: read every verdict of this digest again from the readings it "
            "keeps (a supervision digest: from its pooled figures); say per model the "
            "recorded word, the rederived one and whether they agree; exit 1 on any "
            "disagreement",
            metavar="DIGEST",
        ),
    )
    block: str = field(
        default="",
        metadata=cli(
            "name of the doc's block (its markers read quick-findings:NAME); default: the "
            "unnamed quick-run block"
        ),
    )
    doc: str = field(
        default="docs/results.md", metadata=cli("the Markdown file that holds the block")
    )
    digest: str | None = field(
        default=None,
        metadata=cli(
            "the digest to write",
            shown="docs/quick-run.json; with --block NAME, docs/quick-run-NAME.json",
        ),
    )


def add_arguments(parser) -> None:
    add_config_arguments(parser, ResultsDocOptions, defaults=True)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        COMMAND,
        help="write a reproduce run's findings into docs/results.md (and its digest)",
        description="Write a reproduce run's findings into docs/results.md (and its digest), "
        "or --check that a run reproduces a committed digest, or --rederive every verdict "
        "of a digest from the readings it keeps.",
    )
    add_arguments(parser)
    parser.set_defaults(func=run_command)


def run_command(args) -> int:
    from pathlib import Path

    from harness.report import results_doc

    if args.rederive:
        from harness.report.rederive import rederive_digest

        with one_line(ValueError, OSError):
            lines, agree = rederive_digest(Path(args.rederive))
            print("\n".join(lines))
            return 0 if agree else 1
    if not args.run:
        raise UsageError(
            "give the reproduce --output folder (--rederive alone reads a digest only)"
        )
    if not args.check:
        missing = [f"--{k}" for k in ("command", "machine", "date") if not getattr(args, k)]
        if missing:
            raise UsageError(f"{', '.join(missing)} required to write the block")
    with one_line(ValueError, OSError):  # a bad file or folder: one line, status 2
        if args.check:
            problems = results_doc.check(Path(args.run), Path(args.check))
            print("\n".join(problems) or f"{args.run} reproduces {args.check}")
            return 1 if problems else 0
        digest_file = Path(args.digest or results_doc.digest_path(args.block))
        print(
            results_doc.write(
                Path(args.run),
                Path(args.doc),
                digest_file,
                command=args.command,
                machine=args.machine,
                date=args.date,
                block=args.block,
            )
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    return main_for(COMMAND, add_arguments, run_command, argv)


if __name__ == "__main__":
    sys.exit(main())
