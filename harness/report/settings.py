"""The options of `attentionspan reproduce` (saved as OUT/settings.json) and their checks.

    cfg = ReproduceConfig(model="runs/rev/final", config="reversal", output="runs/rev/repro")

Kept apart from the pipeline (`harness.report.reproduce`) so that the report writer and the
command read the settings without importing the pipeline.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from attentionspan_datasets.generation import DEFAULT_SEED
from harness.attention.sweep import DEFAULT_STRENGTHS, MODES, SELECT_METRICS

# each learns in minutes from scratch on a CPU; addition's reference is not the answer
QUICK_TASKS = ("reversal", "successor", "addition")
# --quick's training: the TrainConfig options of every task's tiny scratch Llama (reversal
# and successor reach ID exact match 1.0 with these alone), then the task's own recipe over
# them: task -> options, `scratch` holding ScratchConfig fields. A recipe belongs here once
# it reaches ID exact match >= 0.9 on the test split in minutes of one CPU thread; none has
# yet for value assignment, flip-flop or T6 (docs/usage_analysis.md, "Recipes for the tasks
# whose reference is not the answer", lists what was tried).
QUICK_TRAIN = {"max_steps": 600, "batch_size": 32, "lr": 2e-3, "eval_size": 50, "log_every": 20}
QUICK_RECIPES: dict[str, dict[str, Any]] = {
    # shallow and wide: 4 x 128 at lr 2e-3 stalled at ID exact 0.035 after 5,000 steps
    "addition": {
        "max_steps": 3000,
        "batch_size": 64,
        "lr": 1e-3,
        "weight_decay": 0.01,
        "warmup_ratio": 0.02,
        "scratch": {"num_layers": 2, "hidden_size": 256, "num_heads": 8, "intermediate_size": 1024},
    },
}
DEVICES = ("auto", "cpu", "cuda")
# --quick: sizes that fit the whole story (a tiny model per quick task trained from nothing,
# then every stage) in about 10 minutes of one CPU thread; options given explicitly win.
QUICK_SIZES = {
    "num_heads": 30,
    "num_validation": 48,
    "num_test": 64,
    "num_attention": 32,
    "strengths": [0.5, 1.0, 2.0],
    "counts": [1, 2, 4],
    "control_seeds": [0, 1],
    # Tiny models gain little from a second thread, and on a shared 2-core machine two
    # threads per process ran a forward 9x slower than one (docs/usage_analysis.md).
    "threads": 1,
}
# --quick's OOD streams where the preset is long: reversal strings of 11-20 characters (the
# effect is visible there; at 30-50 characters a tiny model gets almost nothing right).
QUICK_OOD = {"reversal": {"max_length": 20}}
SETTINGS_FILE = "settings.json"
REPORT_FILE = "report.md"


@dataclass
class ReproduceConfig:
    """Options of one reproduce run (saved as OUT/settings.json)."""

    output: str = "runs/reproduce"
    model: str | None = None  # a trained model folder; None with `quick`
    config: str = "reversal"  # the task: <task>_id and <task>_ood are its presets
    quick: bool = False
    tasks: list[str] = field(default_factory=lambda: list(QUICK_TASKS))  # with `quick`
    train_steps: int = 0  # with `quick`: optimizer steps per task; 0: each task's recipe
    seed: int = DEFAULT_SEED
    num_heads: int = 30  # ID instances for the head ranking (paper: 30)
    num_validation: int = 100  # OOD validation instances (the sweep chooses there)
    num_test: int = 200  # OOD and ID test instances (reported)
    num_attention: int = 100  # instances per config for the Table 2 analysis
    batch_size: int = 32
    counts: list[int] = field(default_factory=list)  # head counts N; empty: 1, 2, 4.. ~10%
    strengths: list[float] = field(default_factory=lambda: list(DEFAULT_STRENGTHS))
    mode: str = "standard"  # or "conditional" (then `thresholds` are swept too)
    thresholds: list[float] = field(default_factory=lambda: [0.01, 0.05, 0.1])
    shift: int = 0  # rank and reinforce at ref + shift
    head_threshold: float = 0.0  # ranking counts only weights above this
    control_seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    metric: str = "partial_acc"  # what the sweep maximises on validation
    id_guard: float | None = None  # choose only settings within this of ID validation exact
    ood: dict[str, Any] = field(default_factory=dict)  # parameter overrides of the OOD preset
    device: str = "auto"
    threads: int = 0  # torch CPU threads; 0: torch's default
    progress: bool = True

    def __post_init__(self) -> None:
        positive = ("num_heads", "num_validation", "num_test", "num_attention", "batch_size")
        # nan compares False with everything, so `< 0` alone lets it through: a sweep at
        # C = nan ran for minutes and reported nonsense.
        for name in ("strengths", "thresholds", "head_threshold", "id_guard"):
            value = getattr(self, name)
            values = value if isinstance(value, list) else [value]
            if any(v is not None and not math.isfinite(v) for v in values):
                raise ValueError(f"'{name}' must be finite, got {value}")
        if self.id_guard is not None and self.id_guard < 0:
            raise ValueError(f"'id_guard' must be >= 0, got {self.id_guard}")
        if self.threads < 0:
            raise ValueError(f"'threads' must be >= 0, got {self.threads}")
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"'{name}' must be >= 1, got {getattr(self, name)}")
        if self.train_steps < 0:
            raise ValueError(
                f"'train_steps' must be >= 0 (0: each task's recipe), got {self.train_steps}"
            )
        if self.mode not in MODES or self.mode == "knockout":
            raise ValueError(f"'mode' must be 'standard' or 'conditional', got {self.mode!r}")
        if self.metric not in SELECT_METRICS:
            raise ValueError(
                f"'metric' must be one of {', '.join(SELECT_METRICS)}, got {self.metric!r}"
            )
        if self.device not in DEVICES:
            raise ValueError(f"'device' must be one of {', '.join(DEVICES)}, got {self.device!r}")
        if not self.strengths:
            raise ValueError("'strengths' must list at least one C")
        if any(c < 0 for c in self.strengths):
            raise ValueError(f"'strengths' must be >= 0, got {self.strengths}")
        if any(n < 1 for n in self.counts):
            raise ValueError(f"'counts' must be >= 1, got {self.counts}")
        if not self.control_seeds:
            raise ValueError("'control_seeds' must list at least one seed")
        if not self.quick and not self.model:
            raise ValueError("'model' is required (a trained model folder), or use --quick")
        from attentionspan_datasets.generation import resolve_config

        for task in self.task_list:
            _, ood_name = task_presets(task)  # unknown task: one line naming the allowed ones
            try:
                resolve_config(ood_name, **self.ood_for(task))
            except (TypeError, ValueError) as error:
                raise ValueError(f"'ood' overrides for {ood_name}: {error}") from None

    @property
    def task_list(self) -> list[str]:
        return list(self.tasks) if self.quick and not self.model else [self.config]

    def ood_for(self, task: str) -> dict[str, Any]:
        """Overrides of the task's OOD preset: `ood`, or with `quick` and none given, the
        quick default for the task."""
        if self.ood or not self.quick:
            return dict(self.ood)
        return dict(QUICK_OOD.get(task_presets(task)[0][: -len("_id")], {}))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def quick_recipe(task: str) -> dict[str, Any]:
    """The TrainConfig options --quick trains `task` (or `task_id`) with: QUICK_TRAIN, then
    the task's recipe (its `scratch` merged field by field)."""
    recipe = QUICK_RECIPES.get(task_presets(task)[0][: -len("_id")], {})
    return {
        **QUICK_TRAIN,
        **recipe,
        "scratch": {**QUICK_TRAIN.get("scratch", {}), **recipe.get("scratch", {})},
    }


def task_presets(task: str) -> tuple[str, str]:
    """`reversal` (or `reversal_id`) -> (`reversal_id`, `reversal_ood`)."""
    from attentionspan_datasets.presets import PRESETS

    base = task[:-3] if task.endswith("_id") else task[:-4] if task.endswith("_ood") else task
    pair = (f"{base}_id", f"{base}_ood")
    if not all(name in PRESETS for name in pair):
        tasks = sorted({name.rsplit("_", 1)[0] for name in PRESETS})
        raise ValueError(f"config {task!r} has no ID/OOD presets; allowed: {', '.join(tasks)}")
    return pair


# --- devices and processes ------------------------------------------------------------------
