"""`attentionspan reproduce`: evaluation, attention analysis, head ranking, the intervention
sweep and its controls for a trained model, written up as OUT/report.md.

    attentionspan reproduce --model runs/rev/final --config reversal --output runs/rev/repro
    attentionspan reproduce --quick --output runs/quick     # trains tiny models first (CPU)
    python -m harness.commands.reproduce --model runs/rev/final --config reversal --output OUT
    accelerate launch -m harness.commands.reproduce --model ... --output OUT   # sharded

Run it again with the same options to resume: finished stages (OUT/stages/*.json) are
reused. The pipeline is `harness.report.reproduce`.
"""

from __future__ import annotations

import sys

from harness.options import main_for, quiet_transformers
from harness.threads import THREADS_HELP


def _ood_pair(text: str) -> tuple[str, object]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise ValueError(f"--ood expects KEY=VALUE (e.g. max_length=20), got {text!r}")
    try:
        return key, int(value)
    except ValueError:
        try:
            return key, float(value)
        except ValueError:
            return key, value


def add_arguments(parser) -> None:
    from harness.report.settings import DEVICES, QUICK_TASKS

    parser.add_argument("--model", default=None, help="a trained model folder (or --quick)")
    parser.add_argument(
        "--config",
        default="reversal",
        help="the task: its presets <task>_id and <task>_ood are used (default: reversal)",
    )
    parser.add_argument("--output", default="runs/reproduce", help="folder of report.md")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="train tiny scratch models for --tasks first, small sizes (CPU, ~15 min)",
    )
    parser.add_argument(
        "--tasks",
        nargs="+",
        default=None,
        metavar="TASK",
        help=f"tasks of --quick (default: {' '.join(QUICK_TASKS)})",
    )
    parser.add_argument("--train-steps", type=int, default=None, help="--quick training steps")
    parser.add_argument("--seed", type=int, default=None, help="seed of the data (default 1234)")
    sizes = parser.add_argument_group("sizes")
    sizes.add_argument("--num-heads", type=int, default=None, help="ID instances to rank (30)")
    sizes.add_argument(
        "--num-validation", type=int, default=None, help="OOD validation instances (100)"
    )
    sizes.add_argument("--num-test", type=int, default=None, help="OOD and ID test instances (200)")
    sizes.add_argument(
        "--num-attention", type=int, default=None, help="instances per config for Table 2 (100)"
    )
    sizes.add_argument("--batch-size", type=int, default=None, help="batch size (32)")
    sweep = parser.add_argument_group("sweep")
    sweep.add_argument(
        "--counts", type=int, nargs="+", default=None, help="head counts N (1 2 4 .. ~10%%)"
    )
    sweep.add_argument(
        "--strengths", type=float, nargs="+", default=None, help="C values (0.3 0.5 1 1.5 2)"
    )
    sweep.add_argument(
        "--mode", choices=("standard", "conditional"), default=None, help="intervention"
    )
    sweep.add_argument(
        "--thresholds", type=float, nargs="+", default=None, help="conditional thresholds"
    )
    sweep.add_argument("--shift", type=int, default=None, help="rank and reinforce at ref+k")
    sweep.add_argument(
        "--head-threshold", type=float, default=None, help="ranking counts weights above this"
    )
    sweep.add_argument(
        "--control-seeds", type=int, nargs="+", default=None, help="random-control seeds (0 1 2)"
    )
    sweep.add_argument(
        "--metric", choices=("partial_acc", "exact_match"), default=None, help="chosen by"
    )
    sweep.add_argument(
        "--id-guard",
        type=float,
        default=None,
        metavar="DROP",
        help="choose only settings whose ID validation exact match drops at most DROP",
    )
    sweep.add_argument(
        "--ood",
        action="append",
        default=None,
        metavar="KEY=VALUE",
        help="override a parameter of the OOD preset (e.g. max_length=20); repeatable",
    )
    parser.add_argument("--device", choices=DEVICES, default="auto", help="auto: cuda if present")
    parser.add_argument(
        "--threads", type=int, default=None, help=THREADS_HELP.replace(")", "; --quick: 1)", 1)
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "reproduce",
        help="the paper's analysis end to end: accuracy, attention, heads, interventions",
        description="ID/OOD accuracy, attention on reference tokens (Table 2), head ranking "
        "(Appendix G), the intervention sweep chosen on validation and reported on test with "
        "controls, written to OUT/report.md. Resumable. Also: accelerate launch -m "
        "harness.commands.reproduce ...",
    )
    add_arguments(parser)
    parser.set_defaults(func=run_command)


def config_from_args(args):
    from harness.report.settings import QUICK_SIZES, ReproduceConfig

    values = {
        "output": args.output,
        "model": args.model,
        "config": args.config,
        "quick": args.quick,
        "device": args.device,
        "progress": not args.no_progress,
    }
    if args.quick:
        values.update(QUICK_SIZES)
    for name in (
        "tasks",
        "train_steps",
        "seed",
        "num_heads",
        "num_validation",
        "num_test",
        "num_attention",
        "batch_size",
        "counts",
        "strengths",
        "mode",
        "thresholds",
        "shift",
        "head_threshold",
        "control_seeds",
        "metric",
        "threads",
        "id_guard",
    ):
        value = getattr(args, name)
        if value is not None:
            values[name] = value
    if args.ood is not None:
        values["ood"] = dict(_ood_pair(text) for text in args.ood)
    return ReproduceConfig(**values)


def run_command(args) -> int:
    from harness.report.reproduce import reproduce

    quiet_transformers()
    config = config_from_args(args)
    from harness.models import check_head_counts, resolve_model

    if config.model:
        resolve_model(config.model)  # a missing folder: one line, before any work
    check_head_counts(config.model or "scratch", config.counts)  # --quick: scratch models
    report = reproduce(config)
    if report is not None:  # the main process only
        print(report)
    return 0


def main(argv: list[str] | None = None) -> int:
    return main_for("reproduce", add_arguments, run_command, argv)


if __name__ == "__main__":
    sys.exit(main())
