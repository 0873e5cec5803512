"""rescale: leave the selected heads' weights as they are and scale each selected head's
output (its weights @ values, per row, before the output projection) to that head's norm in
distribution (its `norms` entry), on the rows with cells: the output-scale control of
harness.attention.controls. The pattern is the model's own; only the output's length
changes, its direction kept."""

from harness.engine.modes.base import Mode, ModeArgs


def apply(weights, cells, args: ModeArgs):
    # The pattern is untouched: the same tensor comes back (recorded weights are the model's).
    return weights


def output(values, rows, args: ModeArgs):
    """Each selected row's output [.., d] scaled to length `norms` (its head's), computed in
    float32 and cast back; a row whose output is exactly 0 has no direction to keep and is
    left as it is, and so is every row outside `rows` (another head, a row without cells,
    another row's mode)."""
    import torch

    out = values.float()
    length = out.norm(dim=-1, keepdim=True)
    target = args.norms.float()  # [rows, heads, 1, 1]
    scaled = (out * (target / length.clamp_min(1e-30))).to(values.dtype)
    return torch.where(rows & (length > 0), scaled, values)


MODE = Mode("rescale", apply, reads=("norms",), output=output)
