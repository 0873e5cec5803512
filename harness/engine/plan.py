"""What one capture context records and changes, checked as it is made: `AttentionPlan`
(the reference mask, what to record), `Intervention` (which heads' weights change, and how)
and `Reference` (a named mask whose mass is recorded). `harness.engine.capture`'s docstring
is their API; capture runs them.

    plan = AttentionPlan(reference=ref, intervention=Intervention(heads, strength=0.5))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from harness.engine.modes import HEAD_PARAMETERS, MODES, PARAMETERS, check_parameter


@dataclass
class Intervention:
    """Changes to post-softmax weights of selected heads (see the module docstring).

    One setting for the whole batch (heads [layers, heads], scalar strength, one mode), or
    one per row, as nnsight batches its invokes: heads [batch, layers, heads] and `strength`,
    `threshold` a [batch] tensor, `mode` and `renormalise` a sequence of one per row,
    `levels` and `norms` [batch, layers, heads] (or [layers, heads] for every row). Capture
    runs both the same way: one setting is one row that every row of the batch shares.
    """

    heads: torch.Tensor
    strength: float | torch.Tensor = 1.0
    mode: str | Sequence[str] = "standard"
    threshold: float | torch.Tensor = 0.0
    renormalise: bool | Sequence[bool] = False
    prefill: bool = False
    positions: torch.Tensor | None = None
    levels: torch.Tensor | None = None  # read by mode "restore": in [0, 1] per head
    norms: torch.Tensor | None = None  # read by mode "rescale": >= 0 per head (ID output norm)

    def __post_init__(self) -> None:
        modes = [self.mode] if isinstance(self.mode, str) else list(self.mode)
        bad = [m for m in modes if m not in MODES]
        if bad or not modes:
            raise ValueError(f"Intervention.mode must be one of {tuple(MODES)}, got {self.mode!r}")
        self.heads = torch.as_tensor(self.heads)
        if self.heads.dim() not in (2, 3) or self.heads.dtype != torch.bool:
            raise ValueError(
                f"Intervention.heads must be a bool tensor [layers, heads] or [batch, layers, "
                f"heads], got {self.heads.dtype} {tuple(self.heads.shape)}"
            )
        if self.per_row:
            rows = self.heads.shape[0]
            self.mode = tuple(modes) if len(modes) > 1 else tuple(modes) * rows
            self.strength = _per_row("strength", self.strength, rows, torch.float32)
            self.threshold = _per_row("threshold", self.threshold, rows, torch.float32)
            self.renormalise = _per_row("renormalise", self.renormalise, rows, torch.bool)
            if len(self.mode) != rows:
                raise ValueError(f"Intervention.mode has {len(self.mode)} rows, heads {rows}")
        elif not isinstance(self.mode, str):
            raise ValueError("Intervention.mode is one string unless heads are given per row")
        check_parameter("Intervention.strength", "strength", self.strength)
        check_parameter("Intervention.threshold", "threshold", self.threshold)
        for name in HEAD_PARAMETERS:
            setattr(self, name, self._per_head(name, getattr(self, name)))
        used = [MODES[m] for m in dict.fromkeys(modes)]
        given = {p: getattr(self, p) for p in ("strength", "threshold", *HEAD_PARAMETERS)}
        for mode in used:
            mode.validate("Intervention", **given)
        for name in HEAD_PARAMETERS:
            readers = [m.name for m in MODES.values() if name in m.reads]
            if getattr(self, name) is not None and not any(m.name in readers for m in used):
                raise ValueError(
                    f"Intervention.{name} is required with mode {readers} and only there"
                )
        if self.positions is not None:
            _check_square_bool("Intervention.positions", self.positions)

    def _per_head(self, name: str, value):
        """A per-head parameter (`HEAD_PARAMETERS`) as float32 [layers, heads] (or, per row,
        [batch, layers, heads]), its values checked by its rule; None stays None."""
        if value is None:
            return None
        try:
            value = torch.as_tensor(value, dtype=torch.float32)
        except (TypeError, ValueError, RuntimeError):  # levels="high": a TypeError before
            rule = PARAMETERS[name][0]
            raise ValueError(
                f"Intervention.{name} must be a tensor of numbers {rule} [layers, heads], "
                f"got {value!r}"
            ) from None
        shapes = {tuple(self.heads.shape), tuple(self.heads.shape[-2:])}
        if tuple(value.shape) not in shapes:
            wanted = "[batch, layers, heads] or " if self.per_row else ""
            raise ValueError(
                f"Intervention.{name} must be {wanted}[layers, heads] = "
                f"{tuple(self.heads.shape)}, got {tuple(value.shape)}"
            )
        check_parameter(f"Intervention.{name}", name, value)
        return value

    @property
    def per_row(self) -> bool:
        """One setting per batch row (heads [batch, layers, heads])."""
        return self.heads.dim() == 3


def _per_row(name: str, value, rows: int, dtype) -> torch.Tensor:
    """A scalar broadcast to [rows], or a sequence / tensor of exactly `rows` values."""
    out = torch.as_tensor(value, dtype=dtype)
    if out.dim() == 0:
        return out.expand(rows).clone()
    if out.shape != (rows,):
        raise ValueError(f"Intervention.{name} must have one value per row ({rows})")
    return out


@dataclass
class Reference:
    """A named mask whose mass is recorded (`AttentionPlan.references`): per row and head,
    the post-softmax weight on its cells, counting only weights above `threshold`."""

    mask: torch.Tensor
    threshold: float = 0.0

    def __post_init__(self) -> None:
        _check_square_bool("Reference.mask", self.mask)
        if not 0 <= self.threshold < 1:
            raise ValueError(f"Reference.threshold must be in [0, 1), got {self.threshold}")


@dataclass
class AttentionPlan:
    """What to record and change during the forward passes of one batch."""

    reference: torch.Tensor | None = None
    head_mass: bool | None = None
    rollout: bool = False
    patterns: Sequence[int] = ()
    intervention: Intervention | None = None
    references: dict[str, torch.Tensor | Reference] = field(default_factory=dict)
    # Callables reader(layer, weights, q0, k0, mask) given the weights the model uses and its
    # attention mask, graph kept: training's attention supervision (engine.supervision).
    readers: Sequence[Any] = ()
    # bool [batch, L]: the rows whose per-head output norm (weights @ values, before the
    # output projection) is recorded (`AttentionRecord.output_norms`): a head's ID norm
    output_rows: torch.Tensor | None = None

    def __post_init__(self) -> None:
        if self.reference is not None:
            _check_square_bool("AttentionPlan.reference", self.reference)
        self.references = {
            str(name): ref if isinstance(ref, Reference) else Reference(ref)
            for name, ref in self.references.items()
        }
        if self.head_mass is None:
            self.head_mass = self.reference is not None
        if self.head_mass and self.reference is None:
            raise ValueError("AttentionPlan.head_mass=True needs a reference mask")
        self.patterns = tuple(int(b) for b in self.patterns)
        rows = self.output_rows
        if rows is not None and (
            not isinstance(rows, torch.Tensor) or rows.dtype != torch.bool or rows.dim() != 2
        ):
            raise ValueError("AttentionPlan.output_rows must be a bool tensor [batch, L]")
        iv = self.intervention
        if iv is not None and iv.positions is None and self.reference is None:
            raise ValueError("an Intervention needs AttentionPlan.reference or its own positions")
        if iv is not None and iv.positions is not None and self.reference is not None:
            if iv.positions.shape[0] != self.reference.shape[0]:
                raise ValueError(
                    f"Intervention.positions has batch {iv.positions.shape[0]}, "
                    f"the reference {self.reference.shape[0]}"
                )


def _check_square_bool(name: str, mask: torch.Tensor) -> None:
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or mask.dim() != 3:
        raise ValueError(f"{name} must be a bool tensor [batch, L, L]")
    if mask.shape[1] != mask.shape[2]:
        raise ValueError(f"{name} must be [batch, L, L], got {tuple(mask.shape)}")
