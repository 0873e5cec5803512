"""The training step's loss with logits only where the loss reads them (`harness.training.loss`):
the same loss and gradients as the model's own `.loss` on every decoder family, the columns
it keeps, and the plain forward kept for character-level models."""

from __future__ import annotations

import json
import string

import pytest
import torch

from harness.foundation.tokenization import IGNORE_INDEX, make_char_tokenizer
from harness.training.loss import SLICED_FROM_VOCABULARY, lm_loss, loss_columns, sliced
from tests.tiny_models import FAMILIES, tiny_config

TOKENIZER = make_char_tokenizer(string.printable)


def _inputs(vocab: int, seed: int = 0) -> dict:
    """Right-padded rows whose targets start at different columns, one with no label."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, min(vocab, 90), (4, 24), generator=generator)
    attention = torch.ones_like(ids)
    attention[1, 20:] = 0  # a shorter row, padded on the right
    labels = ids.masked_fill(attention == 0, IGNORE_INDEX)
    for row, start in enumerate((14, 10, 17, 24)):  # row 3: no target at all
        labels[row, :start] = IGNORE_INDEX
    return {"input_ids": ids, "attention_mask": attention, "labels": labels}


def _model(kind: str, vocab: int):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(tiny_config(kind, TOKENIZER, vocab_size=vocab))


def test_loss_columns_are_those_before_a_label():
    labels = torch.full((2, 6), IGNORE_INDEX)
    labels[0, 3:5] = 7  # row 0 labels tokens 3 and 4: read at queries 2 and 3
    labels[1, 5] = 8  # row 1 labels token 5: query 4
    assert loss_columns(labels).tolist() == [2, 3, 4]
    assert loss_columns(torch.full((2, 6), IGNORE_INDEX)).tolist() == []


@pytest.mark.parametrize("kind", sorted(FAMILIES))
def test_the_sliced_loss_and_gradients_equal_the_models_own(kind):
    model = _model(kind, 2 * SLICED_FROM_VOCABULARY)
    assert sliced(model) and model.training
    inputs = _inputs(model.config.get_text_config().vocab_size)
    # in training mode: the same dropout draws for both (none fall after the output layer)
    torch.manual_seed(1)
    expected = model(**inputs).loss
    expected.backward()
    wanted = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    torch.manual_seed(1)
    loss = lm_loss(model, model, inputs)
    loss.backward()
    torch.testing.assert_close(loss, expected, rtol=1e-5, atol=1e-6)
    got = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    assert got.keys() == wanted.keys()
    for name, grad in wanted.items():
        torch.testing.assert_close(got[name], grad, rtol=1e-4, atol=1e-6, msg=name)


def test_a_character_level_model_keeps_the_plain_forward():
    model = _model("llama", len(TOKENIZER))  # about 100 characters
    assert not sliced(model)
    inputs = _inputs(len(TOKENIZER))
    assert torch.equal(lm_loss(model, model, inputs), model(**inputs).loss)


def test_training_a_large_vocabulary_model_slices_and_logs_the_same_losses(tmp_path, monkeypatch):
    import harness.training.loss as train_loss
    from harness.training.train import TrainConfig, train

    folder = tmp_path / "model"
    _model("llama", 2 * SLICED_FROM_VOCABULARY).save_pretrained(folder)
    TOKENIZER.save_pretrained(folder)
    calls = []
    columns = train_loss.loss_columns
    monkeypatch.setattr(
        train_loss, "loss_columns", lambda labels: calls.append(1) or columns(labels)
    )

    def losses(output):
        config = TrainConfig(
            model=str(folder), output=str(tmp_path / output), config="reversal_id", lr=1e-3,
            batch_size=4, max_steps=4, log_every=1, eval_size=4, eval_batch_size=4,
        )  # fmt: skip
        train(config, progress=False)
        lines = (tmp_path / output / "log.jsonl").read_text().splitlines()
        return [json.loads(line)["loss"] for line in lines if '"loss"' in line]

    sliced_losses = losses("sliced")
    assert len(calls) == 4  # one sliced loss a step
    monkeypatch.setattr(train_loss, "SLICED_FROM_VOCABULARY", 10**9)
    plain = losses("plain")
    assert len(calls) == 4 and len(plain) == 4
    assert sliced_losses == pytest.approx(plain, rel=1e-4)
