"""Tiny random models for the attention tests, built in memory (nothing is downloaded).

CAPTURE_ARCHITECTURES: every family whose capture is tested (`tests.tiny_models.FAMILIES`).
Gemma3 and GPT-OSS get a sliding window of 4 on their first layer (and full attention on the
second), Mistral on both, so that sequences of 10-20 tokens really slide; "gemma2" sets
`attn_logit_softcapping` (Gemma2 passes `softcap` to the attention function; Gemma3's eager
function ignores the setting).
"""

from __future__ import annotations

import string

import pytest

from tests.tiny_models import FAMILIES, tiny_config

CAPTURE_ARCHITECTURES = tuple(FAMILIES)
# Every tiny model the tests build: each family, and Gemma3 with a softcap it must ignore.
TINY_KINDS = (*CAPTURE_ARCHITECTURES, "gemma3-softcap")
# The families whose tiny models slide (a window of SLIDING_WINDOW keys).
WINDOWED = ("gemma2", "gemma3", "mistral", "gpt_oss")
SLIDING_WINDOW = 4
SOFTCAP = 1.0
# Weights drawn wider than the default 0.02, so that attention is far from uniform and the
# softcap changes the maps (at 0.02 every score is about 0 and every row flat).
INIT_RANGE = 0.3


def build_tiny(kind: str, tokenizer, seed: int = 0):
    """A tiny random causal LM (eval mode, eager attention) of architecture `kind`."""
    import torch
    from transformers import AutoModelForCausalLM

    base = kind.removesuffix("-softcap")
    overrides = {"initializer_range": INIT_RANGE}
    if base in WINDOWED:
        overrides["sliding_window"] = SLIDING_WINDOW
    if base == "gemma3":
        overrides["layer_types"] = ["sliding_attention", "full_attention"]
    if kind in ("gemma2", "gemma3-softcap"):
        # Gemma3 sets it in the config but does not pass it to the attention function:
        # eager ignores it, and capture must too. Gemma2 passes it as `softcap`.
        overrides["attn_logit_softcapping"] = SOFTCAP
    config = tiny_config(base, tokenizer, **overrides)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    return model.eval()


def authors_shares_by_hand(model, batch, tasks):
    """[batch, T]: the authors' score (`scores.rollout_scores(..., "authors")` on their
    columns and rows) of a rollout computed here from eager `output_attentions` (head
    mean + identity, rows renormalised, product over layers), not from capture."""
    import torch

    from harness.attention import scores
    from harness.engine.positions import reference_mask

    model.set_attn_implementation("eager")
    with torch.no_grad():
        out = model(**batch.model_inputs(), output_attentions=True)
    size = batch.total_len
    rolled = torch.eye(size).expand(len(batch), size, size)
    for layer in out.attentions:
        a = layer.float().mean(1) + torch.eye(size)
        rolled = (a / a.sum(-1, keepdim=True)) @ rolled
    columns = scores.score_columns(batch, "authors", tasks=tasks)
    rows = scores.score_rows(batch)
    return scores.rollout_scores(rolled, reference_mask(batch), columns, "authors", rows)


@pytest.fixture(scope="session")
def attn_tokenizer():
    from harness.foundation.tokenization import make_char_tokenizer

    return make_char_tokenizer(string.printable)


@pytest.fixture(scope="session")
def tiny_models(attn_tokenizer):
    return {kind: build_tiny(kind, attn_tokenizer) for kind in TINY_KINDS}
