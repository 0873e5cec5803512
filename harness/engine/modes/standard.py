"""standard: add C to the post-softmax weights at the cells of the selected heads (the
paper's intervention; the rows are not renormalised unless the setting asks)."""

from harness.engine.modes.base import Mode, ModeArgs


def apply(weights, cells, args: ModeArgs):
    # Out of place; outside the cells this adds exactly 0, so every other weight is kept.
    return weights + cells * args.strength.to(weights.dtype)


MODE = Mode("standard", apply, reads=("strength",), reinforces=True)
