"""The stages of `reproduce` that make and read the lookup: the head ranking that finds it
(stage 3 of `harness.pipeline.reproduce`), then at it the dose ladder, the diagnosis, the
calibrated verdict and its dose free-running (stages 5 to 8, `TaskRun.judge`).

    from harness.pipeline.lookup_stages import run_dose, run_heads
    lookup = run_heads(task_run)             # a `harness.attention.lookup.Lookup`
    dose = run_dose(task_run, lookup)

The lookup is made once, from the ranking's stage (`Lookup.of`), and each later stage
receives it as a value (the offset, the ranking, the lookup heads and their ID levels) with
the results of the stages before it as arguments, so the run's own lookup and the second
candidate of a near tie or split go through the same functions: the second's stages are saved under
its own label (`TaskRun.stage_label`), the first's keep their names.
"""

from __future__ import annotations

from typing import Any

from harness.attention.lookup import Lookup


def swept_thresholds(cfg) -> list[float]:
    """`cfg.thresholds` where the mode reads a threshold (conditional), else none: what the
    grid and the dose ladder sweep."""
    from harness.engine.modes import MODES

    return list(cfg.thresholds) if "threshold" in MODES[cfg.mode].reads else []


def ladder_counts(cfg, lookup: Lookup) -> list[int]:
    """The head counts N the dose ladder chooses among: the grid's (`--counts`, or
    `head_counts` of the model) and the count that holds every lookup head, capped at the
    model's heads."""
    from harness.attention.sweep import head_counts

    total = lookup.ranking.total
    counts = cfg.counts or head_counts(total)
    return sorted({min(int(n), total) for n in (*counts, lookup.covering) if n})


def candidate_text(offset: int, masses: dict[int, float]) -> str:
    """Where the second candidate lookup reads, with the first candidate beside it: "the
    lookup reads the reference (the second candidate lookup): ID mass 0.46, ref+1 0.91".
    `offset_text` says a reference lookup with more mass elsewhere was kept by the margin,
    which is true of the first candidate only: the second is judged because it is one."""
    from harness.attention.heads import offset_text

    how = "(the second candidate lookup)"
    others = {k: v for k, v in masses.items() if k != 0}
    if offset != 0 or not others:
        return offset_text(offset, masses, how)
    k = max(others, key=lambda j: (others[j], -abs(j)))
    return (
        f"the lookup reads the reference {how}: ID mass {masses[0]:.2f}, ref{k:+d} {others[k]:.2f}"
    )


def run_heads(run, candidate: dict[str, Any] | None = None) -> Lookup:
    """The Appendix G ranking on ID instances at the offset where the lookup reads
    (`harness.attention.heads.rank_lookup`: the offset profile's largest top-heads ID
    mass, unless --shift gives one), returned as the lookup every later stage receives
    (`Lookup.of`: how the offset was found is kept in the ranking's source,
    "lookup_offset"). `candidate`: the second candidate of a near tie or split
    (`heads.second_lookup`), ranked at its offset in stage files of its own."""
    from harness.attention.heads import HeadRanking, rank_lookup

    shift = run.cfg.shift if candidate is None else candidate["offset"]
    label = run.label if candidate is None else f"{run.label}-lookup{shift:+d}"
    settings = run.base_settings() | {
        "n": run.cfg.num_heads,
        "threshold": run.cfg.head_threshold,
        "shift": shift,
        # each head's null beside its level (a lookup head beats it): a ranking saved
        # before nulls were measured is ranked again
        "nulls": "uniform over the visible keys",
    }
    if candidate is not None:  # a second candidate at the reference was said to be "kept"
        settings["candidate_text"] = 2

    def compute():
        run.load()
        from attentionspan_datasets.splits import split_instance

        # Every process ranks on all instances: 30 short ID instances are cheap, and the
        # ranking must be the same everywhere.
        instances = [
            split_instance(run.id_name, run.cfg.seed, "validation", i)
            for i in range(run.cfg.num_heads)
        ]
        ranking, offset = rank_lookup(
            run.model,
            run.tokenizer,
            instances,
            run.prompt,
            shift=shift,
            threshold=run.cfg.head_threshold,
            batch_size=run.cfg.batch_size,
            source={
                "model": str(run.model_dir),
                "config": run.id_name,
                "split": "validation",
                "seed": run.cfg.seed,
                "indices": [0, run.cfg.num_heads],
            },
        )
        if candidate is not None:  # found as the second of a near tie or split, not given
            masses = {int(k): v for k, v in candidate["masses"].items()}
            offset = {**candidate, "text": candidate_text(shift, masses)}
        ranking.source["lookup_offset"] = offset
        ranking.source["lookup_heads"] = [list(h) for h in ranking.lookup()]
        # each lookup head's ID level beside its null, and whether one beats it
        ranking.source["lookup_evidence"] = Lookup.of(ranking, offset).evidence
        return ranking.to_dict()

    data = run.stages.run(f"{label}-heads", settings, compute)
    lookup = Lookup.of(HeadRanking.from_dict(data))
    if run.procs.main:
        suffix = "" if candidate is None else f"-lookup{shift:+d}"
        lookup.ranking.save(run.dir / f"heads{suffix}.json")
    return lookup


def run_dose(run, lookup: Lookup) -> dict[str, Any]:
    """The dose-response ladder (`harness.attention.dose`) at the lookup's offset. On the OOD
    validation stream the reference and ID rungs of every count (no controls: they do not
    choose), from which `choose_count` picks N and the verdict its dose; the validation
    stream split by the kind of each instance's first wrong row (`validation_by_kind`: each
    kind of a mixed failure chooses its own dose there); then that N's ladder on the test
    stream with its controls (the shifted pushes at ref+-1, +-2 and +-3, random other heads)
    at every rung the verdict reads (`reading_rungs`: the chosen dose, each kind's and the
    top one), with its ID stream for ID exact match;
    teacher-forced, every process on every instance (it is a few forwards)."""
    from harness.attention.controls import LADDER_POINTER_SHIFTS
    from harness.attention.dose import DEFAULT_DOSES, run_dose_ladders
    from harness.attention.verdicts.calibrated import choose_count, reading_rungs

    cfg = run.cfg
    counts = ladder_counts(cfg, lookup)
    thresholds = swept_thresholds(cfg)
    settings = run.base_settings() | {
        "n_validation": cfg.num_validation,
        "n_test": cfg.num_test,
        "counts": counts,
        "ranking": lookup.key,
        "shift": lookup.offset,
        "lookup": lookup.covering,
        "mode": cfg.mode,
        "thresholds": thresholds,
        "doses": list(DEFAULT_DOSES),
        # not every rung (stages before this: all); each kind's dose too (before: the
        # whole validation curve's alone)
        "controls_at": "reading rungs, each kind's dose",
        # every curve keeps its per-instance values (`verdicts.readings`; before: means only)
        "per_instance": "kept",
        # the test ladder's shifted pushes (before this: ref-3 and ref+3 alone)
        "pointer_shifts": list(LADDER_POINTER_SHIFTS),
    }

    def ladders(ns, instances, id_stream, **controls):
        # every count's ladder in one pass: the baseline and each batch's prefill once, not
        # once per count; each curve is the one its ladder alone gives
        return run_dose_ladders(
            run.model,
            run.tokenizer,
            run.prompt,
            lookup,
            ns,
            instances,
            run.instances(id_stream, share=False) if id_stream else (),
            cfg.batch_size,
            mode=cfg.mode,
            thresholds=thresholds,
            **controls,
        )

    def compute():
        run.load()
        validation = run.instances("validation", share=False)
        by_count = ladders(
            counts, validation, "id_validation", pointer_shifts=(), draws=0, output_scale=False
        )
        n, summary = choose_count(by_count, lookup=lookup.covering)
        by_kind = validation_by_kind(run, lookup, {"n": n, "counts": summary}, by_count[n], ladders)
        # the verdict reads validation's reference and ID rungs only (to choose the doses):
        # the chosen N's are already scored; the controls run on test alone, at the rungs
        # the verdict reads them (the chosen dose, each kind's and the top one)
        controlled = reading_rungs(by_count[n], by_kind)
        test = run.instances("test", share=False)
        return {
            "n": n,
            "counts": {str(k): v for k, v in summary.items()},
            "validation": by_count[n],
            "validation_by_kind": by_kind,
            "test": ladders(
                [n], test, "id", controlled=controlled, pointer_shifts=LADDER_POINTER_SHIFTS
            )[n],
            "controlled": [list(r) for r in controlled],
        }

    return run.stages.run(f"{run.stage_label(lookup)}-dose", settings, compute)


def validation_by_kind(run, lookup: Lookup, chosen, whole, ladders) -> dict[str, Any]:
    """The chosen N's validation ladder (reference rungs) on the instances of each kind of
    error ({kind: curve}): where the heads the diagnosis reads (`diagnosis_heads`) look on
    each wrong validation answer's first wrong row, the instances grouped by that kind, each
    group's curve carrying the whole curve's ID figures (`dose.with_id_of`: ID does not
    depend on which OOD instances are read). What each kind of a mixed failure chooses its
    dose on."""
    from harness.attention.dose import with_id_of

    found = diagnose(run, lookup, diagnosis_heads(lookup, chosen), "validation")
    kinds = found.get("instance_kinds") or {}
    instances = run.instances("validation", share=False)
    out = {}
    for kind in sorted(set(kinds.values())):
        group = [x for x in instances if kinds.get(str(x.index)) == kind]
        curve = ladders([chosen["n"]], group, None, pointer_shifts=(), draws=0, output_scale=False)[
            chosen["n"]
        ]
        out[kind] = with_id_of(curve, whole) | {"kind_instances": len(group)}
    return out


def id_rows(run) -> tuple[list, list]:
    """The ID test stream's instances and free-running baseline records: the rows whose
    correct part calibrates the on-reference test and gives every kind its null."""
    from harness.attention.sweep import BASELINE

    return run.instances("id", share=False), run.score([BASELINE], "id")[BASELINE.name]


def diagnose(run, lookup: Lookup, heads, stream: str, ids=None, compare=None) -> dict[str, Any]:
    """Where `heads` look on each wrong answer of `stream` (free-running baseline records),
    at the lookup's offset, read beside the ID test stream's correct rows (`ids`, from
    `id_rows`; made here when not given); `compare`: other head sets read on the same rows."""
    from harness.attention.diagnosis import where_errors_look
    from harness.attention.sweep import BASELINE
    from harness.engine.scoring import Scorer

    scorer = Scorer(run.model, run.tokenizer, run.prompt, run.cfg.batch_size)
    ids = ids if ids is not None else id_rows(run)
    if stream == "id":
        instances, records = ids  # the ID stream is read once, its null beside it
    else:
        records = run.score([BASELINE], stream)[BASELINE.name]
        instances = run.instances(stream, share=False)
    level = lookup.levels_of(heads)
    return where_errors_look(
        scorer,
        instances,
        records,
        heads,
        shift=lookup.offset,
        level=level,
        id_rows=ids,
        compare=compare,
    )


def diagnosis_heads(lookup: Lookup, dose: dict[str, Any]) -> list[tuple[int, int]]:
    """The heads the diagnosis reads: the ladder's N (chosen on OOD validation by the ladder
    itself, never from the grid's chosen setting) when some count gains; with no gain the
    heads that look up in distribution, not the largest N."""
    counts = dose.get("counts") or {}
    if any(v is not None for v in counts.values()) or not lookup.heads:
        return lookup.top(dose["n"])
    return list(lookup.heads)


def run_diagnosis(run, lookup: Lookup, dose: dict[str, Any]) -> dict[str, Any]:
    """Where the ranked heads look on each wrong answer token, without intervention, on the
    ID and the OOD test streams (`harness.attention.diagnosis`), at the lookup's offset,
    each head's on-reference test calibrated on the ID test stream's correct rows, which are
    also every kind's null; OOD also with the top 1 and top 4 ranked heads (`head_sets`);
    the verdict reads each instance's first wrong row (`diagnosis.BASIS`)."""
    from harness.attention.diagnosis import BASIS, NULL_BASIS

    heads = diagnosis_heads(lookup, dose)
    streams = (("id", run.id_name), ("test", run.ood_name))
    level = lookup.levels_of(heads)
    compare = {f"top-{k}": lookup.top(k) for k in (1, 4)}
    settings = run.base_settings() | {
        "n": run.cfg.num_test,
        "heads": [list(h) for h in heads],
        "shift": lookup.offset,
        "level": level,
        "basis": BASIS,
        "answers": "counted",  # the eval's wrong answers, over-long ones included
        "null": NULL_BASIS,
        "compare": {k: [list(h) for h in v] for k, v in compare.items()},
        "per_instance": "kept",  # each instance's kind and answer, the null per ID instance
    }

    def compute():
        run.load()
        ids = id_rows(run)
        return {
            name: diagnose(run, lookup, heads, stream, ids, compare if stream == "test" else None)
            for stream, name in streams
        }

    return run.stages.run(f"{run.stage_label(lookup)}-diagnosis", settings, compute)


def calibrated_verdict(
    lookup: Lookup, dose: dict[str, Any], diagnosis: dict[str, Any]
) -> dict[str, Any]:
    """The verdict read from the dose curves and the OOD errors' diagnosis (`diagnosis`:
    the OOD stream's; `harness.attention.verdicts.calibrated`; docs/usage_analysis.md, "The
    calibrated verdict"), where the lookup reads said first: every number depends on it;
    whether a lookup exists (`Lookup.evidence`: each lookup head's ID level beside its null)
    is read before anything else."""
    from harness.attention.verdicts.calibrated import calibrated_verdict as verdict_of

    out = verdict_of(
        dose["validation"],
        dose["test"],
        diagnosis,
        dose.get("validation_by_kind"),
        lookup=lookup.evidence,
    )
    if lookup.found:
        out["reasons"].insert(0, lookup.text)
        out["numbers"]["offset"] = dict(lookup.found)
    return out


def verdict_readings(
    lookup: Lookup, dose: dict[str, Any], diagnosis: dict[str, Any]
) -> dict[str, Any] | None:
    """What `calibrated_verdict` read, per instance, kept beside it so that a reader can
    re-derive the verdict from it alone or resample its instances
    (`harness.attention.verdicts.readings`); None for stages made before those values
    were kept."""
    from harness.attention.verdicts.readings import verdict_readings as readings_of

    return readings_of(dose, diagnosis, lookup.evidence, lookup.found or None)


def run_stability(
    run, lookup: Lookup, verdict: dict[str, Any], readings, part: str = "stability"
) -> dict | None:
    """The verdict's stability and flip margin (`harness.attention.verdicts.stability`):
    the verdict derived again from its readings on bootstrap resamples of the instances,
    a stage of its own (the resamples are most of a minute on a 64-instance run); None when
    no readings were kept (stages made before them: reports say "not recorded") or
    --stability-resamples is 0. `part`: the stage's name after the lookup's label (the
    replication's verdict has its own, "replication-stability")."""
    if not readings or not run.cfg.stability_resamples:
        return None
    import hashlib
    import json

    from harness.attention.verdicts import readings as recorded
    from harness.attention.verdicts.rule_version import rule_version
    from harness.attention.verdicts.stability import METHOD, verdict_stability

    resamples = run.cfg.stability_resamples
    digest = hashlib.sha256(json.dumps(readings, sort_keys=True).encode()).hexdigest()
    settings = run.base_settings() | {
        "readings_sha256": digest,  # other readings: another stability
        "verdict": verdict["verdict"],
        "rule": rule_version(),
        "resamples": resamples,
        "method": METHOD,
    }

    def compute():
        return verdict_stability(
            readings,
            recorded.rederive,
            recorded.streams,
            resamples,
            held_fixed=list(readings["held_fixed"].values()),
            rechosen=recorded.RECHOSEN,
        )

    return run.stages.run(f"{run.stage_label(lookup)}-{part}", settings, compute)


def run_at_dose(
    run, lookup: Lookup, dose: dict[str, Any], verdict: dict[str, Any]
) -> dict[str, Any] | None:
    """The verdict's dose free-running: the ladder reads teacher-forced gains, so the push at
    the chosen C is also scored as the model answers on its own (OOD test and ID test,
    paired per instance over the baseline); None when no dose was chosen."""
    from harness.attention.sweep import BASELINE, Setting
    from harness.foundation.stats import gain_table, overall, summarise

    chosen = verdict["numbers"].get("dose")
    if not chosen:
        return None
    setting = Setting(
        heads="top",
        n=len(lookup.top(dose["n"])),
        strength=chosen["C"],
        mode=run.cfg.mode,
        threshold=chosen.get("threshold") or 0.0,
        shift=lookup.offset,
    )
    out: dict[str, Any] = {"setting": setting.name}
    for stream in ("test", "id"):
        records = run.score([BASELINE, setting], stream, lookup)
        base, treated = records[BASELINE.name], records[setting.name]
        out[stream] = {
            "baseline": overall(summarise(base)),
            "treated": overall(summarise(treated)),
            "gains": gain_table(base, treated, per_length=False),
        }
        if stream == "test":
            out["repaired"] = repaired_share(base, treated)
    return out


def note_repaired(verdict: dict[str, Any], at_dose: dict[str, Any] | None) -> None:
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


def lookup_entry(
    results: dict[str, Any], stage: str, lookup: Lookup, text: str = ""
) -> dict[str, Any]:
    """One candidate lookup's judgement, as `results["lookups"]` lists them (the run's own
    first): its offset and ID mass, where its stages are, its ranking's top heads, the
    ladder's N, the diagnosis, the verdict and the dose free-running."""
    dose = results.get("dose") or {}
    entry = {
        "offset": lookup.offset,
        "mass": lookup.mass,
        "evidence": lookup.evidence,
        "stage": stage,
        "heads": [list(h) for h in lookup.ranking.order[:8]],
        "n": dose.get("n"),
        "verdict": results.get("verdict"),
        "readings": results.get("readings"),
        "diagnosis": results.get("diagnosis"),
        "at_dose": results.get("at_dose"),
    }
    if text:  # the second: the sentence naming both candidates, and its whole ladder
        entry["text"] = text
        entry["dose"] = dose
        entry["cpu_s"] = results.get("cpu_s")
    return entry
