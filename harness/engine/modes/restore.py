"""restore: set each selected head's mass on the cells to its level (its ID level, the
restore control of harness.attention.controls), the rest of the row scaled to keep the sum."""

from harness.engine.modes.base import Mode, ModeArgs


def apply(weights, cells, args: ModeArgs):
    """Each selected row's mass on `cells` set to `level` (its head's level), spread as the
    weights already were (evenly where they were all 0), and the rest of the row scaled by
    (1 - level) / (1 - old mass) so the row still sums to 1. A row whose every key is a
    cell (all its mass already there) is left as it is: there is nothing to move; so is a
    row without cells (another head, another row's mode)."""
    import torch

    level = args.levels.to(weights.dtype)
    mass = (weights * cells).sum(-1, keepdim=True)
    count = cells.sum(-1, keepdim=True).clamp_min(1)
    on = torch.where(mass > 0, weights * (level / mass.clamp_min(1e-30)), level / count)
    rest = weights * ((1 - level) / (1 - mass).clamp_min(1e-30))
    moved = cells.any(-1, keepdim=True) & (mass < 1 - 1e-6)
    return torch.where(moved, torch.where(cells, on, rest), weights)


MODE = Mode("restore", apply, reads=("levels",))
