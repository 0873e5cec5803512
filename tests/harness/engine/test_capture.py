"""Exactness of harness.engine.capture on a tiny random model of every family in
CAPTURE_ARCHITECTURES (Llama ... GPT-2, GPT-NeoX; Gemma2 for softcapping, Gemma3, Mistral and
GPT-OSS for sliding windows): capture changes nothing, records what eager attention computes,
and cached generation equals one forward over the final sequence, with and without
interventions."""

from __future__ import annotations

import pytest
import torch

from harness.engine.capture import (
    ATTENTION_NAME,
    AttentionCaptureError,
    AttentionPlan,
    Intervention,
    capture_attention,
)
from tests.harness.attention_models import (
    CAPTURE_ARCHITECTURES,
    SLIDING_WINDOW,
    SOFTCAP,
    TINY_KINDS,
)

LAYERS, HEADS = 2, 4
PATTERN = "blocks.{}.attn.hook_pattern"


def padded(lengths, total, side="left", seed=0, pad_id=0):
    """Random ids for rows of `lengths`, padded to `total`; (inputs, first real column)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.full((len(lengths), total), pad_id, dtype=torch.long)
    mask = torch.zeros((len(lengths), total), dtype=torch.long)
    starts = []
    for b, n in enumerate(lengths):
        start = total - n if side == "left" else 0
        ids[b, start : start + n] = torch.randint(5, 90, (n,), generator=g)
        mask[b, start : start + n] = 1
        starts.append(start)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    return {"input_ids": ids, "attention_mask": mask, "position_ids": positions}, starts


def random_reference(mask, first_row=0, per_row=2, seed=1, length=None):
    """bool [batch, L, L]: `per_row` random real, causal keys for every real row >= first_row."""
    g = torch.Generator().manual_seed(seed)
    batch, total = mask.shape
    length = length or total
    ref = torch.zeros(batch, length, length, dtype=torch.bool)
    for b in range(batch):
        real = mask[b].nonzero().flatten().tolist()
        for q in range(max(first_row, real[0]), length):
            keys = [k for k in real if k <= q] + list(range(total, q + 1))
            pick = torch.randint(0, len(keys), (per_row,), generator=g)
            ref[b, q, [keys[i] for i in pick]] = True
    return ref


def heads_mask(*cells):
    heads = torch.zeros(LAYERS, HEADS, dtype=torch.bool)
    for layer, head in cells:
        heads[layer, head] = True
    return heads


@pytest.mark.parametrize("kind", TINY_KINDS)
def test_prefill_logits_and_patterns_equal_eager(tiny_models, kind):
    model = tiny_models[kind]
    inputs, _ = padded([14, 9, 12], 14)
    ref = random_reference(inputs["attention_mask"])
    with torch.no_grad():
        eager = model(**inputs, output_attentions=True)
        plan = AttentionPlan(reference=ref, rollout=True, patterns=(0, 1, 2))
        with capture_attention(model, plan) as record:
            out = model(**inputs)
    assert model.config._attn_implementation == "eager"  # restored
    torch.testing.assert_close(out.logits, eager.logits, atol=1e-5, rtol=0)
    for layer in range(LAYERS):
        torch.testing.assert_close(record.patterns[PATTERN.format(layer)], eager.attentions[layer])
        torch.testing.assert_close(record.layer_maps[layer], eager.attentions[layer].mean(1))
    # Per-row mass on the references, by hand from the eager maps.
    expected = torch.stack([(a * ref[:, None]).sum(-1) for a in eager.attentions], -1)
    rows = ref.any(-1)
    torch.testing.assert_close(record.head_rows[rows], expected.permute(0, 2, 3, 1)[rows])
    assert record.head_rows[~rows].isnan().all()
    torch.testing.assert_close(record.head_mass, record.head_rows[rows].sum(0))
    assert record.target_rows.equal(rows)


def test_sliding_window_and_softcap_matter(tiny_models):
    """The configs really exercise what they are for: the first layer of Gemma3, GPT-OSS and
    Mistral does not see keys further than the window (Mistral's second neither), and
    Gemma2's softcap changes the maps."""
    inputs, _ = padded([14], 14)
    with torch.no_grad():
        for kind, full in (("gemma3", True), ("gpt_oss", True), ("mistral", False)):
            maps = tiny_models[kind](**inputs, output_attentions=True).attentions
            assert maps[0][0, :, 13, : 14 - SLIDING_WINDOW].abs().max() == 0, kind
            if full:
                assert maps[1][0, :, 13, :4].min() > 0, kind
            else:
                assert maps[1][0, :, 13, : 14 - SLIDING_WINDOW].abs().max() == 0, kind
        model = tiny_models["gemma2"]
        capped = model(**inputs, output_attentions=True).attentions[0]
        model.config.attn_logit_softcapping = None
        for layer in model.model.layers:
            layer.self_attn.attn_logit_softcapping = None
        try:
            uncapped = model(**inputs, output_attentions=True).attentions[0]
        finally:
            model.config.attn_logit_softcapping = SOFTCAP
            for layer in model.model.layers:
                layer.self_attn.attn_logit_softcapping = SOFTCAP
    assert (capped - uncapped).abs().max() > 1e-2


def _generate(model, inputs, new, plan):
    with capture_attention(model, plan) as record:
        out = model.generate(
            input_ids=inputs["input_ids"],
            attention_mask=inputs["attention_mask"],
            max_new_tokens=new,
            do_sample=False,
            eos_token_id=None,
            pad_token_id=0,
            return_dict_in_generate=True,
            output_logits=True,
        )
    return out, record


def _full_forward(model, sequences, prompt_mask, plan):
    new = sequences.shape[1] - prompt_mask.shape[1]
    mask = torch.cat([prompt_mask, torch.ones(len(sequences), new, dtype=torch.long)], 1)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    with capture_attention(model, plan) as record:
        out = model(input_ids=sequences, attention_mask=mask, position_ids=positions)
    return out, record, mask


INTERVENTIONS = {
    "none": None,
    "standard": dict(strength=0.7),
    "conditional": dict(strength=0.7, mode="conditional", threshold=0.1),
    "knockout": dict(mode="knockout"),
    "renormalised": dict(strength=1.0, renormalise=True),
}


# Every architecture without and with an intervention, every mode on some architecture.
GENERATION_CASES = [
    *((kind, setting) for kind in CAPTURE_ARCHITECTURES for setting in ("none", "standard")),
    ("llama", "renormalised"),
    ("qwen2", "knockout"),
    ("gemma3", "conditional"),
    ("gpt2", "knockout"),
    ("gpt_neox", "conditional"),
    ("gpt_oss", "renormalised"),
]


@pytest.mark.parametrize(("kind", "setting"), GENERATION_CASES)
def test_cached_generation_equals_one_forward(tiny_models, kind, setting):
    """Rows captured step by step in generate() (left padding, DynamicCache, Gemma3's sliding
    layers) equal those of one forward over the final sequence, under each intervention."""
    model = tiny_models[kind]
    prompt, new = 10, 8
    inputs, _ = padded([10, 6, 8], prompt)
    ref = random_reference(inputs["attention_mask"], first_row=prompt - 1, length=prompt + new)
    iv = INTERVENTIONS[setting]

    def plan():
        made = None if iv is None else Intervention(heads_mask((0, 1), (1, 2)), prefill=True, **iv)
        return AttentionPlan(reference=ref, rollout=True, patterns=(0,), intervention=made)

    with torch.no_grad():
        gen, rec = _generate(model, inputs, new, plan())
        full, rec_full, mask = _full_forward(model, gen.sequences, inputs["attention_mask"], plan())
    steps = torch.stack(gen.logits, 1)
    # Logits of these wide-initialised models reach about 5: 1e-5 relative is float noise.
    torch.testing.assert_close(steps, full.logits[:, prompt - 1 : -1], atol=1e-5, rtol=1e-5)
    assert rec.length == prompt + new - 1  # the last token is never fed back
    t = rec.length
    torch.testing.assert_close(rec.head_rows[:, :t], rec_full.head_rows[:, :t], equal_nan=True)
    real = mask[:, :t, None].bool()  # padding query rows attend differently, and never count
    for a, b in zip(rec.layer_maps, rec_full.layer_maps):
        torch.testing.assert_close(a * real, b[:, :t, :t] * real, atol=1e-5, rtol=0)
    pattern = PATTERN.format(1)
    torch.testing.assert_close(
        rec.patterns[pattern], rec_full.patterns[pattern][..., :t, :t], atol=1e-5, rtol=0
    )


@pytest.mark.parametrize("kind", CAPTURE_ARCHITECTURES)
def test_untouched_prefill_equals_forward_from_the_first_step(tiny_models, kind):
    """prefill=False: the prompt's forward is untouched, so the forward equivalent reinforces
    only rows from the prompt's width on."""
    model = tiny_models[kind]
    prompt, new = 10, 6
    inputs, _ = padded([10, 7], prompt)
    ref = random_reference(inputs["attention_mask"], first_row=prompt - 1, length=prompt + new)
    heads = heads_mask((0, 0), (1, 3))
    later = ref.clone()
    later[:, :prompt] = False
    with torch.no_grad():
        gen, _ = _generate(
            model, inputs, new, AttentionPlan(reference=ref, intervention=Intervention(heads, 2.0))
        )
        plan = AttentionPlan(reference=ref, intervention=Intervention(heads, 2.0, positions=later))
        full, _, _ = _full_forward(model, gen.sequences, inputs["attention_mask"], plan)
        baseline, _ = _generate(model, inputs, new, AttentionPlan(reference=ref))
    steps = torch.stack(gen.logits, 1)
    # Logits of these wide-initialised models reach about 5: 1e-5 relative is float noise.
    torch.testing.assert_close(steps, full.logits[:, prompt - 1 : -1], atol=1e-5, rtol=1e-5)
    # The first step comes from the untouched prefill; later steps do change.
    assert torch.equal(gen.logits[0], baseline.logits[0])
    assert (steps - torch.stack(baseline.logits, 1)).abs().max() > 1e-4


@pytest.mark.parametrize("kind", CAPTURE_ARCHITECTURES)
@pytest.mark.parametrize("side", ["left", "right"])
def test_independent_of_batch_size_and_padding_side(tiny_models, kind, side):
    model = tiny_models[kind]
    lengths = [12, 7, 10]
    batch, starts = padded(lengths, 12, side=side)
    ref = random_reference(batch["attention_mask"])
    with torch.no_grad():
        with capture_attention(model, AttentionPlan(reference=ref, rollout=True)) as together:
            logits = model(**batch).logits
        for b, n in enumerate(lengths):
            s = starts[b]
            alone = {k: v[b : b + 1, s : s + n] for k, v in batch.items()}
            alone["position_ids"] = torch.arange(n)[None]
            ref_b = ref[b : b + 1, s : s + n, s : s + n]
            with capture_attention(model, AttentionPlan(reference=ref_b, rollout=True)) as single:
                single_logits = model(**alone).logits
            torch.testing.assert_close(logits[b, s : s + n], single_logits[0], atol=1e-5, rtol=0)
            torch.testing.assert_close(
                together.head_rows[b, s : s + n], single.head_rows[0], equal_nan=True
            )
            for a, c in zip(together.layer_maps, single.layer_maps):
                torch.testing.assert_close(a[b, s : s + n, s : s + n], c[0], atol=1e-6, rtol=0)


def _layer0(model, inputs, iv, ref):
    """Layer 0's pattern without and with `iv` (layer 0's input does not depend on it)."""
    with torch.no_grad():
        eager = model(**inputs, output_attentions=True).attentions[0]
        rows = tuple(range(len(ref)))
        plan = AttentionPlan(reference=ref, patterns=rows, intervention=iv)
        with capture_attention(model, plan) as r:
            out = model(**inputs)
    return eager, r.patterns[PATTERN.format(0)], out.logits


@pytest.mark.parametrize("kind", CAPTURE_ARCHITECTURES)
def test_strength_zero_is_identity(tiny_models, kind):
    model = tiny_models[kind]
    inputs, _ = padded([12, 8], 12)
    ref = random_reference(inputs["attention_mask"])
    with torch.no_grad():
        plain = model(**inputs).logits
        for mode in ("standard", "conditional"):
            iv = Intervention(torch.ones(LAYERS, HEADS, dtype=torch.bool), 0.0, mode=mode)
            with capture_attention(model, AttentionPlan(reference=ref, intervention=iv)):
                assert torch.equal(model(**inputs).logits, plain)


@pytest.mark.parametrize("kind", CAPTURE_ARCHITECTURES)
def test_hand_computed_reinforced_pattern(tiny_models, kind):
    """Head 1 of layer 0, C = 0.5 at two cells of row 5: w + C there, nothing else; with
    renormalise the head's rows are divided by their sums (row 5's is 1 + 2C, the others' 1;
    in GPT-OSS each less its sink's share)."""
    model = tiny_models[kind]
    inputs, _ = padded([8], 8)
    ref = torch.zeros(1, 8, 8, dtype=torch.bool)
    ref[0, 5, [3, 4]] = True  # inside the sliding windows of 4
    heads = heads_mask((0, 1))
    eager, got, logits = _layer0(model, inputs, Intervention(heads, 0.5), ref)
    expected = eager.clone()
    expected[0, 1, 5, 3] += 0.5
    expected[0, 1, 5, 4] += 0.5
    torch.testing.assert_close(got, expected, atol=0, rtol=0)
    assert not torch.equal(logits[0, 5], model(**inputs).logits[0, 5])
    _, got, _ = _layer0(model, inputs, Intervention(heads, 0.5, renormalise=True), ref)
    expected[0, 1] /= expected[0, 1].sum(-1, keepdim=True)
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=0)


def test_knockout_zeroes_the_cells(tiny_models):
    model = tiny_models["qwen2"]
    inputs, _ = padded([10, 10], 10)
    ref = random_reference(inputs["attention_mask"], per_row=3)
    heads = heads_mask((0, 0), (0, 3))
    eager, got, _ = _layer0(model, inputs, Intervention(heads, mode="knockout"), ref)
    cells = ref[:, None] & heads[0][None, :, None, None]
    assert got[cells].abs().max() == 0
    assert eager[cells].min() > 0
    torch.testing.assert_close(got[~cells], eager[~cells], atol=0, rtol=0)


def test_conditional_touches_only_cells_above_threshold(tiny_models):
    model = tiny_models["gemma3"]
    inputs, _ = padded([12], 12)
    ref = random_reference(inputs["attention_mask"], per_row=4)
    heads = heads_mask((0, 2))
    eager, _, _ = _layer0(model, inputs, None, ref)
    cells = ref[:, None] & heads[0][None, :, None, None]
    threshold = float(eager[cells].median())  # about half of the cells are above it
    iv = Intervention(heads, 1.0, mode="conditional", threshold=threshold)
    _, got, _ = _layer0(model, inputs, iv, ref)
    above = cells & (eager > threshold)
    assert 0 < int(above.sum()) < int(cells.sum())
    torch.testing.assert_close(got[above], eager[above] + 1.0, atol=0, rtol=0)
    torch.testing.assert_close(got[~above], eager[~above], atol=0, rtol=0)


def test_cells_outside_the_window_or_on_padding_are_left_alone(tiny_models):
    model = tiny_models["gemma3"]
    inputs, _ = padded([9, 12], 12)  # row 0 has 3 columns of padding
    ref = torch.zeros(2, 12, 12, dtype=torch.bool)
    ref[0, 11, 1] = True  # a padding key
    ref[1, 11, 2] = True  # outside layer 0's window of 4
    eager, got, _ = _layer0(model, inputs, Intervention(heads_mask((0, 0)), 1.0), ref)
    torch.testing.assert_close(got, eager, atol=0, rtol=0)


def test_errors_are_one_line(tiny_models):
    from transformers import BertConfig, BertModel

    bert = BertModel(
        BertConfig(
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=16,
            vocab_size=20,
        )
    )
    with pytest.raises(AttentionCaptureError, match="causal language model"):
        with capture_attention(bert, AttentionPlan()):
            pass
    model = tiny_models["llama"]
    inputs, _ = padded([6, 6], 6)
    ref = torch.zeros(3, 6, 6, dtype=torch.bool)
    with pytest.raises(AttentionCaptureError, match="batch 3, the model got batch 2"):
        with capture_attention(model, AttentionPlan(reference=ref)):
            model(**inputs)
    assert model.config._attn_implementation == "eager"
    with pytest.raises(AttentionCaptureError, match="cover 4 positions, the batch has 6"):
        with capture_attention(model, AttentionPlan(reference=torch.zeros(2, 4, 4).bool())):
            model(**inputs)
    with pytest.raises(AttentionCaptureError, match=r"Intervention.heads is \(1, 4\)"):
        with capture_attention(
            model,
            AttentionPlan(reference=ref[:2], intervention=Intervention(torch.ones(1, 4).bool())),
        ):
            pass
    with pytest.raises(ValueError, match="mode must be one of"):
        Intervention(heads_mask(), mode="boost")
    with pytest.raises(ValueError, match="needs a reference mask"):
        AttentionPlan(head_mass=True)


def test_architecture_that_bypasses_the_interface(tiny_models, monkeypatch):
    """An attention module that never calls the registered function is caught after the
    first forward (here: Llama's attention replaced by one that returns zeros)."""
    model = tiny_models["llama"]

    def no_dispatch(self, hidden_states, *args, **kwargs):
        return torch.zeros_like(hidden_states), None

    attention_class = type(model.model.layers[0].self_attn)
    monkeypatch.setattr(attention_class, "forward", no_dispatch)
    inputs, _ = padded([5], 5)
    with pytest.raises(AttentionCaptureError, match="does not dispatch through"):
        with capture_attention(model, AttentionPlan()):
            model(**inputs)
    assert model.config._attn_implementation == "eager"


def test_what_capture_does_not_compute_is_refused(tiny_models, monkeypatch):
    """An argument that would change the weights in a way capture does not compute (a
    T5-style position bias, sparse key indices) is refused in one line rather than ignored;
    so is an attention module without `layer_idx` (capture could not tell its layer)."""
    from harness.engine.capture import attention_forward

    model = tiny_models["llama"]
    attention = model.model.layers[0].self_attn
    query, key = torch.zeros(1, HEADS, 3, 8), torch.zeros(1, 2, 3, 8)
    for name in ("position_bias", "indices"):
        with pytest.raises(AttentionCaptureError, match=f"LlamaAttention passes {name} to"):
            attention_forward(attention, query, key, key, None, **{name: torch.zeros(1)})
    monkeypatch.delattr(attention, "layer_idx")
    inputs, _ = padded([5], 5)
    with pytest.raises(AttentionCaptureError, match="LlamaAttention has no layer_idx"):
        with capture_attention(model, AttentionPlan()):
            model(**inputs, use_cache=False)
    assert model.config._attn_implementation == "eager"


def test_the_implementation_name_is_registered_and_state_does_not_leak(tiny_models):
    from transformers import AttentionInterface

    model = tiny_models["qwen2"]
    inputs, _ = padded([6], 6)
    with capture_attention(model, AttentionPlan()) as record:
        assert model.config._attn_implementation == ATTENTION_NAME
        model(**inputs)
    assert ATTENTION_NAME in AttentionInterface._global_mapping
    assert record.calls == LAYERS and record.head_rows is None and record.layer_maps is None
    # Outside a context the function is plain eager attention.
    with torch.no_grad():
        plain = model(**inputs).logits
        model.set_attn_implementation(ATTENTION_NAME)
        try:
            assert torch.equal(model(**inputs).logits, plain)
        finally:
            model.set_attn_implementation("eager")


def test_nested_contexts_record_in_the_innermost(tiny_models):
    model = tiny_models["llama"]
    inputs, _ = padded([6], 6)
    with torch.no_grad(), capture_attention(model, AttentionPlan(rollout=True)) as outer:
        with capture_attention(model, AttentionPlan(rollout=True)) as inner:
            model(**inputs)
        assert model.config._attn_implementation == ATTENTION_NAME
        model(**inputs)
    assert model.config._attn_implementation == "eager"
    assert inner.calls == LAYERS and outer.calls == LAYERS


def test_static_cache_is_refused(tiny_models):
    """A preallocated cache has more key slots than positions: the position rule breaks."""
    model = tiny_models["llama"]
    inputs, _ = padded([6, 6], 6)
    with pytest.raises(AttentionCaptureError, match="needs the default DynamicCache"):
        with capture_attention(model, AttentionPlan()):
            model.generate(
                input_ids=inputs["input_ids"],
                attention_mask=inputs["attention_mask"],
                max_new_tokens=3,
                cache_implementation="static",
                do_sample=False,
                pad_token_id=0,
            )
    assert model.config._attn_implementation == "eager"


def test_a_block_without_forwards_records_nothing(tiny_models):
    ref = torch.zeros(1, 4, 4, dtype=torch.bool)
    with capture_attention(tiny_models["llama"], AttentionPlan(reference=ref, rollout=True)) as r:
        pass
    assert r.calls == 0 and r.layer_maps == [] and r.head_mass.abs().sum() == 0


@pytest.mark.slow
def test_real_gemma3_when_fetched():
    """The real Gemma-3-270M (GQA 4:1, sliding layers, query_pre_attn_scalar) once
    `attentionspan models fetch gemma3-270m` has put it in the cache; skipped otherwise.
    (SmolLM2-135M passed them too, at atol 1e-4, when this was written; tiny Llama covers it.)"""
    name = "gemma3-270m"
    from transformers import AutoModelForCausalLM

    from harness.foundation.models import known_model_dir

    folder = known_model_dir(name)
    if not (folder / "model.safetensors").exists():
        pytest.skip(f"{name} is not in the cache (attentionspan models fetch {name})")
    model = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    inputs, _ = padded([16, 11], 16, seed=3)
    new = 5
    ref = random_reference(inputs["attention_mask"], first_row=15, length=16 + new)
    with torch.no_grad():
        eager = model(**inputs, output_attentions=True)
        prefill_plan = AttentionPlan(reference=ref[:, :16, :16], patterns=(1,))
        with capture_attention(model, prefill_plan) as r:
            out = model(**inputs)
        torch.testing.assert_close(out.logits, eager.logits, atol=1e-5, rtol=0)
        last = model.config.num_hidden_layers - 1
        torch.testing.assert_close(r.patterns[PATTERN.format(last)], eager.attentions[last][1:])
        heads = torch.zeros(model.config.num_hidden_layers, model.config.num_attention_heads)
        heads[last // 2, 0] = 1
        plan = lambda: AttentionPlan(  # noqa: E731
            reference=ref,
            rollout=True,
            intervention=Intervention(heads.bool(), 0.5, prefill=True),
        )
        gen, rec = _generate(model, inputs, new, plan())
        full, rec_full, _ = _full_forward(model, gen.sequences, inputs["attention_mask"], plan())
    # Logits reach about 160 here; plain eager's own cached-versus-full difference is 1e-4,
    # and adding C = 0.5 (rows summing to 1.5) amplifies float noise to about 6e-4.
    steps, forward = torch.stack(gen.logits, 1), full.logits[:, 15:-1]
    assert (steps - forward).abs().max() <= 1e-5 * forward.abs().max()
    assert torch.equal(gen.sequences[:, 16:], forward.argmax(-1))
    t = rec.length
    torch.testing.assert_close(
        rec.head_rows[:, :t], rec_full.head_rows[:, :t], equal_nan=True, atol=1e-5, rtol=0
    )


def test_restore_sets_the_reference_mass_to_the_level_and_keeps_rows_summing_to_one(
    tiny_models,
):
    """mode "restore": a selected head's mass on the cells becomes its level, spread as the
    weights were; the rest of the row is scaled so the row sums to 1; other heads untouched."""
    model = tiny_models["llama"]
    inputs, _ = padded([10, 10], 10)
    ref = random_reference(inputs["attention_mask"], per_row=2)
    heads = heads_mask((0, 1), (0, 2))
    levels = torch.zeros(heads.shape)
    levels[0, 1], levels[0, 2] = 0.6, 0.05
    iv = Intervention(heads, mode="restore", levels=levels)
    eager, got, _ = _layer0(model, inputs, iv, ref)
    for head, level in ((1, 0.6), (2, 0.05)):
        # rows with references and somewhere else to put the rest (row 0 sees one key only)
        has = ref.any(-1) & ((eager[:, head] * ref).sum(-1) < 1 - 1e-6)  # [b, q]
        assert has.sum() >= 10
        mass = (got[:, head] * ref).sum(-1)
        torch.testing.assert_close(mass[has], torch.full_like(mass[has], level), atol=1e-5, rtol=0)
        # spread as before: ratios among the cells of a row are kept
        old = eager[:, head] * ref
        expected = old / old.sum(-1, keepdim=True).clamp_min(1e-30) * level
        torch.testing.assert_close((got[:, head] * ref)[has], expected[has], atol=1e-5, rtol=0)
        torch.testing.assert_close(
            got[:, head].sum(-1)[has], torch.ones_like(mass[has]), atol=1e-5, rtol=0
        )
        torch.testing.assert_close(got[:, head][~has], eager[:, head][~has], atol=0, rtol=0)
    untouched = [h for h in range(HEADS) if h not in (1, 2)]
    torch.testing.assert_close(got[:, untouched], eager[:, untouched], atol=0, rtol=0)


def test_restore_needs_levels_in_range():
    heads = torch.ones(LAYERS, HEADS, dtype=torch.bool)
    with pytest.raises(ValueError, match="levels is required"):
        Intervention(heads, mode="restore")
    with pytest.raises(ValueError, match="levels is required"):
        Intervention(heads, levels=torch.zeros(LAYERS, HEADS))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        Intervention(heads, mode="restore", levels=torch.full((LAYERS, HEADS), 1.5))
    with pytest.raises(ValueError, match="must be \\[layers, heads\\]"):
        Intervention(heads, mode="restore", levels=torch.zeros(LAYERS, HEADS + 1))


def test_named_references_in_one_forward_equal_separate_plans(tiny_models, attn_tokenizer):
    """A plan's named references (ref-1, ref, ref+1, one with a threshold) are recorded in
    one forward and equal what a plan with that mask alone records."""
    from attentionspan_datasets.splits import iter_split
    from harness.engine.capture import Reference
    from harness.engine.inference import collate_left
    from harness.engine.positions import causal_valid, shift_mask
    from harness.foundation.tokenization import CharTokenizer, encode_instance

    char_tok = CharTokenizer(attn_tokenizer)
    xs = list(iter_split("reversal_id", split="validation", stop=3))
    batch = collate_left([encode_instance(char_tok, x) for x in xs], char_tok.pad_id)
    ref = batch.reference_mask()
    masks = {
        f"ref{k:+d}": causal_valid(shift_mask(ref, k), batch.attention_mask) for k in (-1, 0, 1)
    }
    model = tiny_models["gemma3"]
    plan = AttentionPlan(references={**masks, "thr": Reference(masks["ref+0"], threshold=0.1)})
    with torch.inference_mode(), capture_attention(model, plan) as together:
        model(**batch.model_inputs())
    assert together.head_rows is None
    for name, mask in masks.items():
        with torch.inference_mode(), capture_attention(model, AttentionPlan(reference=mask)) as one:
            model(**batch.model_inputs())
        assert torch.allclose(together.mass(name), one.head_mass, atol=1e-6)
        assert torch.equal(together.named_rows[name].isnan(), one.head_rows.isnan())
    plan = AttentionPlan(reference=masks["ref+0"], head_mass=False, patterns=(0, 1, 2))
    with torch.inference_mode(), capture_attention(model, plan) as maps:
        model(**batch.model_inputs())
    want = torch.zeros(2, 4)
    for layer in range(2):
        w = maps.patterns[f"blocks.{layer}.attn.hook_pattern"]
        want[layer] = torch.einsum("bhqk,bqk->h", w * (w > 0.1), masks["ref+0"].float())
    assert torch.allclose(together.mass("thr"), want, atol=1e-5)
    assert not torch.allclose(together.mass("thr"), together.mass("ref+0"))
    with pytest.raises(ValueError, match="threshold"):
        Reference(masks["ref+0"], threshold=1.5)


@pytest.mark.parametrize("kind", ["llama", "gemma3"])
def test_one_setting_per_row_equals_each_setting_alone(tiny_models, attn_tokenizer, kind):
    """A batch whose rows carry different settings (standard, conditional, knock-out,
    renormalised, none) gives each row the maps its setting alone gives it."""
    from attentionspan_datasets.splits import iter_split
    from harness.engine.inference import collate_left
    from harness.foundation.tokenization import CharTokenizer, encode_instance

    char_tok = CharTokenizer(attn_tokenizer)
    x = next(iter(iter_split("reversal_id", split="validation", stop=1)))
    enc = encode_instance(char_tok, x)
    model = tiny_models[kind]
    heads = torch.zeros(LAYERS, HEADS, dtype=torch.bool)
    heads[0, 1] = heads[1, 2] = heads[1, 3] = True
    settings = [
        dict(heads=heads, strength=1.0),
        dict(heads=heads, strength=0.5, mode="conditional", threshold=0.05),
        dict(heads=heads, mode="knockout"),
        dict(heads=heads, strength=2.0, renormalise=True),
        dict(heads=torch.zeros_like(heads), strength=3.0),
    ]
    rows = len(settings)
    batch = collate_left([enc] * rows, char_tok.pad_id)
    ref = batch.reference_mask()
    keep = tuple(range(rows))
    per_row = Intervention(
        heads=torch.stack([s["heads"] for s in settings]),
        strength=torch.tensor([s.get("strength", 1.0) for s in settings]),
        mode=[s.get("mode", "standard") for s in settings],
        threshold=torch.tensor([s.get("threshold", 0.0) for s in settings]),
        renormalise=[s.get("renormalise", False) for s in settings],
    )
    plan = AttentionPlan(reference=ref, intervention=per_row, patterns=keep)
    with torch.inference_mode(), capture_attention(model, plan) as together:
        logits = model(**batch.model_inputs()).logits
    for r, setting in enumerate(settings):
        one = collate_left([enc], char_tok.pad_id)
        plan = AttentionPlan(reference=ref[:1], intervention=Intervention(**setting), patterns=(0,))
        with torch.inference_mode(), capture_attention(model, plan) as alone:
            want = model(**one.model_inputs()).logits
        assert torch.allclose(logits[r], want[0], atol=1e-5)
        for name, maps in alone.patterns.items():
            assert torch.allclose(together.patterns[name][r], maps[0], atol=1e-6)
    with pytest.raises(ValueError, match="mode"):
        Intervention(heads=torch.stack([heads, heads]), mode=["standard"] * 3)
    with pytest.raises(ValueError, match="strength"):
        Intervention(heads=torch.stack([heads, heads]), strength=torch.ones(3))
    with pytest.raises(AttentionCaptureError, match="per-row"):
        plan = AttentionPlan(reference=ref, intervention=Intervention(torch.stack([heads] * 2)))
        with capture_attention(model, plan):
            model(**batch.model_inputs())


def test_restore_rows_in_a_per_row_batch_equal_restore_alone(tiny_models):
    """Restore runs on the same per-row path as the other modes: in a batch whose rows
    restore (each with its own levels), reinforce or do nothing, every row's maps and logits
    are those of its setting alone, bit for bit."""
    model = tiny_models["gemma3"]
    inputs, _ = padded([12], 12)
    ref = random_reference(inputs["attention_mask"], per_row=2)
    heads = heads_mask((0, 1), (1, 2))
    g = torch.Generator().manual_seed(3)
    settings = [
        dict(heads=heads, mode="restore", levels=torch.rand(LAYERS, HEADS, generator=g)),
        dict(heads=heads, strength=1.5),
        dict(heads=heads, mode="restore", levels=torch.rand(LAYERS, HEADS, generator=g)),
        dict(heads=torch.zeros_like(heads), mode="restore", levels=torch.ones(LAYERS, HEADS)),
    ]
    rows = len(settings)
    batch = {k: v.repeat(rows, 1) for k, v in inputs.items()}
    per_row = Intervention(
        heads=torch.stack([s["heads"] for s in settings]),
        strength=torch.tensor([s.get("strength", 0.0) for s in settings]),
        mode=[s.get("mode", "standard") for s in settings],
        levels=torch.stack([s.get("levels", torch.zeros(LAYERS, HEADS)) for s in settings]),
    )
    plan = AttentionPlan(
        reference=ref.repeat(rows, 1, 1), intervention=per_row, patterns=(0, 1, 2, 3)
    )
    with torch.no_grad(), capture_attention(model, plan) as together:
        logits = model(**batch).logits
    for r, setting in enumerate(settings):
        plan = AttentionPlan(reference=ref, intervention=Intervention(**setting), patterns=(0,))
        with torch.no_grad(), capture_attention(model, plan) as alone:
            want = model(**inputs).logits
        torch.testing.assert_close(logits[r], want[0], atol=0, rtol=0)
        for name, maps in alone.patterns.items():
            torch.testing.assert_close(together.patterns[name][r], maps[0], atol=0, rtol=0)
