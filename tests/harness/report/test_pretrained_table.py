"""harness.report.pretrained_table: docs/results.md's table of real pretrained models is
rendered from the committed --pretrained digests, each row reads its numbers from its
digest, and results_doc writes a --pretrained run into the table rather than a block."""

from __future__ import annotations

import json
from pathlib import Path

from harness.commands import results_doc
from harness.report import pretrained_table

REPO = Path(__file__).resolve().parents[3]
DOC = REPO / "docs" / "results.md"


def test_the_doc_table_is_rendered_from_the_committed_digests():
    block = pretrained_table.render_table(REPO / "docs")
    text = DOC.read_text()
    start, end = text.index(pretrained_table.BEGIN), text.index(pretrained_table.END)
    assert text[start : end + len(pretrained_table.END)] == block
    for digest in pretrained_table.pretrained_digests(REPO / "docs"):
        for task in digest["tasks"].values():
            assert task["verdict"]["verdict"] in block


def _task(verdict="no lookup", run=None):
    boot = {"difference": -0.002, "low": -0.009, "high": 0.006}
    return {
        "seed_run": run,
        "eval": {
            "reversal_id": {"exact_match": 0.96875, "partial_acc": 0.99},
            "reversal_ood": {"exact_match": 0.09375, "partial_acc": 0.15625},
        },
        "attention": {
            "results": {
                "reversal_id": {"generate": {}},
                "reversal_ood": {
                    "generate": {
                        "rollout": {"correct": {"mean": 0.022}, "error": {"mean": 0.024}},
                        "instance_aware": {
                            "cluster_bootstrap": boot,
                        },
                    }
                },
            }
        },
        "verdict": {
            "verdict": verdict,
            "numbers": {
                "dose": {"C": 2.0, "threshold": None},
                "reference_gain": {"gain": 0.69, "low": 0.5655, "high": 0.7935},
                "followed": {"-3": 0.848, "+3": 0.711},
                "random_heads_max": 0.139,
                "errors": {"on_reference": 0.07, "diffuse": 0.80, "diluted": 0.13},
            },
        },
    }


def test_a_row_reads_its_numbers_from_the_digest(tmp_path):
    run1 = {"task": "reversal", "run": 1, "init_seed": "pretrained", "data_seed": 1235}
    digest = {
        "meta": {"model": "smollm2-135m-instruct", "date": "2026-11-27", "command": "cmd"},
        "tasks": {"reversal": _task(), "reversal-seed1": _task("inconclusive", run1)},
    }
    (tmp_path / "quick-run-smollm2-reversal.json").write_text(json.dumps(digest))
    scratch = {"meta": {"date": "2026-11-20"}, "tasks": {"successor": _task("downstream")}}
    (tmp_path / "quick-run.json").write_text(json.dumps(scratch))
    block = pretrained_table.render_table(tmp_path)
    rows = [line for line in block.splitlines() if line.startswith("| smollm2")]
    rests = (
        "C 2; gain +69.0 [+56.5, +79.3]; followed -3 0.85 / +3 0.71; random heads +13.9; "
        "errors 80% diffuse"
    )
    table2 = "0.0220 / 0.0240 (-0.0020 [-0.0090, +0.0060])"
    assert rows == [
        f"| smollm2-135m-instruct | reversal | 0 | 0.969 | 0.094 (0.156) | {table2} | "
        f"no lookup | {rests} |",
        f"| smollm2-135m-instruct | reversal | 1 (1235) | 0.969 | 0.094 (0.156) | {table2} | "
        f"inconclusive | {rests} |",
    ]
    assert "downstream" not in block  # a scratch run is not a row
    words = " ".join(block.split())
    assert "calibrated verdicts: *no lookup* 1, *inconclusive* 1. 0 of 2 are" in words
    assert "| Llama-3.2-1B-Instruct | reversal | 0.958 | 0.538 (0.962) | 0.0455 / 0.0236 |" in block
    assert "Measured 2026-11-27" in block and "\ncmd\n" in block
    # too few instances for an interval: "-"
    del digest["tasks"]["reversal"]["attention"]["results"]["reversal_ood"]["generate"]
    assert pretrained_table.table2_cell(digest["tasks"]["reversal"]) == "-"


def test_results_doc_writes_a_pretrained_run_into_the_table(tmp_path, capsys):
    """A --pretrained run's digest is written and the table rewritten from it; a doc without
    the table's markers is refused in one line and nothing is written."""
    run = tmp_path / "run"
    folder = run / "reversal"
    (folder / "attention").mkdir(parents=True)
    gain = {"gain": 0.1, "low": 0.05, "high": 0.15, "n": 4}
    result = _task() | {
        "task": "reversal",
        "sweep": {
            "metric": "partial_acc",
            "chosen_name": "top1-C1",
            "test": {"baseline": {"n": 4}, "top1-C1": {"n": 4}},
            "test_gains": {"top1-C1": {"partial_acc": gain}},
            "verdict": {"verdict": "inconclusive", "reasons": ["x"], "numbers": {}},
        },
    }
    (folder / "results.json").write_text(json.dumps(result))
    (folder / "attention" / "attention.json").write_text(json.dumps({"configs": {}}))
    (run / "settings.json").write_text(json.dumps({"pretrained": "smollm2-135m-instruct"}))
    docs = tmp_path / "docs"
    docs.mkdir()
    doc = docs / "results.md"
    doc.write_text("# Results\n\nno table here\n")
    digest_file = docs / "quick-run-smollm2-reversal.json"
    argv = [str(run), "--command", "c", "--machine", "m", "--date", "2026-11-27"]
    argv += ["--doc", str(doc), "--block", "smollm2-reversal", "--digest", str(digest_file)]
    assert results_doc.main(argv) == 2
    assert "pretrained-table" in capsys.readouterr().err and not digest_file.exists()
    doc.write_text(f"# Results\n\n{pretrained_table.BEGIN}\n{pretrained_table.END}\n")
    assert results_doc.main(argv) == 0
    assert json.loads(digest_file.read_text())["meta"]["model"] == "smollm2-135m-instruct"
    assert "| smollm2-135m-instruct | reversal | 0 | 0.969 |" in doc.read_text()
