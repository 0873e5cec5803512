"""Does attention supervised in distribution generalise? `attentionspan supervision`.

    attentionspan supervision --tasks reversal --seeds 3 --output runs/sup
    python -m harness.commands.supervision --tasks successor --output runs/sup-successor
    from harness.pipeline.supervision_study import run_study
    run_study(SupervisionConfig(tasks=["reversal"]), report=write_report)

The oracle-free test: the reference masks are used only while training on ID data; out of
distribution the models answer with no intervention at all. For each task and seed run k
(init seed k, data seed --seed + k, as `reproduce --seeds`), every arm trains a tiny scratch
model by --quick's recipe (`harness.pipeline.supervision_settings`):
1. the baseline (weight 0) is --quick's own model of that seed run (`task_model`: trained,
   resumed or reused in OUT/models/<task>[-seed<k>]/); its heads are ranked on ID
   instances, and its top N are the heads every supervised arm of the run supervises
   (head identity is fixed by the init: each arm starts from the same weights);
2. the ladder: one model per weight > 0, in OUT/models/<task>[-seed<k>]-w<W>/; the weight
   whose models score best on OOD validation (pooled over seeds) is chosen;
3. the controls at that weight: the wrong mask (ref + shift + --wrong-shift), N random
   heads among the others, and the unsupervised run of (1 + --extra-steps) x the steps;
4. every arm of every seed run is analysed as reproduce does (OUT/arms/stages/): ID and OOD
   test records, Table 2 (`TaskRun.run_attention`), its own head ranking, the supervised
   heads' reference mass per instance, and where the supervised heads look when the model
   errs (`harness.attention.diagnosis.where_errors_look`);
then the numbers over seeds (`harness.pipeline.supervision_stats`) and the verdict
(`harness.attention.verdicts.supervision`) go to
OUT/<task>/results.json, and the report writer the command hands in writes OUT/report.md.
A rerun with the same options reuses every finished model and stage (a model whose run file
records other options is refused, as reproduce refuses).
"""

from __future__ import annotations

import copy
import dataclasses
import random
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from attentionspan_datasets.metrics import METRICS
from harness.attention.verdicts.rule_version import supervision_rule_version
from harness.attention.verdicts.supervision import study_verdict
from harness.pipeline.prepare import (
    check_task_models,
    model_mismatch,
    saved_model,
    task_model,
    task_model_folder,
    task_train_config,
    trained_model,
)
from harness.pipeline.reproduce import STREAMS, TaskRun
from harness.pipeline.settings import TaskValue, seed_run_seeds
from harness.pipeline.stages import write_json_atomic
from harness.pipeline.supervision_settings import (
    BASELINE,
    CONTROL_ROLES,
    RESULTS_FILE,
    SETTINGS_FILE,
    Arm,
    SupervisionConfig,
    control_arms,
    ladder_arms,
)
from harness.pipeline.supervision_stats import (
    STREAMS as SUMMARY_STREAMS,
)
from harness.pipeline.supervision_stats import (
    accuracy,
    gains,
    length_bins,
    mass_gain,
    pooled_diagnosis,
    pooled_mean,
    table2_row,
)

ARMS_DIR = "arms"  # OUT/arms/stages/ and OUT/arms/<label>/heads.json: each arm's analysis
# stream of the study -> stream of TaskRun (the OOD test split is its "test")
TEST_STREAMS = {"id": "id", "ood": "test"}


def heads_text(heads: Sequence[Sequence[int]]) -> str:
    """`0.1,2.3`: the --attention-supervision pairs of `heads`."""
    return ",".join(f"{layer}.{head}" for layer, head in sorted(map(tuple, heads)))


def random_heads(layers: int, per_layer: int, chosen: Sequence, run: int) -> list[list[int]]:
    """As many heads as `chosen`, drawn among the others with a generator seeded by the seed
    run (the same heads on a rerun), sorted."""
    taken = {tuple(h) for h in chosen}
    others = [(la, h) for la in range(layers) for h in range(per_layer) if (la, h) not in taken]
    return sorted([la, h] for la, h in random.Random(run).sample(others, len(taken)))


def head_masses(scorer, instances, sets: dict[str, list], shift: int) -> dict[str, list]:
    """Per instance, the mean weight per target row that each set of heads puts on the
    reference keys moved by `shift` (teacher-forced, one forward per batch): the quantity
    of the head ranking's `per_row` (a row whose moved key falls after its query counts
    0), per instance and averaged over the set's heads. {"index": [...], name: [...]}."""
    from harness.engine.capture import AttentionPlan
    from harness.engine.positions import causal_valid, shift_mask
    from harness.engine.scoring import collate_left

    out: dict[str, list] = {"index": [], **{name: [] for name in sets}}

    def one_batch(chunk, encodings):
        batch = collate_left(encodings, scorer.char_tok.pad_id)
        reference = batch.reference_mask()
        moved = causal_valid(shift_mask(reference, shift), batch.attention_mask)
        plan = AttentionPlan(references={"ref": moved})
        record = scorer.forward(batch, plan, attention_only=True)
        rows = record.named_rows["ref"].nan_to_num(0.0)  # [batch, L, layers, heads]
        counts = reference.any(-1).sum(-1)  # target rows with a reference, per instance
        for b, instance in enumerate(chunk):
            out["index"].append(instance.index)
            for name, heads in sets.items():
                total = sum(float(rows[b, :, la, h].sum()) for la, h in heads)
                out[name].append(total / max(int(counts[b]), 1) / len(heads))

    scorer.run(instances, one_batch)
    return out


def arm_model(config, name: str, log, progress: bool, again: str) -> str:
    """The final model of `config`, trained, resumed or reused (`prepare.trained_model`), the
    reuse only when its run file records the same options (`prepare.model_mismatch`, as
    reproduce refuses its models); otherwise one line naming them, and the model is kept."""
    from harness.foundation.options import option

    folder = Path(config.output)
    saved = saved_model(folder)
    found = None if saved is None else model_mismatch(saved, config)
    if found is not None:
        todo = f"use another --output, or delete {folder} to train it again"
        if found.unknown:
            raise ValueError(f"model {name}: {found.unknown}; {todo}")
        differ = "; ".join(
            f"{option(k)}: recorded {recorded!r}, asked {asked!r}"
            for k, recorded, asked in found.differ
        )
        raise ValueError(
            f"model {name}: {saved} was trained with other options than this run's: "
            f"{differ}; {todo}"
        )
    return trained_model(config, f"model {name}", log, progress, again)[0]


def _train_in_worker(config, name: str, again: str, threads: int) -> str:
    """One model of --jobs, trained in a spawned worker process (torch's threads set anew;
    no progress bar: the workers share the terminal)."""
    import torch

    if threads:
        torch.set_num_threads(threads)

    def log(message: str) -> None:
        print(f"[supervision] {message}", file=sys.stderr, flush=True)

    return arm_model(config, name, log, False, again)


class TaskStudy:
    """Every arm of one task over the seed runs; `run()` returns its results."""

    def __init__(self, cfg: SupervisionConfig, task: TaskValue, out: Path, procs):
        # the value, resolved once by the settings: the arms, runs and folders read it
        self.cfg, self.task, self.out, self.procs = cfg, task, out, procs
        self.repro = cfg.reproduce_config()
        self.short = task.short
        self.id_name, self.ood_name = task.presets
        self.heads: dict[int, dict[str, list]] = {}  # seed run -> supervised, random heads
        self.runs: dict[tuple[int, str], TaskRun] = {}
        self.models: dict[tuple[int, str], str] = {}
        self.scored: dict[tuple[str, str], list] = {}  # (label, stream) -> its records

    def log(self, message: str) -> None:
        print(f"[supervision {self.short}] {message}", file=sys.stderr, flush=True)

    # --- models -------------------------------------------------------------------------
    def folder(self, run: int, arm: Arm) -> Path:
        """OUT/models/<task>[-seed<k>]-<arm>/ (the baseline: --quick's own folder)."""
        return self.out / "models" / f"{self.task.run_name(run)}-{arm.name}"

    def train_config(self, run: int, arm: Arm):
        """The baseline's TrainConfig of seed run `run` (`task_train_config`: the recipe,
        init seed, data seed) with the arm's steps and supervision."""
        folder = self.folder(run, arm)
        base = task_train_config(self.repro, self.task, folder, run)
        values: dict[str, Any] = {}
        if arm.steps != base.max_steps:  # one epoch of fresh data, as the recipe draws it
            values |= {
                "max_steps": arm.steps,
                "train_size": arm.steps * base.batch_size,
                "save_every": max(arm.steps // 4, 1),
            }
        if arm.supervised:
            values |= {
                "attention_supervision": heads_text(self.heads[run][arm.heads]),
                "supervision_weight": arm.weight,
                "supervision_shift": arm.shift,
                "supervision_loss": self.cfg.loss,
            }
        return dataclasses.replace(base, **values)

    def training(self, run: int, arm: Arm):
        """(TrainConfig, name, what resumes it) of one arm's model of one seed run."""
        if arm.role == "baseline":
            folder = task_model_folder(self.out, self.task, run)
            config = task_train_config(self.repro, self.task, folder, run)
        else:
            folder = self.folder(run, arm)
            config = self.train_config(run, arm)
        again = (
            f"the same attentionspan supervision command (--output {self.out}): it "
            f"resumes {folder} and reuses every finished stage"
        )
        return config, f"{self.short} {arm.name} (seed run {run})", again

    def model(self, run: int, arm: Arm) -> str:
        key = (run, arm.name)
        if key not in self.models:
            if arm.role == "baseline":
                path = task_model(self.repro, self.task, self.out, self.log, run)
            else:
                config, name, again = self.training(run, arm)
                path = arm_model(config, name, self.log, self.cfg.progress, again)
            self.models[key] = path
        return self.models[key]

    def train_all(self, pairs: Sequence[tuple[int, Arm]]) -> None:
        """With --jobs N > 1, the models of `pairs` (seed run, arm) trained up to N at once in
        spawned worker processes, before anything asks for them; with one job nothing here
        (each model is trained when first asked for). Each worker trains the TrainConfig made
        here, so a model is the one `model()` would train (the same init, data and steps)."""
        todo = [(run, arm) for run, arm in pairs if (run, arm.name) not in self.models]
        if self.cfg.jobs <= 1 or len(todo) <= 1:
            return
        from harness.pipeline.workers import in_workers

        jobs = min(self.cfg.jobs, len(todo))
        self.log(f"training {len(todo)} models, {jobs} at once (--jobs)")
        calls = [
            (_train_in_worker, (*self.training(run, arm), self.cfg.threads)) for run, arm in todo
        ]
        for i, path in in_workers(calls, jobs):
            run, arm = todo[i]
            self.models[(run, arm.name)] = path

    # --- analysis stages (OUT/arms/stages/<task>-seed<k>-<arm>-*.json) ---------------------
    def task_run(self, run: int, arm: Arm) -> TaskRun:
        key = (run, arm.name)
        if key not in self.runs:
            run_cfg = copy.copy(self.repro)
            run_cfg.seed = seed_run_seeds(self.repro, run)[1]  # its data, as reproduce
            label = f"{self.short}-seed{run}-{arm.name}"
            model = self.model(run, arm)
            task_run = TaskRun(
                run_cfg, self.task, model, self.out / ARMS_DIR, self.procs, None, label
            )
            task_run.stages.log = self.log  # its stage lines under this command's name
            self.runs[key] = task_run
        return self.runs[key]

    def records(self, task_run: TaskRun, stream: str) -> list[dict[str, Any]]:
        """Free-running records of the model on a stream (no intervention), one per
        instance: a stage of its own, whose settings hold the instance count."""
        from tqdm.auto import tqdm

        from harness.attention.interventions import score_settings
        from harness.attention.sweep import BASELINE as NO_INTERVENTION

        key = (task_run.label, stream)
        if key in self.scored:
            return self.scored[key]
        count = getattr(task_run.cfg, STREAMS[stream][2])
        settings = task_run.base_settings() | {"stream": stream, "n": count}

        def compute():
            task_run.load()
            instances = task_run.instances(stream, share=False)
            with tqdm(
                total=len(instances),
                desc=f"{task_run.label} {stream}",
                disable=not self.cfg.progress,
                dynamic_ncols=True,
            ) as bar:
                return score_settings(
                    task_run.model,
                    task_run.tokenizer,
                    instances,
                    [NO_INTERVENTION],
                    None,
                    prompt=task_run.prompt,
                    batch_size=self.cfg.batch_size,
                    on_batch=bar.update,
                )[NO_INTERVENTION.name]

        name = f"{task_run.label}-records-{stream}"
        self.scored[key] = task_run.stages.run(name, settings, compute)
        return self.scored[key]

    def masses(self, task_run: TaskRun, run: int) -> dict[str, Any]:
        """The supervised (and the random-control) heads' reference mass per instance on
        the ID and the OOD test streams."""
        from harness.engine.scoring import Scorer

        sets = self.heads[run]
        settings = task_run.base_settings() | {
            "n": self.cfg.num_test,
            "shift": self.cfg.shift,
            "heads": sets,
        }

        def compute():
            task_run.load()
            scorer = Scorer(
                task_run.model, task_run.tokenizer, task_run.prompt, self.cfg.batch_size
            )
            return {
                stream: head_masses(
                    scorer, task_run.instances(source, share=False), sets, self.cfg.shift
                )
                for stream, source in TEST_STREAMS.items()
            }

        return task_run.stages.run(f"{task_run.label}-masses", settings, compute)

    def diagnosis(self, task_run: TaskRun, run: int, level: float | None) -> dict[str, Any]:
        """Where the supervised heads look on each wrong answer token (ID and OOD test),
        against their ID level in this arm's model."""
        from harness.attention.diagnosis import BASIS, where_errors_look
        from harness.engine.scoring import Scorer

        heads = self.heads[run]["supervised"]
        settings = task_run.base_settings() | {
            "n": self.cfg.num_test,
            "heads": heads,
            "shift": self.cfg.shift,
            "level": level,
            # which rows it reads: a kept run diagnosed under the older rule (every wrong
            # row) is diagnosed again, and only that, under this one
            "basis": BASIS,
        }

        def compute():
            task_run.load()
            scorer = Scorer(
                task_run.model, task_run.tokenizer, task_run.prompt, self.cfg.batch_size
            )
            return {
                stream: where_errors_look(
                    scorer,
                    task_run.instances(source, share=False),
                    self.records(task_run, source),
                    [tuple(h) for h in heads],
                    shift=self.cfg.shift,
                    level=level,
                )
                for stream, source in TEST_STREAMS.items()
            }

        return task_run.stages.run(f"{task_run.label}-diagnosis", settings, compute)

    def analyse(self, run: int, arm: Arm) -> dict[str, Any]:
        """Every figure of one arm's model of one seed run."""
        from harness.attention.diagnosis import id_level

        task_run = self.task_run(run, arm)
        ranking = task_run.run_heads().ranking
        supervised = [tuple(h) for h in self.heads[run]["supervised"]]
        level = id_level(ranking, supervised, self.cfg.shift)
        attention = task_run.run_attention()["results"]
        found = {
            "model": task_run.model_dir,
            "model_sha256": task_run.results["model_sha256"],
            "records": {s: self.records(task_run, source) for s, source in TEST_STREAMS.items()},
            "top_heads": [list(h) for h in ranking.top(self.cfg.heads)],
            "level": level,
            "table2": {name: table2_row(attention[name]) for name in attention},
            "masses": self.masses(task_run, run),
            "diagnosis": self.diagnosis(task_run, run, level),
        }
        task_run.model = task_run.tokenizer = None  # the next arm's model replaces it
        return found

    # --- the study ------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        started = time.perf_counter()
        cfg, seeds = self.cfg, range(self.cfg.seeds)
        ladder = ladder_arms(cfg, self.task)
        self.train_all([(run, ladder[0]) for run in seeds])
        for run in seeds:
            self.log(f"seed run {run}: the baseline and its ID head ranking")
            ranking = self.task_run(run, ladder[0]).run_heads().ranking
            top = [list(h) for h in ranking.top(cfg.heads)]
            self.heads[run] = {
                "supervised": sorted(top),
                "random": random_heads(ranking.num_layers, ranking.num_heads, top, run),
            }
            self.log(
                f"seed run {run}: supervising heads {heads_text(top)} (random control: "
                f"{heads_text(self.heads[run]['random'])})"
            )
        self.train_all([(run, arm) for run in seeds for arm in ladder[1:]])
        for run in seeds:
            for arm in ladder[1:]:
                self.model(run, arm)
        self.log("choosing the weight on OOD validation")
        validation = {
            arm.name: [self.records(self.task_run(run, arm), "validation") for run in seeds]
            for arm in ladder
        }
        chosen, selection = choose_weight(ladder, validation, cfg.metric)
        self.log(f"chosen: {chosen.name} ({cfg.metric} on OOD validation); training the controls")
        controls = control_arms(cfg, chosen.weight, self.task)
        self.train_all([(run, arm) for run in seeds for arm in controls])
        for run in seeds:
            for arm in controls:
                self.model(run, arm)
        arms = [*ladder, *controls]
        analysed = {}
        for arm in arms:
            self.log(f"analysing {arm.name} (ID and OOD test, Table 2, heads, diagnosis)")
            analysed[arm.name] = [self.analyse(run, arm) for run in seeds]
        summary = summarise(arms, analysed, chosen, cfg.metric)
        summary["selection"] = selection
        summary["verdict"] = verdict_of(summary)
        return {
            "task": self.short,
            "id": self.id_name,
            "ood": self.ood_name,
            "ood_overrides": self.repro.ood_for(self.task),
            "seeds": [
                {
                    "run": run,
                    "init_seed": seed_run_seeds(self.repro, run)[0],
                    "data_seed": seed_run_seeds(self.repro, run)[1],
                    "supervised_heads": self.heads[run]["supervised"],
                    "random_heads": self.heads[run]["random"],
                }
                for run in seeds
            ],
            "arms": {
                arm.name: {
                    **arm.to_dict(),
                    "description": arm.describe(),
                    "models": [analysed[arm.name][run]["model"] for run in seeds],
                    "model_sha256": [analysed[arm.name][run]["model_sha256"] for run in seeds],
                    "top_heads": [analysed[arm.name][run]["top_heads"] for run in seeds],
                }
                for arm in arms
            },
            **summary,
            "seconds": round(time.perf_counter() - started, 1),
        }


def choose_weight(
    ladder: Sequence[Arm], validation: dict[str, list[list]], metric: str
) -> tuple[Arm, dict[str, Any]]:
    """The supervised arm of the ladder with the best pooled OOD validation `metric` (ties:
    the smaller weight), and the table it was chosen from."""
    scores = {
        arm.name: pooled_mean([[r[metric] for r in records] for records in validation[arm.name]])
        for arm in ladder
    }
    supervised = [arm for arm in ladder if arm.supervised]
    chosen = max(supervised, key=lambda a: (scores[a.name]["mean"], -a.weight))
    return chosen, {
        "metric": metric,
        "stream": "OOD validation",
        "validation": scores,
        "chosen": chosen.name,
        "weight": chosen.weight,
    }


def verdict_of(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The study's verdict (`harness.attention.verdicts.supervision`) on `summarise`'s
    figures: the values it reads, picked out of the summary, with the version of the rule
    that read it (`supervision_rule_version`)."""
    chosen, metric = summary["chosen"], summary["metric"]
    looks = ((summary["diagnosis"].get(chosen) or {}).get("ood") or {}).get("shares", {})
    return {"rule_version": supervision_rule_version()} | study_verdict(
        chosen=chosen,
        metric=metric,
        gain=summary["gains"]["ood"][chosen][metric],
        versus_controls={
            name: summary["versus_controls"][name][metric] for name in summary["controls"]
        },
        mass_gain=summary["mass_gains"]["ood"][chosen],
        on_reference=looks.get("on_reference"),
        control_roles=summary.get("control_roles", {}),
    )


def summarise(
    arms: Sequence[Arm], analysed: dict[str, list[dict[str, Any]]], chosen: Arm, metric: str
) -> dict[str, Any]:
    """The figures over seeds (`harness.pipeline.supervision_stats`): accuracy and gains
    over the baseline per stream (overall and per length bin), the chosen arm against each
    control, the supervised heads' masses and their gains, the diagnosis, Table 2."""
    base = analysed[BASELINE]
    controls = [arm.name for arm in arms if arm.role in CONTROL_ROLES]
    out: dict[str, Any] = {
        "metric": metric,
        "chosen": chosen.name,
        "controls": controls,
        "control_roles": {arm.name: arm.role for arm in arms if arm.role in CONTROL_ROLES},
        "accuracy": {},
        "gains": {},
        "mass": {},
        "mass_gains": {},
    }
    for stream in SUMMARY_STREAMS:
        base_records = [found["records"][stream] for found in base]
        bins = length_bins(base_records)
        base_masses = [found["masses"][stream] for found in base]
        out["accuracy"][stream], out["gains"][stream] = {}, {}
        out["mass"][stream], out["mass_gains"][stream] = {}, {}
        for arm in arms:
            found = analysed[arm.name]
            records = [f["records"][stream] for f in found]
            out["accuracy"][stream][arm.name] = accuracy(records, METRICS, bins)
            masses = [f["masses"][stream] for f in found]
            out["mass"][stream][arm.name] = {
                key: pooled_mean([m[key] for m in masses]) for key in ("supervised", "random")
            }
            if arm.name != BASELINE:
                out["gains"][stream][arm.name] = gains(base_records, records, METRICS, bins)
                out["mass_gains"][stream][arm.name] = mass_gain(base_masses, masses, "supervised")
    chosen_records = [f["records"]["ood"] for f in analysed[chosen.name]]
    out["versus_controls"] = {
        name: gains([f["records"]["ood"] for f in analysed[name]], chosen_records, METRICS)
        for name in controls
    }
    # did the random-heads control take on its own heads (their mass over the baseline's)
    drawn = next(arm.name for arm in arms if arm.role == "random_heads")
    out["random_heads_mass_gain"] = {
        stream: mass_gain(
            [f["masses"][stream] for f in base],
            [f["masses"][stream] for f in analysed[drawn]],
            "random",
        )
        for stream in SUMMARY_STREAMS
    }
    out["diagnosis"] = {
        arm.name: {
            stream: pooled_diagnosis([f["diagnosis"][stream] for f in analysed[arm.name]])
            for stream in SUMMARY_STREAMS
        }
        for arm in arms
    }
    out["level"] = {arm.name: [f["level"] for f in analysed[arm.name]] for arm in arms}
    out["table2"] = {arm.name: [f["table2"] for f in analysed[arm.name]] for arm in arms}
    return out


def run_study(cfg: SupervisionConfig, report: Callable[..., Path]) -> Path:
    """Every task's study (skipping finished models and stages), each task's results.json,
    then `report(out, cfg, tasks, seconds=...)` (the report layer's writer, handed in by
    the command: the pipeline never imports it); returns its path."""
    import torch

    from harness.engine.scoring import Processes
    from harness.foundation.runs import versions

    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    out = Path(cfg.output)
    procs = Processes(cfg.device)
    repro = cfg.reproduce_config()  # its task values: the tasks, resolved once
    check_task_models(repro, out)  # the baselines: refused before any work
    started = time.perf_counter()
    tasks = {}
    for task in repro.task_values:
        results = TaskStudy(cfg, task, out, procs).run()
        write_json_atomic(out / results["task"] / RESULTS_FILE, results)
        tasks[results["task"]] = results
    # written once the results are: a run refused half-way (an arm's model trained with other
    # options) leaves the settings of the results that are there
    write_json_atomic(
        out / SETTINGS_FILE, cfg.to_dict() | {"argv": sys.argv, "versions": versions()}
    )
    path = report(out, cfg, tasks, seconds=time.perf_counter() - started)
    print(f"[supervision] report: {path}", file=sys.stderr, flush=True)
    return path
