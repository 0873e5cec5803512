"""`attentionspan results-doc`: put a `reproduce` run's findings into docs/results.md.

    attentionspan results-doc runs/quick --date 2026-11-24 --machine "2-core CPU" \\
        --command "attentionspan reproduce --quick --output runs/quick"
    attentionspan results-doc runs/quick-va --block value_assignment ...   # a block of its own
    attentionspan results-doc runs/quick --check docs/quick-run.json       # exit 1: it moved
    python -m harness.commands.results_doc runs/quick --check docs/quick-run.json

The parser and the glue; the digest, the block and the check are
`harness.report.results_doc`'s.
"""

from __future__ import annotations

import sys

from harness.foundation.options import UsageError, main_for, one_line

COMMAND = "results-doc"


def add_arguments(parser) -> None:
    from harness.report.results_doc import DIGEST

    parser.add_argument("run", help="the reproduce --output folder")
    parser.add_argument("--command", help="the command that made the run (required to write)")
    parser.add_argument("--machine", help="where it ran, in words (required to write)")
    parser.add_argument("--date", help="when it ran, YYYY-MM-DD (required to write)")
    parser.add_argument(
        "--check",
        metavar="DIGEST",
        help="write nothing: compare the run with this committed digest; exit 1 naming the "
        "figures that differ and the versions and weights behind them",
    )
    parser.add_argument(
        "--block",
        default="",
        help="name of the doc's block (its markers read quick-findings:NAME); default: the "
        "unnamed quick-run block",
    )
    parser.add_argument("--doc", default="docs/results.md")
    parser.add_argument(
        "--digest", default=None, help=f"default {DIGEST}, or quick-run-NAME.json with --block"
    )


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        COMMAND,
        help="write a reproduce run's findings into docs/results.md (and its digest)",
        description="Write a reproduce run's findings into docs/results.md (and its digest), "
        "or --check that a run reproduces a committed digest.",
    )
    add_arguments(parser)
    parser.set_defaults(func=run_command)


def run_command(args) -> int:
    from pathlib import Path

    from harness.report import results_doc

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
