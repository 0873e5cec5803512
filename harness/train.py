"""Train a causal LM on a task, one token per character, with accelerate.

    attentionspan train --model scratch --config reversal_id --output runs/rev --lr 1e-3
    attentionspan train --model smollm2-135m-instruct --config addition_id --lr 5e-5 \\
        --instruction "Add the two numbers." --max-steps 600 --output runs/add
    attentionspan train --output runs/rev --resume          # after an interruption
    accelerate launch --multi_gpu --num_processes 2 -m harness.train --model scratch ...

Defaults are the paper's (Appendix E): AdamW, lr 5e-6, betas (0.95, 0.999), weight decay
0.2, batch 4, 1 epoch; every one is an option. Loss is on the target tokens and the EOS
after them. Data come from the generator (config, seed, stream "train", index) or from a
`datasets` dataset; both are indexed, so a checkpoint stores the next index and a resumed
run sees exactly the data an uninterrupted one would have. Each checkpoint folder holds the
model (safetensors), the tokenizer, the run configuration (`attentionspan_run.json`) and the
optimizer and scheduler state; folders are written under a temporary name and renamed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attentionspan_datasets.generation import DEFAULT_SEED
from harness.data import DatasetSource, GeneratorSource, PromptConfig, collate, training_indices
from harness.evaluate import evaluate_model
from harness.models import ScratchConfig
from harness.options import (
    add_dataclass_arguments,
    add_prompt_arguments,
    check_finite,
    dataclass_values,
    main_for,
    quiet_transformers,
    resolve_instruction,
)
from harness.runs import (
    CHECKPOINT_PREFIX,
    RUN_CONFIG_FILE,
    TrainState,
    latest_checkpoint,
    load_model_checked,
    load_training_state,
    prune_checkpoints,
    read_run_file,
    save_folder,
    section,
    versions,
)
from harness.tokenization import CharTokenizer

SCHEDULES = ("linear", "cosine", "constant")
MIXED_PRECISION = ("auto", "no", "bf16")
TRAIN_STREAM = "train"
VALIDATION_STREAM = "validation"
# bf16 autocast pays off for large matrices on hardware with bf16 units (2.5x for the 135M
# model on an AVX512-BF16 CPU, FINDINGS.md); on an AVX2-only CPU it is emulated and several
# times slower, and for tiny models the casts cost more than they save (docs/performance.md).
AUTO_BF16_MIN_PARAMS = 20_000_000


@dataclass
class TrainConfig:
    model: str = "scratch"
    output: str = "runs/train"
    config: str = "reversal_id"  # preset or task name of the training data
    dataset: str | None = None  # instead of the generator: a `load_dataset` path or name
    dataset_config: str | None = None
    dataset_split: str = "train"
    seed: int = DEFAULT_SEED  # of the data stream
    train_size: int = 10_000  # instances in one epoch of generated data
    epochs: int = 1
    max_steps: int = 0  # optimizer steps; 0: as many as `epochs` take
    batch_size: int = 4  # per process and micro-batch
    grad_accum: int = 1
    lr: float = 5e-6
    beta1: float = 0.95
    beta2: float = 0.999
    weight_decay: float = 0.2
    adam_eps: float = 1e-8
    schedule: str = "linear"
    warmup_ratio: float = 0.05
    max_grad_norm: float = 1.0
    mixed_precision: str = "auto"
    eval_every: int = 0  # optimizer steps between ID evaluations; 0: only at the end
    eval_size: int = 200
    eval_batch_size: int = 32
    save_every: int = 0  # optimizer steps between checkpoints; 0: only the final model
    keep_checkpoints: int = 2
    log_every: int = 10
    prompt: PromptConfig = field(default_factory=PromptConfig)
    scratch: ScratchConfig = field(default_factory=ScratchConfig)

    def __post_init__(self) -> None:
        check_finite("", dataclasses.asdict(self))
        positive = (
            "train_size",
            "epochs",
            "batch_size",
            "grad_accum",
            "eval_size",
            "eval_batch_size",
            "keep_checkpoints",
            "log_every",
        )
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"'{name}' must be >= 1, got {getattr(self, name)}")
        for name in ("max_steps", "eval_every", "save_every", "weight_decay", "max_grad_norm"):
            if getattr(self, name) < 0:
                raise ValueError(f"'{name}' must be >= 0, got {getattr(self, name)}")
        if not self.lr > 0:
            raise ValueError(f"'lr' must be > 0, got {self.lr}")
        for name in ("beta1", "beta2", "warmup_ratio"):
            if not 0 <= getattr(self, name) < 1:
                raise ValueError(f"'{name}' must be in [0, 1), got {getattr(self, name)}")
        if self.schedule not in SCHEDULES:
            raise ValueError(
                f"'schedule' must be one of {', '.join(SCHEDULES)}, got {self.schedule!r}"
            )
        if self.mixed_precision not in MIXED_PRECISION:
            raise ValueError(
                f"'mixed_precision' must be one of {', '.join(MIXED_PRECISION)}, "
                f"got {self.mixed_precision!r}"
            )
        if isinstance(self.prompt, dict):
            self.prompt = PromptConfig(**self.prompt)
        if isinstance(self.scratch, dict):
            self.scratch = ScratchConfig(**self.scratch)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TrainConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - names)
        if unknown:
            raise ValueError(f"unknown training option(s) {', '.join(unknown)}")
        return cls(**values)


# --- pieces -----------------------------------------------------------------------------
def make_source(config: TrainConfig):
    if config.dataset:
        return DatasetSource.load(config.dataset, config.dataset_config, config.dataset_split)
    return GeneratorSource(
        config.config, seed=config.seed, stream=TRAIN_STREAM, size=config.train_size
    )


def make_optimizer(model, config: TrainConfig):
    """AdamW; as in Hugging Face's Trainer, biases and norm weights (1-D) are not decayed."""
    import torch

    decay = [p for p in model.parameters() if p.requires_grad and p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.ndim < 2]
    groups = [
        {"params": decay, "weight_decay": config.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    kwargs = dict(lr=config.lr, betas=(config.beta1, config.beta2), eps=config.adam_eps)
    try:
        return torch.optim.AdamW(groups, fused=True, **kwargs)  # 2.5x faster step on CPU
    except (RuntimeError, TypeError):
        return torch.optim.AdamW(groups, **kwargs)


def make_scheduler(optimizer, config: TrainConfig, total_steps: int):
    from transformers import get_scheduler

    warmup = int(config.warmup_ratio * total_steps)
    name = "constant_with_warmup" if config.schedule == "constant" else config.schedule
    return get_scheduler(name, optimizer, num_warmup_steps=warmup, num_training_steps=total_steps)


def bf16_is_fast() -> bool:
    import torch

    if torch.cuda.is_available():
        return torch.cuda.is_bf16_supported()
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())  # AVX512-BF16 or AMX
    except (AttributeError, RuntimeError):
        return False


def resolve_mixed_precision(setting: str, model) -> str:
    """`auto`: bf16 for models of 20M parameters or more where bf16 has hardware support."""
    if setting != "auto":
        return setting
    params = sum(p.numel() for p in model.parameters())
    return "bf16" if params >= AUTO_BF16_MIN_PARAMS and bf16_is_fast() else "no"


def autocast(mode: str, device):
    import torch

    if mode == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def is_out_of_memory(error: BaseException) -> bool:
    import torch

    if isinstance(error, torch.OutOfMemoryError):
        return True
    text = str(error)
    return "out of memory" in text or "can't allocate memory" in text


def run_info(config: TrainConfig, state: TrainState, **extra) -> dict[str, Any]:
    """What `attentionspan_run.json` holds: the options, the prompt layout, the scratch
    model, where the run stands, and the library versions."""
    return {
        "train": {k: v for k, v in config.to_dict().items() if k not in ("prompt", "scratch")},
        "prompt": dataclasses.asdict(config.prompt),
        "scratch": dataclasses.asdict(config.scratch),
        "state": dataclasses.asdict(state),
        "versions": versions(),
        **extra,
    }


def save_checkpoint(
    accelerator,
    model,
    tokenizer,
    optimizer,
    scheduler,
    config: TrainConfig,
    state: TrainState,
    name: str,
    with_optimizer: bool = True,
    **extra,
) -> Path:
    """Write `output/name` atomically and keep the newest `keep_checkpoints` checkpoints."""
    output = Path(config.output)
    training_state = (
        {"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict()}
        if with_optimizer
        else None
    )
    target = save_folder(
        accelerator,
        model,
        tokenizer,
        output / name,
        run_info(config, state, **extra),
        training_state,
    )
    if accelerator.is_main_process:
        prune_checkpoints(output, config.keep_checkpoints)
    return target


def load_resume(output: Path) -> tuple[TrainConfig, TrainState, Path]:
    checkpoint = latest_checkpoint(output)
    if checkpoint is None:
        raise ValueError(
            f"--resume: no checkpoint to resume in {str(output)!r} "
            f"(checkpoints are written with --save-every N)"
        )
    info = read_run_file(checkpoint)
    values = {
        **info.get("train", {}),
        "prompt": info.get("prompt", {}),
        "scratch": info.get("scratch", {}),
    }
    try:
        config = TrainConfig.from_dict(values)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{checkpoint / RUN_CONFIG_FILE}: {error}") from None
    config.output = str(output)
    return config, section(info, "state", TrainState, checkpoint), checkpoint


# --- the loop ---------------------------------------------------------------------------
def train(
    config: TrainConfig, resume: bool = False, stop_after: int | None = None, progress: bool = True
) -> Path:
    """Run (or resume) training; returns the folder of the final model.

    `stop_after` ends the run after that many optimizer steps of this invocation, as an
    interruption would (tests use it to check that resuming gives the same run).
    """
    import torch
    from accelerate import Accelerator
    from tqdm.auto import tqdm

    accelerator = Accelerator(cpu=not torch.cuda.is_available())
    output = Path(config.output)
    state = TrainState()
    checkpoint = None
    if resume:
        config, state, checkpoint = load_resume(output)
    source = make_source(config)  # a bad preset fails before the model is loaded
    model, tokenizer = load_model_checked(
        str(checkpoint) if checkpoint else config.model, scratch=config.scratch
    )
    char_tok = CharTokenizer(tokenizer)
    epoch_size = len(source)
    world = accelerator.num_processes
    per_step = config.batch_size * config.grad_accum * world
    total_steps = config.max_steps or math.ceil(epoch_size * config.epochs / per_step)
    state.total_steps = total_steps
    for i in range(min(epoch_size, 50)):  # a character the tokenizer lacks: fail now
        char_tok.check_text(source[i].text)
    precision = resolve_mixed_precision(config.mixed_precision, model)

    optimizer = make_optimizer(model, config)
    scheduler = make_scheduler(optimizer, config, total_steps)
    if checkpoint is not None:
        saved = load_training_state(checkpoint)
        optimizer.load_state_dict(saved["optimizer"])
        scheduler.load_state_dict(saved["scheduler"])
    model, optimizer = accelerator.prepare(model, optimizer)
    model.train()

    main = accelerator.is_main_process
    log_path = output / "log.jsonl"
    if main:
        output.mkdir(parents=True, exist_ok=True)
        (output / "train_config.json").write_text(json.dumps(config.to_dict(), indent=2) + "\n")
    bar = tqdm(
        total=total_steps,
        initial=state.step,
        disable=not (main and progress),
        desc="train",
        dynamic_ncols=True,
    )
    micro_batches = training_indices(
        state.next_index, config.batch_size, world, accelerator.process_index
    )
    run_start = time.perf_counter() - state.elapsed_s
    cpu_start = time.process_time()  # this invocation's CPU time: robust on a shared machine
    window_tokens, window_start, window_loss, window_steps = 0, time.perf_counter(), 0.0, 0
    steps_this_run = 0
    eval_results: dict[str, Any] = {}

    def run_eval() -> dict[str, Any]:
        results, _ = evaluate_model(
            accelerator.unwrap_model(model),
            tokenizer,
            [config.config],
            config.eval_size,
            seed=config.seed,
            stream=VALIDATION_STREAM,
            batch_size=config.eval_batch_size,
            prompt=config.prompt,
            mixed_precision=precision,
            accelerator=accelerator,
        )
        return results[config.config]

    while state.step < total_steps:
        step_loss = torch.zeros((), dtype=torch.float32)
        step_tokens = 0
        try:
            for micro in range(config.grad_accum):
                indices = next(micro_batches)
                instances = [source[i % epoch_size] for i in indices]
                batch = collate(
                    [config.prompt.encode(char_tok, x) for x in instances],
                    char_tok.pad_id,
                    padding_side="right",
                )
                step_tokens += int(batch["attention_mask"].sum())
                inputs = {
                    k: batch[k].to(accelerator.device)
                    for k in ("input_ids", "attention_mask", "position_ids", "labels")
                }
                last = micro == config.grad_accum - 1
                sync = contextlib.nullcontext() if last else accelerator.no_sync(model)
                with sync:
                    with autocast(precision, accelerator.device):
                        loss = model(**inputs).loss / config.grad_accum
                    accelerator.backward(loss)
                step_loss += loss.detach().float().cpu()
            if config.max_grad_norm > 0:
                accelerator.clip_grad_norm_(model.parameters(), config.max_grad_norm)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
        except RuntimeError as error:
            if is_out_of_memory(error):
                smaller = max(1, config.batch_size // 2)
                raise ValueError(
                    f"out of memory at --batch-size {config.batch_size}; try --batch-size "
                    f"{smaller} --grad-accum {config.grad_accum * 2} (same effective batch)"
                ) from None
            raise
        state.step += 1
        state.next_index += per_step
        steps_this_run += 1
        window_tokens += step_tokens
        window_loss += float(step_loss)
        window_steps += 1
        bar.update(1)

        if state.step % config.log_every == 0 or state.step == total_steps:
            counts = accelerator.reduce(torch.tensor([window_tokens, window_loss]), "sum")
            seconds = time.perf_counter() - window_start
            tokens_per_s = float(counts[0]) / max(seconds, 1e-9)
            mean_loss = float(counts[1]) / (window_steps * world)
            state.tokens += int(counts[0])
            state.elapsed_s = time.perf_counter() - run_start
            bar.set_postfix(loss=f"{mean_loss:.4f}", tok_s=f"{tokens_per_s:.0f}")
            record = {
                "step": state.step,
                "loss": mean_loss,
                "lr": scheduler.get_last_lr()[0],
                "tokens_per_s": tokens_per_s,
                "next_index": state.next_index,
                "elapsed_s": round(state.elapsed_s, 2),
                "tokens": state.tokens,
                "cpu_s": round(time.process_time() - cpu_start, 3),
            }
            if main:
                with log_path.open("a") as log:
                    log.write(json.dumps(record) + "\n")
            window_tokens, window_start, window_loss, window_steps = 0, time.perf_counter(), 0, 0

        if config.eval_every and state.step % config.eval_every == 0 and state.step < total_steps:
            eval_results = run_eval()
            if main:
                bar.write(
                    f"step {state.step}: ID exact match {eval_results['exact_match']:.3f}, "
                    f"TF token acc {eval_results['tf_token_acc']:.3f}"
                )
                with log_path.open("a") as log:
                    log.write(
                        json.dumps(
                            {
                                "step": state.step,
                                "eval": {
                                    k: eval_results[k]
                                    for k in ("exact_match", "partial_acc", "tf_token_acc")
                                },
                            }
                        )
                        + "\n"
                    )
            window_start = time.perf_counter()  # evaluation time is not training throughput
        if config.save_every and state.step % config.save_every == 0:
            state.elapsed_s = time.perf_counter() - run_start
            save_checkpoint(
                accelerator,
                model,
                tokenizer,
                optimizer,
                scheduler,
                config,
                state,
                f"{CHECKPOINT_PREFIX}{state.step}",
            )
        if stop_after is not None and steps_this_run >= stop_after and state.step < total_steps:
            bar.close()
            return output
    bar.close()

    state.elapsed_s = time.perf_counter() - run_start
    eval_results = run_eval()
    if main:
        print(
            f"final ID ({config.config}, {config.eval_size} validation instances): exact match "
            f"{eval_results['exact_match']:.3f}, TF token acc {eval_results['tf_token_acc']:.3f}"
            f"; {state.step} steps in {state.elapsed_s:.0f} s",
            file=sys.stderr,
        )
    final = save_checkpoint(
        accelerator,
        model,
        tokenizer,
        optimizer,
        scheduler,
        config,
        state,
        "final",
        with_optimizer=False,
        final_eval={
            k: eval_results[k] for k in ("n", "exact_match", "partial_acc", "tf_token_acc")
        },
    )
    return final


# --- the command ------------------------------------------------------------------------
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
NESTED = ("prompt", "scratch")


def add_arguments(parser) -> None:
    add_dataclass_arguments(
        parser,
        TrainConfig,
        skip=NESTED,
        helps=TRAIN_HELP,
        choices={"schedule": SCHEDULES, "mixed_precision": MIXED_PRECISION},
    )
    add_prompt_arguments(parser)
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
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "train",
        help="train a model on a task, one token per character",
        description="Train (or fine-tune) a causal LM on a task preset with AdamW; defaults "
        "are the paper's. Also: accelerate launch -m harness.train ...",
    )
    add_arguments(parser)
    parser.set_defaults(func=run_command)


def config_from_args(args) -> TrainConfig:
    values = dataclass_values(args, TrainConfig, skip=NESTED)
    values["prompt"] = PromptConfig(
        instruction=resolve_instruction(args.instruction, [args.config]),
        num_fewshot=args.num_fewshot or 0,
        chat=bool(args.chat),
    )
    values["scratch"] = ScratchConfig(**dataclass_values(args, ScratchConfig, prefix="scratch_"))
    return TrainConfig(**values)


def run_command(args) -> int:
    quiet_transformers()
    config = config_from_args(args)
    final = train(config, resume=args.resume, progress=not args.no_progress)
    print(final)
    return 0


if __name__ == "__main__":
    sys.exit(main_for("train", add_arguments, run_command))
