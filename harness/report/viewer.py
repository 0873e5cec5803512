"""`attention.html`: a self-contained, offline, interactive attention viewer.

    from harness.report.viewer import write_viewer
    path = write_viewer("OUT", model, tokenizer, instances, prompt, ranking=None,
                        intervention=None)      # OUT/attention.html
    from harness.report.viewer import write_html
    write_html(data, "OUT/attention.html")      # from `viewer_data.build_viewer_data`'s dict

One HTML file with its CSS, script and data inline (no network, no CDN). In it a researcher
picks an instance (filtered by config and by correct / wrong, sorted by score), a view (the
rollout, a layer's head mean, or one head), and sees every answer token's row over the
task-text columns as a heat map (each row scaled to its own maximum), the reference cells
outlined in green, gold -> predicted on the row labels and the rollout score (the share on the
reference, as `attentionspan attention` computes it) per row. Hovering a row shows its weights
over the keys as a bar strip; clicking a key shows who attends to it; clicking row labels
selects rows (and "selected rows only" hides the rest); with an intervention setting the
baseline and the chosen setting sit side by side.

It opens where there is something to see, and says why (`opening`): the shortest answer
among the OOD instances the model got wrong, with the row panels on its first wrong token
and the key panel on that token's reference (a hover shows another row; a click keeps it).
When the caller says how many instances attention.md scores (`meta["scored"]`, as
`attentionspan attention` does), the page says how many of them its means cover
(`coverage`). The row-label gutter is as wide as the instance's widest label (at most
180 px, longer labels cut with "…"), so no label runs over the first column.

Long texts: the heat map is a canvas the size of the visible window inside a scrolling area;
only the visible rows and columns are drawn, on each scroll (no DOM node per cell), so
2,000-token texts stay smooth. The data is the 8-bit, causal-part-only storage of
`harness.attention.viewer_data`.

The page exposes `window.attentionViewer` (its state and a `cellRect(pane, row, col)` helper)
for the browser test (tests/harness/report/test_viewer_browser.py).
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

from harness.report.viewer_page import PAGE, SCRIPT, STYLE

VIEWER_FILE = "attention.html"


def _script_json(data: dict[str, Any]) -> str:
    """JSON that is safe inside <script type="application/json">: every "<" (only ever inside
    a string) written as \\u003c, so no "</script>" or "<!--" can end the block early."""
    text = json.dumps(data, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c")


def _role(config: str) -> str | None:
    """A preset's role in its ID/OOD pair ("id" / "ood", as the catalogue says), else None."""
    from attentionspan_datasets import presets

    try:
        return presets.get(config).role
    except ValueError:  # a bare task name or a config of the caller's own
        return None


def opening(data: dict[str, Any]) -> dict[str, Any]:
    """The instance the page opens on (`index` into `data["instances"]`, -1 for none) and a
    sentence saying why. The most telling first: the shortest answer among the OOD instances
    the model got wrong (the whole failure fits one screen); then the shortest wrong one of
    any config; with nothing wrong, the longest OOD answer, then the longest of all (a
    2-character ID answer shows nothing). Wrong: a baseline row whose argmax is not gold."""
    instances = data.get("instances") or []
    if not instances:
        return {"index": -1, "why": ""}
    base = (data.get("settings") or ["baseline"])[0]

    def wrong(j: int) -> bool:
        return not all(instances[j].get("settings", {}).get(base, {}).get("correct", [True]))

    def size(j: int) -> int:
        return len(instances[j].get("target", ""))

    every = range(len(instances))
    ood = [j for j in every if _role(str(instances[j].get("config"))) == "ood"]
    bad = [j for j in every if wrong(j)]
    ood_bad = [j for j in ood if wrong(j)]
    nothing = "no OOD instance is wrong" if ood else "no instance here is OOD"
    tiers = [
        (ood_bad, False, f"of the {len(ood_bad)} OOD instances the model got wrong"),
        (bad, False, f"of the {len(bad)} instances the model got wrong ({nothing})"),
        (ood, True, f"of the {len(ood)} OOD instances (the model got all right)"),
        (list(every), True, "(the model got all right; none is OOD)"),
    ]
    pool, longest, what = next(tier for tier in tiers if tier[0])
    j = min(pool, key=lambda j: (-size(j) if longest else size(j), j))  # ties: the first
    x = instances[j]
    why = (
        f"Opened on {x.get('config')} #{x.get('index')}: the "
        f"{'longest' if longest else 'shortest'} answer ({size(j)} characters) {what}."
    )
    return {"index": j, "why": why}


def coverage(data: dict[str, Any]) -> str | None:
    """A sentence saying how many of the instances that attention.md scores this file holds,
    from `meta["scored"]` ({"file", "instances": per config, "option"}, given by the caller
    that wrote that file), or None without it. The page's means are over this file's
    instances only, so they differ from that file's when it holds fewer."""
    scored = (data.get("meta") or {}).get("scored")
    if not scored:
        return None
    held: dict[str, int] = {}
    for x in data.get("instances") or []:
        held[x["config"]] = held.get(x["config"], 0) + 1
    total, where = scored["instances"], scored.get("file", "attention.md")
    if all(n == total for n in held.values()):
        return f"These means cover the same {total} instances per config as {where}."
    counts = set(held.values())
    each = ", ".join(f"{n} ({c})" for c, n in held.items())
    kept = str(counts.pop()) if len(counts) == 1 else each
    option = scored.get("option")
    keeps = f" ({option} sets how many the viewer keeps)" if option else ""
    return (
        f"These means cover {kept} of the {total} instances per config that {where} "
        f"scores{keeps}, so they differ from {where}'s."
    )


def notes(data: dict[str, Any]) -> dict[str, Any]:
    """What the page says beside the data: where it opens and why, and its coverage."""
    return {"opening": opening(data), "coverage": coverage(data)}


def render_html(data: dict[str, Any], title: str = "Attention on reference tokens") -> str:
    """The whole page as one string (one pass over the placeholders, so nothing inserted is
    read as a placeholder again)."""
    parts = {
        "TITLE": html.escape(title),
        "STYLE": STYLE,
        "SCRIPT": SCRIPT,
        "NOTES": _script_json(notes(data)),
        "DATA": _script_json(data),
    }
    return re.sub(r"__(TITLE|STYLE|SCRIPT|NOTES|DATA)__", lambda m: parts[m.group(1)], PAGE)


def write_html(data: dict[str, Any], path, title: str = "Attention on reference tokens") -> Path:
    """Write the page atomically; returns its path."""
    from attentionspan_datasets.atomic import atomic_write_text

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write_text(path, render_html(data, title))


def write_viewer(
    out_dir,
    model,
    tokenizer,
    instances,
    prompt=None,
    ranking=None,
    intervention=None,
    top_k: int | None = None,
    batch_size: int = 8,
    meta: dict[str, Any] | None = None,
    title: str = "Attention on reference tokens",
) -> Path:
    """Measure (`viewer_data.build_viewer_data`, teacher-forced) and write
    `out_dir/attention.html`. `intervention`: a sweep `Setting` (with `ranking`) or a capture
    `Intervention`, shown beside the baseline."""
    from harness.attention.viewer_data import build_viewer_data

    data = build_viewer_data(
        model,
        tokenizer,
        instances,
        prompt,
        ranking=ranking,
        setting=intervention,
        top_k=top_k,
        batch_size=batch_size,
        meta=meta,
    )
    return write_html(data, Path(out_dir) / VIEWER_FILE, title)
