"""The calibrated verdict read again on a second, disjoint test stream
(`harness.pipeline.replication`): other rows than the first stream's, the same N and doses,
a verdict recorded with the rule version, stage files an interrupted run resumes from, and
--no-replicate that skips it."""

from __future__ import annotations

import json

import pytest

from attentionspan_datasets.splits import split_instance
from harness.attention.verdicts.calibrated import VERDICTS
from harness.attention.verdicts.readings import rederive, streams
from harness.pipeline import lookup_stages, replication
from harness.pipeline.reproduce import ReproduceConfig, reproduce
from harness.pipeline.stages import Stages
from harness.report.replication_md import replication_line
from harness.report.report_md import pipeline_writers
from harness.report.stability_md import margin_text
from tests.harness.pipeline.test_reproduce import TINY, model_dir  # noqa: F401

STAGES = (
    "reversal-replication-dose",
    "reversal-replication-diagnosis",
    "reversal-replication-stability",
)
SCORED = ("reversal-sweep-replication-baseline", "reversal-sweep-id_replication-baseline")


@pytest.fixture(scope="module")
def replicated(tmp_path_factory, model_dir):  # noqa: F811
    """One tiny run with the replication (the default)."""
    out = tmp_path_factory.mktemp("replicated") / "out"
    cfg = ReproduceConfig(model=model_dir, output=str(out), **TINY)
    return cfg, out, reproduce(cfg, pipeline_writers()).read_text()


def _stage(out, name):
    return json.loads((out / "stages" / f"{name}.json").read_text())


def test_the_replication_reads_other_rows_with_the_same_choices(replicated):
    cfg, out, text = replicated
    results = json.loads((out / "reversal" / "results.json").read_text())
    verdict, n = results["verdict"], cfg.num_test
    record = verdict["replication"]
    # its rows: the test split's n .. 2n-1, after the first stream's 0 .. n-1, OOD and ID
    assert record["indices"] == [n, 2 * n] and record["instances"] == n
    for stream, first in (("replication", "test"), ("id_replication", "id")):
        again = [r["index"] for r in _stage(out, f"reversal-sweep-{stream}-baseline")["result"]]
        before = [r["index"] for r in _stage(out, f"reversal-sweep-{first}-baseline")["result"]]
        assert again == list(range(n, 2 * n)) and before == list(range(n))
    # ... whose prompts differ from the first stream's (the OOD strings are long)
    prompts = [
        split_instance("reversal_ood", cfg.seed, "test", i, **cfg.ood).prompt for i in range(2 * n)
    ]
    assert not set(prompts[:n]) & set(prompts[n:])
    assert record["shared_prompts"]["reversal_ood"] == 0
    # the same N, the ladder's controls at the same rungs, the same dose chosen
    ladder = results["replication"]["test"]
    assert ladder["n"] == results["dose"]["n"] == record["numbers"]["n"]
    assert ladder["instances"] == n and ladder["id_instances"] == n
    rungs = [(d["strength"], d.get("threshold")) for d in ladder["doses"]]
    assert rungs == [(d["strength"], d.get("threshold")) for d in results["dose"]["test"]["doses"]]
    settings = _stage(out, "reversal-replication-dose")["settings"]
    assert settings["controlled"] == results["dose"]["controlled"]
    assert record["numbers"].get("dose") == verdict["numbers"].get("dose")
    # its own diagnosis (the replication's wrong answers, its own ID rows for the null)
    diagnosis = results["replication"]["diagnosis"]["reversal_ood"]
    assert diagnosis["answers"]["total"] == n
    assert all(int(i) >= n for i in diagnosis.get("instance_kinds") or {})
    # a verdict, whether it agrees, under the run's rule version
    assert record["verdict"] in VERDICTS and record["reasons"]
    assert record["agrees"] == (record["verdict"] == verdict["verdict"])
    settings_file = json.loads((out / "settings.json").read_text())
    assert record["rule_version"] == settings_file["rule_version"]
    assert set(record["numbers"]["eval"]) == {"reversal_id", "reversal_ood"}
    assert f"Read again on {n} fresh instances: **{record['verdict']}**" in text


def test_the_replications_verdict_is_rederived_from_its_own_readings(replicated):
    """The record keeps what the replication's verdict read, per instance: its own test
    ladder and diagnosis (rows n .. 2n-1) beside the first reading's validation curves, from
    which the word, reasons and numbers come back exactly; its stability is measured on
    them, as the first reading's is on its own."""
    cfg, out, text = replicated
    results = json.loads((out / "reversal" / "results.json").read_text())
    record, n = results["verdict"]["replication"], cfg.num_test
    readings = record["readings"]
    assert streams(readings) == {"validation": n, "id_validation": n, "test": n, "id": n}
    # the replication's instances, not the first stream's; validation: the first reading's
    assert readings["test"] != results["readings"]["test"]
    assert readings["validation"] == results["readings"]["validation"]
    again = rederive(readings)
    assert again["verdict"] == record["verdict"] and again["reasons"] == record["reasons"]
    numbers = {k: v for k, v in record["numbers"].items() if k not in ("eval", "n")}
    assert again["numbers"] == numbers
    stability = record["stability"]
    assert stability["word"] == record["verdict"]
    assert stability["resamples"] == TINY["stability_resamples"]
    assert 0 <= stability["share"] <= 1 and "flip_margin" in stability
    assert _stage(out, STAGES[2])["result"] == stability
    # report.md's line says it beside the replication's word
    line = replication_line(results["verdict"])
    assert line in text and f"(flip margin {margin_text(stability)})" in line


def test_no_stability_measured_for_the_replication_when_resamples_are_zero():
    """--stability-resamples 0 measures neither reading's stability: the record has none
    (reports say "stability not recorded"), never a figure made up."""

    class Run:
        cfg = ReproduceConfig(model="m", stability_resamples=0)

    read = {"verdict": "no lookup", "readings": {"format": 1}}
    assert replication.run_stability(Run(), None, read) is None


def test_a_resumed_run_reuses_the_replications_stages(replicated, monkeypatch):
    cfg, out, _ = replicated
    before = json.loads((out / "reversal" / "results.json").read_text())["verdict"]

    def refuse(*args, **kwargs):
        raise AssertionError("a finished stage was computed again")

    monkeypatch.setattr("harness.attention.interventions.score_settings", refuse)
    monkeypatch.setattr("harness.attention.dose.run_dose_ladders", refuse)
    monkeypatch.setattr("harness.attention.diagnosis.where_errors_look", refuse)
    reproduce(cfg, pipeline_writers())
    after = json.loads((out / "reversal" / "results.json").read_text())["verdict"]
    assert after["replication"] == before["replication"]
    monkeypatch.undo()

    # an interrupted replication: the lost stage alone is computed again
    (out / "stages" / f"{STAGES[1]}.json").unlink()
    ran = []
    original = Stages.run

    def spy(self, name, settings, compute):
        return original(self, name, settings, lambda: ran.append(name) or compute())

    monkeypatch.setattr(Stages, "run", spy)
    reproduce(cfg, pipeline_writers())
    assert ran == [STAGES[1]]
    again = json.loads((out / "reversal" / "results.json").read_text())["verdict"]
    assert again["replication"] == before["replication"]


def test_no_replicate_skips_it_and_says_so(tmp_path, model_dir):  # noqa: F811
    out = tmp_path / "out"
    cfg = ReproduceConfig(model=model_dir, output=str(out), no_replicate=True, **TINY)
    text = reproduce(cfg, pipeline_writers()).read_text()
    results = json.loads((out / "reversal" / "results.json").read_text())
    assert results["verdict"]["replication"] == {"skipped": replication.SKIPPED}
    assert "replication" not in results and "replication" not in results["cpu_s"]
    names = {p.stem for p in (out / "stages").iterdir()}
    assert not names & {*STAGES, *SCORED}
    assert "Not read again on fresh instances (--no-replicate)." in text


def test_the_record_says_whether_the_word_agrees(monkeypatch):
    """The record's verdict is read by the run's own verdict code on the replication's
    ladder and diagnosis, with the first reading's validation curves; its readings are
    made from the same two."""

    class Run:
        ood_name = "reversal_ood"

        def calibrated_verdict(self, lookup, dose, diagnosis):
            seen.append((dose, diagnosis))
            return {"verdict": "inconclusive", "reasons": ["r"], "numbers": {"dose": {"C": 1}}}

    seen: list = []
    read: list = []
    monkeypatch.setattr(
        lookup_stages, "verdict_readings", lambda *args: read.append(args[1:]) or {"r": 1}
    )
    dose = {"n": 2, "validation": "V", "test": "first"}
    again = {
        "stream": "s",
        "indices": [4, 8],
        "instances": 4,
        "shared_prompts": {},
        "eval": {"reversal_ood": {"exact_match": 0.5, "partial_acc": 0.75, "n": 4}},
        "test": "second",
        "diagnosis": {"reversal_ood": "D"},
    }
    out = replication.record(Run(), None, dose, again, {"verdict": "downstream"})
    assert seen == [({"n": 2, "validation": "V", "test": "second"}, "D")]
    assert read == seen and out["readings"] == {"r": 1}
    assert out["verdict"] == "inconclusive" and out["agrees"] is False
    assert out["numbers"]["eval"] == {"reversal_ood": {"exact_match": 0.5, "partial_acc": 0.75}}
    same = replication.record(Run(), None, dose, again, {"verdict": "inconclusive"})
    assert same["agrees"] is True


def test_only_the_replications_streams_start_past_the_first():
    cfg = ReproduceConfig(model="m", num_test=7)
    assert (
        replication.first_row(cfg, "replication")
        == replication.first_row(cfg, "id_replication")
        == 7
    )
    assert replication.first_row(cfg, "test") == replication.first_row(cfg, "validation") == 0
    assert "rows 7..13" in replication.stream_text(cfg)


def test_the_command_line_turns_it_off_with_no_replicate():
    import argparse

    from harness.commands.reproduce import add_arguments, config_from_args

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    on = config_from_args(parser.parse_args(["--model", "m"]))
    off = config_from_args(parser.parse_args(["--model", "m", "--no-replicate"]))
    assert (on.no_replicate, off.no_replicate) == (False, True)
