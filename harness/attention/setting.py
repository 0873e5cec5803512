"""One intervention setting, or none: `Setting`, its name and the name read back.

    from harness.attention.setting import BASELINE, Setting
    s = Setting(heads="top", n=4, strength=1.0)
    s.name, Setting.from_name("random4-C1-s2").seed      # "top4-C1", 2

The sweep (`harness.attention.sweep`) makes the grid of them, the dose ladder
(`harness.attention.dose`) its rungs, and the controls (`harness.attention.controls`)
theirs; `harness.attention.interventions` turns one into a capture `Intervention`. Its own
module so that the sweep, the ladder and the controls can all read it.
"""

from __future__ import annotations

import dataclasses
import numbers
import re
from dataclasses import dataclass, field
from typing import Any

from harness.engine.modes import MODES, check_parameter

# "other": n heads drawn with `seed` from the heads other than the top n (the dose ladder's
# random-heads control, `harness.attention.dose`); "random" draws from every head.
HEAD_CHOICES = ("none", "top", "random", "bottom", "other")
DRAWN_HEADS = ("random", "other")  # kinds whose heads are drawn with `seed`
POSITION_CHOICES = ("reference", "random")


@dataclass(frozen=True)
class Setting:
    """One intervention, or none.

    heads: which heads (`top`/`bottom` of the ranking, `random` drawn with `seed` from
    every head, `other` drawn with `seed` from the heads other than the top n);
    n, strength (C), mode, threshold (conditional), renormalise: as in
    `harness.engine.capture.Intervention` ("restore" sets each head's weight on the cells
    to its ID level from the ranking, `harness.attention.controls`); positions: `reference`
    (the reference cells, moved by `shift`) or `random` (as many random non-reference keys
    per row, drawn with `seed`: the positions control). strength must be finite and >= 0,
    threshold in [0, 1], n an int (ValueError naming the field).

    role: why the setting is scored, which reports read (never the format of its name):
    "baseline", "intervention" (a grid point, or any setting made by hand), or the role of
    the control that made it (`harness.attention.controls`). It is not part of what the
    setting computes: equality, `to_dict` and stage files leave it out.
    """

    heads: str = "none"
    n: int = 0
    strength: float = 0.0
    mode: str = "standard"
    threshold: float = 0.0
    positions: str = "reference"
    shift: int = 0
    seed: int = 0
    renormalise: bool = False
    role: str = field(default="intervention", compare=False)

    def __post_init__(self) -> None:
        if self.heads not in HEAD_CHOICES:
            raise ValueError(f"heads must be one of {', '.join(HEAD_CHOICES)}, got {self.heads!r}")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.positions not in POSITION_CHOICES:
            raise ValueError(
                f"positions must be one of {', '.join(POSITION_CHOICES)}, got {self.positions!r}"
            )
        if isinstance(self.n, bool) or not isinstance(self.n, numbers.Integral) or self.n < 0:
            raise ValueError(f"n (number of heads) must be an int >= 0, got {self.n!r}")
        if self.heads != "none" and self.n < 1:
            raise ValueError(f"n (number of heads) must be >= 1 for heads={self.heads!r}")
        check_parameter("strength (C)", "strength", self.strength)
        check_parameter("threshold", "threshold", self.threshold)

    @property
    def is_baseline(self) -> bool:
        return self.heads == "none"

    @property
    def name(self) -> str:
        """A short, unique, file-name-safe label: `top4-C1-standard`, `random4-C1-s2`."""
        if self.is_baseline:
            return "baseline"
        parts = [
            f"{self.heads}{self.n}",
            *MODES[self.mode].name_parts(self.strength, self.threshold),
        ]
        if self.positions == "random":
            parts.append("randpos")
        if self.shift:
            parts.append(f"shift{self.shift:+d}")
        if self.renormalise:
            parts.append("renorm")
        if self.heads in DRAWN_HEADS or self.positions == "random":
            parts.append(f"s{self.seed}")
        return "-".join(parts)

    @classmethod
    def from_name(cls, name: str) -> Setting:
        """The setting that `name` names (`name` read back), only for reports of stored
        digests, which kept names alone and must still find the controls
        (`harness.attention.controls.roles_of`). Code that made the settings carries them
        as values instead (the dose ladder's `Ladder`). ValueError for a name that no
        setting has."""
        if name == BASELINE.name:
            return BASELINE
        match = _NAME.fullmatch(name)
        numbers_part = _MODE_PART.fullmatch(match["mode"]) if match else None
        try:
            if match is None:
                raise ValueError
            strength = float(numbers_part["strength"]) if numbers_part else 0.0
            threshold = float(numbers_part["threshold"] or 0) if numbers_part else 0.0
            # The mode whose part of a name this is (`Mode.name_parts`).
            mode = next(
                m.name
                for m in MODES.values()
                if "-".join(m.name_parts(strength, threshold)) == match["mode"]
            )
            setting = cls(
                heads=match["heads"],
                n=int(match["n"]),
                strength=strength,
                mode=mode,
                threshold=threshold,
                positions="random" if match["randpos"] else "reference",
                shift=int(match["shift"] or 0),
                seed=int(match["seed"] or 0),
                renormalise=bool(match["renorm"]),
            )
        except (ValueError, StopIteration):
            raise ValueError(f"{name!r} is not the name of a setting") from None
        if setting.name != name:
            raise ValueError(f"{name!r} is not the name of a setting (read as {setting.name!r})")
        return setting

    def to_dict(self) -> dict[str, Any]:
        # Without the role: stage files and the sweep's JSON are keyed by what a setting
        # computes (the same setting scored as a grid point and as a control is one stage).
        values = dataclasses.asdict(self)
        del values["role"]
        return values

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Setting:
        return cls(**values)


# The parts of `Setting.name`, in its order, for `Setting.from_name`: heads and n, the mode's
# part (`Mode.name_parts`: `C1`, `C1-thr0.1`, `knockout`), then the optional suffixes.
_NAME = re.compile(
    r"(?P<heads>[a-z]+?)(?P<n>\d+)-(?P<mode>.+?)(?P<randpos>-randpos)?"
    r"(?:-shift(?P<shift>[+-]\d+))?(?P<renorm>-renorm)?(?:-s(?P<seed>-?\d+))?"
)
_MODE_PART = re.compile(r"C(?P<strength>.+?)(?:-thr(?P<threshold>.+))?")

BASELINE = Setting(role="baseline")
