"""`attentionspan train`, `attentionspan eval` and `attentionspan models`.

    attentionspan train --model scratch --config reversal_id --lr 1e-3 --output runs/rev
    attentionspan eval --model runs/rev/final --configs reversal_id reversal_ood
    attentionspan models fetch smollm2-135m-instruct
    attentionspan models list

The same options work under accelerate: `accelerate launch -m harness.train ...` and
`accelerate launch -m harness.evaluate ...`. torch and transformers are imported inside the
run functions, so `attentionspan generate` stays fast.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import typing

TRAIN_HELP = {
    "model": "'scratch', a local Hugging Face causal-LM folder, a fetched model name "
    "(smollm2-135m-instruct) or a Hub name",
    "output": "run folder: checkpoints, final model, log.jsonl",
    "config": "preset or task of the training data (and of the periodic ID evaluation)",
    "dataset": "train on a `datasets` dataset instead (load_dataset path or name)",
    "dataset_config": "the dataset's config name",
    "dataset_split": "the dataset's split",
    "seed": "seed of the generated data stream",
    "train_size": "instances in one epoch of generated data",
    "epochs": "passes over the data",
    "max_steps": "optimizer steps (0: as many as --epochs take)",
    "batch_size": "instances per process and micro-batch (paper: 4)",
    "grad_accum": "micro-batches per optimizer step",
    "lr": "peak learning rate (paper: 5e-6)",
    "beta1": "AdamW beta1 (paper: 0.95)",
    "beta2": "AdamW beta2 (paper: 0.999)",
    "weight_decay": "AdamW weight decay (paper: 0.2)",
    "adam_eps": "AdamW epsilon",
    "schedule": "learning-rate decay after warm-up",
    "warmup_ratio": "share of the steps spent warming up",
    "max_grad_norm": "gradient clipping norm (0: off)",
    "mixed_precision": "bf16 autocast; auto: bf16 for models of 20M parameters or more on "
    "hardware with bf16 support (not AVX2-only CPUs, where it is slower)",
    "eval_every": "optimizer steps between ID evaluations (0: only at the end)",
    "eval_size": "validation instances per evaluation",
    "eval_batch_size": "batch size of evaluation",
    "save_every": "optimizer steps between resumable checkpoints (0: only the final model)",
    "keep_checkpoints": "how many checkpoints to keep",
    "log_every": "optimizer steps between log lines",
}
CHOICES = {"schedule": ("linear", "cosine", "constant"), "mixed_precision": ("auto", "no", "bf16")}
# `--instruction default`: the standard line of attentionspan_datasets.instructions.
DEFAULT_INSTRUCTION = "default"


def _option(name: str) -> str:
    return "--" + name.replace("_", "-")


def _scalar_type(annotation):
    """int / float / str for `int`, `float`, `str | None` annotations."""
    if annotation in (int, float, str):
        return annotation
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    return args[0] if args else str


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    from harness.models import ScratchConfig
    from harness.train import TrainConfig

    hints = typing.get_type_hints(TrainConfig)
    for f in dataclasses.fields(TrainConfig):
        if f.name in ("prompt", "scratch"):
            continue
        default = f.default if f.default is not dataclasses.MISSING else None
        parser.add_argument(
            _option(f.name),
            dest=f.name,
            type=_scalar_type(hints[f.name]),
            default=default,
            choices=CHOICES.get(f.name),
            help=f"{TRAIN_HELP.get(f.name, '')} (default: {default})",
        )
    add_prompt_arguments(parser)
    group = parser.add_argument_group("model from scratch (--model scratch)")
    for f in dataclasses.fields(ScratchConfig):
        group.add_argument(
            _option("scratch_" + f.name),
            dest="scratch_" + f.name,
            type=type(f.default),
            default=f.default,
            help=f"(default: {f.default!r})"
            if f.name != "charset"
            else "characters of the vocabulary (default: printable ASCII)",
        )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --output from its latest checkpoint (its saved options are used)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def add_prompt_arguments(parser: argparse.ArgumentParser, saved_default: bool = False) -> None:
    suffix = " (default: as saved with the model)" if saved_default else ""
    parser.add_argument(
        "--instruction",
        default=None,
        help="a line before the task text, tokenised normally; 'default' is the task's "
        "standard instruction, the one the lm-eval tasks use" + suffix,
    )
    parser.add_argument(
        "--num-fewshot",
        type=int,
        default=None,
        help="solved examples before the task text" + suffix,
    )
    parser.add_argument(
        "--chat",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="wrap the text in the tokenizer's chat template" + suffix,
    )


def resolve_instruction(instruction: str | None, configs: list[str]) -> str | None:
    """`default` becomes the standard instruction of the configs' task (one task only)."""
    if instruction != DEFAULT_INSTRUCTION:
        return instruction
    from attentionspan_datasets.generation import resolve_config
    from attentionspan_datasets.instructions import instruction_for

    tasks = {resolve_config(name).task_name for name in configs}
    if len(tasks) != 1:
        found = ", ".join(sorted(tasks)) or "none"
        raise ValueError(f"--instruction default needs configs of one task, got {found}")
    return instruction_for(tasks.pop())


def train_config_from_args(args: argparse.Namespace):
    from harness.data import PromptConfig
    from harness.models import ScratchConfig
    from harness.train import TrainConfig

    values = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(TrainConfig)
        if f.name not in ("prompt", "scratch")
    }
    values["prompt"] = PromptConfig(
        instruction=resolve_instruction(args.instruction, [args.config]),
        num_fewshot=args.num_fewshot or 0,
        chat=bool(args.chat),
    )
    values["scratch"] = ScratchConfig(
        **{f.name: getattr(args, "scratch_" + f.name) for f in dataclasses.fields(ScratchConfig)}
    )
    return TrainConfig(**values)


def quiet_transformers() -> None:
    """No per-file "Loading weights" bars: the command prints its own progress."""
    from transformers.utils import logging

    logging.disable_progress_bar()


def run_train(args: argparse.Namespace) -> int:
    from harness.train import train

    quiet_transformers()
    config = train_config_from_args(args)
    final = train(config, resume=args.resume, progress=not args.no_progress)
    print(final)
    return 0


def add_eval_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        required=True,
        help="a model folder (e.g. runs/rev/final), a fetched model name, ...",
    )
    parser.add_argument(
        "--configs",
        nargs="+",
        default=[],
        metavar="CONFIG",
        help="presets to evaluate (default: the training preset and its OOD twin)",
    )
    parser.add_argument("-n", "--num", type=int, default=200, help="instances per config")
    parser.add_argument("--seed", type=int, default=None, help="seed of the test stream")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument(
        "--output", default=None, help="folder for results.json, results.md and predictions-*.jsonl"
    )
    parser.add_argument("--mixed-precision", choices=("no", "bf16"), default="no")
    add_prompt_arguments(parser, saved_default=True)


def run_eval(args: argparse.Namespace) -> int:
    from pathlib import Path

    from attentionspan_datasets.generation import DEFAULT_SEED
    from harness.data import PromptConfig
    from harness.evaluate import EvalConfig, default_configs, run, saved_run_config

    quiet_transformers()
    prompt = None
    if args.instruction is not None or args.num_fewshot is not None or args.chat is not None:
        saved = saved_run_config(args.model) if Path(args.model).is_dir() else None
        base = PromptConfig(**saved["prompt"]) if saved else PromptConfig()
        configs = args.configs or default_configs(saved)
        prompt = dataclasses.replace(
            base,
            **{
                k: v
                for k, v in (
                    ("instruction", resolve_instruction(args.instruction, configs)),
                    ("num_fewshot", args.num_fewshot),
                    ("chat", args.chat),
                )
                if v is not None
            },
        )
    config = EvalConfig(
        model=args.model,
        configs=args.configs,
        num=args.num,
        seed=DEFAULT_SEED if args.seed is None else args.seed,
        batch_size=args.batch_size,
        output=args.output,
        mixed_precision=args.mixed_precision,
        prompt=prompt,
    )
    run(config)
    return 0


def run_models(args: argparse.Namespace) -> int:
    from harness.models import KNOWN_MODELS, fetch, known_model_dir

    if args.models_command == "fetch":
        print(fetch(args.name, force=args.force, log=lambda m: print(m, file=sys.stderr)))
    else:
        for name, known in KNOWN_MODELS.items():
            folder = known_model_dir(name)
            state = str(folder) if (folder / "config.json").is_file() else "not fetched"
            print(f"{name}\t{known.description}\t{state}")
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    train = subparsers.add_parser(
        "train",
        help="train a model on a task, one token per character",
        description="Train (or fine-tune) a causal LM on a task preset with AdamW; defaults "
        "are the paper's. Also: accelerate launch -m harness.train ...",
    )
    add_train_arguments(train)
    train.set_defaults(func=run_train)

    evaluate = subparsers.add_parser(
        "eval",
        help="exact match, partial and teacher-forced accuracy on ID/OOD presets",
        description="Evaluate a model with batched greedy generation and teacher forcing. "
        "Also: accelerate launch -m harness.evaluate ...",
    )
    add_eval_arguments(evaluate)
    evaluate.set_defaults(func=run_eval)

    models = subparsers.add_parser("models", help="fetch or list the known pretrained models")
    sub = models.add_subparsers(dest="models_command", metavar="ACTION", required=True)
    fetch = sub.add_parser(
        "fetch", help="download and convert a known model once; print its folder"
    )
    from harness.models import KNOWN_MODELS

    fetch.add_argument("name", choices=sorted(KNOWN_MODELS))
    fetch.add_argument("--force", action="store_true", help="download and convert again")
    sub.add_parser("list", help="the known models and where they are")
    models.set_defaults(func=run_models)


def main_module(command: str, argv: list[str] | None = None) -> int:
    """Entry point of `python -m harness.train` / `-m harness.evaluate`: the same options
    and the same one-line errors as `attentionspan train` / `attentionspan eval`."""
    from attentionspan_datasets.cli import main

    return main([command, *(sys.argv[1:] if argv is None else argv)])
