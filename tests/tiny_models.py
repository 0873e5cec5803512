"""The tiny random causal LMs the tests build from configs (nothing is downloaded): one
builder, so every layer's tests use the same shape and differ only where they say so."""

from __future__ import annotations

# kind -> (transformers' model_type, fields beyond the common shape). The common shape is
# set only where the config class has the field, so GPT-2 (n_embd, n_inner, no GQA) and
# the MoE families (num_experts or num_local_experts) take the same table.
FAMILIES = {
    "llama": ("llama", {}),
    "mistral": ("mistral", {}),
    "mixtral": ("mixtral", {}),
    "qwen2": ("qwen2", {}),
    "qwen3": ("qwen3", {}),
    "qwen3_moe": ("qwen3_moe", {}),
    "gemma": ("gemma", {}),
    "gemma2": ("gemma2", {"sliding_window": 16}),
    "gemma3": ("gemma3_text", {"sliding_window": 16}),
    "phi": ("phi", {}),
    "phi3": ("phi3", {}),
    "olmo": ("olmo", {}),
    "olmo2": ("olmo2", {}),
    # 1 / head_dim, as Granite 3 sets it (the default 1.0 leaves the scores unscaled, and
    # plain eager's cached generation then drifts from one forward by 2e-5)
    "granite": ("granite", {"attention_multiplier": 0.125}),
    "cohere": ("cohere", {}),
    "stablelm": ("stablelm", {}),
    "smollm3": ("smollm3", {}),
    "starcoder2": ("starcoder2", {}),
    "gpt_oss": (
        "gpt_oss",
        {"sliding_window": 16, "layer_types": ["sliding_attention", "full_attention"]},
    ),
    "gpt2": ("gpt2", {"n_inner": 64}),
    "gpt_neox": ("gpt_neox", {}),  # Pythia: rotary on a quarter of each head, fused qkv
    "gptj": ("gptj", {"rotary_dim": 4, "n_inner": 64}),
    "opt": ("opt", {"ffn_dim": 64, "word_embed_proj_dim": 32}),
    "gpt_bigcode": ("gpt_bigcode", {"n_inner": 64}),  # StarCoder 1: one key head (multi-query)
}

# Causal LMs whose attention does not go through transformers' AttentionInterface: capture
# refuses them in one line (tests/harness/test_families.py).
BYPASSING = {
    "falcon": ("falcon", {}),
    "gpt_neo": ("gpt_neo", {"attention_types": [[["global", "local"], 1]]}),
    "bloom": ("bloom", {}),
    "mpt": ("mpt", {"d_model": 32, "n_heads": 4, "n_layers": 2}),
}


def tiny_config(kind: str, tokenizer, **overrides):
    """A config of a 2-layer, 32-wide model (4 query heads of 8, 2 key/value heads where the
    family has GQA; MoE families 4 experts, 2 per token) of architecture `kind` (a key of
    FAMILIES or BYPASSING) whose vocabulary and special tokens are `tokenizer`'s;
    `overrides` replace or add config fields (a test states what it needs beyond the
    common shape)."""
    from transformers import CONFIG_MAPPING

    known = {**FAMILIES, **BYPASSING}
    if kind not in known:
        raise ValueError(f"kind must be one of {', '.join(known)}, got {kind!r}")
    model_type, extra = known[kind]
    config_class = CONFIG_MAPPING[model_type]
    defaults = config_class()
    shape = dict(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        num_experts=4,
        num_local_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=32,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )

    def settable(name: str) -> bool:  # a field of this config (Falcon's head_dim is derived)
        derived = isinstance(getattr(config_class, name, None), property)
        return hasattr(defaults, name) and not derived

    given = {**extra, **overrides}
    # hidden / heads, as most families derive it (Gemma's and Qwen3's defaults are 256, 128)
    width, heads = ({**shape, **given}[name] for name in ("hidden_size", "num_attention_heads"))
    shape["head_dim"] = width // heads
    values = {name: value for name, value in shape.items() if settable(name)}
    return config_class(**{**values, **given})
