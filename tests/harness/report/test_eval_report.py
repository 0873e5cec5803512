"""harness.report.eval_report: the tables and files of `attentionspan eval`, on results
written by hand (the numbers in the tables are exactly those given)."""

from __future__ import annotations

import json

from harness.evaluation.evaluate import EvalConfig
from harness.report.eval_report import markdown_table, write_reports


def row(count, exact, partial, tf):
    return {"count": count, "exact_match": exact, "partial_acc": partial, "tf_token_acc": tf}


RESULTS = {
    "reversal_id": {
        **row(3, 2 / 3, 0.75, 0.9),
        "per_length": {"2": row(1, 1.0, 1.0, 1.0), "4": row(2, 0.5, 0.625, 0.85)},
        "per_bin": {"2": row(1, 1.0, 1.0, 1.0), "3-4": row(2, 0.5, 0.625, 0.85)},
    }
}


def test_markdown_table():
    assert markdown_table(RESULTS) == (
        "| config | n | exact match | partial acc | TF token acc |\n"
        "|---|---|---|---|---|\n"
        "| reversal_id | 3 | 0.667 | 0.750 | 0.900 |\n"
        "\n"
        "Per length, reversal_id:\n"
        "\n"
        "| length | n | exact match | partial acc | TF token acc |\n"
        "|---|---|---|---|---|\n"
        "| 2 | 1 | 1.000 | 1.000 | 1.000 |\n"
        "| 4 | 2 | 0.500 | 0.625 | 0.850 |\n"
        "\n"
        "Per length bin, reversal_id:\n"
        "\n"
        "| lengths | n | exact match | partial acc | TF token acc |\n"
        "|---|---|---|---|---|\n"
        "| 2 | 1 | 1.000 | 1.000 | 1.000 |\n"
        "| 3-4 | 2 | 0.500 | 0.625 | 0.850 |\n"
    )
    # bins of one length each repeat the per-length table: left out
    one = {"r": {**RESULTS["reversal_id"], "per_bin": {"2": row(1, 1.0, 1.0, 1.0)}}}
    assert "Per length bin" not in markdown_table(one)


def test_write_reports(tmp_path):
    config = EvalConfig(model="m", configs=["reversal_id"], num=3)
    records = [{"index": i, "prediction": "ab"} for i in range(3)]
    write_reports(tmp_path / "out", config, RESULTS, {"reversal_id": records}, 1.234)
    report = json.loads((tmp_path / "out" / "results.json").read_text())
    assert report == {
        "eval_config": {**config.__dict__},
        "processes": 1,  # the processes that ran it (several under a launch)
        "results": RESULTS,
        "time_s": 1.23,
    }
    assert (tmp_path / "out" / "results.md").read_text() == markdown_table(RESULTS)
    lines = (tmp_path / "out" / "predictions-reversal_id.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == records
