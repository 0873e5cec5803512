"""The model families capture serves (README, "Model families"), beyond the exactness tests
that tests/harness/engine/test_capture.py runs on each: the README's table names exactly the
families tested, and the refused ones; an architecture whose attention bypasses the
AttentionInterface is refused in one line before any forward; lm-eval's `attention=true`
equals `attentionspan attention` on GPT-2 and GPT-NeoX, the two whose attention code is
furthest from Llama's (Conv1D and fused qkv projections, no GQA, learned or partial rotary
positions).

    OMP_NUM_THREADS=1 python -m pytest -q tests/harness/test_families.py
"""

from __future__ import annotations

import re
import string
from pathlib import Path

import pytest

from tests.tiny_models import BYPASSING, FAMILIES, tiny_config

README = Path(__file__).resolve().parents[2] / "README.md"
# Llama's lm-eval check is tests/lm_eval_tasks/test_lm_eval_attention.py's own; every other
# family runs it here (a few seconds each).
LM_EVAL_FAMILIES = tuple(kind for kind in FAMILIES if kind != "llama")


def causal_lm_class(kind: str) -> str:
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    model_type = {**FAMILIES, **BYPASSING}[kind][0]
    return MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type]


def readme_section() -> str:
    text = README.read_text()
    start = text.index("### Model families")
    return text[start : text.index("\n## ", start)]


def test_the_readme_names_every_family_tested_and_every_one_refused():
    section = readme_section()
    table = "\n".join(line for line in section.splitlines() if line.startswith("|"))
    refused = section[section.index("Refused") :]
    named = set(re.findall(r"`(\w+(?:ForCausalLM|LMHeadModel))`", table))
    assert named == {causal_lm_class(kind) for kind in FAMILIES}
    assert set(re.findall(r"`(\w+ForCausalLM)`", refused)) == {
        causal_lm_class(kind) for kind in BYPASSING
    }
    assert len(table.splitlines()) - 2 >= 10  # rows, less the header and its rule


@pytest.mark.parametrize("kind", BYPASSING)
def test_bypassing_architectures_are_refused(kind):
    """Falcon, GPT-Neo, BLOOM, MPT: one line naming the class and why, before any forward;
    the model keeps its attention implementation."""
    import torch
    from transformers import AutoModelForCausalLM

    from harness.engine.capture import AttentionCaptureError, AttentionPlan, capture_attention
    from harness.foundation.tokenization import make_char_tokenizer

    config = tiny_config(kind, make_char_tokenizer(string.printable))
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    forwards = []
    model.register_forward_pre_hook(lambda *args: forwards.append(1))
    with pytest.raises(AttentionCaptureError) as error:
        with capture_attention(model, AttentionPlan()):
            model(input_ids=torch.tensor([[5, 6, 7]]))
    message = str(error.value)
    assert "\n" not in message and causal_lm_class(kind) in message
    assert "AttentionInterface" in message
    assert forwards == [] and model.config._attn_implementation == "eager"


def save_digit_model(kind: str, folder) -> str:
    """A tiny random `kind` that only ever writes digits, saved with lm-eval's character
    tokenizer: the same construction as test_lm_eval_attention's `digit_model_dir` (every
    other output row is the mean of the digit rows), untied so that the input embeddings
    stay random."""
    import torch
    from transformers import AutoModelForCausalLM

    from tests.lm_eval_tasks.conftest import make_char_tokenizer

    tokenizer = make_char_tokenizer()
    config = tiny_config(kind, tokenizer, tie_word_embeddings=False, max_position_embeddings=512)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    digits = [tokenizer.convert_tokens_to_ids(d) for d in string.digits]
    with torch.no_grad():
        weight = model.get_output_embeddings().weight
        others = [i for i in range(weight.shape[0]) if i not in digits]
        weight[others] = weight[digits].mean(0)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


@pytest.mark.slow
@pytest.mark.parametrize("kind", LM_EVAL_FAMILIES)
def test_lm_eval_attention_equals_attentionspan_attention(kind, tmp_path):
    """test_lm_eval_attention's check (same instances, answers and metrics as `attentionspan
    attention`), run on a digit-writing tiny model of this family instead of Llama."""
    pytest.importorskip("lm_eval")
    from tests.lm_eval_tasks import test_lm_eval_attention as lm_eval_attention

    check = lm_eval_attention.test_lm_eval_attention_equals_attentionspan_attention
    check(save_digit_model(kind, tmp_path))
