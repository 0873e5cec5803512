"""`attentionspan check-task NAME`: what the built-in tasks get in the tests, for any task.

    attentionspan check-task string_rotation            # a task of your own (docs/own_task.md)
    attentionspan check-task reversal -n 200            # a built-in, by its short name
    python -m attentionspan_datasets check-task rotation_id --seed 7

Runs attentionspan_datasets.checks over every preset of the task: the data contract, the
`sufficient` mask's oracle, the nesting of the mask variants, that (config, seed, index) fixes
an instance (also in a process with another PYTHONHASHSEED), one target per prompt, and the
splits. Prints one line per check and preset ("ok ..."), one line per failing instance
("FAIL <check> <config>#<index> (seed, mask): what"), a "note" line saying what no generic
check can tell (whether paper and minimal follow their rules) and a "warn" line for a task
without ID/OOD presets; exits 1 on any failure, 0 otherwise. No model.
A plugin package that could not be loaded is named first, in one line.
"""

from __future__ import annotations

import argparse

from attentionspan_datasets.checks import DEFAULT_INSTANCES, DEFAULT_SEED

MAX_INSTANCES = 1_000_000  # per preset and check: a check is for minutes, not hours


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "check-task",
        help="check a task's masks with its oracle, its determinism and its splits",
        description="Check every preset of a task (a task of your own included): the data "
        "contract, that the sufficient mask's oracle recomputes every target character, the "
        "mask variants' nesting, that (config, seed, index) fixes an instance, one target per "
        "prompt, and disjoint splits. One line per failing instance; exit status 1 on any.",
    )
    parser.add_argument(
        "name", metavar="NAME", nargs="+", help="task, short or preset name (several allowed)"
    )
    parser.add_argument(
        "-n",
        "--instances",
        type=int,
        default=DEFAULT_INSTANCES,
        help=f"instances per preset and check (default {DEFAULT_INSTANCES})",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=DEFAULT_SEED,
        help=f"seed of the streams (default {DEFAULT_SEED})",
    )
    parser.set_defaults(func=run_check_task)


def run_check_task(args: argparse.Namespace) -> int:
    from attentionspan_datasets import plugins
    from attentionspan_datasets.checks import check_task, task_of
    from attentionspan_datasets.generation import SEED_RANGE

    if not 1 <= args.instances <= MAX_INSTANCES:
        raise ValueError(f"-n/--instances must be in [1, {MAX_INSTANCES:,}], got {args.instances}")
    if not SEED_RANGE[0] <= args.seed <= SEED_RANGE[1]:
        raise ValueError(f"--seed must be in [{SEED_RANGE[0]}, {SEED_RANGE[1]}], got {args.seed}")
    for line in plugins.failures():  # before the checks: the task may be in that package
        print(line, flush=True)
    tasks = list(dict.fromkeys(task_of(name) for name in args.name))  # unknown: one line
    failed = notes = 0
    for task in tasks:
        for result in check_task(task, args.instances, args.seed):
            print(result.line, flush=True)
            failed += not result.ok
            notes += result.note
    # the notes say what was not checked: "all checks pass" must not claim more
    noted = f", {notes} warn/note line(s) above" if notes else ""
    verdict = f"{failed} failure line(s)" if failed else f"all checks pass{noted}"
    print(f"{len(tasks)} task(s): {verdict}")
    return 1 if failed else 0
