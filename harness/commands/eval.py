"""`attentionspan eval`: exact match, partial and teacher-forced accuracy on ID/OOD presets.

    attentionspan eval --model runs/rev/final --configs reversal_id reversal_ood -n 500
    attentionspan eval --model BIG --device-map map.json --offload-folder /scratch/offload ...
    attentionspan launch --multi_gpu --num_processes 2 eval --model ...
    torchrun --nproc-per-node 2 -m harness.commands.eval --model M --tp-plan auto ...

The measurement is `harness.evaluation.evaluate` (`evaluate_model`); the files (`results.json`,
`results.md`, `predictions-<config>.jsonl` in --output) are `harness.report.eval_report`'s.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from harness.commands import claim_output_folder, prompt_given, prompt_over
from harness.foundation.options import (
    add_config_arguments,
    add_model_arguments,
    config_values,
    main_for,
    quiet_transformers,
    refuse_device_option,
)


def add_arguments(parser) -> None:
    """EvalConfig's options, the shared --no-progress, --threads and prompt options, and
    --overwrite."""
    from harness.evaluation.evaluate import EvalConfig

    add_config_arguments(parser, EvalConfig, defaults=True)
    add_model_arguments(parser, "no_progress", "threads", "prompt", prompt={"saved_default": True})
    add_model_arguments(parser, "overwrite")
    refuse_device_option(parser, "eval")


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "eval",
        help="exact match, partial and teacher-forced accuracy on ID/OOD presets",
        description="Evaluate a model with batched greedy generation and teacher forcing. "
        "Also: attentionspan launch [launcher options] eval ...",
    )
    add_arguments(parser)
    parser.set_defaults(func=run_command)


def check(args):
    """What eval refuses before any work, writing nothing (`attentionspan launch` runs it
    before it starts processes): the config and the claim on --output."""
    from harness.evaluation.evaluate import EvalConfig, default_configs, saved_run_config
    from harness.foundation.runs import check_model_files, saved_prompt

    check_model_files(args.model)  # missing, no weights, an encoder: before --output is touched
    prompt = None  # none given: the saved one, read where the model loads
    if prompt_given(args):
        saved = saved_run_config(args.model)
        configs = args.configs or default_configs(saved)
        prompt = prompt_over(saved_prompt(saved, args.model), args, configs)
    config = EvalConfig(**config_values(args, EvalConfig), prompt=prompt)
    # read-only, full; an earlier eval's results, another command's folder, a user's files:
    # refused here
    claim = claim_output_folder(config.output, "eval", overwrite=args.overwrite)
    return config, claim


def run_command(args) -> int:
    from harness.foundation.outputs import writing

    quiet_transformers()
    config, claim = check(args)
    # a write that fails is one line, and a folder this run made goes with it (its files
    # are written at the end, all of them or none)
    with writing(config.output, discard=True):
        run(config, progress=not args.no_progress, claim=claim)
    return 0


def run(config, progress: bool = True, claim=None) -> dict[str, Any]:
    """Load the model, evaluate every config, write the reports (main process only).
    `claim` (`harness.foundation.ownership.Claim`, on --output) is entered once the model
    has loaded and passed its checks: a model that cannot serve leaves the folder alone."""
    import contextlib

    import torch
    from accelerate import Accelerator

    from harness.evaluation.evaluate import default_configs, saved_run_config
    from harness.foundation.data import GeneratorSource
    from harness.foundation.dispatch import Placement, place_model
    from harness.foundation.models import resolve_model
    from harness.foundation.outputs import check_output_folder
    from harness.foundation.runs import load_model_checked, saved_prompt

    resolve_model(config.model)  # a missing folder is named before anything else
    run_config = saved_run_config(config.model)
    if config.prompt is None:
        config.prompt = saved_prompt(run_config, config.model)
    if not config.configs:
        config.configs = default_configs(run_config)
        if not config.configs:
            raise ValueError("no --configs given and the model has no saved training config")
    for name in config.configs:
        GeneratorSource(name)  # unknown preset: one line, before loading the model
    check_output_folder("--output", config.output)  # read-only or full: before the model
    accelerator = Accelerator(cpu=True) if not torch.cuda.is_available() else Accelerator()
    placement = Placement.of(config)
    placement.check_processes(accelerator.num_processes)
    model, tokenizer = load_model_checked(
        config.model, config.configs, config.prompt, placement=placement
    )
    place_model(model, accelerator.device)  # a dispatched model stays where its map put it
    with claim if claim is not None else contextlib.nullcontext():
        return _evaluate_and_write(config, model, tokenizer, accelerator, placement, progress)


def _evaluate_and_write(config, model, tokenizer, accelerator, placement, progress):
    import time

    from harness.evaluation.evaluate import evaluate_model
    from harness.foundation.dispatch import launched_processes
    from harness.report.eval_report import markdown_table, write_reports

    # Tensor parallelism splits the heads, not the instances: every process scores all of
    # them (no data-parallel accelerator), and only the main one writes.
    sharded = placement.tensor_parallel
    start = time.perf_counter()
    results, records = evaluate_model(
        model,
        tokenizer,
        config.configs,
        config.num,
        config.seed,
        config.split,
        config.batch_size,
        config.prompt,
        config.mixed_precision,
        None if sharded else accelerator,
        progress=progress and accelerator.is_main_process,
    )
    elapsed = time.perf_counter() - start
    if accelerator.is_main_process:
        if config.output:
            processes = launched_processes()  # tensor parallel: not the accelerator's 1
            write_reports(Path(config.output), config, results, records, elapsed, processes)
        print(markdown_table(results), end="")
        print(
            f"({sum(r['count'] for r in results.values())} instances in {elapsed:.1f} s on "
            f"{launched_processes()} process(es))"
        )
    return results


def main(argv: list[str] | None = None) -> int:
    return main_for("eval", add_arguments, run_command, argv)


if __name__ == "__main__":
    sys.exit(main())
