"""`attentionspan supervision`: does attention supervised in distribution generalise?

    attentionspan supervision --tasks reversal --seeds 3 --output runs/sup-reversal
    attentionspan supervision --tasks successor --weights 0 0.3 1 --heads 2 --output runs/sup
    python -m harness.commands.supervision --tasks reversal --output runs/sup-reversal

Trains tiny scratch models per task by --quick's recipe, unsupervised and with the top heads
pulled to the reference mask during ID training (a dose ladder of weights, then three
controls at the chosen weight), tests them out of distribution with no intervention, and
writes OUT/report.md with a verdict per task. Run it again with the same options to resume:
finished models and stages are reused. The pipeline is `harness.pipeline.supervision_study`.
"""

from __future__ import annotations

import sys

from harness.commands import claim_output_folder
from harness.foundation.options import (
    add_config_arguments,
    add_model_arguments,
    config_values,
    main_for,
    quiet_transformers,
)


def add_arguments(parser) -> None:
    """The options declared on `SupervisionConfig`'s fields, --no-progress and --overwrite."""
    from harness.pipeline.supervision_settings import SupervisionConfig

    add_config_arguments(parser, SupervisionConfig)
    add_model_arguments(parser, "no_progress", no_progress={"help": "no progress bars"})
    add_model_arguments(parser, "overwrite")


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "supervision",
        help="supervise attention toward the reference in ID training, test OOD without it",
        description="Per task, tiny scratch models by --quick's recipe: the unsupervised "
        "baseline, a ladder of supervision weights on the baseline's top ID heads, and three "
        "controls at the weight chosen on OOD validation (a wrong mask, random heads, more "
        "steps); ID and OOD accuracy with no intervention, attention on the reference, where "
        "the errors look, and a verdict, in OUT/report.md. Resumable.",
    )
    add_arguments(parser)
    parser.set_defaults(func=run_command)


def config_from_args(args):
    from harness.commands.reproduce import ood_pair  # --ood reads as reproduce's
    from harness.pipeline.supervision_settings import SupervisionConfig

    values = config_values(args, SupervisionConfig)
    if "ood" in values:
        values["ood"] = dict(ood_pair(text) for text in values["ood"])
    return SupervisionConfig(**values, progress=not args.no_progress)


def run_command(args) -> int:
    from harness.foundation.outputs import writing
    from harness.pipeline.supervision_study import run_study
    from harness.report.supervision_report import write_report

    quiet_transformers()
    config = config_from_args(args)
    # read-only, full; another command's folder, a user's files: refused before any work (its
    # own: a rerun resumes)
    claim = claim_output_folder(config.output, "supervision", overwrite=args.overwrite)
    with writing(config.output), claim:
        report = run_study(config, write_report)
    print(report)
    return 0


def main(argv: list[str] | None = None) -> int:
    return main_for("supervision", add_arguments, run_command, argv)


if __name__ == "__main__":
    sys.exit(main())
