"""What a control is: a value that makes, from a chosen setting, the settings scored beside
it on the test stream, and says what reports call them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ControlOptions:
    """What a sweep passes every control (a control reads what it needs, if anything)."""

    seeds: tuple[int, ...]  # random draws, one setting per seed
    pointer_shifts: tuple[int, ...]  # the pointer control's offsets k (ref + k)


@dataclass(frozen=True)
class Control:
    """One control. `role` is what its settings carry (`Setting.role`) and reports read to
    find them (never the format of a name); `make(chosen, options)` returns its settings of
    a chosen (non-baseline) setting; `legend` is its entry in a report's list of controls."""

    role: str
    make: Callable[[Any, ControlOptions], list[Any]]
    legend: str
