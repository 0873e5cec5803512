"""conditional: add C only where the weight already exceeds the threshold (the paper's
conditional intervention: reinforce what the head already attends)."""

from harness.engine.modes.base import Mode, ModeArgs


def apply(weights, cells, args: ModeArgs):
    # The threshold is float32: a half-precision weight is compared exactly, not against the
    # threshold rounded to its own precision.
    above = cells & (weights > args.threshold)
    return weights + above * args.strength.to(weights.dtype)


MODE = Mode("conditional", apply, reads=("strength", "threshold"), reinforces=True)
