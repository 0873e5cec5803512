"""The rescale mode through capture (harness.engine.modes.rescale): the chosen heads'
pattern is the model's own, each chosen head's output (weights @ values, before the output
projection) has its ID norm on every row with cells, and every other head and row is left as
it was; and the per-head output norms a plan records (`AttentionPlan.output_rows`)."""

from __future__ import annotations

import pytest
import torch

from harness.engine.capture import AttentionPlan, Intervention, capture_attention
from tests.harness.engine.test_capture import HEADS, LAYERS, heads_mask, padded, random_reference


def run(model, inputs, ref, iv=None):
    """(patterns per layer, head outputs per layer [b, q, h, d] as o_proj reads them, logits,
    the record's output norms on every real row)."""
    outputs = {}

    def keep(layer):
        def hook(_module, args):
            x = args[0]
            outputs[layer] = x.reshape(*x.shape[:2], HEADS, -1).detach().clone()

        return hook

    layers = model.model.layers
    hooks = [layers[i].self_attn.o_proj.register_forward_pre_hook(keep(i)) for i in range(LAYERS)]
    rows = inputs["attention_mask"].bool()
    plan = AttentionPlan(
        reference=ref, patterns=tuple(range(len(ref))), intervention=iv, output_rows=rows
    )
    try:
        with torch.no_grad(), capture_attention(model, plan) as record:
            logits = model(**inputs).logits
    finally:
        for h in hooks:
            h.remove()
    patterns = [record.patterns[f"blocks.{i}.attn.hook_pattern"] for i in range(LAYERS)]
    return patterns, outputs, logits, record.output_norms


def test_rescale_keeps_the_pattern_and_gives_each_chosen_head_its_norm_per_row(tiny_models):
    model = tiny_models["llama"]
    inputs, _ = padded([12, 9], 12)
    ref = random_reference(inputs["attention_mask"], first_row=6)  # rows 6.. have cells
    has = ref.any(-1)  # [b, q]
    heads = heads_mask((0, 1), (1, 2))
    norms = torch.zeros(LAYERS, HEADS)
    norms[0, 1], norms[1, 2] = 2.5, 0.7
    norms[1, 3] = 9.0  # not chosen: never read
    plain_patterns, plain, plain_logits, _ = run(model, inputs, ref)
    iv = Intervention(heads, mode="rescale", norms=norms)
    patterns, got, logits, recorded = run(model, inputs, ref, iv)
    # layer 0: the pattern is bit for bit the model's own (its input does not depend on iv)
    assert torch.equal(patterns[0], plain_patterns[0])
    # the chosen head's output on every row with cells has its norm, in its own direction
    for layer, head, norm in ((0, 1, 2.5), (1, 2, 0.7)):
        length = got[layer][:, :, head].norm(dim=-1)
        torch.testing.assert_close(length[has], torch.full_like(length[has], norm))
        recorded_here = recorded[:, :, layer, head]
        torch.testing.assert_close(recorded_here[has], length[has])  # the record agrees
    old, new = plain[0][:, :, 1], got[0][:, :, 1]
    cosine = torch.nn.functional.cosine_similarity(old[has], new[has], dim=-1)
    torch.testing.assert_close(cosine, torch.ones_like(cosine))
    # rows without cells, and every other head of layer 0, are untouched
    assert torch.equal(got[0][:, :, 1][~has], plain[0][:, :, 1][~has])
    others = [h for h in range(HEADS) if h != 1]
    assert torch.equal(got[0][:, :, others], plain[0][:, :, others])
    assert not torch.equal(logits, plain_logits)  # and the change reaches the output


def test_rescale_on_one_row_of_a_per_row_intervention_leaves_the_other_rows(tiny_models):
    """One setting per row: the rescale row's chosen head gets its norm, the baseline row
    (no head selected) is the plain forward's."""
    model = tiny_models["llama"]
    inputs, _ = padded([10, 10], 10)
    ref = random_reference(inputs["attention_mask"], first_row=4)
    none = torch.zeros(LAYERS, HEADS, dtype=torch.bool)
    heads = torch.stack([heads_mask((0, 0)), none])
    norms = torch.full((LAYERS, HEADS), 3.0)
    iv = Intervention(heads, mode=["rescale", "standard"], strength=0.0, norms=norms)
    _, plain, plain_logits, _ = run(model, inputs, ref)
    _, got, logits, _ = run(model, inputs, ref, iv)
    length = got[0][0, :, 0].norm(dim=-1)
    torch.testing.assert_close(length[ref[0].any(-1)], torch.full((6,), 3.0))
    assert torch.equal(logits[1], plain_logits[1])


def test_the_recorded_output_norms_are_the_heads_outputs_before_the_projection(tiny_models):
    model = tiny_models["llama"]
    inputs, _ = padded([11, 7], 11)
    ref = random_reference(inputs["attention_mask"])
    _, plain, _, recorded = run(model, inputs, ref)
    real = inputs["attention_mask"].bool()
    for layer in range(LAYERS):
        by_hand = plain[layer].float().norm(dim=-1)  # [b, q, h]
        torch.testing.assert_close(recorded[:, :, layer][real], by_hand[real])
    assert recorded[~real].isnan().all()  # rows not asked for: nan


def test_rescale_needs_norms_and_only_with_it():
    heads = torch.ones(LAYERS, HEADS, dtype=torch.bool)
    with pytest.raises(ValueError, match="norms is required"):
        Intervention(heads, mode="rescale")
    with pytest.raises(ValueError, match="norms is required"):
        Intervention(heads, norms=torch.ones(LAYERS, HEADS))
    with pytest.raises(ValueError, match="Intervention.norms must be finite and >= 0"):
        Intervention(heads, mode="rescale", norms=torch.full((LAYERS, HEADS), -1.0))
    with pytest.raises(ValueError, match="output_rows must be a bool tensor"):
        AttentionPlan(output_rows=torch.ones(2, 3))
