"""Reference cells and the per-row mass recorded on them, for capture
(`harness.engine.capture`): a bool [batch, L, L] mask as per-row key indices (`Cells`), the
mask sliced to one forward's rows and keys (`slice_rows`), and one mask's mass recorded row
by row (`Mass`). Their own module so that capture stays one module's size."""

from __future__ import annotations

import torch


class Cells:
    """A bool [batch, L, L] mask as, per row, the indices of its True keys (padded to the
    widest row): gathering a few cells costs [b, h, q, R], never another [b, h, q, k]."""

    def __init__(self, mask: torch.Tensor, device: torch.device):
        mask = mask.to(device)
        self.length = mask.shape[1]
        self.has = mask.any(-1)  # [B, L]
        width = max(int(mask.sum(-1).max()), 1) if mask.numel() else 1
        width = min(width, self.length) if self.length else 1
        if self.length:
            self.index = mask.to(torch.uint8).topk(width, dim=-1).indices  # [B, L, R]
            self.valid = mask.gather(-1, self.index)
        else:
            self.index = torch.zeros(mask.shape[0], 0, 1, dtype=torch.long, device=device)
            self.valid = torch.zeros(mask.shape[0], 0, 1, dtype=torch.bool, device=device)

    def rows(self, q0: int, q1: int, k0: int, kv: int):
        """(local key index [b, q, R], valid [b, q, R]) for query rows q0..q1-1 whose keys are
        the absolute positions k0..k0+kv-1; cells outside those keys are invalid (a masked
        key needs no check here: its weight is exactly 0)."""
        stop = min(q1, self.length)
        batch = self.index.shape[0]
        width = self.index.shape[-1]
        if stop == q1:
            local = self.index[:, q0:q1] - k0
            valid = self.valid[:, q0:q1] & (local >= 0) & (local < kv)
            return local.clamp(0, max(kv - 1, 0)), valid
        index = torch.zeros(batch, q1 - q0, width, dtype=torch.long, device=self.index.device)
        valid = torch.zeros(batch, q1 - q0, width, dtype=torch.bool, device=self.index.device)
        if stop > q0:
            local = self.index[:, q0:stop] - k0
            valid[:, : stop - q0] = self.valid[:, q0:stop] & (local >= 0) & (local < kv)
            index[:, : stop - q0] = local.clamp(0, max(kv - 1, 0))
        return index, valid


class Mass:
    """One mask whose per-row, per-head mass is recorded: its cells (gathered in a prefill),
    its dense form (sliced while decoding), and the rows recorded so far."""

    def __init__(self, mask: torch.Tensor, threshold: float, num_layers, num_heads, device):
        self.cells = Cells(mask, device)
        self.dense = mask.to(device)
        self.threshold = float(threshold)
        batch, length = mask.shape[:2]
        self.rows = torch.full((batch, length, num_layers, num_heads), float("nan"), device=device)

    def add(self, layer: int, weights: torch.Tensor, q0: int, k0: int) -> None:
        """Record the mass of query rows q0.. on this mask's cells (rows past it: none)."""
        batch, heads, q, kv = weights.shape
        stop = min(q0 + q, self.rows.shape[1])
        if stop <= q0:
            return
        # Weights on masked keys are exactly 0, so the mass needs no mask of its own.
        if q <= DENSE_ROWS:  # decoding: a slice of the dense mask is fewer operations
            cells = slice_rows(self.dense, q0, q, k0, kv)[:, None]
            mass = (above(weights, self.threshold) * cells).float().sum(-1)  # [b, h, q]
        else:  # prefill: gather the few reference cells, no second [b, h, q, k] tensor
            index, valid = self.cells.rows(q0, q0 + q, k0, kv)
            gathered = weights.gather(-1, index[:, None].expand(-1, heads, -1, -1))
            mass = (above(gathered, self.threshold).float() * valid[:, None]).sum(-1)
        has = self.cells.has[:, q0:stop, None]  # [b, q, 1]
        rows = mass[:, :, : stop - q0].transpose(1, 2)  # [b, q, h]
        current = self.rows[:, q0:stop, layer]
        self.rows[:, q0:stop, layer] = torch.where(has, rows, current)


def above(weights: torch.Tensor, threshold: float) -> torch.Tensor:
    """The weights that count: all, or only those above a threshold (the authors' variant)."""
    return weights if threshold <= 0 else weights * (weights > threshold)


DENSE_ROWS = 16  # up to this many query rows, record from dense mask slices


def slice_rows(mask: torch.Tensor, q0: int, q: int, k0: int, kv: int) -> torch.Tensor:
    """mask[:, q0:q0+q, k0:k0+kv], zero past the mask's length (generation running on)."""
    length = mask.shape[1]
    if q0 + q <= length and k0 + kv <= length:
        return mask[:, q0 : q0 + q, k0 : k0 + kv]
    out = mask.new_zeros(mask.shape[0], q, kv)
    qs, ks = min(q0 + q, length), min(k0 + kv, length)
    if qs > q0 and ks > k0:
        out[:, : qs - q0, : ks - k0] = mask[:, q0:qs, k0:ks]
    return out
