"""output_scale: at the rungs of the ladder that carry controls, the top-n heads with their
attention pattern left as the model makes it and each head's output (its weights @ values,
per row, before the output projection) rescaled to its norm in distribution (mode
"rescale"), read as its paired gain over the baseline.

Why: with longer inputs a head's output can shrink (many values averaged: "vanishing
variance") even where its pattern still leads at the right key, and a push that gives the
reference its weight back also gives the output its length back. A gain the rescale gives
as well is no evidence that the *weight at the reference* is what was missing; the calibrated
verdict's nudge-repairable needs the reference push to gain more than this control.

The ID norm of a head (`HeadRanking.output_norms`, measured in the ranking's own forward on
the ID instances, `harness.attention.heads.rank_heads`): the mean, over the ID answer rows
(the rows with a reference, teacher-forced), of the L2 norm of the head's output on that
row. Each OOD row with cells is rescaled to that one number, per head: a row's length where
the model works, not a row-matched one (an OOD row has no ID twin), and a mean of norms
rather than the norm of a mean output (which would shrink with the very averaging this
control tests). The rescale does not depend on C: one setting, shared by every rung that
carries controls (its name has no C; the ladder scores it once).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from harness.attention.controls.base import AtDose, Column, Control, Option, Reading, Series
from harness.foundation.stats import format_gain

KEY = "output_scale"  # its field in each dose entry of the ladder's curve
MODE = "rescale"  # harness.engine.modes.rescale


def rescale_setting(top):
    """The top-n heads of `top`, pattern untouched, output rescaled to each head's ID norm
    (the same heads and shift, no C: it does not depend on the dose)."""
    return dataclasses.replace(top, mode=MODE, strength=0.0, threshold=0.0, renormalise=False)


def id_norms(ranking):
    """float [layers, heads]: each head's ID output norm (`HeadRanking.output_norms`), the
    length "rescale" gives each selected head's output. ValueError for a ranking saved
    before it was measured."""
    import torch

    if not ranking.output_norms:
        raise ValueError(
            "the head ranking has no ID output norms (ranked before they were measured): "
            "rank the heads again to run the output-scale control"
        )
    return torch.tensor(ranking.output_norms, dtype=torch.float32).clamp_min(0)


def make_at_dose(top, options):
    return [rescale_setting(top)] if options.output_scale else []


def read(context, top, settings) -> dict[str, Any] | None:
    """The rescale's paired gain over the baseline (None: not run at this rung)."""
    if not settings:
        return None
    (setting,) = settings
    return {"setting": setting.name, "gain": context.paired(context.records[setting.name])}


def gain_at(entry: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The rescale's gain (gain, low, high, ...) at one dose entry; None: not measured."""
    return ((entry or {}).get(KEY) or {}).get("gain")


def columns(curve: Mapping[str, Any]) -> list[Column]:
    def cell(entry):
        gain = gain_at(entry)
        return format_gain(gain) if gain else "-"  # no controls at this rung, or not run

    return [Column("output scaled to ID norm: gain", cell)]


def series(curve: Mapping[str, Any], entries) -> list[Series]:
    """The rescale's gain where any dose has it (the same setting at every such dose)."""
    if not any(gain_at(e) for e in entries):
        return []

    def value(entry):
        return (gain_at(entry) or {}).get("gain")

    return [Series("gain", "output scaled to ID norm", value, "D", "C5")]


CONTROL = Control(
    "output_scale",
    None,  # not at the grid's chosen setting
    ladder=AtDose(
        KEY,
        make_at_dose,
        read,
        columns,
        series,
        numbers=(Reading("output_scale", "chosen", gain_at),),
        # False: not run (the validation ladder, which only chooses N and the dose)
        options=(Option("output_scale", True, bool),),
    ),
)
