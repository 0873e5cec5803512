"""knockout: set the weights at the cells of the selected heads to 0 (the control that
removes what the chosen heads read at the reference)."""

from harness.engine.modes.base import Mode, ModeArgs


def apply(weights, cells, args: ModeArgs):
    return weights.masked_fill(cells, 0.0)


MODE = Mode("knockout", apply)
