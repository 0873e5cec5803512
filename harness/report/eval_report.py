"""`results.json`, `results.md` and `predictions-<config>.jsonl` of `attentionspan eval`, from
what `harness.evaluation.evaluate.evaluate_model` measured: the measurement returns data, this
module
writes it for people.

    from harness.report.eval_report import markdown_table, write_reports
    results, records = evaluate_model(model, tokenizer, ["reversal_id"], 200)
    print(markdown_table(results), end="")        # overall, per length, per length bin
    write_reports(Path("OUT"), config, results, records, elapsed)

Every file is written atomically (a reader sees the old file or the new one).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attentionspan_datasets.atomic import atomic_write_text

if TYPE_CHECKING:
    from harness.evaluation.evaluate import EvalConfig


def _table(title: str, rows: dict[str, dict[str, Any]]) -> list[str]:
    lines = [
        f"| {title} | n | exact match | partial acc | TF token acc |",
        "|---|---|---|---|---|",
    ]
    for name, row in rows.items():
        lines.append(
            f"| {name} | {row['count']} | {row['exact_match']:.3f} | "
            f"{row['partial_acc']:.3f} | {row['tf_token_acc']:.3f} |"
        )
    return lines


def markdown_table(results: dict[str, dict[str, Any]]) -> str:
    lines = _table("config", results)
    for name, res in results.items():
        lines += ["", f"Per length, {name}:", "", *_table("length", res["per_length"])]
        if any("-" in name for name in res["per_bin"]):  # some bin holds several lengths
            lines += ["", f"Per length bin, {name}:", "", *_table("lengths", res["per_bin"])]
    return "\n".join(lines) + "\n"


def write_reports(
    out_dir: Path,
    config: EvalConfig,
    results,
    records_by_config,
    elapsed: float,
    processes: int = 1,
) -> None:
    """results.json (the config, the results, the time and the processes that ran it:
    several under a launch, sharded by heads with --tp-plan), results.md, predictions."""
    out_dir.mkdir(parents=True, exist_ok=True)
    report = {
        "eval_config": dataclasses.asdict(config),
        "processes": processes,
        "results": results,
        "time_s": round(elapsed, 2),
    }
    atomic_write_text(out_dir / "results.json", json.dumps(report, indent=2) + "\n")
    atomic_write_text(out_dir / "results.md", markdown_table(results))
    for name, records in records_by_config.items():
        lines = "".join(json.dumps(r) + "\n" for r in records)
        atomic_write_text(out_dir / f"predictions-{name}.jsonl", lines)
