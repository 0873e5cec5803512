"""The intervention modes, one module each, listed once here.

    from harness.engine.modes import MODES, INTERVENTION_MODES
    MODES["conditional"].reads        # ("strength", "threshold")

    standard     add C to the post-softmax weights at the cells of the selected heads
    conditional  the same, only where the weight already exceeds a threshold
    knockout     set those weights to 0
    restore      set each selected head's mass on the cells to its level, renormalised
    rescale      leave the weights; scale each selected head's output to its ID norm

A mode is a `Mode` value (`harness.engine.modes.base`): its name, the parameters it reads
(checked by one set of rules, `PARAMETERS`), whether the sweep may reinforce with it, and
how it changes a row of weights (and, for a mode that changes what a head writes, its
output: `Mode.output`). Capture (`harness.engine.capture`), the sweep's settings
and their names read it from here; a new mode is one module and one line in `MODES`.
Nothing here imports torch (the modules import it inside `apply`): `attentionspan reproduce
--help` reads the names without loading it.
"""

from harness.engine.modes import conditional, knockout, rescale, restore, standard
from harness.engine.modes.base import (
    HEAD_PARAMETERS,
    PARAMETERS,
    Mode,
    ModeArgs,
    check_parameter,
)

MODES: dict[str, Mode] = {
    m.name: m for m in (standard.MODE, conditional.MODE, knockout.MODE, restore.MODE, rescale.MODE)
}
INTERVENTION_MODES = tuple(MODES)
SWEEP_MODES = tuple(name for name, mode in MODES.items() if mode.reinforces)

__all__ = [
    "HEAD_PARAMETERS",
    "INTERVENTION_MODES",
    "MODES",
    "PARAMETERS",
    "SWEEP_MODES",
    "Mode",
    "ModeArgs",
    "check_parameter",
]
