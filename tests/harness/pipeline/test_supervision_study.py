"""`attentionspan supervision` end to end on --quick's recipe shrunk to seconds, its arms,
its resumption, and the statistics and verdict rules it reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.attention.verdicts.supervision import RULES_OUT, VERDICTS
from harness.pipeline.settings import TaskValue
from harness.pipeline.supervision_settings import (
    SupervisionConfig,
    control_arms,
    ladder_arms,
)
from harness.pipeline.supervision_stats import pooled_mean

TINY_TRAIN = {
    "max_steps": 2,
    "batch_size": 4,
    "lr": 2e-3,
    "eval_size": 2,
    "eval_batch_size": 2,
    "log_every": 1,
    "scratch": {"hidden_size": 32, "num_layers": 2, "num_heads": 2, "intermediate_size": 64},
}
TINY = dict(
    tasks=["reversal"],
    seeds=2,
    seed=7,
    weights=[0, 0.5, 1.0],
    heads=1,
    num_heads=4,
    num_validation=4,
    num_test=6,
    num_attention=3,
    batch_size=4,
    ood={"max_length": 12},
    device="cpu",
    progress=False,
)


@pytest.fixture(scope="module")
def tiny_recipe():
    """--quick's recipe shrunk to a two-layer Llama of width 32 (4 heads) trained 2 steps."""
    from harness.pipeline import settings

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(settings, "QUICK_TRAIN", TINY_TRAIN)
        yield


@pytest.fixture(scope="module")
def study(tiny_recipe, tmp_path_factory):
    """One tiny study (2 seed runs), run once for the tests that read it."""
    from harness.pipeline.supervision_study import run_study
    from harness.report.supervision_report import write_report

    out = tmp_path_factory.mktemp("sup") / "out"
    cfg = SupervisionConfig(output=str(out), **TINY)
    report = run_study(cfg, write_report)
    results = json.loads((out / "reversal" / "results.json").read_text())
    return cfg, out, report, results


def run_file(model: str) -> dict:
    return json.loads((Path(model) / "attentionspan_run.json").read_text())


@pytest.mark.slow
def test_the_study_writes_its_report_and_results(study):
    from harness.attention.verdicts.rule_version import supervision_rule_version
    from harness.report.supervision_report import PLOT_FILE

    cfg, out, report, results = study
    text = report.read_text()
    assert report == out / "report.md"
    for heading in (
        "## Findings",
        "## reversal",
        "### Arms",
        "### The weight, chosen on OOD validation (partial_acc)",
        "### Accuracy with no intervention (test splits)",
        "### OOD accuracy by length",
        "against each control",
        "### Attention on the reference (no intervention)",
        "### Where the supervised heads look when the model errs (OOD test)",
    ):
        assert heading in text, heading
    assert "attentionspan supervision --tasks reversal --output" in text
    assert (out / "reversal" / PLOT_FILE).is_file() and f"(reversal/{PLOT_FILE})" in text
    assert results["verdict"]["verdict"] in VERDICTS
    assert f"**reversal: {results['verdict']['verdict']}**" in text
    assert results["verdict"]["rules_out"] == RULES_OUT[results["verdict"]["verdict"]]
    version = supervision_rule_version()  # the rule that read it, in results and report
    assert results["verdict"]["rule_version"] == version and f"(rule {version})" in text
    chosen = results["chosen"]
    assert chosen in ("w0.5", "w1") and results["selection"]["chosen"] == chosen
    assert list(results["arms"]) == [
        "baseline",
        "w0.5",
        "w1",
        f"wrong3-{chosen}",
        f"random-{chosen}",
        "steps-x1.5",
    ]
    assert results["controls"] == [f"wrong3-{chosen}", f"random-{chosen}", "steps-x1.5"]
    # every arm: ID and OOD accuracy overall and per length bin, pooled over the 2 seeds
    for stream in ("id", "ood"):
        for name in results["arms"]:
            table = results["accuracy"][stream][name]
            assert len(table["exact_match"]["seeds"]) == 2
            assert table["partial_acc"]["low"] <= table["partial_acc"]["mean"]
            assert sum(b["n"] for b in table["per_length"].values()) == 2 * cfg.num_test
            assert set(results["diagnosis"][name][stream]["shares"]) >= {"on_reference"}
            assert set(results["mass"][stream][name]) == {"supervised", "random"}
            if name != "baseline":
                assert "per_length" in results["gains"][stream][name]
                assert "gain" in results["mass_gains"][stream][name]
    assert set(results["versus_controls"]) == set(results["controls"])
    ood = results["ood"]
    for name in results["arms"]:  # Table 2 of every arm and seed run, OOD included
        assert len(results["table2"][name]) == 2
        assert "teacher_forced" in results["table2"][name][0][ood]
    settings = json.loads((out / "settings.json").read_text())
    assert settings["weights"] == [0.0, 0.5, 1.0] and settings["versions"]["torch"]


@pytest.mark.slow
def test_weight_zero_is_the_baseline_model_itself(study):
    """Weight 0 is not trained again: it is --quick's model of the seed run (the engine runs
    a step of weight 0 as the plain step, so a second copy would only cost time)."""
    from harness.pipeline.prepare import task_model_folder

    _, out, _, results = study
    baseline = results["arms"]["baseline"]
    assert baseline["weight"] == 0 and not any(n.startswith("w0-") for n in results["arms"])
    for run, model in enumerate(baseline["models"]):
        assert Path(model) == task_model_folder(out, TaskValue.of("reversal"), run) / "final"
        info = run_file(model)
        assert info["train"]["attention_supervision"] == ""
        assert (info["scratch"]["seed"], info["train"]["seed"]) == (run, 7 + run)


@pytest.mark.slow
def test_the_arms_are_built_as_specified(study):
    _, out, _, results = study
    chosen = results["chosen"]
    weight = results["arms"][chosen]["weight"]
    for run, seed_run in enumerate(results["seeds"]):
        supervised, drawn = seed_run["supervised_heads"], seed_run["random_heads"]
        # the supervised heads: the top N of the baseline's own ID ranking of this seed run
        ranking = json.loads(
            (out / "arms" / f"reversal-seed{run}-baseline" / "heads.json").read_text()
        )
        assert sorted(map(list, ranking["order"][:1])) == supervised
        # the random control: as many heads, none of them supervised in the ladder
        assert len(drawn) == len(supervised) and not {tuple(h) for h in drawn} & {
            tuple(h) for h in supervised
        }
        pairs = {
            name: run_file(arm["models"][run])["train"] for name, arm in results["arms"].items()
        }
        text = ",".join(f"{la}.{h}" for la, h in supervised)
        for name in ("w0.5", "w1"):
            assert pairs[name]["attention_supervision"] == text
            assert pairs[name]["supervision_shift"] == 0
        assert pairs["w1"]["supervision_weight"] == 1.0
        wrong = pairs[f"wrong3-{chosen}"]
        assert (wrong["attention_supervision"], wrong["supervision_shift"]) == (text, 3)
        assert wrong["supervision_weight"] == weight
        random_arm = pairs[f"random-{chosen}"]
        assert random_arm["attention_supervision"] == ",".join(f"{la}.{h}" for la, h in drawn)
        assert random_arm["supervision_weight"] == weight
        longer = pairs["steps-x1.5"]
        assert longer["attention_supervision"] == "" and longer["max_steps"] == 3
        assert longer["train_size"] == 3 * TINY_TRAIN["batch_size"]
        for name, train in pairs.items():  # the same recipe, init and data seed everywhere
            assert train["seed"] == 7 + run and train["lr"] == TINY_TRAIN["lr"], name
            scratch = run_file(results["arms"][name]["models"][run])["scratch"]
            assert scratch["seed"] == run, name
            assert train["max_steps"] == (3 if name == "steps-x1.5" else 2), name


@pytest.mark.slow
def test_a_rerun_reuses_every_model_and_stage(study, monkeypatch, capsys):
    import harness.training.train
    from harness.pipeline.supervision_study import run_study
    from harness.report.supervision_report import write_report

    cfg, out, _, results = study
    stages = {p.name: p.read_bytes() for p in (out / "arms" / "stages").iterdir()}
    trained = []
    monkeypatch.setattr(
        harness.training.train, "train", lambda config, **kw: trained.append(config)
    )
    run_study(cfg, write_report)
    assert trained == []
    assert {p.name: p.read_bytes() for p in (out / "arms" / "stages").iterdir()} == stages
    again = json.loads((out / "reversal" / "results.json").read_text())
    assert again["verdict"] == results["verdict"] and again["accuracy"] == results["accuracy"]
    err = capsys.readouterr().err
    assert "reusing" in err and "training 2 steps" not in err

    # other supervision options: the ladder's models are refused in one line, and kept
    import dataclasses

    settings = (out / "settings.json").read_text()
    other = dataclasses.replace(cfg, loss="mass")
    with pytest.raises(ValueError) as error:
        run_study(other, write_report)
    message = str(error.value)
    assert "\n" not in message and "--supervision-loss: recorded 'ce', asked 'mass'" in message
    assert message.endswith("to train it again") and trained == []
    assert (out / "settings.json").read_text() == settings  # still the results' settings


@pytest.mark.slow
def test_the_command_line_builds_the_same_study(study, capsys):
    """`attentionspan supervision` with the options of the study: every model and stage
    reused (the parser builds the very config), the report's path printed."""
    from harness.cli import main

    cfg, out, report, _ = study
    stages = {p.name: p.read_bytes() for p in (out / "arms" / "stages").iterdir()}
    argv = [
        *("supervision", "--tasks", "reversal", "--output", str(out), "--seeds", "2"),
        *("--seed", "7", "--weights", "0", "0.5", "1", "--heads", "1", "--num-heads", "4"),
        *("--num-validation", "4", "--num-test", "6", "--num-attention", "3"),
        *("--batch-size", "4", "--ood", "max_length=12", "--device", "cpu", "--no-progress"),
    ]
    assert main(argv) == 0
    assert capsys.readouterr().out.strip() == str(report)
    assert {p.name: p.read_bytes() for p in (out / "arms" / "stages").iterdir()} == stages


@pytest.mark.slow
def test_jobs_train_the_same_models_in_worker_processes(study, tmp_path, capsys):
    """--jobs 2: every model trained in spawned workers (two at a time), the same weights
    and results as one at a time."""
    from harness.pipeline.supervision_study import run_study
    from harness.report.supervision_report import write_report

    cfg, _, _, results = study
    out = tmp_path / "jobs"
    run_study(SupervisionConfig(output=str(out), jobs=2, **TINY), write_report)
    again = json.loads((out / "reversal" / "results.json").read_text())
    err = capsys.readouterr().err
    assert "training 2 models, 2 at once (--jobs)" in err  # the two seed runs' baselines
    assert "training 4 models, 2 at once (--jobs)" in err  # the ladder's, then the controls'
    assert "training 6 models, 2 at once (--jobs)" in err
    for name, arm in results["arms"].items():
        assert again["arms"][name]["model_sha256"] == arm["model_sha256"], name
    assert again["verdict"] == results["verdict"] and again["accuracy"] == results["accuracy"]


def test_the_ladder_and_the_controls(tiny_recipe):
    cfg = SupervisionConfig(**TINY)
    ladder = ladder_arms(cfg, TaskValue.of("reversal"))
    assert [(a.name, a.role, a.weight, a.heads) for a in ladder] == [
        ("baseline", "baseline", 0.0, ""),
        ("w0.5", "ladder", 0.5, "supervised"),
        ("w1", "ladder", 1.0, "supervised"),
    ]
    controls = control_arms(cfg, 0.5, TaskValue.of("reversal"))
    assert [(a.name, a.role, a.weight, a.heads, a.shift, a.steps) for a in controls] == [
        ("wrong3-w0.5", "wrong_mask", 0.5, "supervised", 3, 2),
        ("random-w0.5", "random_heads", 0.5, "random", 0, 2),
        ("steps-x1.5", "extra_steps", 0.0, "", 0, 3),
    ]
    # weight 0 need not be listed: the baseline is always an arm
    assert [
        a.name for a in ladder_arms(SupervisionConfig(weights=[0.3]), TaskValue.of("reversal"))
    ] == [
        "baseline",
        "w0.3",
    ]


@pytest.mark.parametrize(
    "options,message",
    [
        ({"tasks": ["nope"]}, "nope"),
        ({"seeds": 0}, "'seeds' must be >= 1, got 0"),
        ({"weights": [0, -0.1]}, "'weights' must be in [0, 100] (0 is the unsupervised"),
        ({"weights": [0]}, "'weights' must hold at least one weight > 0"),
        ({"weights": [0.3, 0.3]}, "'weights'"),
        ({"weights": [float("nan")]}, "'weights' must be finite numbers"),
        ({"heads": 0}, "'heads' must be >= 1, got 0"),
        ({"heads": 9}, "'heads' 9 leaves too few other heads for the random-heads control"),
        ({"wrong_shift": 0}, "'wrong_shift' must not be 0"),
        ({"extra_steps": 0}, "'extra_steps' must be in (0, 10], got 0"),
        ({"metric": "bleu"}, "'metric' must be one of partial_acc, exact_match"),
        ({"loss": "l2"}, "'loss' must be one of ce, mass"),
        ({"ood": {"nope": "1"}}, "'ood' overrides for reversal_ood"),
        ({"threads": 0}, "'threads' must be from 1"),
        ({"jobs": 0}, "'jobs' must be >= 1, got 0"),
        ({"jobs": 65}, "'jobs' must be <= 64 (the cap), got 65"),
    ],
)
def test_bad_options_are_one_line(options, message):
    with pytest.raises(ValueError) as error:
        SupervisionConfig(**options)
    assert message in str(error.value) and "\n" not in str(error.value)


# --- statistics --------------------------------------------------------------------------
def test_pooled_mean_averages_seed_means_and_resamples_within_seeds():
    pooled = pooled_mean([[0.0, 1.0], [1.0, 1.0, 1.0, 1.0]])
    assert pooled["mean"] == pytest.approx(0.75)  # each seed weighs the same, not each value
    assert pooled["seeds"] == [0.5, 1.0] and pooled["n"] == 6
    assert 0.5 <= pooled["low"] <= 0.75 <= pooled["high"] <= 1.0
    assert pooled_mean([[0.2, 0.2], [0.4]])["low"] == pytest.approx(0.3)  # no spread: a point
    empty = pooled_mean([[], [0.5, 0.7]])
    assert empty["seeds"] == [None, 0.6] and empty["mean"] == pytest.approx(0.6)
    assert pooled_mean([[], []])["mean"] is None
    assert pooled_mean([[0.1, 0.9]] * 2, seed=3) == pooled_mean([[0.1, 0.9]] * 2, seed=3)


def test_pooled_diagnosis_keeps_which_rows_it_read():
    """Shares pooled over seeds weighted by instances, and the basis the seeds share (None
    when they differ or predate it: a digest then says its diagnosis predates the rule)."""
    from harness.pipeline.supervision_stats import pooled_diagnosis

    first = "first wrong row of each instance"
    found = [
        {"instances": 1, "tokens": 1, "shares": {"on_reference": 1.0}, "basis": first},
        {"instances": 3, "tokens": 3, "shares": {"on_reference": 0.0}, "basis": first},
    ]
    assert pooled_diagnosis(found) == {
        "instances": 4,
        "tokens": 4,
        "shares": {"on_reference": 0.25},
        "basis": first,
    }
    del found[1]["basis"]
    assert pooled_diagnosis(found)["basis"] is None


def test_the_study_hands_its_summary_to_the_verdict_as_plain_values():
    """`verdict_of` picks the chosen arm's numbers out of `summarise`'s figures and records
    the version of the rule that read them."""
    from harness.attention.verdicts.rule_version import supervision_rule_version
    from harness.attention.verdicts.supervision import study_verdict
    from harness.pipeline.supervision_study import verdict_of

    gain = {"gain": 0.1, "low": 0.05, "high": 0.2, "n": 30, "seeds": [0.1, 0.1]}
    worse = {"gain": -0.1, "low": -0.2, "high": -0.05, "n": 30, "seeds": [-0.1, -0.1]}
    summary = {
        "chosen": "w1",
        "metric": "partial_acc",
        "controls": ["random-w1"],
        "control_roles": {"random-w1": "random_heads"},
        "gains": {"ood": {"w1": {"partial_acc": gain}}},
        "versus_controls": {"random-w1": {"partial_acc": worse}},
        "mass_gains": {"ood": {"w1": gain}},
        "diagnosis": {"w1": {"ood": {"shares": {"on_reference": 0.3}}}},
    }
    found = verdict_of(summary)
    assert found.pop("rule_version") == supervision_rule_version()
    assert found == study_verdict(
        chosen="w1",
        metric="partial_acc",
        gain=gain,
        versus_controls={"random-w1": worse},
        mass_gain=gain,
        on_reference=0.3,
        control_roles={"random-w1": "random_heads"},
    )
    assert found["verdict"] == "the reference, not these heads"
