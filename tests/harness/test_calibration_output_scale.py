"""The output-scale control on its calibration models (tests/calibration_output_scale.py):
two dilutions with the same pattern, logits and push curve, one whose head output keeps its
length as its weight spreads (the push repairs it, the rescale does not: nudge-repairable),
one whose output shrinks while still pointing at the right key (the rescale repairs it as
well as the push: not nudge-repairable). Each runs through the calls `reproduce` makes, on
two instance seeds; each assertion's message is the model's `why`."""

from __future__ import annotations

import pytest

from tests.calibration_output_scale import MODELS, build, judge


@pytest.fixture(scope="module")
def judged():
    done = {}

    def get(name, seed):
        if (name, seed) not in done:
            done[name, seed] = judge(build(name), seed=seed)
        return done[name, seed]

    return get


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_each_output_scale_model_gets_the_verdict_its_construction_implies(judged, name, seed):
    spec = MODELS[name]
    verdict = judged(name, seed)["verdict"]
    numbers = verdict["numbers"]
    assert verdict["verdict"] == spec.verdict, (spec.why, verdict["reasons"])
    push, rescale = numbers["reference_gain"], numbers["output_scale"]
    assert push["low"] > 0, (spec.why, push)  # the push repairs both
    if spec.rescale_repairs:
        assert rescale["gain"] >= push["low"], (spec.why, rescale, push)
        named = [r for r in verdict["reasons"] if "rescaling the heads' output" in r]
        assert named, (spec.why, verdict["reasons"])
    else:
        assert rescale["gain"] < push["low"], (spec.why, rescale, push)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_the_two_models_differ_only_in_what_the_rescale_does(judged, seed):
    """The same pattern (every first wrong row diluted), the same push and its gain: the
    shared value component changes no logit; only the output-scale control tells them
    apart."""
    kept, shrunk = judged("diluted_weight", seed), judged("shrinking_output", seed)
    for out in (kept, shrunk):
        assert out["diagnosis"]["shares"]["diluted"] == 1.0, out["diagnosis"]["shares"]
    assert kept["n"] == shrunk["n"]
    assert (
        kept["verdict"]["numbers"]["reference_gain"]
        == shrunk["verdict"]["numbers"]["reference_gain"]
    )
    assert (
        kept["verdict"]["numbers"]["output_scale"] != shrunk["verdict"]["numbers"]["output_scale"]
    )
