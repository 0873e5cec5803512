"""Reference rows of Instances land on the right token positions of a collated batch, through
instruction, few-shot block, chat template and padding."""

from __future__ import annotations

import copy

import pytest
import torch

from attentionspan_datasets.tasks.base import Instance
from harness.engine.inference import collate_left
from harness.engine.positions import (
    causal_valid,
    reference_mask,
    shift_mask,
    target_index,
    task_columns,
)
from harness.foundation.tokenization import CharTokenizer, encode_instance

CHAT_TEMPLATE = (
    "{% for m in messages %}<|user|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def reversal(text: str, empty_row: int | None = None) -> Instance:
    """A reversal instance: target[i] = text[n-1-i] refers to prompt position n-1-i."""
    n = len(text)
    reference = [[n - 1 - i] for i in range(n)]
    if empty_row is not None:
        reference[empty_row] = []
    return Instance(
        task="string_reversal", prompt=text + "=", target=text[::-1], reference=reference
    )


INSTANCES = [reversal("abcdefg"), reversal("xyz", empty_row=1), reversal("hello world")]
SHOTS = [reversal("qr"), reversal("mno")]


@pytest.fixture(params=["plain", "instruction+fewshot", "chat"])
def encodings(request, attn_tokenizer):
    tokenizer = copy.deepcopy(attn_tokenizer)
    tokenizer.chat_template = CHAT_TEMPLATE
    char_tok = CharTokenizer(tokenizer)
    options = {
        "plain": {},
        "instruction+fewshot": {"instruction": "Reverse the string.", "fewshot": SHOTS},
        "chat": {"instruction": "Reverse it.", "fewshot": SHOTS[:1], "chat": True},
    }[request.param]
    return char_tok, [encode_instance(char_tok, x, **options) for x in INSTANCES]


def test_reference_cells_hold_the_character_the_row_predicts(encodings):
    """For reversal, the referenced key holds the very character that its query predicts."""
    char_tok, encs = encodings
    batch = collate_left(encs, char_tok.pad_id)
    ref = reference_mask(batch)
    assert ref.shape == (3, batch.total_len, batch.total_len)
    assert int(ref.sum()) == sum(len(r) for e in encs for r in e.reference)
    b, q, k = ref.nonzero(as_tuple=True)
    assert torch.equal(batch.input_ids[b, k], batch.input_ids[b, q + 1])
    assert bool((k <= q).all()) and bool(batch.attention_mask[b, k].bool().all())
    # The empty reference row (target[1] of "xyz") stays empty; its neighbours do not.
    row = batch.prompt_width - 1
    assert ref[1, row].any() and not ref[1, row + 1].any() and ref[1, row + 2].any()
    assert torch.equal(ref, batch.reference_mask())


def test_generation_mask_covers_every_step_and_matches_teacher_forcing(encodings):
    """Prompts end at one column, so the i-th generated token uses gold row i unchanged."""
    char_tok, encs = encodings
    prompts = collate_left(encs, char_tok.pad_id, with_answer=False)
    full = collate_left(encs, char_tok.pad_id)
    new = 15
    gen = reference_mask(prompts, length=prompts.prompt_width + new)
    tf = reference_mask(full)
    assert gen.shape[-1] == prompts.prompt_width + new > tf.shape[-1]
    assert torch.equal(gen[:, : tf.shape[1], : tf.shape[2]], tf)
    assert not gen[:, tf.shape[1] :].any()
    with pytest.raises(ValueError, match="too short for the references"):
        reference_mask(prompts)


def test_task_columns_are_the_prompt_and_target_text(encodings):
    char_tok, encs = encodings
    batch = collate_left(encs, char_tok.pad_id)
    cols = task_columns(batch)
    for b, x in enumerate(INSTANCES):
        ids = batch.input_ids[b][cols[b]].tolist()
        assert char_tok.decode(ids) == x.prompt + x.target


def test_target_index_names_the_predicted_character(encodings):
    char_tok, encs = encodings
    batch = collate_left(encs, char_tok.pad_id)
    index = target_index(batch)
    for b, x in enumerate(INSTANCES):
        rows = (index[b] >= 0).nonzero().flatten()
        assert index[b, rows].tolist() == list(range(len(x.target)))
        assert char_tok.decode(batch.input_ids[b, rows + 1].tolist()) == x.target


def test_shift_mask_then_causal_valid():
    """ref + k (the one shift, formerly also `shift_keys`): cells leaving the sequence are
    dropped; `causal_valid` drops those after their query and those on padding."""
    mask = torch.zeros(1, 6, 6, dtype=torch.bool)
    mask[0, 4, 1] = mask[0, 5, 0] = mask[0, 3, 3] = True
    every = torch.ones(1, 6, dtype=torch.long)
    plus = causal_valid(shift_mask(mask, 1), every)
    assert plus[0].nonzero().tolist() == [[4, 2], [5, 1]]  # (3, 4) is not causal: dropped
    minus = causal_valid(shift_mask(mask, -1), every)
    assert minus[0].nonzero().tolist() == [[3, 2], [4, 0]]
    assert not shift_mask(mask, 6).any()
    assert torch.equal(shift_mask(mask, 0), mask)
    padded = every.clone()
    padded[0, 2] = 0
    assert causal_valid(shift_mask(mask, 1), padded)[0].nonzero().tolist() == [[5, 1]]


def test_generate_batch_under_capture_matches_one_forward(encodings, tiny_models):
    """Through harness.engine.inference: rows recorded while generating from the shared layout equal
    those of one forward over prompt + generated ids, with the gold reference mask."""
    from harness.engine.capture import AttentionPlan, capture_attention
    from harness.engine.inference import generate_batch

    char_tok, encs = encodings
    model = tiny_models["gemma3"]
    new = max(e.target_len for e in encs) + 1
    prompts = collate_left(encs, char_tok.pad_id, with_answer=False)
    ref = reference_mask(prompts, length=prompts.prompt_width + new)
    with capture_attention(model, AttentionPlan(reference=ref)) as during:
        gen = generate_batch(model, char_tok, encs, new, eos_token_id=None)
    batch = gen.batch
    assert batch.total_len == ref.shape[-1]
    with capture_attention(model, AttentionPlan(reference=ref)) as after, torch.no_grad():
        model(**batch.model_inputs())
    t = during.length
    torch.testing.assert_close(
        during.head_rows[:, :t], after.head_rows[:, :t], equal_nan=True, atol=1e-5, rtol=0
    )
    assert int(during.target_rows.sum()) == sum(1 for e in encs for r in e.reference if r)
