"""The repair-or-pointer verdict at the grid's chosen setting, and what it reads.

    from harness.attention.verdicts.repair_or_pointer import assess, verdict
    verdict(chosen_gain=..., restore_gain=..., follows={3: follow}, shift_gains={3: ...},
            id_exact=(1.0, 0.98), answer_at_reference=1.0)["verdict"]   # repair/pointer/...
    assess(sweep, instances)["verdict"]         # the same, read from a finished sweep

Why these controls (docs/usage_analysis.md, "Repair or pointer"): on string reversal the
reference key holds the very character to write, so adding C there can hand the model the
answer whether or not it repairs the lookup it learnt. Two controls separate the readings:
- *pointer shift*: the same heads and C at `ref + k`. A repaired lookup has no reason to
  copy what sits k keys away; a pointer does, so the model writes the character at the
  shifted key (`harness.attention.controls.following.pointer_following`);
- *restore*: each chosen head's weight on the reference set to its mean in-distribution
  level (from the ranking instances), the rest of the row renormalised. This gives a head
  back what it had where the model works, and no more: a gain that survives it is a repair.
`answer_at_reference` says how often the reference holds the answer at all, where a pointer
could hand the answer over. The words and thresholds: `harness.attention.verdicts.vocabulary`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from harness.attention.controls.following import answer_at_reference, pointer_following
from harness.attention.controls.pointer import pointer_settings
from harness.attention.controls.restore import restore_setting
from harness.attention.setting import Setting
from harness.attention.verdicts.vocabulary import (
    ID_TOLERANCE,
    INCONCLUSIVE,
    MIN_POINTER_ROWS,
    POINTER,
    POINTER_EXCESS,
    REPAIR,
    REPAIR_OR_POINTER,
)
from harness.foundation.stats import above_zero

VERDICTS = tuple(REPAIR_OR_POINTER)  # the words it may say (`vocabulary.REPAIR_OR_POINTER`)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_gain(name: str, gain: Any) -> None:
    """A paired gain (`harness.foundation.stats.paired_gain`): a mapping with numbers gain, low,
    high."""
    keys = ("gain", "low", "high")
    if not isinstance(gain, Mapping) or not all(_is_number(gain.get(k)) for k in keys):
        raise ValueError(
            f"{name} must be a paired gain with numbers {', '.join(keys)} "
            f"(harness.foundation.stats.paired_gain), got {gain!r}"
        )


def verdict(
    chosen_gain: Mapping[str, float],
    restore_gain: Mapping[str, float] | None,
    follows: Mapping[int, Mapping[str, Any]],
    shift_gains: Mapping[int, Mapping[str, float]],
    id_exact: tuple[float, float] | None,
    answer_at_reference: float | None = None,
) -> dict[str, Any]:
    """*repair*, *pointer* or *inconclusive*, with the reasons and numbers it rests on.

    `chosen_gain`, `restore_gain`, `shift_gains[k]`: paired gains over the baseline on the
    OOD test split (`harness.foundation.stats.paired_gain`: gain, low, high); `follows[k]`:
    `pointer_following` of the shifted setting; `id_exact`: (baseline, chosen) ID exact
    match. The rule (docs/usage_analysis.md):
    - pointer: the chosen setting gains (interval above 0) and a shifted setting makes the
      model write the pointed-at character at least POINTER_EXCESS more often than without
      intervention (on >= MIN_POINTER_ROWS rows);
    - repair: the chosen setting gains (interval above 0), restore gains too (interval
      above 0), no shifted setting is followed, each shifted setting gains less than the
      chosen one (its interval's top under the chosen gain's bottom: the reference itself
      matters), and ID exact match holds (falls by at most ID_TOLERANCE);
    - inconclusive otherwise; the reasons list every condition that failed.

    A gain without its numbers, or an ID pair that is not two shares, is a ValueError naming
    the argument (an empty gain would read as "no gain" and decide the verdict silently).
    """
    _check_inputs(chosen_gain, restore_gain, shift_gains, id_exact)
    reasons: list[str] = []
    followed = {
        k: f["excess"]
        for k, f in follows.items()
        if f.get("excess") is not None
        and f.get("tokens", 0) >= MIN_POINTER_ROWS
        and f["excess"] >= POINTER_EXCESS
    }
    numbers = {
        "chosen_gain": dict(chosen_gain),
        "restore_gain": dict(restore_gain) if restore_gain else None,
        "follows": {str(k): dict(v) for k, v in follows.items()},
        "shift_gains": {str(k): dict(v) for k, v in shift_gains.items()},
        "id_exact": list(id_exact) if id_exact else None,
        "answer_at_reference": answer_at_reference,
        "rule": {
            "pointer_excess": POINTER_EXCESS,
            "min_pointer_tokens": MIN_POINTER_ROWS,
            "id_tolerance": ID_TOLERANCE,
        },
    }
    if followed:
        for k, excess in sorted(followed.items()):
            reasons.append(
                f"at ref{k:+d} the model writes the pointed-at character {excess:+.2f} more "
                "often than without intervention"
            )
        if above_zero(chosen_gain):
            return {"verdict": POINTER, "reasons": reasons, "numbers": numbers}
        # A pointer verdict says the gain comes from handing the answer over: with no
        # gain there is nothing to explain.
        reasons.append("but the chosen setting's gain is not above 0 (interval)")
        return {"verdict": INCONCLUSIVE, "reasons": reasons, "numbers": numbers}
    reasons = _not_repaired(
        chosen_gain, restore_gain, follows, shift_gains, id_exact, answer_at_reference
    )
    if reasons:
        return {"verdict": INCONCLUSIVE, "reasons": reasons, "numbers": numbers}
    return {
        "verdict": REPAIR,
        "reasons": ["the gain survives restore, shifted pointers are not followed, ID holds"],
        "numbers": numbers,
    }


def _check_inputs(chosen_gain, restore_gain, shift_gains, id_exact) -> None:
    """ValueError naming a gain without its numbers, or an ID pair that is not two shares."""
    _check_gain("chosen_gain", chosen_gain)
    if restore_gain is not None:
        _check_gain("restore_gain", restore_gain)
    for k, gain in shift_gains.items():
        _check_gain(f"shift_gains[{k}]", gain)
    if id_exact is not None and (
        len(id_exact) != 2 or not all(_is_number(x) and 0 <= x <= 1 for x in id_exact)
    ):
        raise ValueError(
            f"id_exact must be (baseline, chosen) exact match, two shares in [0, 1], got "
            f"{id_exact!r}"
        )


def _not_repaired(
    chosen_gain, restore_gain, follows, shift_gains, id_exact, answer_at_reference
) -> list[str]:
    """Every condition of a repair that fails, with no shifted setting followed ([]: a
    repair)."""
    reasons = []
    if not above_zero(chosen_gain):
        reasons.append("the chosen setting's gain is not above 0 (interval)")
    if not above_zero(restore_gain):
        reasons.append("restoring the heads' ID weight gives no gain (interval)")
    for k, gain in sorted(shift_gains.items()):
        if not (math.isfinite(gain.get("high", math.nan)) and gain["high"] < chosen_gain["low"]):
            reasons.append(f"the push at ref{k:+d} gains about as much as at the reference")
    if id_exact is None:
        reasons.append("ID exact match under the chosen setting was not measured")
    elif id_exact[1] < id_exact[0] - ID_TOLERANCE:
        reasons.append(f"ID exact match falls {id_exact[0]:.3f} -> {id_exact[1]:.3f}")
    if not any(f.get("tokens", 0) >= MIN_POINTER_ROWS for f in follows.values()):
        # No measurable pointer rows: only a task whose reference is not the answer may
        # still pass (there, a pointer cannot hand the answer over).
        if answer_at_reference is None or answer_at_reference >= 0.5:
            reasons.append("no row could measure pointer following")
    return reasons


def assess(sweep: Mapping[str, Any], instances: Sequence[Any], metric: str | None = None):
    """The verdict of a finished sweep (`harness.attention.sweep.run_sweep`, whose reported
    settings include `control_settings`' pointer shifts and restore) on the OOD test
    `instances` it scored: the numbers of `verdict`, read from the sweep's records."""
    metric = metric or sweep["metric"]
    chosen = Setting.from_dict(sweep["chosen"])
    records = sweep["records"]["test"]
    gains = sweep["test_gains"]
    baseline = records["baseline"]
    follows, shift_gains = {}, {}
    for setting in pointer_settings(chosen):
        if setting.name in records:
            # The push moved k keys past the chosen cells delivers the character at ref + k:
            # under --shift s the heads read ref + s to get ref's character (a previous-token
            # head carried it there), so ref + s + k carries the one at ref + k.
            k = setting.shift - chosen.shift
            follows[k] = pointer_following(instances, records[setting.name], k, baseline)
            shift_gains[k] = gains[setting.name][metric]
    restore = restore_setting(chosen)
    restore_gain = gains[restore.name][metric] if restore and restore.name in gains else None
    id_exact = None
    if "id" in sweep and chosen.name in sweep["id"]:
        id_exact = (sweep["id"]["baseline"]["exact_match"], sweep["id"][chosen.name]["exact_match"])
    out = verdict(
        gains[chosen.name][metric],
        restore_gain,
        follows,
        shift_gains,
        id_exact,
        answer_at_reference(instances),
    )
    out["metric"] = metric
    return out
