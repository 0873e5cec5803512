"""`attentionspan reproduce`: evaluation, attention analysis, head ranking, the intervention
sweep and its controls for a trained model, written up as OUT/report.md.

    attentionspan reproduce --model runs/rev/final --config reversal --output runs/rev/repro
    attentionspan reproduce --quick --output runs/quick     # trains tiny models first (CPU)
    attentionspan reproduce --pretrained smollm2-135m-instruct --tasks reversal --output runs/smol
    python -m harness.commands.reproduce --model runs/rev/final --config reversal --output OUT
    attentionspan launch --multi_gpu --num_processes 2 reproduce --model ... --output OUT

Run it again with the same options to resume: finished stages (OUT/stages/*.json) are
reused. The pipeline is `harness.pipeline.reproduce`.
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


def ood_pair(text: str) -> tuple[str, str]:
    """`KEY=VALUE` as (key, text): the value takes its field's type per task
    (`ReproduceConfig.ood_for`, through the task config's own `parse_value`), not a guess."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise ValueError(f"--ood expects KEY=VALUE (e.g. max_length=20), got {text!r}")
    return key, value


def add_arguments(parser) -> None:
    """The options declared on `ReproduceConfig`'s fields, --no-progress and --overwrite."""
    from harness.pipeline.settings import ReproduceConfig

    add_config_arguments(parser, ReproduceConfig)
    add_model_arguments(parser, "no_progress", no_progress={"help": "no progress bars"})
    add_model_arguments(parser, "overwrite")


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "reproduce",
        help="the paper's analysis end to end: accuracy, attention, heads, interventions",
        description="ID/OOD accuracy, attention on reference tokens (Table 2), head ranking "
        "(Appendix G), the intervention sweep chosen on validation and reported on test with "
        "controls, written to OUT/report.md. Resumable. Also: attentionspan launch "
        "[launcher options] reproduce ...",
    )
    add_arguments(parser)
    parser.set_defaults(func=run_command)


def config_from_args(args):
    from harness.pipeline.settings import (
        PRETRAINED_SIZES,
        QUICK_SIZES,
        ReproduceConfig,
        check_model_choice,
    )

    given = config_values(args, ReproduceConfig)
    # --pretrained beside --quick or --model: one line naming both, before anything else
    check_model_choice(given.get("model"), bool(given.get("quick")), given.get("pretrained"))
    values = {"progress": not args.no_progress}
    if args.quick:
        values.update(QUICK_SIZES)  # options given explicitly win
    if args.pretrained:
        values.update(PRETRAINED_SIZES)  # options given explicitly win
    _refuse_ignored(given)
    values.update(given)
    if "ood" in values:
        values["ood"] = dict(ood_pair(text) for text in values["ood"])
    return ReproduceConfig(**values)


# Options that a mode would ignore: each is refused there, naming the option and the mode.
# Which models --quick or --pretrained trains (--seeds: its own check).
QUICK_ONLY = ("tasks", "train_steps")


def _refuse_ignored(given) -> None:
    """ValueError for an option given where it would do nothing (silently wrong results:
    `--model DIR --tasks addition` ran reversal)."""
    from harness.engine.modes import MODES

    if given.get("model"):
        for name in QUICK_ONLY:
            if name in given:
                raise ValueError(
                    f"--{name.replace('_', '-')} does nothing with --model (it says which "
                    "models --quick trains); give --config for the task, or drop --model"
                )
    for mode in ("quick", "pretrained"):
        if given.get(mode) and not given.get("model") and "config" in given:
            raise ValueError(f"--config does nothing with --{mode}: name the tasks with --tasks")
    mode = given.get("mode", "standard")
    if "thresholds" in given and mode in MODES and "threshold" not in MODES[mode].reads:
        raise ValueError(
            f"--thresholds does nothing with --mode {mode}: they are read by --mode conditional"
        )


def check(args):
    """What reproduce refuses before any work, writing nothing (`attentionspan launch` runs
    it before it starts processes): the config and the claim on --output."""
    from harness.foundation.models import check_head_counts
    from harness.foundation.runs import check_model_files

    config = config_from_args(args)
    if config.model:
        check_model_files(config.model)  # missing, no weights, an encoder: one line
    if not config.pretrained:  # --pretrained: checked once its model is there (fetched)
        check_head_counts(config.model or "scratch", config.counts)  # --quick: scratch
    # read-only, full; another command's folder, a user's files: refused before any work (its
    # own: a rerun resumes)
    claim = claim_output_folder(config.output, "reproduce", overwrite=args.overwrite)
    if config.model:  # a short context, NaN weights, ...: before the folder is touched
        check_model_serves(config)
    elif config.pretrained and claim.will_replace:  # a local one: before the run moves aside
        check_local_pretrained(config)
    return config, claim


def check_local_pretrained(cfg) -> None:
    """A local --pretrained folder checked as the run checks it once it starts
    (`harness.pipeline.prepare.check_pretrained_serves`), here before an earlier run moves
    aside; a known model is fetched and checked by the run (it may not be here yet)."""
    from harness.foundation.models import KNOWN_MODELS
    from harness.pipeline.prepare import check_pretrained_serves, pretrained_folder

    if cfg.pretrained not in KNOWN_MODELS:
        check_pretrained_serves(cfg, pretrained_folder(cfg.pretrained))


def check_model_serves(cfg) -> None:
    """--model loaded once as the run will load it and checked against the task, as a local
    --pretrained folder is (`harness.pipeline.reproduce.check_pretrained_serves`): weights
    there and finite, a causal LM, a tokenizer with every character of the task's presets,
    and a context as long as the longest sequence of the ID preset and of the OOD preset
    with its --ood overrides, under the prompt layout saved with the model. One line naming
    --model, before settings.json and the first progress line."""
    from pathlib import Path

    from harness.foundation.data import check_context
    from harness.foundation.models import check_model_for
    from harness.foundation.runs import (
        check_model_files,
        load_model_checked,
        read_run_file,
        saved_prompt,
    )
    from harness.foundation.tokenization import CharTokenizer

    where = f"--model {cfg.model!r}"
    check_model_files(cfg.model)  # missing, no weights, an encoder: before loading
    try:
        model, tokenizer = load_model_checked(cfg.model)
        info = read_run_file(cfg.model) if Path(cfg.model).is_dir() else None
        prompt = saved_prompt(info, cfg.model)
    except (ValueError, OSError) as error:
        text = " ".join(str(error).split())
        raise ValueError(text if text.startswith(where) else f"{where}: {text}") from None
    task = cfg.task_values[0]  # --model's one task
    id_name, ood_name = task.presets
    check_model_for(where, model, tokenizer, (id_name, ood_name), prompt)
    overrides = cfg.ood_for(task)
    if overrides:  # the OOD lengths the run will use, past the preset's own
        try:
            check_context(model, CharTokenizer(tokenizer), task.ood_config(overrides), prompt)
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None
    del model, tokenizer


def run_command(args) -> int:
    from harness.foundation.outputs import writing
    from harness.pipeline.reproduce import reproduce
    from harness.report.report_md import pipeline_writers

    quiet_transformers()
    config, claim = check(args)
    # a write that fails is one line (the finished stages stay: a rerun resumes); SIGTERM
    # removes the temporary file of the figure or stage being written
    with writing(config.output), claim:
        report = reproduce(config, pipeline_writers())
    if report is not None:  # the main process only
        print(report)
    return 0


def main(argv: list[str] | None = None) -> int:
    return main_for("reproduce", add_arguments, run_command, argv)


if __name__ == "__main__":
    sys.exit(main())
