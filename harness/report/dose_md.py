"""The dose-response and two-lookups sections of `OUT/report.md` (harness.report.report_md).

    from harness.report.dose_md import dose_section
    lines = dose_section(task_results, Path("OUT/reversal"), command)

Each returns Markdown lines ([] when the run has no such stage: runs made before the ladder
or the second lookup existed), ending with the command and stage files that made them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.attention.lookup import recorded_lookup
from harness.foundation.stats import format_gain
from harness.foundation.stats import format_number as _n
from harness.report.findings import two_lookups_headline, where
from harness.report.replication_md import replication_line
from harness.report.stability_md import HEADING, shown_word, stability_cell, stability_sentence


def made_by(command: str, detail: str) -> list[str]:
    """The line under a table or figure: the command and the stage files behind it."""
    return [f"Made by `{command}`; {detail}.", ""]


def _where_controlled(test: dict[str, Any]) -> str:
    """Where the ladder ran its controls, when not at every rung."""
    from harness.attention.controls import ladder_controls

    keys = [c.ladder.key for c in ladder_controls()]
    bare = [e for e in test["doses"] if all(e.get(key) is None for key in keys)]
    if not bare:
        return ""
    return (
        " where the verdict reads them (the dose chosen on validation and the top dose; "
        '"-": not run at that dose)'
    )


def _count_choice(dose) -> str:
    """How N was chosen: each count's best validation dose (`verdict.choose_count`)."""
    counts = dose.get("counts")
    if not counts:
        return ""
    parts = [
        f"N = {n}: " + (f"C {d['C']:g}, {d['gain']:+.3f}" if d else "no dose gains")
        for n, d in counts.items()
    ]
    return f" (the best dose of each N: {'; '.join(parts)})"


def dose_section(task, folder: Path, command: str) -> list[str]:
    """The dose-response ladder on OOD test (its plot and table) and the calibrated verdict
    read from it and from where the errors look (`harness.attention.verdicts.calibrated`)."""
    from harness.attention.controls import ladder_controls
    from harness.report import plots

    dose = task.get("dose")
    verdict = task.get("verdict")
    if not dose or not verdict:
        return []
    test = dose["test"]
    path = plots.dose_response(
        test, folder / "dose-response.png", f"{task['task']}: dose-response on OOD test"
    )
    chosen = (verdict["numbers"].get("dose") or {}).get("C")
    heads = ", ".join(f"L{layer}H{head}" for layer, head in test.get("heads", []))
    # each control of the registry that runs on the ladder brings its own columns
    columns = [column for c in ladder_controls() for column in c.ladder.columns(test)]
    header = " | ".join(column.heading for column in columns)
    lines = [
        f"The top {test['n']} heads ({heads}) pushed at each C, with the controls at the same "
        f"dose{_where_controlled(test)}, teacher-forced on {test['instances']} OOD test "
        "instances (gain: teacher-forced "
        "token accuracy over the baseline, paired per instance, 95% interval; following: how "
        "much more often the model writes what the task gives on the moved text). N and the "
        f"dose are chosen on {dose['validation']['instances']} OOD validation instances"
        + _count_choice(dose)
        + ".",
        "",
        f"![dose-response]({path.relative_to(folder.parent)})",
        "",
        f"| C | reference gain | {header} | ID exact |",
        "|---|---|" + "---|" * len(columns) + "---|",
    ]
    for entry in test["doses"]:
        threshold = entry.get("threshold")
        picked = verdict["numbers"].get("dose") or {}
        mark = (
            " (chosen)"
            if entry["strength"] == chosen and threshold == picked.get("threshold")
            else ""
        )
        rung = f"{entry['strength']:g}" + (f", thr {threshold:g}" if threshold is not None else "")
        cells = [column.cell(entry) for column in columns]
        ident = (entry.get("id") or {}).get("tf_exact")
        lines.append(
            f"| {rung}{mark} | {format_gain(entry['reference'])} | "
            f"{' | '.join(cells)} | {_n(ident)} |"
        )
    note = (test.get("random_draws") or {}).get("note")
    lines += ["", *([note + ".", ""] if note else [])]
    lines += [
        f"**Calibrated verdict: {shown_word(verdict)}** (the rule of docs/usage_analysis.md, "
        '"The calibrated verdict"): ' + "; ".join(verdict["reasons"]) + ".",
        "",
        stability_sentence(verdict),
        "",
    ]
    at = task.get("at_dose")
    if at:
        test, ident = at["test"], at["id"]
        lines += [
            f"Free-running at that dose ({at['setting']}): OOD partial accuracy "
            f"{_n(test['baseline']['partial_acc'])} -> {_n(test['treated']['partial_acc'])} "
            f"({format_gain(test['gains']['partial_acc'])} points), OOD exact match "
            f"{_n(test['baseline']['exact_match'])} -> {_n(test['treated']['exact_match'])}; "
            f"ID exact match {_n(ident['baseline']['exact_match'])} -> "
            f"{_n(ident['treated']['exact_match'])}.",
            "",
        ]
    again = replication_line(verdict)
    if again:  # runs made before the replication existed have none
        lines += [again, ""]
    return lines + made_by(command, f"stage `{task['task']}-dose`")


def lookups_section(task, command: str) -> list[str]:
    """Where the run judged a second candidate lookup (`harness.attention.heads.
    second_lookup`: a near tie of two offsets' top heads, or a lookup split across two
    offsets), both lookups: one row each (offset, ID mass, N, dose, errors, verdict, share
    repaired free-running), both verdicts' reasons, and which of the two made it judge both
    (the second lookup's own words)."""
    lookups = task.get("lookups") or []
    if len(lookups) < 2:
        return []
    why = lookups[1].get("text") or "the second candidate lookup is judged too"
    lines = [
        f"{two_lookups_headline(task)} ({why}). The first is the offset the sections above "
        "read (the run's own lookup); the second's "
        "ranking, ladder, diagnosis, verdict and free-running dose have stage files of their "
        f"own (`{lookups[1].get('stage')}-*`).",
        "",
        "| lookup | ID mass | N | dose C | OOD errors (first wrong row) | calibrated verdict | "
        f"{HEADING} | wrong OOD answers repaired free-running |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for entry in lookups:
        lookup = recorded_lookup(entry)
        verdict = entry.get("verdict") or {}
        numbers = verdict.get("numbers") or {}
        dose = (numbers.get("dose") or {}).get("C")
        errors = ", ".join(
            f"{k.replace('_', ' ')} {v:.2f}" for k, v in (numbers.get("errors") or {}).items() if v
        )
        repaired = numbers.get("repaired") or {}
        fixed = (
            f"{repaired['repaired']} of {repaired['wrong']} ({repaired['share']:.2f})"
            if repaired.get("share") is not None
            else "-"
        )
        lines.append(
            f"| {where(lookup['offset'])} | {_n(lookup.get('mass'))} | {entry.get('n', '-')} "
            f"| {'-' if dose is None else f'{dose:g}'} | {errors or '-'} | "
            f"**{shown_word(verdict) if verdict else '-'}** | {stability_cell(verdict)} | "
            f"{fixed} |"
        )
    lines.append("")
    for entry in lookups:
        verdict = entry.get("verdict") or {}
        lines += [
            f"At {where(recorded_lookup(entry)['offset'])}: "
            f"**{shown_word(verdict) if verdict else '-'}**: "
            + "; ".join(verdict.get("reasons") or [])
            + ".",
            "",
        ]
        again = replication_line(verdict)
        lines += [again, ""] if again else []
    return lines + made_by(
        command, f"stages `{lookups[1].get('stage')}-heads`, `-dose`, `-diagnosis`"
    )
