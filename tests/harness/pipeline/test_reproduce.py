"""`attentionspan reproduce` end to end on a tiny untrained model, and its resumption."""

from __future__ import annotations

import json

import pytest

from harness.pipeline import reproduce as reproduce_module
from harness.pipeline.reproduce import ReproduceConfig, reproduce, task_presets, task_short_name
from harness.pipeline.stages import Stages
from harness.report.report_md import pipeline_writers
from tests.harness.conftest import save_tiny_model

TINY = dict(
    config="reversal",
    num_heads=4,
    num_validation=4,
    num_test=4,
    num_attention=3,
    batch_size=4,
    counts=[1, 2],
    strengths=[1.0],
    control_seeds=[0],
    ood={"max_length": 12},
    device="cpu",
    progress=False,
)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return str(save_tiny_model("llama", tmp_path_factory.mktemp("repro") / "llama"))


@pytest.mark.slow
def test_reproduce_end_to_end_and_resume(tmp_path, model_dir, monkeypatch):
    out = tmp_path / "out"
    cfg = ReproduceConfig(model=model_dir, output=str(out), **TINY)
    report = reproduce(cfg, pipeline_writers())
    text = report.read_text()
    for heading in (
        "Table 1 analog",
        "Table 2 analog",
        "Appendix G",
        "Sweep on validation",
        "controls on test",
        "Figure 2 analog",
        "Where the model looks when it errs",
    ):
        assert heading in text
    assert "attentionspan reproduce --model" in text
    folder = out / "reversal"
    for name in (
        "heads.json",
        "sweep.png",
        "head-ranking.png",
        "accuracy-by-length.png",
        "results.json",
        "attention/attention.json",
        "attention/attention.html",
    ):
        assert (folder / name).is_file(), name
    settings = json.loads((out / "settings.json").read_text())
    assert settings["num_test"] == 4 and settings["ood"] == {"max_length": 12}
    results = json.loads((folder / "results.json").read_text())
    # every wrong OOD token classified once, from the baseline's own answers
    diagnosis = results["diagnosis"]["reversal_ood"]
    assert diagnosis["tokens"] == sum(diagnosis["token_counts"].values()) > 0
    assert len(results["model_sha256"]) == 64  # the weights the figures come from
    assert settings["versions"]["torch"]
    sweep = results["sweep"]
    # Chosen among the grid on validation; reported with its controls on test and ID.
    assert sweep["chosen_name"] in ("top1-C1", "top2-C1")
    assert set(sweep["test"]) == set(sweep["id"])
    assert any(name.startswith("random") for name in sweep["test"])
    assert any(name.endswith("knockout") for name in sweep["test"])
    assert "low" in sweep["test_gains"][sweep["chosen_name"]]["partial_acc"]
    # The repair-or-pointer controls and the verdict they give, in the JSON and the report.
    assert any(name.endswith("restore") for name in sweep["test"])
    assert any("shift+3" in name for name in sweep["test"])
    assert sweep["verdict"]["verdict"] in ("repair", "pointer", "inconclusive")
    assert set(sweep["verdict"]["numbers"]["follows"]) == {"-3", "3"}
    assert text.index("## Findings") < text.index("## reversal")
    assert "**Verdict: " in text and "reversal: The model" in text
    assert "[attention.html](reversal/attention/attention.html)" in text
    stage_files = sorted(p.name for p in (out / "stages").iterdir())

    # A second run computes nothing: every scoring call would fail.
    def refuse(*args, **kwargs):
        raise AssertionError("a finished stage was computed again")

    monkeypatch.setattr("harness.attention.interventions.score_settings", refuse)
    monkeypatch.setattr("harness.attention.analysis.analyse_model", refuse)
    monkeypatch.setattr("harness.attention.heads.rank_heads", refuse)
    reproduce(cfg, pipeline_writers())
    assert sorted(p.name for p in (out / "stages").iterdir()) == stage_files

    # An interrupted sweep: the lost stage alone is computed again.
    monkeypatch.undo()
    lost = out / "stages" / f"reversal-sweep-test-{sweep['chosen_name']}.json"
    lost.unlink()
    ran = []
    original = Stages.run

    def spy(self, name, settings, compute):
        return original(self, name, settings, lambda: ran.append(name) or compute())

    monkeypatch.setattr(Stages, "run", spy)
    calls = []
    real = reproduce_module.TaskRun.score

    def count(self, settings, stream, ranking=None):
        result = real(self, settings, stream, ranking)
        calls.append(self.stages.ran[:])
        return result

    monkeypatch.setattr(reproduce_module.TaskRun, "score", count)
    reproduce(cfg, pipeline_writers())
    assert lost.is_file()
    assert ran == []  # attention and heads reused
    assert [entry for entry in calls if entry][0] == [lost.stem]  # only the lost one
    assert all(entry == [lost.stem] for entry in calls if entry)


def test_the_attention_stage_takes_the_score_convention(tmp_path, model_dir):
    """`--score-convention authors` reaches the attention stage (its settings, so a paper
    run's stage file is not reused for it), the EOS row counts as a token, and report.md's
    Table 2 text states the convention."""
    from harness.engine.scoring import Processes
    from harness.report.report_md import attention_section

    tiny = {k: v for k, v in TINY.items() if k != "progress"}
    out = tmp_path / "out"
    runs = {}
    for convention in ("paper", "authors"):
        cfg = ReproduceConfig(
            model=model_dir, output=str(out), progress=False, score_convention=convention, **tiny
        )
        run = reproduce_module.TaskRun(
            cfg, "reversal", model_dir, out, Processes("cpu"), pipeline_writers()
        )
        runs[convention] = (run, run.run_attention())
    paper, authors = runs["paper"][1], runs["authors"][1]
    assert runs["authors"][0].stages.ran == ["reversal-attention"]  # not the paper's file
    assert authors["score_convention"] == "authors"
    instances = runs["paper"][0].instances("id", 3)
    for name in ("reversal_id", "reversal_ood"):
        extra = authors["results"][name]["tokens"] - paper["results"][name]["tokens"]
        assert extra == 3  # one EOS row per instance
    assert sum(len(x.target) for x in instances) == paper["results"]["reversal_id"]["tokens"]
    task = {"task": "reversal", "model": model_dir, "attention": authors}
    text = "\n".join(attention_section(task, tmp_path / "reversal", "attentionspan reproduce"))
    assert "Score convention: authors (their released code)" in text
    assert "difference [95% CI over instances]" in text
    document = json.loads((tmp_path / "reversal" / "attention" / "attention.json").read_text())
    assert document["settings"]["score_convention"] == "authors"
    # Stage files from before the option: the paper's convention.
    legacy = {"results": paper["results"], "plots": paper["plots"]}
    task = {"task": "reversal", "model": model_dir, "attention": legacy}
    text = "\n".join(attention_section(task, tmp_path / "old", "attentionspan reproduce"))
    assert "Score convention: paper (the paper's text)" in text


def test_bad_options_name_the_field():
    with pytest.raises(ValueError, match="'model' is required"):
        ReproduceConfig()
    with pytest.raises(ValueError, match="'num_test' must be >= 1"):
        ReproduceConfig(model="x", num_test=0)
    with pytest.raises(ValueError, match="'mode' must be"):
        ReproduceConfig(model="x", mode="knockout")
    with pytest.raises(ValueError, match="has no ID/OOD presets"):
        ReproduceConfig(model="x", config="nonsense")
    with pytest.raises(ValueError, match="'ood' overrides for successor_ood"):
        ReproduceConfig(model="x", config="successor", ood={"max_length": 20})
    quick = ReproduceConfig(quick=True, tasks=["reversal", "successor"])
    assert quick.ood_for("reversal") == {"max_length": 20} and quick.ood_for("successor") == {}
    # --ood values take their field's type (bool, int, text), not a guess from the text
    va = ReproduceConfig(
        model="x", config="value_assignment", ood={"sorted_keys": "true", "max_length": "12"}
    )
    assert va.ood_for("value_assignment") == {"sorted_keys": True, "max_length": 12}
    flips = ReproduceConfig(model="x", config="ffml", ood={"use_flip": "false"})
    assert flips.ood_for("ffml") == {"use_flip": False}
    with pytest.raises(ValueError, match="'sorted_keys' must be true or false"):
        ReproduceConfig(model="x", config="value_assignment", ood={"sorted_keys": "maybe"})
    assert task_presets("reversal") == ("reversal_id", "reversal_ood")
    assert task_presets("successor_id") == ("successor_id", "successor_ood")
    for name in ("reversal", "reversal_id", "reversal_ood", "string_reversal"):
        assert task_short_name(name) == "reversal"  # the task's folder


def test_each_quick_task_trains_with_a_valid_recipe(tmp_path, monkeypatch):
    from harness.pipeline import settings
    from harness.pipeline.reproduce import quick_train_config
    from harness.train import TrainConfig

    cfg = ReproduceConfig(quick=True, output=str(tmp_path))
    assert cfg.train_steps == 0  # each task's own steps
    for task in sorted({*settings.QUICK_TASKS, *settings.QUICK_RECIPES}):
        recipe = settings.quick_recipe(task)
        config = quick_train_config(cfg, task, tmp_path / task)
        assert isinstance(config, TrainConfig) and config.config == f"{task}_id"
        assert config.max_steps == recipe["max_steps"] and config.lr == recipe["lr"]
        assert config.train_size == recipe["max_steps"] * recipe["batch_size"]  # fresh data
        for name, value in recipe["scratch"].items():
            assert getattr(config.scratch, name) == value, (task, name)
    # --train-steps replaces every recipe's steps
    assert (
        quick_train_config(
            ReproduceConfig(quick=True, train_steps=7), "reversal", tmp_path
        ).max_steps
        == 7
    )
    with pytest.raises(ValueError, match="'train_steps' must be >= 0"):
        ReproduceConfig(quick=True, train_steps=-1)
    # a recipe with a misspelt option fails by name, before any training
    monkeypatch.setitem(settings.QUICK_RECIPES, "reversal", {"learning_rate": 1e-3})
    with pytest.raises(ValueError, match="unknown training option.*learning_rate"):
        quick_train_config(cfg, "reversal", tmp_path)
    monkeypatch.setitem(settings.QUICK_RECIPES, "reversal", {"scratch": {"num_layers": 2}})
    assert quick_train_config(cfg, "reversal", tmp_path).scratch.num_layers == 2


def test_cli_one_line_errors(capsys):
    from harness.commands.reproduce import main

    assert main(["--model", "/does/not/exist"]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["--quick", "--ood", "max_length"]) == 2
    assert "--ood expects KEY=VALUE" in capsys.readouterr().err
