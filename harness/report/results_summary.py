"""docs/results.md's opening conclusion, generated from the committed reproduce digests
(docs/quick-run*.json), so that it changes when they do.

    from harness.report.results_summary import render_summary, write_summary
    text = render_summary(REPO / "docs")        # the block, from every quick-run*.json
    write_summary(REPO / "docs" / "results.md")  # replace the block between its markers

It says, per task and over its seed runs, how well the models learnt in and out of
distribution and which calibrated verdicts they got, then how many models are
nudge-repairable (the reading the paper's causal claim needs). Digests of runs made before
the calibrated verdict existed are named as such. `results_doc` rewrites this block each
time it writes a digest's block; a test renders it from the committed digests and compares.
"""

from __future__ import annotations

import math
import textwrap
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from attentionspan_datasets.jsonfile import read_json
from harness.attention.verdicts.vocabulary import NUDGE_REPAIRABLE as REPAIRABLE
from harness.foundation.runs import accelerator_words
from harness.report.blocks import replace_block, rewrite_block
from harness.report.findings import verdict_name
from harness.report.replication_md import replication_counts, replication_state
from harness.report.stability_md import (
    NOT_RECORDED,
    candidate_verdicts,
    recorded,
    shown_word,
    task_cell,
)
from harness.report.stability_md import unstable as is_unstable

BEGIN = (
    "<!-- results-summary: generated from docs/quick-run*.json by "
    "harness/report/results_summary.py; do not edit -->"
)
END = "<!-- /results-summary -->"

# ID test exact match at or above which the summary says a model "learns its task"; the
# opening counts the models under it instead of letting a span hide them.
LEARNT = 0.95


def read_digests(folder: Path) -> list[dict[str, Any]]:
    """Every quick-run*.json digest in `folder`: `--quick`'s own first, then by name."""
    paths = sorted(Path(folder).glob("quick-run*.json"), key=lambda p: (p.stem != "quick-run", p))
    return [json_safe(read_json(p, expect=dict)) for p in paths]


def json_safe(value: Any) -> Any:
    """`value` with every non-finite number (a gain over no rows is NaN) as None, so a digest
    is strict JSON (`null`: not measured) that every JSON reader parses, and `check` compares
    a committed digest with a fresh one alike."""
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_safe(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _task(name: str, results: Mapping[str, Any]) -> str:
    """A seed run's task (its results say), else the digest's name for it (the task's)."""
    return (results.get("seed_run") or {}).get("task") or name


def _span(values: list[float]) -> str:
    low, high = min(values), max(values)
    return f"{low:.2f}" if round(low, 2) == round(high, 2) else f"{low:.2f}-{high:.2f}"


def role_scores(results: Mapping[str, Any], role: str) -> Mapping[str, Any]:
    """The eval scores of the run's ID (`role` "id") or OOD ("ood") test stream ({} when
    it has none)."""
    for config, scores in (results.get("eval") or {}).items():
        if config.endswith(f"_{role}"):
            return scores
    return {}


def _exact(results: Mapping[str, Any], role: str) -> float | None:
    """The exact match of the run's ID (`role` "id") or OOD ("ood") test stream."""
    exact = role_scores(results, role).get("exact_match")
    return None if exact is None else float(exact)


def _counts(verdicts: list[str]) -> str:
    seen: dict[str, int] = {}
    for v in verdicts:
        seen[v] = seen.get(v, 0) + 1
    return ", ".join(f"*{v}*" + (f" x{n}" if n > 1 else "") for v, n in seen.items())


def _stabilities(results: list[Mapping[str, Any]]) -> str:
    """Each run's stability, "share (flip margin)" ("; stability not recorded" for digests
    made before it was measured)."""
    cells = [task_cell(r) for r in results]
    if all(c == NOT_RECORDED for c in cells):
        return f"; stability {NOT_RECORDED}"
    return "; stability " + ", ".join(cells)


def _kernels(data: Mapping[str, Any]) -> str | None:
    """Where torch's kernels rounded the digest's floats, in words: the CPU's kernel set
    ("with AVX512 kernels"), or a GPU run's GPU ("on the NVIDIA H200 GPU, CUDA 13.0", as
    every report names it: `accelerator_words`); None: not recorded."""
    meta = data.get("meta") or {}
    gpu = meta.get("accelerator")
    if isinstance(gpu, Mapping):
        return f"on the {accelerator_words(gpu)}"
    cpu = meta.get("cpu")
    kernels = cpu.get("kernels") if isinstance(cpu, Mapping) else None
    return f"with {kernels} kernels" if kernels else None


def _models(kernels: list[str | None]) -> str:
    """ "3 models"; where the task's models were trained with different kernel sets (the
    same recipe retrained with floats rounded otherwise), how many with each."""
    n = len(kernels)
    text = f"{n} model{'s' if n > 1 else ''}"
    if len(set(kernels)) < 2:
        return text
    counts = Counter(k or "with unrecorded kernels" for k in kernels)
    return text + ": " + ", ".join(f"{c} {k}" for k, c in counts.items())


def _judged(results: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A run's calibrated verdicts: each candidate lookup's where the run judged two."""
    verdicts = [v for _, v in candidate_verdicts(results)] or [results.get("verdict")]
    return [v if isinstance(v, Mapping) else {} for v in verdicts]


def _read_again(results: Mapping[str, Any]) -> str:
    """One model's replication, over its candidate lookups: "alike" where every one reads
    again as it did, "differs" where one does not, "not recorded" (a digest made before the
    replication) or "not run" (--no-replicate) where one was not read again."""
    # a candidate lookup judged without a verdict of its own has no replication either
    states = [replication_state(v) or NOT_RECORDED for v in _judged(results)]
    if NOT_RECORDED in states:
        return NOT_RECORDED
    if "not run" in states:
        return "not run"
    return "alike" if set(states) == {"agree"} else "differs"


def _replications(results: list[Mapping[str, Any]]) -> str:
    """How the task's models read again on fresh instances, counted per model: "; read
    again alike x3", "; read again: alike x2, differs", "; read again: not recorded x3"."""
    counts = Counter(_read_again(r) for r in results)
    listed = ", ".join(word + (f" x{n}" if n > 1 else "") for word, n in counts.items())
    return f"; read again {listed}" if set(counts) == {"alike"} else f"; read again: {listed}"


def _firm(verdict: Mapping[str, Any]) -> bool:
    """A round-3 verdict that holds: stable, and read again alike on fresh instances."""
    replication = verdict.get("replication") or {}
    return (
        not is_unstable(verdict)
        and replication_state(verdict) == "agree"
        and not is_unstable(replication)
    )


def _cause(verdicts: list[Mapping[str, Any]], there: str = "") -> str:
    """Models differ where every word holds (`_firm`); else the instances drawn may."""
    if all(_firm(v) for v in verdicts):
        return (
            f"each word{there} is stable and read again alike: the models differ, not the instances"
        )
    return f"not every word{there} is stable and read again alike: the instances drawn may be why"


def _why_they_differ(results: list[Mapping[str, Any]]) -> str:
    """What the stability and the replications say of models whose words differ: the
    models differ (every word stable and read again alike), the instances drawn may (some
    word unstable or read otherwise on fresh instances), or not measured. Where near ties or splits
    made runs judge a second candidate lookup and every run's first reads the same word,
    that agreement is said first and the cause is read at the second lookups alone."""
    verdicts = [v for r in results for v in _judged(r)]
    read_again = [_read_again(r) for r in results]
    if any(recorded(v) is None for v in verdicts) or not set(read_again) <= {"alike", "differs"}:
        return "whether the models or the instances drawn differ is not measured"
    firsts = [_judged(r)[0] for r in results]
    seconds = [v for r in results for v in _judged(r)[1:]]
    words = {shown_word(v) for v in firsts}
    if not seconds or len(words) > 1:
        return _cause(verdicts)
    held = ", each stable and read again alike" if all(_firm(v) for v in firsts) else ""
    return (
        f"at its first candidate lookup every model reads *{words.pop()}*{held}; "
        f"at the second {_cause(seconds, ' there')}"
    )


def task_lines(digests: list[Mapping[str, Any]]) -> tuple[list[str], dict[str, list[str]]]:
    """One bullet per task (its seed runs together, and the same recipe retrained with
    other kernels: all are the task's retrained models) and {task: its calibrated
    verdicts}."""
    runs: dict[str, list[Mapping[str, Any]]] = {}
    kernels: dict[str, list[str | None]] = {}
    for data in digests:
        model = (data.get("meta") or {}).get("model")  # a --pretrained run's model
        for name, results in data["tasks"].items():
            task = _task(name, results) + (f", {model} fine-tuned" if model else "")
            runs.setdefault(task, []).append(results)
            kernels.setdefault(task, []).append(_kernels(data))
    lines, verdicts = [], {}
    for task, results in runs.items():
        ids = [x for x in (_exact(r, "id") for r in results) if x is not None]
        oods = [x for x in (_exact(r, "ood") for r in results) if x is not None]
        # two candidate lookups whose verdicts differ: both, each with its offset
        called = [verdict_name(r) if r.get("verdict") else None for r in results]
        models = _models(kernels[task])
        retrained = "retrained models" if len(set(kernels[task])) > 1 else "seeds"
        learnt = f"ID exact {_span(ids)}, OOD exact {_span(oods)}" if ids and oods else ""
        if all(called):
            verdicts[task] = called
            agree = (
                ""
                if len(results) == 1
                else (
                    f" (the {retrained} agree)"
                    if len(set(called)) == 1
                    else f" (the {retrained} differ: {_why_they_differ(results)})"
                )
            )
            said = f"{_counts(called)}{agree}{_stabilities(results)}{_replications(results)}"
        else:
            said = "measured before the calibrated verdict: no calibrated verdict yet"
        lines.append(f"- **{task}** ({models}; {learnt}): {said}.")
    return lines, verdicts


def _opening(ids: list[float], oods: list[float]) -> str:
    """How many models learn their task in distribution, and how they do out of it."""
    if not ids or not oods:
        return "The digests here hold no ID and OOD test exact match to summarise."
    learnt = sum(x >= LEARNT for x in ids)
    every = learnt == len(ids)
    who = "Every model here learns its" if every else f"{learnt} of {len(ids)} models learn their"
    return (
        f"{who} task in distribution (test exact match {LEARNT:.2f} or more; all "
        f"{_span(ids)}), and all fail longer inputs (out of distribution {_span(oods)}), as "
        "the paper's models do."
    )


def render_summary(folder: Path) -> str:
    """The block, from every digest in `folder`."""
    digests = read_digests(folder)
    if not digests:  # a page whose digests lie elsewhere (or not yet): said, never a crash
        note = f"No digest (quick-run*.json) lies beside this page in {folder} yet."
        return "\n".join([BEGIN, "", note, "", END])
    lines, verdicts = task_lines(digests)
    models = sum(len(v) for v in verdicts.values())
    # "1 of 2 models of addition, ..." per task with a nudge-repairable model
    repairable = [
        f"{v.count(REPAIRABLE)} of {len(v)} model{'s' if len(v) > 1 else ''} of {t}"
        for t, v in sorted(verdicts.items())
        if REPAIRABLE in v
    ]
    ids = [x for d in digests for r in d["tasks"].values() if (x := _exact(r, "id")) is not None]
    oods = [x for d in digests for r in d["tasks"].values() if (x := _exact(r, "ood")) is not None]
    opening = _opening(ids, oods)
    if repairable:
        verdict = (
            f"Of the {models} models with a calibrated verdict, the {REPAIRABLE} ones "
            f"(the reading the paper's causal claim needs) are {'; '.join(repairable)}."
        )
    else:
        verdict = (
            f"None of the {models} models with a calibrated verdict is *{REPAIRABLE}*, the "
            "reading the paper's causal claim needs: where a push gains, the controls at the "
            "same dose or where the model looks when it errs say it is not a mended lookup."
        )
    return "\n".join(
        [
            BEGIN,
            "",
            textwrap.fill(
                f"{opening} {verdict} Per task (tiny models trained from scratch on this CPU "
                "unless a pretrained model is named; the calibrated verdict: "
                "docs/usage_analysis.md):",
                width=92,
                break_on_hyphens=False,
            ),
            "",
            *lines,
            "",
            *replication_paragraph(digests),
            *glossary(),
            "",
            END,
        ]
    )


def replication_paragraph(digests: list[Mapping[str, Any]]) -> list[str]:
    """Whether each calibrated verdict (every candidate lookup's, as the bullets count
    them), read again on a second, disjoint test stream with the same choices, said the
    same word (`replication_md.replication_counts`), and a blank line; nothing when no
    digest holds a calibrated verdict."""
    runs = [r for d in digests for r in d["tasks"].values() if r.get("verdict")]
    verdicts = [v for r in runs for v in _judged(r)]
    text = replication_counts(verdicts, models=len(runs))
    return [*textwrap.wrap(text, width=92, break_on_hyphens=False), ""] if text else []


def glossary() -> list[str]:
    """The notation of the blocks below, the controls' part from their own legend."""
    from harness.attention.controls import legend

    text = (
        "Notation below: `topN-CX` pushes the N highest-ranked heads (ranked on ID by their "
        "weight on the reference) by adding C = X to their post-softmax weight on the "
        "reference keys (the paper's reinforcement), `topN-CX-thrT` only where that weight "
        f"is under T (conditional mode); controls: {legend()}. *Gain*: OOD test partial "
        "accuracy over the baseline, in points, paired per instance with a bootstrap 95% "
        "interval. *Pointer following*: how often the model writes what the task gives on "
        "the text moved by k when pushed at ref+k (without the push in brackets). *Repair "
        "or pointer*: the older verdict read at the grid's chosen setting; the *calibrated "
        "verdict* is read from the dose-response ladder (N and C chosen on validation, the "
        "controls at the same dose) and from where the model looks when it errs."
    )
    return textwrap.wrap(text, width=92, break_on_hyphens=False)


def replace_summary(text: str, rendered: str) -> str:
    return replace_block(text, rendered, BEGIN, END)


def write_summary(doc: Path, folder: Path | None = None) -> bool:
    """Rewrite the block of `doc` from the digests beside it (or in `folder`); False when
    the doc has no such block (nothing written)."""
    return rewrite_block(doc, BEGIN, END, lambda: render_summary(folder or Path(doc).parent))
