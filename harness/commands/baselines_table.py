"""`attentionspan baselines-table`: `attentionspan baselines` results beside the paper's Table 2.

    attentionspan baselines-table runs/baselines/t6_len10_a.json runs/baselines/t6_len10_b.json
    python -m harness.commands.baselines_table runs/baselines/t6.json

The parser and the glue; the table is `harness.baselines.table.markdown`'s.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from harness.foundation.options import add_config_arguments, cli, main_for, one_line

COMMAND = "baselines-table"


@dataclass
class BaselinesTableOptions:
    """The options of `attentionspan baselines-table`: the result files to pool."""

    results: list[str] = field(
        default_factory=list,
        metadata=cli("JSON files written by attentionspan baselines", positional=True),
    )


def add_arguments(parser) -> None:
    add_config_arguments(parser, BaselinesTableOptions, defaults=True)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        COMMAND,
        help="print `attentionspan baselines` results beside the paper's Table 2",
        description="Print `attentionspan baselines` results beside the paper's Table 2, as "
        "Markdown (runs of one configuration pooled over the files given).",
    )
    add_arguments(parser)
    parser.set_defaults(func=run_command)


def run_command(args) -> int:
    from pathlib import Path

    from attentionspan_datasets.jsonfile import read_json
    from harness.baselines.table import markdown

    with one_line(OSError, ValueError, KeyError):  # a bad or torn file: one line, status 2
        documents = [read_json(Path(path)) for path in args.results]
        sys.stdout.write(markdown(documents))
    return 0


def main(argv: list[str] | None = None) -> int:
    return main_for(COMMAND, add_arguments, run_command, argv)


if __name__ == "__main__":
    sys.exit(main())
