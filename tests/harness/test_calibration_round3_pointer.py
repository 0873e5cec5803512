"""The pointer control next to the reference, on a model built for it
(tests/calibration_round3_pointer.py): a dilution that a push at the lookup's ref-1 repairs
exactly as the push at the reference does. The model is first checked to have that property
(so the verdict test can fail); then, through the calls `reproduce` makes (`judge_by_kind`:
the test ladder's controls at the rungs the verdict reads, its shifted pushes the ladder's
default, ref+-1, +-2 and +-3), on two instance seeds, its verdict must not be
nudge-repairable; each assertion's message is the model's `why`."""

from __future__ import annotations

import copy

import pytest

from harness.attention.controls import LADDER_POINTER_SHIFTS, dose_field
from harness.attention.verdicts.vocabulary import INCONCLUSIVE, NUDGE_REPAIRABLE
from tests.calibration_round3_pointer import MODELS, build
from tests.calibration_round3_verdict import judge_by_kind

NAME = "neighbour_carries_the_answer"


@pytest.fixture(scope="module")
def judged():
    done = {}

    def get(seed):
        if seed not in done:
            done[seed] = judge_by_kind(build(NAME), seed=seed)
        return done[seed]

    return get


def test_the_lookup_reads_ref_plus_1_and_its_ref_minus_1_holds_a_third_of_an_id_row():
    """The property the verdict rests on: the lookup is found at ref+1 (the key whose
    previous character is the reference's), the text's reference (the lookup's ref-1) holds
    about a third of each ID row, and ID is solved while OOD is not."""
    from harness.attention.heads import rank_lookup
    from harness.attention.interventions import score_settings
    from harness.attention.sweep import BASELINE

    built = build(NAME)
    ranking, found = rank_lookup(built.model, built.tokenizer, built.id_instances, batch_size=32)
    assert found["offset"] == 1 and ranking.order[0] == built.truth.lookup_heads[0], found
    levels = ranking.offsets
    layer, head = built.truth.lookup_heads[0]
    at_key, at_minus_1 = levels["1"][layer][head], levels["0"][layer][head]
    assert 0.55 < at_key < 0.65 and 0.3 < at_minus_1 < 0.4, (at_key, at_minus_1)

    def exact(instances):
        records = score_settings(built.model, built.tokenizer, instances, [BASELINE], None)
        return sum(r["exact_match"] for r in records["baseline"]) / len(records["baseline"])

    assert exact(built.id_instances) == 1.0 and exact(built.ood_instances[::4]) == 0.0


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_a_dilution_a_push_at_ref_minus_1_repairs_is_not_nudge_repairable(judged, seed):
    spec = MODELS[NAME]
    out = judged(seed)
    verdict = out["verdict"]
    assert verdict["verdict"] == spec.verdict == INCONCLUSIVE, (spec.why, verdict)
    assert verdict["verdict"] != NUDGE_REPAIRABLE, (spec.why, verdict)
    named = f"the push at ref{spec.shift} gains about as much as at the reference"
    assert any(named in r for r in verdict["reasons"]), (spec.why, verdict["reasons"])
    # the errors are a dilution and every other condition of a repair holds: ref-1 alone
    # stands between this model and nudge-repairable
    errors = verdict["numbers"]["errors"]
    assert errors["diluted"] == 1.0, (spec.why, errors)
    failed = [r for r in verdict["reasons"] if "gains about as much" in r or "followed" in r]
    assert len(failed) == 1, (spec.why, verdict["reasons"])
    # its values share a component, so the output rescaled to its ID norm mends nothing
    assert not any("rescal" in r for r in verdict["reasons"]), (spec.why, verdict["reasons"])
    # the test ladder pushed at every shift of the ladder's default at the chosen dose, and
    # the push at ref-1 gains there what the push at the reference does
    at = next(d for d in out["test"]["doses"] if d["strength"] == verdict["numbers"]["dose"]["C"])
    pushes = at[dose_field("pointer")]
    assert list(pushes) == [f"{k:+d}" for k in LADDER_POINTER_SHIFTS], (spec.why, list(pushes))
    assert pushes[spec.shift]["gain"]["gain"] == pytest.approx(at["reference"]["gain"]), spec.why


@pytest.mark.slow
def test_with_the_pushes_at_ref_plus_minus_3_alone_it_would_read_nudge_repairable(judged):
    """What the pushes next to the reference add: the same curves with ref-3 and ref+3 alone
    (the ladder's shifts before) read nudge-repairable; so the verdict above comes from the
    push at ref-1, not from another condition."""
    from harness.attention.verdicts.calibrated import calibrated_verdict

    out = judged(0)
    test = copy.deepcopy(out["test"])
    for entry in test["doses"]:
        pushes = entry.get(dose_field("pointer"))
        if pushes:
            entry[dose_field("pointer")] = {k: v for k, v in pushes.items() if k in ("-3", "+3")}
    again = calibrated_verdict(out["validation"], test, out["diagnosis"], out["by_kind"])
    assert again["verdict"] == NUDGE_REPAIRABLE, (MODELS[NAME].why, again["reasons"])
