"""restore: set each selected head's mass on the cells to its level (its ID level, the
restore control of harness.attention.controls), the rest of the row scaled to keep the sum."""

from harness.engine.modes.base import Mode, ModeArgs


def apply(weights, cells, args: ModeArgs):
    """Each selected row's mass on `cells` set to `level` (its head's level), spread as the
    weights already were (evenly where they were all 0), and the rest of the row scaled by
    (1 - level) / (its actual sum) so the row still sums to 1. Computed in float32 and
    divided by the sum of the other cells as they are, not by 1 - mass: in bf16 a mass of
    0.99 left rows summing to 0.94 that way, and one of 0.999 was not restored at all. A row
    with nothing off the cells (all its mass already there) is left as it is: there is
    nothing to move; so is a row without cells (another head, another row's mode)."""
    import torch

    w = weights.float()
    level = args.levels.float()
    mass = (w * cells).sum(-1, keepdim=True)
    rest_sum = (w * ~cells).sum(-1, keepdim=True)
    count = cells.sum(-1, keepdim=True).clamp_min(1)
    on = torch.where(mass > 0, w * (level / mass.clamp_min(1e-30)), level / count)
    rest = w * ((1 - level) / rest_sum.clamp_min(1e-30))
    moved = cells.any(-1, keepdim=True) & (rest_sum > 0)
    out = torch.where(cells, on, rest).to(weights.dtype)
    return torch.where(moved, out, weights)


MODE = Mode("restore", apply, reads=("levels",))
