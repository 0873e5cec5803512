"""Train a causal LM on a task, one token per character, with accelerate.

    attentionspan train --model scratch --config reversal_id --output runs/rev --lr 1e-3
    attentionspan train --model smollm2-135m-instruct --config addition_id --lr 5e-5 \\
        --instruction "Add the two numbers." --max-steps 600 --output runs/add
    attentionspan train --output runs/rev --resume          # after an interruption
    attentionspan train ... --attention-supervision layer:1 --supervision-weight 0.5
    accelerate launch --multi_gpu --num_processes 2 -m harness.commands.train --model scratch ...
    accelerate launch --config_file docs/accelerate/fsdp_cpu.yaml -m harness.commands.train ...

Defaults are the paper's (Appendix E): AdamW, lr 5e-6, betas (0.95, 0.999), weight decay
0.2, batch 4, 1 epoch; every one is an option. Loss is on the target tokens and the EOS
after them. Data come from the generator (config, seed, stream "train", index) or from a
`datasets` dataset; both are indexed, so a checkpoint stores the next index and a resumed
run sees exactly the data an uninterrupted one would have. Each checkpoint folder holds the
model (safetensors), the tokenizer, the run configuration (`attentionspan_run.json`) and the
optimizer and scheduler state; folders are written under a temporary name and renamed.

`--attention-supervision HEADS` adds an auxiliary loss pulling those heads' attention toward
the reference mask (`harness.foundation.supervision_options` for the options,
`harness.engine.supervision`
for the loss, read on the training forward itself): total = LM loss + weight x supervision
loss; the log gets `supervision_loss` (and the weight) beside the LM `loss`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import math
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attentionspan_datasets.atomic import atomic_write_text
from attentionspan_datasets.generation import DEFAULT_SEED, MAX_INDEX, SEED_RANGE, resolve_config
from attentionspan_datasets.metrics import ALL_METRICS
from harness.engine.inference import autocast, model_shape
from harness.evaluation.evaluate import evaluate_model
from harness.foundation.caps import (
    MAX_BATCH,
    MAX_EPOCHS,
    MAX_INSTANCES,
    MAX_STEPS,
    MAX_TRAIN_INSTANCES,
    check_int,
    check_output_dir,
)
from harness.foundation.data import (
    DatasetSource,
    GeneratorSource,
    PromptConfig,
    check_context,
    collate,
    source_text,
    training_indices,
)
from harness.foundation.models import ScratchConfig, check_vocabulary
from harness.foundation.options import check_finite, cli, option
from harness.foundation.outputs import Terminated, WriteError, check_output_folder, writing
from harness.foundation.runs import (
    CHECKPOINT_PREFIX,
    FINAL,
    LOG_FILE,
    RUN_CONFIG_FILE,
    TRAIN_CONFIG_FILE,
    TRAINING_STATE_FILE,
    RunLock,
    TrainState,
    append_line,
    check_checkpoint,
    check_optimizer_state,
    finished_run,
    latest_checkpoint,
    load_model_checked,
    load_training_state,
    prune_checkpoints,
    read_run_file,
    save_folder,
    section,
    versions,
)
from harness.foundation.supervision_options import LOSSES as SUPERVISION_LOSSES
from harness.foundation.supervision_options import MASKS as SUPERVISION_MASKS
from harness.foundation.supervision_options import SCHEDULES as SUPERVISION_SCHEDULES
from harness.foundation.supervision_options import SupervisionOptions
from harness.foundation.tokenization import IGNORE_INDEX, CharTokenizer
from harness.training.fsdp import (
    evaluation_model,
    is_fsdp,
    load_sharded_optimizer_state,
    make_accelerator,
    optimizer_state,
    parameter_names,
    tied_copies,
)
from harness.training.loss import lm_loss

SCHEDULES = ("linear", "cosine", "constant")
LOSS_ON = ("target", "all")
MIXED_PRECISION = ("auto", "no", "bf16")
TRAIN_SPLIT = "train"  # rows of attentionspan_datasets.splits; eval reads "test"
VALIDATION_SPLIT = "validation"
EVAL_KEYS = ("count", *ALL_METRICS)
# The nested sections of TrainConfig (saved as their own sections of the run file).
NESTED = ("prompt", "scratch")
# Options a resume may change: they do not change the run.
RESUME_FREE = ("output",)
# bf16 autocast pays off for large matrices on hardware with bf16 units (2.5x for the 135M
# model on an AVX512-BF16 CPU in one measurement); on an AVX2-only CPU it is emulated and several
# times slower, and for tiny models the casts cost more than they save (docs/performance.md).
AUTO_BF16_MIN_PARAMS = 20_000_000
SUPERVISION = "attention supervision"  # the help's group of the --supervision-* options
SUPERVISION_WINDOW = "supervision_window"  # its log window, kept in training_state.pt
_SUPERVISION_DEFAULTS = SupervisionOptions()  # one place for their defaults


@dataclass
class TrainConfig:
    # Each option is declared here once: `attentionspan train`'s parser (`--lr`, ...; the
    # prompt options and `--scratch-*` come from PromptConfig and ScratchConfig) reads these.
    model: str = field(
        default="scratch",
        metadata=cli(
            "'scratch', a local Hugging Face causal-LM folder, a fetched model name "
            "(smollm2-135m-instruct) or a Hub name",
            shared="model",
        ),
    )
    output: str = field(
        default="runs/train", metadata=cli("run folder: checkpoints, final model, log.jsonl")
    )
    config: str = field(
        default="reversal_id",
        metadata=cli("preset or task of the training data (and of the periodic ID evaluation)"),
    )
    dataset: str | None = field(
        default=None,
        metadata=cli("train on a `datasets` dataset instead (load_dataset path or name)"),
    )
    dataset_config: str | None = field(default=None, metadata=cli("the dataset's config name"))
    dataset_split: str = field(default="train", metadata=cli("the dataset's split"))
    seed: int = field(
        default=DEFAULT_SEED, metadata=cli("seed of the generated data stream", shared="seed")
    )
    train_size: int = field(
        default=10_000, metadata=cli("instances in one epoch of generated data")
    )
    epochs: int = field(default=1, metadata=cli("passes over the data"))
    max_steps: int = field(default=0, metadata=cli("optimizer steps (0: as many as --epochs take)"))
    batch_size: int = field(
        default=4,
        metadata=cli("instances per process and micro-batch (paper: 4)", shared="batch_size"),
    )
    grad_accum: int = field(default=1, metadata=cli("micro-batches per optimizer step"))
    lr: float = field(default=5e-6, metadata=cli("peak learning rate (paper: 5e-6)"))
    beta1: float = field(default=0.95, metadata=cli("AdamW beta1 (paper: 0.95)"))
    beta2: float = field(default=0.999, metadata=cli("AdamW beta2 (paper: 0.999)"))
    weight_decay: float = field(default=0.2, metadata=cli("AdamW weight decay (paper: 0.2)"))
    adam_eps: float = field(default=1e-8, metadata=cli("AdamW epsilon"))
    schedule: str = field(
        default="linear", metadata=cli("learning-rate decay after warm-up", choices=SCHEDULES)
    )
    warmup_ratio: float = field(default=0.05, metadata=cli("share of the steps spent warming up"))
    max_grad_norm: float = field(default=1.0, metadata=cli("gradient clipping norm (0: off)"))
    loss_on: str = field(
        default="target",
        metadata=cli(
            "tokens the loss is on: the target (and EOS), or all of the text (flip-flop: "
            "every mid-program read is then an answer too)",
            choices=LOSS_ON,
        ),
    )
    curriculum: str = field(
        default="",
        metadata=cli(
            "easier data first: STEPS:KEY=VALUE,...;STEPS:... trains the first STEPS steps on "
            "--config with these parameters, then the next stage, then --config itself (e.g. "
            "400:min_table_size=1,max_table_size=1 for value assignment)",
            shown="none",
        ),
    )
    mixed_precision: str = field(
        default="auto",
        metadata=cli(
            "bf16 autocast; auto: bf16 for models of 20M parameters or more on hardware with "
            "bf16 support (not AVX2-only CPUs, where it is slower)",
            shared="mixed_precision",
            choices=MIXED_PRECISION,
        ),
    )
    eval_every: int = field(
        default=0, metadata=cli("optimizer steps between ID evaluations (0: only at the end)")
    )
    eval_size: int = field(default=200, metadata=cli("validation instances per evaluation"))
    eval_batch_size: int = field(default=32, metadata=cli("batch size of evaluation"))
    save_every: int = field(
        default=0,
        metadata=cli("optimizer steps between resumable checkpoints (0: only the final model)"),
    )
    keep_checkpoints: int = field(default=2, metadata=cli("how many checkpoints to keep"))
    log_every: int = field(default=10, metadata=cli("optimizer steps between log lines"))
    attention_supervision: str = field(
        default=_SUPERVISION_DEFAULTS.attention_supervision,
        metadata=cli(
            "pull these heads' attention toward the reference mask with an auxiliary loss: "
            "layer:L (every head of layer L; layer:0,2 for several), LAYER.HEAD,... (0.1,1.3) "
            "or top:N (the first N of --supervision-ranking)",
            group=SUPERVISION,
            shown="off",
            metavar="HEADS",
        ),
    )
    supervision_ranking: str = field(
        default=_SUPERVISION_DEFAULTS.supervision_ranking,
        metadata=cli(
            "the heads.json (or its folder) of `attentionspan heads` that top:N reads",
            group=SUPERVISION,
            metavar="PATH",
        ),
    )
    supervision_mask: str = field(
        default=_SUPERVISION_DEFAULTS.supervision_mask,
        metadata=cli(
            "the reference mask the heads are pulled to (generated data; a --dataset's rows "
            "bring their own 'reference' column)",
            group=SUPERVISION,
            choices=SUPERVISION_MASKS,
        ),
    )
    supervision_shift: int = field(
        default=_SUPERVISION_DEFAULTS.supervision_shift,
        metadata=cli(
            "supervise key ref+K instead of ref (a shallow model's lookup may read ref+1)",
            group=SUPERVISION,
            metavar="K",
        ),
    )
    supervision_loss: str = field(
        default=_SUPERVISION_DEFAULTS.supervision_loss,
        metadata=cli(
            "ce: cross-entropy between each target row and its mask normalised over its keys; "
            "mass: -log of the row's weight on the mask (mean over target rows and heads)",
            group=SUPERVISION,
            choices=SUPERVISION_LOSSES,
        ),
    )
    supervision_weight: float = field(
        default=_SUPERVISION_DEFAULTS.supervision_weight,
        metadata=cli(
            "total loss = LM loss + weight x supervision loss", group=SUPERVISION, metavar="W"
        ),
    )
    supervision_schedule: str = field(
        default=_SUPERVISION_DEFAULTS.supervision_schedule,
        metadata=cli(
            "the weight over the run: constant; linear (down to 0 at the last step); warmup "
            "(up from 0 over --supervision-warmup of the steps, then constant)",
            group=SUPERVISION,
            choices=SUPERVISION_SCHEDULES,
        ),
    )
    supervision_warmup: float = field(
        default=_SUPERVISION_DEFAULTS.supervision_warmup,
        metadata=cli(
            "share of the steps the warmup schedule rises over", group=SUPERVISION, metavar="R"
        ),
    )
    prompt: PromptConfig = field(default_factory=PromptConfig)
    scratch: ScratchConfig = field(default_factory=ScratchConfig)

    def __post_init__(self) -> None:
        if isinstance(self.prompt, dict):
            self.prompt = PromptConfig(**self.prompt)
        if isinstance(self.scratch, dict):
            self.scratch = ScratchConfig(**self.scratch)
        check_finite("", dataclasses.asdict(self))
        # (low, cap) of every integer option; the caps are harness.foundation.caps'
        integers = {
            "train_size": (1, MAX_INDEX),
            "epochs": (1, MAX_EPOCHS),
            "batch_size": (1, MAX_BATCH),
            "grad_accum": (1, MAX_BATCH),
            "eval_size": (1, MAX_INSTANCES),
            "eval_batch_size": (1, MAX_BATCH),
            "keep_checkpoints": (1, MAX_STEPS),
            "log_every": (1, MAX_STEPS),
            "max_steps": (0, MAX_STEPS),
            "eval_every": (0, MAX_STEPS),
            "save_every": (0, MAX_STEPS),
            "seed": (SEED_RANGE[0], SEED_RANGE[1]),
        }
        for name, (low, high) in integers.items():
            check_int(f"'{name}'", getattr(self, name), low, high)
        if not self.max_steps and self.train_size * self.epochs > MAX_TRAIN_INSTANCES:
            raise ValueError(
                f"'train_size' x 'epochs' ({self.train_size:,} x {self.epochs:,}) must be <= "
                f"{MAX_TRAIN_INSTANCES:,} (the cap) without 'max_steps'; give --max-steps to "
                "train on an endless stream"
            )
        for name in ("weight_decay", "max_grad_norm", "lr", "adam_eps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"'{name}' must be a number, got {value!r}")
            if value < 0 and name != "lr":  # lr: "> 0" below
                raise ValueError(f"'{name}' must be >= 0, got {value}")
        if not self.lr > 0:
            raise ValueError(f"'lr' must be > 0, got {self.lr}")
        for name in ("beta1", "beta2", "warmup_ratio"):
            if not 0 <= getattr(self, name) < 1:
                raise ValueError(f"'{name}' must be in [0, 1), got {getattr(self, name)}")
        if self.schedule not in SCHEDULES:
            raise ValueError(
                f"'schedule' must be one of {', '.join(SCHEDULES)}, got {self.schedule!r}"
            )
        if self.loss_on not in LOSS_ON:
            raise ValueError(f"'loss_on' must be one of {', '.join(LOSS_ON)}, got {self.loss_on!r}")
        if self.mixed_precision not in MIXED_PRECISION:
            raise ValueError(
                f"'mixed_precision' must be one of {', '.join(MIXED_PRECISION)}, "
                f"got {self.mixed_precision!r}"
            )
        for name in ("model", "output", "config"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise ValueError(
                    f"'{name}' must be a non-empty string, got {getattr(self, name)!r}"
                )
        check_output_dir("'output'", self.output)
        if self.curriculum and self.dataset:
            raise ValueError("'curriculum' needs generated data (--config), not --dataset")
        stages = parse_curriculum(self.curriculum, self.config)
        for _, overrides in stages:
            try:
                resolve_config(self.config, **overrides)
            except (TypeError, ValueError) as error:
                raise ValueError(f"'curriculum' for {self.config}: {error}") from None
        staged = sum(steps for steps, _ in stages)
        if self.max_steps and staged > self.max_steps:
            raise ValueError(
                f"'curriculum' stages take {staged} steps, more than 'max_steps' "
                f"{self.max_steps}: the steps past {self.max_steps} would never run"
            )
        supervision = SupervisionOptions.of(self)
        if self.dataset and supervision.supervision_mask != _SUPERVISION_DEFAULTS.supervision_mask:
            raise ValueError(
                "'supervision_mask' picks one of the generator's masks (--config); a --dataset's "
                "rows are supervised on their own 'reference' column: leave it at "
                f"{_SUPERVISION_DEFAULTS.supervision_mask}"
            )

    @property
    def supervision(self) -> SupervisionOptions:
        return SupervisionOptions.of(self)

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
def parse_curriculum(text: str, config: str | None = None) -> list[tuple[int, dict[str, Any]]]:
    """`"300:min_table_size=1,max_table_size=1;300:max_table_size=2"` -> [(300, {...}), ...]:
    steps and parameter overrides of each stage. With `config`, each value becomes its
    field's type as `--param` makes it (`sorted_keys=true` a bool, `output_alphabet=0123`
    text); without, an int where it reads as one, else text."""
    if not text.strip():
        return []
    parse = type(resolve_config(config)).parse_value if config is not None else _int_or_text
    stages = []
    for part in filter(None, (p.strip() for p in text.split(";"))):
        steps, sep, pairs = part.partition(":")
        overrides: dict[str, Any] = {}
        for pair in filter(None, (p.strip() for p in pairs.split(","))):
            key, eq, value = pair.partition("=")
            if not eq or not key:
                raise ValueError(f"'curriculum' expects STEPS:KEY=VALUE,..., got {part!r}")
            try:
                overrides[key] = parse(key, value)
            except ValueError as error:
                raise ValueError(f"'curriculum' for {config}: {error}") from None
        steps = steps.strip()
        # isdigit() is true of superscripts ("³"), which int() refuses: ASCII digits only
        if not sep or not (steps.isascii() and steps.isdigit()) or int(steps) < 1 or not overrides:
            raise ValueError(f"'curriculum' expects STEPS:KEY=VALUE,... (STEPS >= 1), got {part!r}")
        stages.append((int(steps), overrides))
    return stages


def _int_or_text(_key: str, value: str) -> int | str:
    try:
        return int(value)
    except ValueError:
        return value


def curriculum_sources(config: TrainConfig) -> list[tuple[int, GeneratorSource]]:
    """(last step, endless source) of each curriculum stage, in order."""
    out, end = [], 0
    for steps, overrides in parse_curriculum(config.curriculum, config.config):
        end += steps
        task = resolve_config(config.config, **overrides, **mask_override(config))
        out.append((end, GeneratorSource(task, seed=config.seed, split=TRAIN_SPLIT)))
    return out


def batch_instances(run: Run, indices: range) -> list:
    """The instances of one micro-batch: the curriculum stage's while one lasts (data
    indices continue across stages, so a resumed run draws the same rows)."""
    for end, source in run.curriculum:
        if run.state.step < end:
            return [source[i] for i in indices]
    return [run.source[i % len(run.source)] for i in indices]


def make_source(config: TrainConfig):
    if config.dataset:
        return DatasetSource.load(config.dataset, config.dataset_config, config.dataset_split)
    mask = mask_override(config)
    task = resolve_config(config.config, **mask) if mask else config.config
    return GeneratorSource(task, seed=config.seed, split=TRAIN_SPLIT, size=config.train_size)


def mask_override(config: TrainConfig) -> dict[str, str]:
    """`{"mask": ...}` of the supervised mask, for generated data under supervision: the
    training data's references are then that mask's (a task's mask never changes its
    prompts or targets, so the rows are those of an unsupervised run)."""
    if not config.supervision.enabled:
        return {}
    return {"mask": config.supervision.supervision_mask}


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


def is_out_of_memory(error: BaseException) -> bool:
    import torch

    if isinstance(error, torch.OutOfMemoryError):
        return True
    text = str(error)
    return "out of memory" in text or "can't allocate memory" in text


def load_ranking(config: TrainConfig):
    """The order of the head ranking `top:N` reads (best first), None for other head
    choices; ValueError naming 'supervision_ranking' for a missing or foreign file."""
    if not config.supervision.enabled or config.supervision.heads.kind != "top":
        return None
    from harness.attention.heads import HEADS_FILE, HeadRanking

    path = Path(config.supervision_ranking)
    shown = path / HEADS_FILE if path.is_dir() else path
    if not shown.is_file():
        raise ValueError(
            f"'supervision_ranking' {str(shown)!r} does not exist (a heads.json from "
            "`attentionspan heads`)"
        )
    try:
        ranking = HeadRanking.load(path)
    except (OSError, ValueError, KeyError, TypeError, IndexError) as error:
        raise ValueError(
            f"'supervision_ranking' {str(shown)!r} is not a head ranking "
            f"({type(error).__name__}: {str(error)[:100]})"
        ) from None
    return ranking


def supervised_heads(config: TrainConfig, model, ranking=None):
    """bool [layers, heads] of the heads `--attention-supervision` names on `model`, or
    None when supervision is off; ValueError naming the option for a head the model lacks."""
    import torch

    if not config.supervision.enabled:
        return None
    layers, heads = model_shape(model)
    order = None
    if ranking is not None:
        if (ranking.num_layers, ranking.num_heads) != (layers, heads):
            raise ValueError(
                f"'supervision_ranking' {config.supervision_ranking!r} ranks the heads of a "
                f"model of [layers, heads] = [{ranking.num_layers}, {ranking.num_heads}], "
                f"this one has [{layers}, {heads}]"
            )
        order = ranking.order
    chosen = torch.zeros(layers, heads, dtype=torch.bool)
    for layer, head in config.supervision.heads.resolve(layers, heads, order):
        chosen[layer, head] = True
    return chosen


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


def save_checkpoint(run: Run, name: str, with_optimizer: bool = True, **extra) -> Path:
    """Write `output/name` atomically and keep the newest `keep_checkpoints` checkpoints."""
    training_state = (
        {"optimizer": optimizer_state(run), "scheduler": run.scheduler.state_dict()}
        if with_optimizer
        else None
    )
    if training_state is not None and run.heads is not None:
        # The open log window's supervision loss, as TrainState keeps its LM loss: a
        # resumed run logs the mean the uninterrupted one does.
        training_state[SUPERVISION_WINDOW] = {
            "loss": run.window.supervision,
            "steps": run.window.supervised_steps,
        }
    run.state.elapsed_s = time.perf_counter() - run.started
    run.state.window_loss = run.window.loss
    run.state.window_steps = run.window.steps
    target = save_folder(
        run.accelerator,
        run.model,
        run.tokenizer,
        run.output / name,
        run_info(run.config, run.state, **extra),
        training_state,
    )
    if run.main:
        prune_checkpoints(run.output, run.config.keep_checkpoints)
    return target


def load_resume(output: Path) -> tuple[TrainConfig, TrainState, Path, dict[str, Any]]:
    """(config, state, checkpoint folder, training state) of the latest checkpoint, its
    parts checked against each other and against the run folder before any model loads."""
    checkpoint = latest_checkpoint(output)
    if checkpoint is None:
        raise ValueError(
            f"--resume: no checkpoint to resume in {str(output)!r} (checkpoints are "
            f"written on Ctrl-C / SIGTERM and every --save-every N steps)"
        )
    info = read_run_file(checkpoint)
    training_state = load_training_state(checkpoint)
    if isinstance(info.get("state"), dict):  # a bad value is named before any comparison
        section(info, "state", TrainState, checkpoint)
    check_checkpoint(checkpoint, info, training_state)
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
    check_foreign(checkpoint, config, output / TRAIN_CONFIG_FILE)
    check_log(output / LOG_FILE)  # before any model loads
    state = section(info, "state", TrainState, checkpoint)
    scheduler = training_state["scheduler"]
    if isinstance(scheduler, dict) and scheduler.get("last_epoch", state.step) != state.step:
        raise ValueError(
            f"{checkpoint / TRAINING_STATE_FILE}: the scheduler stands at step "
            f"{scheduler.get('last_epoch')!r}, the run file at {state.step}: edited, or parts "
            "of different runs"
        )
    return config, state, checkpoint, training_state


def check_foreign(checkpoint: Path, config: TrainConfig, run_config: Path) -> None:
    """ValueError when the checkpoint's options are not the run folder's (a checkpoint of
    another run copied in). A folder without a readable train_config.json is not judged:
    the checkpoint's own run file is then all there is."""
    try:
        folder = TrainConfig.from_dict(json.loads(run_config.read_text()))
    except (OSError, ValueError, TypeError):
        return
    ours, theirs = flat_options(config), flat_options(folder)
    differ = [k for k in ours if k != "output" and ours[k] != theirs.get(k)]
    if differ:
        key = differ[0]
        raise ValueError(
            f"{checkpoint} is not a checkpoint of this run: its {option(key)} is "
            f"{ours[key]!r}, the run's ({run_config}) {theirs.get(key)!r}; resume the run "
            "it came from, or start a new --output"
        )


def flat_options(config: TrainConfig) -> dict[str, Any]:
    """Every option by its command-line name (`lr`, `instruction`, `scratch_hidden_size`)."""
    values = {k: v for k, v in config.to_dict().items() if k not in NESTED}
    values.update(dataclasses.asdict(config.prompt))
    values.update({f"scratch_{k}": v for k, v in dataclasses.asdict(config.scratch).items()})
    return values


def resume_conflicts(saved: TrainConfig, requested: dict[str, Any]) -> list[str]:
    """`--flag value (saved: value)` for each requested option that differs from the run.

    A resumed run continues the saved one exactly (same data order, schedule and model), so
    a different --lr or --config cannot apply to it; silently ignoring them was the bug.
    """
    kept = flat_options(saved)
    return [
        f"{option(name)} {value!r} (saved: {kept[name]!r})"
        for name, value in requested.items()
        if name in kept and name not in RESUME_FREE and value != kept[name]
    ]


def requested_options(config: TrainConfig) -> dict[str, Any]:
    """The options of `config` that are not the defaults: what an API caller asked for."""
    default = flat_options(TrainConfig())
    return {k: v for k, v in flat_options(config).items() if v != default.get(k)}


# --- the loop ---------------------------------------------------------------------------
@dataclass
class Run:
    """What the loop works on, made once by `set_up`."""

    config: TrainConfig
    state: TrainState
    output: Path
    accelerator: Any
    model: Any
    tokenizer: Any
    char_tok: CharTokenizer
    source: Any
    optimizer: Any
    scheduler: Any
    precision: str
    micro_batches: Iterator[range]
    bar: Any
    lock: RunLock | None
    started: float  # perf_counter at step 0 of the whole run (elapsed time carried over)
    window: Window | None = None  # the log window; saved in checkpoints (TrainState)
    curriculum: list = field(default_factory=list)  # (last step, source) per stage
    cpu_start: float = field(default_factory=time.process_time)  # this invocation's CPU time
    resume_with: str = ""  # the command that continues the run (train's own, or reproduce)
    heads: Any = None  # bool [layers, heads] supervised (--attention-supervision), or None
    # the last step's supervision loss (None: not supervised) and its weight, for the log
    step_supervision: float | None = None
    step_weight: float = 0.0
    parameter_names: list[str] = field(default_factory=list)  # the optimizer's, in its order

    @property
    def main(self) -> bool:
        return self.accelerator.is_main_process

    @functools.cached_property
    def bare(self):
        """The model inside accelerate's DDP/FSDP wrapper (prepared once: unwrapped once,
        not at every step)."""
        return self.accelerator.unwrap_model(self.model)

    @property
    def world(self) -> int:
        return self.accelerator.num_processes

    @property
    def per_step(self) -> int:
        return self.config.batch_size * self.config.grad_accum * self.world

    def supervision_weight(self) -> float:
        """The weight of the supervision loss in the next step (0 when off)."""
        if self.heads is None:
            return 0.0
        return self.config.supervision.weight_at(self.state.step, self.state.total_steps)


@dataclass
class Window:
    """Loss and tokens since the last log line."""

    loss: float = 0.0
    tokens: int = 0
    steps: int = 0
    start: float = field(default_factory=time.perf_counter)
    supervision: float = 0.0  # supervision loss summed over processes and supervised steps
    supervised_steps: int = 0


class LossNotFinite(ValueError):
    """The loss (or the gradient norm) became inf or nan; the step was not taken."""


def set_up(
    config: TrainConfig, resume: bool, progress: bool, requested: dict[str, Any] | None
) -> Run:
    """Lock the run folder, load (or resume) everything, check what can be checked before
    the first step."""
    from tqdm.auto import tqdm

    accelerator = make_accelerator()
    output = Path(config.output)
    if accelerator.is_main_process:
        check_output_folder("'output'", output)  # read-only, full: refused before the lock
    lock = RunLock(output).acquire() if accelerator.is_main_process else None
    try:
        state, checkpoint, training_state = TrainState(run_id=uuid.uuid4().hex), None, None
        if resume:
            saved, state, checkpoint, training_state = load_resume(output)
            conflicts = resume_conflicts(
                saved, requested_options(config) if requested is None else requested
            )
            if conflicts:
                raise ValueError(
                    "--resume continues the saved run unchanged; these options differ from "
                    f"it: {'; '.join(conflicts)} (drop them, or start a new --output)"
                )
            config = saved
        source = make_source(config)  # a bad preset fails before the model is loaded
        ranking = load_ranking(config)  # as a missing heads.json does
        # the characters of the first rows (and of a dataset's rows, checked as they are
        # read) and of each curriculum stage: checked against the model below
        text = source_text(source, config.prompt) + "".join(
            source_text(stage, config.prompt) for _, stage in curriculum_sources(config)
        )
        model, tokenizer = load_model_checked(
            str(checkpoint) if checkpoint else config.model, scratch=config.scratch
        )
        char_tok = CharTokenizer(tokenizer)
        try:
            char_tok.check_text(text)  # a character the tokenizer lacks: fail now
        except ValueError as error:
            if config.model != "scratch" or checkpoint is not None:
                raise
            raise ValueError(f"--scratch-charset: {error}") from None
        try:  # an id past the model's embeddings: an IndexError in the first step
            check_vocabulary(model, char_tok, text, config.prompt)
        except ValueError as error:
            raise ValueError(f"model {config.model!r}: {error}") from None
        if not config.dataset:
            try:
                check_context(model, char_tok, config.config, config.prompt)
                # each curriculum stage's texts too: its lengths are its own
                for k, (_, overrides) in enumerate(
                    parse_curriculum(config.curriculum, config.config), 1
                ):
                    stage = resolve_config(config.config, **overrides)
                    try:
                        check_context(model, char_tok, stage, config.prompt)
                    except ValueError as error:
                        shown = ",".join(f"{key}={value}" for key, value in overrides.items())
                        raise ValueError(f"'curriculum' stage {k} ({shown}): {error}") from None
            except ValueError as error:
                raise ValueError(f"model {config.model!r}: {error}") from None
        heads = supervised_heads(config, model, ranking)
        if heads is not None and checkpoint is not None:
            check_supervised_heads(output / LOG_FILE, heads)
        world = accelerator.num_processes
        per_step = config.batch_size * config.grad_accum * world
        state.total_steps = config.max_steps or math.ceil(len(source) * config.epochs / per_step)
        optimizer = make_optimizer(model, config)
        scheduler = make_scheduler(optimizer, config, state.total_steps)
        if checkpoint is not None:
            state_file = checkpoint / TRAINING_STATE_FILE
            check_optimizer_state(state_file, training_state["optimizer"], optimizer)
            try:
                optimizer.load_state_dict(training_state["optimizer"])
                scheduler.load_state_dict(training_state["scheduler"])
            except (KeyError, TypeError, ValueError, RuntimeError, AttributeError) as error:
                first = str(error).strip().splitlines()[0] if str(error).strip() else ""
                raise ValueError(
                    f"{state_file}: the optimizer or scheduler state does not fit this run "
                    f"({type(error).__name__}: {first[:200]})"
                ) from None
        names, copies = parameter_names(model, optimizer), tied_copies(model)
        model, optimizer = accelerator.prepare(model, optimizer)
        if is_fsdp(accelerator):
            # the gathered state dict holds a tied weight twice, in two tensors, which
            # save_pretrained then keeps: leave the copy out, as a DDP run's file does
            bare = accelerator.unwrap_model(model)
            bare._keys_to_ignore_on_save = [*(bare._keys_to_ignore_on_save or []), *copies]
            if checkpoint is not None:
                load_sharded_optimizer_state(model, optimizer, training_state["optimizer"], names)
            if accelerator.is_main_process:  # said, as accelerate falls back to DDP silently
                version = accelerator.state.fsdp_plugin.fsdp_version
                print(
                    f"FSDP{version}: the model is sharded over {world} processes", file=sys.stderr
                )
        model.train()
        if accelerator.is_main_process:
            output.mkdir(parents=True, exist_ok=True)
            atomic_write_text(
                output / TRAIN_CONFIG_FILE, json.dumps(config.to_dict(), indent=2) + "\n"
            )
            trim_log(output / LOG_FILE, state.step)
            if heads is not None and state.step == 0:
                # the heads top:N found in its ranking, as the run's first record
                record = {"step": 0, "supervised_heads": heads.nonzero().tolist()}
                append_line(output / LOG_FILE, json.dumps(record) + "\n")
    except BaseException:
        if lock is not None:
            lock.discard()  # a refused run leaves no folder behind (nor a lock file)
        raise
    bar = tqdm(
        total=state.total_steps,
        initial=state.step,
        disable=not (accelerator.is_main_process and progress),
        desc="train",
        dynamic_ncols=True,
    )
    return Run(
        config=config,
        state=state,
        output=output,
        accelerator=accelerator,
        model=model,
        tokenizer=tokenizer,
        char_tok=char_tok,
        source=source,
        optimizer=optimizer,
        scheduler=scheduler,
        precision=resolve_mixed_precision(config.mixed_precision, model),
        micro_batches=training_indices(
            state.next_index, config.batch_size, world, accelerator.process_index
        ),
        bar=bar,
        lock=lock,
        started=time.perf_counter() - state.elapsed_s,
        window=Window(
            loss=state.window_loss,
            steps=state.window_steps,
            **saved_supervision_window(training_state),
        ),
        curriculum=curriculum_sources(config),
        heads=heads,
        parameter_names=names,
    )


def saved_supervision_window(training_state: dict[str, Any] | None) -> dict[str, Any]:
    """The supervision part of the log window a checkpoint saved (none: a fresh window)."""
    saved = (training_state or {}).get(SUPERVISION_WINDOW)
    if not isinstance(saved, dict):
        return {}
    return {
        "supervision": float(saved.get("loss", 0.0)),
        "supervised_steps": int(saved.get("steps", 0)),
    }


def check_supervised_heads(path: Path, heads) -> None:
    """On a resume, refuse heads other than those the log's first record names (top:N
    reads a heads.json that may have changed since: the run would go on supervising other
    heads than it started with)."""
    pairs = heads.nonzero().tolist()
    for line in path.read_text().splitlines() if path.is_file() else []:
        try:
            record = json.loads(line)
        except ValueError:  # a line cut short: trim_log drops it
            continue
        if isinstance(record, dict) and record.get("supervised_heads", pairs) != pairs:
            raise ValueError(
                f"--resume: --attention-supervision now selects the heads {pairs}, the run "
                f"was trained on {record['supervised_heads']} ({path}): restore the "
                "--supervision-ranking file it read, or start a new --output"
            )


def trim_log(path: Path, step: int) -> None:
    """Drop log lines past `step`: a resumed run logs those steps again (a run killed
    after logging step 30 but checkpointed at 20 would otherwise repeat 21-30)."""
    if not path.is_file():
        return
    lines = path.read_text().splitlines(keepends=True)
    kept = [line for line in lines if _logged_step(line) <= step]
    if len(kept) != len(lines):
        atomic_write_text(path, "".join(kept))


def check_log(path: Path) -> None:
    """ValueError naming the line when a log line that is not a JSON record has whole lines
    after it: only the last line can be cut short (a full disk, a kill mid-write), and
    trim_log drops that one; a broken line before others was edited or corrupted, and
    dropping it silently lost a logged step."""
    if not path.is_file():
        return
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    for number, line in enumerate(lines[:-1], 1):
        if _logged_step(line) == math.inf:
            raise ValueError(
                f"--resume: {path} line {number} is not a JSON record, and whole lines follow "
                "it (edited or corrupt, not cut short by a crash); restore it, or start a new "
                "--output"
            )


def _logged_step(line: str) -> float:
    """The step of a log line; a line cut short (a full disk, a crash mid-write) is
    past every step, so it is dropped."""
    try:
        return json.loads(line).get("step", 0)
    except (ValueError, AttributeError):
        return math.inf


def training_batch(
    config: TrainConfig, char_tok: CharTokenizer, instances: list, masks: bool = False
) -> dict:
    """The padded batch of `instances`; with `loss_on="all"` every real token is a label;
    `masks`: with the reference mask ([batch, L, L], for attention supervision).

    Flip-flop's mid-program reads show the register's bit, so each is the task on a prefix:
    trained on the whole text the model sees several answers per program instead of one
    (how Liu et al. 2023 train flip-flop language models)."""
    batch = collate(
        [config.prompt.encode(char_tok, x) for x in instances],
        char_tok.pad_id,
        padding_side="right",
        masks=masks,
    )
    if config.loss_on == "all":
        padding = batch["attention_mask"] == 0
        batch["labels"] = batch["input_ids"].masked_fill(padding, IGNORE_INDEX)
    return batch


def train_step(run: Run, stop_requested: bool) -> tuple[float, int, bool]:
    """One optimizer step: (loss summed over processes, tokens of all processes, whether
    any process asked to stop). Raises LossNotFinite before stepping on inf / nan."""
    import torch

    config, accelerator, model = run.config, run.accelerator, run.model
    loss_sum = torch.zeros((), dtype=torch.float32)
    supervision_sum = torch.zeros((), dtype=torch.float32)
    tokens = 0
    # A step of weight 0 (a warmup's first, or --supervision-weight 0) is the plain step:
    # the model's own attention, nothing captured, exactly the unsupervised run.
    weight = run.supervision_weight()
    supervised = weight > 0
    try:
        for micro in range(config.grad_accum):
            instances = batch_instances(run, next(run.micro_batches))
            batch = training_batch(config, run.char_tok, instances, masks=supervised)
            tokens += int(batch["attention_mask"].sum())
            inputs = {
                k: batch[k].to(accelerator.device)
                for k in ("input_ids", "attention_mask", "position_ids", "labels")
            }
            last = micro == config.grad_accum - 1
            with contextlib.nullcontext() if last else accelerator.no_sync(model):
                if supervised:
                    loss, supervision = supervised_forward(run, inputs, batch)
                    loss, supervision = loss / config.grad_accum, supervision / config.grad_accum
                    accelerator.backward(loss + weight * supervision)
                    supervision_sum += supervision.detach().float().cpu()
                else:
                    with autocast(run.precision, accelerator.device):
                        loss = lm_loss(model, run.bare, inputs) / config.grad_accum
                    accelerator.backward(loss)
            loss_sum += loss.detach().float().cpu()
        # One reduction per step carries the loss, the tokens and a stop request, so every
        # process stops (and checkpoints) at the same step.
        values = [float(loss_sum), float(tokens), float(stop_requested), float(supervision_sum)]
        totals = torch.tensor(values)
        if run.world > 1:
            totals = accelerator.reduce(totals.to(accelerator.device), "sum").cpu()
        step_loss = float(totals[0])
        if not math.isfinite(step_loss):
            raise LossNotFinite(f"the training loss became {step_loss}")
        if not math.isfinite(float(totals[3])):
            raise LossNotFinite(f"the supervision loss became {float(totals[3])}")
        if config.max_grad_norm > 0:
            norm = float(accelerator.clip_grad_norm_(model.parameters(), config.max_grad_norm))
            if not math.isfinite(norm):
                raise LossNotFinite(f"the gradient norm became {norm}")
        run.optimizer.step()
        run.scheduler.step()
        run.optimizer.zero_grad(set_to_none=True)
    except RuntimeError as error:
        if is_out_of_memory(error):
            smaller = max(1, config.batch_size // 2)
            raise ValueError(
                f"out of memory at --batch-size {config.batch_size}; try --batch-size "
                f"{smaller} --grad-accum {config.grad_accum * 2} (same effective batch)"
            ) from None
        raise
    run.state.step += 1
    run.state.next_index += run.per_step
    run.state.tokens += int(totals[1])
    run.step_supervision = float(totals[3]) if supervised else None
    run.step_weight = weight
    run.bar.update(1)
    return step_loss, int(totals[1]), bool(totals[2])


def supervised_forward(run: Run, inputs: dict, batch: dict):
    """(LM loss, supervision loss) of one micro-batch, from one forward: the supervised
    heads' weights are read inside the capture attention function, their graph kept."""
    from harness.engine.positions import causal_valid, shift_mask
    from harness.engine.supervision import Supervision, supervise

    options = run.config.supervision
    # ref+k, only where a query may look (a key after the query, or padding, is no cell)
    reference = causal_valid(
        shift_mask(batch["reference_mask"], options.supervision_shift), batch["attention_mask"]
    )
    plan = Supervision(run.heads, reference, loss=options.supervision_loss)
    with autocast(run.precision, run.accelerator.device):
        with supervise(run.bare, plan) as recorder:  # capture hooks the model inside DDP
            loss = lm_loss(run.model, run.bare, inputs)
    return loss, recorder.loss().to(loss.device)


def log_step(run: Run, window: Window) -> None:
    seconds = time.perf_counter() - window.start
    tokens_per_s = window.tokens / max(seconds, 1e-9)
    mean_loss = window.loss / (window.steps * run.world)
    run.state.elapsed_s = time.perf_counter() - run.started
    run.bar.set_postfix(loss=f"{mean_loss:.4f}", tok_s=f"{tokens_per_s:.0f}")
    supervision = {}
    if run.heads is not None:
        # mean over the window's supervised steps (a step of weight 0 computes none)
        steps = window.supervised_steps
        supervision = {
            "supervision_loss": window.supervision / (steps * run.world) if steps else None,
            "supervision_weight": run.step_weight,
        }
    append_log(
        run,
        {
            "step": run.state.step,
            "loss": mean_loss,
            **supervision,
            "lr": run.scheduler.get_last_lr()[0],
            "tokens_per_s": tokens_per_s,
            "next_index": run.state.next_index,
            "elapsed_s": round(run.state.elapsed_s, 2),
            "tokens": run.state.tokens,
            # CPU time of this invocation's loop: robust on a shared machine
            "cpu_s": round(time.process_time() - run.cpu_start, 3),
        },
    )


def append_log(run: Run, record: dict[str, Any]) -> None:
    if run.main:
        append_line(run.output / LOG_FILE, json.dumps(record) + "\n")


def evaluate_validation(run: Run) -> dict[str, Any]:
    """Scores on the first `eval_size` rows of the config's validation split."""
    results, _ = evaluate_model(
        evaluation_model(run),
        run.tokenizer,
        [run.config.config],
        run.config.eval_size,
        seed=run.config.seed,
        split=VALIDATION_SPLIT,
        batch_size=run.config.eval_batch_size,
        prompt=run.config.prompt,
        mixed_precision=run.precision,
        accelerator=run.accelerator,
    )
    return {k: results[run.config.config][k] for k in EVAL_KEYS}


def log_evaluation(run: Run, scores: dict[str, Any]) -> None:
    if run.main:
        run.bar.write(
            f"step {run.state.step}: ID exact match {scores['exact_match']:.3f}, "
            f"TF token acc {scores['tf_token_acc']:.3f}"
        )
    append_log(run, {"step": run.state.step, "eval": scores})


def due(step: int, every: int) -> bool:
    return bool(every) and step % every == 0


@contextlib.contextmanager
def stop_on_signals():
    """SIGINT / SIGTERM ask the loop to stop after the current step (it then saves a
    checkpoint); a second Ctrl-C stops at once. Outside the main thread, nothing changes."""
    import signal
    import threading

    flag = {"signal": None}
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return

    def ask(signum, frame):
        if flag["signal"] is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        flag["signal"] = signum

    previous = {s: signal.signal(s, ask) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield flag
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def stop_with_checkpoint(run: Run, signum: int | None = None) -> None:
    """Save where the run stands and end it as an interruption: exit status 130 for Ctrl-C,
    143 when `signum` is SIGTERM (`harness.foundation.outputs.Terminated`)."""
    import signal

    name = f"{CHECKPOINT_PREFIX}{run.state.step}"
    if not due(run.state.step, run.config.save_every):  # else it was saved just now
        save_checkpoint(run, name)
    run.bar.close()  # before the message, so the bar does not print after it
    # no resume_with: a run that replaces an earlier one, which the interruption puts back
    # (the checkpoint is saved all the same: every process of a launch must take part)
    kept = f": saved {run.output / name}; continue with: {run.resume_with}"
    if run.main:
        print(
            f"interrupted at step {run.state.step} of {run.state.total_steps}"
            + (kept if run.resume_with else ""),
            file=sys.stderr,
        )
    raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def stop_on_bad_loss(run: Run, error: LossNotFinite) -> None:
    last = latest_checkpoint(run.output)
    kept = f"the last good checkpoint is {last}" if last else "no checkpoint was saved"
    raise ValueError(
        f"{error} at step {run.state.step + 1}; the run stopped without taking that step and "
        f"saved nothing new ({kept}); try a lower --lr or a --max-grad-norm"
    ) from None


def stopped_by_write_failure(run: Run) -> str:
    """What is left of a run a write failure stopped (a full disk): nothing, when it had no
    checkpoint yet (`RunLock.discard` removes what it wrote), else how to continue."""
    if run.lock is not None and run.lock.discard():
        return f"nothing of the run was kept in {run.output} (it had no checkpoint yet)"
    last = latest_checkpoint(run.output)
    if last is None or not run.resume_with:
        return "the run stopped"
    return (
        f"the run stopped at step {run.state.step}; its latest checkpoint is {last}: make "
        f"room, then continue with: {run.resume_with}"
    )


def finish(run: Run) -> Path:
    """The final evaluation on the validation split, and the final model."""
    try:
        scores = evaluate_validation(run)
    except KeyboardInterrupt:  # Ctrl-C during the last evaluation: keep the trained steps
        stop_with_checkpoint(run)
        raise
    run.state.elapsed_s = time.perf_counter() - run.started
    if run.main:
        print(
            f"final ID ({run.config.config}, {run.config.eval_size} validation instances): "
            f"exact match {scores['exact_match']:.3f}, TF token acc "
            f"{scores['tf_token_acc']:.3f}; {run.state.step} steps in {run.state.elapsed_s:.0f} s",
            file=sys.stderr,
        )
    return save_checkpoint(run, FINAL, with_optimizer=False, final_eval=scores)


def train(
    config: TrainConfig,
    resume: bool = False,
    stop_after: int | None = None,
    progress: bool = True,
    requested: dict[str, Any] | None = None,
    resume_with: str | None = None,
) -> Path:
    """Run (or resume) training; returns the folder of the final model.

    `stop_after` ends the run after that many optimizer steps of this invocation without
    saving, as `kill -9` would (tests use it to check that resuming gives the same run).
    `requested`: the options the user gave, checked against a resumed run (default: the
    fields of `config` that are not the defaults). `resume_with`: the command an
    interruption or a full disk tells the user to continue with (default: `attentionspan
    train --output OUT --resume`; reproduce --quick's is reproduce itself; "": none, as for
    a run that replaces an earlier one, which an interruption puts back).
    """
    if resume and (final := finished_run(Path(config.output))) is not None:
        # A no-op, not a refusal: `train --resume` until it succeeds is then safe to rerun,
        # and a leftover checkpoint never retrains (and overwrites) a finished model.
        print(
            f"{config.output} is finished ({final} is written): nothing to resume; to train "
            "further, start a new --output from --model " + str(final),
            file=sys.stderr,
        )
        return final
    run = set_up(config, resume, progress, requested)
    if resume_with is None:  # "": no way to continue it (it replaces an earlier run)
        resume_with = f"attentionspan train --output {run.output} --resume"
    run.resume_with = resume_with
    try:
        with writing(run.output), stop_on_signals() as stop:
            steps_this_run = 0
            while run.state.step < run.state.total_steps:
                try:
                    loss, tokens, stopping = train_step(run, stop["signal"] is not None)
                except LossNotFinite as error:
                    stop_on_bad_loss(run, error)
                window = run.window
                window.loss, window.tokens = window.loss + loss, window.tokens + tokens
                window.steps, steps_this_run = window.steps + 1, steps_this_run + 1
                if run.step_supervision is not None:
                    window.supervision += run.step_supervision
                    window.supervised_steps += 1
                step, last = run.state.step, run.state.step == run.state.total_steps
                if due(step, run.config.log_every) or last:
                    log_step(run, window)
                    run.window = Window()
                if due(step, run.config.eval_every) and not last:
                    log_evaluation(run, evaluate_validation(run))
                    run.window.start = time.perf_counter()  # evaluation is not training time
                if due(step, run.config.save_every):
                    save_checkpoint(run, f"{CHECKPOINT_PREFIX}{step}")
                if stopping and not last:
                    stop_with_checkpoint(run, stop["signal"])
                if stop_after is not None and steps_this_run >= stop_after and not last:
                    return run.output
        if stop["signal"] is not None:
            # Ctrl-C in the last step (or just after it): the loop no longer looks at the
            # flag, and the run went on to write its final model with exit 0 (the lost
            # SIGINT of supervision --jobs). An interruption, saved as any other.
            stop_with_checkpoint(run, stop["signal"])
        run.bar.close()
        return finish(run)
    except WriteError as error:
        raise WriteError(f"{error}; {stopped_by_write_failure(run)}") from None
    finally:
        run.bar.close()
        if run.lock is not None:
            run.lock.release()
