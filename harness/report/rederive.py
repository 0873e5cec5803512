"""Every verdict of a digest computed again from the readings it keeps, and nothing else.

    attentionspan results-doc --rederive docs/quick-run.json   # exit 1 on a disagreement
    from harness.report.rederive import rederive_digest
    lines, agree = rederive_digest(Path("docs/quick-run.json"))

A digest (`harness.report.results_doc.digest`) keeps beside each calibrated verdict what it
read, per instance (`readings`: `harness.attention.verdicts.readings`): the validation
ladder of the chosen N and every count's summary, the test ladder with its controls, the
diagnosis with its null, the lookup's evidence. This reads the verdict again from those
alone, with the function the pipeline reads it with, and says per model (and per candidate
lookup of a near tie or split) the recorded word, the re-derived word and whether they agree; the
same for each verdict's replication (read again on a second test stream, its readings in
its record: `verdict["replication"]["readings"]`, `harness.pipeline.replication`). A digest
made before readings (or the replication) were kept says so per model and fails nothing.

A supervision study's digest (`harness.report.supervision_doc`, a task with `arms`) keeps
the pooled figures its verdict read (`verdict["numbers"]`) and each arm's role: its word
and reason are read again from those with `study_verdict`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.attention.lookup import recorded_lookup

NOT_RECORDED = "not recorded (made before readings were kept)"
REPLICATION_NOT_RECORDED = "no replication recorded (made before the replication existed)"
REPLICATION_NOT_RUN = "not read again (--no-replicate)"


def labelled_verdicts(name: str, task: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """(label, recorded verdict, readings) of each verdict a task holds: its own, and the
    second candidate lookup's of a near tie or split (`lookups[1:]`; the first is the task's)."""
    out = [(name, task.get("verdict"), task.get("readings"))]
    for entry in (task.get("lookups") or [])[1:]:
        if isinstance(entry, Mapping):
            offset = recorded_lookup(entry)["offset"] or 0
            label = f"{name} (lookup at ref{int(offset):+d})"
            out.append((label, entry.get("verdict"), entry.get("readings")))
    return out


def replication_line(label: str, verdict: Any) -> tuple[str, bool]:
    """The line of a verdict's replication (`label`: the verdict's) and whether it passes:
    its recorded word re-derived from the readings its record keeps; a verdict without a
    record, or one made with --no-replicate, says so and passes."""
    record = verdict.get("replication") if isinstance(verdict, Mapping) else None
    label = f"{label} (replication)"
    if not isinstance(record, Mapping):
        return f"{label}: {REPLICATION_NOT_RECORDED}", True
    if record.get("skipped") or not record.get("verdict"):
        return f"{label}: {REPLICATION_NOT_RUN}", True
    return rederive_line(label, record, record.get("readings"))


def rederive_line(label: str, verdict: Any, readings: Any) -> tuple[str, bool]:
    """One verdict's line, and whether it passes (agrees, or has no readings to read)."""
    from harness.attention.verdicts.readings import rederive
    from harness.attention.verdicts.rule_version import rule_version

    word = verdict.get("verdict") if isinstance(verdict, Mapping) else None
    if not isinstance(readings, Mapping):
        return f"{label}: recorded {word or 'no verdict'}; {NOT_RECORDED}", True
    try:
        again = rederive(readings)["verdict"]
    except (KeyError, TypeError, ValueError, IndexError) as error:
        return f"{label}: recorded {word}; the readings cannot be read again: {error}", False
    agree = again == word
    line = f"{label}: recorded {word}, rederived {again}: " + ("agree" if agree else "DISAGREE")
    then, now = readings.get("rule_version"), rule_version()
    if then != now:  # a word read under another rule may differ for that reason alone
        line += f" (recorded under rule {then}, rederived under {now})"
    return line, agree


def rederive_digest(path: Path) -> tuple[list[str], bool]:
    """Each verdict of the digest at `path` re-derived from its readings: the lines (one
    per verdict, then a summary) and whether every one with readings agrees."""
    from harness.report.results_doc import read_digest

    tasks = read_digest(Path(path), "--rederive")["tasks"]
    lines, passed, read = [], True, 0
    for name, task in tasks.items():
        if "arms" in task:  # a supervision study's task
            line, ok = supervision_line(name, task)
            lines.append(line)
            passed &= ok
            read += 1
            continue
        for label, verdict, readings in labelled_verdicts(name, task):
            line, ok = rederive_line(label, verdict, readings)
            again, again_ok = replication_line(label, verdict)
            lines += [line, again]
            passed &= ok and again_ok
            read += isinstance(readings, Mapping) + _replication_read(verdict)
    if not read:
        lines.append(f"{path}: no verdict keeps its readings; nothing re-derived")
    elif passed:
        lines.append(f"{path}: every verdict with readings is re-derived from them alone")
    return lines, passed


def supervision_line(name: str, task: Mapping[str, Any]) -> tuple[str, bool]:
    """A supervision study's verdict read again from the pooled figures its digest keeps
    (`verdict["numbers"]`, the arms' roles): the line, and whether word and reason agree."""
    from harness.attention.verdicts.rule_version import supervision_rule_version
    from harness.attention.verdicts.supervision import study_verdict

    verdict = task.get("verdict") if isinstance(task.get("verdict"), Mapping) else {}
    word, numbers = verdict.get("verdict"), verdict.get("numbers")
    try:  # `numbers` holds study_verdict's arguments, as it recorded them
        versus = numbers["versus_controls"]
        roles = {k: arm["role"] for k, arm in task["arms"].items() if k in versus}
        again = study_verdict(**numbers, control_roles=roles)
    except (KeyError, TypeError, ValueError) as error:
        return f"{name}: recorded {word}; the figures cannot be read again: {error!r}", False
    agree = again["verdict"] == word and again["reason"] == verdict.get("reason")
    line = f"{name}: recorded {word}, rederived {again['verdict']}: " + (
        "agree" if agree else "DISAGREE"
    )
    if again["verdict"] == word and not agree:
        line += f" (the reason differs: {again['reason']!r})"
    then, now = verdict.get("rule_version"), supervision_rule_version()
    if then is None:
        line += f" (recorded before rule versions were, rederived under {now})"
    elif then != now:
        line += f" (recorded under rule {then}, rederived under {now})"
    return line, agree


def _replication_read(verdict: Any) -> bool:
    record = verdict.get("replication") if isinstance(verdict, Mapping) else None
    return isinstance(record, Mapping) and isinstance(record.get("readings"), Mapping)
