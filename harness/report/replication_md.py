"""The replication beside the verdict, in words: the report's line, the tables' cell and
docs/results.md's count (`harness.pipeline.replication` reads it; the verdict carries it).

    from harness.report.replication_md import replication_cell, replication_line
    replication_cell(task["verdict"])    # 'no lookup (agrees)', or 'not recorded'
    task_replication_cell(task)          # each candidate lookup's, where a run judged two
    replication_line(task["verdict"])    # the report's sentence under the verdict

A digest or a run made before the replication existed holds none: its cell says "not
recorded", never a word made up; a run made with --no-replicate says so. The replication's
own stability (its record's "stability", from its own readings) is shown as the verdict's
is (`stability_md`): a word under STABLE is said as unstable between the words it takes,
and a record made before it was measured says "stability not recorded".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from harness.attention.lookup import recorded_lookup
from harness.report.findings import where
from harness.report.stability_md import (
    candidate_verdicts,
    margin_text,
    recorded,
    shown_word,
    unstable,
)

NOT_RECORDED = "not recorded"
NOT_RUN = "not run (--no-replicate)"
HEADING = "read again on fresh instances"  # the tables' column


def replication_heading() -> str:
    """The tables' column heading, with its closing bar."""
    return f" {HEADING} |"


def _record(verdict: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    record = (verdict or {}).get("replication")
    return record if isinstance(record, Mapping) else None


def replication_state(verdict: Mapping[str, Any] | None) -> str | None:
    """What became of a verdict's replication: "agree", "differ", "not run" (--no-replicate)
    or NOT_RECORDED (a record made before the replication existed); None where there is no
    calibrated verdict at all."""
    if not verdict:
        return None
    record = _record(verdict)
    if record is None:
        return NOT_RECORDED
    if record.get("skipped") or not record.get("verdict"):
        return "not run"
    return "agree" if record.get("agrees") else "differ"


def replication_cell(verdict: Mapping[str, Any] | None) -> str:
    """The tables' cell: the replication's word and whether it agrees with the verdict's;
    "-" where there is no calibrated verdict at all."""
    state = replication_state(verdict)
    if state is None:
        return "-"
    if state == NOT_RECORDED:
        return NOT_RECORDED
    if state == "not run":
        return NOT_RUN
    agreement = "agrees" if state == "agree" else "differs"
    return f"{shown_word(_record(verdict))} ({agreement})"


def task_replication_cell(task: Mapping[str, Any]) -> str:
    """A run's cell: its verdict's replication; where a near tie or a split judged two candidate
    lookups whose cells differ, each with its offset, in the order and form the verdict
    column names them ("no lookup (agrees) at the reference / downstream (differs) at
    ref+2"), never the two lookups' words run together."""
    judged = candidate_verdicts(task)
    if not judged:
        return replication_cell(task.get("verdict"))
    cells = [replication_cell(v) for _, v in judged]
    if len(set(cells)) == 1:
        return cells[0]
    return " / ".join(
        f"{c} at {where(recorded_lookup(e)['offset'])}" for c, (e, _) in zip(cells, judged)
    )


def stability_phrase(record: Mapping[str, Any]) -> str:
    """The replication's stability, short: "stable 0.93 (flip margin at most 2)"; under
    STABLE (its word then shown as "unstable: w1 / w2") "only 0.55 of the resamples give
    w1 (flip margin exactly 1)"; "stability not recorded" where it was not measured
    (--stability-resamples 0, or a record made before it)."""
    found = recorded(record)
    if found is None:
        return f"stability {NOT_RECORDED}"
    margin = f"(flip margin {margin_text(found)})"
    if unstable(record):
        return f"only {found['share']:.2f} of the resamples give {record.get('verdict')} {margin}"
    return f"stable {found['share']:.2f} {margin}"


def replication_line(verdict: Mapping[str, Any] | None) -> str | None:
    """The report's sentence: "Read again on N fresh instances: **word**, stable 0.93 (flip
    margin ...) (agrees with / differs from the verdict above; how)", with its reasons;
    None without a record."""
    record = _record(verdict)
    if record is None:
        return None
    if record.get("skipped") or not record.get("verdict"):
        return "Not read again on fresh instances (--no-replicate)."
    agrees = "agrees with" if record.get("agrees") else "differs from"
    # where a length has few distinct prompts two draws can write the same one
    shared = {k: v for k, v in (record.get("shared_prompts") or {}).items() if v}
    repeats = ", ".join(f"{k} {v}" for k, v in shared.items())
    repeats = f"; prompts a first-stream row also wrote: {repeats}" if shared else ""
    return (
        f"Read again on {record.get('instances')} fresh instances: **{shown_word(record)}**, "
        f"{stability_phrase(record)} ({agrees} the verdict above; {record.get('stream')}"
        f"{repeats}; the same N and doses, rule {record.get('rule_version')}): "
        + "; ".join(record.get("reasons") or [])
        + "."
    )


def replication_counts(
    verdicts: Iterable[Mapping[str, Any] | None], models: int | None = None
) -> str:
    """docs/results.md's sentence over the calibrated verdicts: how many replications
    agree, differ, were not run and were not recorded. `models`: how many models gave the
    verdicts, said where it is fewer (a run that judged two candidate lookups gives two)."""
    counts = {"agree": 0, "differ": 0, "not run": 0, NOT_RECORDED: 0}
    for verdict in verdicts:
        state = replication_state(verdict)
        if state is not None:
            counts[state] += 1
    total = sum(counts.values())
    if not total:
        return ""
    singular = {"agree": "agrees", "differ": "differs"}  # "1 differs", "2 differ"
    parts = [
        f"{n} {singular.get(word, word) if n == 1 else word}" for word, n in counts.items() if n
    ]
    if counts[NOT_RECORDED] == total:
        return (
            "Read again on a second, disjoint test stream (the same N and doses): not "
            "recorded in these digests (made before the replication existed)."
        )
    whose = (
        f" of the {models} models (each candidate lookup's where a run judged two)"
        if models is not None and models < total
        else ""
    )
    return (
        f"Read again on a second, disjoint test stream (the same N and doses), the "
        f"{total} verdicts{whose}: {', '.join(parts)}."
    )
