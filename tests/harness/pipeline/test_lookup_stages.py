"""The stages at the lookup keep what the calibrated verdict read, per instance: a tiny
`reproduce` run's verdict is read again from its readings alone, in the run and in its
digest (`attentionspan results-doc --rederive`)."""

from __future__ import annotations

import copy
import json

import pytest

from harness.attention.verdicts import readings as readings_module
from harness.attention.verdicts.calibrated import calibrated_verdict
from harness.attention.verdicts.readings import rederive, streams
from harness.commands import results_doc as command
from harness.pipeline.reproduce import ReproduceConfig, reproduce
from harness.report import results_doc
from harness.report.report_md import pipeline_writers
from tests.harness.attention.verdicts.test_readings import recorded_fields_match
from tests.harness.conftest import save_tiny_model
from tests.harness.pipeline.test_reproduce import TINY


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("readings")
    model = str(save_tiny_model("llama", folder / "llama"))
    out = folder / "out"
    reproduce(ReproduceConfig(model=model, output=str(out), **TINY), pipeline_writers())
    return out


def test_the_verdict_is_rederived_from_the_readings_the_run_keeps(run):
    results = json.loads((run / "reversal" / "results.json").read_text())
    readings, verdict = results["readings"], results["verdict"]
    ood = results["diagnosis"]["reversal_ood"]
    assert streams(readings) == {"validation": 4, "id_validation": 4, "test": 4, "id": 4}
    assert readings["n"] == results["dose"]["n"] and readings["lookup"]["exists"] is not None
    again = rederive(readings)
    assert again["verdict"] == verdict["verdict"]
    numbers = {k: v for k, v in verdict["numbers"].items() if k != "repaired"}
    assert again["numbers"] == numbers
    # the pipeline adds what the dose repairs free-running after the verdict's own reasons
    assert again["reasons"] == verdict["reasons"][: len(again["reasons"])]
    assert recorded_fields_match(readings, results["dose"], ood) == []
    # token accuracies kept as counts of each instance's target tokens, exact match as 0/1
    tested = readings["test"]
    assert all(isinstance(v, int) for v in tested["baseline"] + tested["id_baseline"])
    assert all(isinstance(n, int) and n > 0 for n in tested["tokens"])
    floats = results["dose"]["test"]["per_instance"]["baseline"]
    assert [c / n for c, n in zip(tested["baseline"], tested["tokens"])] == floats


def test_past_the_lookup_gate_the_readings_read_as_the_recorded_curves(run):
    """A briefly trained tiny model fails in distribution (rule G says no lookup before
    anything else is read): with ID exact match set to 1 in both the recorded curves and
    the readings, and a lookup said to exist, every later condition reads the same."""
    results = json.loads((run / "reversal" / "results.json").read_text())
    dose, readings = copy.deepcopy(results["dose"]), copy.deepcopy(results["readings"])
    lookup = {"exists": True}
    dose["test"]["baseline"]["id"]["tf_exact"] = 1.0
    readings["test"]["id_baseline"] = [1.0] * len(readings["test"]["id_baseline"])
    readings["lookup"], readings["found"] = lookup, None
    ood = results["diagnosis"]["reversal_ood"]
    recorded = calibrated_verdict(
        dose["validation"], dose["test"], ood, dose["validation_by_kind"], lookup
    )
    assert recorded["numbers"]["exists"]["works"] is True  # read past rule G
    assert rederive(readings) == recorded


def test_results_doc_rederives_every_verdict_of_the_digest(run, tmp_path, capsys):
    doc, digest = tmp_path / "results.md", tmp_path / "digest.json"
    doc.write_text(f"{results_doc.BEGIN}\n{results_doc.END}\n")
    argv = ["--command", "c", "--machine", "m", "--date", "d", "--doc", str(doc)]
    assert command.main([str(run), *argv, "--digest", str(digest)]) == 0
    capsys.readouterr()
    assert command.main(["--rederive", str(digest)]) == 0
    verdict = json.loads(digest.read_text())["tasks"]["reversal"]["verdict"]
    word, again = verdict["verdict"], verdict["replication"]["verdict"]
    out = capsys.readouterr().out
    assert f"reversal: recorded {word}, rederived {word}: agree" in out
    # the replication's verdict, from the readings its record keeps in the digest
    assert f"reversal (replication): recorded {again}, rederived {again}: agree" in out
    for where in ("verdict", "replication"):
        saved = json.loads(digest.read_text())
        record = saved["tasks"]["reversal"]["verdict"]
        (record if where == "verdict" else record["replication"])["verdict"] = "downstream"
        (tmp_path / "moved.json").write_text(json.dumps(saved))
        assert command.main(["--rederive", str(tmp_path / "moved.json")]) == 1, where
        rederived = word if where == "verdict" else again
        assert f"recorded downstream, rederived {rederived}: DISAGREE" in capsys.readouterr().out


def test_the_verdict_carries_its_stability_from_the_readings(run):
    """The stability stage derives the verdict again on resamples of the readings the run
    kept: its word is the verdict's, and a run made again reads it back from its stage."""
    results = json.loads((run / "reversal" / "results.json").read_text())
    stability = results["verdict"]["stability"]
    assert stability["word"] == results["verdict"]["verdict"]
    assert stability["resamples"] == TINY["stability_resamples"]
    assert 0 <= stability["share"] <= 1 and "flip_margin" in stability
    # what the resamples hold fixed is what the readings say they hold fixed, every item
    assert stability["held_fixed"] == list(results["readings"]["held_fixed"].values())
    assert stability["rechosen"] == list(readings_module.RECHOSEN)
    assert (run / "stages" / "reversal-stability.json").exists()


def test_a_second_candidate_at_the_reference_names_the_first_beside_it():
    """T6's second lookup (the reference, 0.46, beside ref+1's 0.91) was said to be "kept by
    the margin", which only the first candidate can be: its text names both masses."""
    from harness.attention.heads import offset_text
    from harness.pipeline.lookup_stages import candidate_text

    masses = {0: 0.46, 1: 0.91, -1: 0.05}
    assert candidate_text(0, masses) == (
        "the lookup reads the reference (the second candidate lookup): ID mass 0.46, ref+1 0.91"
    )
    assert "within" not in candidate_text(0, masses)
    # elsewhere than the reference the first candidate's text serves, with its note
    how = "(the second candidate lookup)"
    assert candidate_text(1, masses) == offset_text(1, masses, how)
