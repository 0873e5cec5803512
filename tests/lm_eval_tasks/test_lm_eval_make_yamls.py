"""The committed task files are exactly what make_yamls.py writes, and lm-eval reads them."""

from __future__ import annotations

import fnmatch
from pathlib import Path

import pytest

from attentionspan_datasets.metrics import bucket_metric_name
from attentionspan_datasets.presets import PRESETS
from lm_eval_tasks import TASKS_DIR, attention, make_yamls
from lm_eval_tasks.dataset import default_bins


@pytest.mark.slow
def test_committed_files_equal_the_generator_output():
    expected = make_yamls.expected_files()
    on_disk = make_yamls.generated_on_disk(Path(TASKS_DIR))
    stale = sorted(n for n in set(expected) | set(on_disk) if expected.get(n) != on_disk.get(n))
    assert not stale, f"run `python -m lm_eval_tasks.make_yamls`; stale: {stale}"
    assert make_yamls.main(["--check"]) == 0


@pytest.mark.slow
def test_one_task_per_preset_and_a_group_the_glob_does_not_match():
    names = make_yamls.presets()
    assert names == list(PRESETS)  # every preset's task is registered
    files = make_yamls.expected_files()
    groups = ["_attnspan.yaml", "_attnspan_retrieval.yaml"]
    assert sorted(files) == sorted([f"attnspan_{p}.yaml" for p in names] + groups)
    assert not fnmatch.fnmatch(make_yamls.GROUP, "attnspan_*")
    assert not fnmatch.fnmatch(make_yamls.RETRIEVAL_GROUP, "attnspan_*")


def test_lm_eval_reads_the_files_with_the_template_and_functions():
    from lm_eval.tasks._yaml_loader import load_yaml

    for preset in make_yamls.presets():
        cfg = load_yaml(Path(TASKS_DIR, f"attnspan_{preset}.yaml"), resolve_func=True)
        assert cfg["task"] == f"attnspan_{preset}"
        assert cfg["dataset_kwargs"] == {"preset": preset}
        assert cfg["metadata"]["version"] == float(make_yamls.VERSION) == 2.1
        assert callable(cfg["custom_dataset"]) and callable(cfg["process_results"])
        assert cfg["target_delimiter"] == "" and cfg["fewshot_delimiter"] == "\n"
        assert cfg["generation_kwargs"]["until"] == ["\n"]
        metrics = [m["metric"] for m in cfg["metric_list"]]
        bins = [bucket_metric_name("exact_match", *b) for b in default_bins(preset)]
        shares = [attention.bin_name(name) for name in bins]
        assert metrics == [
            "exact_match",
            "partial_acc",
            *bins,
            attention.SHARE,
            attention.CORRECT,
            attention.WRONG,
            attention.BEST_HEAD,
            *shares,
        ]
        aggregations = {
            m["metric"]: getattr(m["aggregation"], "__name__", "") for m in cfg["metric_list"]
        }
        assert aggregations[attention.BEST_HEAD] == "best_head"
        assert {aggregations[name] for name in [attention.SHARE, *shares]} == {"token_mean"}
    group = load_yaml(Path(TASKS_DIR, "_attnspan.yaml"), resolve_func=True)
    assert group["task"] == [f"attnspan_{p}" for p in make_yamls.presets()]
    retrieval = load_yaml(Path(TASKS_DIR, "_attnspan_retrieval.yaml"), resolve_func=True)
    assert retrieval["group"] == "attnspan-retrieval"
    assert retrieval["task"] == [f"attnspan_t{k}_{s}" for k in range(1, 8) for s in (
        "len5", "len10", "len15", "len20", "len25", "len30", "id", "ood")]  # fmt: skip


def test_generation_budget_covers_the_longest_target():
    for preset in ("reversal_ood", "multiplication_ood", "ffml_id"):
        text = make_yamls.render_task(preset)
        budget = int(text.split("max_gen_toks: ")[1].split("\n")[0])
        assert budget == make_yamls.max_target_length(preset) + make_yamls.GENERATION_MARGIN


def test_writing_removes_stale_files(tmp_path, monkeypatch):
    monkeypatch.setattr(make_yamls, "TASKS_DIR", str(tmp_path))
    monkeypatch.setattr(make_yamls, "presets", lambda: ["reversal_id"])
    (tmp_path / "attnspan_gone.yaml").write_text("task: attnspan_gone\n")
    assert make_yamls.main(["--check"]) == 1
    assert make_yamls.main([]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "_attnspan.yaml",
        "attnspan_reversal_id.yaml",
    ]
    assert make_yamls.main(["--check"]) == 0
