"""`attentionspan attention`: attention on reference tokens, correct versus wrong (Table 2).

    attentionspan attention --model runs/rev/final --configs reversal_id reversal_ood \\
        -n 200 --output runs/rev/attention
    attentionspan attention --model runs/rev/final --score-convention authors ...
    attentionspan attention --model BIG --device-map auto --max-memory 0=20GiB,cpu=60GiB ...
    attentionspan launch --multi_gpu --num_processes 2 attention --model ... --output ...
    torchrun --nproc-per-node 2 -m harness.commands.attention --model M --tp-plan auto ...

Writes, in --output: `attention.json` (per config: `rollout.correct.mean`, `.n`,
`rollout.error.mean`, `.n`, `rollout.welch_t`, `rollout.welch_p`, `rollout.hedges_g`,
`token_accuracy`, `heads` [layer][head], `by_length`, `by_position`, teacher-forced; the
same under `generate` for the free-running pass), `attention.md` (the paper's Table 2
layout) and the figures: `rollout-<config>-{correct,wrong}.png` (Figure 1 style),
`heads.png` (layer x head, one panel per config), `scores.png` (correct versus wrong),
`position-<config>.png` (score by target position), with `-generate` twins for the
free-running pass, and `attention.html` (the interactive viewer, `harness.report.viewer`, on
the first --viewer-num instances of each config, teacher-forced; linked from attention.md).
`--score-convention authors` scores as the authors' released code does rather than as the
paper's text says (`harness.attention.scores`); the convention is in attention.json's
`settings` and stated above attention.md's table. The measurement is
`harness.attention.analysis`.
"""

from __future__ import annotations

import dataclasses
import shlex
import sys
from dataclasses import dataclass, field

from harness.commands import claim_output_folder, prompt_over
from harness.foundation.dispatch import placement_field
from harness.foundation.options import (
    add_config_arguments,
    add_model_arguments,
    cli,
    config_values,
    main_for,
    parser_words,
    quiet_transformers,
    refuse_device_option,
)


@dataclass
class AttentionOutput:
    """The options of the command itself, beside AnalysisConfig's: what it writes, and where
    the model's weights go (`harness.foundation.dispatch`)."""

    output: str | None = field(
        default=None, metadata=cli("folder for attention.json, attention.md and the PNGs")
    )
    viewer_num: int = field(
        default=25,
        metadata=cli("instances per config in attention.html, the interactive viewer (0: none)"),
    )
    device_map: str | None = placement_field("device_map")
    max_memory: str | None = placement_field("max_memory")
    offload_folder: str | None = placement_field("offload_folder")
    tp_plan: str | None = placement_field("tp_plan")


def add_arguments(parser) -> None:
    """The shared --model, AnalysisConfig's options, --output and --viewer-num, and the shared
    prompt options, --no-progress and --threads, and --overwrite."""
    from harness.attention.analysis import AnalysisConfig

    add_model_arguments(parser, "model", model={"required": True})
    add_config_arguments(parser, AnalysisConfig, defaults=True)
    add_config_arguments(parser, AttentionOutput, defaults=True)
    add_model_arguments(parser, "prompt", "no_progress", "threads", prompt={"saved_default": True})
    add_model_arguments(parser, "overwrite")
    refuse_device_option(parser, "attention")


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "attention",
        help="attention rollout on reference tokens, correct vs wrong tokens (Table 2)",
        description="Measure how much of each target token's attention goes to its reference "
        "positions (rollout share and per head), teacher-forced and free-running, and compare "
        "correct with wrong tokens (Welch's t-test). Also: attentionspan launch "
        "[launcher options] attention ...",
    )
    add_arguments(parser)
    parser.set_defaults(func=run_command)


def describe_prompt(prompt) -> str:
    parts = [f"instruction {prompt.instruction!r}" if prompt.instruction else "no instruction"]
    parts.append(f"{prompt.num_fewshot} few-shot")
    parts.append("chat template" if prompt.chat else "no chat template")
    return ", ".join(parts)


def check(args):
    """What attention refuses before any work, writing nothing (`attentionspan launch` runs
    it before it starts processes): the analysis's config, the prompt and the claim on
    --output."""
    from attentionspan_datasets.generation import resolve_config
    from harness.attention.analysis import AnalysisConfig
    from harness.evaluation.evaluate import default_configs, saved_run_config
    from harness.foundation.dispatch import Placement
    from harness.foundation.runs import check_model_files, saved_prompt

    check_model_files(args.model)  # missing, no weights, an encoder: named before loading
    saved = saved_run_config(args.model)
    configs = args.configs or default_configs(saved)
    if not configs:
        raise ValueError("no --configs given and the model has no saved training config")
    for name in configs:
        resolve_config(name)  # an unknown config: one line listing the known ones
    if args.viewer_num < 0:
        raise ValueError(f"--viewer-num must be >= 0, got {args.viewer_num}")
    Placement.of(args)  # a malformed --device-map or --max-memory: before the model
    values = config_values(args, AnalysisConfig)
    config = AnalysisConfig(**{**values, "configs": configs, "modes": tuple(values["modes"])})
    prompt = prompt_over(saved_prompt(saved, args.model), args, configs)
    # a file, read-only, full; an earlier analysis, another command's folder, a user's files:
    # refused here, before the model
    claim = claim_output_folder(args.output, "attention", overwrite=args.overwrite)
    return config, prompt, claim


def run_command(args) -> int:
    from harness.foundation.outputs import writing

    quiet_transformers()
    config, prompt, claim = check(args)
    # a write that fails is one line, and a folder this run made goes with it (its files
    # are written at the end)
    with writing(args.output, discard=True):
        run(args, config, prompt, claim)
    return 0


def run(args, config, prompt, claim=None) -> dict:
    """Load the model, analyse it, write the outputs (main process only). `claim` (on
    --output) is entered once the model has loaded and passed its checks: a model that
    cannot serve leaves the folder alone."""
    import contextlib

    import torch
    from accelerate import Accelerator

    from harness.foundation.dispatch import Placement, check_capture_placement, place_model
    from harness.foundation.runs import load_model_checked

    accelerator = Accelerator(cpu=True) if not torch.cuda.is_available() else Accelerator()
    placement = Placement.of(args)
    placement.check_processes(accelerator.num_processes)
    model, tokenizer = load_model_checked(args.model, config.configs, prompt, placement=placement)
    place_model(model, accelerator.device)  # a dispatched model stays where its map put it
    check_capture_placement(model, f"model {args.model!r}")
    with claim if claim is not None else contextlib.nullcontext():
        return _analyse_and_write(args, config, prompt, model, tokenizer, accelerator, placement)


def _analyse_and_write(args, config, prompt, model, tokenizer, accelerator, placement) -> dict:
    import time

    from harness.attention.analysis import analyse_model
    from harness.foundation.dispatch import launched_processes
    from harness.report.attention_report import table2_rows, write_outputs

    # Tensor parallelism splits the heads, not the instances: every process analyses all of
    # them (no data-parallel accelerator), and only the main one writes.
    sharded = placement.tensor_parallel
    start = time.perf_counter()
    results, plots_data = analyse_model(
        model,
        tokenizer,
        config,
        prompt,
        None if sharded else accelerator,
        progress=not args.no_progress and accelerator.is_main_process,
    )
    elapsed = time.perf_counter() - start
    if sharded and not accelerator.is_main_process and args.output and args.viewer_num:
        # the viewer's forwards need every process's heads; the main process writes it
        viewer_forwards(args, config, model, tokenizer, prompt)
    if accelerator.is_main_process:
        name = args.model.rstrip("/")
        meta = {
            "model": args.model,
            "model_name": name if len(name) <= 40 else "..." + name[-37:],
            "command": command_line(args, config),
            "configs": config.configs,
            "instances": config.num,
            "seed": config.seed,
            "split": config.split,
            "modes": list(config.modes),
            "batch_size": config.batch_size,
            "score_convention": config.score_convention,
            "prompt": describe_prompt(prompt),
            "prompt_config": dataclasses.asdict(prompt),
            "processes": launched_processes(),  # tensor parallel: not the accelerator's 1
            "seconds": round(elapsed, 1),
        }
        if args.output:
            written = write_outputs(args.output, meta, results, plots_data)
            if args.viewer_num:
                written.append(write_viewer_for(args, config, model, tokenizer, prompt, meta))
            print(f"wrote {len(written)} files to {args.output}", file=sys.stderr)
        print("\n".join(table2_rows(meta["model_name"], results)))
        print(
            f"({config.num} instances x {len(config.configs)} configs in {elapsed:.1f} s on "
            f"{accelerator.num_processes} process(es))"
        )
    return results


def viewer_instances(args, config) -> list:
    """The viewer's instances: the first --viewer-num of each config (also the analysis's
    first)."""
    from harness.attention.analysis import load_instances

    num = min(args.viewer_num, config.num)
    return [
        x for name in config.configs for x in load_instances(name, num, config.seed, config.split)
    ]


def viewer_forwards(args, config, model, tokenizer, prompt) -> None:
    """The viewer's measurement without writing it: a tensor-parallel process other than the
    main one runs the same forwards (`write_viewer`'s defaults) so the heads it holds join."""
    from harness.attention.viewer_data import build_viewer_data

    build_viewer_data(model, tokenizer, viewer_instances(args, config), prompt)


def write_viewer_for(args, config, model, tokenizer, prompt, meta):
    """attention.html beside attention.md (the first --viewer-num instances of each config,
    which are also the first of the analysis), and a link to it at the end of attention.md."""
    from pathlib import Path

    from attentionspan_datasets.atomic import atomic_write_text
    from harness.report.viewer import VIEWER_FILE, write_viewer

    num = min(args.viewer_num, config.num)
    instances = viewer_instances(args, config)
    path = write_viewer(
        args.output,
        model,
        tokenizer,
        instances,
        prompt,
        meta={
            "model": meta["model_name"],
            "prompt": meta["prompt"],
            # attention.md scores config.num per config: the page says when it holds fewer.
            "scored": {"file": "attention.md", "instances": config.num, "option": "--viewer-num"},
        },
    )
    markdown = Path(args.output) / "attention.md"
    text = markdown.read_text(encoding="utf-8").rstrip("\n")
    link = (
        f"Interactive viewer (offline, one file): [{VIEWER_FILE}]({VIEWER_FILE}), the first "
        f"{num} instances of each config, teacher-forced."
    )
    if config.score_convention != "paper":  # the viewer scores as the paper's text says
        link += " Its scores follow the paper's convention, not this table's."
    atomic_write_text(markdown, f"{text}\n\n{link}\n")
    return path


def command_line(args, config) -> str:
    """The command that reproduces this analysis (written into attention.md): the settings
    as resolved (configs, seed), every one written out."""
    values = {k: v for k, v in vars(args).items() if k not in ("no_progress", "argv", "overwrite")}
    values |= {"configs": config.configs, "seed": config.seed, "modes": list(config.modes)}
    always = ("model", "configs", "num", "seed", "split", "batch_size", "modes", "score_convention")
    from harness.foundation.dispatch import launch_words

    # several processes: the launch that ran it, so that the command as written shards alike
    words = [*launch_words(), "attention", *parser_words(add_arguments, values, always)]
    return shlex.join(words)


def main(argv: list[str] | None = None) -> int:
    return main_for("attention", add_arguments, run_command, argv)


if __name__ == "__main__":
    sys.exit(main())
