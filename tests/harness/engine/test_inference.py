"""harness.engine.inference: one left-padded layout for generation and teacher forcing, batched
equals one at a time on Llama, Qwen2 and Gemma3, any attention implementation, extra
`generate` options, and rows cut after EOS."""

from __future__ import annotations

import pytest
import torch

from attentionspan_datasets import iter_instances
from harness.engine.inference import collate_left, generate_batch, teacher_forced_batch
from harness.foundation.data import PromptConfig
from harness.foundation.models import load_model
from harness.foundation.tokenization import CharTokenizer

KINDS = ["llama", "qwen2", "gemma3"]


@pytest.fixture(scope="module")
def models(tiny_model_dirs):
    loaded = {}
    for kind in KINDS:
        model, tokenizer = load_model(str(tiny_model_dirs[kind]))
        model.eval()
        loaded[kind] = (model, CharTokenizer(tokenizer))
    return loaded


def encodings_for(char_tok, n=8, instruction=None):
    # Lengths 1-30 make the left padding long (and cross Gemma3's sliding window of 16).
    instances = list(iter_instances("string_reversal", stop=n, max_length=30))
    prompt = PromptConfig(instruction=instruction)
    return [prompt.encode(char_tok, x) for x in instances]


def test_layout_puts_every_answer_at_the_same_column(char_tokenizer):
    char_tok = CharTokenizer(char_tokenizer)
    encodings = encodings_for(char_tok, n=5)
    full = collate_left(encodings, char_tok.pad_id)
    prompts = collate_left(encodings, char_tok.pad_id, with_answer=False)
    width = max(e.target_offset for e in encodings)
    assert full.prompt_width == prompts.prompt_width == width
    assert full.target_start.tolist() == [width] * 5
    assert torch.equal(full.input_ids[:, :width], prompts.input_ids)
    for b, enc in enumerate(encodings):
        shift = full.shifts[b]
        row = full.input_ids[b].tolist()
        assert row[shift : shift + len(enc.input_ids)] == enc.input_ids
        assert full.attention_mask[b].tolist() == (
            [0] * shift
            + [1] * len(enc.input_ids)
            + [0] * (full.total_len - shift - len(enc.input_ids))
        )
        # Positions count real tokens: the row sees what it would see alone.
        assert full.position_ids[b, shift : shift + len(enc.input_ids)].tolist() == list(
            range(len(enc.input_ids))
        )
        # Reference positions map to the columns of the referenced characters.
        for i, cols in enumerate(full.reference_columns(b)):
            for k in cols:
                assert full.input_ids[b, k] == enc.input_ids[k - shift]
            assert full.column(b, enc.target_offset + i) == width + i
    mask = full.reference_mask()
    b = 3
    for i, cols in enumerate(full.reference_columns(b)):
        assert sorted(torch.nonzero(mask[b, width + i - 1]).flatten().tolist()) == sorted(cols)


@pytest.mark.parametrize("kind", KINDS)
def test_batched_generation_equals_one_at_a_time(kind, models):
    model, char_tok = models[kind]
    encodings = encodings_for(char_tok)
    batched = generate_batch(model, char_tok, encodings, max_new_tokens=6)
    alone = [generate_batch(model, char_tok, [e], max_new_tokens=6) for e in encodings]
    assert batched.ids == [a.ids[0] for a in alone]
    assert batched.texts == [a.texts[0] for a in alone]
    assert any(len(ids) > 0 for ids in batched.ids)


@pytest.mark.parametrize("kind", KINDS)
def test_batched_teacher_forcing_equals_one_at_a_time(kind, models):
    model, char_tok = models[kind]
    encodings = encodings_for(char_tok, instruction="Reverse the string.")
    batched = teacher_forced_batch(model, char_tok, encodings)
    alone = [teacher_forced_batch(model, char_tok, [e]) for e in encodings]
    assert batched.predicted == [a.predicted[0] for a in alone]
    assert batched.correct == [a.correct[0] for a in alone]
    assert [len(c) for c in batched.correct] == [e.target_len for e in encodings]
    # The scores are those of the unpadded sequence, not just the argmax.
    logits = model(**batched.batch.model_inputs()).logits
    for b, enc in enumerate(encodings):
        single = model(input_ids=torch.tensor([enc.input_ids])).logits[0]
        cols = [batched.batch.column(b, t) for t in range(len(enc.input_ids))]
        torch.testing.assert_close(logits[b, cols], single, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("kind", KINDS)
def test_teacher_forcing_continues_a_prefix_cache(kind, models):
    """A cache of every prompt column but the last (one prefill, shared by a batch's
    settings, filled computing one column of logits) continued by the answer columns: the
    same argmax, EOS rows and batch as one forward; a cache of another length is refused."""
    from transformers import DynamicCache

    from harness.engine.inference import cache_argument, last_logits_only

    model, char_tok = models[kind]
    encodings = encodings_for(char_tok, instruction="Reverse the string.")
    whole = teacher_forced_batch(model, char_tok, encodings)
    prompts = collate_left(encodings, char_tok.pad_id, with_answer=False)

    def prefix(columns):
        cache = DynamicCache(config=model.config)
        inputs = {k: v[:, :columns] for k, v in prompts.model_inputs().items()}
        with torch.inference_mode():
            options = {cache_argument(model): cache, **last_logits_only(model)}
            model(**inputs, **options, use_cache=True)
        return cache

    assert last_logits_only(model) == {"logits_to_keep": 1}
    name = cache_argument(model)
    cached = teacher_forced_batch(
        model, char_tok, encodings, **{name: prefix(prompts.prompt_width - 1)}
    )
    assert cached.predicted == whole.predicted
    assert cached.correct == whole.correct
    assert cached.eos_correct == whole.eos_correct
    assert torch.equal(cached.batch.input_ids, whole.batch.input_ids)
    with pytest.raises(ValueError, match="first .* columns"):
        teacher_forced_batch(model, char_tok, encodings, **{name: prefix(prompts.prompt_width - 2)})


@pytest.mark.parametrize("kind", KINDS)
def test_teacher_forcing_computes_logits_from_the_last_prompt_column(kind, models):
    """The forward asks for logits from the query before target[0] on (no prompt
    column's is read; a 262k-word output layer over the prompt cost as much as the layers),
    and gives the argmax and EOS rows of every column's logits."""
    model, char_tok = models[kind]
    encodings = encodings_for(char_tok, instruction="Reverse the string.")
    asked = []
    handle = model.register_forward_pre_hook(
        lambda module, args, kwargs: asked.append(kwargs.get("logits_to_keep")), with_kwargs=True
    )
    try:
        forced = teacher_forced_batch(model, char_tok, encodings)
    finally:
        handle.remove()
    batch = forced.batch
    assert asked == [batch.total_len - batch.prompt_width + 1]
    with torch.inference_mode():
        logits = model(**batch.model_inputs()).logits  # every column's
    width = batch.prompt_width
    for b, enc in enumerate(encodings):
        n = enc.target_len
        predicted = logits[b, width - 1 : width - 1 + n].argmax(-1).tolist()
        assert forced.predicted[b] == predicted
        assert forced.correct[b] == [p == t for p, t in zip(predicted, enc.input_ids[-n - 1 : -1])]
        eos = int(logits[b, width - 1 + n].argmax()) == char_tok.eos_id
        assert forced.eos_correct[b] == eos


def test_teacher_forcing_reads_the_eos_row(char_tokenizer):
    """`eos_correct[b]`: the argmax of the row after row b's answer is EOS. Logits made by
    hand: EOS wins there for row 0 only (row 1's EOS wins one row later, past its answer)."""
    from types import SimpleNamespace

    char_tok = CharTokenizer(char_tokenizer)
    encodings = encodings_for(char_tok, n=2)
    batch = collate_left(encodings, char_tok.pad_id)
    width, vocab = batch.prompt_width, len(char_tokenizer)

    class Fixed(torch.nn.Module):
        device = torch.device("cpu")

        def forward(self, **inputs):
            logits = torch.zeros(2, batch.total_len, vocab)
            logits[0, width - 1 + encodings[0].target_len, char_tok.eos_id] = 1.0
            logits[1, width + encodings[1].target_len, char_tok.eos_id] = 1.0
            return SimpleNamespace(logits=logits)

    forced = teacher_forced_batch(Fixed(), char_tok, encodings)
    assert forced.eos_correct == [True, False]
    assert [len(c) for c in forced.correct] == [e.target_len for e in encodings]


@pytest.mark.parametrize("kind", KINDS)
def test_generation_equals_one_forward_over_its_own_output(kind, models):
    """The layouts agree: a forward over prompt + generated ids (the returned batch)
    predicts, at the query before each generated token, that token."""
    model, char_tok = models[kind]
    encodings = encodings_for(char_tok)
    gen = generate_batch(model, char_tok, encodings, max_new_tokens=8)
    tf = teacher_forced_batch(model, char_tok, encodings)
    width = gen.batch.prompt_width
    assert tf.batch.prompt_width == width
    assert torch.equal(tf.batch.input_ids[:, :width], gen.batch.input_ids[:, :width])
    assert tf.batch.shifts == gen.batch.shifts
    predicted = model(**gen.batch.model_inputs()).logits.argmax(-1)
    for b, ids in enumerate(gen.ids):
        assert predicted[b, width - 1 : width - 1 + len(ids)].tolist() == ids


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_any_attention_implementation(implementation, models):
    model, char_tok = models["qwen2"]
    encodings = encodings_for(char_tok, n=4)
    reference = generate_batch(model, char_tok, encodings, max_new_tokens=5)
    reference_tf = teacher_forced_batch(model, char_tok, encodings)
    before = model.config._attn_implementation
    model.set_attn_implementation(implementation)
    try:
        assert generate_batch(model, char_tok, encodings, max_new_tokens=5).ids == reference.ids
        assert teacher_forced_batch(model, char_tok, encodings).predicted == reference_tf.predicted
    finally:
        model.set_attn_implementation(before)


def test_extra_generate_options_and_rows_cut_after_eos(models):
    model, char_tok = models["llama"]
    encodings = encodings_for(char_tok, n=4)
    plain = generate_batch(model, char_tok, encodings, max_new_tokens=6)
    # return_dict_in_generate: the sequences are still found and cut the same way.
    as_dict = generate_batch(
        model, char_tok, encodings, max_new_tokens=6, return_dict_in_generate=True
    )
    assert as_dict.ids == plain.ids
    # Make row 0's third generated token the EOS: row 0 stops there, the others go on.
    stop = plain.ids[0][2]
    cut = generate_batch(model, char_tok, encodings, max_new_tokens=6, eos_token_id=stop)
    assert cut.ids[0] == plain.ids[0][: plain.ids[0].index(stop)]
    assert cut.finished[0]
    width = cut.batch.prompt_width
    end = width + len(cut.ids[0]) + 1  # the EOS itself stays attended
    assert cut.batch.attention_mask[0, width:end].tolist() == [1] * (end - width)
    assert cut.batch.attention_mask[0, end:].sum() == 0
    assert (cut.batch.input_ids[0, end:] == char_tok.pad_id).all()
    for b in range(1, 4):
        ids = plain.ids[b]
        expected = ids[: ids.index(stop)] if stop in ids else ids
        assert cut.ids[b] == expected
