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

from harness.foundation.options import main_for, one_line

COMMAND = "scratch-doc"


def add_arguments(parser) -> None:
    from harness.report.scratch_doc import DIGEST, REPO

    digest = str(REPO / DIGEST)
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    run = sub.add_parser("run", help="run the missing steps, write the digest and the pages")
    run.add_argument("--output", required=True, help="the run folder")
    run.add_argument("--date", required=True, help="when it ran, YYYY-MM-DD")
    run.add_argument("--machine", required=True, help="where it ran, in words")
    run.add_argument("--digest", default=digest)
    check = sub.add_parser(
        "check", help="run the missing steps, compare the run with the committed digest"
    )
    check.add_argument("--output", required=True, help="the run folder")
    check.add_argument("--digest", default=digest)
    render = sub.add_parser("render", help="rewrite the pages from the digest")
    render.add_argument("--digest", default=digest)


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
    import json
    from pathlib import Path

    from harness.report import scratch_doc

    # a bad file, a missing figure or a failed step: one line, status 2
    with one_line(OSError, ValueError, KeyError, RuntimeError):
        if args.action == "check":
            scratch_doc.run_steps(Path(args.output))
            problems = scratch_doc.check(Path(args.output), Path(args.digest))
            print("\n".join(problems) or f"{args.output} reproduces {args.digest}")
            return 1 if problems else 0
        if args.action == "render":
            data = json.loads(Path(args.digest).read_text())
        else:
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
