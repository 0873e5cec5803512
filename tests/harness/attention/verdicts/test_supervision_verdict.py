"""The supervision study's verdict rules on pooled gains whose verdict is known."""

import pytest

from harness.attention.verdicts.supervision import RULES_OUT, VERDICTS, study_verdict
from harness.attention.verdicts.vocabulary import SUPERVISION


def test_every_word_is_the_vocabularys_with_what_it_rules_out():
    assert VERDICTS == tuple(SUPERVISION)
    assert RULES_OUT == {word: v.rules_out for word, v in SUPERVISION.items()}


def gain(low: float, high: float, seeds=(0.1, 0.1, 0.1)) -> dict:
    return {"gain": (low + high) / 2, "low": low, "high": high, "n": 30, "seeds": list(seeds)}


def summary(ood_gain, versus=(0.05, 0.05, 0.05), mass=(0.02, 0.1), on_reference=0.2):
    """The values of one study's verdict: the chosen arm w1 against its three controls."""
    controls = ["wrong3-w1", "random-w1", "steps-x1.5"]
    return {
        "chosen": "w1",
        "metric": "partial_acc",
        "control_roles": dict(zip(controls, ("wrong_mask", "random_heads", "extra_steps"))),
        "gain": ood_gain,
        "versus_controls": {c: gain(v, v + 0.1) for c, v in zip(controls, versus)},
        "mass_gain": gain(*mass),
        "on_reference": on_reference,
    }


@pytest.mark.parametrize(
    "case,verdict",
    [
        (summary(gain(0.05, 0.2)), "supervision generalises"),
        (summary(gain(0.05, 0.2), versus=(-0.02, 0.05, 0.05)), "not specific to the reference"),
        (summary(gain(0.05, 0.2), versus=(0.05, 0.05, -0.02)), "not specific to the reference"),
        # random heads pulled to the reference gain as much: the reference, not the heads
        (summary(gain(0.05, 0.2), versus=(0.05, -0.02, 0.05)), "the reference, not these heads"),
        (
            summary(gain(0.05, 0.2, seeds=(0.2, 0.1, -0.01)), versus=(0.05, -0.02, 0.05)),
            "inconclusive",
        ),
        (summary(gain(0.05, 0.2, seeds=(0.2, 0.1, -0.01))), "inconclusive"),
        # a control that gains as much explains the gain, whatever the seeds say
        (
            summary(gain(0.05, 0.2, seeds=(0.2, 0.1, -0.01)), versus=(-0.02, 0.05, 0.05)),
            "not specific to the reference",
        ),
        (summary(gain(-0.05, 0.1), on_reference=0.6), "attention is not the bottleneck"),
        (summary(gain(-0.2, -0.1), mass=(-0.01, 0.03)), "supervision did not take"),
        (summary(gain(-0.05, 0.1), mass=(0.02, 0.1), on_reference=0.3), "inconclusive"),
    ],
)
def test_the_verdict_rules(case, verdict):
    found = study_verdict(**case)
    assert found["verdict"] == verdict
    assert found["rules_out"] == RULES_OUT[verdict]
    assert found["numbers"]["chosen"] == "w1" and found["reason"].startswith("w1's OOD")
    unbeaten = [name for name, d in found["numbers"]["versus_controls"].items() if d["low"] < 0]
    if verdict == "not specific to the reference":
        assert unbeaten[0] in found["reason"] and "random-w1" not in found["reason"]
    if verdict == "the reference, not these heads":
        assert "in every seed run, above wrong3-w1" in found["reason"]
        assert "but not above random-w1" in found["reason"]
    if verdict == "supervision did not take":
        assert "(a loss)" in found["reason"]
