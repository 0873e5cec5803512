"""What a mode is, and the one set of rules for the parameters modes read.

A mode is a `Mode` value: its name, the parameters it reads (of `PARAMETERS`), whether the
sweep may reinforce with it, and `apply(weights, cells, args)`, which changes the post-softmax
weights at `cells` (bool, the selected heads' cells of the rows in this mode) and nowhere
else; a mode that changes what a head writes rather than where it looks (`rescale`) also
gives `output(output, rows, args)`, which changes the selected heads' output (weights @
values, per head, before the output projection) on the rows with cells. This module imports
no torch: `attentionspan reproduce --help` reads the mode names.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# The rule each parameter obeys wherever it is given (an Intervention, a Setting, a grid):
# nan compares False with everything, so a bare `< 0` check would let it through.
PARAMETERS: dict[str, tuple[str, Callable[[float], bool]]] = {
    "strength": ("finite and >= 0", lambda v: math.isfinite(v) and v >= 0),
    "threshold": ("finite and in [0, 1]", lambda v: math.isfinite(v) and 0 <= v <= 1),
    "levels": ("finite and in [0, 1]", lambda v: math.isfinite(v) and 0 <= v <= 1),
    "norms": ("finite and >= 0", lambda v: math.isfinite(v) and v >= 0),
}
# The parameters given per head ([layers, heads], or per row [batch, layers, heads]) rather
# than per row: an Intervention holds each only where a mode of its rows reads it.
HEAD_PARAMETERS = ("levels", "norms")


def check_parameter(field: str, parameter: str, value: Any) -> None:
    """Raise ValueError naming `field` unless every value (a number, a sequence or a tensor)
    obeys the rule of `parameter` (a key of PARAMETERS)."""
    rule, ok = PARAMETERS[parameter]
    values = _numbers(value.tolist() if hasattr(value, "tolist") else value)
    if not all(ok(v) for v in values):
        shown = value if len(values) == 1 else [v for v in values if not ok(v)][:5]
        raise ValueError(f"{field} must be {rule}, got {shown}")


def _numbers(value: Any) -> list[float]:
    if isinstance(value, (list, tuple)):
        return [v for item in value for v in _numbers(item)]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"expected a number, got {value!r}")
    return [float(value)]


@dataclass(frozen=True)
class ModeArgs:
    """A mode's parameters for one layer, shaped to broadcast over weights [batch, heads, q,
    kv]: strength and threshold float32 [rows, 1, 1, 1], levels and norms float32 [rows,
    heads, 1, 1] (None when no row gives them). `rows` is the batch, or 1 for one setting on
    every row."""

    strength: Any = None
    threshold: Any = None
    levels: Any = None
    norms: Any = None


@dataclass(frozen=True)
class Mode:
    """One intervention mode (see the module docstring)."""

    name: str
    # (weights [b, h, q, kv], cells bool [b, h, q, kv], args: ModeArgs) -> new weights; the
    # weights outside `cells` must come back bit for bit (other rows carry other modes).
    apply: Callable[[Any, Any, ModeArgs], Any]
    reads: tuple[str, ...] = ()  # of PARAMETERS
    reinforces: bool = False  # the sweep's grid may use it (it adds weight)
    # (output [b, h, q, d], rows bool [b, h, q, 1], args: ModeArgs) -> new output, or None
    # for a mode that changes the weights alone; `rows` are the selected heads' rows that
    # have cells, and every other row must come back bit for bit.
    output: Callable[[Any, Any, ModeArgs], Any] | None = None

    def __post_init__(self) -> None:
        unknown = [p for p in self.reads if p not in PARAMETERS]
        if unknown:
            raise ValueError(f"mode {self.name!r} reads unknown parameters {unknown}")

    def validate(self, owner: str, **given: Any) -> None:
        """The parameters this mode reads must be given (their values obey PARAMETERS,
        which the owner checks for every value it holds, read or not)."""
        for parameter in self.reads:
            if given.get(parameter) is None:
                raise ValueError(f"{owner}.{parameter} is required with mode {self.name!r}")

    def name_parts(self, strength: float, threshold: float) -> list[str]:
        """This mode's part of a setting's name: `C1`, `C1-thr0.1`, or the mode's own name
        when it reads no strength (`knockout`, `restore`)."""
        if "strength" not in self.reads:
            return [self.name]
        parts = [f"C{strength:g}"]
        if "threshold" in self.reads:
            parts.append(f"thr{threshold:g}")
        return parts
