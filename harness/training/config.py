"""`TrainConfig`: every option of `attentionspan train`, checked as it is made, and the
curriculum's text form.

    attentionspan train --model scratch --config reversal_id --output runs/rev --lr 1e-3

A resumed run compares the options it is given with the saved run's by their command-line
names (`flat_options`, `resume_conflicts`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from attentionspan_datasets.generation import DEFAULT_SEED, MAX_INDEX, SEED_RANGE, resolve_config
from harness.foundation.caps import (
    MAX_BATCH,
    MAX_EPOCHS,
    MAX_INSTANCES,
    MAX_STEPS,
    MAX_TRAIN_INSTANCES,
    check_int,
    check_output_dir,
)
from harness.foundation.data import PromptConfig
from harness.foundation.models import ScratchConfig
from harness.foundation.options import check_finite, cli, option
from harness.foundation.supervision_options import LOSSES as SUPERVISION_LOSSES
from harness.foundation.supervision_options import MASKS as SUPERVISION_MASKS
from harness.foundation.supervision_options import SCHEDULES as SUPERVISION_SCHEDULES
from harness.foundation.supervision_options import SupervisionOptions

SCHEDULES = ("linear", "cosine", "constant")

LOSS_ON = ("target", "all")

MIXED_PRECISION = ("auto", "no", "bf16")

# The nested sections of TrainConfig (saved as their own sections of the run file).
NESTED = ("prompt", "scratch")

# Options a resume may change: they do not change the run.
RESUME_FREE = ("output",)

SUPERVISION = "attention supervision"  # the help's group of the --supervision-* options

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
