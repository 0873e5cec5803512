"""`attentionspan train`: train a causal LM on a task, one token per character.

    attentionspan train --model scratch --config reversal_id --output runs/rev --lr 1e-3
    attentionspan train --output runs/rev --resume          # after an interruption
    accelerate launch --multi_gpu --num_processes 2 -m harness.commands.train --model scratch ...

One flag per field of `harness.train.TrainConfig` (and of `ScratchConfig`, prefixed
`--scratch-`), the shared prompt options, `--resume` and `--no-progress`. The loop is
`harness.train` (the measurement layer, which does not run as a program).
"""

from __future__ import annotations

import sys

from harness.options import (
    add_dataclass_arguments,
    add_model_arguments,
    dataclass_values,
    explicit_options,
    main_for,
    quiet_transformers,
    resolve_instruction,
)

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
    "curriculum": "easier data first: STEPS:KEY=VALUE,...;STEPS:... trains the first STEPS "
    "steps on --config with these parameters, then the next stage, then --config itself "
    "(e.g. 400:min_table_size=1,max_table_size=1 for value assignment)",
    "loss_on": "tokens the loss is on: the target (and EOS), or all of the text (flip-flop: "
    "every mid-program read is then an answer too)",
    "mixed_precision": "bf16 autocast; auto: bf16 for models of 20M parameters or more on "
    "hardware with bf16 support (not AVX2-only CPUs, where it is slower)",
    "eval_every": "optimizer steps between ID evaluations (0: only at the end)",
    "eval_size": "validation instances per evaluation",
    "eval_batch_size": "batch size of evaluation",
    "save_every": "optimizer steps between resumable checkpoints (0: only the final model)",
    "keep_checkpoints": "how many checkpoints to keep",
    "log_every": "optimizer steps between log lines",
}


def add_arguments(parser) -> None:
    from harness.models import ScratchConfig
    from harness.train import LOSS_ON, MIXED_PRECISION, NESTED, SCHEDULES, TrainConfig

    add_dataclass_arguments(
        parser,
        TrainConfig,
        skip=NESTED,
        helps=TRAIN_HELP,
        choices={"schedule": SCHEDULES, "mixed_precision": MIXED_PRECISION, "loss_on": LOSS_ON},
    )
    add_model_arguments(parser, "prompt")
    group = parser.add_argument_group("model from scratch (--model scratch)")
    add_dataclass_arguments(
        group,
        ScratchConfig,
        helps={"charset": "characters of the vocabulary"},
        prefix="scratch_",
        shown={"charset": "printable ASCII"},
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --output from its latest checkpoint (its saved options are used)",
    )
    add_model_arguments(parser, "no_progress", "threads")


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "train",
        help="train a model on a task, one token per character",
        description="Train (or fine-tune) a causal LM on a task preset with AdamW; defaults "
        "are the paper's. Also: accelerate launch -m harness.commands.train ...",
    )
    add_arguments(parser)
    parser.set_defaults(func=run_command)


def config_from_args(args):
    from harness.data import PromptConfig
    from harness.models import ScratchConfig
    from harness.train import NESTED, TrainConfig

    values = dataclass_values(args, TrainConfig, skip=NESTED)
    values["prompt"] = PromptConfig(
        instruction=resolve_instruction(args.instruction, [args.config]),
        num_fewshot=args.num_fewshot or 0,
        chat=bool(args.chat),
    )
    values["scratch"] = ScratchConfig(**dataclass_values(args, ScratchConfig, prefix="scratch_"))
    return TrainConfig(**values)


def run_command(args) -> int:
    from harness.train import flat_options, train

    quiet_transformers()
    config = config_from_args(args)
    requested = None
    if args.resume and hasattr(args, "argv"):
        given = explicit_options(add_arguments, args.argv)
        requested = {k: v for k, v in flat_options(config).items() if k in given}
    final = train(config, resume=args.resume, progress=not args.no_progress, requested=requested)
    print(final)
    return 0


def main(argv: list[str] | None = None) -> int:
    return main_for("train", add_arguments, run_command, argv)


if __name__ == "__main__":
    sys.exit(main())
