"""Tiny models and tokenizers for the harness tests, built here (nothing is downloaded)."""

from __future__ import annotations

import string

import pytest

from harness.tokenization import make_char_tokenizer

ARCHITECTURES = ("llama", "qwen2", "gemma3")


def tiny_config(kind: str, vocab_size: int, tokenizer):
    from transformers import Gemma3TextConfig, LlamaConfig, Qwen2Config

    common = dict(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    if kind == "llama":
        return LlamaConfig(**common)
    if kind == "qwen2":
        return Qwen2Config(**common)
    return Gemma3TextConfig(**common, head_dim=8, sliding_window=16)


def save_tiny_model(kind: str, folder, seed: int = 0):
    """A tiny random causal LM of architecture `kind` with our character tokenizer."""
    import torch
    from transformers import AutoModelForCausalLM

    tokenizer = make_char_tokenizer(string.printable)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(tiny_config(kind, len(tokenizer), tokenizer))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_model_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny_models")
    return {kind: save_tiny_model(kind, root / kind) for kind in ARCHITECTURES}


@pytest.fixture(scope="session")
def char_tokenizer():
    return make_char_tokenizer(string.printable)
