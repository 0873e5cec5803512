"""harness.foundation.tokenization on three kinds of tokenizer built here: our character vocabulary,
a byte-level BPE (GPT-2 / SmolLM2 style, "Ġ" for space) and a sentencepiece-style BPE
("▁" word boundaries, where "▁a" decodes to "a" alone but to " a" mid-sequence)."""

from __future__ import annotations

import string

import pytest
from tokenizers import SentencePieceBPETokenizer, Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from attentionspan_datasets import iter_instances
from attentionspan_datasets.tasks.base import Instance
from harness.foundation.tokenization import (
    IGNORE_INDEX,
    CharTokenizer,
    encode_instance,
    encode_prompt,
    make_char_tokenizer,
)

CORPUS = [
    "the quick brown fox jumps over the lazy dog " * 3,
    string.ascii_letters + " " + string.digits + " =+*-:;,.()[]",
    "12+34=46 reverse this string please\nnew line",
]
TASK_TEXT = "Hello World 123=321 dlroW\nolleH+*"


@pytest.fixture(scope="module")
def char_hf():
    return make_char_tokenizer(string.printable)


@pytest.fixture(scope="module")
def byte_level_hf():
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    from tokenizers.trainers import BpeTrainer

    trainer = BpeTrainer(
        vocab_size=400,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    backend.train_from_iterator(CORPUS * 5, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|endoftext|>")


@pytest.fixture(scope="module")
def sentencepiece_hf():
    sp = SentencePieceBPETokenizer(unk_token="<unk>")
    sp.train_from_iterator(
        CORPUS * 5, vocab_size=300, special_tokens=["<unk>", "</s>", "<s>"], min_frequency=1
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=sp._tokenizer, eos_token="</s>", bos_token="<s>", unk_token="<unk>"
    )


@pytest.fixture(params=["char", "byte_level", "sentencepiece"])
def hf_tok(request):
    return request.getfixturevalue(f"{request.param}_hf")


def test_every_character_is_one_token_that_decodes_to_itself(hf_tok):
    char_tok = CharTokenizer(hf_tok)
    ids = char_tok.encode_chars(TASK_TEXT)
    assert len(ids) == len(TASK_TEXT)
    # Decoding with the model's own tokenizer (not our reverse table) gives the text back.
    assert hf_tok.decode(ids) == TASK_TEXT
    assert char_tok.decode(ids) == TASK_TEXT
    assert len({char_tok.char_id(c) for c in set(TASK_TEXT)}) == len(set(TASK_TEXT))


def test_sentencepiece_word_pieces_are_not_taken_for_characters(sentencepiece_hf):
    char_tok = CharTokenizer(sentencepiece_hf)
    vocab = {i: t for t, i in sentencepiece_hf.get_vocab().items()}
    # Alone, "a" encodes as "▁a"; the character token must be the bare "a".
    assert vocab[char_tok.char_id("a")] == "a"
    assert vocab[char_tok.char_id(" ")] == "▁"


def test_byte_level_space_is_g_dot(byte_level_hf):
    vocab = {i: t for t, i in byte_level_hf.get_vocab().items()}
    char_tok = CharTokenizer(byte_level_hf)
    assert vocab[char_tok.char_id(" ")] == "Ġ"
    assert vocab[char_tok.char_id("\n")] == "Ċ"


def test_missing_character_is_named(char_hf, sentencepiece_hf):
    with pytest.raises(ValueError, match=r"'é' \(U\+00E9\)"):
        CharTokenizer(char_hf).char_id("é")
    with pytest.raises(ValueError, match="'#'"):
        CharTokenizer(sentencepiece_hf).encode_chars("ab#")
    with pytest.raises(ValueError, match="single character"):
        CharTokenizer(char_hf).char_id("ab")


def test_decode_keeps_non_character_tokens(char_hf):
    char_tok = CharTokenizer(char_hf)
    ids = char_tok.encode_chars("ab") + [char_tok.eos_id]
    assert char_tok.decode(ids) == "ab<eos>"
    assert char_tok.decode(ids, skip_special_tokens=True) == "ab"


def test_encode_prompt_layout(byte_level_hf):
    char_tok = CharTokenizer(byte_level_hf)
    instruction = "reverse this string"
    ids = encode_prompt(char_tok, "ab=", instruction=instruction, fewshot=[("xy=", "yx"), "q=q"])
    normal = byte_level_hf(instruction, add_special_tokens=False)["input_ids"]
    assert len(normal) < len(instruction)  # the instruction really is tokenised normally
    assert ids[: len(normal)] == normal
    assert ids[len(normal) :] == char_tok.encode_chars("\nxy=yx\nq=q\nab=")
    assert byte_level_hf.decode(ids) == instruction + "\nxy=yx\nq=q\nab="


def test_encode_instance_labels_and_absolute_reference(char_hf):
    char_tok = CharTokenizer(char_hf)
    shots = list(iter_instances("reversal_id", seed=1, stop=2))
    for instance in iter_instances("reversal_id", seed=0, stop=20):
        enc = encode_instance(char_tok, instance, instruction="Reverse.", fewshot=shots)
        prompt_ids = encode_prompt(char_tok, instance.prompt, "Reverse.", shots)
        assert enc.input_ids[: enc.target_offset] == prompt_ids
        assert enc.input_ids[enc.target_offset :] == (
            char_tok.encode_chars(instance.target) + [char_tok.eos_id]
        )
        assert all(label == IGNORE_INDEX for label in enc.labels[: enc.target_offset])
        assert enc.labels[enc.target_offset :] == enc.input_ids[enc.target_offset :]
        # The shifted reference points at the same characters in the token sequence.
        text = instance.text
        for i, (row, abs_row) in enumerate(zip(instance.reference, enc.reference)):
            for p, q in zip(row, abs_row):
                assert enc.input_ids[q] == char_tok.char_id(text[p])
            assert all(q < enc.target_offset + i for q in abs_row)  # causal: only the past
        assert enc.input_ids[enc.position(0)] == char_tok.char_id(instance.prompt[0])


def test_chat_template_puts_target_after_generation_prompt(char_hf):
    import copy

    tok = copy.deepcopy(char_hf)
    tok.chat_template = (
        "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}<assistant>{% endif %}"
    )
    char_tok = CharTokenizer(tok)
    instance = Instance("string_reversal", "abc=", "cba", [[2], [1], [0]], {"length": 3})
    enc = encode_instance(char_tok, instance, chat=True)
    assert char_tok.decode(enc.input_ids) == "<user>abc=\n<assistant>cba<eos>"
    assert enc.prompt_offset == len("<user>")
    assert enc.target_offset == len("<user>abc=\n<assistant>")
    assert [char_tok.decode([enc.input_ids[r[0]]]) for r in enc.reference] == ["c", "b", "a"]
    assert char_tok.decode(encode_prompt(char_tok, "abc=", chat=True)) == (
        "<user>abc=\n<assistant>"
    )
    with pytest.raises(ValueError, match="chat_template"):
        encode_prompt(CharTokenizer(char_hf), "abc=", chat=True)


def test_char_tokenizer_saves_and_reloads(tmp_path, char_hf):
    from transformers import AutoTokenizer

    char_hf.save_pretrained(tmp_path)
    again = AutoTokenizer.from_pretrained(tmp_path)
    text = "x+y=z\n 09"
    assert again(text)["input_ids"] == char_hf(text)["input_ids"]
    assert CharTokenizer(again).encode_chars(text) == CharTokenizer(char_hf).encode_chars(text)


@pytest.mark.parametrize("kind", ["char", "sentencepiece"])
def test_an_instruction_the_tokenizer_cannot_encode_is_refused_not_unk(kind, request):
    """An instruction is tokenised normally: a character the vocabulary lacks would reach the
    model as <unk> (a silent change of the prompt), so it is refused, naming the character."""
    tok = CharTokenizer(request.getfixturevalue(f"{kind}_hf"))
    assert tok.encode_text("reverse this")  # known characters: encoded as before
    with pytest.raises(ValueError, match=r"cannot encode '€' \(U\+20AC\).*<unk>"):
        tok.encode_text("reverse € this")
    with pytest.raises(ValueError, match="cannot encode"):
        encode_prompt(tok, "ab=", instruction="Réverse")
