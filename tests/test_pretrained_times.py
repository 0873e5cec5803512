"""benchmarks/pretrained_times.py: a seed run's CPU by part, read from a digest, against its
target; and docs/performance.md's table of it is the script's output on the committed
digests (a figure checked against the command beside it)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location(
        "pretrained_times", REPO / "benchmarks" / "pretrained_times.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_row_sums_the_parts_and_names_the_largest_stage(tmp_path):
    times = _script()
    cpu = {"fine_tune": 900.0, "eval": 60.0, "dose": 840.0, "sweep": 300.0, "second_lookup": 600}
    cpu["total"] = sum(cpu.values())
    digest = {
        "meta": {"model": "smollm2-135m-instruct"},
        "tasks": {
            "reversal": {
                "seed_run": {"task": "reversal", "run": 2, "data_seed": 1236},
                "cpu_s": cpu,
                "verdict": {"stability": {"sizes": {"validation": 64, "test": 64}}},
            }
        },
    }
    (tmp_path / "quick-run-smollm2-reversal.json").write_text(json.dumps(digest))
    # a --quick run's digest (scratch models, no model named): no row, no target
    (tmp_path / "quick-run.json").write_text(json.dumps({"meta": {}, "tasks": {}}))
    lines = times.table(tmp_path)
    assert lines[2:] == [
        "| smollm2-135m-instruct | reversal | 2 (1236) | 15.0 | 20.0 (dose 14.0) | - | 10.0 | "
        "30.0 / 15: **missed** | 45.0 | 35: **missed** |"
    ]
    cpu.pop("second_lookup")
    assert times.row("gemma3-270m", "addition", "0", cpu).endswith(
        "| - | 20.0 / 25: met | 35.0 | 60: met |"
    )
    # a round-3 run: its stability and replication stages are part of the analysis, and
    # said apart
    round_3 = {"stability": 45.0, "replication": 240.0, "replication_stability": 15.0}
    assert "| 25.0 (dose 14.0) | 5.0 | - | 25.0 / 25: met | 40.0 | 60: met |" in times.row(
        "gemma3-270m", "addition", "0", cpu | round_3
    )
    # read on 128 test instances: shown beside the targets (set at 64), not judged by them
    assert times.row("gemma3-270m", "addition", "0", cpu, tested=128).endswith(
        "| 20.0 / - (128 test instances; the target is at 64) | 35.0 | - (128 test) |"
    )
    assert "25: met" in times.row("gemma3-270m", "addition", "0", cpu, tested=64)
    # a saved fine-tune read again in another run: the analysis alone, no total
    elsewhere = times.row("gemma3-270m", "addition", "0", cpu | {"fine_tune": None})
    assert elsewhere.endswith("| 20.0 / 25: met | - | - |")
    assert f"| {times.ELSEWHERE} | 20.0 (dose 14.0) |" in elsewhere
    assert times.test_instances({"cpu_s": cpu}) is None  # a digest made before sizes were kept
    cpu["dose"] = None  # a stage reused from a run made before its CPU was kept
    assert times.NOT_KEPT in times.row("gemma3-270m", "addition", "0", cpu)


def test_performance_doc_shows_the_scripts_table_of_the_committed_digests():
    times = _script()
    doc = (REPO / "docs" / "performance.md").read_text()
    lines = times.table(REPO / "docs")
    assert "\n".join(lines) in doc
