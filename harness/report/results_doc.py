"""Put a `reproduce` run's findings into docs/results.md, generated, never typed.

    attentionspan reproduce --quick --output runs/quick
    python -m harness.report.results_doc runs/quick --date 2026-11-24 \\
        --machine "2-core CPU" --command "attentionspan reproduce --quick --output runs/quick"

    # a second run in a block of its own (digest docs/quick-run-value_assignment.json)
    python -m harness.report.results_doc runs/quick-va --block value_assignment ...

    # does a new run reproduce a committed digest? (exit 1 naming what moved, and the
    # package versions and model weights that differ)
    python -m harness.report.results_doc runs/quick --check docs/quick-run.json

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
from harness.report.findings import seed_agreement, seed_groups, task_findings
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
            "model_sha256": result.get("model_sha256"),
            "seed_run": result.get("seed_run"),  # --seeds: task, run, init and data seed
            # the calibrated verdict with the numbers it read (dose, gains, error shares)
            "verdict": result.get("verdict"),
            "diagnosis": {
                name: {k: v.get(k) for k in ("instances", "tokens", "shares", "level")}
                for name, v in (result.get("diagnosis") or {}).items()
            },
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


def render(
    tasks: dict[str, Any],
    command: str,
    machine: str,
    date: str,
    block: str = "",
    versions: dict[str, str] | None = None,
) -> str:
    """The block: the command, the findings, one row per task with the controls."""
    begin, end = markers(block)
    digest_name = Path(digest_path(block)).name
    packages = ", ".join(f"{k} {v}" for k, v in (versions or {}).items())
    lines = [
        begin,
        "",
        f"Measured {date} on {machine}" + (f" ({packages})" if packages else "") + ":",
        "",
        "```bash",
        command,
        "```",
        "",
    ]
    groups = seed_groups(tasks)
    last_runs = {runs[-1][0]: task for task, runs in groups.items()}
    for name, task in tasks.items():
        lines += [f"- {line}" for line in task_findings(name, task)]
        if name in last_runs:  # after a task's last seed run: do its verdicts agree
            lines.append(f"- {seed_agreement(last_runs[name], groups[last_runs[name]])}")
    lines += [
        "",
        "| task | chosen | OOD gain | restore gain | pointer following at ref-3 / ref+3 "
        "(without) | ID exact: baseline -> chosen | repair or pointer | calibrated verdict |",
        "|---|---|---|---|---|---|---|---|",
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
            f"{verdict.get('verdict', '-')} | {(task.get('verdict') or {}).get('verdict', '-')} |"
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


def run_versions(out: Path) -> dict[str, str]:
    """The package versions a reproduce run recorded in its settings.json ({} if none)."""
    try:
        return json.loads((out / "settings.json").read_text()).get("versions") or {}
    except (OSError, ValueError):
        return {}


def differences(expected: Any, actual: Any, path: str = "") -> list[str]:
    """Where two digests' figures differ, as `path: expected X, got Y` lines (numbers equal
    to 12 significant digits count as equal: JSON round trips, not a different result)."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        out = []
        for key in sorted(set(expected) | set(actual), key=str):
            where = f"{path}.{key}" if path else str(key)
            if key not in actual:
                out.append(f"{where}: expected {_short(expected[key])}, missing")
            elif key not in expected:
                out.append(f"{where}: not expected, got {_short(actual[key])}")
            else:
                out += differences(expected[key], actual[key], where)
        return out
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        return [
            d
            for i, (a, b) in enumerate(zip(expected, actual))
            for d in differences(a, b, f"{path}[{i}]")
        ]
    if _is_number(expected) and _is_number(actual):
        if f"{expected:.12g}" == f"{actual:.12g}":
            return []
    elif type(expected) is type(actual) and expected == actual:  # True is not 1 here
        return []
    return [f"{path}: expected {_short(expected)}, got {_short(actual)}"]


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _figures(task: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in task.items() if k != "seed_run"}


def check(out: Path, digest_file: Path) -> list[str]:
    """What a run at `out` does not reproduce of the committed digest: the figures that
    moved, then the versions and model weights that differ (empty: it reproduces)."""
    saved = json.loads(Path(digest_file).read_text())
    tasks = digest(out)
    wanted = {name: saved["tasks"][name] for name in tasks if name in saved["tasks"]}
    if not wanted:
        return [f"the run holds none of the digest's tasks ({', '.join(saved['tasks'])})"]
    # which seed run of how many a task was is how it was run, not what it measured
    moved = differences(
        {name: _figures(task) for name, task in wanted.items()},
        {name: _figures(tasks[name]) for name in wanted},
    )
    if not moved:
        return []
    lines = [f"{len(moved)} figure(s) differ from {digest_file}:", *moved[:20]]
    if len(moved) > 20:
        lines.append(f"... and {len(moved) - 20} more")
    then, now = saved.get("meta", {}).get("versions") or {}, run_versions(out)
    changed = [
        f"{name} {then.get(name, '?')} -> {now.get(name, '?')}"
        for name in sorted(set(then) | set(now))
        if then.get(name) != now.get(name)
    ]
    if not then:
        lines.append("the digest records no versions (made before they were recorded)")
    elif changed:
        lines.append("versions that differ: " + ", ".join(changed))
    else:
        lines.append("the package versions are the same")
    for name in wanted:
        before, after = wanted[name].get("model_sha256"), tasks[name].get("model_sha256")
        if before is None:
            lines.append(f"{name}: the digest records no model hash")
        elif before != after:
            lines.append(f"{name}: the model's weights differ (model_sha256)")
    return lines


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
    parser.add_argument("--command", help="the command that made the run (required to write)")
    parser.add_argument("--machine", help="where it ran, in words (required to write)")
    parser.add_argument("--date", help="when it ran, YYYY-MM-DD (required to write)")
    parser.add_argument(
        "--check",
        metavar="DIGEST",
        help="write nothing: compare the run with this committed digest; exit 1 naming the "
        "figures that differ and the versions and weights behind them",
    )
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
    if args.check:
        try:
            problems = check(Path(args.run), Path(args.check))
        except (OSError, ValueError, KeyError) as error:
            print(f"results_doc: {error}", file=sys.stderr)
            return 2
        print("\n".join(problems) or f"{args.run} reproduces {args.check}")
        return 1 if problems else 0
    missing = [f"--{k}" for k in ("command", "machine", "date") if not getattr(args, k)]
    if missing:
        parser.error(f"{', '.join(missing)} required to write the block")
    digest_file = Path(args.digest or digest_path(args.block))
    try:
        tasks = digest(Path(args.run))
    except ValueError as error:
        print(f"results_doc: {error}", file=sys.stderr)
        return 2
    meta = {"command": args.command, "machine": args.machine, "date": args.date}
    meta["versions"] = run_versions(Path(args.run))
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
