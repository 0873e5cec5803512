"""The calibrated verdict on the third round's calibration models
(tests/calibration_round3_verdict.py): a mixed failure whose kinds need different doses, and
a failure shown only by over-long answers. Each runs through the calls `reproduce` makes
(`judge_by_kind`: the validation stream split by kind, the test ladder's controls at every
rung the verdict reads), on two instance seeds; each assertion's message is the model's
`why`."""

from __future__ import annotations

import pytest

from tests.calibration_round3_verdict import MODELS, build, judge_by_kind


@pytest.fixture(scope="module")
def judged():
    done = {}

    def get(name, seed):
        if (name, seed) not in done:
            done[name, seed] = judge_by_kind(build(name), seed=seed)
        return done[name, seed]

    return get


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_each_round3_model_gets_the_verdict_its_construction_implies(judged, name, seed):
    spec = MODELS[name]
    out = judged(name, seed)
    verdict = out["verdict"]
    assert verdict["verdict"] == spec.verdict, (spec.why, verdict)
    if spec.reason:
        assert any(spec.reason in r for r in verdict["reasons"]), (spec.why, verdict["reasons"])
    if spec.kinds:
        readings = {m["kind"]: m["verdict"] for m in verdict["numbers"]["mixed"]}
        assert readings == dict(spec.kinds), (spec.why, verdict["reasons"])
        doses = {m["kind"]: m["dose"]["C"] for m in verdict["numbers"]["mixed"]}
        assert doses == dict(spec.doses), (spec.why, doses)
        # the controls ran at every dose the verdict reads
        assert {(c, 0.0) for c in doses.values()} <= set(out["rungs"]), (spec.why, out["rungs"])


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_a_mixed_failure_read_at_one_dose_hides_its_repairable_kind(judged, seed):
    """The whole validation curve chooses C = 1 (it mends both kinds); read there, the
    diluted kind's shifted pushes are followed and it reads inconclusive. Only its own dose
    shows the repair: the split is what changes the reading."""
    out = judged("dilution_and_misdirection", seed)
    unsplit = {
        m["kind"]: (m["verdict"], m["dose"]["C"]) for m in out["unsplit"]["numbers"]["mixed"]
    }
    assert unsplit["diluted"] == ("inconclusive", 1.0), (
        MODELS["dilution_and_misdirection"].why,
        unsplit,
    )
    assert any("followed" in r for r in out["unsplit"]["reasons"] if r.startswith("diluted"))


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_over_long_answers_are_a_failure_the_eval_counts(judged, seed):
    """Every OOD answer is over-long: the diagnosis has no wrong row (no instance), which the
    rule used to read as no failure; the eval's exact match says every answer is wrong."""
    out = judged("over_long", seed)
    answers = out["diagnosis"]["answers"]
    assert out["diagnosis"]["instances"] == 0, out["diagnosis"]
    assert answers["wrong"] == answers["total"] == answers["over_long"] > 0, answers
    assert out["verdict"]["verdict"] != "no failure", MODELS["over_long"].why
