"""A toy control written as a user would add one: this one module (in the harness it would be
harness/attention/controls/<name>.py) and one registry line. It runs at every dose of the
ladder: the same push on the lowest-ranked heads. It declares its field in the dose curve,
its dose-table column, its line in the dose figure and the number the verdict reads."""

from __future__ import annotations

import dataclasses

from harness.attention.controls import AtDose, Column, Control, Reading, Series
from harness.foundation.stats import format_gain

KEY = "bottom"  # its field in each dose entry


def make(top, options):
    return [dataclasses.replace(top, heads="bottom")]


def read(context, top, settings):
    (setting,) = settings
    return context.paired(context.records[setting.name])


def gain(entry):
    return ((entry or {}).get(KEY) or {}).get("gain")


CONTROL = Control(
    "toy_bottom",
    None,  # not at the grid's chosen setting
    ladder=AtDose(
        KEY,
        make,
        read,
        columns=lambda curve: [Column("toy bottom heads: gain", lambda e: format_gain(e[KEY]))],
        series=lambda curve, entries: [Series("gain", "toy bottom heads", gain, "v", "C8")],
        numbers=(Reading("toy_bottom_gain", "chosen", gain),),
    ),
)
