"""The calibrated verdict on models that behave like real ones (tests/calibration_models.py):
each model, built by hand with a mechanism known by construction, runs through the calls
`attentionspan reproduce` makes (`judge`), on two instance seeds, and for every set of
counts a grid could sweep ({1}, {2}, {4}, {1, 2}, {1, 2, 4}) gets the verdict its
construction implies. Each model's `why` says why that verdict is the right one; the test
for each property says what the rule must do to get it."""

from __future__ import annotations

import pytest

from tests.calibration_models import MODELS, build, judge

COUNT_SETS = ((1,), (2,), (4,), (1, 2), (1, 2, 4))


@pytest.fixture(scope="module")
def judged():
    """Each (model, seed) judged once for the module, on demand."""
    done = {}

    def get(name, seed):
        if (name, seed) not in done:
            done[name, seed] = judge(build(name), seed=seed, count_sets=COUNT_SETS)
        return done[name, seed]

    return get


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_each_calibration_model_gets_the_verdict_its_construction_implies(judged, name, seed):
    spec = MODELS[name]
    out = judged(name, seed)
    assert out["verdict"]["verdict"] == spec.verdict, (spec.why, out["verdict"])
    for counts, verdict in out["by_counts"].items():
        assert verdict == spec.verdict, (counts, spec.why)
    # the lookup is read where it reads, found without --shift
    if spec.mechanism != "no_lookup":
        assert out["offset"]["offset"] == spec.shift, out["offset"]
    if spec.kinds:  # a mixed failure names each kind, with its share
        assert set(out["verdict"]["numbers"]["kinds"]) == set(spec.kinds)


@pytest.mark.slow
def test_errors_caused_by_earlier_errors_do_not_decide(judged):
    """The model that keeps writing: over every wrong row its errors read diffuse (junk rows
    find nothing), which would say 'no lookup'; its first errors read diluted."""
    out = judged("dilution_keeps_writing", 0)
    found = out["diagnosis"]
    assert found["basis"] == "first wrong row of each instance"
    assert found["all_rows"]["shares"]["diffuse"] > 0.8
    assert found["shares"]["diluted"] == 1.0


@pytest.mark.slow
def test_redundant_heads_are_pushed_together_and_never_drawn_as_random_heads(judged):
    out = judged("dilution_redundant", 0)
    assert out["lookup"] == [(0, 2), (0, 3)]
    assert out["n"] == 2  # N = 1 gains too, but only at a larger dose
    decoy = judged("dilution_decoy", 0)
    assert decoy["counts"][1] is None  # the decoy alone: no dose gains
    assert decoy["n"] == 2


@pytest.mark.slow
def test_a_repairable_dilution_is_repaired_free_running_and_a_mixed_one_partly(judged):
    assert judged("dilution", 0)["repaired"] == 1.0
    mixed = judged("dilution_and_downstream", 0)
    assert 0 <= mixed["repaired"] < 0.5


@pytest.mark.slow
def test_the_task_whose_reference_never_holds_the_answer_is_registered_only_while_judged(judged):
    """The partner task (the other variant of the referenced character) exists for its
    model's judging alone; the ladder's pointers and the diagnosis read its oracle."""
    from attentionspan_datasets.tasks.base import TASKS
    from tests.calibration_models import PARTNER_TASK

    out = judged("dilution_answer_not_at_the_reference", 0)
    assert PARTNER_TASK not in TASKS
    assert out["verdict"]["verdict"] == "nudge-repairable"
    assert out["diagnosis"]["shares"]["diluted"] == 1.0
