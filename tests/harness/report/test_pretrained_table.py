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
                "reference_gain": {"gain": 0.69, "low": 0.5655, "high": 0.7935, "n": 32},
                "followed": {"-3": 0.848, "+3": 0.711},
                "random_heads_max": 0.139,
                "errors": {"on_reference": 0.07, "diffuse": 0.80, "diluted": 0.13},
            },
        },
    }


def test_a_row_reads_its_numbers_from_the_digest(tmp_path):
    """A round-1 digest (no basis, no offset, no controls kept): its rows say which cells
    predate round 2 and show only what its verdict numbers hold."""
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
    table2 = "0.0220 / 0.0240 (-0.0020 [-0.0090, +0.0060])"
    old = "predates round 2"
    controls = (
        "ref +69.0 [+56.5, +79.3]; followed ref-3 +0.85 / ref+3 +0.71; random heads +13.9; "
        f"shifted gains, ID: {old}"
    )
    assert rows == [
        f"| smollm2-135m-instruct | reversal | 0 | 0.969 | 0.094 (0.156) | {table2} |",
        f"| smollm2-135m-instruct | reversal | 1 (1235) | 0.969 | 0.094 (0.156) | {table2} |",
        f"| smollm2-135m-instruct | reversal | 0 | {old} | {old} | no lookup (round 1) | "
        f"not recorded | N {old}, C 2 | {controls} | {old} | not recorded |",
        f"| smollm2-135m-instruct | reversal | 1 (1235) | {old} | {old} | inconclusive (round 1) "
        f"| not recorded | N {old}, C 2 | {controls} | {old} | not recorded |",
    ]
    assert "downstream" not in block  # a scratch run is not a row
    words = " ".join(block.split())
    assert (
        "calibrated verdicts (2 of them under the round-1 rule: every wrong row, the offset "
        "assumed): *no lookup* 1, *inconclusive* 1. 0 of 2 are"
    ) in words
    assert "| Llama-3.2-1B-Instruct | reversal | 0.958 | 0.538 (0.962) | 0.0455 / 0.0236 |" in block
    assert "Measured 2026-11-27" in block and "\ncmd\n" in block
    assert "32 test instances a model" in words  # the reference gain's pairs
    assert "*predates round 2*: a digest made under the round-1 rule" in words  # the legend
    # too few instances for an interval: "-"
    del digest["tasks"]["reversal"]["attention"]["results"]["reversal_ood"]["generate"]
    assert pretrained_table.table2_cell(digest["tasks"]["reversal"]) == "-"


def _round_two(verdict="mixed failure", lookups=None):
    """A round-2 task digest: first errors, the offset found, the controls at the dose."""
    task = _task(verdict)
    numbers = task["verdict"]["numbers"]
    numbers |= {
        "basis": "first wrong row of each instance",
        "error_instances": 58,
        "shift": 1,
        "offset": {"offset": 1, "mass": 0.812, "found": True},
        "kinds": {"diluted": 0.5, "diffuse": 0.3},
        "mixed": [
            {"kind": "diluted", "share": 0.5, "verdict": "nudge-repairable"},
            {"kind": "diffuse", "share": 0.3, "verdict": "no lookup"},
        ],
        "repaired": {"wrong": 58, "repaired": 12, "share": 12 / 58},
    }
    task["controls_at_dose"] = {
        "n": 2,
        "C": 2.0,
        "threshold": None,
        "reference": {"gain": 0.5, "low": 0.4, "high": 0.6},
        "pointers": {
            "-3": {"gain": {"gain": 0.1}, "following": {"gain": 0.05}, "rows": 40},
            "+3": {"gain": {"gain": -0.02}, "following": {"gain": 0.3}, "rows": 40},
        },
        "random_heads": {"max": 0.04, "mean": 0.01, "count": 2},
        "random_heads_available": 10,
        "id": {"baseline": 0.97, "at_dose": 0.95},
    }
    if lookups:
        task["lookups"] = lookups
    return task


def test_a_round_two_row_names_offset_basis_shares_dose_controls_and_repair(tmp_path):
    digest = {
        "meta": {"model": "smollm2-135m-instruct", "date": "2026-11-28", "command": "c"},
        "tasks": {"reversal": _round_two()},
    }
    (tmp_path / "quick-run-smollm2-reversal.json").write_text(json.dumps(digest))
    block = pretrained_table.render_table(tmp_path)
    (row,) = [line for line in block.splitlines() if "first error" in line]
    assert row == (
        "| smollm2-135m-instruct | reversal | 0 | ref+1 (0.81) | first error per instance "
        "(58) | mixed failure: diluted 0.50: nudge-repairable; diffuse 0.30: no lookup | "
        "not recorded | N 2, C 2 | ref +50.0 [+40.0, +60.0]; ref-3 +10.0, followed +0.05; "
        "ref+3 -2.0, followed +0.30; random heads +4.0; ID 0.97 -> 0.95 | 12 of 58 (0.21) | "
        "not recorded |"
    )
    assert "of them under the round-1 rule" not in " ".join(block.split())
    assert "predates round 2" not in block  # no row shows it: no legend for it either
    # one kind named: its share beside the verdict; a --shift offset says "given"
    task = _round_two("downstream")
    numbers = task["verdict"]["numbers"]
    numbers |= {"mixed": [], "kinds": {"on_reference": 0.6}}
    numbers["offset"] = {"offset": 0, "mass": 0.3, "found": False}
    assert pretrained_table.verdict_cell(task["verdict"]) == "downstream (on reference 0.60)"
    assert pretrained_table.offset_cell(task) == "the reference (0.30), given"
    # a shifted push whose following no row could measure (null in the digest; an older
    # digest's NaN reads as null, `read_digests`): "-", never "nan"
    pointers = task["controls_at_dose"]["pointers"]
    pointers["-3"]["following"] = {"gain": None}
    assert "ref-3 +10.0, followed -;" in pretrained_table.controls_cell(task, task["verdict"])
    # the output-scale control, where the digest holds it (the row above predates it)
    task["controls_at_dose"]["output_scale"] = {"gain": 0.03, "low": 0.0, "high": 0.06}
    cell = pretrained_table.controls_cell(task, task["verdict"])
    assert "random heads +4.0; output scaled +3.0; ID 0.97 -> 0.95" in cell
    # no dose gains: said, and no controls to read
    task["verdict"]["numbers"]["dose"] = None
    task["controls_at_dose"] = {"n": 4, "C": None}
    assert pretrained_table.dose_cell(task, task["verdict"]) == "N 4; no dose gains"
    assert pretrained_table.controls_cell(task, task["verdict"]) == "no dose chosen"


def test_two_candidate_lookups_get_two_rows_and_a_headline_naming_both(tmp_path):
    second = {
        "offset": 1,
        "mass": 0.455,
        "stage": "reversal-lookup+1",
        "verdict": {
            "verdict": "no attention effect",
            "numbers": {
                "basis": "first wrong row of each instance",
                "error_instances": 58,
                "kinds": {"diffuse": 0.9},
                "dose": None,
            },
        },
        "controls_at_dose": {"n": 4, "C": None},
    }
    task = _round_two("no lookup", lookups=[{"offset": 0, "mass": 0.436}, second])
    task["verdict"]["numbers"] |= {"mixed": [], "kinds": {"diffuse": 0.86}}
    digest = {
        "meta": {"model": "smollm2-135m-instruct", "date": "2026-11-28", "command": "c"},
        "tasks": {"reversal": task},
    }
    (tmp_path / "quick-run-smollm2-reversal.json").write_text(json.dumps(digest))
    block = pretrained_table.render_table(tmp_path)
    rows = [line for line in block.splitlines() if "first error" in line]
    assert rows[0].startswith(
        "| smollm2-135m-instruct | reversal | 0 | the reference (0.44); 2nd candidate ref+1 "
        "(0.46) | first error per instance (58) | no lookup (diffuse 0.86) | not recorded | "
        "N 2, C 2 |"
    )
    assert rows[1] == (
        "| | | 0, 2nd lookup | ref+1 (2nd) | first error per instance (58) | no attention "
        "effect (diffuse 0.90) | not recorded | N 4; no dose gains | no dose chosen | no dose | "
        "not recorded |"
    )
    # the count names both verdicts: never one picked silently
    words = " ".join(block.split())
    assert "*no lookup at the reference / no attention effect at ref+1* 1" in words


def test_per_task_statements_say_whether_the_seeds_agree(tmp_path):
    def run(k, verdict, gain, repaired, wrong):
        task = _round_two(verdict)
        task["seed_run"] = {"task": "reversal", "run": k, "data_seed": 1234 + k}
        task["controls_at_dose"]["reference"] = {"gain": gain}
        task["verdict"]["numbers"]["repaired"] = {
            "repaired": repaired,
            "wrong": wrong,
            "share": repaired / wrong,
        }
        return task

    agree = {
        "meta": {"model": "smollm2-135m-instruct", "date": "2026-11-28", "command": "c"},
        "tasks": {
            "reversal": run(0, "no lookup", 0.5, 1, 50),
            "reversal-seed1": run(1, "no lookup", 0.7, 0, 60),
            "reversal-seed2": run(2, "no lookup", 0.6, 2, 40),
        },
    }
    (tmp_path / "quick-run-smollm2-reversal.json").write_text(json.dumps(agree))
    (line,) = pretrained_table.task_statements(pretrained_table.pretrained_digests(tmp_path))
    assert " ".join(line.split()) == (
        "- **reversal**: smollm2-135m-instruct, 3 seed runs: *no lookup* in all 3 seed runs "
        "(the seeds agree); reference push +50.0 to +70.0 points at the chosen doses; "
        "repaired free-running 3 of 150 wrong answers."
    )
    agree["tasks"]["reversal-seed2"] = run(2, "downstream", 0.6, 2, 40)
    (tmp_path / "quick-run-smollm2-reversal.json").write_text(json.dumps(agree))
    block = " ".join(pretrained_table.render_table(tmp_path).split())
    assert "the seeds disagree: *no lookup* (runs 0, 1), *downstream* (run 2)" in block
    # one seed run: agreement is not claimed; a round-1 digest is marked so
    single = {
        "meta": {"model": "gemma3-270m", "date": "2026-11-27", "command": "c"},
        "tasks": {"reversal": _task("no lookup")},
    }
    (tmp_path / "quick-run-gemma3-reversal.json").write_text(json.dumps(single))
    block = " ".join(pretrained_table.render_table(tmp_path).split())
    assert (
        "gemma3-270m, 1 seed run (round 1): *no lookup* (one seed run: agreement not tested); "
        "reference push +69.0 points at its dose." in block
    )


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


def test_a_row_shows_every_shifted_push_and_an_older_one_says_the_nearer_were_not_recorded(
    tmp_path,
):
    """A run whose ladder pushed at ref+-1, +-2 and +-3 shows each push's gain and following;
    a digest made before, with ref+-3 alone, still renders, and the table says its nearer
    pushes were not recorded (never that they were not followed)."""
    six = ("-3", "-2", "-1", "+1", "+2", "+3")
    task = _round_two()
    task["controls_at_dose"]["pointers"] = {
        k: {"gain": {"gain": 0.01 * i}, "following": {"gain": 0.1 * i}, "rows": 40}
        for i, k in enumerate(six)
    }
    meta = {"model": "smollm2-135m-instruct", "date": "2026-11-29", "command": "c"}
    (tmp_path / "quick-run-smollm2-reversal.json").write_text(
        json.dumps({"meta": meta, "tasks": {"reversal": task}})
    )
    block = pretrained_table.render_table(tmp_path)
    (row,) = [line for line in block.splitlines() if "first error" in line]
    for i, k in enumerate(six):
        assert f"ref{k} {i:+.1f}, followed {0.1 * i:+.2f}" in row, (k, row)
    assert "were not recorded" not in " ".join(block.split())  # no nearer push missing
    (tmp_path / "quick-run-smollm2-addition.json").write_text(
        json.dumps({"meta": meta, "tasks": {"addition": _round_two()}})
    )
    block = pretrained_table.render_table(tmp_path)
    assert "ref-3 +10.0, followed +0.05; ref+3 -2.0, followed +0.30" in block
    note = " ".join(block.split())
    assert "its pushes at ref-2, -1, +1 and +2 were not recorded" in note
