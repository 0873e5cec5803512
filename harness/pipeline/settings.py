"""The options of `attentionspan reproduce` (saved as OUT/settings.json) and their checks.

    cfg = ReproduceConfig(model="runs/rev/final", config="reversal", output="runs/rev/repro")

Kept apart from the pipeline (`harness.pipeline.reproduce`) so that the report writer and the
command read the settings without importing the pipeline.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from attentionspan_datasets.generation import DEFAULT_SEED
from attentionspan_datasets.presets import Preset
from harness.attention.scores import check_convention
from harness.attention.sweep import DEFAULT_STRENGTHS, SELECT_METRICS
from harness.engine.modes import SWEEP_MODES
from harness.foundation.caps import check_shift, check_unique
from harness.foundation.data import longest_text
from harness.foundation.dispatch import Placement, placement_field
from harness.foundation.options import cli
from harness.foundation.threads import check_threads

MAX_STRENGTH = 100.0  # C, added to post-softmax weights (each at most 1)
MAX_CONTROL_SEED = 2**31 - 1  # seeds of the random controls (torch generators take them)
# each learns in about a minute from scratch on a CPU; successor's reference is not the
# answer (the answer is the character after it). Addition's recipe takes 11 CPU-minutes of
# training alone, past --quick's ten: `--tasks addition` (docs/usage_analysis.md, "Recipes").
QUICK_TASKS = ("reversal", "successor")
# --quick's training: the TrainConfig options of every task's tiny scratch Llama (reversal
# and successor reach ID exact match 1.0 with these alone), then the task's own recipe over
# them (its `scratch` holding ScratchConfig fields), which the task declares in its file
# (`register_task(..., recipes={"quick": ...})`, attentionspan_datasets/tasks/<task>.py). A
# recipe is declared once it reaches ID exact match >= 0.9 on the test split in minutes of
# one CPU thread, and the task joins QUICK_TASKS when it also fits --quick's ten minutes
# beside them (addition's 11 do not: `--tasks addition`; value assignment's 9 neither:
# `--tasks value_assignment`; flip-flop's 17 neither: `--tasks ffml`; T6's 93 neither:
# `--tasks t6`). docs/usage_analysis.md, "Recipes for the tasks whose reference is not the
# answer", says why each recipe is what it is (the runs that found them: its git history).
QUICK_TRAIN = {"max_steps": 600, "batch_size": 32, "lr": 2e-3, "eval_size": 50, "log_every": 20}
# --pretrained's fine-tuning: the TrainConfig options of every task (batch 4, lr 5e-5,
# AdamW, fused where torch has it, bf16 autocast), then the task's steps (its "pretrained"
# recipe). Measured on SmolLM2-135M-Instruct on a 2-core CPU (one token per character, a
# one-line instruction): reversal's ID exact match reached 0.95 after 3 minutes at lr 5e-5
# (the paper's 5e-6 reached 0.42; 1e-4 was less steady), addition's 0.99 after 10 minutes
# (at 1e-4). bf16: these CPUs emulate it (AVX2 only), yet at one thread 20 reversal steps
# took 2.0 s each under bf16 autocast against 3.0 s in fp32, the same loss (2026-11-27; on
# the tiny scratch models it is slower, so --quick stays fp32). The analysis runs in fp32.
# The instruction (the task's, `TaskValue.instruction`) and the chat template, where the
# model's tokenizer has one, are added per model and task
# (`harness.pipeline.prepare.pretrained_prompt`). A task without a recipe trains
# PRETRAINED_TRAIN's steps; whether they suffice is not measured (docs/usage_analysis.md,
# "Pretrained models").
PRETRAINED_TRAIN: dict[str, Any] = {
    "max_steps": 400,
    "batch_size": 4,
    "lr": 5e-5,
    "mixed_precision": "bf16",
    "eval_size": 50,
    "log_every": 20,
}


def _declared(kind: str) -> dict[str, dict[str, Any]]:
    """short name -> the `kind` recipe its task declared in its file, for the tasks
    registered so far (the built-ins; a plugin's task is read from its value)."""
    from attentionspan_datasets.presets import PAIRS
    from attentionspan_datasets.tasks import TASKS

    # dict's own methods: importing the settings loads no plugin
    tasks = {short: dict.__getitem__(TASKS, pair[0].task) for short, pair in dict.items(PAIRS)}
    return {short: dict(t.recipes[kind]) for short, t in tasks.items() if kind in t.recipes}


# The tasks' recipes by short name, read from their files: a table for readers and tests
# (one may patch an entry); a run reads its task's through its value (`TaskValue.recipe`).
QUICK_RECIPES: dict[str, dict[str, Any]] = _declared("quick")
PRETRAINED_RECIPES: dict[str, dict[str, Any]] = _declared("pretrained")
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
    # threads per process ran a forward 9x slower than one (docs/performance.md, "Threads").
    "threads": 1,
}
# --pretrained: sizes for a 135M-270M model on a CPU (about 100x a tiny model's cost per
# token); options given explicitly win. Threads: the rule of docs/performance.md, not fixed
# at one as for --quick's tiny models (not measured on this model yet).
# 64 test and 64 validation instances: 32 gave rows whose verdicts rested on
# a handful of instances a kind, and too few validation pairs for the dose's interval.
PRETRAINED_SIZES = {
    "num_heads": 30,
    "num_validation": 64,
    "num_test": 64,
    "num_attention": 16,
    "batch_size": 8,
    "strengths": [0.5, 1.0, 2.0],
    "counts": [1, 2, 4],
    "control_seeds": [0, 1],
}
# --quick's (and --pretrained's) OOD streams where the preset is long: each task's
# "quick_ood" recipe (reversal: strings of 11-20 characters, where the effect is visible).
QUICK_OOD: dict[str, dict[str, Any]] = _declared("quick_ood")
SETTINGS_FILE = "settings.json"
REPORT_FILE = "report.md"
# --seeds: each seed run trains a model and runs every stage, so a few are enough to see
# whether a verdict holds; the cap keeps a typo from queueing a day of training.
MAX_SEED_RUNS = 20


@dataclass
class ReproduceConfig:
    """Options of one reproduce run (saved as OUT/settings.json)."""

    # Each option is declared here once: `attentionspan reproduce`'s parser, the config it
    # builds and the command line report.md prints all come from these fields' metadata.
    model: str | None = field(  # None with `quick` or `pretrained`
        default=None,
        metadata=cli("a trained model folder (or --quick, or --pretrained)", shared="model"),
    )
    config: str = field(  # the task: <task>_id and <task>_ood are its presets
        default="reversal",
        metadata=cli("the task: its presets <task>_id and <task>_ood are used"),
    )
    quick: bool = field(
        default=False,
        metadata=cli("train tiny scratch models for --tasks first, small sizes (CPU, ~6 min)"),
    )
    pretrained: str | None = field(  # fine-tuned per task: PRETRAINED_TRAIN, _RECIPES
        default=None,
        metadata=cli(
            "fine-tune this model on each of --tasks first, small sizes: a fetched model's "
            "name (smollm2-135m-instruct, gemma3-270m; fetched if not yet) or a local Hugging "
            "Face causal-LM folder",
            metavar="NAME_OR_FOLDER",
        ),
    )
    tasks: list[str] = field(
        default_factory=lambda: list(QUICK_TASKS),
        metadata=cli("tasks of --quick or --pretrained", metavar="TASK"),
    )
    output: str = field(default="runs/reproduce", metadata=cli("folder of report.md"))
    train_steps: int = field(  # 0: each task's own recipe (QUICK_* or PRETRAINED_*)
        default=0,
        metadata=cli(
            "--quick or --pretrained: training steps per task", shown="each task's recipe"
        ),
    )
    seed: int = field(default=DEFAULT_SEED, metadata=cli("seed of the data", shared="seed"))
    seeds: int = field(  # seed run k: init seed k, data seed `seed` + k (run 0: as without)
        default=1,
        metadata=cli(
            f"--quick or --pretrained: K models per task (1 to {MAX_SEED_RUNS}), run k "
            "initialised with seed k (--pretrained: the pretrained weights, so only the data "
            "differ) and trained and analysed on data seed --seed + k; report.md says whether "
            "their verdicts agree",
            metavar="K",
        ),
    )
    # the verdict read again on a second, disjoint test stream (`harness.pipeline.replication`)
    no_replicate: bool = field(
        default=False,
        metadata=cli(
            "skip the replication: the calibrated verdict read again, with the same N and "
            "doses, on the test rows after the first --num-test (OOD and ID; about the test "
            "ladder's, the diagnosis's and the evaluation's time again)"
        ),
    )
    # the verdict derived again on bootstrap resamples of its instances (its stability)
    stability_resamples: int = field(
        default=1000,
        metadata=cli(
            "bootstrap resamples of the instances the verdict is derived again on (its "
            "stability and flip margin; 0: not measured; about a minute at 1000 and 64 test "
            "instances)",
            metavar="R",
        ),
    )
    num_heads: int = field(  # the paper: 30
        default=30, metadata=cli("ID instances to rank", group="sizes")
    )
    num_validation: int = field(  # the sweep chooses there
        default=100, metadata=cli("OOD validation instances", group="sizes")
    )
    num_test: int = field(  # reported
        default=200, metadata=cli("OOD and ID test instances", group="sizes")
    )
    num_attention: int = field(
        default=100, metadata=cli("instances per config for Table 2", group="sizes")
    )
    batch_size: int = field(
        default=32, metadata=cli("batch size", shared="batch_size", group="sizes")
    )
    score_convention: str = field(  # Table 2's score: the paper's text or the authors' code
        default="paper",
        metadata=cli(
            "Table 2's attention score: paper (the paper's text) or authors (their released "
            "code; three differences, harness.attention.scores)",
            shared="score_convention",
        ),
    )
    counts: list[int] = field(  # empty: 1, 2, 4 .. ~10% of the heads
        default_factory=list,
        metadata=cli("head counts N", group="sweep", shown="1 2 4 .. ~10% of the heads"),
    )
    strengths: list[float] = field(
        default_factory=lambda: list(DEFAULT_STRENGTHS), metadata=cli("C values", group="sweep")
    )
    mode: str = field(  # "conditional" sweeps `thresholds` too
        default="standard",
        metadata=cli("intervention", group="sweep", choices=SWEEP_MODES),
    )
    thresholds: list[float] = field(
        default_factory=lambda: [0.01, 0.05, 0.1],
        metadata=cli("conditional thresholds", group="sweep"),
    )
    shift: int | None = field(  # None: found (the offset profile's largest top-heads mass)
        default=None,
        metadata=cli(
            "rank and reinforce at ref+k (default: where the lookup reads, found from the "
            "heads' offset profile)",
            group="sweep",
        ),
    )
    head_threshold: float = field(
        default=0.0, metadata=cli("ranking counts weights above this", group="sweep")
    )
    control_seeds: list[int] = field(
        default_factory=lambda: [0, 1, 2], metadata=cli("random-control seeds", group="sweep")
    )
    metric: str = field(  # what the sweep maximises on validation
        default="partial_acc", metadata=cli("chosen by", group="sweep", choices=SELECT_METRICS)
    )
    id_guard: float | None = field(
        default=None,
        metadata=cli(
            "choose only settings whose ID validation exact match drops at most DROP",
            group="sweep",
            metavar="DROP",
        ),
    )
    ood: dict[str, Any] = field(  # parameter overrides of the OOD preset
        default_factory=dict,
        metadata=cli(
            "override a parameter of the OOD preset (e.g. max_length=20); repeatable",
            group="sweep",
            metavar="KEY=VALUE",
        ),
    )
    device: str = field(default="auto", metadata=cli("auto: cuda if present", shared="device"))
    # the analysed models split across devices (harness.foundation.dispatch); training is not
    device_map: str | None = placement_field("device_map")
    max_memory: str | None = placement_field("max_memory")
    offload_folder: str | None = placement_field("offload_folder")
    # or sharded by heads over torchrun's processes (harness.foundation.dispatch)
    tp_plan: str | None = placement_field("tp_plan")
    threads: int = field(
        default=0,
        metadata=cli(
            "torch CPU threads (0: chosen from the cores this process may use, the processes on "
            "this machine and the load, docs/performance.md)",
            shared="threads",
            shown="the rule; --quick: 1",
        ),
    )
    progress: bool = True

    def __post_init__(self) -> None:
        # nan compares False with everything, so `< 0` alone lets it through: a sweep at
        # C = nan ran for minutes and reported nonsense.
        for name in ("strengths", "thresholds", "head_threshold", "id_guard"):
            value = getattr(self, name)
            values = value if isinstance(value, list) else [value]
            if any(v is not None and not math.isfinite(v) for v in values):
                raise ValueError(f"'{name}' must be finite, got {value}")
        if self.id_guard is not None and self.id_guard < 0:
            raise ValueError(f"'id_guard' must be >= 0, got {self.id_guard}")
        if self.stability_resamples < 0:
            raise ValueError(
                f"'stability_resamples' must be >= 0 (0: not measured), got "
                f"{self.stability_resamples}"
            )
        if self.threads:  # 0: the rule of harness.foundation.threads (the command applied it)
            check_threads(self.threads, "'threads'")
        check_reproduce_sizes(self)
        if self.mode not in SWEEP_MODES:
            modes = " or ".join(repr(m) for m in SWEEP_MODES)
            raise ValueError(f"'mode' must be {modes}, got {self.mode!r}")
        if self.metric not in SELECT_METRICS:
            raise ValueError(
                f"'metric' must be one of {', '.join(SELECT_METRICS)}, got {self.metric!r}"
            )
        check_convention(self.score_convention)
        if self.device not in DEVICES:
            raise ValueError(f"'device' must be one of {', '.join(DEVICES)}, got {self.device!r}")
        if Placement.of(self).dispatched and self.device != "auto":
            raise ValueError(f"give --device {self.device} or --device-map, not both")
        if self.tp_plan is not None and self.device != "auto":
            # each process's shard goes to its own device (cuda:LOCAL_RANK, or the CPU)
            raise ValueError(f"give --device {self.device} or --tp-plan, not both")
        if self.tp_plan is not None and not self.model:
            # --quick and --pretrained train first, and training does not shard by heads
            raise ValueError("--tp-plan needs --model (a trained model to analyse)")
        if not self.strengths:
            raise ValueError("'strengths' must list at least one C")
        if any(not 0 <= c <= MAX_STRENGTH for c in self.strengths):
            # a weight is at most 1: C far above it only overflows (1e308 ran every stage
            # and failed writing the results)
            raise ValueError(f"'strengths' must be in [0, {MAX_STRENGTH:g}], got {self.strengths}")
        if any(n < 1 for n in self.counts):
            raise ValueError(f"'counts' must be >= 1, got {self.counts}")
        if not self.control_seeds:
            raise ValueError("'control_seeds' must list at least one seed")
        bad = [x for x in self.control_seeds if not 0 <= x <= MAX_CONTROL_SEED]
        if bad:  # a seed past a C long failed only when the sweep drew the random heads
            raise ValueError(f"'control_seeds' must be in [0, {MAX_CONTROL_SEED}], got {bad[0]}")
        check_model_choice(self.model, self.quick, self.pretrained)
        if self.seeds > 1 and self.model:
            raise ValueError(
                f"'seeds' {self.seeds} trains one model per seed run and needs --quick without "
                "--model (or --pretrained): a given model has one init (for other data alone, "
                "run again with another --seed)"
            )
        # The tasks, resolved once from their names here and carried as values from here to
        # the report (an unknown name: one line naming the allowed tasks).
        # --config only where it names the task (--quick and --pretrained read --tasks)
        named = [*self.tasks, *([] if self.trains_models else [self.config])]
        values = [TaskValue.of(task) for task in named]
        listed = values[: len(self.tasks)]
        # an alias of a task already listed runs it twice into one folder (reversal, reversal_id)
        check_unique("'tasks'", [task.short for task in listed])
        self.task_values = listed if self.trains_models else values[-1:]
        if self.train_steps and self.trains_models:
            check_train_steps(self)
        if self.trains_models:
            check_declared_recipes(self)
        for index, task in enumerate(self.task_values):
            try:
                if index == 0 and self.ood:  # kept typed: settings.json, the report's command
                    self.ood = parse_overrides(task, self.ood)
                task.ood_config(self.ood_for(task))
            except (TypeError, ValueError) as error:
                raise ValueError(f"'ood' overrides for {task.ood.name}: {error}") from None
            if self.shift is not None:
                check_shift("'shift'", self.shift, {task.id.name: longest_text(task.id.name)})

    @property
    def trains_models(self) -> bool:
        """Whether the run trains its models first (--quick, --pretrained), one per task of
        `tasks` (and seed run), rather than analysing the one --model."""
        return (self.quick or bool(self.pretrained)) and not self.model

    @property
    def task_list(self) -> list[str]:
        return list(self.tasks) if self.trains_models else [self.config]

    def ood_for(self, task: TaskValue) -> dict[str, Any]:
        """Overrides of the task's OOD preset: `ood`, or with `quick` or `pretrained` and
        none given, the task's quick default (its "quick_ood" recipe)."""
        if self.ood or not (self.quick or self.pretrained):
            return parse_overrides(task, self.ood)
        return dict(task.recipes["quick_ood"])

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def check_model_choice(model: str | None, quick: bool, pretrained: str | None) -> None:
    """ValueError (one line) unless the options name where the models come from: --model,
    --quick (which --model may join: its sizes for a given model) or --pretrained alone."""
    if pretrained is not None and (not isinstance(pretrained, str) or not pretrained.strip()):
        raise ValueError(f"'pretrained' must name a model or a folder, got {pretrained!r}")
    others = {
        "model": (model, "--model analyses a model as it is"),
        "quick": (quick, "--quick trains tiny models from scratch"),
    }
    for name, (given, what) in others.items():
        if pretrained and given:
            raise ValueError(
                f"--pretrained and --{name} exclude each other: --pretrained fine-tunes "
                f"{pretrained!r} on each of --tasks, {what}; give one"
            )
    if not (quick or model or pretrained):
        raise ValueError(
            "'model' is required (a trained model folder), or use --quick or --pretrained"
        )


def parse_overrides(task: TaskValue, overrides: dict[str, Any]) -> dict[str, Any]:
    """Overrides of the task's presets, the values given as text (`--ood use_flip=false`)
    converted by the type of the task's field (`TaskConfig.parse_value`: the rule of --param
    and --curriculum); values already typed (the Python API) are kept."""
    return {
        key: task.config_class.parse_value(key, value) if isinstance(value, str) else value
        for key, value in overrides.items()
    }


def check_reproduce_sizes(cfg: ReproduceConfig) -> None:
    """The caps of harness.foundation.caps and the option checks that need no model, before any
    stage:
    a sweep that reaches a bad value only after every earlier stage ran wasted their time."""
    from harness.foundation.caps import (
        MAX_BATCH,
        MAX_INSTANCES,
        MAX_LIST,
        MAX_STEPS,
        check_fraction,
        check_int,
        check_output_dir,
        check_unique,
    )

    for name in ("num_heads", "num_validation", "num_test", "num_attention"):
        check_int(f"'{name}'", getattr(cfg, name), 1, MAX_INSTANCES)
    check_int("'batch_size'", cfg.batch_size, 1, MAX_BATCH)
    check_int("'train_steps'", cfg.train_steps, 0, MAX_STEPS)  # 0: each task's recipe
    check_int("'seeds'", cfg.seeds, 1, MAX_SEED_RUNS)
    if cfg.seeds > 1:  # the last seed run's data seed must be one too
        from attentionspan_datasets.generation import SEED_RANGE

        last = cfg.seed + cfg.seeds - 1
        if not SEED_RANGE[0] <= last <= SEED_RANGE[1]:
            raise ValueError(
                f"'seed' {cfg.seed} + 'seeds' {cfg.seeds} - 1 = {last} is outside the data "
                f"seeds [{SEED_RANGE[0]}, {SEED_RANGE[1]}]"
            )
    for name in ("counts", "strengths", "thresholds", "control_seeds", "tasks"):
        values = getattr(cfg, name)
        if len(values) > MAX_LIST:
            raise ValueError(f"'{name}' must list at most {MAX_LIST:,} values, got {len(values):,}")
        check_unique(f"'{name}'", values)
    if cfg.id_guard is not None:
        check_fraction("'id_guard'", cfg.id_guard)  # an ID exact match drop lies in [0, 1]
    for n in cfg.counts:
        check_int("'counts'", n, 1, MAX_INSTANCES)
    check_fraction("'head_threshold'", cfg.head_threshold)
    for value in cfg.thresholds:
        check_fraction("'thresholds'", value)
    check_output_dir("'output'", cfg.output)


def check_train_steps(cfg: ReproduceConfig) -> None:
    """--train-steps below the steps of a task's curriculum (its recipe trains easier stages
    first: value_assignment, ffml, t6): one line naming the option, the task and the least
    it takes, not the recipe's fields the user never typed."""
    from harness.training.train import parse_curriculum

    for task in cfg.task_values:
        recipe = task.recipe(pretrained=bool(cfg.pretrained))
        staged = sum(steps for steps, _ in parse_curriculum(recipe.get("curriculum", "")))
        if cfg.train_steps < staged:
            raise ValueError(
                f"--train-steps {cfg.train_steps} is fewer than the {staged} steps of "
                f"{task.short}'s curriculum (its recipe trains easier stages first): "
                f"give --train-steps >= {staged}, or 0 for the recipe's own steps"
            )


class TaskValue(str):
    """One task of a run, resolved once from the name it was given (`reversal`,
    `reversal_id`, `string_reversal`): its presets, names, instruction and recipes, as its
    file declared them. It is also that name (a str), so that the run's labels, stage files
    and JSON keep the name as given, while every stage reads the task from the value rather
    than looking the name up again.

        task = TaskValue.of("addition")
        task.id.name, task.ood.name, task.short      # 'addition_id', 'addition_ood', 'addition'
        task.recipe(pretrained=False)["max_steps"]   # 3000: QUICK_TRAIN under its recipe
    """

    task_name: str  # the registry's name, `long_addition`
    short: str  # `addition`: the task's folder
    id: Preset  # its ID preset (`addition_id`)
    ood: Preset  # its OOD preset (`addition_ood`)
    config_class: type
    instruction: str  # the line a model is told (`instruction_for`)
    recipes: Mapping[str, Any]  # its "quick", "pretrained" and "quick_ood" recipes ({}: none)

    @classmethod
    def of(cls, task: str) -> TaskValue:
        """The value of the task named `task` (any of its names, or either preset of its
        pair); a TaskValue is returned as it is."""
        if isinstance(task, TaskValue):
            return task
        from attentionspan_datasets import presets
        from attentionspan_datasets.instructions import instruction_for
        from attentionspan_datasets.tasks import get_task

        id_preset, ood_preset = presets.pair(task)  # unknown: one line naming the allowed tasks
        declared = get_task(id_preset.task)
        value = str.__new__(cls, task)
        value.task_name, value.short = declared.name, id_preset.short
        value.id, value.ood, value.config_class = id_preset, ood_preset, declared.config_class
        value.instruction = instruction_for(declared.name)
        tables = {"quick": QUICK_RECIPES, "pretrained": PRETRAINED_RECIPES, "quick_ood": QUICK_OOD}
        # the settings' tables first (a test may patch an entry), then what the task declared
        value.recipes = MappingProxyType(
            {
                kind: table.get(value.short) or declared.recipes.get(kind, {})
                for kind, table in tables.items()
            }
        )
        return value

    def __reduce__(self) -> tuple:
        # by name, as a Preset pickles: the registry's mappings cannot be pickled
        return TaskValue.of, (str(self),)

    @property
    def presets(self) -> tuple[str, str]:
        """(ID preset name, OOD preset name)."""
        return self.id.name, self.ood.name

    def recipe(self, pretrained: bool) -> dict[str, Any]:
        """The TrainConfig options --pretrained fine-tunes the task with (PRETRAINED_TRAIN,
        then its "pretrained" recipe) or --quick trains it with (QUICK_TRAIN, then its
        "quick" recipe, `scratch` merged field by field). The model and its prompt come per
        model and task (`harness.pipeline.prepare.task_train_config`)."""
        if pretrained:
            return {**PRETRAINED_TRAIN, **self.recipes["pretrained"]}
        own = self.recipes["quick"]
        return {
            **QUICK_TRAIN,
            **own,
            "scratch": {**QUICK_TRAIN.get("scratch", {}), **own.get("scratch", {})},
        }

    def ood_config(self, overrides: Mapping[str, Any]):
        """The OOD preset's TaskConfig with `overrides` (typed) on top, labelled with the
        preset's name, as `resolve_config(task.ood.name, **overrides)` makes it."""
        params = {**self.ood.params, **overrides}
        return self.config_class.from_params(params).labelled(self.ood.name)

    def run_name(self, run: int) -> str:
        """The folder of seed run `run` (OUT/<it>/ and OUT/models/<it>/): the task's own
        folder for run 0 (what a run without --seeds writes), `<task>-seed<k>` after it."""
        return self.short if run == 0 else f"{self.short}-seed{run}"


def check_declared_recipes(cfg: ReproduceConfig) -> None:
    """A recipe another package declared (`register_task(..., recipes=...)`), checked as its
    author wrote it, before any training: a bad value is one line naming the task and the
    field given, not a field derived from it later (train_size = max_steps x batch_size:
    max_steps -5 read "'train_size' must be >= 1, got -160")."""
    from harness.training.train import TrainConfig

    kind = "pretrained" if cfg.pretrained else "quick"
    own = PRETRAINED_RECIPES if cfg.pretrained else QUICK_RECIPES
    for task in cfg.task_values:
        if task.short in own or not task.recipes[kind]:
            continue
        recipe = task.recipe(pretrained=cfg.pretrained)
        where = f"task {task.short!r}: its declared {kind!r} recipe (register_task's recipes)"
        try:
            TrainConfig.from_dict(recipe)
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None
        steps = recipe.get("max_steps")
        if not cfg.train_steps and not (isinstance(steps, int) and steps >= 1):
            raise ValueError(
                f"{where}: 'max_steps' must be >= 1 (the steps reproduce trains), got {steps!r}"
            )


def seed_run_seeds(cfg: ReproduceConfig, run: int) -> tuple[int, int]:
    """(init seed, data seed) of seed run `run`: k and `cfg.seed` + k."""
    return run, cfg.seed + run


# --- devices and processes ------------------------------------------------------------------
