"""Where a `reproduce --pretrained` seed run's CPU goes, read from the committed digests.

    python benchmarks/pretrained_times.py               # every --pretrained digest in docs/
    python benchmarks/pretrained_times.py FOLDER        # those in another folder

Targets, at 64 validation and 64 test instances: at most 35 CPU-minutes a
SmolLM2-135M-Instruct seed run and 60 a Gemma-3-270M one, fine-tune included; and the
analysis alone (every stage after the fine-tune, a second candidate lookup's included) at
most 15 and 25. Each stage's CPU seconds (user + system of the process, one thread) were
measured when the stage was computed and kept in the run's results (`results["cpu_s"]`, the
fine-tune's too), so this prints the run as it was measured, not a re-run: one row per
model, task and seed run with the fine-tune, the analysis at the first lookup (its largest
stage named, and the part of it the round-3 rule added: stability and replication), a
second candidate lookup's analysis (a near tie or a split lookup), the analysis against
its own target, the total against the run's.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from harness.report.pretrained_table import pretrained_digests, seed_rows  # noqa: E402

TARGET_MINUTES = {"smollm2-135m-instruct": 35, "gemma3-270m": 60}
# the analysis alone: most of a user's wait once a fine-tune is saved (the ladder its
# largest stage)
ANALYSIS_TARGET_MINUTES = {"smollm2-135m-instruct": 15, "gemma3-270m": 25}
DOCS = Path(__file__).resolve().parents[1] / "docs"
NOT_KEPT = "per-stage CPU not kept (a digest made before it was)"
# a run whose record has no fine-tune time: it read a saved fine-tune made by another run
# (whose CPU is that run's), or predates the record
ELSEWHERE = "not in this run's record"
TARGET_TEST_INSTANCES = 64  # the targets' size: a run read on more is shown, not judged
# the stages the round-3 rule added (the verdict's stability, its replication on a second
# test stream and that one's stability), part of the analysis: "-" in a run made before them
ROUND_3_STAGES = ("stability", "replication", "replication_stability")


def row(model: str, task: str, run: str, cpu: dict, tested: int | None = None) -> str:
    """One table row: minutes of CPU per part and the targets' verdicts. `tested`: the test
    instances the run read; the targets are at 64, so a run read on more is shown beside
    them, not judged. A fine-tune without a time in the run's record (a saved model made by
    another run, read again) leaves the row the analysis alone."""
    fine_tune = cpu.get("fine_tune")
    second = cpu.get("second_lookup")
    # `total` is the run's own sum of the others
    stages = {k: v for k, v in cpu.items() if k not in ("fine_tune", "second_lookup", "total")}
    if None in stages.values() or not stages:
        return f"| {model} | {task} | {run} | {NOT_KEPT} |||||||"
    analysis = sum(stages.values())
    largest = max(stages, key=stages.get)
    judged = tested in (None, TARGET_TEST_INSTANCES)
    in_all = analysis + (second or 0)
    if fine_tune is None:
        fine_tune_cell, total_cells = ELSEWHERE, "- | -"
    else:
        total = fine_tune + in_all
        target = _met(total, TARGET_MINUTES.get(model)) if judged else f"- ({tested} test)"
        fine_tune_cell, total_cells = f"{fine_tune / 60:.1f}", f"{total / 60:.1f} | {target}"
    analysis_target = (
        _met(in_all, ANALYSIS_TARGET_MINUTES.get(model))
        if judged
        else f"- ({tested} test instances; the target is at {TARGET_TEST_INSTANCES})"
    )
    round_3 = [stages[k] for k in ROUND_3_STAGES if k in stages]
    return (
        f"| {model} | {task} | {run} | {fine_tune_cell} | {analysis / 60:.1f} "
        f"({largest} {stages[largest] / 60:.1f}) | "
        f"{f'{sum(round_3) / 60:.1f}' if round_3 else '-'} | "
        f"{'-' if second is None else f'{second / 60:.1f}'} | "
        f"{in_all / 60:.1f} / {analysis_target} | {total_cells} |"
    )


def test_instances(task: dict) -> int | None:
    """How many test instances a seed run's verdict read (None: a digest made before its
    stability recorded the sizes)."""
    sizes = ((task.get("verdict") or {}).get("stability") or {}).get("sizes") or {}
    return sizes.get("test")


def _met(seconds: float, target: float | None) -> str:
    """ "15: met" or "15: **missed**" (`target` in minutes), "-" without a target."""
    if target is None:
        return "-"
    return f"{target}: {'met' if seconds <= 60 * target else '**missed**'}"


def table(folder: Path) -> list[str]:
    """The table's lines for the --pretrained digests in `folder` (the pretrained table's
    rows, in its order: model, task and seed run with its data seed)."""
    lines = [
        "| model | task | seed run | fine-tune | analysis (largest stage) | of which round 3 | "
        "2nd lookup | analysis in all / target | total | target |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for model, task_name, seed, task in seed_rows(pretrained_digests(folder)):
        cpu = task.get("cpu_s") or {}
        lines.append(row(model, task_name, seed, cpu, test_instances(task)))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "folder", nargs="?", type=Path, default=DOCS, help="the digests' folder (default: docs/)"
    )
    args = parser.parse_args()
    print("\n".join(table(args.folder)))
    print("\n(CPU minutes, user + system, one thread, as measured when each stage was computed)")


if __name__ == "__main__":
    main()
