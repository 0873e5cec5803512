"""The supervision study's verdict on one task, by fixed rules, from plain values.

    from harness.attention.verdicts.supervision import study_verdict
    study_verdict(chosen="w1", metric="partial_acc", gain=..., versus_controls={...},
                  mass_gain=..., on_reference=0.2, control_roles={...})["verdict"]

The study (`harness.pipeline.supervision_study`) pools its numbers over seeds
(`harness.pipeline.supervision_stats`) and hands them here; gains are in the shape of
`harness.foundation.stats.paired_gain` (gain, low, high; a pooled gain adds `seeds`, each
seed run's gain). The words, what each rules out, and ON_REFERENCE:
`harness.attention.verdicts.vocabulary`.

The rules (docs/usage_analysis.md, "Does supervised attention generalise"), read on the
arm the ladder chose on OOD validation, its gain on OOD test (`metric`):
1. the gain's interval lies above 0:
   - a control it does not beat (the chosen arm's paired gain over the control not above
     0) that pulls no head to the reference (the wrong mask, or the extra steps): "not
     specific to the reference", naming those controls (whatever the seeds say: such a
     control helping as much explains the gain without attending right);
   - else, random heads pulled to the reference gain as much, and every seed run gains:
     "the reference, not these heads": attending to the reference helps, whichever heads
     are made to (the wrong mask and the extra steps gain less);
   - else, every seed run gains: "supervision generalises";
   - else (some seeds only): "inconclusive";
2. no such gain, and on at least ON_REFERENCE of the chosen arm's wrong OOD instances the
   supervised heads looked at the reference as much as in distribution (the diagnosis'
   on_reference share): "attention is not the bottleneck";
3. no gain, and the supervised heads' OOD reference mass did not rise over the baseline's
   (its interval not above 0): "supervision did not take";
4. otherwise "inconclusive": the mass rose, but neither to the ID level on most errors nor
   into a gain.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.attention.verdicts.vocabulary import (
    DID_NOT_TAKE,
    GENERALISES,
    INCONCLUSIVE,
    NOT_BOTTLENECK,
    NOT_SPECIFIC,
    ON_REFERENCE,
    REFERENCE_NOT_HEADS,
    SUPERVISION,
)
from harness.foundation.stats import above_zero, below_zero, format_gain

VERDICTS = tuple(SUPERVISION)  # the words it may say (`vocabulary.SUPERVISION`)
# What each verdict rules out (and what it does not), written beside it in every report.
RULES_OUT = {word: v.rules_out for word, v in SUPERVISION.items()}
# The control role whose heads are pulled to the reference too: it questions the heads,
# not the reference (`harness.pipeline.supervision_settings.CONTROL_ROLES`).
RANDOM_HEADS = "random_heads"


def study_verdict(
    *,
    chosen: str,
    metric: str,
    gain: Mapping[str, Any],
    versus_controls: Mapping[str, Mapping[str, Any]],
    mass_gain: Mapping[str, Any],
    on_reference: float | None,
    control_roles: Mapping[str, str],
) -> dict[str, Any]:
    """The verdict of one task (module docstring), with the numbers it read, the reason
    in words and what it rules out. `gain`: the chosen arm's pooled OOD gain over the
    baseline; `versus_controls`: {control: the chosen arm's pooled gain over it}, in the
    order reports list them; `mass_gain`: the supervised heads' OOD reference mass over
    the baseline's; `on_reference`: the share of the chosen arm's wrong OOD instances whose
    heads looked at the reference as in distribution (None: not measured);
    `control_roles`: {control: its role}."""
    per_seed = [g for g in gain.get("seeds", []) if g is not None]
    versus = dict(versus_controls)
    numbers = {
        "chosen": chosen,
        "metric": metric,
        "gain": gain,
        "versus_controls": versus,
        "mass_gain": mass_gain,
        "on_reference": on_reference,
    }
    said = f"{chosen}'s OOD {metric} gain {format_gain(gain)} points"
    if above_zero(gain):
        verdict, reason = _with_gain(said, versus, per_seed, control_roles)
    else:
        verdict, reason = _without_gain(said, gain, mass_gain, on_reference)
    return {
        "verdict": verdict,
        "reason": reason,
        "rules_out": RULES_OUT[verdict],
        "numbers": numbers,
    }


def _with_gain(said: str, versus, per_seed, control_roles) -> tuple[str, str]:
    """Rule 1 (the gain's interval lies above 0): (verdict, reason)."""
    unbeaten = [name for name, d in versus.items() if not above_zero(d)]
    # random heads pulled to the reference attend right too: they question the heads
    elsewhere = [name for name in unbeaten if control_roles.get(name) != RANDOM_HEADS]
    every_seed = bool(per_seed) and min(per_seed) > 0

    def listed(names) -> str:  # "wrong3-w1 (+10.2 [+8.8, +11.6]), ..."
        return ", ".join(f"{name} ({format_gain(versus[name])})" for name in names)

    if elsewhere:
        return NOT_SPECIFIC, f"{said}, but not above {listed(elsewhere)}"
    if unbeaten and every_seed:
        beaten = [name for name in versus if name not in unbeaten]
        return REFERENCE_NOT_HEADS, (
            f"{said}, in every seed run, above {listed(beaten)}, but not above {listed(unbeaten)}"
        )
    if not every_seed:
        above = "above each control" if not unbeaten else "not above " + ", ".join(unbeaten)
        return INCONCLUSIVE, f"{said}, {above}, but not in every seed run ({_seeds(per_seed)})"
    return GENERALISES, f"{said}, in every seed run, above each control"


def _without_gain(said: str, gain, mass_gain, on_reference) -> tuple[str, str]:
    """Rules 2 to 4 (no gain above 0): (verdict, reason)."""
    hurt = " (a loss)" if below_zero(gain) else ""
    if on_reference is not None and on_reference >= ON_REFERENCE:
        return NOT_BOTTLENECK, (
            f"{said}{hurt}, while on {on_reference:.2f} of its wrong OOD instances the "
            "supervised heads looked at the reference as much as in distribution"
        )
    if not above_zero(mass_gain):
        return DID_NOT_TAKE, (
            f"{said}{hurt}; the supervised heads' OOD reference mass moved "
            f"{format_gain(mass_gain)} points over the baseline's"
        )
    shown = "n/a" if on_reference is None else f"{on_reference:.2f}"
    return INCONCLUSIVE, (
        f"{said}{hurt}; the heads' OOD reference mass rose {format_gain(mass_gain)} "
        f"points, yet they looked there as in distribution on {shown} of the wrong "
        "instances"
    )


def _seeds(values: Sequence[float]) -> str:
    return "per seed " + ", ".join(f"{v * 100:+.1f}" for v in values) if values else "none"
