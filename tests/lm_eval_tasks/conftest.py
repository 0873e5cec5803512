"""Shared fixtures: a tiny random Llama with a character tokenizer, saved to a folder."""

from __future__ import annotations

import string

import pytest

from tests.tiny_models import tiny_config

CHARSET = string.printable  # letters, digits, punctuation, space and "\n"
# A minimal chat template, so that --apply_chat_template can be tested.
CHAT_TEMPLATE = (
    "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}</s>{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)


def make_char_tokenizer():
    """A Hugging Face tokenizer with one token per character of CHARSET (and eos/pad)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "<s>", "</s>", "<unk>"]
    vocab = {tok: i for i, tok in enumerate(specials + sorted(set(CHARSET)))}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex("(?m)."), behavior="isolated")
    backend.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def save_tiny_llama(folder, tokenizer) -> str:
    import torch
    from transformers import LlamaForCausalLM

    torch.manual_seed(0)
    config = tiny_config("llama", tokenizer, num_attention_heads=2, max_position_embeddings=512)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> str:
    return save_tiny_llama(tmp_path_factory.mktemp("tiny_llama"), make_char_tokenizer())


@pytest.fixture(scope="session")
def save_llama():
    """`save_llama(folder, tokenizer) -> folder`: a tiny random Llama for that tokenizer."""
    return save_tiny_llama


def our_task_manager(metadata=None):
    """A TaskManager over our folder only: indexing lm-eval's 340 folders costs seconds."""
    from lm_eval.tasks import TaskManager

    from lm_eval_tasks import TASKS_DIR

    return TaskManager(include_path=TASKS_DIR, include_defaults=False, metadata=metadata)


@pytest.fixture(scope="session")
def task_manager_for():
    """`task_manager_for(metadata=None)`: see our_task_manager."""
    return our_task_manager
