"""Attention capture and interventions: one eager attention function for every model.

    from harness.engine.capture import AttentionPlan, Intervention, capture_attention
    plan = AttentionPlan(reference=ref, rollout=True, patterns=(0,))
    with capture_attention(model, plan) as record:
        model(**batch)                       # or model.generate(**batch, max_new_tokens=...)
    record.head_mass     # float [layers, heads]: summed mass on reference keys over target rows
    record.head_rows     # float [batch, L, layers, heads]: per row (nan: no reference / not run)
    record.layer_maps    # per layer [batch, T, T] head-mean maps (rollout=True)
    record.patterns      # {"blocks.{l}.attn.hook_pattern": [n, heads, T, T]} for plan.patterns

API
---
`AttentionPlan(reference=None, head_mass=None, rollout=False, patterns=(), intervention=None,
references={}, readers=(), output_rows=None)`
    reference: bool [batch, L, L]; `reference[b, q, k]` is True when query q (the position that
    predicts token q + 1) must attend key k, in absolute positions of the final sequence (left
    padding included; `harness.engine.positions` builds it). Rows past L (generation that
    runs past the gold answer) have no reference. head_mass (default: True when a reference
    is given) records per (layer, head) the post-softmax mass on the reference keys of every
    row that has references; rollout keeps the head-mean map of every layer; patterns lists
    the batch rows whose full maps are kept under TransformerLens names. references: named
    masks (bool [batch, L, L], or `Reference(mask, threshold)` counting only weights above the
    threshold) whose per-row, per-head mass is recorded in the same forward (capture once,
    score many: the offsets ref-2 .. ref+2 of a head ranking); `record.mass(name)`.
    readers: callables `reader(layer, weights, q0, k0, mask)` called with each layer's
    weights and attention mask, graph kept (training's attention supervision,
    `harness.engine.supervision`). output_rows: bool [batch, L], the rows whose per-head
    output norm (weights @ values, before the output projection) is recorded
    (`record.output_norms` [batch, L, layers, heads], nan elsewhere): a head's ID norm, the
    rescale's target.
`Intervention(heads, strength=1.0, mode="standard", threshold=0.0, renormalise=False,
prefill=False, positions=None, levels=None, norms=None)`
    heads: bool [layers, heads] (query heads). The modes (`harness.engine.modes`, one
    module each): "standard" adds `strength` to the post-softmax weights at the cells of the
    selected heads; "conditional" adds it only where the original weight exceeds
    `threshold`; "knockout" sets those weights to 0; "restore" sets each selected head's
    mass on the cells to its `levels` entry (float [layers, heads] in [0, 1]), the rest of
    the row scaled to keep its sum; "rescale" leaves the weights as they are and scales each
    selected head's output (weights @ values, per row, before the output projection) to its
    `norms` entry (float [layers, heads] >= 0: its mean output norm in distribution), on the
    rows that have cells (a row whose output is exactly 0 is left as it is). strength must
    be finite and >= 0, norms too, threshold and levels in [0, 1] (ValueError naming the
    field). No renormalisation unless `renormalise=True`
    (then the selected heads' rows are divided by their sums). `positions` (bool [batch, L,
    L]) replaces the reference as the cells (random-position control, ref+k).
    `prefill=False` leaves the first forward of a cached generation (past length 0 with a
    cache passed in) untouched, so the first generated token is not reinforced and a prefill
    can be reused across settings; a forward without a cache (teacher-forced scoring) is
    always intervened. One setting per row (as nnsight batches its invokes): heads bool
    [batch, layers, heads], strength and threshold [batch] tensors, mode and renormalise one
    per row, levels and norms [batch, layers, heads] (or [layers, heads] for every row); a
    row whose heads are all False is untouched. One setting is run
    as the case of one row that every row shares.
`capture_attention(model, plan=None) -> AttentionRecord` (context manager)
    Switches the model to the "attentionspan" attention implementation (`ATTENTION_NAME`,
    registered with AttentionInterface and, for its mask, AttentionMaskInterface) and back,
    installs the plan for this context (a ContextVar, not forward kwargs: generate() rejects
    unknown ones) and a pre-hook reading the cache's `get_seq_length()` for absolute
    positions: queries `past + arange(q)`, keys `past + q - kv + arange(kv)` (also Gemma3's
    sliding layers). Any number of forwards may run inside (one teacher-forced pass, or the
    prefill and decode steps of `generate()`); the record is filled when the block ends.
`AttentionRecord`: head_rows, head_mass, target_rows (bool [batch, L]: rows with references
    that ran), layer_maps, patterns, calls (attention calls), length (positions seen, T),
    named_rows (per name of `plan.references`: [batch, L, layers, heads]), mass(name) and
    output_norms (`plan.output_rows`).
`AttentionCaptureError(ValueError)`: one line, for a model that is not a causal LM, one whose
    attention does not dispatch through the interface (checked after every forward), a plan
    whose masks do not match the batch (batch size, a first forward longer than L) or whose
    heads do not match the model. `model_shape(model) -> (layers, heads)`.

Exactness: with nothing to change, the function computes what transformers'
`eager_attention_forward` does (repeat_kv for GQA, the module's scaling, `softcap` when the
model passes it, fp32 softmax, dropout only in training), from what the family passes and
the tensors' shapes alone (GPT-2's Conv1D, GPT-NeoX's fused qkv and partial rotary, Phi-3's
and OLMo-2's norms all happen before the call). Gemma2 passes its
`attn_logit_softcapping`; Gemma3's eager attention ignores that setting, and so does this.
GPT-OSS passes its attention sinks (`s_aux`), joined to the softmax as its eager does.
Arguments that would change the weights in a way not computed here (`position_bias`,
`sinks`, `indices`, `block_indices`) are refused in one line. The families tested, and
those refused because they bypass the interface: README, "Model families".
Cells are changed only where the attention mask lets attention through (a reference outside
a sliding window or on padding is left alone; recorded mass there is 0), which keeps
KV-cached generation equal to one full forward.
Recorded weights are those the model used (after any intervention).

Tensor parallelism (a model loaded with transformers' `tp_plan`, under `torchrun`): each
process's attention function sees only its own heads, global query heads `r * local ..
(r + 1) * local - 1` on process r (`harness.foundation.dispatch.tensor_parallel_of`; the
key/value heads are split alike, so a local query head reads its own group's key/value
head). Each process changes only the heads it holds (the plan's [layers, heads] masks and
levels are global, sliced to its block) and records only them; when the block ends the
records are gathered once over the tensor-parallel group (`all_gather_object`) into global
head order, so every process holds the whole record. Every process must run the same
forwards (they do: generation is the same in each). Readers (training's supervision) are
refused under tensor parallelism.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from harness.engine.cells import Mass, slice_rows
from harness.engine.inference import given_cache, model_shape, text_config
from harness.engine.modes import MODES, ModeArgs
from harness.engine.plan import AttentionPlan, Intervention
from harness.engine.plan import Reference as Reference  # imported from here too
from harness.foundation.dispatch import TensorShard, input_device, tensor_parallel_of

ATTENTION_NAME = "attentionspan"
PATTERN_NAME = "blocks.{layer}.attn.hook_pattern"


class AttentionCaptureError(ValueError):
    """A model, plan or batch that capture cannot serve (one-line message)."""


@dataclass
class AttentionRecord:
    """What one capture context recorded (tensors on the CPU, float32)."""

    num_layers: int
    num_heads: int
    head_rows: torch.Tensor | None = None
    layer_maps: list[torch.Tensor] | None = None
    patterns: dict[str, torch.Tensor] = field(default_factory=dict)
    calls: int = 0
    length: int = 0  # positions seen (prompt + generated)
    named_rows: dict[str, torch.Tensor] = field(default_factory=dict)
    # [batch, L, layers, heads]: each head's output norm on the plan's `output_rows` (nan
    # elsewhere, or where not run); None when the plan asks for none
    output_norms: torch.Tensor | None = None

    def mass(self, name: str) -> torch.Tensor:
        """[layers, heads]: the summed mass on the named reference `name` (the plan's
        `references`) over the rows that have cells there."""
        return self.named_rows[name].nan_to_num(0.0).sum((0, 1))

    @property
    def head_mass(self) -> torch.Tensor | None:
        """[layers, heads]: sum over the rows with references of the mass on them."""
        if self.head_rows is None:
            return None
        return self.head_rows.nan_to_num(0.0).sum((0, 1))

    @property
    def target_rows(self) -> torch.Tensor | None:
        """bool [batch, L]: rows with references that were run."""
        if self.head_rows is None:
            return None
        return ~self.head_rows[..., 0, 0].isnan()


class _Rows:
    """An Intervention on the model's device as per-row tensors, one row per setting: the
    batch's rows, or for one setting a single row that broadcasts over the batch. Per
    layer: each mode present with its selected heads ([rows, heads, 1, 1]), the modes'
    arguments and the heads to renormalise. `heads` (offset, count): the block of global
    heads this process holds (tensor parallelism; default all of them)."""

    def __init__(self, iv: Intervention, device, heads: tuple[int, int] | None = None):
        first, count = heads if heads is not None else (0, iv.heads.shape[-1])
        block = slice(first, first + count)
        heads = iv.heads[..., block].to(device)
        heads = heads if iv.per_row else heads[None]  # [rows, layers, heads]
        rows = heads.shape[0]
        modes = (iv.mode,) * rows if isinstance(iv.mode, str) else tuple(iv.mode)

        def column(value, dtype):  # a scalar or [rows] -> [rows, 1, 1, 1]
            return torch.as_tensor(value, dtype=dtype).to(device).reshape(-1, 1, 1, 1)

        def per_layer(mask):  # [rows, layers, heads] -> per layer [rows, heads, 1, 1]
            return mask.transpose(0, 1)[:, :, :, None, None]

        self.layer_active = [bool(a) for a in heads.any(-1).any(0).tolist()]

        def per_head(values):  # levels, norms: [layers, heads] is every row's
            if values is None:
                return [None] * heads.shape[1]
            return per_layer(values[..., block].to(device).expand(rows, *heads.shape[1:]))

        strength = column(iv.strength, torch.float32)
        threshold = column(iv.threshold, torch.float32)
        self.args = [
            ModeArgs(strength, threshold, levels, norms)
            for levels, norms in zip(per_head(iv.levels), per_head(iv.norms))
        ]
        # The modes in registry order, each with the heads of its own rows: a mode changes
        # the weights at its cells only, so each row gets what its setting alone gives it.
        self.modes = []
        for mode in MODES.values():
            mine = torch.tensor([m == mode.name for m in modes], device=device)
            if bool(mine.any()):
                selected = heads & mine[:, None, None]
                active = [bool(a) for a in selected.any(-1).any(0).tolist()]
                self.modes.append((mode, per_layer(selected), active))
        # the modes that change a head's output as well (`Mode.output`): the rescale
        self.outputs = [m for m in self.modes if m[0].output is not None]
        renormalise = torch.as_tensor(iv.renormalise, dtype=torch.bool).to(device).reshape(-1)
        self.renormalise = None
        if bool(renormalise.any()):
            self.renormalise = per_layer(heads & renormalise[:, None, None])


class _State:
    """Per-context state: the plan on the model's device, and what has been recorded."""

    def __init__(
        self,
        plan: AttentionPlan,
        num_layers: int,
        num_heads: int,
        device,
        shard: TensorShard | None = None,
    ):
        self.plan = plan
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.device = device
        # tensor parallelism: this process's block of heads, recorded and changed here
        self.shard = shard
        self.offset, self.local_heads = shard.heads(num_heads) if shard else (0, num_heads)
        self.past = 0
        self.cached = False  # the current forward got a cache object
        self.calls = 0
        self.forward_calls = 0
        self.length = 0
        self.batch = None
        iv = plan.intervention
        masks = [m for m in (plan.reference, getattr(iv, "positions", None)) if m is not None]
        masks += [r.mask for r in plan.references.values()]
        masks += [plan.output_rows[..., None]] if plan.output_rows is not None else []
        self.mask_length = min((m.shape[1] for m in masks), default=1 << 62)
        if iv is not None:
            if tuple(iv.heads.shape[-2:]) != (num_layers, num_heads):
                raise AttentionCaptureError(
                    f"Intervention.heads is {tuple(iv.heads.shape)}, the model has "
                    f"[layers, heads] = [{num_layers}, {num_heads}]"
                )
            cells = iv.positions if iv.positions is not None else plan.reference
            self.cell_mask = cells.to(device)
            self.rows = _Rows(iv, device, (self.offset, self.local_heads))
            self.layer_active = self.rows.layer_active
        self.masses: dict[str | None, Mass] = {}
        local = self.local_heads
        if plan.head_mass:
            self.masses[None] = Mass(plan.reference, 0.0, num_layers, local, device)
        for name, ref in plan.references.items():
            self.masses[name] = Mass(ref.mask, ref.threshold, num_layers, local, device)
        self.norms = None  # per row, each head's output norm on `plan.output_rows`
        if plan.output_rows is not None:
            self.norm_rows = plan.output_rows.to(device)
            batch, length = self.norm_rows.shape
            self.norms = torch.full((batch, length, num_layers, local), float("nan"), device=device)
        self.map_chunks: list[list[tuple[int, int, torch.Tensor]]] = [[] for _ in range(num_layers)]
        self.pattern_chunks: list[list[tuple[int, int, torch.Tensor]]] = [
            [] for _ in range(num_layers)
        ]
        self.pattern_rows = torch.tensor(plan.patterns, dtype=torch.long, device=device)

    def intervenes(self, layer) -> bool:
        """Whether the intervention changes this call of `layer`: the layer
        has selected heads, and the call is not a prefill left alone (`prefill=False` leaves
        the first forward of a cached generation untouched)."""
        iv = self.plan.intervention
        if iv is None or layer is None or not self.layer_active[int(layer)]:
            return False
        return iv.prefill or not self.cached or self.past > 0

    def check_batch(self, batch: int) -> None:
        iv = self.plan.intervention
        masks = [
            ("reference", self.plan.reference),
            ("intervention positions", getattr(iv, "positions", None)),
            *((f"{name!r} reference", r.mask) for name, r in self.plan.references.items()),
            ("output rows", self.plan.output_rows),
        ]
        if iv is not None and iv.per_row:
            masks.append(("per-row intervention", iv.heads))
        for name, mask in masks:
            if mask is not None and mask.shape[0] != batch:
                raise AttentionCaptureError(
                    f"the plan's {name} mask has batch {mask.shape[0]}, the model got batch {batch}"
                )
        if self.plan.patterns and max(self.plan.patterns) >= batch:
            raise AttentionCaptureError(
                f"AttentionPlan.patterns {self.plan.patterns} out of range for batch {batch}"
            )

    def record(self) -> AttentionRecord:
        length = self.length
        main = self.masses.get(None)
        maps = None
        if self.plan.rollout:
            maps = [_assemble(c, length) for c in self.map_chunks if c]
        patterns = {
            PATTERN_NAME.format(layer=layer): _assemble(chunks, length)
            for layer, chunks in enumerate(self.pattern_chunks)
            if chunks
        }
        head_rows = main.rows.float().cpu() if main is not None else None
        named_rows = {
            name: m.rows.float().cpu() for name, m in self.masses.items() if name is not None
        }
        if self.norms is not None:  # gathered with the named rows: per head, the same way
            named_rows[_NORMS] = self.norms.float().cpu()
        if self.shard is not None:
            head_rows, named_rows, patterns, maps = _gather_heads(
                self.shard, self.num_heads, head_rows, named_rows, patterns, maps
            )
        norms = named_rows.pop(_NORMS, None)
        return AttentionRecord(
            self.num_layers,
            self.num_heads,
            head_rows=head_rows,
            layer_maps=maps,
            patterns=patterns,
            calls=self.calls,
            length=length,
            named_rows=named_rows,
            output_norms=norms,
        )

    def add_norms(self, layer: int, output: torch.Tensor) -> None:
        """Record each head's output norm ([b, h, q, d] -> [b, h, q]) on the output rows
        among query rows past.. (rows past the mask: none)."""
        q = output.shape[-2]
        q0 = self.past
        stop = min(q0 + q, self.norms.shape[1])
        if stop <= q0:
            return
        norms = output[:, :, : stop - q0].float().norm(dim=-1).transpose(1, 2)  # [b, q, h]
        wanted = self.norm_rows[:, q0:stop, None]
        current = self.norms[:, q0:stop, layer]
        self.norms[:, q0:stop, layer] = torch.where(wanted, norms, current)


_NORMS = "\x00output norms"  # their key among the named rows while gathered (no mask's name)


def _gather_heads(shard: TensorShard, num_heads: int, head_rows, named_rows, patterns, maps):
    """Every tensor-parallel process's records, gathered once (one `all_gather_object` over
    the tensor-parallel group) and joined in rank order, which is global head order: per-head
    rows [.., heads] and patterns [n, heads, T, T] concatenated along their head axis; the
    head-mean maps from each process's sum over its own heads, summed in rank order and
    divided by the heads of the layer."""
    import torch.distributed as dist

    mine = {"head_rows": head_rows, "named": named_rows, "patterns": patterns, "maps": maps}
    parts: list[Any] = [None] * shard.size
    dist.all_gather_object(parts, mine, group=shard.group)
    if head_rows is not None:
        head_rows = torch.cat([p["head_rows"] for p in parts], dim=-1)
    named_rows = {name: torch.cat([p["named"][name] for p in parts], dim=-1) for name in named_rows}
    patterns = {name: torch.cat([p["patterns"][name] for p in parts], dim=1) for name in patterns}
    if maps is not None:
        maps = [
            torch.stack([p["maps"][i] for p in parts]).sum(0) / num_heads for i in range(len(maps))
        ]
    return head_rows, named_rows, patterns, maps


def _assemble(chunks: list[tuple[int, int, torch.Tensor]], length: int) -> torch.Tensor:
    """Rows recorded pass by pass ([..., q, kv] at absolute (q0, k0)) as one [..., T, T]."""
    lead = chunks[0][2].shape[:-2]
    out = torch.zeros(*lead, length, length)
    for q0, k0, part in chunks:
        q, kv = part.shape[-2:]
        out[..., q0 : q0 + q, k0 : k0 + kv] = part.float().cpu()
    return out


_STATE: contextvars.ContextVar[_State | None] = contextvars.ContextVar(
    "attentionspan_attention_state", default=None
)


def _repeat_kv(hidden: torch.Tensor, groups: int) -> torch.Tensor:
    """[b, kv_heads, s, d] -> [b, kv_heads * groups, s, d] (transformers' repeat_kv)."""
    if groups == 1:
        return hidden
    b, heads, s, d = hidden.shape
    hidden = hidden[:, :, None, :, :].expand(b, heads, groups, s, d)
    return hidden.reshape(b, heads * groups, s, d)


# Arguments some families pass that change the weights in ways this function does not
# compute (T5-style position biases, differently named sinks, sparse key selection):
# refused rather than silently ignored.
_UNSUPPORTED_ARGUMENTS = ("position_bias", "sinks", "indices", "block_indices")


def attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    softcap: float | None = None,
    s_aux: torch.Tensor | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Eager attention (as transformers' eager_attention_forward) plus the active plan.

    Reads only what the family passes and the tensors' shapes, never the module's fields:
    the key/value heads are repeated to the query's (GQA, GPT-BigCode's single key head),
    no scaling means the head size's (GPT-2's eager rule), `softcap` (Gemma2) and `s_aux`
    (GPT-OSS's attention sinks: one logit per head that joins each row's softmax and is
    dropped after) as that family's eager function applies them."""
    unsupported = [name for name in _UNSUPPORTED_ARGUMENTS if kwargs.get(name) is not None]
    if unsupported:
        raise AttentionCaptureError(
            f"{type(module).__name__} passes {', '.join(unsupported)} to its attention "
            "function, which capture does not compute; capture cannot serve this architecture"
        )
    if scaling is None:
        scaling = query.shape[-1] ** -0.5
    groups = query.shape[1] // key.shape[1]
    key_states = _repeat_kv(key, groups)
    value_states = _repeat_kv(value, groups)
    weights = torch.matmul(query, key_states.transpose(2, 3)) * scaling
    kv = weights.shape[-1]  # keys of this call (before an attention sink joins the row)
    if softcap is not None:
        weights = torch.tanh(weights / softcap) * softcap
    if attention_mask is not None:
        weights = weights + attention_mask
    if s_aux is not None:
        sinks = s_aux.reshape(1, -1, 1, 1).expand(query.shape[0], -1, query.shape[-2], -1)
        weights = torch.cat([weights, sinks.to(weights.dtype)], dim=-1)
        weights = weights - weights.max(dim=-1, keepdim=True).values
    weights = torch.nn.functional.softmax(weights, dim=-1, dtype=torch.float32).to(query.dtype)
    if s_aux is not None:
        weights = weights[..., :-1]
    weights = torch.nn.functional.dropout(weights, p=dropout, training=module.training)
    state = _STATE.get()
    if state is not None:
        weights = _apply_plan(state, module, weights, attention_mask)
    output = torch.matmul(weights, value_states)
    if state is not None and state.intervenes(module.layer_idx) and state.rows.outputs:
        output = _intervene_output(state, int(module.layer_idx), output, kv, attention_mask)
    if state is not None and state.norms is not None:
        state.add_norms(int(module.layer_idx), output)  # what the model used, as the weights
    return output.transpose(1, 2).contiguous(), weights


def _apply_plan(state: _State, module, weights: torch.Tensor, mask: torch.Tensor | None):
    layer = getattr(module, "layer_idx", None)
    if layer is None:
        raise AttentionCaptureError(
            f"{type(module).__name__} has no layer_idx: capture cannot tell which layer called"
        )
    layer = int(layer)
    batch, heads, q, kv = weights.shape
    if heads != state.local_heads:
        raise AttentionCaptureError(
            f"layer {layer} computed {heads} heads, capture expected {state.local_heads} "
            f"of the model's {state.num_heads}"
            + (f" on tensor-parallel process {state.shard.rank}" if state.shard else "")
        )
    state.calls += 1
    state.forward_calls += 1
    if state.batch != batch:
        state.check_batch(batch)
        state.batch = batch
    q0 = state.past
    k0 = state.past + q - kv  # Gemma3's sliding layers keep only the last window of keys
    if k0 < 0:
        # More keys than positions seen: a preallocated (static) cache, whose unused slots
        # break the position rule.
        raise AttentionCaptureError(
            f"layer {layer} got {kv} keys for {q0 + q} positions: capture needs the default "
            "DynamicCache (no static or preallocated cache)"
        )
    state.length = max(state.length, q0 + q)
    if q0 == 0 and q0 + q > state.mask_length:
        # A first forward longer than the plan's masks is a mismatched plan, not generation
        # running past the answer.
        raise AttentionCaptureError(
            f"the plan's masks cover {state.mask_length} positions, the batch has {q0 + q}"
        )
    if state.intervenes(layer):
        weights = _intervene(state, layer, weights, q0, k0, mask)
    for mass in state.masses.values():
        mass.add(layer, weights, q0, k0)
    for reader in state.plan.readers:
        reader(layer, weights, q0, k0, mask)
    if state.plan.rollout:
        # tensor parallelism: this process's heads' sum; the mean is taken once gathered
        local = weights.float().sum(1) if state.shard else weights.float().mean(1)
        state.map_chunks[layer].append((q0, k0, local))
    if len(state.pattern_rows):
        state.pattern_chunks[layer].append((q0, k0, weights[state.pattern_rows].float()))
    return weights


def _cells(state: _State, q0: int, q: int, k0: int, kv: int, mask) -> torch.Tensor:
    """bool [b, 1, q, kv]: the intervention's cells of query rows q0.. over keys k0.., only
    where the attention mask lets attention through: a reference outside a sliding window or
    on a padding key would otherwise make cached generation differ from a full forward."""
    cells = slice_rows(state.cell_mask, q0, q, k0, kv)
    if mask is not None:
        cells = cells & (mask[:, 0] > torch.finfo(mask.dtype).min / 2)
    return cells[:, None]


def _intervene(state: _State, layer: int, weights, q0, k0, mask):
    """All selected heads of the layer at once, mode by mode: a head mask ([rows, h, 1, 1],
    one row for one setting) times the cell mask."""
    batch, heads, q, kv = weights.shape
    cells = _cells(state, q0, q, k0, kv, mask)
    rows = state.rows
    out = weights
    for mode, selected, active in rows.modes:
        if active[layer]:
            out = mode.apply(out, cells & selected[layer], rows.args[layer])
    if rows.renormalise is not None:
        # A row with no weight left (GPT-OSS: a padding query whose whole mass went to the
        # sink) stays 0: 0 / 0 would reach the later layers through the values as NaN.
        sums = out.sum(-1, keepdim=True)
        sums = torch.where(sums > 0, sums, torch.ones_like(sums))
        out = torch.where(rows.renormalise[layer], out / sums, out)
    return out


def _intervene_output(state: _State, layer: int, output, kv: int, mask):
    """The modes that change what a selected head writes (`Mode.output`: the rescale), on
    its output [b, h, q, d] (weights @ values, before the output projection), on the rows
    that have cells (the rows a push at the same cells would change), after the weights'
    modes: the other rows come back as they were."""
    rows = state.rows
    q = output.shape[-2]
    q0 = state.past
    has = _cells(state, q0, q, q0 + q - kv, kv, mask).any(-1, keepdim=True)  # [b, 1, q, 1]
    for mode, selected, active in rows.outputs:
        if active[layer]:
            output = mode.output(output, has & selected[layer], rows.args[layer])
    return output


def _register() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask

    AttentionInterface.register(ATTENTION_NAME, attention_forward)
    # Without a registered mask function the mask is silently None (not causal).
    AttentionMaskInterface.register(ATTENTION_NAME, eager_mask)


def _check_causal_lm(model) -> None:
    from transformers import PreTrainedModel
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    name = type(model).__name__
    causal = set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.values())
    if not isinstance(model, PreTrainedModel) or not (
        name in causal or name.endswith("ForCausalLM")
    ):
        raise AttentionCaptureError(
            f"attention capture needs a causal language model (AutoModelForCausalLM), got {name}"
        )


def _text_config(model):
    return text_config(model.config)


def check_dispatch(model, input_ids) -> None:
    """AttentionCaptureError unless one forward of `input_ids` (a short probe, on the
    model's input device) under `capture_attention` dispatches through the capture function:
    an architecture whose attention bypasses transformers' AttentionInterface is refused
    before any measurement relies on it."""
    with torch.inference_mode(), capture_attention(model):
        model(input_ids=input_ids)


@contextlib.contextmanager
def capture_attention(model, plan: AttentionPlan | None = None) -> Iterator[AttentionRecord]:
    """Run `model` with the capture attention function and `plan` inside the block; the
    yielded record is filled in when the block ends."""
    _check_causal_lm(model)
    plan = plan or AttentionPlan()
    _register()
    layers, heads = model_shape(model)
    # where the input embeddings run: a dispatched model's first weight may be offloaded
    # (on `meta` between forwards), and its masks must not land there
    device = input_device(model)
    shard = tensor_parallel_of(model)
    if shard is not None and plan.readers:
        raise AttentionCaptureError(
            "attention readers (training's supervision) see one process's heads under tensor "
            "parallelism: not supported; load the model without --tp-plan"
        )
    state = _State(plan, layers, heads, device, shard)
    record = AttentionRecord(layers, heads)

    def pre_hook(_module, args, kwargs):
        cache = given_cache(kwargs)  # `cache` from transformers 5.24, `past_key_values` before
        state.cached = cache is not None
        state.past = int(cache.get_seq_length()) if cache is not None else 0
        state.forward_calls = 0

    def post_hook(_module, _args, _kwargs, _output):
        # Only the innermost of nested contexts receives the calls.
        if state.forward_calls == 0 and _STATE.get() is state:
            raise AttentionCaptureError(
                f"{type(model).__name__}'s attention does not dispatch through transformers' "
                "AttentionInterface; capture cannot serve this architecture"
            )

    previous = _text_config(model)._attn_implementation
    model.set_attn_implementation(ATTENTION_NAME)
    if _text_config(model)._attn_implementation != ATTENTION_NAME:
        model.set_attn_implementation(previous)
        raise AttentionCaptureError(
            f"{type(model).__name__} cannot switch its attention implementation at run time "
            "(it does not use transformers' AttentionInterface)"
        )
    hooks = [
        model.register_forward_pre_hook(pre_hook, with_kwargs=True),
        model.register_forward_hook(post_hook, with_kwargs=True),
    ]
    token = _STATE.set(state)
    try:
        yield record
    finally:
        _STATE.reset(token)
        for hook in hooks:
            hook.remove()
        model.set_attn_implementation(previous)
    # Only after a block that ended normally (an error inside propagates as it is): the
    # record yielded at the start is filled in field by field from the finished one.
    finished = state.record()
    for name in (f.name for f in dataclasses.fields(AttentionRecord)):
        setattr(record, name, getattr(finished, name))
