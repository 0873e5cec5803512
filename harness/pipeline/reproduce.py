"""The paper's story for one model and task, end to end, resumable: `attentionspan reproduce`.

    attentionspan reproduce --model runs/rev/final --config reversal --output OUT
    attentionspan reproduce --quick --output OUT          # trains tiny models first (CPU)
    python -m harness.commands.reproduce --model runs/rev/final --config reversal --output OUT
    accelerate launch -m harness.commands.reproduce --model ... # evaluation shared by processes

Stages, each saved as `OUT/stages/<stage>.json` when it finishes (a rerun with the same
settings skips it; the sweep is saved per setting and stream, so it resumes mid-way):
1. `eval`: ID and OOD exact match, partial and teacher-forced accuracy (Table 1 analog),
   test split, no intervention;
2. `attention`: rollout share on reference tokens, correct versus wrong, the instance-aware
   figures beside the paper's pooled Welch test (Table 2 analog;
   `harness.attention.analysis`), under `--score-convention` (paper or authors), with the
   Figure 1 data;
3. `heads`: the Appendix G ranking on ID instances (also `OUT/<task>/heads.json`);
4. `sweep`: top-N heads x C (x threshold) on the OOD validation split, the best setting
   and its controls (random heads, random positions, bottom heads, knock-out) on the OOD
   test split and on ID, paired bootstrap intervals on every gain;
then `OUT/report.md` with its figures in `OUT/<task>/` and the settings in
`OUT/settings.json`.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.engine.scoring import Processes  # moved beside the engine; re-exported here
from harness.pipeline.settings import (  # noqa: F401  (re-exported: the pipeline's options)
    DEVICES,
    QUICK_OOD,
    QUICK_RECIPES,
    QUICK_SIZES,
    QUICK_TASKS,
    QUICK_TRAIN,
    REPORT_FILE,
    SETTINGS_FILE,
    ReproduceConfig,
    quick_recipe,
    task_presets,
    task_short_name,
)
from harness.pipeline.stages import Stages, write_json_atomic
from harness.runs import versions, weights_sha256


@dataclass(frozen=True)
class Writers:
    """The report layer's writers, handed in by the command: the report layer sits above the
    pipeline (it reads the settings and the stage results), so the pipeline never imports it.

    report(out, cfg, tasks, seconds=...) -> Path   writes OUT/report.md and its figures
    viewer(path, model, tokenizer, instances, prompt, ranking=, intervention=, meta=) -> Path
    """

    report: Callable[..., Path]
    viewer: Callable[..., Path]


# --- one task ---------------------------------------------------------------------------
STREAMS = {
    # stream -> (which preset, split, size option)
    "validation": ("ood", "validation", "num_validation"),
    "test": ("ood", "test", "num_test"),
    "id": ("id", "test", "num_test"),
    "id_validation": ("id", "validation", "num_validation"),  # with --id-guard
}


VIEWER_NUM = 25  # instances of each preset in attention.html (2.2 MB for 50 of SmolLM2)


class TaskRun:
    """The stages of one (model, task) pair; results land in `self.results`."""

    def __init__(
        self, cfg: ReproduceConfig, task: str, model_dir: str, out: Path, procs, writers: Writers
    ):
        self.cfg, self.task, self.model_dir, self.procs = cfg, task, model_dir, procs
        self.writers = writers
        self.id_name, self.ood_name = task_presets(task)
        self.ood = cfg.ood_for(task)
        self.dir = out / task_short_name(task)
        self.stages = Stages(out, log=self.log, write=procs.main)
        self.model = self.tokenizer = self.prompt = None
        self.results: dict[str, Any] = {
            "task": task,
            "model": model_dir,
            # the weights the figures come from: a digest that moved can say whether they did
            "model_sha256": weights_sha256(Path(model_dir)),
            "ood": self.ood,
        }

    def log(self, message: str) -> None:
        if self.procs.main:
            print(f"[reproduce {self.task}] {message}", file=sys.stderr, flush=True)

    # the model and its prompt layout, loaded on first use (a fully cached run needs neither)
    def load(self):
        if self.model is None:
            from harness.models import load_model
            from harness.runs import read_run_file, saved_prompt

            self.model, self.tokenizer = load_model(self.model_dir)
            self.model.to(self.procs.device)
            self.model.eval()
            info = read_run_file(self.model_dir) if Path(self.model_dir).is_dir() else None
            self.prompt = saved_prompt(info, self.model_dir)
        return self.model

    def base_settings(self) -> dict[str, Any]:
        """What every stage's result depends on (a change recomputes the stage)."""
        return {
            "model": str(self.model_dir),
            "task": self.task,
            "seed": self.cfg.seed,
            "ood": self.ood,
        }

    def instances(self, stream: str, count: int | None = None, share: bool = True) -> list:
        """The first `count` (default: the stream's size) instances of a stream: this
        process's share of them, or with `share=False` all of them."""
        from attentionspan_datasets.splits import split_instance

        which, split, size = STREAMS[stream]
        count = count or getattr(self.cfg, size)
        name = self.ood_name if which == "ood" else self.id_name
        overrides = self.ood if which == "ood" else {}
        out = []
        for i in self.procs.share(count) if share else range(count):
            x = split_instance(name, self.cfg.seed, split, i, **overrides)
            x.config = name
            out.append(x)
        return out

    # --- stages ------------------------------------------------------------------------
    def score(self, settings, stream: str, ranking=None) -> dict[str, list]:
        """Records per setting on one stream; each (stream, setting) is its own stage file,
        so an interrupted sweep keeps what it finished and shares prefills for the rest."""
        from tqdm.auto import tqdm

        from harness.attention.interventions import score_settings

        base = {
            **self.base_settings(),
            "stream": stream,
            "n": getattr(self.cfg, STREAMS[stream][2]),
        }

        def settings_of(setting):
            # The baseline does not depend on the ranking: Table 1 and the sweep share it.
            ranked = {} if setting.is_baseline else {"ranking": self.results.get("heads_key")}
            return base | ranked | setting.to_dict()

        out, todo = {}, []
        for setting in settings:
            self.procs.barrier()
            cached = self.stages.load(self.stage_name(stream, setting), settings_of(setting))
            if cached is not None:
                out[setting.name] = cached
            else:
                todo.append(setting)
        if todo:
            self.load()
            instances = self.instances(stream)
            bar = tqdm(
                total=len(instances),
                desc=f"{self.task} {stream} ({len(todo)} settings)",
                disable=not (self.cfg.progress and self.procs.main),
                dynamic_ncols=True,
            )
            records = score_settings(
                self.model,
                self.tokenizer,
                instances,
                todo,
                ranking,
                prompt=self.prompt,
                batch_size=self.cfg.batch_size,
                on_batch=bar.update,
            )
            bar.close()
            records = self.procs.gather(records)
            for setting in todo:
                rows = records[setting.name]
                self.stages.save(self.stage_name(stream, setting), settings_of(setting), rows)
                out[setting.name] = rows
        return out

    def stage_name(self, stream: str, setting) -> str:
        return f"{self.task}-sweep-{stream}-{setting.name}"

    def run_eval(self) -> dict[str, Any]:
        from attentionspan_datasets.metrics import ALL_METRICS
        from harness.attention.sweep import BASELINE
        from harness.stats import summarise

        table = {}
        for stream, name in (("id", self.id_name), ("test", self.ood_name)):
            rows = self.score([BASELINE], stream)[BASELINE.name]
            table[name] = summarise(rows, ALL_METRICS)
        return table

    def run_attention(self) -> dict[str, Any]:
        from harness.attention.analysis import AnalysisConfig, analyse_model

        convention = self.cfg.score_convention
        settings = self.base_settings() | {"n": self.cfg.num_attention, "ood": {}}
        if convention != "paper":  # the paper's stage files of earlier runs stay valid
            settings["score_convention"] = convention

        def compute():
            self.load()
            config = AnalysisConfig(
                configs=[self.id_name, self.ood_name],
                num=self.cfg.num_attention,
                seed=self.cfg.seed,
                batch_size=self.cfg.batch_size,
                score_convention=convention,
            )
            results, plots = analyse_model(
                self.model,
                self.tokenizer,
                config,
                prompt=self.prompt,
                accelerator=self.procs.accelerator,
                progress=self.cfg.progress and self.procs.main,
            )
            return {"results": results, "plots": plots, "score_convention": convention}

        return self.stages.run(f"{self.task}-attention", settings, compute)

    def run_heads(self):
        from harness.attention.heads import HeadRanking, rank_heads

        settings = self.base_settings() | {
            "n": self.cfg.num_heads,
            "threshold": self.cfg.head_threshold,
            "shift": self.cfg.shift,
        }

        def compute():
            self.load()
            from attentionspan_datasets.splits import split_instance

            # Every process ranks on all instances: 30 short ID instances are cheap, and the
            # ranking must be the same everywhere.
            instances = [
                split_instance(self.id_name, self.cfg.seed, "validation", i)
                for i in range(self.cfg.num_heads)
            ]
            ranking = rank_heads(
                self.model,
                self.tokenizer,
                instances,
                self.prompt,
                threshold=self.cfg.head_threshold,
                shift=self.cfg.shift,
                batch_size=self.cfg.batch_size,
                source={
                    "model": str(self.model_dir),
                    "config": self.id_name,
                    "split": "validation",
                    "seed": self.cfg.seed,
                    "indices": [0, self.cfg.num_heads],
                },
            )
            return ranking.to_dict()

        data = self.stages.run(f"{self.task}-heads", settings, compute)
        ranking = HeadRanking.from_dict(data)
        if self.procs.main:
            ranking.save(self.dir / "heads.json")
        self.results["heads_key"] = [list(x) for x in ranking.order]
        return ranking

    def run_sweep(self, ranking) -> dict[str, Any]:
        from harness.attention.controls import assess
        from harness.attention.sweep import grid, head_counts, run_sweep

        counts = self.cfg.counts or head_counts(ranking.total)
        counts = [n for n in counts if n <= ranking.total]
        settings = grid(
            ranking.total,
            counts=counts,
            strengths=self.cfg.strengths,
            mode=self.cfg.mode,
            thresholds=self.cfg.thresholds,
            shift=self.cfg.shift,
        )
        result = run_sweep(
            lambda todo, stream: self.score(todo, stream, ranking),
            settings,
            control_seeds=self.cfg.control_seeds,
            metric=self.cfg.metric,
            progress=self.log,
            id_guard=self.cfg.id_guard,
        )
        # The repair-or-pointer verdict reads the shifted answers against every OOD test
        # instance (the records are gathered from all processes).
        result["verdict"] = assess(result, self.instances("test", share=False))
        result["grid"] = {
            "counts": counts,
            "strengths": list(self.cfg.strengths),
            "thresholds": list(self.cfg.thresholds) if _sweeps_thresholds(self.cfg.mode) else [],
            "names": [s.name for s in settings],
        }
        return result

    def run(self) -> dict[str, Any]:
        started = time.perf_counter()
        self.log("evaluation (Table 1)")
        self.results["eval"] = self.run_eval()
        self.log("attention on reference tokens (Table 2)")
        self.results["attention"] = self.run_attention()
        self.log("head ranking")
        ranking = self.run_heads()
        self.results["heads"] = ranking.to_dict()
        self.log("sweep and controls")
        self.results["sweep"] = self.run_sweep(ranking)
        self.log("where the model looks when it errs")
        self.results["diagnosis"] = self.run_diagnosis(ranking)
        self.log("attention.html (baseline beside the chosen setting)")
        self.results["viewer"] = self.run_viewer(ranking)
        self.results["seconds"] = round(time.perf_counter() - started, 1)
        return self.results

    def run_diagnosis(self, ranking) -> dict[str, Any]:
        """Where the ranked heads look on each wrong answer token, without intervention, on
        the ID and the OOD test streams (`harness.attention.diagnosis`). The heads: the top N
        of the chosen setting (the grid's smallest N when the baseline was chosen), at the
        ranking's shift."""
        from harness.attention.diagnosis import where_errors_look
        from harness.attention.sweep import BASELINE
        from harness.engine.scoring import Scorer

        chosen = self.results["sweep"].get("chosen") or {}
        counts = self.results["sweep"].get("grid", {}).get("counts") or [1]
        n = chosen.get("n") if chosen.get("heads") == "top" and chosen.get("n") else counts[0]
        heads = ranking.top(min(n, ranking.total))
        settings = self.base_settings() | {
            "n": self.cfg.num_test,
            "heads": [list(h) for h in heads],
            "shift": self.cfg.shift,
        }

        def compute():
            self.load()
            scorer = Scorer(self.model, self.tokenizer, self.prompt, self.cfg.batch_size)
            out = {}
            for stream, name in (("id", self.id_name), ("test", self.ood_name)):
                records = self.score([BASELINE], stream)[BASELINE.name]
                instances = self.instances(stream, share=False)
                out[name] = where_errors_look(
                    scorer, instances, records, heads, shift=self.cfg.shift
                )
            return out

        return self.stages.run(f"{self.task}-diagnosis", settings, compute)

    def run_viewer(self, ranking) -> dict[str, Any]:
        """The interactive viewer beside the attention figures: the first VIEWER_NUM test
        instances of the ID and the OOD preset, the baseline beside the chosen setting. A
        stage of its own, so a finished run loads no model for it."""
        from harness.attention.sweep import Setting

        chosen = self.results["sweep"]["chosen"]
        settings = self.base_settings() | {"n": VIEWER_NUM, "chosen": chosen}

        def compute():
            self.load()
            count = min(VIEWER_NUM, self.cfg.num_test)
            # The ID and the OOD test streams (the OOD one with its overrides).
            instances = [
                *self.instances("id", count, share=False),
                *self.instances("test", count, share=False),
            ]
            path = self.dir / "attention"
            if self.procs.main:
                path = self.writers.viewer(
                    path,
                    self.model,
                    self.tokenizer,
                    instances,
                    self.prompt,
                    ranking=ranking,
                    intervention=Setting.from_dict(chosen),
                    meta={"model": str(self.model_dir), "task": self.task},
                )
            return {"file": str(path.relative_to(self.dir.parent)), "instances": len(instances)}

        return self.stages.run(f"{self.task}-viewer", settings, compute)


def _sweeps_thresholds(mode: str) -> bool:
    """The mode reads a threshold (conditional), so the grid sweeps `thresholds`."""
    from harness.engine.modes import MODES

    return "threshold" in MODES[mode].reads


# --- quick: train the models first ------------------------------------------------------------
def quick_train_config(cfg: ReproduceConfig, task: str, folder: Path):
    """The TrainConfig of --quick's model for `task`: the task's recipe (`quick_recipe`),
    `cfg.train_steps` instead of its steps when given, one epoch of fresh data."""
    from harness.train import TrainConfig

    recipe = quick_recipe(task)
    steps = cfg.train_steps or recipe["max_steps"]
    return TrainConfig.from_dict(
        {
            **recipe,
            "model": "scratch",
            "output": str(folder),
            "config": task_presets(task)[0],
            "seed": cfg.seed,
            "max_steps": steps,
            "train_size": steps * recipe["batch_size"],
            "save_every": max(steps // 4, 1),
        }
    )


def quick_model(cfg: ReproduceConfig, task: str, out: Path, log) -> str:
    """Train (or resume, or reuse) a tiny scratch Llama on the task's ID preset."""
    from harness.runs import FINAL, latest_checkpoint
    from harness.train import train

    folder = out / "models" / task_short_name(task)
    final = folder / FINAL
    if (final / "config.json").is_file():
        log(f"model for {task}: reusing {final}")
        return str(final)
    config = quick_train_config(cfg, task, folder)
    resume = latest_checkpoint(folder) is not None
    log(f"model for {task}: training {config.max_steps} steps into {folder}")
    return str(train(config, resume=resume, progress=cfg.progress))


# --- the run -------------------------------------------------------------------------------
def reproduce(cfg: ReproduceConfig, writers: Writers) -> Path | None:
    """Run every stage of every task (skipping finished ones) and write the report with
    `writers` (`harness.report.report_md.pipeline_writers()`); returns its path (None in the
    other processes of an `accelerate launch`)."""
    import torch

    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    out = Path(cfg.output)
    procs = Processes(cfg.device)
    if procs.main:
        out.mkdir(parents=True, exist_ok=True)
        record = {"argv": sys.argv, "versions": versions()}
        write_json_atomic(out / SETTINGS_FILE, cfg.to_dict() | record)

    def log(message: str) -> None:
        if procs.main:
            print(f"[reproduce] {message}", file=sys.stderr, flush=True)

    started = time.perf_counter()
    tasks = {}
    for task in cfg.task_list:
        model_dir = cfg.model if cfg.model else quick_model(cfg, task, out, log)
        tasks[task] = TaskRun(cfg, task, model_dir, out, procs, writers).run()
    report = out / REPORT_FILE
    if procs.main:
        writers.report(out, cfg, tasks, seconds=time.perf_counter() - started)
        log(f"report: {report}")
        return report
    return None
