"""The pipeline's stability hook: a verdict holding its readings gets its stability from
their re-derivation; one holding none is left as it was (reports say "not recorded")."""

import sys
import types

import numpy as np

from harness.pipeline.lookup_stages import add_stability


def test_a_verdict_without_readings_is_left_as_it_was():
    verdict = {"verdict": "downstream", "reasons": [], "numbers": {}}
    add_stability(verdict)
    assert "stability" not in verdict


def test_a_verdict_with_readings_gets_its_stability(monkeypatch):
    # a stand-in for the re-derivation: nudge-repairable while 20 of 40 test instances gain
    def rederive(readings, draw=None, stats=None):
        gains = np.asarray(readings["test"])
        picked = gains if draw is None else gains[np.asarray(draw["test"])]
        return {"verdict": "nudge-repairable" if picked.sum() >= 20 else "inconclusive"}

    module = types.ModuleType("harness.attention.verdicts.readings")
    module.rederive = rederive
    module.streams = lambda readings: {"test": len(readings["test"])}
    monkeypatch.setitem(sys.modules, "harness.attention.verdicts.readings", module)
    import harness.attention.verdicts as verdicts

    monkeypatch.setattr(verdicts, "readings", module, raising=False)
    verdict = {"verdict": "nudge-repairable", "readings": {"test": [1] * 24 + [0] * 16}}
    add_stability(verdict)
    stability = verdict["stability"]
    assert stability["word"] == "nudge-repairable" and stability["resamples"] == 1000
    assert stability["flip_margin"]["margin"] == 5  # 24 gains -> 19, 1-minimal
