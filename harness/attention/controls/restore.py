"""restore: each chosen head's weight on the reference set to its mean in-distribution level
(mode "restore"), the rest of the row renormalised. It gives a head back what it had where
the model works, and no more: a gain that survives it is a repair."""

import dataclasses

from harness.attention.controls.base import Control
from harness.attention.lookup import profile_at, ranked_offset


def restore_setting(chosen):
    """The chosen heads restored to their ID weight on the reference (mode "restore")."""
    if chosen.is_baseline:
        return None
    return dataclasses.replace(chosen, mode="restore", strength=0.0, threshold=0.0)


def restore_levels(ranking, shift: int = 0):
    """float [layers, heads]: each head's mean weight per target row at `ref + shift` on
    the ranking's (ID) instances, the level "restore" gives back: the plain mean weight,
    never a thresholded ranking's count of the weights above its threshold. From the
    ranking's offset profile (plain weights at every offset), or its own per-row scores
    when it was ranked at that shift without a threshold."""
    import torch

    values = profile_at(ranking, shift)
    if values is None and ranked_offset(ranking) == shift and not ranking.source.get("threshold"):
        values = ranking.per_row
    if values is None:
        raise ValueError(
            f"the head ranking has no ID level at ref{shift:+d} (offsets: "
            f"{', '.join(sorted(ranking.offsets)) or 'none'}); rank with that offset"
        )
    return torch.tensor(values, dtype=torch.float32).clamp(0, 1)


def make(chosen, options):
    return [restore_setting(chosen)]


CONTROL = Control(
    "restore",
    make,
    "`*restore` each chosen head's reference weight set to its ID level, the row renormalised",
)
