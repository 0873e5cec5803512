"""`attentionspan train`: train a causal LM on a task, one token per character.

    attentionspan train --model scratch --config reversal_id --output runs/rev --lr 1e-3
    attentionspan train --output runs/rev --resume          # after an interruption
    attentionspan launch --multi_gpu --num_processes 2 train --model scratch ...

One flag per field of `harness.training.train.TrainConfig` (and of `ScratchConfig`, prefixed
`--scratch-`), each declared with its help on the field (`harness.foundation.options.cli`), the
shared
prompt options, `--resume` and `--no-progress`. The loop is
`harness.training.train` (the measurement layer, which does not run as a program).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from attentionspan_datasets.guard import main_process
from harness.commands import prompt_over
from harness.foundation.options import (
    add_config_arguments,
    add_model_arguments,
    cli,
    config_values,
    explicit_options,
    main_for,
    quiet_transformers,
)


@dataclass
class TrainCommand:
    """The options of the command itself, beside TrainConfig's."""

    resume: bool = field(
        default=False,
        metadata=cli(
            "continue the run in --output from its latest checkpoint (its saved options are used)"
        ),
    )
    overwrite: bool = field(
        default=False,
        metadata=cli(
            "replace the run in --output: what attentionspan train recorded writing there "
            "(and a killed run's checkpoints) moves aside and goes when the new run finishes; "
            "an interruption or error puts it back. Other files, whatever their names, stay"
        ),
    )


def add_arguments(parser) -> None:
    """TrainConfig's options, the shared prompt options, ScratchConfig's (as --scratch-*),
    --resume, and the shared --no-progress and --threads."""
    from harness.foundation.models import ScratchConfig
    from harness.training.train import TrainConfig

    add_config_arguments(parser, TrainConfig, defaults=True)
    add_model_arguments(parser, "prompt")
    group = parser.add_argument_group("model from scratch (--model scratch)")
    add_config_arguments(group, ScratchConfig, defaults=True, prefix="scratch_")
    add_config_arguments(parser, TrainCommand, defaults=True)
    add_model_arguments(parser, "no_progress", "threads")


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "train",
        help="train a model on a task, one token per character",
        description="Train (or fine-tune) a causal LM on a task preset with AdamW; defaults "
        "are the paper's. Also: attentionspan launch [launcher options] train ...",
    )
    add_arguments(parser)
    parser.set_defaults(func=run_command)


def config_from_args(args):
    from harness.foundation.data import PromptConfig
    from harness.foundation.models import ScratchConfig
    from harness.training.train import TrainConfig

    values = config_values(args, TrainConfig)
    values["prompt"] = prompt_over(PromptConfig(), args, [args.config])
    values["scratch"] = ScratchConfig(**config_values(args, ScratchConfig, prefix="scratch_"))
    return TrainConfig(**values)


def check(args):
    """What train refuses before any work, writing nothing (`attentionspan launch` runs it
    before it starts processes): the config, the claim on --output, and when the claim
    replaces an earlier run, the model against the run's data."""
    from harness.foundation.outputs import check_output_folder
    from harness.foundation.ownership import claim_output
    from harness.foundation.runs import check_model_files, check_not_in_use

    config = config_from_args(args)
    if not args.resume:  # a model folder without weights: before the folder is touched
        check_model_files(config.model)
        check_dataset_findable(config.dataset)
    check_output_folder("'output'", config.output)  # read-only, full: before the claim
    check_not_in_use(config.output)  # a run going on there: said as such
    # a finished or interrupted run, or a user's files: refused unless --resume / --overwrite
    claim = claim_output(
        "--output", config.output, "train", resume=args.resume, overwrite=args.overwrite
    )
    if claim.will_replace:  # NaN weights, a short context, ...: before the run moves aside
        check_model_serves(config)
    return config, claim


def check_model_serves(config) -> None:
    """The model loaded and checked against the run's data as `set_up` will (weights there
    and finite, a causal LM, every character a token, the longest text of --config and of
    each curriculum stage within its context, the supervised heads there): one line, before
    the claim moves an earlier run aside. Only then: it costs a second load, and a refusal
    in `set_up` leaves a new or resumed folder as it found it."""
    from harness.training.setup import (
        load_checked_model,
        load_ranking,
        make_source,
        supervised_heads,
    )

    source = make_source(config)
    ranking = load_ranking(config)
    model, _, _ = load_checked_model(config, source, None)
    supervised_heads(config, model, ranking)
    del model


def check_dataset_findable(path: str | None) -> None:
    """ValueError (one line) for a --dataset that is no folder here, not this package's
    own name, not in the datasets cache, with no Hub to ask (offline, or huggingface.co
    does not answer): said at once, not after the Hub's retries (half a minute) and a
    ConnectionError traceback. A Hub name with the Hub reachable is checked as it loads."""
    import os

    if not path or os.path.exists(path):
        return
    from attentionspan_datasets.registration import DATASET_NAME
    from harness.foundation.models import hub_reachable

    if path == DATASET_NAME:
        return
    try:
        from datasets import config as datasets_config

        cached = (Path(datasets_config.HF_DATASETS_CACHE) / path.replace("/", "___")).is_dir()
    except ImportError:
        cached = False
    if cached or hub_reachable():
        return
    raise ValueError(
        f"--dataset {path!r} is not a folder here, and as a Hugging Face Hub dataset it is "
        "neither cached here nor reachable (offline)"
    )


def run_command(args) -> int:
    from harness.foundation.outputs import writing
    from harness.training.train import flat_options, train

    quiet_transformers()
    config, claim = check(args)
    requested = None
    if args.resume and hasattr(args, "argv"):
        given = explicit_options(add_arguments, args.argv)
        requested = {k: v for k, v in flat_options(config).items() if k in given}
    # the folder is checked before any work (harness.training.train.set_up); a write that fails
    # later is one line, and a refused run leaves no folder behind
    with writing(config.output), claim:
        final = train(
            config,
            resume=args.resume,
            progress=not args.no_progress,
            requested=requested,
            # a run that replaces an earlier one is not continued: an interruption puts the
            # earlier run back (harness.foundation.ownership)
            resume_with="" if claim.replacing else None,
        )
    if main_process():  # every process of a launch returns the folder: it is said once
        print(final)
    return 0


def main(argv: list[str] | None = None) -> int:
    return main_for("train", add_arguments, run_command, argv)


if __name__ == "__main__":
    sys.exit(main())
