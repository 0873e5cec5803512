"""pointer: the chosen heads and C with their cells moved to ref + k for each pointer shift.
A repaired lookup has no reason to copy what sits k keys away; a pointer does (the verdict
reads how often the answer follows, `harness.attention.controls.following`)."""

import dataclasses

from harness.attention.controls.base import Control

POINTER_SHIFTS = (-3, 3)  # the chosen push at ref-3 and ref+3


def pointer_settings(chosen, shifts=POINTER_SHIFTS):
    """The chosen heads and C with their cells moved to `ref + k` for each k."""
    if chosen.is_baseline:
        return []
    bad = [k for k in shifts if k == 0]
    if bad:
        raise ValueError(f"pointer shifts must be non-zero, got {list(shifts)}")
    return [dataclasses.replace(chosen, shift=chosen.shift + int(k)) for k in shifts]


def make(chosen, options):
    return pointer_settings(chosen, options.pointer_shifts) if options.pointer_shifts else []


CONTROL = Control(
    "pointer",
    make,
    "`*shift-3`, `*shift+3` the chosen push at ref-3 / ref+3 (pointer shift)",
)
