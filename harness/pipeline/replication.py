"""The calibrated verdict read again on fresh instances: the replication stage of `reproduce`.

    from harness.pipeline.replication import record, run_replication
    again = run_replication(task_run, lookup, dose, diagnosis)   # stage files of its own
    verdict["replication"] = record(task_run, lookup, dose, again, verdict)
    stable = run_stability(task_run, lookup, verdict["replication"])  # None: not measured

The same model, the same lookup and every choice made on validation (the ladder's N, the
dose C, each kind's dose: the validation curves are the first reading's, so nothing is
chosen again) read on a second test stream: the test ladder at the same reading rungs with
its controls, the diagnosis beside its null (its own ID rows), the evaluation's answer
counts, and the verdict from the same code (`TaskRun.calibrated_verdict`) under the same
rule version. The record keeps what that verdict read, per instance (`readings`, as the
first reading's `results["readings"]`: a digest keeps the verdict whole, so
`results-doc --rederive` reads this word again too) and, from them, its own stability and
flip margin (`run_stability`, with the first reading's --stability-resamples). What it
rules out: a word that is the noise of one sample of test instances. What it does not:
another seed's model, another CPU's rounding (docs/usage_analysis.md, "Read again on fresh
instances").

The second stream is rows `num_test .. 2*num_test - 1` of the same test split and data seed
(OOD preset with its overrides, and the ID preset), the rows that follow the first stream's
`0 .. num_test - 1`. Disjoint by construction: each row is its own draw, from the generator
seeded by (config, seed, split, index) (`attentionspan_datasets.splits.split_instance`), so
the two streams share no row and each is reproducible from (config, seed, index). Another
data seed is not used: `--seeds` runs seed run k on data seed `--seed + k`, so the
replication of run 0 would be run 1's own test stream. Where a length has few distinct
prompts two draws can write the same prompt, as they can within one stream (the test split
is a sample of the generator, repeats and all); the record counts those shared prompts.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from harness.attention.lookup import Lookup

OOD_STREAM, ID_STREAM = "replication", "id_replication"
# stream -> (which preset, split, size option), as `reproduce.STREAMS`; rows from FIRST_ROW
STREAMS = {OOD_STREAM: ("ood", "test", "num_test"), ID_STREAM: ("id", "test", "num_test")}
FIRST_ROW = "num_test"  # the option whose value is the first row: after the first stream's
SKIPPED = "--no-replicate: not read again"


def first_row(cfg, stream: str) -> int:
    """The index of a stream's first row: past the first test stream's for the replication's
    streams, 0 for every other."""
    return int(getattr(cfg, FIRST_ROW)) if stream in STREAMS else 0


def stream_text(cfg) -> str:
    start = first_row(cfg, OOD_STREAM)
    return (
        f"test split rows {start}..{start + cfg.num_test - 1} of data seed {cfg.seed} (OOD and "
        f"ID presets), after the first stream's rows 0..{start - 1}: other draws, the same "
        "distribution"
    )


def _sha(value: Any) -> str:
    """SHA-256 of a stage's result as JSON: the replication repeats this very reading, so a
    first reading computed again with other figures makes the replication stale too."""
    text = json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _settings(run, lookup: Lookup, original: Any) -> dict[str, Any]:
    return run.base_settings() | {
        "stream": OOD_STREAM,
        "first_row": first_row(run.cfg, OOD_STREAM),
        "n_test": run.cfg.num_test,
        "ranking": lookup.key,
        "shift": lookup.offset,
        "original": _sha(original),
    }


def run_ladder(run, lookup: Lookup, dose: dict[str, Any]) -> dict[str, Any]:
    """The chosen N's ladder on the replication stream, its ID stream for ID exact match and
    the controls at the first reading's rungs (`dose["controlled"]`), as `run_dose` reads
    its test stream (the same arguments: keep them alike)."""
    from harness.attention.dose import DEFAULT_DOSES, run_dose_ladders
    from harness.pipeline.lookup_stages import swept_thresholds

    cfg, n = run.cfg, int(dose["n"])
    thresholds = swept_thresholds(cfg)
    # the rungs that carried controls on the first stream (None there: every rung)
    rungs = dose.get("controlled")
    controlled = None if rungs is None else [tuple(r) for r in rungs]
    settings = _settings(run, lookup, dose) | {
        "n": n,
        "mode": cfg.mode,
        "thresholds": thresholds,
        "doses": list(DEFAULT_DOSES),
        "controlled": rungs,
    }

    def compute():
        run.load()
        curves = run_dose_ladders(
            run.model,
            run.tokenizer,
            run.prompt,
            lookup,
            [n],
            run.instances(OOD_STREAM, share=False),
            run.instances(ID_STREAM, share=False),
            cfg.batch_size,
            mode=cfg.mode,
            thresholds=thresholds,
            controlled=controlled,
        )
        return curves[n]

    return run.stages.run(f"{run.stage_label(lookup)}-replication-dose", settings, compute)


def run_diagnosis(run, lookup: Lookup, dose: dict[str, Any], first: dict[str, Any]) -> dict:
    """Where the same heads look on each wrong answer of the replication's ID and OOD
    streams, beside the null of its own ID rows, as `lookup_stages.run_diagnosis` reads the
    first (`first`: that reading, whose change makes this one stale)."""
    from harness.attention.diagnosis import BASIS, NULL_BASIS
    from harness.attention.sweep import BASELINE
    from harness.pipeline.lookup_stages import diagnose, diagnosis_heads

    heads = diagnosis_heads(lookup, dose)
    compare = {f"top-{k}": lookup.top(k) for k in (1, 4)}
    settings = _settings(run, lookup, first) | {
        "heads": [list(h) for h in heads],
        "level": lookup.levels_of(heads),
        "basis": BASIS,
        "null": NULL_BASIS,
        "answers": "counted",
        "compare": {k: [list(h) for h in v] for k, v in compare.items()},
    }

    def compute():
        run.load()
        rows = run.score([BASELINE], ID_STREAM)[BASELINE.name]
        ids = (run.instances(ID_STREAM, share=False), rows)
        return {
            run.id_name: diagnose(run, lookup, heads, "id", ids),
            run.ood_name: diagnose(run, lookup, heads, OOD_STREAM, ids, compare),
        }

    return run.stages.run(f"{run.stage_label(lookup)}-replication-diagnosis", settings, compute)


def run_eval(run) -> dict[str, Any]:
    """ID and OOD exact match and partial accuracy of the replication's streams, no
    intervention (the baseline's scoring files, which the diagnosis reads too)."""
    from attentionspan_datasets.metrics import ALL_METRICS
    from harness.attention.sweep import BASELINE
    from harness.foundation.stats import summarise

    table = {}
    for stream, name in ((ID_STREAM, run.id_name), (OOD_STREAM, run.ood_name)):
        table[name] = summarise(run.score([BASELINE], stream)[BASELINE.name], ALL_METRICS)
    return table


def shared_prompts(run) -> dict[str, int]:
    """Per preset, how many of the replication's prompts a first-stream row also wrote
    (0 but where a length has only a few distinct prompts)."""
    out = {}
    for first, again, name in (("test", OOD_STREAM, run.ood_name), ("id", ID_STREAM, run.id_name)):
        seen = {x.prompt for x in run.instances(first, share=False)}
        out[name] = sum(x.prompt in seen for x in run.instances(again, share=False))
    return out


def run_replication(run, lookup: Lookup, dose: dict[str, Any], diagnosis: dict) -> dict:
    """The replication's evaluation, test ladder and diagnosis (each a stage file or the
    baseline's scoring files, so an interrupted run resumes), and how its stream was made."""
    start = first_row(run.cfg, OOD_STREAM)
    return {
        "stream": stream_text(run.cfg),
        "indices": [start, start + run.cfg.num_test],
        "instances": run.cfg.num_test,
        "shared_prompts": shared_prompts(run),
        "eval": run_eval(run),
        "test": run_ladder(run, lookup, dose),
        "diagnosis": run_diagnosis(run, lookup, dose, diagnosis),
    }


def record(
    run, lookup: Lookup, dose: dict[str, Any], again: dict[str, Any], verdict: dict[str, Any]
) -> dict[str, Any]:
    """The verdict read on the replication (`run_replication`) by the same code, the
    validation curves and so every choice the first reading's: the record the verdict
    carries (its word, reasons and numbers, whether the word agrees, the rule version, and
    what it read per instance, `readings`: `lookup_stages.verdict_readings` of the same
    dose stage with the replication's test ladder and diagnosis, so that a digest, which
    keeps the verdict whole, re-derives this word too; None for stages made before
    per-instance values were kept)."""
    from harness.attention.verdicts.rule_version import rule_version
    from harness.pipeline.lookup_stages import verdict_readings

    replicated = {**dose, "test": again["test"]}  # validation, N, rungs: the first reading's
    diagnosis = again["diagnosis"][run.ood_name]
    read = run.calibrated_verdict(lookup, replicated, diagnosis)
    scores = {
        name: {k: v.get(k) for k in ("exact_match", "partial_acc")}
        for name, v in again["eval"].items()
    }
    return {
        "stream": again["stream"],
        "indices": again["indices"],
        "instances": again["instances"],
        "shared_prompts": again["shared_prompts"],
        "rule_version": rule_version(),
        "verdict": read["verdict"],
        "reasons": read["reasons"],
        "numbers": {**read["numbers"], "eval": scores, "n": dose.get("n")},
        "agrees": read["verdict"] == verdict["verdict"],
        "readings": verdict_readings(lookup, replicated, diagnosis),
    }


def run_stability(run, lookup: Lookup, read: dict[str, Any]) -> dict[str, Any] | None:
    """The replication's stability and flip margin, from its own readings (`read`: its
    record), as the first reading's (`lookup_stages.run_stability`, the same
    --stability-resamples, 0 = not measured), in a stage of its own; None when not measured
    or no readings were kept."""
    from harness.pipeline.lookup_stages import run_stability as stability_of

    return stability_of(run, lookup, read, read.get("readings"), part="replication-stability")


def skipped() -> dict[str, Any]:
    """The record of a run made with --no-replicate: said, never a word made up."""
    return {"skipped": SKIPPED}
