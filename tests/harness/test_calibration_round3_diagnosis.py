"""The diagnosis beside its null, calibrated on models whose truth is known by construction
(tests/calibration_round3_diagnosis.py): uniform attention reads the same kind on a one-key
and on a two-key reference, and heads that keep their level on the rows the model gets right
read on reference however many of them are read. The diagnosis alone here (fast); the
verdict through the calls `reproduce` makes at two instance seeds (slow)."""

from __future__ import annotations

import pytest

from tests.calibration_models import MODELS as EARLIER
from tests.calibration_round3_diagnosis import MODELS, build, judge


def diagnose(name: str, with_null: bool = True) -> dict:
    """The diagnosis of one model's baseline OOD errors with its lookup heads, at the
    reference, given the ID rows as the pipeline gives them (or the old levels alone)."""
    from harness.attention import diagnosis
    from harness.attention.heads import rank_heads
    from harness.attention.interventions import score_settings
    from harness.attention.sweep import BASELINE
    from harness.engine.scoring import Scorer

    built = build(name)
    model, tokenizer, ids, ood = (
        built.model,
        built.tokenizer,
        built.id_instances,
        built.ood_instances,
    )
    ood = ood[::3]
    ranking = rank_heads(model, tokenizer, ids, shift=0, batch_size=32)
    heads = ranking.lookup() or ranking.top(1)
    scored = score_settings(model, tokenizer, ids + ood, [BASELINE], None, batch_size=32)
    records = scored["baseline"]
    options = (
        {"id_rows": (ids, records[: len(ids)])}
        if with_null
        else {"level": diagnosis.id_levels(ranking, heads, 0)}
    )
    return diagnosis.where_errors_look(
        Scorer(model, tokenizer, batch_size=32), ood, records[len(ids) :], heads, **options
    )


def test_uniform_attention_reads_the_same_kind_on_a_one_key_and_a_two_key_reference():
    one, two = diagnose("uniform_one_key"), diagnose("uniform_two_keys")
    why = (
        "uniform attention holds no more per key on a reference of two keys than on one: "
        "both must read diffuse (summed, two keys held twice any other key and read diluted)"
    )
    assert one["shares"]["diffuse"] == two["shares"]["diffuse"] == 1.0, (why, one, two)
    # and above its null: the same heads on the correct ID rows are not diffuse
    assert two["null"]["id"]["shares"]["diffuse"] < 0.1, (why, two["null"])


def test_heads_that_keep_their_level_on_correct_rows_read_on_reference():
    why = MODELS["downstream_varying_heads"].why
    found = diagnose("downstream_varying_heads")
    assert found["null"]["id"]["shares"]["on_reference"] >= 0.95, (why, found["null"])
    assert found["shares"]["on_reference"] == 1.0, (why, found["shares"], found["on_reference"])
    assert len(found["on_reference"]["looking"]) == 4, (why, found["on_reference"])
    # the old reading, every head at 95% of its mean, read the same rows as diluted: the
    # confound the null removes (a test that it is the rule, not the model, that changed)
    old = diagnose("downstream_varying_heads", with_null=False)
    assert old["shares"]["diluted"] == 1.0, (why, old["shares"])


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
def test_each_model_gets_the_kind_and_verdict_its_construction_implies(judged, name, seed):
    spec = MODELS[name]
    out = judged(name, seed)
    found = out["diagnosis"]
    assert found["shares"][spec.kind] >= 0.9, (spec.why, found["shares"])
    assert spec.kind in out["verdict"]["numbers"]["kinds"], (spec.why, out["verdict"])
    # the kind read against its null: a lookup failure far above the correct ID rows' share
    null = found["null"]["id"]["shares"]
    if spec.kind != "on_reference":
        assert found["shares"][spec.kind] - null[spec.kind] > 0.5, (spec.why, null)
    assert out["verdict"]["verdict"] == spec.verdict, (spec.why, out["verdict"])


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_a_push_overlapping_a_two_key_reference_is_named_not_read_as_a_repair(judged, seed):
    """On the two-key reference the push at ref-1 covers the reversal key (the answer's):
    it gains as much as the reference push, so the dose line is not a repair's and the
    diffuse errors are not met by 'conflicting evidence' (what the pushes at ref+-3 alone
    said)."""
    out = judged("uniform_two_keys", seed)
    reasons = out["verdict"]["reasons"]
    named = "the push at ref-1 gains about as much as at the reference"
    assert any(named in r for r in reasons), (MODELS["uniform_two_keys"].why, reasons)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("name", sorted(EARLIER))
def test_the_earlier_calibration_models_keep_their_verdicts_with_the_null(name, seed):
    """tests/calibration_models.py's models, judged with the diagnosis reading its null on
    the ID rows as the pipeline does (tests/harness/test_calibration.py judges them with the
    ranking's levels alone): each keeps the verdict its construction implies, so the null
    changes no verdict that was not the confound it removes."""
    from tests.calibration_models import build as build_earlier

    spec = EARLIER[name]
    out = judge(build_earlier(spec), seed=seed)
    assert out["verdict"]["verdict"] == spec.verdict, (spec.why, out["verdict"])
    if spec.kinds:
        assert set(out["verdict"]["numbers"]["kinds"]) == set(spec.kinds), out["verdict"]
