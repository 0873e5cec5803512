"""`attentionspan scratch-doc`: the README's scratch reversal model, run, digested and written
into its pages.

    attentionspan scratch-doc run --output /tmp/figs/scratch-reversal \\
        --date 2026-11-26 --machine "the 2-core development CPU, one torch thread"
    attentionspan scratch-doc check --output /tmp/figs/scratch-reversal-2   # exit 1: it moved
    attentionspan scratch-doc render          # the pages' blocks from the committed digest
    python -m harness.commands.scratch_doc render

The parser and the glue; the steps, the digest and the pages are
`harness.report.scratch_doc`'s.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from harness.foundation.options import add_config_arguments, cli, main_for, one_line

COMMAND = "scratch-doc"


DIGEST_HELP = cli("the digest", shown="docs/scratch-reversal.json of this repository")


@dataclass
class RenderOptions:
    """`scratch-doc render`: the pages' blocks from the digest alone."""

    digest: str | None = field(default=None, metadata=DIGEST_HELP)


@dataclass
class CheckOptions(RenderOptions):
    """`scratch-doc check`: the missing steps run in --output, compared with the digest."""

    output: str | None = field(default=None, metadata=cli("the run folder", required=True))


@dataclass
class RunOptions(CheckOptions):
    """`scratch-doc run`: the missing steps run, the digest and the pages written."""

    date: str | None = field(default=None, metadata=cli("when it ran, YYYY-MM-DD", required=True))
    machine: str | None = field(default=None, metadata=cli("where it ran, in words", required=True))


ACTIONS = {
    "run": (RunOptions, "run the missing steps, write the digest and the pages"),
    "check": (CheckOptions, "run the missing steps, compare the run with the committed digest"),
    "render": (RenderOptions, "rewrite the pages from the digest"),
}


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="{" + ",".join(ACTIONS) + "}", required=True)
    for action, (options, text) in ACTIONS.items():
        add_config_arguments(sub.add_parser(action, help=text), options, defaults=True)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        COMMAND,
        help="the README's scratch reversal model: run, digest, pages",
        description="The scratch reversal model's figures: run the missing steps, compare a "
        "run with the committed digest, or rewrite the pages' blocks from it.",
    )
    add_arguments(parser)
    parser.set_defaults(func=run_command)


def run_command(args) -> int:
    from pathlib import Path

    from harness.report import scratch_doc

    args.digest = args.digest or str(scratch_doc.REPO / scratch_doc.DIGEST)
    # a bad file, a missing figure or a failed step: one line, status 2; every input is
    # checked before a step runs (a step can take an hour)
    with one_line(OSError, ValueError, KeyError, RuntimeError):
        if args.action in ("run", "check"):
            from harness.foundation.caps import check_output_dir

            check_output_dir("--output", args.output)
        if args.action in ("run", "render"):
            scratch_doc.check_pages()
        if args.action == "check":
            scratch_doc.read_digest(Path(args.digest))
            scratch_doc.run_steps(Path(args.output))
            problems = scratch_doc.check(Path(args.output), Path(args.digest))
            print("\n".join(problems) or f"{args.output} reproduces {args.digest}")
            return 1 if problems else 0
        if args.action == "render":
            data = scratch_doc.read_digest(Path(args.digest))
        else:
            from harness.foundation.caps import check_output_file

            check_output_file("--digest", args.digest)
            data = scratch_doc.run_digest(Path(args.output), args.date, args.machine)
        pages = scratch_doc.write_pages(data)
        if args.action == "run":
            scratch_doc.write_digest(data, Path(args.digest))
    print(f"wrote the blocks of {', '.join(pages)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return main_for(COMMAND, add_arguments, run_command, argv)


if __name__ == "__main__":
    sys.exit(main())
