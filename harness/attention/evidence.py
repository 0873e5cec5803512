"""What counts as evidence from one dose of the ladder: when a shifted push is *followed*,
and the two thresholds that say it. The pointer control names it in the numbers it hands
the calibrated verdict (`controls/pointer.py`, a `Reading`), and the verdicts read it
(`verdicts/calibrated.py`, `verdicts/repair_or_pointer.py`); it sits below both, so a
control never imports a verdict. Plain data in, plain data out. The verdicts' vocabulary
lists these thresholds with its own (`verdicts.vocabulary`), where reports import them.

    from harness.attention.controls import at_dose
    from harness.attention.evidence import followed
    followed(at_dose(dose_entry, "pointer"))    # {"+3": 0.41}: the shifted pushes followed
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

POINTER_EXCESS = 0.2  # a shifted push is "followed": the model writes what it points at this
# much more often than without intervention, on the same rows
MIN_POINTER_ROWS = 20  # rows a following rate needs before it counts


def finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def followed(pushes: Mapping[str, Any] | None) -> dict[str, float]:
    """{pointer shift: following gain} of the shifted pushes the model follows at a dose
    (`pushes`: what the pointer control wrote in that dose's entry; a following gain of at
    least POINTER_EXCESS on at least MIN_POINTER_ROWS rows); {} without them."""
    out = {}
    for k, pointer in (pushes or {}).items():
        follow = pointer.get("following") or {}
        gain = (follow.get("gain") or {}).get("gain")
        if follow.get("rows", 0) >= MIN_POINTER_ROWS and finite(gain) and gain >= POINTER_EXCESS:
            out[k] = gain
    return out
