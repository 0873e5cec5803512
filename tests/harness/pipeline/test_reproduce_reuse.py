"""What `reproduce` reuses and what it measures the time of: a fine-tune is reused when only
analysis options change; a changed analysis recomputes only the stages whose settings it
changes; a near tie between two offsets judges a second candidate lookup in stages of its
own, leaving the first lookup's stages as they were; every step's CPU time is kept."""

from __future__ import annotations

import dataclasses
import json
import time

import pytest

from harness.pipeline import prepare
from harness.pipeline.reproduce import ReproduceConfig, TaskValue, reproduce
from harness.pipeline.stages import Stages
from harness.report import results_doc
from harness.report.report_md import pipeline_writers
from tests.harness.pipeline.test_reproduce import TINY, _fake_model, model_dir  # noqa: F401

STEPS = (
    "eval",
    "attention",
    "heads",
    "sweep",
    "dose",
    "diagnosis",
    "stability",
    "at_dose",
    "replication",
    "replication_stability",
    "viewer",
)


def _computed(monkeypatch) -> list[str]:
    """The names of the stages computed from now on (run or saved by the scoring loop)."""
    ran: list[str] = []
    run, save = Stages.run, Stages.save

    def spy_run(self, name, settings, compute):
        return run(self, name, settings, lambda: ran.append(name) or compute())

    def spy_save(self, name, settings, result, cpu_s=None):
        ran.append(name)
        return save(self, name, settings, result, cpu_s)

    monkeypatch.setattr(Stages, "run", spy_run)
    monkeypatch.setattr(Stages, "save", spy_save)
    return ran


def test_a_fine_tune_is_reused_when_only_the_analysis_changes(tmp_path, monkeypatch):
    """--num-test, --num-validation and the grid are analysis options: the model trained
    for the first run serves the second (reused, not retrained), and the CPU time its
    training took is read back from its stage file."""
    from harness.pipeline.prepare import check_task_models, task_train_config, timed_task_model

    out = tmp_path / "rq"
    first = ReproduceConfig(quick=True, tasks=["reversal"], output=str(out), train_steps=3)
    folder = out / "models" / "reversal"
    trained = []

    def train(cfg, task, out, log, run=0):  # stands for the fine-tune: burns CPU, saves final/
        trained.append(task)
        start = time.process_time()
        while time.process_time() - start < 0.05:
            pass
        return str(_fake_model(folder / "final", task_train_config(cfg, task, folder, run)))

    monkeypatch.setattr(prepare, "task_model", train)
    model, record = timed_task_model(first, TaskValue.of("reversal"), out, print)
    assert trained == ["reversal"] and record["cpu_s"] >= 0.05 and not record["resumed"]
    assert record["steps"] == 3
    saved = json.loads((out / "stages" / "reversal-fine-tune.json").read_text())
    assert saved["result"] == record and saved["cpu_s"] == record["cpu_s"]
    monkeypatch.undo()

    analysis = dataclasses.replace(
        first, num_test=7, num_validation=5, strengths=[0.3], counts=[1], control_seeds=[3]
    )
    check_task_models(analysis, out)  # the same train options: nothing refused
    logged: list[str] = []
    again, reread = timed_task_model(analysis, TaskValue.of("reversal"), out, logged.append)
    assert again == model and reread == record  # reused, its training time read back
    assert logged == [f"model for reversal: reusing {model} (trained with the same options)"]


def test_a_resumed_fine_tune_counts_its_interrupted_invocations(tmp_path, monkeypatch):
    """An interrupted fine-tune resumed by a later call: its CPU time is that call's plus
    what each earlier invocation logged (log.jsonl), not the last call's alone; a record
    saved before this was counted gains them when read back."""
    from harness.foundation.runs import LOG_FILE, RUN_CONFIG_FILE
    from harness.pipeline.prepare import task_train_config, timed_task_model

    out = tmp_path / "rq"
    cfg = ReproduceConfig(quick=True, tasks=["reversal"], output=str(out), train_steps=3)
    folder = out / "models" / "reversal"
    (folder / "checkpoint-2").mkdir(parents=True)  # an interrupted first invocation
    (folder / "checkpoint-2" / RUN_CONFIG_FILE).write_text(
        json.dumps(task_train_config(cfg, TaskValue.of("reversal"), folder, 0).to_dict())
    )
    first = [{"step": 1, "cpu_s": 4.0}, {"step": 2, "cpu_s": 9.5}]
    (folder / LOG_FILE).write_text("".join(json.dumps(r) + "\n" for r in first))

    def train(cfg, task, out, log, run=0):  # resumes: logs from its own start, saves final/
        with (folder / LOG_FILE).open("a") as f:
            f.write(json.dumps({"step": 3, "cpu_s": 2.0}) + "\n")
        return str(_fake_model(folder / "final", task_train_config(cfg, task, folder, run)))

    monkeypatch.setattr(prepare, "task_model", train)
    _, record = timed_task_model(cfg, TaskValue.of("reversal"), out, print)
    assert record["resumed"] and record["earlier_cpu_s"] == 9.5
    assert 9.5 <= record["cpu_s"] < 9.5 + 5  # this call's CPU (a few ms) plus the first's
    monkeypatch.undo()
    # a record saved before earlier invocations were counted: the resumed call's alone
    stage = out / "stages" / "reversal-fine-tune.json"
    saved = json.loads(stage.read_text())
    older = {"cpu_s": 2.25, "steps": 3, "resumed": True}
    stage.write_text(json.dumps(saved | {"result": older, "cpu_s": 2.25}))
    _, reread = timed_task_model(cfg, TaskValue.of("reversal"), out, print)
    assert reread == older | {"cpu_s": 11.75, "earlier_cpu_s": 9.5}  # the log's 9.5 + 2.25
    assert json.loads(stage.read_text())["result"] == older  # measured figures stay as saved


@pytest.mark.slow
def test_a_changed_analysis_recomputes_only_the_stages_it_changes(tmp_path, model_dir, monkeypatch):  # noqa: F811
    out = tmp_path / "out"
    # one lookup here (the near tie has a test of its own below)
    monkeypatch.setattr("harness.attention.heads.second_lookup", lambda *a, **k: None)
    cfg = ReproduceConfig(model=model_dir, output=str(out), **TINY)
    reproduce(cfg, pipeline_writers())
    results = json.loads((out / "reversal" / "results.json").read_text())
    # every step's CPU seconds, measured when its stages were computed
    assert set(results["cpu_s"]) == {*STEPS, "total"}
    assert all(isinstance(v, float) and v >= 0 for v in results["cpu_s"].values())
    assert results["cpu_s"]["total"] == pytest.approx(sum(results["cpu_s"][s] for s in STEPS))
    for path in (out / "stages").iterdir():
        assert json.loads(path.read_text())["cpu_s"] >= 0, path.name
    # a scoring stage records the run's data seed, never a random draw's seed in its place
    # (which would let another --seed reuse records scored on other instances)
    for path in (out / "stages").glob("*-sweep-*.json"):
        assert json.loads(path.read_text())["settings"]["seed"] == cfg.seed, path.name
    # the digest keeps them, and --check does not compare them
    digest = results_doc.digest(out)["reversal"]
    assert digest["cpu_s"] == results["cpu_s"]
    assert digest["controls_at_dose"]["n"] == results["dose"]["n"]

    # another grid: only the grid's scoring (the sweep) and what reads its choice
    ran = _computed(monkeypatch)
    reproduce(dataclasses.replace(cfg, strengths=[2.0]), pipeline_writers())
    assert ran and all("-sweep-" in name or name == "reversal-viewer" for name in ran), ran
    assert not any(name.endswith("-baseline") for name in ran)
    again = json.loads((out / "reversal" / "results.json").read_text())
    assert again["cpu_s"]["dose"] == results["cpu_s"]["dose"]  # reused: as measured then
    assert again["verdict"] == results["verdict"]

    # more test instances: the test-stream stages, never the ranking or the validation ones
    ran.clear()
    reproduce(dataclasses.replace(cfg, num_test=5), pipeline_writers())
    assert "reversal-heads" not in ran and "reversal-attention" not in ran
    assert not any("-sweep-validation-" in name for name in ran)
    assert {"reversal-dose", "reversal-diagnosis", "reversal-sweep-test-baseline"} <= set(ran)
    assert "reversal-viewer" in ran  # it shows min(25, --num-test) instances


@pytest.mark.slow
def test_a_near_tie_judges_a_second_lookup_and_keeps_the_first_lookups_stages(
    tmp_path,
    model_dir,  # noqa: F811
    monkeypatch,
):
    """A run made before near ties were judged (one lookup) is reused as it is: the second
    candidate's ranking, ladder, diagnosis and free-running dose are its only new stages."""
    from harness.attention import heads, lookup

    out = tmp_path / "out"
    cfg = ReproduceConfig(model=model_dir, output=str(out), **TINY)
    # the tiny model is untrained: no head beats its null, so every head is let count
    monkeypatch.setattr(lookup, "NULL_MARGIN", -1.0)
    monkeypatch.setattr(heads, "second_lookup", lambda *a, **k: None)
    reproduce(cfg, pipeline_writers())
    before = {p.name: p.read_text() for p in (out / "stages").iterdir()}
    results = json.loads((out / "reversal" / "results.json").read_text())
    assert "lookups" not in results
    monkeypatch.undo()

    # every offset near-tied (a margin of 10x): the chosen one and the heaviest other
    monkeypatch.setattr(lookup, "NULL_MARGIN", -1.0)
    monkeypatch.setattr(heads, "OFFSET_MARGIN", 10.0)
    ran = _computed(monkeypatch)
    report = reproduce(cfg, pipeline_writers())
    after = {p.name: p.read_text() for p in (out / "stages").iterdir()}
    assert all(after[name] == text for name, text in before.items())  # the first: untouched
    assert ran and all(name.startswith("reversal-lookup") for name in ran), ran
    results = json.loads((out / "reversal" / "results.json").read_text())
    first, second = results["lookups"]
    chosen = results["heads"]["source"]["shift"]
    masses = {int(k): v for k, v in results["heads"]["source"]["lookup_offset"]["masses"].items()}
    expected = max((k for k in masses if k != chosen), key=lambda k: (masses[k], -abs(k), -k))
    assert (first["offset"], second["offset"]) == (chosen, expected)
    assert second["stage"] == f"reversal-lookup{expected:+d}"
    assert {f"{second['stage']}-heads.json", f"{second['stage']}-dose.json"} <= set(after)
    assert second["verdict"]["verdict"] and second["verdict"]["numbers"]["shift"] == expected
    assert "(the second candidate lookup)" in second["verdict"]["reasons"][0]
    assert first["verdict"] == results["verdict"]  # the run's own fields stay where they were
    assert results["cpu_s"]["second_lookup"] >= 0
    text = report.read_text()
    assert "### Two candidate lookups" in text and "Two candidate lookups, " in text
    # the digest keeps both, the first first
    digest = results_doc.digest(out)["reversal"]
    assert [e["offset"] for e in digest["lookups"]] == [chosen, expected]

    # --shift: one lookup, the one given, whatever the masses
    monkeypatch.undo()
    monkeypatch.setattr(heads, "OFFSET_MARGIN", 10.0)
    shifted = tmp_path / "shifted"
    reproduce(dataclasses.replace(cfg, output=str(shifted), shift=0), pipeline_writers())
    assert "lookups" not in json.loads((shifted / "reversal" / "results.json").read_text())
