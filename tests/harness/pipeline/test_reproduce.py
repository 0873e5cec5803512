"""`attentionspan reproduce` end to end on a tiny untrained model, and its resumption."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from harness.pipeline import reproduce as reproduce_module
from harness.pipeline.reproduce import ReproduceConfig, TaskValue, reproduce
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
    stability_resamples=40,  # the stability stage measured, briefly
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
    assert "chosen setting: " in text and "reversal: The model" in text
    # The dose-response ladder on validation and test, and the calibrated verdict read from
    # it and from where the errors look, in the JSON and the report (with its plot).
    from harness.attention.verdicts.calibrated import VERDICTS

    assert results["verdict"]["verdict"] in VERDICTS
    for stream in ("validation", "test"):
        assert [d["strength"] for d in results["dose"][stream]["doses"]] == [
            0.05,
            0.1,
            0.2,
            0.3,
            0.5,
            1.0,
            2.0,
        ]
    assert "**Calibrated verdict: " in text and (folder / "dose-response.png").is_file()
    # N is the ladder's own choice on validation among the grid's counts and the count that
    # holds every lookup head in distribution, not the grid's chosen setting's
    dose = results["dose"]
    lookup = results["heads"]["source"]["lookup_heads"]
    # (a tiny model trained this briefly may have no head beating its null: no lookup heads,
    # so no count is added for them, and rule G says no lookup below)
    covering = max((results["heads_key"].index(h) + 1 for h in lookup), default=0)
    grid_counts = {str(n) for n in sweep["grid"]["counts"]}
    assert set(dose["counts"]) == grid_counts | ({str(covering)} if covering else set())
    assert dose["n"] == dose["test"]["n"] == dose["validation"]["n"]
    assert str(dose["n"]) in dose["counts"] and "the best dose of each N: N = " in text
    # the offset it read at, found from the ranking's profile, is said first
    offset = results["heads"]["source"]["lookup_offset"]
    if lookup:
        assert offset["found"] and results["verdict"]["reasons"][0] == offset["text"]
    else:  # rule G: no lookup head, nothing to judge
        assert results["verdict"]["verdict"] == "no lookup", results["verdict"]
    assert results["diagnosis"]["reversal_ood"]["basis"] == "first wrong row of each instance"
    # the verdict's dose scored free-running too, when it chose one
    chosen_dose = results["verdict"]["numbers"]["dose"]
    if chosen_dose:
        at = results["at_dose"]
        assert at["setting"].startswith("top") and "partial_acc" in at["test"]["gains"]
        assert "Free-running at that dose" in text
    else:
        assert results["at_dose"] is None
    assert "| calibrated verdict |" in text
    assert "[attention.html](reversal/attention/attention.html)" in text
    stage_files = sorted(p.name for p in (out / "stages").iterdir())
    # a setting's stage records the stream's instance count beside the setting's head count
    # (both were "n": the head count overwrote it, so another --num-test reused old records)
    chosen = json.loads(
        (out / "stages" / f"reversal-sweep-test-{sweep['chosen_name']}.json").read_text()
    )
    assert chosen["settings"]["num_instances"] == cfg.num_test
    head_count = int(sweep["chosen_name"].removeprefix("top").split("-")[0])
    assert chosen["settings"]["setting"]["n"] == head_count  # the setting's, under its key

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

    def count(self, settings, stream, lookup=None):
        result = real(self, settings, stream, lookup)
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
            cfg, TaskValue.of("reversal"), model_dir, out, Processes("cpu"), pipeline_writers()
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
    assert (
        quick.ood_for(TaskValue.of("reversal")) == {"max_length": 20}
        and quick.ood_for(TaskValue.of("successor")) == {}
    )
    # --ood values take their field's type (bool, int, text), not a guess from the text
    va = ReproduceConfig(
        model="x", config="value_assignment", ood={"sorted_keys": "true", "max_length": "12"}
    )
    assert va.ood_for(TaskValue.of("value_assignment")) == {"sorted_keys": True, "max_length": 12}
    flips = ReproduceConfig(model="x", config="ffml", ood={"use_flip": "false"})
    assert flips.ood_for(TaskValue.of("ffml")) == {"use_flip": False}
    with pytest.raises(ValueError, match="'sorted_keys' must be true or false"):
        ReproduceConfig(model="x", config="value_assignment", ood={"sorted_keys": "maybe"})
    # --seeds: 1 to 20, only where each seed run can train its own model (--quick)
    with pytest.raises(ValueError, match="'seeds' must be >= 1, got 0"):
        ReproduceConfig(quick=True, seeds=0)
    with pytest.raises(ValueError, match="'seeds' must be <= 20"):
        ReproduceConfig(quick=True, seeds=21)
    with pytest.raises(ValueError, match="'seeds' 2 trains one model per seed run.*--quick"):
        ReproduceConfig(model="x", seeds=2)
    with pytest.raises(ValueError, match="'seeds' 2 .* needs --quick without --model"):
        ReproduceConfig(model="x", quick=True, seeds=2)
    with pytest.raises(ValueError, match="'seed' .* \\+ 'seeds' 3 - 1 = .* is outside"):
        ReproduceConfig(quick=True, seeds=3, seed=2**64 - 2)
    assert ReproduceConfig(quick=True, seeds=20).seeds == 20
    assert TaskValue.of("reversal").presets == ("reversal_id", "reversal_ood")
    assert TaskValue.of("successor_id").presets == ("successor_id", "successor_ood")
    for name in ("reversal", "reversal_id", "reversal_ood", "string_reversal"):
        assert TaskValue.of(name).short == "reversal"  # the task's folder


def test_each_quick_task_trains_with_a_valid_recipe(tmp_path, monkeypatch):
    from harness.pipeline import settings
    from harness.pipeline.prepare import task_train_config
    from harness.training.train import TrainConfig

    cfg = ReproduceConfig(quick=True, output=str(tmp_path))
    assert cfg.train_steps == 0  # each task's own steps
    for task in sorted({*settings.QUICK_TASKS, *settings.QUICK_RECIPES}):
        value = TaskValue.of(task)
        recipe = value.recipe(pretrained=False)
        config = task_train_config(cfg, value, tmp_path / task)
        assert isinstance(config, TrainConfig) and config.config == f"{task}_id"
        assert config.max_steps == recipe["max_steps"] and config.lr == recipe["lr"]
        assert config.train_size == recipe["max_steps"] * recipe["batch_size"]  # fresh data
        for name, value in recipe["scratch"].items():
            assert getattr(config.scratch, name) == value, (task, name)
    # --train-steps replaces every recipe's steps
    assert (
        task_train_config(
            ReproduceConfig(quick=True, train_steps=7), TaskValue.of("reversal"), tmp_path
        ).max_steps
        == 7
    )
    with pytest.raises(ValueError, match="'train_steps' must be >= 0"):
        ReproduceConfig(quick=True, train_steps=-1)
    # a recipe with a misspelt option fails by name, before any training
    monkeypatch.setitem(settings.QUICK_RECIPES, "reversal", {"learning_rate": 1e-3})
    with pytest.raises(ValueError, match="unknown training option.*learning_rate"):
        task_train_config(cfg, TaskValue.of("reversal"), tmp_path)
    monkeypatch.setitem(settings.QUICK_RECIPES, "reversal", {"scratch": {"num_layers": 2}})
    assert task_train_config(cfg, TaskValue.of("reversal"), tmp_path).scratch.num_layers == 2


def test_cli_one_line_errors(capsys):
    from harness.commands.reproduce import main

    assert main(["--model", "/does/not/exist"]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["--model", "/does/not/exist", "--seeds", "2"]) == 2
    assert "'seeds' 2 trains one model per seed run" in capsys.readouterr().err
    assert main(["--quick", "--ood", "max_length"]) == 2
    assert "--ood expects KEY=VALUE" in capsys.readouterr().err


# --- --quick's models: seed runs, and a reused model that must match its options ----------
def test_seed_run_k_trains_on_init_seed_k_and_data_seed_plus_k(tmp_path):
    from harness.pipeline.prepare import task_model_folder, task_train_config
    from harness.training.train import TrainConfig

    cfg = ReproduceConfig(quick=True, seeds=3, seed=5)
    run0 = task_train_config(cfg, TaskValue.of("addition"), tmp_path)
    # run 0 is exactly what --quick trained before --seeds existed: init 0, data seed --seed
    recipe = TaskValue.of("addition").recipe(pretrained=False)
    steps = recipe["max_steps"]
    before = {
        **recipe,
        "model": "scratch",
        "output": str(tmp_path),
        "config": "addition_id",
        "seed": 5,
        "max_steps": steps,
        "train_size": steps * recipe["batch_size"],
        "save_every": max(steps // 4, 1),
    }
    assert (
        run0
        == TrainConfig.from_dict(before)
        == task_train_config(cfg, TaskValue.of("addition"), tmp_path, 0)
    )
    assert (run0.seed, run0.scratch.seed) == (5, 0)
    run2 = task_train_config(cfg, TaskValue.of("addition"), tmp_path, 2)
    assert (run2.seed, run2.scratch.seed) == (7, 2)
    assert dataclasses.replace(run2, seed=5, scratch=run0.scratch) == run0  # nothing else moves
    assert run2.scratch.num_layers == 2  # the recipe's own scratch options kept
    assert task_model_folder(tmp_path, TaskValue.of("addition")) == tmp_path / "models" / "addition"
    assert (
        task_model_folder(tmp_path, TaskValue.of("addition_id"), 2)
        == tmp_path / "models" / "addition-seed2"
    )


def _fake_model(folder: Path, config, run_file: bool = True) -> Path:
    """A model folder as training leaves it (config.json and the run file of `config`),
    without the weights the checks never read."""
    from harness.foundation.runs import TrainState, write_run_file
    from harness.training.checkpoints import run_info

    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    if run_file:
        write_run_file(folder, run_info(config, TrainState()))
    return folder


def test_a_reused_quick_model_must_match_its_options(tmp_path, monkeypatch):
    """The issue: `--train-steps 3`, then `--train-steps 6` (or `--seed 7`, then `--seed 8`)
    reused the first model and reported the second run's options. Now a model is reused
    only when its run file records the options it would be trained with now; otherwise the
    run is refused before any work, naming each option, and the model is kept."""
    from harness.pipeline import settings
    from harness.pipeline.prepare import check_task_models, task_model, task_train_config

    out = tmp_path / "rq"
    first = ReproduceConfig(quick=True, tasks=["reversal"], output=str(out), train_steps=3, seed=7)
    folder = out / "models" / "reversal"
    final = _fake_model(
        folder / "final", task_train_config(first, TaskValue.of("reversal"), folder)
    )
    check_task_models(first, out)  # the same options: reused
    logged = []
    assert task_model(first, TaskValue.of("reversal"), out, logged.append) == str(final)
    assert logged == [f"model for reversal: reusing {final} (trained with the same options)"]

    second = dataclasses.replace(first, train_steps=6, seed=8)
    with pytest.raises(ValueError) as error:
        check_task_models(second, out)
    message = str(error.value)
    assert "\n" not in message and message.startswith(f"model for reversal: {final} was trained")
    assert "steps (--train-steps): recorded 3, asked 6" in message
    assert "data seed (--seed, + k in seed run k): recorded 7, asked 8" in message
    assert "train_size" not in message and "save_every" not in message  # follow the steps
    assert message.endswith(f"use another --output, or delete {folder} to train it again")
    # reproduce refuses before any work: no settings.json, nothing trained, the model kept
    with pytest.raises(ValueError, match="recorded 3, asked 6"):
        reproduce(second, writers=None)
    assert not (out / "settings.json").exists() and (final / "config.json").is_file()
    with pytest.raises(ValueError, match="recorded 7, asked 8"):
        task_model(dataclasses.replace(first, seed=8), TaskValue.of("reversal"), out, logged.append)

    # a recipe changed since the model was trained: named as a recipe option
    monkeypatch.setattr(settings, "QUICK_TRAIN", {**settings.QUICK_TRAIN, "lr": 1e-3})
    with pytest.raises(ValueError, match="recipe option lr: recorded 0.002, asked 0.001"):
        check_task_models(first, out)
    monkeypatch.undo()

    # a half-finished run (its latest checkpoint) is resumed only with the same options
    shutil.rmtree(final)
    checkpoint = folder / "checkpoint-1"
    _fake_model(checkpoint, task_train_config(first, TaskValue.of("reversal"), folder))
    check_task_models(first, out)
    with pytest.raises(ValueError, match="checkpoint-1 is being trained \\(half-finished\\)"):
        check_task_models(second, out)

    # a finished model with no run file: what it was trained with is unknown
    _fake_model(final, None, run_file=False)
    with pytest.raises(ValueError, match="records no train options"):
        check_task_models(first, out)
    shutil.rmtree(final)

    # seed run 1's folder holding a model initialised with seed 0
    seeds = dataclasses.replace(first, seeds=2)
    other = out / "models" / "reversal-seed1"
    _fake_model(other / "final", task_train_config(seeds, TaskValue.of("reversal"), other, 0))
    with pytest.raises(ValueError) as error:
        check_task_models(seeds, out)
    assert "init seed (k in seed run k): recorded 0, asked 1" in str(error.value)
    assert "data seed (--seed, + k in seed run k): recorded 7, asked 8" in str(error.value)
    # several folders differ: the first in full, the others counted
    with pytest.raises(ValueError, match="\\(and 1 more model folder\\(s\\) differ\\)$"):
        check_task_models(dataclasses.replace(seeds, train_steps=4), out)
    check_task_models(dataclasses.replace(seeds, quick=False, model="m", seeds=1), out)


@pytest.fixture
def tiny_training(monkeypatch):
    """--quick's recipe shrunk to a two-layer Llama of width 32 trained 2 steps of 4
    instances (seconds), and the list of (model folder, init seed, data seed) trained."""
    import harness.training.train
    from harness.pipeline import settings

    monkeypatch.setattr(
        settings,
        "QUICK_TRAIN",
        {
            "max_steps": 2,
            "batch_size": 4,
            "lr": 2e-3,
            "eval_size": 2,
            "eval_batch_size": 2,
            "log_every": 1,
            "scratch": {
                "hidden_size": 32,
                "num_layers": 2,
                "num_heads": 2,
                "intermediate_size": 64,
            },
        },
    )
    trained = []
    real = harness.training.train.train

    def spy(config, **kwargs):
        trained.append((Path(config.output).name, config.scratch.seed, config.seed))
        return real(config, **kwargs)

    monkeypatch.setattr(harness.training.train, "train", spy)
    return trained


@pytest.mark.slow
def test_quick_seed_runs_train_analyse_and_compare(tmp_path, tiny_training, capsys):
    """--seeds 1 keeps today's layout; --seeds 2 in the same folder reuses that run as seed
    run 0 (its model and every stage file) and adds seed run 1 on init 1 and data seed + 1,
    in folders of its own, with the seed table and the agreement line in report.md."""
    from harness.report.findings import seed_agreement, seed_groups

    out = tmp_path / "out"
    base = dict(TINY, quick=True, tasks=["reversal"], output=str(out), seed=7)
    reproduce(ReproduceConfig(**base), pipeline_writers())
    assert tiny_training == [("reversal", 0, 7)]
    assert sorted(p.name for p in out.iterdir()) == [
        "models",
        "report.md",
        "reversal",
        "settings.json",
        "stages",
    ]
    assert [p.name for p in (out / "models").iterdir()] == ["reversal"]
    stages = {p.name: p.read_bytes() for p in (out / "stages").iterdir()}
    assert all(name.startswith("reversal-") and "seed" not in name for name in stages)
    results = json.loads((out / "reversal" / "results.json").read_text())
    assert results["task"] == "reversal" and "seed_run" not in results
    text = (out / "report.md").read_text()
    assert "\n## reversal\n" in text and "seed run" not in text

    tiny_training.clear()
    capsys.readouterr()
    reproduce(ReproduceConfig(**base, seeds=2), pipeline_writers())
    assert tiny_training == [("reversal-seed1", 1, 8)]  # seed run 0 reused, not retrained
    err = capsys.readouterr().err
    assert "model for reversal: reusing" in err and "(trained with the same options)" in err
    for name, data in stages.items():  # seed run 0 is the run above: nothing recomputed
        assert (out / "stages" / name).read_bytes() == data, name
    added = sorted(set(p.name for p in (out / "stages").iterdir()) - set(stages))
    assert added == sorted(name.replace("reversal-", "reversal-seed1-", 1) for name in stages)
    for name, init, data in (("reversal", 0, 7), ("reversal-seed1", 1, 8)):
        info = json.loads((out / "models" / name / "final" / "attentionspan_run.json").read_text())
        assert (info["scratch"]["seed"], info["train"]["seed"]) == (init, data), name
    folder = out / "reversal-seed1"
    for name in ("results.json", "heads.json", "sweep.png", "attention/attention.html"):
        assert (folder / name).is_file(), name
    runs = {}
    for label in ("reversal", "reversal-seed1"):
        runs[label] = json.loads((out / label / "results.json").read_text())
    assert runs["reversal-seed1"]["seed_run"] == {
        "task": "reversal",
        "run": 1,
        "init_seed": 1,
        "data_seed": 8,
    }
    assert runs["reversal"]["seed_run"]["data_seed"] == 7
    assert runs["reversal-seed1"]["heads"]["source"]["seed"] == 8  # its stages on its data
    assert runs["reversal-seed1"]["model"].endswith("reversal-seed1/final")
    text = (out / "report.md").read_text()
    assert "## Seed runs" in text and "### reversal: 2 seed runs" in text
    assert "| 0 (`reversal`) | 0 | 7 |" in text and "| 1 (`reversal-seed1`) | 1 | 8 |" in text
    assert "## reversal-seed1: seed run 1 (init seed 1, data seed 8)" in text
    agreement = seed_agreement("reversal", seed_groups(runs)["reversal"])
    verdicts = {r["verdict"]["verdict"] for r in runs.values()}  # the calibrated ones
    assert ("verdicts agree" in agreement) == (len(verdicts) == 1)
    assert text.count(agreement) == 2  # the seed table's line and the findings' sentence

    # another --train-steps: refused before any work, the models kept
    settings_file = (out / "settings.json").read_text()
    with pytest.raises(ValueError, match="steps \\(--train-steps\\): recorded 2, asked 3"):
        reproduce(ReproduceConfig(**base, seeds=2, train_steps=3), pipeline_writers())
    assert (out / "settings.json").read_text() == settings_file
    assert tiny_training == [("reversal-seed1", 1, 8)]


def test_conditional_mode_ladders_every_threshold(tmp_path, model_dir):
    """--mode conditional: the dose ladder has a rung per threshold and C, the verdict
    picks one of them, and the report names each rung's threshold."""
    from harness.attention.verdicts.calibrated import VERDICTS

    out = tmp_path / "out"
    cfg = ReproduceConfig(
        model=model_dir,
        output=str(out),
        **(TINY | {"mode": "conditional", "thresholds": [0.05, 0.2]}),
    )
    text = reproduce(cfg, pipeline_writers()).read_text()
    results = json.loads((out / "reversal" / "results.json").read_text())
    rungs = {(d["threshold"], d["strength"]) for d in results["dose"]["test"]["doses"]}
    assert {t for t, _ in rungs} == {0.05, 0.2} and len(rungs) == 14
    assert results["verdict"]["verdict"] in VERDICTS
    assert "| 0.05, thr 0.2 |" in text or "| 0.05, thr 0.2 (chosen) |" in text


def test_the_verdicts_dose_is_scored_free_running(tmp_path, model_dir, monkeypatch):
    """When the verdict chose a dose, the push at it is scored as the model answers on its
    own (the ladder is teacher-forced), on OOD test and ID, and the report says so."""
    import harness.attention.verdicts.calibrated as verdict_module

    def chose_one(validation, test, diagnosis, by_kind=None, lookup=None):
        return {"verdict": "inconclusive", "reasons": ["x"], "numbers": {"dose": {"C": 0.5}}}

    monkeypatch.setattr(verdict_module, "calibrated_verdict", chose_one)
    out = tmp_path / "out"
    text = reproduce(ReproduceConfig(model=model_dir, output=str(out), **TINY), pipeline_writers())
    results = json.loads((out / "reversal" / "results.json").read_text())
    at = results["at_dose"]
    n = results["dose"]["test"]["n"]
    assert at["setting"] == f"top{n}-C0.5"
    for stream in ("test", "id"):
        assert at[stream]["gains"]["partial_acc"]["n"] == TINY["num_test"]
    assert f"Free-running at that dose (top{n}-C0.5)" in text.read_text()
