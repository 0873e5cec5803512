"""The paper's story for one model and task, end to end, resumable: `attentionspan reproduce`.

    attentionspan reproduce --model runs/rev/final --config reversal --output OUT
    attentionspan reproduce --quick --output OUT          # trains tiny models first (CPU)
    attentionspan reproduce --pretrained smollm2-135m-instruct --tasks reversal --output OUT
    python -m harness.commands.reproduce --model runs/rev/final --config reversal --output OUT
    accelerate launch -m harness.commands.reproduce --model ... # evaluation shared by processes

Stages, in the order `TaskRun.run` takes them, each saved under `OUT/stages/` when it
finishes (a rerun with the same settings skips it; scoring is saved per setting and stream,
`<task>-sweep-<stream>-<setting>.json`, so the sweep resumes mid-way):
1. `eval`: ID and OOD exact match, partial and teacher-forced accuracy (Table 1 analog),
   test split, no intervention (the baseline's scoring files);
2. `attention`: rollout share on reference tokens, correct versus wrong, the instance-aware
   figures beside the paper's pooled Welch test (Table 2 analog;
   `harness.attention.analysis`), under `--score-convention` (paper or authors), with the
   Figure 1 data;
3. `heads`: the Appendix G ranking on ID instances at the offset where the lookup reads
   (also `OUT/<task>/heads.json`), made into the lookup every later stage receives
   (`harness.attention.lookup.Lookup`: the offset, the ranking, the lookup heads and their
   ID levels);
4. `sweep`: top-N heads x C (x threshold) on the OOD validation split, the best setting
   and its controls (random heads, random positions, bottom heads, knock-out) on the OOD
   test split and on ID, paired bootstrap intervals on every gain, and the older
   repair-or-pointer verdict read at that setting;
then, at the lookup (`TaskRun.judge`, `harness.pipeline.lookup_stages`):
5. `dose`: the dose-response ladder (`harness.attention.dose`): N chosen on OOD validation
   from the reference and ID rungs of every count, then that N's whole ladder, controls at
   the rungs the verdict reads, on the test stream;
6. `diagnosis`: where the ladder's heads look on each wrong answer token, without
   intervention, on ID and OOD test (`harness.attention.diagnosis`);
7. `verdict`: the calibrated verdict, read from the dose curves and the diagnosis
   (`harness.attention.verdicts.calibrated`; computed from the two stages above, not saved apart);
8. `at_dose`: the verdict's dose scored free-running on OOD and ID test, paired per
   instance over the baseline (its scoring files);
9. `replication`: the verdict read again on a second test stream, disjoint from the first
   (its rows num_test .. 2*num_test-1, OOD and ID), with N and every dose kept as chosen on
   validation: the test ladder at the same rungs with its controls, the diagnosis, the
   answer counts and the verdict with its readings and stability
   (`harness.pipeline.replication`; off with --no-replicate);
10. `viewer`: `OUT/<task>/attention.html`, the baseline beside the sweep's chosen setting;
then `OUT/report.md` with its figures in `OUT/<task>/` and the settings in
`OUT/settings.json`. Where another offset's top heads weigh within OFFSET_MARGIN of the
largest (a near tie) or have lookup heads of their own (a split;
`harness.attention.heads.second_lookup`), stage 3 ranks again at that second candidate
lookup, a second `Lookup` that stages 5-9 judge in stage files of their own
(`<task>-lookup+1-heads`, ...), and `results["lookups"]` holds both judgements (the first is
the run's own, unchanged). Every step's CPU seconds, as measured when its stage files were
computed, are in `results["cpu_s"]` (the fine-tune's too, `<task>-fine-tune`).

The models come first (`harness.pipeline.prepare`): with --quick each task's model is trained
from scratch into `OUT/models/<task>/`, with --pretrained the given model is fine-tuned there,
either reused or resumed only when its run file records the options this run would train it
with. `--seeds K` runs each task K times, seed run k on a model initialised with seed k
(--pretrained: the pretrained weights, so only the data differ) and on data seed --seed + k
(training and every stage), in `OUT/<task>-seed<k>/` and `OUT/models/<task>-seed<k>/` (run 0
is the run without --seeds, in the task's own folders); report.md says whether their verdicts
agree.
"""

from __future__ import annotations

import copy
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.attention.lookup import Lookup
from harness.attention.verdicts.rule_version import rule_version
from harness.engine.scoring import Processes  # moved beside the engine; re-exported here
from harness.foundation.dispatch import Placement, launched_processes
from harness.foundation.models import resolve_model
from harness.foundation.runs import accelerator_kind, cpu_kind, versions, weights_sha256
from harness.pipeline import lookup_stages, replication
from harness.pipeline.lookup_stages import lookup_entry, note_repaired, swept_thresholds
from harness.pipeline.prepare import (
    check_task_models,
    pretrained_for_run,
    timed_task_model,
    train_options,
)
from harness.pipeline.settings import (  # noqa: F401  (re-exported: the pipeline's options)
    DEVICES,
    PRETRAINED_RECIPES,
    PRETRAINED_SIZES,
    PRETRAINED_TRAIN,
    QUICK_OOD,
    QUICK_RECIPES,
    QUICK_SIZES,
    QUICK_TASKS,
    QUICK_TRAIN,
    REPORT_FILE,
    SETTINGS_FILE,
    ReproduceConfig,
    TaskValue,
    seed_run_seeds,
)
from harness.pipeline.stages import Stages, write_json_atomic


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
    # the replication's OOD and ID test streams: the rows after the first num_test
    **replication.STREAMS,
}


VIEWER_NUM = 25  # instances of each preset in attention.html (2.2 MB for 50 of SmolLM2)


class TaskRun:
    """The stages of one (model, task) pair; results land in `self.results`.

    `label`: the run's name where one task has several (--seeds: `reversal-seed1`), which
    names its stage files (`<label>-heads`), its folder OUT/<label>/ and its results' "task";
    default the task itself, its folder the task's short name."""

    def __init__(
        self,
        cfg: ReproduceConfig,
        task: TaskValue,
        model_dir: str,
        out: Path,
        procs,
        writers: Writers,
        label: str | None = None,
    ):
        self.cfg, self.task, self.model_dir, self.procs = cfg, task, model_dir, procs
        self.writers = writers
        self.label = label or task  # every stage file's name starts with it
        self.id_name, self.ood_name = task.presets
        self.ood = cfg.ood_for(task)
        self.dir = out / (label or task.short)
        self.stages = Stages(out, log=self.log, write=procs.main)
        self.cpu_counted: set[str] = set()  # stage files whose CPU time a step already holds
        self.model = self.tokenizer = self.prompt = None
        self.results: dict[str, Any] = {
            "task": self.label,
            "model": model_dir,
            # the weights the figures come from: a digest that moved can say whether they did
            "model_sha256": weights_sha256(Path(resolve_model(model_dir)[1])),
            "ood": self.ood,
        }

    def log(self, message: str) -> None:
        if self.procs.main:
            print(f"[reproduce {self.label}] {message}", file=sys.stderr, flush=True)

    # the model and its prompt layout, loaded on first use (a fully cached run needs neither)
    def load(self):
        if self.model is None:
            from harness.foundation.dispatch import Placement, check_capture_placement, place_model
            from harness.foundation.models import load_model
            from harness.foundation.runs import read_run_file, saved_prompt

            placement = Placement.of(self.cfg)  # --device-map: split across devices
            self.model, self.tokenizer = load_model(self.model_dir, placement=placement)
            place_model(self.model, self.procs.device)  # a dispatched model stays put
            check_capture_placement(self.model, f"model {str(self.model_dir)!r}")
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
        out, start = [], replication.first_row(self.cfg, stream)
        for i in self.procs.share(count) if share else range(count):
            x = split_instance(name, self.cfg.seed, split, start + i, **overrides)
            x.config = name
            out.append(x)
        return out

    # --- stages ------------------------------------------------------------------------
    def score(self, settings, stream: str, lookup: Lookup | None = None) -> dict[str, list]:
        """Records per setting on one stream, the settings that push ranked heads pushing the
        lookup's; each (stream, setting) is its own stage file, so an interrupted sweep keeps
        what it finished and shares prefills for the rest."""
        from tqdm.auto import tqdm

        from harness.attention.interventions import score_settings

        base = {
            **self.base_settings(),
            "stream": stream,
            # not "n": a setting's own "n" (its head count) would overwrite it
            "num_instances": getattr(self.cfg, STREAMS[stream][2]),
        }

        ranking, key = (None, None) if lookup is None else (lookup.ranking, lookup.key)

        def settings_of(setting):
            # The baseline does not depend on the ranking: Table 1 and the sweep share it.
            ranked = {} if setting.is_baseline else {"ranking": key}
            # under a key of its own: a setting's "seed" (its random draw) must not overwrite
            # the run's data seed, or another --seed would reuse these records
            return base | ranked | {"setting": setting.to_dict()}

        out, todo = {}, []
        for setting in settings:
            self.procs.barrier()
            name = self.stage_name(stream, setting, lookup)
            cached = self.stages.load(name, settings_of(setting))
            if cached is not None:
                out[setting.name] = cached
            else:
                todo.append(setting)
        if todo:
            cpu_start = time.process_time()
            self.load()
            instances = self.instances(stream)
            bar = tqdm(
                total=len(instances),
                desc=f"{self.label} {stream} ({len(todo)} settings)",
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
            # settings scored together share their forwards: each gets an equal part
            cpu = (time.process_time() - cpu_start) / len(todo)
            for setting in todo:
                rows = records[setting.name]
                name = self.stage_name(stream, setting, lookup)
                self.stages.save(name, settings_of(setting), rows, cpu_s=cpu)
                out[setting.name] = rows
        return out

    def stage_label(self, lookup: Lookup | None) -> str:
        """What the stages read at `lookup` are named after: the run's label, or for the
        second candidate of a near tie or split `<label>-lookup+1` (the first's keep their
        names)."""
        if lookup is None or lookup.candidate == 1:
            return self.label
        return f"{self.label}-lookup{lookup.offset:+d}"

    def stage_name(self, stream: str, setting, lookup: Lookup | None = None) -> str:
        label = self.label if setting.is_baseline else self.stage_label(lookup)
        return f"{label}-sweep-{stream}-{setting.name}"

    def run_eval(self) -> dict[str, Any]:
        from attentionspan_datasets.metrics import ALL_METRICS
        from harness.attention.sweep import BASELINE
        from harness.foundation.stats import summarise

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

        return self.stages.run(f"{self.label}-attention", settings, compute)

    def run_heads(self, candidate: dict[str, Any] | None = None) -> Lookup:
        # made beside the stages that read the lookup (`lookup_stages.run_heads`)
        return lookup_stages.run_heads(self, candidate)

    def run_sweep(self, lookup: Lookup) -> dict[str, Any]:
        from harness.attention.sweep import grid, head_counts, run_sweep
        from harness.attention.verdicts.repair_or_pointer import assess

        ranking = lookup.ranking
        counts = self.cfg.counts or head_counts(ranking.total)
        counts = [n for n in counts if n <= ranking.total]
        settings = grid(
            ranking.total,
            counts=counts,
            strengths=self.cfg.strengths,
            mode=self.cfg.mode,
            thresholds=self.cfg.thresholds,
            shift=lookup.offset,
        )
        result = run_sweep(
            lambda todo, stream: self.score(todo, stream, lookup),
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
            "thresholds": swept_thresholds(self.cfg),
            "names": [s.name for s in settings],
        }
        return result

    def run(self) -> dict[str, Any]:
        started = time.perf_counter()
        step = self.timed
        self.log("evaluation (Table 1)")
        self.results["eval"] = step("eval", self.run_eval)
        self.log("attention on reference tokens (Table 2)")
        self.results["attention"] = step("attention", self.run_attention)
        self.log("head ranking")
        lookup = step("heads", self.run_heads)
        self.results["heads_key"] = lookup.key
        self.results["heads"] = lookup.ranking.to_dict()
        self.log("sweep and controls")
        self.results["sweep"] = step("sweep", self.run_sweep, lookup)
        self.judge(lookup, self.results)
        self.log("attention.html (baseline beside the chosen setting)")
        self.results["viewer"] = step("viewer", self.run_viewer, lookup)
        if self.cfg.shift is None:  # --shift: one lookup, the one given
            self.judge_second(lookup)
        self.results["seconds"] = round(time.perf_counter() - started, 1)
        return self.results

    def judge(self, lookup: Lookup, results: dict[str, Any]) -> None:
        """At `lookup`: the dose ladder, the diagnosis, the calibrated verdict and its dose
        free-running (`harness.pipeline.lookup_stages`), each into `results`."""

        def step(name: str, compute: Callable[..., Any], *args) -> Any:
            return self.timed(name, compute, *args, into=results)

        self.log("dose-response ladder (N and C chosen on validation; test)")
        results["dose"] = step("dose", self.run_dose, lookup)
        self.log("where the model looks when it errs, and the calibrated verdict")
        results["diagnosis"] = step("diagnosis", self.run_diagnosis, lookup, results["dose"])
        ood_errors = results["diagnosis"][self.ood_name]
        results["verdict"] = self.calibrated_verdict(lookup, results["dose"], ood_errors)
        # what it read, per instance: a reader re-derives it (`verdicts.readings`)
        results["readings"] = lookup_stages.verdict_readings(lookup, results["dose"], ood_errors)
        # how much the word rests on which instances were drawn (None: not measured)
        stable = step("stability", self.run_stability, lookup, results)
        if stable is not None:
            results["verdict"]["stability"] = stable
        at_dose = (lookup, results["dose"], results["verdict"])
        results["at_dose"] = step("at_dose", self.run_at_dose, *at_dose)
        note_repaired(results["verdict"], results["at_dose"])
        self.replicate(lookup, results, step)

    def replicate(self, lookup: Lookup, results: dict[str, Any], step) -> None:
        """The verdict read again on a second, disjoint test stream with every choice made
        on validation kept (`harness.pipeline.replication`): its stages in
        `results["replication"]`, its record (with its readings and stability) in
        `results["verdict"]["replication"]`."""
        if self.cfg.no_replicate:
            results["verdict"]["replication"] = replication.skipped()
            return
        self.log("the verdict read again on a second, disjoint test stream")
        dose, diagnosis = results["dose"], results["diagnosis"]
        again = step("replication", self.run_replication, lookup, dose, diagnosis)
        results["replication"] = again
        verdict = results["verdict"]
        verdict["replication"] = read = replication.record(self, lookup, dose, again, verdict)
        # how much its word rests on which fresh instances were drawn (None: not measured)
        stable = step("replication_stability", self.run_replication_stability, lookup, read)
        if stable is not None:
            read["stability"] = stable

    def judge_second(self, lookup: Lookup) -> None:
        """Where another offset's top heads weigh near the lookup's (`heads.second_lookup`),
        that second candidate ranked and judged too, with the same model, streams and
        baseline scoring, in stage files of its own; both judgements in
        `results["lookups"]`, the run's own first and its results unchanged."""
        from harness.attention.heads import second_lookup

        candidate = second_lookup(lookup.ranking, lookup.offset)
        if candidate is None:
            return
        self.log(f"{candidate['text']}: judging ref{candidate['offset']:+d} too")
        results = {k: self.results[k] for k in ("task", "model", "model_sha256", "ood")}
        second = self.timed("heads", self.run_heads, candidate, into=results)
        results["heads"] = second.ranking.to_dict()
        self.judge(second, results)
        spent = list(results["cpu_s"].values())
        self.results["cpu_s"]["second_lookup"] = None if None in spent else round(sum(spent), 3)
        self.results["lookups"] = [
            lookup_entry(self.results, self.label, lookup),
            lookup_entry(results, self.stage_label(second), second, candidate["text"]),
        ]

    def timed(self, name: str, compute: Callable[..., Any], *args, into=None) -> Any:
        """`compute(*args)`, its CPU seconds (those of the stage files it made or reused:
        `Stages.cpu`, as measured when each was computed) in `results["cpu_s"][name]` (`into`:
        another results dict, a second lookup's); a file an earlier step already counted
        (the baseline's scoring) is not counted again."""
        start = len(self.stages.touched)
        out = compute(*args)
        # each file once: a step may read a file twice (the replication's evaluation and
        # its diagnosis both read its baseline scoring), and a rerun reads it from the cache
        touched = dict.fromkeys(self.stages.touched[start:])
        names = [n for n in touched if n not in self.cpu_counted]
        self.cpu_counted.update(names)
        results = self.results if into is None else into
        results.setdefault("cpu_s", {})[name] = self.stages.cpu_of(names)
        return out

    # the stages read at one lookup (`harness.pipeline.lookup_stages`), methods of the run all
    # the same: a benchmark (benchmarks/pretrained_analysis.py) counts each stage by its name
    def run_stability(self, lookup: Lookup, results: dict[str, Any]) -> dict[str, Any] | None:
        return lookup_stages.run_stability(self, lookup, results["verdict"], results["readings"])

    def run_dose(self, lookup: Lookup) -> dict[str, Any]:
        return lookup_stages.run_dose(self, lookup)

    def run_diagnosis(self, lookup: Lookup, dose: dict[str, Any]) -> dict[str, Any]:
        return lookup_stages.run_diagnosis(self, lookup, dose)

    def calibrated_verdict(self, lookup: Lookup, dose, ood_errors) -> dict[str, Any]:
        return lookup_stages.calibrated_verdict(lookup, dose, ood_errors)

    def run_at_dose(self, lookup: Lookup, dose, verdict) -> dict[str, Any] | None:
        return lookup_stages.run_at_dose(self, lookup, dose, verdict)

    def run_replication(self, lookup: Lookup, dose, diagnosis) -> dict[str, Any]:
        return replication.run_replication(self, lookup, dose, diagnosis)

    def run_replication_stability(self, lookup: Lookup, record) -> dict[str, Any] | None:
        return replication.run_stability(self, lookup, record)

    def run_viewer(self, lookup: Lookup) -> dict[str, Any]:
        """The interactive viewer beside the attention figures: the first VIEWER_NUM test
        instances of the ID and the OOD preset, the baseline beside the chosen setting. A
        stage of its own, so a finished run loads no model for it."""
        from harness.attention.sweep import Setting

        chosen = self.results["sweep"]["chosen"]
        settings = self.base_settings() | {"n": VIEWER_NUM, "chosen": chosen}
        if self.cfg.num_test < VIEWER_NUM:  # it shows fewer: another --num-test shows others
            settings["num_test"] = self.cfg.num_test

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
                    ranking=lookup.ranking,
                    intervention=Setting.from_dict(chosen),
                    meta={"model": str(self.model_dir), "task": self.task},
                )
            elif self.procs.tensor_parallel:
                # the viewer's forwards need every process's heads (tensor parallelism):
                # the same measurement (`write_viewer`'s defaults), written by the main one
                from harness.attention.viewer_data import build_viewer_data

                build_viewer_data(
                    self.model,
                    self.tokenizer,
                    instances,
                    self.prompt,
                    ranking=lookup.ranking,
                    setting=Setting.from_dict(chosen),
                )
            return {"file": str(path.relative_to(self.dir.parent)), "instances": len(instances)}

        return self.stages.run(f"{self.label}-viewer", settings, compute)


def cpu_totals(
    steps: dict[str, Any], fine_tune: dict[str, Any] | None, trains: bool
) -> dict[str, Any]:
    """A task run's CPU seconds per step (`TaskRun.timed`), first the training's where the
    run trains its model (--quick, --pretrained; None when unknown), and their total (None
    when any part is unknown)."""
    out = dict(steps)
    if trains:
        out = {"fine_tune": (fine_tune or {}).get("cpu_s"), **steps}
    parts = list(out.values())
    out["total"] = None if None in parts else round(float(sum(parts)), 3)
    return out


# --- the run -------------------------------------------------------------------------------
def reproduce(cfg: ReproduceConfig, writers: Writers) -> Path | None:
    """Run every stage of every task (skipping finished ones) and write the report with
    `writers` (`harness.report.report_md.pipeline_writers()`); returns its path (None in the
    other processes of an `accelerate launch`)."""
    import torch

    out = Path(cfg.output)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    procs = Processes(cfg.device, tensor_parallel=Placement.of(cfg).tensor_parallel)
    Placement.of(cfg).check_processes(procs.world)

    def log(message: str) -> None:
        if procs.main:
            print(f"[reproduce] {message}", file=sys.stderr, flush=True)

    provenance = pretrained_for_run(cfg, procs, log) if cfg.pretrained else None
    check_task_models(cfg, out)  # a reused model that differs: refused before any work
    if procs.main:
        out.mkdir(parents=True, exist_ok=True)
        record: dict[str, Any] = {"argv": sys.argv, "versions": versions()}
        record["processes"] = launched_processes()  # several: sharded by heads (--tp-plan)
        # what decides whether a digest reproduces bit for bit: the kernels and the rule
        record["cpu"], record["rule_version"] = cpu_kind(), rule_version()
        gpu = accelerator_kind(procs.device)  # a GPU run: its kernels, not the CPU's, round
        if gpu is not None:
            record["accelerator"] = gpu
        if provenance is not None:
            record["pretrained_source"] = provenance
        if cfg.trains_models:  # the options each model is (or was) trained with
            record["train_options"] = train_options(cfg, out)
        write_json_atomic(out / SETTINGS_FILE, cfg.to_dict() | record)

    started = time.perf_counter()
    tasks = {}
    for task in cfg.task_values:
        for run in range(cfg.seeds):  # --seeds: run k on init seed k, data seed `seed` + k
            init_seed, data_seed = seed_run_seeds(cfg, run)
            run_cfg = cfg
            if run:  # the same options on this run's data seed (its stages, its data)
                run_cfg = copy.copy(cfg)
                run_cfg.seed = data_seed
            fine_tune = None
            if cfg.model:
                model_dir = cfg.model
            else:
                model_dir, fine_tune = timed_task_model(cfg, task, out, log, run, procs.main)
            label = None if run == 0 else task.run_name(run)
            task_run = TaskRun(run_cfg, task, model_dir, out, procs, writers, label=label)
            results = task_run.run()
            results["cpu_s"] = cpu_totals(results["cpu_s"], fine_tune, not cfg.model)
            if provenance is not None:
                results["pretrained"] = provenance
            if cfg.seeds > 1:
                results["seed_run"] = {
                    "task": task,
                    "run": run,
                    # --pretrained: every seed run starts from the same weights
                    "init_seed": "pretrained" if cfg.pretrained else init_seed,
                    "data_seed": data_seed,
                }
            tasks[task_run.label] = results
    report = out / REPORT_FILE
    if procs.main:
        writers.report(out, cfg, tasks, seconds=time.perf_counter() - started)
        log(f"report: {report}")
        return report
    return None
