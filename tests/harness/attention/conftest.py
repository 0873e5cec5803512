"""Tiny random models for the attention tests, built in memory (nothing is downloaded).

Gemma3 gets a sliding window of 4 on its first layer (and full attention on the second), so
that sequences of 10-20 tokens really slide; "gemma2" sets `attn_logit_softcapping` (Gemma2
passes `softcap` to the attention function; Gemma3's eager function ignores the setting).
"""

from __future__ import annotations

import string

import pytest

from tests.harness.conftest import tiny_config

CAPTURE_ARCHITECTURES = ("llama", "qwen2", "gemma3")
SLIDING_WINDOW = 4
SOFTCAP = 1.0
# Weights drawn wider than the default 0.02, so that attention is far from uniform and the
# softcap changes the maps (at 0.02 every score is about 0 and every row flat).
INIT_RANGE = 0.3


def build_tiny(kind: str, tokenizer, seed: int = 0):
    """A tiny random causal LM (eval mode, eager attention) of architecture `kind`."""
    import torch
    from transformers import AutoModelForCausalLM, Gemma2Config

    if kind == "gemma2":
        config = Gemma2Config(
            vocab_size=len(tokenizer),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=8,
            max_position_embeddings=256,
            sliding_window=SLIDING_WINDOW,
            attn_logit_softcapping=SOFTCAP,
            initializer_range=INIT_RANGE,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
        )
    else:
        config = tiny_config(kind.removesuffix("-softcap"), len(tokenizer), tokenizer)
        if kind == "gemma3-softcap":
            # Set in the config, but Gemma3 does not pass it to the attention function: eager
            # ignores it, and capture must too.
            config.attn_logit_softcapping = SOFTCAP
        if kind.startswith("gemma3"):
            config.sliding_window = SLIDING_WINDOW
            config.layer_types = ["sliding_attention", "full_attention"]
        config.initializer_range = INIT_RANGE
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    return model.eval()


@pytest.fixture(scope="session")
def attn_tokenizer():
    from harness.tokenization import make_char_tokenizer

    return make_char_tokenizer(string.printable)


@pytest.fixture(scope="session")
def tiny_models(attn_tokenizer):
    kinds = (*CAPTURE_ARCHITECTURES, "gemma2", "gemma3-softcap")
    return {kind: build_tiny(kind, attn_tokenizer) for kind in kinds}
