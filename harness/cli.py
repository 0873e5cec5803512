"""The `attentionspan` console script: data commands and model commands in one parser.

    attentionspan generate addition_ood -n 5 --format text
    attentionspan train --model scratch --config reversal_id --lr 1e-3 --output runs/rev
    attentionspan eval --model runs/rev/final --configs reversal_id reversal_ood
    attentionspan models fetch smollm2-135m-instruct
    attentionspan --help

This is the top layer: it imports the data layer's command modules and the harness's,
and nothing imports it. Each module in COMMAND_MODULES has `add_parser(subparsers)`,
whose parsers set `func`; a module's heavy imports (torch, transformers, datasets) stay
inside its run function, so `attentionspan generate` never loads torch. When the first
argument names a command, only its module is imported (start-up counts in a pipeline such
as `attentionspan generate ... | head`); `--help` and anything else build the whole parser.
A new command is one more entry here: its module is harness/commands/NAME.py (a dash in the
command is an underscore in the module), so `python -m harness.commands.NAME` runs it alone.
Errors a user can fix print one line and exit with status 2
(`harness.foundation.options.run_guarded`). `python -m attentionspan_datasets` keeps the data
commands alone.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from harness.foundation.options import PROG, OneLineParser, run_guarded

# module -> the commands its add_parser registers (in --help's order)
COMMAND_MODULES = {
    # data (attentionspan_datasets): instances, pictures of masks, Hub export
    "attentionspan_datasets.commands.generate": ("generate", "show"),
    "attentionspan_datasets.commands.export": ("export",),
    "attentionspan_datasets.commands.check_task": ("check-task",),
    # models (harness)
    "harness.commands.train": ("train",),
    "harness.commands.eval": ("eval",),
    "harness.commands.models": ("models",),
    "harness.commands.attention": ("attention",),
    "harness.commands.reproduce": ("reproduce",),
    "harness.commands.baselines": ("baselines",),
    "harness.commands.heads": ("heads",),
    "harness.commands.supervision": ("supervision",),
    # several processes (accelerate launch) of train, eval, attention or reproduce
    "harness.commands.launch": ("launch",),
    # the committed documents: digests of runs, and the blocks of the pages made from them
    "harness.commands.results_doc": ("results-doc",),
    "harness.commands.supervision_doc": ("supervision-doc",),
    "harness.commands.scratch_doc": ("scratch-doc",),
    "harness.commands.baselines_table": ("baselines-table",),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or only of the module that registers `command`."""
    parser = OneLineParser(
        prog=PROG,
        description="Algorithmic tasks with reference attention masks: generate and export "
        "the data, train models on it one token per character, and evaluate them.",
    )
    # its own dest: results-doc and supervision-doc have a --command option (the command that
    # made the run), which must not replace the name their errors are printed under
    subparsers = parser.add_subparsers(dest="command_name", metavar="COMMAND", required=True)
    modules = [m for m, names in COMMAND_MODULES.items() if command in names]
    for name in modules or COMMAND_MODULES:
        importlib.import_module(name).add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv[0] if argv else None).parse_args(argv)
    args.argv = list(argv)  # for commands that need to know what was given explicitly
    return run_guarded(args.command_name, args.func, args)


if __name__ == "__main__":
    sys.exit(main())
