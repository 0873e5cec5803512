"""What counts as evidence from one dose of the ladder, read by the rules here and named by
the controls that produce it (`harness.attention.controls`, whose `Reading`s hand it to the
calibrated verdict's numbers). Plain data in, plain data out; no control is imported here,
so the controls may import it.

    from harness.attention.verdicts.evidence import followed
    followed(dose_entry)        # {"+3": 0.41}: the shifted pushes the model follows there
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from harness.attention.verdicts.vocabulary import MIN_POINTER_ROWS, POINTER_EXCESS


def finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def followed(dose: Mapping[str, Any] | None) -> dict[str, float]:
    """{pointer shift: following gain} of the shifted pushes the model follows at a dose
    (a following gain of at least POINTER_EXCESS on at least MIN_POINTER_ROWS rows); {}
    without a dose."""
    out = {}
    for k, pointer in ((dose or {}).get("pointers") or {}).items():
        follow = pointer.get("following") or {}
        gain = (follow.get("gain") or {}).get("gain")
        if follow.get("rows", 0) >= MIN_POINTER_ROWS and finite(gain) and gain >= POINTER_EXCESS:
            out[k] = gain
    return out
