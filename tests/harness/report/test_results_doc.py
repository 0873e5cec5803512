"""docs/results.md's quick-run block is the command's output: rendered again from the
committed digest it must equal the doc, and the digest keeps what the findings read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.report import results_doc

REPO = Path(__file__).resolve().parents[3]
DIGEST = REPO / "docs" / "quick-run.json"
DOC = REPO / "docs" / "results.md"


def test_the_doc_block_is_rendered_from_the_committed_digest():
    data = json.loads(DIGEST.read_text())
    block = results_doc.render(data["tasks"], **data["meta"])
    text = DOC.read_text()
    start, end = text.index(results_doc.BEGIN), text.index(results_doc.END)
    assert text[start : end + len(results_doc.END)] == block
    # Every task of the run has a verdict and at least one finding in the doc.
    for name, task in data["tasks"].items():
        assert task["sweep"]["verdict"]["verdict"] in ("repair", "pointer", "inconclusive")
        assert f"- {name}: " in block


def test_digest_reads_a_reproduce_folder(tmp_path):
    gain = {"gain": 0.1, "low": 0.05, "high": 0.15, "n": 4}
    folder = tmp_path / "reversal"
    (folder / "attention").mkdir(parents=True)
    result = {
        "task": "reversal",
        "ood": {"max_length": 20},
        "eval": {"reversal_id": {"n": 4, "exact_match": 1.0, "partial_acc": 1.0}},
        "sweep": {
            "metric": "partial_acc",
            "chosen_name": "top1-C1",
            "test": {
                "baseline": {"n": 4, "exact_match": 0.0, "per_length": {}},
                "top1-C1": {"n": 4, "exact_match": 0.0, "per_length": {}},
                "random1-C1-s0": {"n": 4, "exact_match": 0.0, "per_length": {}},
            },
            "test_gains": {"top1-C1": {"partial_acc": gain, "exact_match": gain, "per_length": {}}},
            "id": {"baseline": {"exact_match": 1.0, "per_length": {}}},
            "verdict": {"verdict": "inconclusive", "reasons": ["x"], "numbers": {}},
            "records": {"test": {}},
        },
    }
    (folder / "results.json").write_text(json.dumps(result))
    configs = {"reversal_ood": {"rollout": {"correct": {"mean": 0.1}}, "heads": [[0.1]]}}
    (folder / "attention" / "attention.json").write_text(json.dumps({"configs": configs}))
    tasks = results_doc.digest(tmp_path)
    sweep = tasks["reversal"]["sweep"]
    assert set(sweep["test"]) == {"baseline", "top1-C1"}  # controls live in test_gains
    assert "per_length" not in sweep["test"]["baseline"]
    assert sweep["test_gains"]["top1-C1"] == {"partial_acc": gain, "exact_match": gain}
    kept = tasks["reversal"]["attention"]["results"]["reversal_ood"]
    assert kept == {"rollout": {"correct": {"mean": 0.1}}}  # the per-head table is left out
    with pytest.raises(ValueError, match="no <task>/results.json"):
        results_doc.digest(tmp_path / "nothing")
