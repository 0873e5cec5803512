"""The controls, one module each, listed once in `CONTROLS`: the one registry that both the
grid sweep (at its chosen setting) and the dose ladder (at every dose) build their controls
from; and what the pointer control measures at the grid (`following`). The verdicts that
read them live in `harness.attention.verdicts`.

    from harness.attention.controls import control_settings, ladder_controls, roles_of
    control_settings(chosen, seeds=(0, 1))   # the settings scored beside the chosen one
    roles_of("top4-C2", names)["random4-C2-s0"]        # "random_heads"
    [c.role for c in ladder_controls()]                  # ["pointer", "other_heads"]

                      runs at
    random_heads      grid          the same N and C on random heads (one setting per seed)
    random_positions  grid          the chosen heads at as many random non-reference keys
    bottom_heads      grid          the lowest-ranked heads
    knockout          grid          the chosen heads' reference weights set to 0
    pointer           grid, ladder  the push at ref + k for each pointer shift
    restore           grid          the chosen heads' reference weight set to its ID level
    other_heads       ladder        the push on n heads drawn outside the top n

A control is a `Control` value (`base.py`): its role, which its settings carry
(`Setting.role`) and reports read; where it runs. At the grid: how it makes its settings
from the chosen one, and its entry in the reports' legend. On the ladder (`AtDose`): its
settings beside each dose's push, its field in the dose curve, its dose-table columns, its
lines in the dose figure, and the numbers the calibrated verdict reads from it. A new
control is one module defining `CONTROL` and one line in `CONTROLS`. Nothing here imports
torch (reports read the roles, the legend, the columns and the lines) or the sweep and the
ladder (which import this package to score the controls).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from harness.attention.controls import (
    bottom_heads,
    knockout,
    other_heads,
    pointer,
    random_heads,
    random_positions,
    restore,
)
from harness.attention.controls.base import (
    AtDose,
    Column,
    Control,
    ControlOptions,
    LadderContext,
    LadderOptions,
    Reading,
    Series,
)
from harness.attention.controls.following import answer_at_reference, pointer_following
from harness.attention.controls.knockout import knockout_of
from harness.attention.controls.pointer import POINTER_SHIFTS, pointer_settings
from harness.attention.controls.restore import restore_levels, restore_setting
from harness.attention.setting import BASELINE, Setting

CONTROLS: tuple[Control, ...] = (
    random_heads.CONTROL,
    random_positions.CONTROL,
    bottom_heads.CONTROL,
    knockout.CONTROL,
    pointer.CONTROL,
    restore.CONTROL,
    other_heads.CONTROL,
)


def grid_controls() -> tuple[Control, ...]:
    """The controls that run at the grid's chosen setting, in registry order."""
    return tuple(c for c in CONTROLS if c.make is not None)


def ladder_controls() -> tuple[Control, ...]:
    """The controls that run at every dose of the ladder, in registry order: the order of
    their fields in the curve, their columns in the dose table, their lines in the figure."""
    return tuple(c for c in CONTROLS if c.ladder is not None)


def ladder_readings() -> tuple[Reading, ...]:
    """What the calibrated verdict reads from the ladder's controls, in registry order."""
    return tuple(r for c in ladder_controls() for r in c.ladder.numbers)


def control_settings(
    chosen: Setting,
    seeds: Iterable[int] = (0, 1, 2),
    pointer_shifts: Sequence[int] = POINTER_SHIFTS,
    restore: bool = True,
) -> list[Setting]:
    """The settings of every grid control of `chosen` (none for the baseline), in `CONTROLS`
    order, each carrying its control's role. `restore=False` leaves the restore control out
    (it needs ID levels in the head ranking)."""
    if chosen.is_baseline:
        return []
    options = ControlOptions(
        seeds=tuple(int(s) for s in seeds), pointer_shifts=tuple(pointer_shifts)
    )
    out = []
    for control in grid_controls():
        if control.role == "restore" and not restore:
            continue
        out += [dataclasses.replace(s, role=control.role) for s in control.make(chosen, options)]
    return out


def roles_of(chosen_name: str, names: Iterable[str]) -> dict[str, str]:
    """The role of each setting a sweep reported, by name: "baseline", "chosen", a
    control's role, or "intervention" (any other setting). The controls of the chosen
    setting are made again (`Setting.from_name`, with the seeds the names carry), so a
    digest that kept only names (docs/quick-run*.json) reads as the full results do."""
    names = list(names)
    roles = {name: "intervention" for name in names}
    parsed = {}
    for name in names:
        try:
            parsed[name] = Setting.from_name(name)
        except ValueError:
            continue  # not a setting name of this version: no role to give it
    chosen = parsed.get(chosen_name)
    if chosen is not None and not chosen.is_baseline:
        # One seed at a time: a control that draws with the first seed only (random
        # positions) is made for every seed the names carry.
        for seed in sorted({s.seed for s in parsed.values()}):
            for setting in control_settings(chosen, (seed,)):
                if setting.name in roles:
                    roles[setting.name] = setting.role
        roles[chosen_name] = "chosen"
    if BASELINE.name in roles:
        roles[BASELINE.name] = BASELINE.role
    return roles


def legend() -> str:
    """What each control's rows are, for a report: one clause per control."""
    return "; ".join(control.legend for control in grid_controls())


__all__ = [
    "CONTROLS",
    "POINTER_SHIFTS",
    "AtDose",
    "Column",
    "Control",
    "ControlOptions",
    "LadderContext",
    "LadderOptions",
    "Reading",
    "Series",
    "answer_at_reference",
    "control_settings",
    "grid_controls",
    "ladder_controls",
    "ladder_readings",
    "knockout_of",
    "legend",
    "pointer_following",
    "pointer_settings",
    "restore_levels",
    "restore_setting",
    "roles_of",
]
