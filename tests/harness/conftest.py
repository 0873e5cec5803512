"""Tiny models and tokenizers for the harness tests, built here (nothing is downloaded)."""

from __future__ import annotations

import string

import pytest

from harness.foundation.tokenization import make_char_tokenizer
from tests.tiny_models import tiny_config

ARCHITECTURES = ("llama", "qwen2", "gemma3")


def save_tiny_model(kind: str, folder, seed: int = 0):
    """A tiny random causal LM of architecture `kind` with our character tokenizer."""
    import torch
    from transformers import AutoModelForCausalLM

    tokenizer = make_char_tokenizer(string.printable)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(tiny_config(kind, tokenizer))
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


# The attention and engine tests' tiny models (fixtures shared by both folders).
from tests.harness.attention_models import attn_tokenizer, tiny_models  # noqa: E402, F401
