"""docs/results.md opens with a conclusion generated from the committed digests: rendered
again it must equal the page, and on digests whose verdicts are known it says them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.report import results_summary

REPO = Path(__file__).resolve().parents[3]
DOCS = REPO / "docs"


def test_the_pages_summary_is_rendered_from_the_committed_digests():
    text = (DOCS / "results.md").read_text()
    start, end = text.index(results_summary.BEGIN), text.index(results_summary.END)
    assert text[start : end + len(results_summary.END)] == results_summary.render_summary(DOCS)
    # it comes before the notation it summarises
    assert start < text.index("<!-- quick-findings")


def _results(id_exact, ood_exact, verdict=None, task=None, run=0):
    out = {
        "eval": {
            "x_id": {"exact_match": id_exact},
            "x_ood": {"exact_match": ood_exact},
        }
    }
    if verdict:
        out["verdict"] = {"verdict": verdict}
    if task:
        out["seed_run"] = {"task": task, "run": run}
    return out


def _write(folder: Path, name: str, tasks: dict) -> None:
    (folder / name).write_text(json.dumps({"meta": {}, "tasks": tasks}))


def test_it_groups_seed_runs_and_says_whether_they_agree(tmp_path):
    _write(
        tmp_path,
        "quick-run.json",
        {
            "reversal": _results(1.0, 0.0, "no lookup", "reversal", 0),
            "reversal-seed1": _results(0.9, 0.0, "no lookup", "reversal", 1),
            "successor": _results(1.0, 0.1, "downstream", "successor", 0),
            "successor-seed1": _results(1.0, 0.2, "inconclusive", "successor", 1),
        },
    )
    _write(tmp_path, "quick-run-t6.json", {"t6": _results(0.95, 0.76)})
    text = " ".join(results_summary.render_summary(tmp_path).split())  # wrapping aside
    assert "- **reversal** (2 models; ID exact 0.90-1.00, OOD exact 0.00): *no lookup* x2 " in text
    assert "(the seeds agree)" in text and "(the seeds differ: whether the models" in text
    assert "- **t6** (1 model; ID exact 0.95, OOD exact 0.76): measured before" in text
    assert "None of the 4 models with a calibrated verdict is *nudge-repairable*" in text
    assert text.index("**reversal**") < text.index("**t6**")  # --quick's own digest first


def test_a_nudge_repairable_model_is_named(tmp_path):
    _write(tmp_path, "quick-run.json", {"addition": _results(1.0, 0.0, "nudge-repairable")})
    _write(
        tmp_path,
        "quick-run-seeds.json",
        {
            "reversal": _results(1.0, 0.0, "nudge-repairable"),
            "addition": _results(1.0, 0.0, "downstream"),
        },
    )
    text = " ".join(results_summary.render_summary(tmp_path).split())
    assert "the nudge-repairable ones" in text
    # per task, how many of its models: the seeds' other verdicts are not hidden
    assert "are 1 of 2 models of addition; 1 of 1 model of reversal." in text


def test_write_replaces_only_the_block_and_refuses_a_page_without_markers(tmp_path):
    _write(tmp_path, "quick-run.json", {"reversal": _results(1.0, 0.0, "downstream")})
    doc = tmp_path / "results.md"
    doc.write_text(f"# R\n\n{results_summary.BEGIN}\nSTALE\n{results_summary.END}\n\nrest\n")
    assert results_summary.write_summary(doc)
    text = doc.read_text()
    assert "STALE" not in text and "*downstream*" in text and text.endswith("\n\nrest\n")
    plain = tmp_path / "plain.md"
    plain.write_text("# no block\n")
    assert not results_summary.write_summary(plain) and plain.read_text() == "# no block\n"
    with pytest.raises(ValueError, match="no markers"):
        results_summary.replace_summary("text", "block")


def test_a_task_retrained_with_other_kernels_counts_them_among_its_models(tmp_path):
    """The same recipe trained with AVX2 kernels beside AVX512 ones: one task, whose
    finding stands only where all its retrained models agree."""
    avx512 = {"cpu": {"kernels": "AVX512", "processor": "Xeon"}}
    avx2 = {"cpu": {"kernels": "AVX2", "processor": "Xeon"}}
    runs = {
        "reversal": _results(1.0, 0.0, "downstream", "reversal", 0),
        "reversal-seed1": _results(1.0, 0.0, "downstream", "reversal", 1),
    }
    (tmp_path / "quick-run.json").write_text(json.dumps({"meta": avx512, "tasks": runs}))
    other = {"reversal": _results(1.0, 0.0, "downstream", "reversal", 0)}
    (tmp_path / "quick-run-avx2.json").write_text(json.dumps({"meta": avx2, "tasks": other}))
    text = " ".join(results_summary.render_summary(tmp_path).split())
    assert (
        "- **reversal** (3 models: 2 with AVX512 kernels, 1 with AVX2 kernels; ID exact 1.00, "
        "OOD exact 0.00): *downstream* x3 (the retrained models agree)" in text
    )
    other["reversal"]["verdict"]["verdict"] = "no lookup"
    (tmp_path / "quick-run-avx2.json").write_text(json.dumps({"meta": avx2, "tasks": other}))
    text = " ".join(results_summary.render_summary(tmp_path).split())
    assert "*downstream* x2, *no lookup* (the retrained models differ: " in text


def test_a_task_retrained_on_a_gpu_counts_it_by_its_gpu(tmp_path):
    """A GPU run's models are rounded by CUDA's kernels, not by the CPU the machine has."""
    xeon = {"cpu": {"kernels": "AVX512", "processor": "Xeon"}}
    gpu = xeon | {"accelerator": {"name": "NVIDIA H200", "cuda": "13.0"}}
    one = {"reversal": _results(1.0, 0.0, "downstream", "reversal", 0)}
    (tmp_path / "quick-run.json").write_text(json.dumps({"meta": xeon, "tasks": one}))
    (tmp_path / "quick-run-gpu.json").write_text(json.dumps({"meta": gpu, "tasks": one}))
    text = " ".join(results_summary.render_summary(tmp_path).split())
    assert "(2 models: 1 with AVX512 kernels, 1 on the NVIDIA H200 GPU, CUDA 13.0; " in text


def test_a_pretrained_runs_models_are_named_apart_from_the_scratch_ones(tmp_path):
    _write(tmp_path, "quick-run.json", {"reversal": _results(1.0, 0.0, "inconclusive")})
    (tmp_path / "quick-run-smollm2.json").write_text(
        json.dumps(
            {
                "meta": {"model": "smollm2-135m-instruct"},
                "tasks": {"reversal": _results(0.97, 0.09, "no lookup")},
            }
        )
    )
    text = " ".join(results_summary.render_summary(tmp_path).split())
    assert (
        "- **reversal** (1 model; ID exact 1.00, OOD exact 0.00): *inconclusive*; stability "
        "not recorded; read again: not recorded." in text
    )
    assert "- **reversal, smollm2-135m-instruct fine-tuned** (1 model; ID exact 0.97" in text


def test_the_opening_counts_the_models_that_fall_short_in_distribution(tmp_path):
    _write(
        tmp_path,
        "quick-run.json",
        {
            "reversal": _results(1.0, 0.0, "no lookup", "reversal", 0),
            "reversal-seed1": _results(0.8, 0.0, "no lookup", "reversal", 1),
        },
    )
    text = " ".join(results_summary.render_summary(tmp_path).split())
    assert text.startswith(
        "<!-- results-summary: generated from docs/quick-run*.json by "
        "harness/report/results_summary.py; do not edit --> 1 of 2 models learn their task"
    ), text[:200]
    _write(tmp_path, "quick-run.json", {"reversal": _results(1.0, 0.0, "no lookup")})
    text = " ".join(results_summary.render_summary(tmp_path).split())
    assert "Every model here learns its task in distribution" in text


def test_a_folder_without_digests_is_said_not_a_crash(tmp_path):
    text = results_summary.render_summary(tmp_path)
    assert "No digest (quick-run*.json) lies beside this page" in text
    assert text.startswith(results_summary.BEGIN) and text.endswith(results_summary.END)


def _judged_verdict(word, share, agrees=True, again=None):
    """A round-3 verdict: its stability share and its replication's word."""
    again = again or word
    replication = {"verdict": again, "agrees": agrees, "stability": {"share": 1.0}}
    return {"verdict": word, "stability": {"share": share}, "replication": replication}


def test_seeds_that_differ_are_told_apart_from_instances_that_differ(tmp_path):
    """Where a task's models take different words, the stability and the replication say
    whether the models differ (every word stable and read again alike) or the instances
    drawn may (one is not); a digest without them says it is not measured."""

    def render(first, second):
        runs = {
            "successor": _results(1.0, 0.0, task="successor", run=0) | {"verdict": first},
            "successor-seed1": _results(1.0, 0.0, task="successor", run=1) | {"verdict": second},
        }
        _write(tmp_path, "quick-run.json", runs)
        return " ".join(results_summary.render_summary(tmp_path).split())

    text = render(_judged_verdict("mixed failure", 0.98), _judged_verdict("downstream", 1.0))
    assert (
        "*mixed failure*, *downstream* (the seeds differ: each word is stable and read again "
        "alike: the models differ, not the instances); stability 0.98 (margin not recorded), "
        "1.00 (margin not recorded); read again alike x2." in text
    )
    # one word under 0.8 of its resamples: the disagreement may be the instances'
    text = render(_judged_verdict("mixed failure", 0.62), _judged_verdict("downstream", 1.0))
    assert "the instances drawn may be why" in text
    # read otherwise on fresh instances: the same
    moved = _judged_verdict("downstream", 1.0, agrees=False, again="mixed failure")
    text = render(_judged_verdict("mixed failure", 0.98), moved)
    assert "the instances drawn may be why" in text and "read again: alike, differs." in text
    # stable, but not read again (--no-replicate): not measured
    skipped = _judged_verdict("downstream", 1.0) | {"replication": {"skipped": True}}
    text = render(_judged_verdict("mixed failure", 0.98), skipped)
    assert "differ is not measured" in text and "read again: alike, not run." in text
    # a round-2 digest: neither measured, and said so
    text = render({"verdict": "mixed failure"}, {"verdict": "downstream"})
    assert "(the seeds differ: whether the models or the instances drawn differ is not " in text
    assert "read again: not recorded x2." in text


def test_seeds_alike_at_their_first_lookup_are_said_so_before_the_second_is_read(tmp_path):
    """Two candidate lookups a run: where every run's first reads the same word, firmly,
    the summary says so and reads the cause of the disagreement at the second lookups."""

    def run(k, first, second):
        lookups = [{"offset": 0, "mass": 0.46}, {"offset": 1, "mass": 0.45, "verdict": second}]
        results = _results(1.0, 0.0, task="reversal", run=k)
        return results | {"verdict": first, "lookups": lookups}

    def render(*pairs):
        runs = {f"reversal-seed{k}": run(k, *pair) for k, pair in enumerate(pairs)}
        _write(tmp_path, "quick-run.json", runs)
        return " ".join(results_summary.render_summary(tmp_path).split())

    firm = _judged_verdict("downstream", 1.0)
    text = render(
        (firm, _judged_verdict("mixed failure", 0.9)), (firm, _judged_verdict("inconclusive", 0.5))
    )
    assert (
        "(the seeds differ: at its first candidate lookup every model reads *downstream*, each "
        "stable and read again alike; at the second not every word there is stable and read "
        "again alike: the instances drawn may be why)" in text
    )
    # the second lookups' words firm too: the models differ there
    text = render(
        (firm, _judged_verdict("mixed failure", 0.9)), (firm, _judged_verdict("no lookup", 0.95))
    )
    assert "at the second each word there is stable and read again alike: the models differ" in text
    # the first word the same but one of them unstable: not said to hold
    shaky = _judged_verdict("downstream", 0.7)
    text = render(
        (firm, _judged_verdict("mixed failure", 0.9)), (shaky, _judged_verdict("no lookup", 0.95))
    )
    assert "every model reads *unstable" not in text
    # the same first word, but one read otherwise on fresh instances: said, not said to hold
    moved = _judged_verdict("downstream", 1.0, agrees=False, again="mixed failure")
    text = render(
        (firm, _judged_verdict("mixed failure", 0.9)), (moved, _judged_verdict("no lookup", 0.95))
    )
    assert "every model reads *downstream*; at the second each word there is stable" in text
    # first words that differ: read over every word, as with one lookup a run
    other = _judged_verdict("no lookup", 1.0)
    text = render(
        (firm, _judged_verdict("mixed failure", 0.9)), (other, _judged_verdict("no lookup", 0.95))
    )
    assert "each word is stable and read again alike: the models differ, not the instances" in text
