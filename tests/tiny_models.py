"""The tiny random causal LMs the tests build from configs (nothing is downloaded): one
builder, so every layer's tests use the same shape and differ only where they say so."""

from __future__ import annotations


def tiny_config(kind: str, tokenizer, **overrides):
    """A config of a 2-layer, 32-wide model of architecture `kind` (llama, qwen2, gemma2,
    gemma3) whose vocabulary and special tokens are `tokenizer`'s; `overrides` replace or
    add config fields (a test states what it needs beyond the common shape)."""
    from transformers import Gemma2Config, Gemma3TextConfig, LlamaConfig, Qwen2Config

    classes = {
        "llama": LlamaConfig,
        "qwen2": Qwen2Config,
        "gemma2": Gemma2Config,
        "gemma3": Gemma3TextConfig,
    }
    if kind not in classes:
        raise ValueError(f"kind must be one of {', '.join(classes)}, got {kind!r}")
    values = dict(
        vocab_size=len(tokenizer),
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
    if kind.startswith("gemma"):
        values.update(head_dim=8, sliding_window=16)
    return classes[kind](**{**values, **overrides})
