"""How a verdict's stability is shown: its word (or "unstable: w1 / w2"), the table cell
"share (flip margin)" and the report's sentence, from the verdict record's "stability"
field (`harness.attention.verdicts.stability.verdict_stability`).

    from harness.report.stability_md import shown_word, stability_cell, stability_sentence
    shown_word(verdict)          # "nudge-repairable", or "unstable: inconclusive / no lookup"
    stability_cell(verdict)      # "0.93 (at most 2)", or "not recorded"
    stability_sentence(verdict)  # the per-task report's line under the verdict

A verdict whose share is under STABLE is never shown as one word. A verdict recorded before
stability was measured (every digest committed before it) says "not recorded": no figure
is made up for it, and its word is shown as it was recorded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.attention.verdicts.stability import STABLE, main_words

NOT_RECORDED = "not recorded"
HEADING = "stability (flip margin)"


def recorded(verdict: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The verdict's stability, or None where it was not measured (an older record)."""
    found = (verdict or {}).get("stability")
    return found if isinstance(found, Mapping) and found.get("share") is not None else None


def unstable(verdict: Mapping[str, Any] | None) -> bool:
    found = recorded(verdict)
    return found is not None and found["share"] < STABLE


def shown_word(verdict: Mapping[str, Any] | None) -> str:
    """The word a reader may take: the verdict's, or "unstable: w1 / w2" (the words the
    resamples take, most taken first) when its share is under STABLE; "none" without one."""
    word = (verdict or {}).get("verdict") or "none"
    if not unstable(verdict):
        return word
    found = recorded(verdict)
    return "unstable: " + " / ".join(main_words(word, found.get("words") or {}))


def margin_text(found: Mapping[str, Any]) -> str:
    """ "at most 2", "exactly 1", "none in 1000": the flip margin, short."""
    margin = found.get("flip_margin")
    if not isinstance(margin, Mapping):
        return f"margin {NOT_RECORDED}"
    if margin.get("margin") is None:
        return f"none in {margin.get('resamples', found.get('resamples'))}"
    return f"{'exactly' if margin.get('exact') else 'at most'} {margin['margin']}"


def stability_cell(verdict: Mapping[str, Any] | None) -> str:
    """The table cell "share (flip margin)": "0.93 (at most 2)"; "not recorded" before
    stability was measured."""
    found = recorded(verdict)
    if found is None:
        return NOT_RECORDED
    return f"{found['share']:.2f} ({margin_text(found)})"


def candidate_verdicts(task: Mapping[str, Any]) -> list[tuple[Mapping[str, Any], Any]]:
    """[(lookup entry, its calibrated verdict)] of each candidate lookup a near tie or a split made
    the run judge, in the run's order; [] when it judged one. The first is the run's own
    lookup: its verdict is the run's where the entry has none."""
    lookups = task.get("lookups") or []
    if len(lookups) < 2:
        return []
    return [
        (e, e.get("verdict") or (task.get("verdict") if not i else None))
        for i, e in enumerate(lookups)
    ]


def task_cell(task: Mapping[str, Any]) -> str:
    """A run's cell: its verdict's; where a near tie or a split judged two candidate lookups whose
    cells differ, both, in the order the verdict column names them ("0.93 (at most 2) /
    0.55 (exactly 1)")."""
    judged = candidate_verdicts(task)
    if not judged:
        return stability_cell(task.get("verdict"))
    cells = [stability_cell(v) for _, v in judged]
    return cells[0] if len(set(cells)) == 1 else " / ".join(cells)


def _changes(margin: Mapping[str, Any]) -> str:
    changes = margin.get("changes") or []
    listed = ", ".join(
        f"{c['stream']} {c['position']} -> a copy of {c['copy_of']}" for c in changes[:6]
    )
    more = f" and {len(changes) - 6} more" if len(changes) > 6 else ""
    return f" ({listed}{more}: then {margin.get('to')})" if listed else ""


def stability_sentence(verdict: Mapping[str, Any] | None) -> str:
    """The per-task report's line under the verdict: the share, what was resampled and held
    fixed, and the flip margin with the instances it changes."""
    found = recorded(verdict)
    if found is None:
        return "Stability not recorded (the verdict was read before stability was measured)."
    sizes = ", ".join(f"{s} {n}" for s, n in (found.get("sizes") or {}).items())
    said = found.get("reported_as") if unstable(verdict) else found.get("word")
    text = (
        f"Stability: {found['share']:.2f} of {found.get('resamples')} bootstrap resamples of "
        f"the instances give {found.get('word')} (each stream resampled on its own"
        + (f": {sizes} instances" if sizes else "")
        + f"); said as **{said}**, as one word only at a share of {STABLE:g} or more"
    )
    for key, head in (("rechosen", "chosen again on each resample"), ("held_fixed", "held fixed")):
        if found.get(key):
            text += f"; {head}: " + "; ".join(found[key])
    margin = found.get("flip_margin")
    if isinstance(margin, Mapping):
        text += (
            f". Flip margin: {margin.get('reported_as')}{_changes(margin)}, found in "
            f"{margin.get('calls')} re-derivations of a budget of {margin.get('budget')}"
        )
    return text + ' (docs/usage_analysis.md, "How stable a verdict is").'
