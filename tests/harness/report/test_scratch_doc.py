"""The scratch reversal model's figures in README.md and the docs are the commands' output:
each block, rendered again from the committed digest (docs/scratch-reversal.json), must equal
its page, and the prose around the blocks must still be what the digest says."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from harness.report import scratch_doc

REPO = Path(__file__).resolve().parents[3]
DIGEST = json.loads((REPO / scratch_doc.DIGEST).read_text())
FIGURES = DIGEST["figures"]


@pytest.mark.parametrize(("page", "name"), [(p, n) for p, n, _ in scratch_doc.BLOCKS])
def test_every_block_is_rendered_from_the_committed_digest(page, name):
    begin, end_marker = scratch_doc.markers(name)
    text = (REPO / page).read_text()
    assert text.count(begin) == 1 and text.count(end_marker) == 1, f"{page}: markers of {name}"
    start, end = text.index(begin), text.index(end_marker)
    assert text[start : end + len(end_marker)] == scratch_doc.render(DIGEST, page, name), (
        f"{page}'s {name} block differs from {scratch_doc.DIGEST}: rerun "
        "`attentionspan scratch-doc render` (or `run`, when the figures moved)"
    )


def test_the_digest_records_how_each_figure_was_made():
    meta = DIGEST["meta"]
    assert meta["date"] and meta["machine"]
    assert {"python", "torch", "transformers", "lm_eval", "attentionspan"} <= set(meta["versions"])
    assert len(FIGURES["model_sha256"]) == 64
    for step, command, _ in scratch_doc.STEPS:
        assert FIGURES[step]["command"].startswith("OMP_NUM_THREADS=1 ")
        assert FIGURES[step]["command"].split(" ", 1)[1].split()[:2] == command.split()[:2]


def test_the_lm_eval_table_holds_the_digest_numbers():
    """The table is lm-eval's printed output; every cell agrees with its results file."""
    lm = FIGURES["lm_eval"]
    task, seen = None, 0
    for row in lm["table"][2:]:
        cells = [c.strip() for c in row.strip("|").split("|")]
        task = cells[0] or task
        if cells[1]:
            assert cells[1] == lm["task_versions"][task]
        metric, value = cells[4], cells[6]
        assert value == f"{lm['results'][task][metric]:.4f}", (task, metric)
        seen += 1
    assert seen == sum(len(r) for r in lm["results"].values())


def test_the_prose_around_the_blocks_is_what_the_digest_says():
    """The sentences outside the blocks (README.md, docs/results.md, docs/usage_analysis.md)
    make claims without numbers; the digest must still back each one."""
    ev = FIGURES["eval"]["results"]
    # "Perfect in distribution, not one OOD string right, and teacher forcing does not rescue
    # it"; "a few percent of OOD characters in place"
    assert ev["reversal_id"]["exact_match"] == 1.0
    assert ev["reversal_ood"]["exact_match"] == 0.0
    assert ev["reversal_ood"]["tf_token_acc"] < 0.1
    assert 0.01 < FIGURES["lm_eval"]["results"]["attnspan_reversal_ood"]["partial_acc"] < 0.1
    # "Right OOD tokens sit in the shortest strings"
    bins = list(ev["reversal_ood"]["per_bin"].values())
    assert bins[0]["partial_acc"] > 5 * max(b["partial_acc"] for b in bins[2:])
    # "correct OOD tokens do put more of their attention on their reference, pooled and over
    # instances, but most of the pooled gap is between instances"
    for row in FIGURES["attention"]["configs"]["reversal_ood"].values():
        aware = row["instance_aware"]
        assert aware["cluster_bootstrap"]["low"] > 0
        assert 0 < aware["paired"]["mean_difference"] < aware["cluster_bootstrap"]["difference"] / 2
    # "led by layer-0 heads that put about as much at ref+2, while the heads of layers 1-3 put
    # more at ref+1 than at the reference, layer 2's most of all"
    heads = FIGURES["heads"]["top"]
    for head in heads[:2]:
        assert head["layer"] == 0 and head["offsets"]["2"] > head["offsets"]["0"] / 2
    ref1 = {}
    for layer in (1, 2, 3):
        group = [h["offsets"] for h in heads if h["layer"] == layer]
        ref1[layer] = np.mean([o["1"] for o in group])
        assert ref1[layer] > np.mean([o["0"] for o in group])
    assert max(ref1, key=ref1.get) == 2


def test_the_matched_test_decides_the_words():
    """The Table 2 conclusion follows the numbers: p >= 0.05 reads "not significant"."""
    configs = json.loads(json.dumps(FIGURES["attention"]["configs"]))
    row = configs["reversal_ood"]["teacher_forced"]
    row["instance_aware"]["matched"]["p"] = 0.066
    lines = scratch_doc._attention_findings({"reversal_ood": {"teacher_forced": row}})
    assert len(lines) == 1 and "**not significant** at 0.05 (matched p = 0.066)" in lines[0]
    row["instance_aware"]["matched"]["p"] = 0.002
    lines = scratch_doc._attention_findings({"reversal_ood": {"teacher_forced": row}})
    assert "is significant at 0.05 (matched p = 0.002)" in " ".join(lines[0].split())
    # no wrong token (the ID rows): nothing to conclude
    assert scratch_doc._attention_findings({"reversal_id": configs["reversal_id"]}) == []


def _write_run(out: Path) -> None:
    """A run folder holding what each step writes, with a few of the digest's numbers."""
    from safetensors.numpy import save_file

    (out / "final").mkdir(parents=True)
    weights = {"w": np.arange(6, dtype=np.float32).reshape(2, 3)}
    save_file(weights, str(out / "final" / "model.safetensors"))
    run = {"state": {"step": 10}, "final_eval": {"exact_match": 1.0}}
    (out / "final" / "attentionspan_run.json").write_text(json.dumps(run))
    (out / "log.jsonl").write_text(json.dumps({"step": 10, "elapsed_s": 2.0, "cpu_s": 1.0}) + "\n")
    row = {"count": 2, "exact_match": 0.0, "partial_acc": 0.25, "tf_token_acc": 0.5}
    results = {"reversal_ood": {**row, "per_length": {"11": row}, "per_bin": {"11": row}}}
    (out / "eval").mkdir()
    (out / "eval" / "results.json").write_text(json.dumps({"results": results, "time_s": 1.5}))
    (out / "attention").mkdir()
    attention = {"configs": {"reversal_ood": FIGURES["attention"]["configs"]["reversal_ood"]}}
    block = attention["configs"]["reversal_ood"]
    attention["configs"]["reversal_ood"] = {**block["teacher_forced"], "seconds": 3.0}
    (out / "attention" / "attention.json").write_text(json.dumps(attention))
    heads = {"rows": 4, "source": {"config": "reversal_id", "split": "validation", "instances": 2}}
    heads["top"] = [
        {"layer": 0, "head": 1, "per_row": 0.5, "score": 2.0, "offsets": {"0": 0.5, "1": 0.1}}
    ]
    (out / "heads.json").write_text(json.dumps(heads))
    (out / "lm_eval" / "model").mkdir(parents=True)
    lm = {
        "lm_eval_version": "0.4.13",
        "total_evaluation_time_seconds": "4.5",
        "versions": {"attnspan_reversal_ood": 2.1},
        "results": {
            "attnspan_reversal_ood": {
                "alias": "attnspan_reversal_ood",
                "partial_acc,none": 0.25,
                "partial_acc_stderr,none": 0.1,
                "exact_match,none": 0.0,
                "exact_match_stderr,none": "N/A",
            }
        },
    }
    (out / "lm_eval" / "model" / "results_1.json").write_text(json.dumps(lm))
    (out / "lm_eval.txt").write_text("a log line\n|Tasks|Version|\n|---|---|\n")


def test_digest_and_check_read_a_run_folder(tmp_path):
    run = tmp_path / "run"
    _write_run(run)
    figures = scratch_doc.digest(run)
    assert figures["parameters"] == 6 and len(figures["model_sha256"]) == 64
    assert figures["train"] == {
        "command": scratch_doc.commands(str(run))["train"],
        "steps": 10,
        "seconds": 2.0,
        "cpu_s": 1.0,
        "final_eval": {"exact_match": 1.0},
    }
    assert figures["lm_eval"]["results"] == {
        "attnspan_reversal_ood": {"partial_acc": 0.25, "exact_match": 0.0}
    }
    assert figures["lm_eval"]["stderr"] == {"attnspan_reversal_ood": {"partial_acc": 0.1}}
    assert figures["lm_eval"]["table"] == ["|Tasks|Version|", "|---|---|"]
    assert figures["heads"]["top"][0] == {
        "layer": 0,
        "head": 1,
        "per_row": 0.5,
        "offsets": {"0": 0.5, "1": 0.1},
    }
    digest_file = tmp_path / "digest.json"
    meta = {"date": "d", "machine": "m", "versions": {"torch": "0"}}
    digest_file.write_text(json.dumps({"meta": meta, "figures": figures}))
    # the same steps in another folder, at another speed: it reproduces
    other = tmp_path / "other"
    _write_run(other)
    (other / "log.jsonl").write_text(json.dumps({"step": 10, "elapsed_s": 9.0, "cpu_s": 8.0}))
    assert scratch_doc.check(other, digest_file) == []
    # a figure moves: named, with the versions behind it
    results = json.loads((other / "eval" / "results.json").read_text())
    results["results"]["reversal_ood"]["partial_acc"] = 0.5
    (other / "eval" / "results.json").write_text(json.dumps(results))
    problems = scratch_doc.check(other, digest_file)
    assert problems[1] == "eval.results.reversal_ood.partial_acc: expected 0.25, got 0.5"
    assert problems[-1].startswith("versions that differ: ") and "torch 0 -> " in problems[-1]
    # a step that has not run: refused in one line
    (other / "heads.json").unlink()
    with pytest.raises(ValueError, match="lacks heads.json"):
        scratch_doc.digest(other)


def test_a_page_without_its_markers_is_refused_and_nothing_is_written(tmp_path):
    for page in {p for p, _, _ in scratch_doc.BLOCKS}:
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / page).write_text((REPO / page).read_text())
    (tmp_path / "docs" / "usage_analysis.md").write_text("no markers\n")
    before = (tmp_path / "README.md").read_text()
    with pytest.raises(ValueError, match="docs/usage_analysis.md: the doc has no markers"):
        scratch_doc.write_pages(DIGEST, root=tmp_path)
    assert (tmp_path / "README.md").read_text() == before
    # with them, the pages come out as committed
    (tmp_path / "docs" / "usage_analysis.md").write_text(
        (REPO / "docs" / "usage_analysis.md").read_text()
    )
    scratch_doc.write_pages(DIGEST, root=tmp_path)
    for page in {p for p, _, _ in scratch_doc.BLOCKS}:
        assert (tmp_path / page).read_text() == (REPO / page).read_text()
