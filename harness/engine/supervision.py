"""Attention supervision: an auxiliary loss that pulls chosen heads toward a reference mask,
read inside the capture attention function on the training forward itself.

    from harness.engine.supervision import Supervision, supervise
    plan = Supervision(heads, reference, loss="ce")  # bool [layers, heads], bool [batch, L, L]
    with supervise(model, plan) as recorder:
        out = model(**batch)                         # the one training forward, graph kept
    total = out.loss + weight * recorder.loss()      # mean over supervised rows and heads

No second forward and no `output_attentions`: the capture plan carries a reader
(`AttentionPlan.readers`) that, in each supervised layer, gathers the selected heads' weights
at the mask's cells of the supervised rows ([rows, heads, R] for R cells per row at most)
and keeps their graph; other layers only pass through.

The losses, for one supervised row (a query whose mask row has cells) and one head, with a_k
its post-softmax weights and m its mask row:

    ce    sum_k -(m_k / |m|) log a_k     cross-entropy to the mask normalised over its keys
    mass  -log sum_k m_k a_k             negative log of the weight on the mask

`Supervision.loss()` is the mean over every supervised (row, head) pair of every layer.
Cells the layer's attention mask keeps out (a key outside a sliding window) are no cells
there, and a row left without any is not supervised in that layer.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from harness.engine.capture import AttentionPlan, capture_attention
from harness.engine.inference import model_shape
from harness.foundation.supervision_options import LOSSES  # declared once, with the options

# log(0) is -inf, and 0 * -inf a nan in the sum; a weight that underflowed counts as the
# smallest normal float32 instead (its gradient is then 0: that head has no say there).
_SMALLEST = torch.finfo(torch.float32).tiny


def row_losses(weights: torch.Tensor, valid: torch.Tensor, loss: str) -> torch.Tensor:
    """The loss of each row: `weights` float [..., R] gathered at a row's cells, `valid` bool
    [..., R] which of them are cells (a row's cells padded to R); float [...]."""
    weights = weights.float()
    if loss == "mass":
        return -torch.log((weights * valid).sum(-1).clamp_min(_SMALLEST))
    if loss == "ce":
        target = valid.float() / valid.sum(-1, keepdim=True).clamp_min(1)
        return -(target * torch.log(weights.clamp_min(_SMALLEST))).sum(-1)
    raise ValueError(f"'loss' must be one of {', '.join(LOSSES)}, got {loss!r}")


@dataclass
class Supervision:
    """What one training forward supervises: `heads` bool [layers, heads], `reference` bool
    [batch, L, L] (`[b, q, k]`: query q should attend key k; rows without cells are not
    supervised), and the loss (`LOSSES`)."""

    heads: torch.Tensor
    reference: torch.Tensor
    loss: str = "ce"

    def __post_init__(self) -> None:
        if self.loss not in LOSSES:
            raise ValueError(f"'loss' must be one of {', '.join(LOSSES)}, got {self.loss!r}")
        heads, reference = self.heads, self.reference
        if not isinstance(heads, torch.Tensor) or heads.dtype != torch.bool or heads.dim() != 2:
            raise ValueError("Supervision.heads must be a bool tensor [layers, heads]")
        if not bool(heads.any()):
            raise ValueError("Supervision.heads selects no head")
        if reference.dtype != torch.bool or reference.dim() != 3:
            raise ValueError("Supervision.reference must be a bool tensor [batch, L, L]")
        if reference.shape[1] != reference.shape[2]:
            raise ValueError(
                f"Supervision.reference must be [batch, L, L], got {tuple(reference.shape)}"
            )


class SupervisionRecorder:
    """The capture reader: the supervised rows' cells, and the loss summed so far."""

    def __init__(self, plan: Supervision, device):
        self.kind = plan.loss
        self.length = plan.reference.shape[1]
        self.heads = {
            layer: row.nonzero().flatten().to(device)
            for layer, row in enumerate(plan.heads)
            if bool(row.any())
        }
        reference = plan.reference.to(device)
        rows = reference.any(-1).nonzero()  # [N, 2]: (batch row, query) of supervised rows
        self.batch_rows, self.queries = rows[:, 0], rows[:, 1]
        cells = reference[self.batch_rows, self.queries]  # [N, L]
        width = max(int(cells.sum(-1).max()), 1) if len(rows) else 1
        self.keys = cells.to(torch.uint8).topk(width, dim=-1).indices  # [N, R]
        self.valid = cells.gather(-1, self.keys)  # [N, R]
        self.total: torch.Tensor | None = None
        self.count = 0  # (row, head) pairs summed into `total`

    @property
    def rows(self) -> int:
        """Supervised rows of the batch."""
        return int(self.queries.numel())

    def __call__(
        self,
        layer: int,
        weights: torch.Tensor,
        q0: int,
        k0: int,
        mask: torch.Tensor | None = None,
    ) -> None:
        heads = self.heads.get(layer)
        if heads is None or not self.rows:
            return
        q, kv = weights.shape[-2:]
        if q0 != 0 or k0 != 0 or q != self.length:
            # Supervision belongs to a training forward over the whole sequence; a cached
            # decoding step would see a part of its rows.
            raise ValueError(
                f"attention supervision needs one forward over all {self.length} positions "
                f"(no cache), got queries {q0}..{q0 + q - 1}"
            )
        valid = self.valid
        if mask is not None:
            # Only cells the attention mask lets through: a reference outside a sliding
            # window has weight 0 whatever the heads do (as capture's interventions skip it).
            mask = mask[:, 0].expand(weights.shape[0], q, kv)  # a batch of 1 may broadcast
            rows = mask[self.batch_rows, self.queries]  # [N, kv], additive
            valid = valid & (rows.gather(-1, self.keys) > torch.finfo(mask.dtype).min / 2)
        kept = valid.any(-1)  # rows left with a cell in this layer
        if not bool(kept.all()):
            if not bool(kept.any()):
                return
            batch_rows, queries = self.batch_rows[kept], self.queries[kept]
            keys, valid = self.keys[kept], valid[kept]
        else:
            batch_rows, queries, keys = self.batch_rows, self.queries, self.keys
        # [N, h, kv]: the supervised rows of the selected heads (one gather, not a copy of
        # the layer's [b, h, q, k] weights)
        rows = weights[batch_rows[:, None], heads[None, :], queries[:, None]]
        gathered = rows.gather(-1, keys[:, None].expand(-1, len(heads), -1))
        losses = row_losses(gathered, valid[:, None], self.kind)  # [N, h]
        total = losses.sum()
        self.total = total if self.total is None else self.total + total
        self.count += losses.numel()

    def loss(self) -> torch.Tensor:
        """The mean over supervised (row, head) pairs; 0 (no graph) when the batch has none."""
        if self.total is None or not self.count:
            return torch.zeros(())
        return self.total / self.count


def check_heads(heads: torch.Tensor, model) -> None:
    """ValueError when `heads` is not [layers, heads] of `model`."""
    layers, per_layer = model_shape(model)
    if tuple(heads.shape) != (layers, per_layer):
        raise ValueError(
            f"Supervision.heads is {tuple(heads.shape)}, the model has [layers, heads] = "
            f"[{layers}, {per_layer}]"
        )


@contextlib.contextmanager
def supervise(model, plan: Supervision) -> Iterator[SupervisionRecorder]:
    """Run `model` inside the block with the capture attention function reading `plan`'s
    heads; the yielded recorder's `loss()` is the supervision loss of the forward run in it.
    `model` is the bare model (not a DDP wrapper): the wrapper's forward reaches it."""
    check_heads(plan.heads, model)
    device = next(model.parameters()).device
    recorder = SupervisionRecorder(plan, device)
    with capture_attention(model, AttentionPlan(readers=(recorder,))):
        yield recorder
