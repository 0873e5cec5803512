"""`attentionspan generate` and `attentionspan show`: instances from the command line.

attentionspan generate addition_ood -n 1000 --seed 0 > data.jsonl
attentionspan generate addition -n 3 --param num_operands=3 --param max_digits=12
attentionspan show                       # one grid per task, the legend at both ends
attentionspan show reversal_id --index 4
attentionspan show successor_id --split test --index 2
attentionspan show --all                 # every preset (about 1,500 lines)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import textwrap
from itertools import islice

from attentionspan_datasets.generation import (
    DEFAULT_SEED,
    MAX_INDEX,
    SEED_RANGE,
    config_names,
    iter_instances,
    resolve_config,
)
from attentionspan_datasets.presets import PAIRS, PRESETS
from attentionspan_datasets.rendering import JsonLines, legend, render_mask, render_text
from attentionspan_datasets.tasks import TaskConfig

PROGRESS_THRESHOLD = 10_000  # below this, a progress bar is noise
# Rows encoded (JsonLines.lines) and written at once. One write per line cost a fifth of
# the run; one per 2,000 lines (a 1.3 MB string for successor_ood) cost 0.2 s of system
# time per 100,000 rows: strings above malloc's 128 KB mmap threshold come from fresh
# pages, each faulted in. 50 rows of up to 2 KB stay below it.
BATCH = 50
# Instances one `generate` prints without --force: the rows a split may hold
# (builder.MAX_SPLIT_ROWS), about 2 GB of addition_ood JSON; more is likelier a typo.
MAX_GENERATE = 10_000_000
# Grids one `show` draws per config: each can fill a screen, and a drawing is for reading.
MAX_SHOW = 1_000


def parse_params(config: TaskConfig, pairs: list[str]) -> dict:
    """`--param k=v` pairs, converted to the types of the config's fields."""
    config_class = type(config)
    params = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--param expects KEY=VALUE, got {pair!r}")
        params[key] = config_class.parse_value(key, value)
    return params


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    configs = ", ".join(config_names())
    gen = subparsers.add_parser(
        "generate",
        help="print N instances of a config as JSON lines or text",
        description=f"Print instances of CONFIG. Configs: {configs}.",
    )
    gen.add_argument("config", metavar="CONFIG", help="preset (addition_ood) or task (addition)")
    gen.add_argument(
        "-n",
        "--num",
        type=int,
        default=10,
        help=f"how many instances (default 10; at most {MAX_GENERATE:,} without --force)",
    )
    gen.add_argument(
        "--seed", type=int, default=DEFAULT_SEED, help=f"stream seed (default {DEFAULT_SEED})"
    )
    gen.add_argument("--start", type=int, default=0, help="index of the first instance (default 0)")
    gen.add_argument(
        "--force", action="store_true", help=f"allow more than {MAX_GENERATE:,} instances"
    )
    gen.add_argument(
        "--format",
        choices=["jsonl", "text"],
        default="jsonl",
        help="jsonl: one Instance per line; text: prompt+target and the mask",
    )
    gen.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config field, e.g. --param max_digits=12 (repeatable)",
    )
    gen.set_defaults(func=run_generate)

    show = subparsers.add_parser(
        "show",
        help="draw instances with their reference masks as character grids",
        description="Draw an instance of CONFIG with its mask; without CONFIG, the first "
        "instance of each task's ID preset (one grid per task); with --all, of every preset. "
        f"Configs: {configs}.",
    )
    show.add_argument(
        "config",
        metavar="CONFIG",
        nargs="?",
        help="preset or task (default: one grid per task, each task's ID preset)",
    )
    show.add_argument(
        "--all", action="store_true", help="draw every preset, not one per task (1,500 lines)"
    )
    show.add_argument(
        "-n",
        "--num",
        type=int,
        default=1,
        help=f"how many instances to draw per config (default 1, at most {MAX_SHOW:,})",
    )
    show.add_argument(
        "--seed", type=int, default=DEFAULT_SEED, help=f"stream seed (default {DEFAULT_SEED})"
    )
    show.add_argument(
        "--index", type=int, default=0, help="row (of the split, with --split; default 0)"
    )
    show.add_argument(
        "--split",
        choices=["train", "validation", "test"],
        help="draw row INDEX of this split: the row load_dataset(..., split=SPLIT)[INDEX] holds "
        "(default: the raw generator stream)",
    )
    show.add_argument("--param", action="append", default=[], metavar="KEY=VALUE")
    show.set_defaults(func=run_show)


def check_range(args: argparse.Namespace, first: str, cap: int, force: bool = False) -> None:
    """-n/--num, the first index (`first`: --start or --index) and --seed, before any work:
    the stream's indices are int64 (generation.MAX_INDEX) and -n has a cap."""
    low = 0 if first == "--start" else 1
    if args.num < low:
        raise ValueError(f"-n/--num must be >= {low}, got {args.num}")
    if args.num > cap and not force:
        hint = "; pass --force to generate them anyway" if first == "--start" else ""
        raise ValueError(f"-n/--num is {args.num:,}, above the cap of {cap:,}{hint}")
    start = getattr(args, first.lstrip("-"))
    if start < 0:
        raise ValueError(f"{first} must be >= 0, got {start}")
    if start > MAX_INDEX or start + args.num - 1 > MAX_INDEX:
        raise ValueError(
            f"{first} {start} with -n {args.num} runs past the last index {MAX_INDEX}; "
            f"allowed: {first} <= {MAX_INDEX - max(args.num, 1) + 1}"
        )
    if not SEED_RANGE[0] <= args.seed <= SEED_RANGE[1]:
        raise ValueError(f"--seed must be in [{SEED_RANGE[0]}, {SEED_RANGE[1]}], got {args.seed}")


def run_generate(args: argparse.Namespace) -> int:
    check_range(args, "--start", MAX_GENERATE, args.force)
    # The name is resolved once; the config carries it (its label) to every instance.
    base = resolve_config(args.config)
    config = resolve_config(base, **parse_params(base, args.param))
    if args.format == "jsonl":
        render = JsonLines(config).lines
    else:
        render = _text_lines
    instances = iter_instances(config, args.seed, args.start, args.start + args.num)
    write = sys.stdout.write
    progress = _progress(args.num, f"generate {args.config}")
    left = args.num
    with stdout_errors():
        while left > 0:
            size = min(BATCH, left)
            write(render(islice(instances, size)))
            if progress is not None:
                progress.update(size)
            left -= size
    if progress is not None:
        progress.close()
    return 0


@contextlib.contextmanager
def stdout_errors():
    """A full disk (`generate ... > /dev/full`) or a closed file under stdout: one line,
    not a traceback; a closed pipe stays BrokenPipeError (quiet, status 0)."""
    try:
        yield
        sys.stdout.flush()  # the last block fails here, not in the interpreter's exit
    except BrokenPipeError:
        raise
    except OSError as error:
        # Nothing more reaches stdout: point it at devnull, or the interpreter's final
        # flush of what is still buffered prints "Exception ignored ..." after our line.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        reason = error.strerror or str(error)
        raise ValueError(f"cannot write to standard output: {reason}") from None


def _text_lines(instances) -> str:
    return "".join([render_text(instance) + "\n" for instance in instances])


def _progress(total: int, desc: str):
    """A tqdm bar on a terminal's stderr for long runs, else None: redirected, a bar is noise
    in a log, and importing tqdm costs 50-90 ms of start-up."""
    if total < PROGRESS_THRESHOLD or not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    # A terminal that reports a size of 0 x 0 (a pty nobody sized: `script`, an IDE's
    # console, ssh -t from a pipe) makes tqdm hide its bar as if below the screen's last
    # row: give it 80 x 24 there.
    try:
        size = os.get_terminal_size(sys.stderr.fileno())
        columns, lines = size.columns, size.lines
    except (OSError, ValueError):
        columns = lines = 0
    return tqdm(
        total=total,
        desc=desc,
        file=sys.stderr,
        ncols=None if columns else 80,
        nrows=None if lines else 24,
    )


def summary_configs() -> list[str]:
    """The ID preset of every task, in the catalogue's order: `show`'s default, one grid
    per task (about 170 lines where every preset takes 1,500)."""
    return [id_preset.name for id_preset, _ in PAIRS.values()]


def run_show(args: argparse.Namespace) -> int:
    check_range(args, "--index", MAX_SHOW)
    if args.all and args.config is not None:
        raise ValueError("give either CONFIG or --all, not both")
    if args.config is not None:
        configs = [args.config]
    else:
        configs = list(PRESETS) if args.all else summary_configs()
    # Every config's parameters are checked before anything is drawn, and the legend is
    # printed once the first grid is drawn: an error never follows a legend.
    plans = []
    for config in configs:
        base = resolve_config(config)
        params = parse_params(base, args.param)
        plans.append((config, params, resolve_config(base, **params)))
    from attentionspan_datasets.plugins import failures

    with stdout_errors():  # a plugin package that did not load: named before the grids
        for line in failures():
            print(line, end="\n\n")
    width = shutil.get_terminal_size().columns
    stop = args.index + args.num
    legend_shown = False
    drawn = 0
    for config, params, cfg in plans:
        if args.split is None:
            instances = iter_instances(cfg, args.seed, args.index, stop)
        else:
            from attentionspan_datasets.splits import split_instance

            instances = (
                split_instance(cfg, args.seed, args.split, index)
                for index in range(args.index, stop)
            )
        # The report draws a few thousand instances: presets only (their sizes are known
        # to be small), and for several configs only when a split is asked for.
        if config in PRESETS and not params and (args.split is not None or len(plans) == 1):
            warn_small_space(config, args.seed)
        for instance in instances:
            grid = render_mask(instance, width=width)
            with stdout_errors():
                if not legend_shown:
                    print(legend(width), end="\n\n")
                    legend_shown = True
                print(grid, end="\n\n")
            drawn += 1
    if drawn > 1:
        # A long output scrolls its first lines away: the legend again where the reader
        # is, after the last grid, and (several configs) how to draw the rest.
        with stdout_errors():
            print(legend(width))
            if args.config is None:
                print("\n" + _show_footer(args.all, drawn, max(width, 40)))
    return 0


def _show_footer(every_preset: bool, drawn: int, width: int) -> str:
    """The last lines of `show` and `show --all`: what was drawn, how to draw the rest."""
    if every_preset:
        lines = [
            f"{drawn} grids, every preset.",
            "One grid per task: attentionspan show",
            "One config: attentionspan show CONFIG",
        ]
    else:
        lines = [
            f"{drawn} grids, one per task: the first instance of its ID preset.",
            "Every preset: attentionspan show --all",
            "Another instance: attentionspan show CONFIG --index N",
            "The configs: attentionspan show --help",
        ]
    return "\n".join(textwrap.fill(line, width, break_on_hyphens=False) for line in lines)


def warn_small_space(config: str, seed: int) -> None:
    """The splits' small-input-space warning (attentionspan_datasets.splits), on stderr."""
    from attentionspan_datasets.splits import small_space_report

    report = small_space_report(config, seed)
    if report:
        sys.stdout.flush()  # keep the warning next to the grids it is about
        width = shutil.get_terminal_size().columns
        print(textwrap.fill(f"warning: {report}", max(width, 40)), file=sys.stderr)
