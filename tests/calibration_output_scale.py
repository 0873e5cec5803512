"""Calibration models for the output-scale control (harness/attention/controls/output_scale.py):
two hand-set Llamas with the same attention pattern, the same logits and the same push
curve, which differ only in what a head's output does when its weight spreads.

    from tests.calibration_output_scale import MODELS, build
    built = build("shrinking_output")
    MODELS["shrinking_output"].verdict      # "inconclusive"

Both are the planted dilution (tests/planted.py's geometry, built by
tests/calibration_models.py): a one-hot lookup whose mass on the right key falls below the
readout's threshold out of distribution while the right key still leads, and a push of
C = 0.3 at the reference lifts every OOD row back over it.
- `diluted_weight`: every key's value also carries a component all keys share (planted's
  MEAN_VALUE, in a dimension no head writes out). The weight the reference loses lands on
  keys that still carry that component, so the head's output keeps its length (sqrt(2^2 +
  m^2): 2.21 in distribution, 2.09 at the longest OOD row) and what is missing is the
  reference's share of it. Rescaling the output to its ID norm gives it back ~1% of its
  length: it mends only the few rows just past the threshold (a gain of about 0.04 against
  the push's 0.90). The push repairs what the rescale does not: *nudge-repairable*.
- `shrinking_output`: the same model with nothing shared (MEAN_VALUE 0): the values are
  one-hot, the weight the reference loses is spread thinly over other characters, and the
  output shrinks with the mass on the right key while still pointing at it (norm ~ m:
  0.93 in distribution, 0.60 at the longest row). Rescaled to its ID norm, each OOD row
  writes the right character again: the rescale gains what the push gains, without moving
  any weight. Whether the weight at the reference or the output's length was missing is
  not decided: *inconclusive*, naming the rescale.
"""

from __future__ import annotations

from dataclasses import dataclass

from tests import calibration_models as cm
from tests import planted as p


@dataclass(frozen=True)
class Spec:
    """One model: the shared value component it carries, the verdict its construction
    implies, why, and whether the rescale must gain as much as the push."""

    name: str
    mean: float
    verdict: str
    why: str
    rescale_repairs: bool


MODELS = {
    s.name: s
    for s in (
        Spec(
            "diluted_weight",
            p.MEAN_VALUE,
            "nudge-repairable",
            "the reference loses weight to keys whose values share a component, so the head's "
            "output keeps its length and rescaling it to its ID norm mends almost nothing; the "
            "push gives the reference its weight back and repairs every OOD row: the weight "
            "was what was missing",
            rescale_repairs=False,
        ),
        Spec(
            "shrinking_output",
            0.0,
            "inconclusive",
            "the values share nothing, so the head's output shrinks with the mass on the "
            "right key while still pointing at it; rescaling it to its ID norm, the pattern "
            "untouched, repairs the OOD rows as the push does: a push that restores the "
            "weight also restores the output's length, and which one was missing is not "
            "decided",
            rescale_repairs=True,
        ),
    )
}


def build(name: str) -> p.Planted:
    """(model, tokenizer, id_instances, ood_instances, truth) of one model of MODELS: the
    calibration dilution with its values' shared component set to the spec's `mean`."""
    import torch

    if name not in MODELS:
        raise ValueError(f"model must be one of {', '.join(MODELS)}, got {name!r}")
    built = cm.build("dilution")
    layout = p._Layout(built.tokenizer)
    with torch.no_grad():
        for block in built.model.model.layers:
            p._values(block.self_attn, layout, layout.tok, mean=MODELS[name].mean)
    return built


def judge(built: p.Planted, seed: int = 0) -> dict:
    """The calibrated verdict through the calls `reproduce` makes
    (tests/calibration_models.py's `judge`)."""
    return cm.judge(built, seed=seed)
