"""harness.engine.supervision and harness.foundation.supervision_options: the losses on hand-made
attention rows (exact numbers), the recorder on a tiny random Llama (the weights it reads are
eager attention's, its graph reaches the supervised layers only, and it changes nothing in
the forward), the head choices and the weight's schedule."""

from __future__ import annotations

import math
import string

import pytest
import torch

from harness.engine.supervision import Supervision, SupervisionRecorder, row_losses, supervise
from harness.foundation.supervision_options import HeadChoice, SupervisionOptions

LN2 = math.log(2)


# --- the losses on hand-made rows ---------------------------------------------------------
def test_the_losses_of_one_row_have_their_known_values():
    weights = torch.tensor([0.5, 0.25, 0.125, 0.125])
    cells = torch.tensor([True, True, False, False])
    # ce: the mask normalised over its two keys (1/2, 1/2): -(ln 0.5 + ln 0.25) / 2
    assert row_losses(weights, cells, "ce").item() == pytest.approx(1.5 * LN2, abs=1e-7)
    # mass: -ln(0.5 + 0.25)
    assert row_losses(weights, cells, "mass").item() == pytest.approx(-math.log(0.75), abs=1e-7)
    # all the weight on one cell: both are 0
    one = torch.tensor([0.0, 1.0, 0.0])
    only = torch.tensor([False, True, False])
    assert row_losses(one, only, "ce").item() == 0.0
    assert row_losses(one, only, "mass").item() == 0.0
    # a weight of exactly 0 on a cell is finite (the smallest float32), not inf or nan
    assert math.isfinite(row_losses(one, ~only, "ce").item())
    with pytest.raises(ValueError, match="'loss' must be one of ce, mass, got 'kl'"):
        row_losses(weights, cells, "kl")


def hand_made_weights():
    """[batch 1, heads 2, q 3, k 3] rows that sum to 1, causal."""
    return torch.tensor(
        [
            [
                [[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.25, 0.25, 0.5]],
                [[1.0, 0.0, 0.0], [0.75, 0.25, 0.0], [0.5, 0.25, 0.25]],
            ]
        ]
    )


def test_the_recorder_means_over_supervised_rows_and_heads_of_the_supervised_layers():
    reference = torch.zeros(1, 3, 3, dtype=torch.bool)
    reference[0, 1, 0] = True  # row 1: key 0
    reference[0, 2, [0, 2]] = True  # row 2: keys 0 and 2; row 0 has no cell: not supervised
    heads = torch.tensor([[False, False], [True, True]])  # layer 1, both heads
    for kind, expected in (
        # (row 1, head 0), (row 1, head 1), (row 2, head 0), (row 2, head 1)
        ("mass", [-math.log(0.5), -math.log(0.75), -math.log(0.75), -math.log(0.75)]),
        (
            "ce",
            [
                -math.log(0.5),
                -math.log(0.75),
                -(math.log(0.25) + math.log(0.5)) / 2,
                -(math.log(0.5) + math.log(0.25)) / 2,
            ],
        ),
    ):
        recorder = SupervisionRecorder(Supervision(heads, reference, kind), "cpu")
        recorder(0, hand_made_weights() * 0 + 1 / 3, 0, 0)  # layer 0 is not supervised
        recorder(1, hand_made_weights(), 0, 0)
        assert recorder.rows == 2 and recorder.count == 4
        assert recorder.loss().item() == pytest.approx(sum(expected) / 4, abs=1e-6), kind


def test_one_selected_head_reads_only_that_head():
    reference = torch.zeros(1, 3, 3, dtype=torch.bool)
    reference[0, 2, 2] = True
    heads = torch.tensor([[False, True]])  # layer 0, head 1
    recorder = SupervisionRecorder(Supervision(heads, reference, "mass"), "cpu")
    recorder(0, hand_made_weights(), 0, 0)
    assert recorder.loss().item() == pytest.approx(-math.log(0.25), abs=1e-7)


def test_cells_the_attention_mask_keeps_out_are_not_supervised():
    """A sliding window: row 2 cannot see key 0, row 1 sees none of its cells (dropped)."""
    reference = torch.zeros(1, 3, 3, dtype=torch.bool)
    reference[0, 1, 0] = True
    reference[0, 2, [0, 2]] = True
    allowed = torch.tensor([[1, 0, 0], [0, 1, 0], [0, 1, 1]], dtype=torch.bool)
    mask = torch.zeros(1, 1, 3, 3).masked_fill(~allowed, torch.finfo(torch.float32).min)
    heads = torch.tensor([[True, False]])
    recorder = SupervisionRecorder(Supervision(heads, reference, "ce"), "cpu")
    recorder(0, hand_made_weights(), 0, 0, mask)
    assert recorder.count == 1  # row 2, head 0, its one cell left: key 2 (weight 0.5)
    assert recorder.loss().item() == pytest.approx(LN2, abs=1e-7)
    recorder(0, hand_made_weights(), 0, 0, torch.zeros(1, 1, 3, 3))  # nothing kept out
    assert recorder.count == 3


def test_a_batch_without_supervised_rows_has_a_loss_of_zero():
    heads = torch.ones(1, 2, dtype=torch.bool)
    recorder = SupervisionRecorder(
        Supervision(heads, torch.zeros(1, 3, 3, dtype=torch.bool)), "cpu"
    )
    recorder(0, hand_made_weights(), 0, 0)
    assert recorder.rows == 0 and recorder.loss().item() == 0.0


@pytest.mark.parametrize(
    "make,match",
    [
        (lambda r: Supervision(torch.ones(2, 2, dtype=torch.bool), r, "kl"), "'loss' must be"),
        (lambda r: Supervision(torch.zeros(2, 2, dtype=torch.bool), r), "selects no head"),
        (lambda r: Supervision(torch.ones(2, 2), r), r"heads must be a bool tensor"),
        (
            lambda r: Supervision(torch.ones(2, 2, dtype=torch.bool), r[:, :2]),
            r"must be \[batch, L, L\]",
        ),
    ],
)
def test_a_bad_plan_is_refused(make, match):
    with pytest.raises(ValueError, match=match):
        make(torch.zeros(1, 3, 3, dtype=torch.bool))


# --- on a tiny random Llama -------------------------------------------------------------
@pytest.fixture(scope="module")
def llama():
    from transformers import AutoModelForCausalLM

    from harness.foundation.tokenization import make_char_tokenizer
    from tests.tiny_models import tiny_config

    tokenizer = make_char_tokenizer(string.printable)
    torch.manual_seed(0)
    config = tiny_config("llama", tokenizer, initializer_range=0.3)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    return model.train()  # dropout is 0: the forward is deterministic


def llama_batch():
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(5, 90, (2, 9), generator=g)
    mask = torch.ones(2, 9, dtype=torch.long)
    mask[1, 7:] = 0  # right padding, as training collates
    reference = torch.zeros(2, 9, 9, dtype=torch.bool)
    for b, q, keys in ((0, 4, [1, 2]), (0, 6, [0]), (0, 8, [3, 8]), (1, 5, [2]), (1, 6, [6])):
        reference[b, q, keys] = True
    inputs = {"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, -100)}
    return inputs, reference


def test_the_loss_is_the_one_of_eager_attention_maps(llama):
    """The recorder reads the weights eager attention returns (`output_attentions`)."""
    inputs, reference = llama_batch()
    heads = torch.zeros(2, 4, dtype=torch.bool)
    heads[0, 1] = heads[1, 0] = heads[1, 3] = True
    with torch.no_grad():
        maps = llama(**inputs, output_attentions=True).attentions  # per layer [b, h, q, k]
        for kind in ("ce", "mass"):
            with supervise(llama, Supervision(heads, reference, kind)) as recorder:
                llama(**inputs)
            losses = []
            for layer, head in heads.nonzero().tolist():
                for b, q in reference.any(-1).nonzero().tolist():
                    cells = reference[b, q]
                    row = maps[layer][b, head, q]
                    losses.append(row_losses(row[cells], torch.ones(int(cells.sum())) > 0, kind))
            expected = torch.stack(losses).mean()
            assert recorder.count == len(losses) == 15
            assert recorder.loss().item() == pytest.approx(expected.item(), rel=1e-6), kind


def test_a_sliding_window_keeps_the_cells_out_of_its_reach_out_of_the_loss():
    """Gemma3 with a window of 4 keys on both layers: row 8 cannot reach key 1 (its weight
    is 0 whatever the heads do), so only row 8's key 6 and row 4's key 2 are supervised."""
    from transformers import AutoModelForCausalLM

    from harness.foundation.tokenization import make_char_tokenizer
    from tests.tiny_models import tiny_config

    tokenizer = make_char_tokenizer(string.printable)
    torch.manual_seed(0)
    config = tiny_config(
        "gemma3", tokenizer, sliding_window=4, layer_types=["sliding_attention"] * 2
    )
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager").train()
    inputs = {"input_ids": torch.randint(5, 90, (1, 9)), "attention_mask": torch.ones(1, 9)}
    reference = torch.zeros(1, 9, 9, dtype=torch.bool)
    reference[0, 4, 2] = True
    reference[0, 8, [1, 6]] = True
    reference[0, 7, 0] = True  # nothing in reach: not supervised
    heads = torch.ones(2, 4, dtype=torch.bool)
    with torch.no_grad():
        maps = model(**inputs, output_attentions=True).attentions
        assert float(maps[0][0, :, 8, 1].abs().sum()) == 0.0  # out of the window
        with supervise(model, Supervision(heads, reference, "mass")) as recorder:
            model(**inputs)
    expected = torch.stack(
        [-torch.log(m[0, :, q, k]) for m in maps for q, k in ((4, 2), (8, 6))]
    ).mean()
    assert recorder.count == 2 * 2 * 4  # rows 4 and 8, both layers, every head
    assert recorder.loss().item() == pytest.approx(expected.item(), rel=1e-6)


def test_the_graph_reaches_the_supervised_layer_and_those_below_only(llama):
    inputs, reference = llama_batch()
    heads = torch.zeros(2, 4, dtype=torch.bool)
    heads[0, 2] = True  # layer 0 only: layer 1's weights play no part in its loss
    llama.zero_grad(set_to_none=True)
    with supervise(llama, Supervision(heads, reference, "ce")) as recorder:
        llama(**inputs)
    recorder.loss().backward()
    attn = [layer.self_attn for layer in llama.model.layers]
    assert attn[0].q_proj.weight.grad.abs().sum() > 0
    assert attn[1].q_proj.weight.grad is None
    llama.zero_grad(set_to_none=True)


def test_supervision_changes_nothing_in_the_forward_and_weight_0_nothing_in_the_gradient(llama):
    """Capture computes eager attention: the LM loss is the eager model's to the bit, and
    LM loss + 0 x supervision loss has the same gradients as the LM loss alone."""
    inputs, reference = llama_batch()
    heads = torch.ones(2, 4, dtype=torch.bool)
    llama.zero_grad(set_to_none=True)
    plain = llama(**inputs).loss
    plain.backward()
    expected = {n: p.grad.clone() for n, p in llama.named_parameters()}
    llama.zero_grad(set_to_none=True)
    with supervise(llama, Supervision(heads, reference, "ce")) as recorder:
        loss = llama(**inputs).loss
    assert torch.equal(loss, plain)
    assert recorder.loss().item() > 0
    (loss + 0.0 * recorder.loss()).backward()
    for name, param in llama.named_parameters():
        assert torch.equal(param.grad, expected[name]), name
    llama.zero_grad(set_to_none=True)


def test_heads_of_another_shape_and_a_cached_step_are_refused(llama):
    inputs, reference = llama_batch()
    with pytest.raises(ValueError, match=r"heads is \(2, 2\), the model has \[layers, heads\]"):
        with supervise(llama, Supervision(torch.ones(2, 2, dtype=torch.bool), reference)):
            pass
    every = torch.ones(2, 4, dtype=torch.bool)
    recorder = SupervisionRecorder(Supervision(every, reference), "cpu")
    with pytest.raises(ValueError, match="one forward over all 9 positions"):
        recorder(0, torch.rand(2, 4, 1, 9), 8, 0)


# --- the options: head choices and the weight's schedule --------------------------------
@pytest.mark.parametrize(
    "text,pairs",
    [
        ("layer:1", [(1, 0), (1, 1), (1, 2)]),
        ("layer:0,2", [(0, 0), (0, 1), (0, 2), (2, 0), (2, 1), (2, 2)]),
        ("0.1,1.2", [(0, 1), (1, 2)]),
        ("0.1, 2.0", [(0, 1), (2, 0)]),
        ("top:2", [(2, 1), (0, 0)]),
    ],
)
def test_head_choices_resolve_on_a_model_shape(text, pairs):
    ranking = [(2, 1), (0, 0), (1, 1)]
    assert HeadChoice.parse(text).resolve(3, 3, ranking) == pairs


@pytest.mark.parametrize(
    "text,match",
    [
        ("layer:x", "must be layer:L"),
        ("layer:", "must be layer:L"),
        ("top:0", r"top:N takes one N >= 1"),
        ("top:1,2", r"top:N takes one N >= 1"),
        ("layer:1,1", "a layer named twice"),
        ("0.1,0.1", "a head named twice"),
        ("1", "must be layer:L"),
        ("heads:1", "must be layer:L"),
        ("-1.0", "must be layer:L"),
    ],
)
def test_a_head_choice_that_names_no_heads_is_refused(text, match):
    with pytest.raises(ValueError, match=f"'attention_supervision' {match}|{match}"):
        HeadChoice.parse(text)


@pytest.mark.parametrize(
    "text,match",
    [
        ("layer:3", r"'layer:3': layer 3 is out of range; the model has 3 layers \(0-2\)"),
        ("1.3", r"head 1.3 is out of range; the model has 3 heads per layer \(0-2\)"),
        ("top:10", r"the ranking holds 9 heads \(3 layers x 3 heads\), fewer than 10"),
    ],
)
def test_a_head_the_model_lacks_is_refused_naming_the_option(text, match):
    ranking = [(la, h) for la in range(3) for h in range(3)]
    with pytest.raises(ValueError, match=match):
        HeadChoice.parse(text).resolve(3, 3, ranking)


def test_the_weight_follows_its_schedule():
    def weights(schedule, **extra):
        options = SupervisionOptions(
            "layer:0", supervision_weight=2.0, supervision_schedule=schedule, **extra
        )
        return [options.weight_at(step, 4) for step in range(4)]

    assert weights("constant") == [2.0, 2.0, 2.0, 2.0]
    assert weights("linear") == [2.0, 1.5, 1.0, 0.5]  # to 0 after the last step
    assert weights("warmup", supervision_warmup=0.5) == [0.0, 1.0, 2.0, 2.0]
    assert SupervisionOptions().weight_at(0, 4) == 0.0  # off
