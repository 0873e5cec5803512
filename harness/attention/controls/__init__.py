"""The controls, one module each, listed once in `CONTROLS`: the one registry that both the
grid sweep (at its chosen setting) and the dose ladder (at every dose) build their controls
from; and what the pointer control measures at the grid (`following`). The verdicts that
read them live in `harness.attention.verdicts`.

    from harness.attention.controls import control_settings, ladder_controls, roles_of
    control_settings(chosen, seeds=(0, 1))   # the settings scored beside the chosen one
    roles_of("top4-C2", names)["random4-C2-s0"]        # "random_heads"
    [c.role for c in ladder_controls()]      # ["pointer", "other_heads", "output_scale"]
    at_dose(curve["doses"][3], "pointer")                # what the pointer control wrote there

                      runs at
    random_heads      grid          the same N and C on random heads (one setting per seed)
    random_positions  grid          the chosen heads at as many random non-reference keys
    bottom_heads      grid          the lowest-ranked heads
    knockout          grid          the chosen heads' reference weights set to 0
    pointer           grid, ladder  the push at ref + k for each pointer shift (grid: k = +-3;
                                    ladder: k = +-1, +-2, +-3)
    restore           grid          the chosen heads' reference weight set to its ID level
    other_heads       ladder        the push on n heads drawn outside the top n
    output_scale      ladder        the top n's pattern kept, each output scaled to its ID norm

A control is a `Control` value (`base.py`): its role, which its settings carry
(`Setting.role`) and reports read; where it runs. At the grid: how it makes its settings
from the chosen one, and its entry in the reports' legend. On the ladder (`AtDose`): its
settings beside each dose's push, its field in the dose curve, its dose-table columns, its
lines in the dose figure, and the numbers the calibrated verdict reads from it. Each
declares the options it reads (`Option`: name and default; `ControlOptions` and
`LadderOptions` collect them from the registry), and reports, tables and verdicts find
what a ladder control wrote by its role (`at_dose`, `dose_field`), never by its key. A new
control is one module defining `CONTROL` and one line in `CONTROLS`. Nothing here imports
torch (reports read the roles, the legend, the columns and the lines) or the sweep and the
ladder (which import this package to score the controls).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from harness.attention.controls import (
    bottom_heads,
    knockout,
    other_heads,
    output_scale,
    pointer,
    random_heads,
    random_positions,
    restore,
)
from harness.attention.controls.base import (
    AtDose,
    Column,
    Control,
    LadderContext,
    Option,
    Options,
    Reading,
    Series,
)
from harness.attention.controls.following import answer_at_reference, pointer_following
from harness.attention.controls.knockout import knockout_of
from harness.attention.controls.output_scale import id_norms, rescale_setting
from harness.attention.controls.pointer import (
    LADDER_POINTER_SHIFTS,
    POINTER_SHIFTS,
    pointer_settings,
)
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
    output_scale.CONTROL,
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


def control(role: str) -> Control:
    """The registered control whose role is `role` (ValueError naming the roles if none)."""
    for c in CONTROLS:
        if c.role == role:
            return c
    raise ValueError(f"no control has the role {role!r}: {[c.role for c in CONTROLS]}")


def dose_field(role: str) -> str:
    """The field the ladder control of `role` writes in each dose entry of a curve (and a
    digest keeps under the same name): the pointer control's is "pointers", the other heads'
    "random_heads". Readers find a control's numbers by its role, never by that key."""
    ladder = control(role).ladder
    if ladder is None:
        raise ValueError(f"control {role!r} does not run on the ladder")
    return ladder.key


def at_dose(entry: Mapping[str, Any] | None, role: str) -> Any:
    """What the ladder control of `role` wrote in one dose entry (None: nothing there)."""
    return (entry or {}).get(dose_field(role))


class ControlOptions(Options):
    """What the sweep passes every grid control: the options they declare
    (`Control.options`; today the random draws' `seeds` and the `pointer_shifts`, ref-3 and
    ref+3 by default: `POINTER_SHIFTS`)."""

    def __init__(self, **values: Any) -> None:
        super().__init__((o for c in grid_controls() for o in c.options), **values)


class LadderOptions(Options):
    """What the dose ladder passes every ladder control at each dose: the options they
    declare (`AtDose.options`; today the `pointer_shifts`, ref+-1, +-2 and +-3 by default:
    `LADDER_POINTER_SHIFTS`, the other heads' `random_seeds` and whether the `output_scale`
    control runs). The two option sets are separate, so the same name may default
    differently at the grid and on the ladder. An empty tuple (or False): that control makes
    nothing, as on the validation ladder, which only chooses N and the dose."""

    def __init__(self, **values: Any) -> None:
        super().__init__((o for c in ladder_controls() for o in c.ladder.options), **values)


def control_settings(
    chosen: Setting,
    seeds: Iterable[int] | None = None,
    restore: bool = True,
    **options: Any,
) -> list[Setting]:
    """The settings of every grid control of `chosen` (none for the baseline), in `CONTROLS`
    order, each carrying its control's role. `seeds` and the other `options` (by the names
    the controls declare, e.g. `pointer_shifts`): `ControlOptions`, each control's default
    where not given. `restore=False` leaves the restore control out (it needs ID levels in
    the head ranking)."""
    if chosen.is_baseline:
        return []
    if seeds is not None:
        options["seeds"] = seeds
    made = ControlOptions(**options)
    out = []
    for c in grid_controls():
        if c.role == "restore" and not restore:
            continue
        out += [dataclasses.replace(s, role=c.role) for s in c.make(chosen, made)]
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
    return "; ".join(c.legend for c in grid_controls())


__all__ = [
    "CONTROLS",
    "LADDER_POINTER_SHIFTS",
    "POINTER_SHIFTS",
    "AtDose",
    "Column",
    "Control",
    "ControlOptions",
    "LadderContext",
    "LadderOptions",
    "Option",
    "Options",
    "Reading",
    "Series",
    "answer_at_reference",
    "at_dose",
    "control",
    "control_settings",
    "dose_field",
    "grid_controls",
    "id_norms",
    "ladder_controls",
    "ladder_readings",
    "knockout_of",
    "legend",
    "pointer_following",
    "pointer_settings",
    "rescale_setting",
    "restore_levels",
    "restore_setting",
    "roles_of",
]
