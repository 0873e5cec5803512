"""The options of `attentionspan supervision` (saved as OUT/settings.json) and its arms.

    cfg = SupervisionConfig(tasks=["reversal"], seeds=3, output="runs/sup")
    task = cfg.reproduce_config().task_values[0]  # --quick's options; the task's value
    ladder_arms(cfg, task)            # baseline (weight 0), w0.1, w0.3, w1
    control_arms(cfg, 0.3, task)      # wrong3-w0.3, random-w0.3, steps-x1.5

An arm is one way of training the tiny scratch model of a task, everything else equal (the
recipe, the init seed k and the data seed --seed + k of seed run k): the unsupervised
baseline, the supervised dose ladder, and three controls trained at the weight the ladder
chose on OOD validation (docs/usage_analysis.md, "Does supervised attention generalise").
Kept apart from the run (`harness.pipeline.supervision_study`) so that the report writer
and the command read the options without importing the pipeline.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from attentionspan_datasets.generation import DEFAULT_SEED
from harness.attention.sweep import SELECT_METRICS
from harness.foundation.options import cli
from harness.foundation.supervision_options import LOSSES, MAX_SHIFT

if TYPE_CHECKING:
    from harness.pipeline.settings import TaskValue

SETTINGS_FILE = "settings.json"
REPORT_FILE = "report.md"
RESULTS_FILE = "results.json"
MAX_WEIGHT = 100.0  # a supervision loss of a few nats times 100 already drowns the LM loss
MAX_EXTRA = 10.0  # the extra-steps control trains at most 11x the recipe's steps
MAX_JOBS = 64  # worker processes of --jobs (a typo should not fork hundreds)
# The roles of the arms, in the report's order, with what each one is.
ROLES = {
    "baseline": "no supervision (weight 0): --quick's model of this seed",
    "ladder": "the top heads of the baseline's ID ranking pulled to the reference",
    "wrong_mask": "the same heads pulled to the reference shifted by --wrong-shift",
    "random_heads": "as many heads drawn at random among the others, pulled to the reference",
    "extra_steps": "no supervision, (1 + --extra-steps) x the steps on the same data stream",
}
CONTROL_ROLES = ("wrong_mask", "random_heads", "extra_steps")


@dataclass
class SupervisionConfig:
    """Options of one supervision study (saved as OUT/settings.json)."""

    # Each option is declared here once: `attentionspan supervision`'s parser, the config it
    # builds and the command line report.md prints all come from these fields' metadata.
    tasks: list[str] = field(
        default_factory=lambda: ["reversal"],
        metadata=cli("tasks; each trains tiny scratch models by --quick's recipe", metavar="TASK"),
    )
    output: str = field(default="runs/supervision", metadata=cli("folder of report.md"))
    seeds: int = field(
        default=3,
        metadata=cli(
            "seed runs per arm: run k initialised with seed k, trained and analysed on data "
            "seed --seed + k (as reproduce --seeds)",
            metavar="K",
        ),
    )
    seed: int = field(default=DEFAULT_SEED, metadata=cli("seed of the data", shared="seed"))
    weights: list[float] = field(
        default_factory=lambda: [0.0, 0.1, 0.3, 1.0],
        metadata=cli(
            "the dose ladder of supervision weights W (total loss = LM + W x supervision); "
            "0 is the unsupervised baseline, always run",
            group="arms",
            metavar="W",
        ),
    )
    heads: int = field(
        default=2,
        metadata=cli(
            "heads supervised: the top N of the same seed's unsupervised model, ranked on ID",
            group="arms",
            metavar="N",
        ),
    )
    shift: int = field(
        default=0,
        metadata=cli("rank and supervise at ref+K (0: the reference)", group="arms", metavar="K"),
    )
    wrong_shift: int = field(
        default=3,
        metadata=cli(
            "the wrong-mask control supervises ref+shift+K instead", group="arms", metavar="K"
        ),
    )
    extra_steps: float = field(
        default=0.5,
        metadata=cli(
            "the extra-steps control trains (1 + X) x the recipe's steps, unsupervised",
            group="arms",
            metavar="X",
        ),
    )
    loss: str = field(
        default="ce",
        metadata=cli("the supervision loss (as train's)", group="arms", choices=LOSSES),
    )
    metric: str = field(
        default="partial_acc",
        metadata=cli(
            "chooses the weight on OOD validation; the verdict reads it on OOD test",
            group="arms",
            choices=SELECT_METRICS,
        ),
    )
    train_steps: int = field(
        default=0,
        metadata=cli("training steps per model", shown="each task's --quick recipe"),
    )
    num_heads: int = field(
        default=30, metadata=cli("ID instances the heads are ranked on", group="sizes")
    )
    num_validation: int = field(
        default=64, metadata=cli("OOD validation instances (choose the weight)", group="sizes")
    )
    num_test: int = field(default=128, metadata=cli("OOD and ID test instances", group="sizes"))
    num_attention: int = field(
        default=32, metadata=cli("instances per config for Table 2", group="sizes")
    )
    batch_size: int = field(
        default=32, metadata=cli("batch size of the analysis", shared="batch_size", group="sizes")
    )
    ood: dict[str, Any] = field(
        default_factory=dict,
        metadata=cli(
            "override a parameter of the OOD preset (e.g. max_length=20); repeatable",
            group="sizes",
            metavar="KEY=VALUE",
            shown="--quick's (reversal: max_length=20)",
        ),
    )
    device: str = field(default="auto", metadata=cli("auto: cuda if present", shared="device"))
    threads: int = field(
        default=1,
        metadata=cli(
            "torch CPU threads (tiny models: one is fastest on a shared machine, "
            "docs/performance.md)",
            shared="threads",
        ),
    )
    jobs: int = field(
        default=1,
        metadata=cli(
            "train up to N models at once, each in a process of its own at --threads threads "
            "(the seed runs' baselines, then the ladder's models, then the controls'); the "
            "models are those one at a time gives. Cores: N x --threads",
            metavar="N",
        ),
    )
    progress: bool = True

    def __post_init__(self) -> None:
        from harness.foundation.caps import check_int, check_unique

        weights = list(self.weights)
        for w in weights:
            if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w):
                raise ValueError(f"'weights' must be finite numbers, got {w!r}")
            if not 0 <= w <= MAX_WEIGHT:
                raise ValueError(
                    f"'weights' must be in [0, {MAX_WEIGHT:g}] (0 is the unsupervised "
                    f"baseline), got {w:g}"
                )
        check_unique("'weights'", [float(w) for w in weights])
        if not any(w > 0 for w in weights):
            raise ValueError(
                f"'weights' must hold at least one weight > 0 (0 is the baseline, always run), "
                f"got {' '.join(f'{w:g}' for w in weights)}"
            )
        self.weights = [float(w) for w in weights]
        check_int("'heads'", self.heads, 1, 10_000)
        check_int("'jobs'", self.jobs, 1, MAX_JOBS)
        check_int("'wrong_shift'", self.wrong_shift, -MAX_SHIFT, MAX_SHIFT)
        if self.wrong_shift == 0:
            raise ValueError("'wrong_shift' must not be 0: the wrong mask would be the right one")
        check_int("'shift'", self.shift, -MAX_SHIFT, MAX_SHIFT)
        wrong = self.shift + self.wrong_shift
        if abs(wrong) > MAX_SHIFT:
            raise ValueError(
                f"'shift' + 'wrong_shift' = {wrong} must be within [-{MAX_SHIFT}, {MAX_SHIFT}] "
                "(the supervision shift's range)"
            )
        extra = self.extra_steps
        if isinstance(extra, bool) or not isinstance(extra, (int, float)):
            raise ValueError(f"'extra_steps' must be a number, got {extra!r}")
        if not (math.isfinite(extra) and 0 < extra <= MAX_EXTRA):
            raise ValueError(f"'extra_steps' must be in (0, {MAX_EXTRA:g}], got {extra}")
        for name, allowed in (("loss", LOSSES), ("metric", SELECT_METRICS)):
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"'{name}' must be one of {', '.join(allowed)}, got {getattr(self, name)!r}"
                )
        if not self.tasks:
            raise ValueError("'tasks' must name at least one task")
        from harness.foundation.threads import check_threads

        check_threads(self.threads, "'threads'")  # no rule here: the count is set as given
        repro = self.reproduce_config()  # tasks, seeds, sizes, --ood, --shift: its checks
        self.ood = repro.ood
        from harness.foundation.caps import check_shift
        from harness.foundation.data import longest_text

        for task in repro.task_values:
            id_name = task.id.name
            check_shift("'shift' + 'wrong_shift'", wrong, {id_name: longest_text(id_name)})
            total = model_heads(task)
            if 2 * self.heads > total:
                raise ValueError(
                    f"'heads' {self.heads} leaves too few other heads for the random-heads "
                    f"control: {task}'s model has {total} heads, so 'heads' must be at most "
                    f"{total // 2}"
                )

    def reproduce_config(self):
        """The ReproduceConfig of --quick with these seeds, sizes and steps: it trains (or
        reuses) the baseline models (`task_model`) and runs the analysis stages
        (`TaskRun`), so the baseline arm is exactly what `reproduce --quick --seeds K`
        trains."""
        from harness.pipeline.settings import ReproduceConfig

        return ReproduceConfig(
            quick=True,
            tasks=list(self.tasks),
            output=self.output,
            seeds=self.seeds,
            seed=self.seed,
            train_steps=self.train_steps,
            num_heads=self.num_heads,
            num_validation=self.num_validation,
            num_test=self.num_test,
            num_attention=self.num_attention,
            batch_size=self.batch_size,
            shift=self.shift,
            ood=dict(self.ood),
            device=self.device,
            threads=self.threads,
            progress=self.progress,
        )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def model_heads(task: TaskValue) -> int:
    """The attention heads (layers x heads) of the scratch model --quick trains for `task`."""
    from harness.foundation.models import ScratchConfig

    scratch = ScratchConfig(**task.recipe(pretrained=False)["scratch"])
    return scratch.num_layers * scratch.num_heads


def recipe_steps(cfg: SupervisionConfig, task: TaskValue) -> int:
    """The steps of every arm but the extra-steps control: --train-steps, or the recipe's."""
    return cfg.train_steps or task.recipe(pretrained=False)["max_steps"]


# --- the arms -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Arm:
    """One way of training a task's model. `heads`: which heads are supervised ("supervised":
    the top N of the seed's baseline ranking, "random": the random-heads draw, "": none);
    `shift`: the supervised key is ref + shift; `steps`: the training steps."""

    name: str
    role: str
    weight: float = 0.0
    heads: str = ""
    shift: int = 0
    steps: int = 0

    @property
    def supervised(self) -> bool:
        return self.weight > 0 and bool(self.heads)

    def describe(self) -> str:
        what = ROLES[self.role]
        if self.supervised:
            key = f", key ref{self.shift:+d}" if self.shift else ""
            what += f"; weight {self.weight:g}{key}"
        return f"{what}; {self.steps} steps"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


BASELINE = "baseline"


def weight_name(weight: float) -> str:
    """`w0.3`: the arm of one supervision weight (0: the baseline)."""
    return BASELINE if weight == 0 else f"w{weight:g}"


def ladder_arms(cfg: SupervisionConfig, task: TaskValue) -> list[Arm]:
    """The baseline, then one arm per weight > 0 in increasing order."""
    steps = recipe_steps(cfg, task)
    arms = [Arm(BASELINE, "baseline", steps=steps)]
    for weight in sorted(w for w in cfg.weights if w > 0):
        arms.append(Arm(weight_name(weight), "ladder", weight, "supervised", cfg.shift, steps))
    return arms


def control_arms(cfg: SupervisionConfig, weight: float, task: TaskValue) -> list[Arm]:
    """The three controls, the supervised ones at `weight` (the ladder's choice): the wrong
    mask (ref + shift + wrong_shift), random heads, and the longer unsupervised run."""
    steps = recipe_steps(cfg, task)
    longer = max(steps + 1, round(steps * (1 + cfg.extra_steps)))
    w = f"{weight:g}"
    return [
        Arm(
            f"wrong{cfg.wrong_shift}-w{w}",
            "wrong_mask",
            weight,
            "supervised",
            cfg.shift + cfg.wrong_shift,
            steps,
        ),
        Arm(f"random-w{w}", "random_heads", weight, "random", cfg.shift, steps),
        Arm(f"steps-x{1 + cfg.extra_steps:g}", "extra_steps", 0.0, "", 0, longer),
    ]
