"""`attnspan-hf`: task text one token per character, the instruction tokenised normally."""

from __future__ import annotations

import math
import string

import pytest

from lm_eval_tasks.dataset import custom_dataset

pytest.importorskip("lm_eval")
from harness.foundation.tokenization import encode_prompt  # noqa: E402
from lm_eval_tasks.models import CHAT_MARK, AttnspanHFLM  # noqa: E402

CHAT_TEMPLATE = (
    "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}</s>{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)


CHARSET = string.printable


def make_bpe_tokenizer():
    """A byte-pair tokenizer whose merges join task characters ("ab", "=x", ...)."""
    from tokenizers import Tokenizer, decoders, models, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE(unk_token="<unk>"))
    backend.decoder = decoders.Fuse()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<pad>", "<s>", "</s>", "<unk>"],
        initial_alphabet=list(CHARSET),
    )
    corpus = [r["prompt"] + r["target"] for r in custom_dataset("reversal_id")["test"]]
    # The documents the tests use appear often enough to be merged, whatever the split rule
    # makes of the test stream.
    corpus += [r["prompt"] for r in first_docs()] * 20
    corpus += ["Write the characters before '=' in reverse order."] * 20
    backend.train_from_iterator(corpus, trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


@pytest.fixture(scope="module")
def bpe_model(tmp_path_factory, save_llama):
    folder = save_llama(tmp_path_factory.mktemp("bpe_llama"), make_bpe_tokenizer())
    return AttnspanHFLM(pretrained=folder, device="cpu", dtype="float32", batch_size=4)


def first_docs():
    return list(custom_dataset("reversal_id", attnspan={"size": 4, "fewshot_size": 4})["test"])


@pytest.fixture(scope="module")
def docs():
    return first_docs()


def test_task_text_is_one_token_per_character(bpe_model, docs):
    doc = docs[0]
    context = f"{doc['instruction']}\n{doc['prompt']}"
    ids = bpe_model.encode_request(context, doc)
    char_tok = bpe_model.char_tok
    assert ids == encode_prompt(char_tok, doc["prompt"], doc["instruction"])
    assert ids[-len(doc["prompt"]) :] == char_tok.encode_chars(doc["prompt"])
    instruction_ids = char_tok.encode_text(doc["instruction"])
    assert len(instruction_ids) < len(doc["instruction"])  # the instruction keeps its merges
    assert ids[: -len(doc["prompt"]) - 1][-len(instruction_ids) :] == instruction_ids
    # the plain hf model type would merge the task text
    assert len(bpe_model.tokenizer(doc["prompt"], add_special_tokens=False)["input_ids"]) < len(
        doc["prompt"]
    )


def test_few_shot_and_system_instruction(bpe_model, docs):
    doc, shots = docs[0], [d["prompt"] + d["target"] for d in docs[1:3]]
    context = f"Be exact.\n{doc['instruction']}\n{shots[0]}\n{shots[1]}\n{doc['prompt']}"
    expected = encode_prompt(
        bpe_model.char_tok, doc["prompt"], f"Be exact.\n{doc['instruction']}", shots
    )
    assert bpe_model.encode_request(context, doc) == expected


def test_chat_template_as_the_harness_applies_it(bpe_model, docs):
    doc, shot = docs[0], docs[1]["prompt"] + docs[1]["target"]
    single = [
        {"role": "system", "content": doc["instruction"] + "\n"},
        {"role": "user", "content": f"{shot}\n{doc['prompt']}"},
    ]
    multi = [
        {"role": "system", "content": doc["instruction"] + "\n"},
        {"role": "user", "content": docs[1]["prompt"]},
        {"role": "assistant", "content": docs[1]["target"]},
        {"role": "user", "content": doc["prompt"]},
    ]
    expected = encode_prompt(bpe_model.char_tok, doc["prompt"], doc["instruction"], [shot], True)
    for messages in (single, multi):
        context = bpe_model.apply_chat_template(messages)
        assert context.startswith(CHAT_MARK)
        assert bpe_model.encode_request(context, doc) == expected
    rendered = bpe_model.char_tok.decode(expected)
    assert rendered.startswith("<s><user>") or rendered.startswith("<user>")
    assert rendered.endswith(doc["prompt"] + "</s><assistant>")


def test_bad_contexts_and_characters(bpe_model, docs):
    doc = docs[0]
    with pytest.raises(ValueError, match="does not end with the prompt"):
        bpe_model.encode_request(f"{doc['instruction']}\nxyz=", doc)
    with pytest.raises(ValueError, match="does not contain the instruction"):
        bpe_model.encode_request(f"Other words.\n{doc['prompt']}", doc)
    odd = dict(doc, prompt="ab\u00e9=", instruction="")
    with pytest.raises(ValueError, match="'\u00e9'"):
        bpe_model.encode_request("ab\u00e9=", odd)


def test_batch_is_left_padded_with_the_character_ids(bpe_model, docs):
    contexts = [f"{d['instruction']}\n{d['prompt']}" for d in docs[:2]]
    bpe_model._encoded.update({c: bpe_model.encode_request(c, d) for c, d in zip(contexts, docs)})
    try:
        ids, mask = bpe_model.tok_batch_encode(contexts)
    finally:
        bpe_model._encoded.clear()
    for row, m, context, doc in zip(ids.tolist(), mask.tolist(), contexts, docs):
        expected = bpe_model.encode_request(context, doc)
        assert row[len(row) - len(expected) :] == expected and sum(m) == len(expected)
        assert m[len(row) - len(expected) :] == [1] * len(expected)


def test_runs_in_lm_eval(tiny_model_dir, task_manager_for):
    """The tiny random model through simple_evaluate, few-shot: every metric is reported.
    (All presets, by glob and by group, run in test_lm_eval_cli.py.)"""
    import lm_eval

    model = AttnspanHFLM(pretrained=tiny_model_dir, device="cpu", dtype="float32", batch_size=4)
    tasks = ["attnspan_reversal_ood", "attnspan_ffml_id"]
    results = lm_eval.simple_evaluate(
        model=model,
        tasks=tasks,
        task_manager=task_manager_for(),
        limit=4,
        num_fewshot=1,
        gen_kwargs={"max_gen_toks": 8},  # a random model never stops early
    )
    for task in tasks:
        numbers = {
            k.removesuffix(",none"): v
            for k, v in results["results"][task].items()
            if k.endswith(",none") and "_stderr" not in k
        }
        assert 0.0 <= numbers["exact_match"] <= numbers["partial_acc"] <= 1.0
        bins = [k for k in numbers if k.startswith("exact_match_len_")]
        expected = custom_dataset(task.removeprefix("attnspan_"))["test"][0]["length_bins"]
        assert sorted(bins) == sorted(expected)
        assert any(not math.isnan(numbers[k]) for k in bins)


def test_threads_follow_the_harness_rule(tiny_model_dir, monkeypatch, caplog):
    """The thread rule of the harness commands: an explicit OMP_NUM_THREADS is kept,
    `threads=N` wins (capped at the cores), a bad value is refused in one line naming it."""
    import logging

    import torch

    from harness.foundation.threads import available_cores
    from lm_eval_tasks.models import use_threads

    before = torch.get_num_threads()
    try:
        monkeypatch.setenv("OMP_NUM_THREADS", "1")
        with caplog.at_level(logging.INFO, logger="lm_eval_tasks.models"):
            model = AttnspanHFLM(pretrained=tiny_model_dir, device="cpu", batch_size=2)
        assert model.threads == 1 and torch.get_num_threads() == 1
        assert "OMP_NUM_THREADS kept" in caplog.text
        assert use_threads("1") == 1
        assert use_threads(10_000 // 10) == min(1000, available_cores())
        monkeypatch.delenv("OMP_NUM_THREADS")
        assert 1 <= use_threads() <= available_cores()
        for bad in ("two", "0", 0):
            with pytest.raises(ValueError, match="attnspan-hf: threads"):
                use_threads(bad)
    finally:
        torch.set_num_threads(before)


def test_an_unknown_model_arg_is_refused_before_the_model_loads(tmp_path):
    """`--model_args ...,colour=red` reached from_pretrained, a TypeError traceback; the
    folder here does not exist, so a refusal after loading would say that instead."""
    missing = str(tmp_path / "nowhere")
    with pytest.raises(ValueError) as error:
        AttnspanHFLM(pretrained=missing, colour="red")
    message = str(error.value)
    assert message.startswith("attnspan-hf: unknown --model_args key(s) 'colour'; allowed: ")
    for allowed in ("attention, threads", "pretrained", "dtype", "attn_implementation"):
        assert allowed in message
    assert "\n" not in message
    with pytest.raises(ValueError, match=r"'dtyp' \(did you mean 'dtype'\?\)"):
        AttnspanHFLM(pretrained=missing, dtyp="float32")


def test_a_tokenizer_larger_than_the_model_is_refused_naming_the_token(save_llama, tmp_path, docs):
    """A model folder with a tokenizer of another (larger) vocabulary: named in one line,
    not an IndexError in the first forward."""
    import torch
    from transformers import LlamaForCausalLM

    from tests.lm_eval_tasks.conftest import make_char_tokenizer
    from tests.tiny_models import tiny_config

    tokenizer = make_char_tokenizer()
    torch.manual_seed(0)
    LlamaForCausalLM(tiny_config("llama", tokenizer, vocab_size=20)).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    model = AttnspanHFLM(pretrained=str(tmp_path), device="cpu", dtype="float32")
    doc = dict(docs[0], instruction="")
    with pytest.raises(ValueError) as error:
        model.encode_request(doc["prompt"], doc)
    message = str(error.value)
    assert message.startswith(f"attnspan-hf: model '{tmp_path}': the model's vocabulary (20 ")
    assert "allowed: ids 0 to 19" in message
