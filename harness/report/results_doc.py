"""Put a `reproduce` run's findings into docs/results.md, generated, never typed.

    attentionspan reproduce --quick --output runs/quick
    python -m harness.report.results_doc runs/quick --date 2026-11-24 \\
        --machine "2-core CPU" --command "attentionspan reproduce --quick --output runs/quick"

    # a second run in a block of its own (digest docs/quick-run-value_assignment.json)
    python -m harness.report.results_doc runs/quick-va --block value_assignment ...

Reads the run's per-task `results.json` and `attention/attention.json`, keeps the numbers the
findings rest on in a digest (`docs/quick-run.json`, committed), and rewrites the block
between the `quick-findings` markers of docs/results.md from that digest alone. A test
renders every committed digest again and compares it with its block, so the figures in the
doc are the command's output.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from attentionspan_datasets.atomic import atomic_write_text
from attentionspan_datasets.metrics import METRICS
from harness.report.findings import task_findings
from harness.stats import format_gain

BEGIN = (
    "<!-- quick-findings: generated from the run below by harness/report/results_doc.py; "
    "do not edit -->"
)
END = "<!-- /quick-findings -->"
DIGEST = "docs/quick-run.json"


def markers(block: str = "") -> tuple[str, str]:
    """The (begin, end) markers of a block: the unnamed one, or `quick-findings:NAME`."""
    if not block:
        return BEGIN, END
    return BEGIN.replace("quick-findings:", f"quick-findings:{block}:", 1), END.replace(
        "quick-findings", f"quick-findings:{block}", 1
    )


def digest_path(block: str = "") -> str:
    return DIGEST if not block else DIGEST.replace(".json", f"-{block}.json")


def digest(out: Path) -> dict[str, Any]:
    """The numbers the findings and the table read, per task, from a reproduce folder."""
    tasks = {}
    for path in sorted(out.glob("*/results.json")):
        result = json.loads(path.read_text())
        sweep = result.get("sweep") or {}
        test = sweep.get("test") or {}
        kept = set(test) & {"baseline", sweep.get("chosen_name")}
        tasks[result["task"]] = {
            "eval": result.get("eval"),
            "ood": result.get("ood"),
            "attention": {"results": _attention(path.parent / "attention" / "attention.json")},
            "sweep": {
                "metric": sweep.get("metric"),
                "chosen_name": sweep.get("chosen_name"),
                "test": {k: _means(v) for k, v in test.items() if k in kept},
                "test_gains": {
                    k: {m: v[m] for m in METRICS if m in v}
                    for k, v in (sweep.get("test_gains") or {}).items()
                },
                "id": {k: _means(v) for k, v in (sweep.get("id") or {}).items()},
                "verdict": sweep.get("verdict"),
            },
        }
    if not tasks:
        raise ValueError(f"{out} holds no <task>/results.json: is it a reproduce output folder?")
    return tasks


def _means(summary: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in summary.items() if k != "per_length"}


def _attention(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    configs = json.loads(path.read_text()).get("configs", {})
    out = {}
    for name, result in configs.items():
        keep = {k: result[k] for k in ("rollout", "instance_aware") if k in result}
        generate = result.get("generate") or {}
        if generate:
            keep["generate"] = {
                k: generate[k] for k in ("rollout", "instance_aware") if k in generate
            }
        out[name] = keep
    return out


def render(tasks: dict[str, Any], command: str, machine: str, date: str, block: str = "") -> str:
    """The block: the command, the findings, one row per task with the controls."""
    begin, end = markers(block)
    digest_name = Path(digest_path(block)).name
    lines = [
        begin,
        "",
        f"Measured {date} on {machine}:",
        "",
        "```bash",
        command,
        "```",
        "",
    ]
    for name, task in tasks.items():
        lines += [f"- {line}" for line in task_findings(name, task)]
    lines += [
        "",
        "| task | chosen | OOD gain | restore gain | pointer following at ref-3 / ref+3 "
        "(without) | ID exact: baseline -> chosen | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, task in tasks.items():
        sweep = task["sweep"]
        metric = sweep["metric"]
        verdict = sweep.get("verdict") or {}
        numbers = verdict.get("numbers") or {}
        restore = numbers.get("restore_gain")
        follows = numbers.get("follows") or {}
        shown = []
        for k in ("-3", "3"):
            f = follows.get(k) or {}
            if f.get("rate") is None:
                shown.append("n/a")
            else:
                shown.append(f"{f['rate']:.2f} ({f.get('baseline_rate') or 0:.2f})")
        ident = sweep.get("id") or {}
        chosen = sweep["chosen_name"]
        id_cell = (
            f"{ident['baseline']['exact_match']:.3f} -> {ident[chosen]['exact_match']:.3f}"
            if chosen in ident and "baseline" in ident
            else "-"
        )
        lines.append(
            f"| {name} | {chosen} | {format_gain(sweep['test_gains'][chosen][metric])} | "
            f"{format_gain(restore) if restore else '-'} | {' / '.join(shown)} | {id_cell} | "
            f"{verdict.get('verdict', '-')} |"
        )
    lines += [
        "",
        f"Gains: OOD test {tasks and next(iter(tasks.values()))['sweep']['metric']}, points, "
        "paired per instance with bootstrap 95% intervals; the digest of the run is "
        f"[{digest_name}]({digest_name}).",
        "",
        end,
    ]
    return "\n".join(lines)


def replace_block(text: str, rendered: str, block: str = "") -> str:
    begin, end_marker = markers(block)
    start, end = text.find(begin), text.find(end_marker)
    if start < 0 or end < start:
        raise ValueError(f"the doc has no markers {begin!r} .. {end_marker!r}")
    return text[:start] + rendered + text[end + len(end_marker) :]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.report.results_doc",
        description="Write a reproduce run's findings into docs/results.md (and its digest).",
    )
    parser.add_argument("run", help="the reproduce --output folder")
    parser.add_argument("--command", required=True, help="the command that made the run")
    parser.add_argument("--machine", required=True, help="where it ran, in words")
    parser.add_argument("--date", required=True, help="when it ran (YYYY-MM-DD)")
    parser.add_argument(
        "--block",
        default="",
        help="name of the doc's block (its markers read quick-findings:NAME); default: the "
        "unnamed quick-run block",
    )
    parser.add_argument("--doc", default="docs/results.md")
    parser.add_argument(
        "--digest", default=None, help=f"default {DIGEST}, or quick-run-NAME.json with --block"
    )
    args = parser.parse_args(argv)
    digest_file = Path(args.digest or digest_path(args.block))
    try:
        tasks = digest(Path(args.run))
    except ValueError as error:
        print(f"results_doc: {error}", file=sys.stderr)
        return 2
    meta = {"command": args.command, "machine": args.machine, "date": args.date}
    if args.block:
        meta["block"] = args.block
    doc = Path(args.doc)
    try:  # the markers are checked before anything is written
        text = replace_block(doc.read_text(), render(tasks, **meta), args.block)
    except ValueError as error:
        print(f"results_doc: {doc}: {error}", file=sys.stderr)
        return 2
    digest_file.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(digest_file, json.dumps({"meta": meta, "tasks": tasks}, indent=1) + "\n")
    atomic_write_text(doc, text)
    print(f"wrote {digest_file} and the quick-findings block of {doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
