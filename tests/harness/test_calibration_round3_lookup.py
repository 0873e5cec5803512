"""A lookup exists before it is judged, on models built to have none or to hide one
(tests/calibration_round3_lookup.py): each, through the calls `reproduce` makes with the
lookup's evidence (each head's ID level beside its null), gets at every lookup it judges the
verdict its construction implies, on two instance seeds. Each model is first checked to
have the property it was built for, so that the verdict test can fail."""

from __future__ import annotations

import dataclasses

import pytest

from harness.attention.heads import rank_lookup, second_lookup
from harness.attention.lookup import Lookup
from harness.attention.verdicts.vocabulary import ID_WORKS
from tests.calibration_round3_lookup import MODELS, build, judge


@pytest.fixture(scope="module")
def built():
    done = {}

    def get(name):
        if name not in done:
            done[name] = build(name)
        return done[name]

    return get


@pytest.fixture(scope="module")
def judged(built):
    done = {}

    def get(name, seed):
        if (name, seed) not in done:
            done[name, seed] = judge(built(name), seed=seed)
        return done[name, seed]

    return get


def ranked(model):
    ranking, found = rank_lookup(model.model, model.tokenizer, model.id_instances, batch_size=32)
    return ranking, found, Lookup.of(ranking, found)


def id_exact(model) -> float:
    from harness.attention.interventions import score_settings
    from harness.attention.sweep import BASELINE

    records = score_settings(
        model.model, model.tokenizer, model.id_instances, [BASELINE], None, batch_size=32
    )["baseline"]
    return sum(r["exact_match"] for r in records) / len(records)


def test_a_model_that_works_nowhere_has_a_previous_token_head_ranked_first(built):
    """The property: it writes nothing right in distribution, and its top head at the
    reference is the previous-token head (its weight there one row per answer), which
    beats no null."""
    model = built("works_nowhere")
    assert id_exact(model) == 0.0 < ID_WORKS
    _, _, lookup = ranked(model)
    assert lookup.top(1) == [(0, 1)]
    top = lookup.evidence["heads"][0]
    assert top["level"] > top["null"] and top["beats"] is False, top
    assert lookup.heads == () and lookup.exists is False


def test_uniform_heads_read_their_null_and_make_no_near_tie(built):
    """The property: every head at the reference and at ref+1 weighs exactly its null, which
    counted as heads made a near tie (two lookups headlined for a model with none)."""
    model = built("uniform_heads")
    assert id_exact(model) >= ID_WORKS  # it works in distribution: only the null decides
    ranking, found, lookup = ranked(model)
    for k in ("0", "1"):
        for layer in ranking.offsets[k]:
            assert layer == pytest.approx([ranking.nulls[k]] * len(layer), rel=1e-4)
    assert second_lookup(dataclasses.replace(ranking, nulls={}), 0) is not None
    assert second_lookup(ranking, found["offset"]) is None
    assert lookup.exists is False


def test_a_previous_token_head_ranked_first_is_no_lookup_found_without_shift(built):
    model = built("previous_token_top")
    assert id_exact(model) >= ID_WORKS
    _, found, lookup = ranked(model)
    assert lookup.top(1) == [(0, 1)] and lookup.exists is False
    assert found["text"].startswith("no head beats its null")


def test_a_split_lookup_is_a_candidate_at_each_offset_and_was_not_before(built):
    """The property: each half beats its null at its own offset only, and the top four heads
    (the previous-token head among them) read the reference past the margin."""
    model = built("split_lookup")
    ranking, found, lookup = ranked(model)
    assert found["offset"] == 0 and lookup.heads == ((0, 2),)
    assert (0, 1) in ranking.top(4)  # the previous-token head among the top heads
    assert second_lookup(dataclasses.replace(ranking, nulls={}), 0) is None
    assert second_lookup(ranking, 0)["offset"] == 1


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_each_model_gets_at_each_lookup_the_verdict_its_construction_implies(judged, name, seed):
    spec = MODELS[name]
    out = judged(name, seed)
    assert out["verdicts"] == spec.verdicts, (spec.why, out["verdicts"], out["first"]["verdict"])
    for lookup in out["lookups"].values():
        assert lookup.evidence["exists"] is (spec.verdicts[lookup.offset] != "no lookup"), (
            spec.why,
            lookup.evidence,
        )


@pytest.mark.slow
def test_every_earlier_model_with_a_lookup_passes_the_gate_and_the_one_without_does_not():
    """The planted and calibration models keep their verdicts under rule G: each works in
    distribution and, but for the models built without a lookup (whose verdict is *no
    lookup* either way), a head at its offset beats its null."""
    from tests import calibration_models as cm
    from tests import planted as p

    models = {
        f"planted {m} shift {s}": (lambda m=m, s=s: p.build(m, s), m != "no_lookup")
        for m in p.MECHANISMS
        for s in p.SHIFTS
    }
    for name, spec in cm.MODELS.items():
        models[name] = (lambda spec=spec: cm.build(spec), spec.mechanism != "no_lookup")
    with cm.partner_task():  # one model's instances are the partner task's
        for name, (make, has_lookup) in models.items():
            model = make()
            _, _, lookup = ranked(model)
            assert lookup.exists is has_lookup, (name, lookup.evidence)
            assert id_exact(model) >= ID_WORKS, name
