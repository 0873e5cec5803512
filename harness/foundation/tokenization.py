"""One token per character: encode task text for any Hugging Face tokenizer.

    from harness.foundation.tokenization import CharTokenizer, encode_instance, encode_prompt
    char_tok = CharTokenizer(AutoTokenizer.from_pretrained(model_dir))
    ids = encode_prompt(char_tok, "abc=", instruction="Reverse the string.")
    enc = encode_instance(char_tok, instance)   # input_ids, labels, absolute reference

The paper feeds task text one character per token, so that a position in `prompt + target`
is a token position (docs/tasks.md). `CharTokenizer` finds, for each character, a token of
the model's own vocabulary that decodes to exactly that character, whatever the tokenizer's
conventions (byte-level BPE writes a space as "Ġ", sentencepiece as "▁", byte fallback as
"<0x20>"). An instruction is tokenised normally; it only shifts the task text, and
`Encoding.position` maps character positions to absolute token positions.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

IGNORE_INDEX = -100  # labels that the loss skips (PyTorch's cross-entropy default)
SHOT_SEPARATOR = "\n"  # after the instruction and after each few-shot example
CHAT_PLACEHOLDER = "\x00ATTNSPAN\x00"  # stands for the task text while rendering a template


def _byte_level_alphabet() -> dict[int, str]:
    """GPT-2's byte -> printable character table (byte-level BPE vocabularies use it)."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    table = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return table


BYTE_LEVEL = _byte_level_alphabet()


class CharTokenizer:
    """Maps each character to exactly one token id of a Hugging Face tokenizer.

    The id chosen for `c` must decode to `c` in the middle of a sequence, not only on its
    own: sentencepiece's "▁a" decodes to "a" alone but to " a" after another token, so every
    candidate is checked as `decode([probe, id, id]) == probe_text + c + c`.
    """

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        self._ids: dict[str, int] = {}
        self._chars: dict[int, str] = {}
        self._special = set(getattr(tokenizer, "all_special_ids", []) or [])
        self._vocab: dict[str, int] = tokenizer.get_vocab()
        self._probe: tuple[int, str] | None = None
        self._probe = self._find_probe()
        self._bos_prefix: list[int] | None = None
        self._text_cache: dict[str, list[int]] = {}
        self._chat: tuple[str, str] | None = None

    # --- public API -------------------------------------------------------------------
    @property
    def eos_id(self) -> int:
        eos = self.tokenizer.eos_token_id
        if eos is None:
            raise ValueError("the tokenizer has no eos_token; set one (labels end with EOS)")
        return int(eos)

    @property
    def pad_id(self) -> int:
        pad = self.tokenizer.pad_token_id
        return int(pad) if pad is not None else self.eos_id

    def char_id(self, char: str) -> int:
        """The token id of one character; ValueError naming the character if none exists."""
        if char in self._ids:
            return self._ids[char]
        if len(char) != 1:
            raise ValueError(f"char_id expects a single character, got {char!r}")
        for candidate in self._candidates(char):
            if self._decodes_to(candidate, char):
                self._ids[char] = candidate
                self._chars.setdefault(candidate, char)
                return candidate
        name = type(self.tokenizer).__name__
        raise ValueError(
            f"the tokenizer ({name}, {getattr(self.tokenizer, 'name_or_path', '') or 'unnamed'})"
            f" has no single token for the character {char!r} (U+{ord(char):04X})"
        )

    def encode_chars(self, text: str) -> list[int]:
        return [self.char_id(c) for c in text]

    def check_text(self, text: str) -> None:
        """Raise ValueError naming the first character of `text` that cannot be encoded."""
        for c in sorted(set(text)):
            self.char_id(c)

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = False) -> str:
        """Characters for known character ids; the tokenizer's decoding for runs of others."""
        out: list[str] = []
        run: list[int] = []
        for i in ids:
            i = int(i)
            if i in self._chars:
                if run:
                    out.append(self.tokenizer.decode(run, skip_special_tokens=skip_special_tokens))
                    run = []
                out.append(self._chars[i])
            else:
                run.append(i)
        if run:
            out.append(self.tokenizer.decode(run, skip_special_tokens=skip_special_tokens))
        return "".join(out)

    def bos_prefix(self) -> list[int]:
        """The ids the tokenizer itself puts before text (usually [bos] or nothing)."""
        if self._bos_prefix is None:
            self._bos_prefix = self._find_bos_prefix()
        return list(self._bos_prefix)

    def _find_bos_prefix(self) -> list[int]:
        plain = self.tokenizer("x", add_special_tokens=False)["input_ids"]
        full = self.tokenizer("x", add_special_tokens=True)["input_ids"]
        for start in range(len(full) - len(plain) + 1):
            if full[start : start + len(plain)] == plain:
                return list(full[:start])
        return []

    def chat_pieces(self) -> tuple[str, str]:
        if self._chat is None:
            self._chat = _chat_pieces(self.tokenizer)
        return self._chat

    def encode_text(self, text: str) -> list[int]:
        """Normal tokenisation without special tokens (instructions, template pieces)."""
        if not text:
            return []
        # Instructions and template pieces repeat for every instance: tokenise them once.
        if text not in self._text_cache:
            ids = list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
            unk = self.tokenizer.unk_token_id
            if unk is not None and unk in ids:
                # A character the vocabulary lacks would reach the model as <unk>: a silent
                # change of the prompt. Name the first such character instead.
                bad = next(
                    (
                        c
                        for c in text
                        if unk in self.tokenizer(c, add_special_tokens=False)["input_ids"]
                    ),
                    "?",
                )
                raise ValueError(
                    f"the tokenizer cannot encode {bad!r} (U+{ord(bad):04X}) of the text "
                    f"{text[:60]!r}: it would become {self.tokenizer.unk_token}; use characters "
                    "of the model's vocabulary"
                )
            self._text_cache[text] = ids
        return list(self._text_cache[text])

    # --- finding the token of a character ----------------------------------------------
    def _find_probe(self) -> tuple[int, str] | None:
        """A plain letter token to put in front of candidates (see the class docstring)."""
        for char in "xaeo0":
            for candidate in self._candidates(char):
                if self.tokenizer.decode([candidate, candidate]) == char * 2:
                    return candidate, char
        return None

    def _candidates(self, char: str) -> list[int]:
        tok = self.tokenizer
        names = [char]
        raw = char.encode("utf-8")
        names.append("".join(BYTE_LEVEL[b] for b in raw))  # byte-level BPE ("Ġ" for " ")
        if char == " ":
            names.append("▁")  # sentencepiece's word boundary
        if len(raw) == 1:
            names.append(f"<0x{raw[0]:02X}>")  # sentencepiece byte fallback
        ids: list[int] = []
        for name in names:
            token_id = self._vocab.get(name)
            if token_id is not None:
                ids.append(int(token_id))
        for text in (char, (self._probe[1] if self._probe else "x") + char):
            encoded = tok(text, add_special_tokens=False)["input_ids"]
            if encoded:
                ids.append(int(encoded[-1]))
        unk = tok.unk_token_id
        seen: set[int] = set()
        result = []
        for i in ids:
            if i in seen or i == unk or i in self._special:
                continue
            seen.add(i)
            result.append(i)
        return result

    def _decodes_to(self, token_id: int, char: str) -> bool:
        if self._probe is None:
            return self.tokenizer.decode([token_id, token_id]) == char * 2
        probe_id, probe_char = self._probe
        text = self.tokenizer.decode([probe_id, token_id, token_id])
        return text == probe_char + char * 2


def _shot_text(example: Any) -> str:
    """A few-shot example as text: an Instance, a (prompt, target) pair or a string."""
    if isinstance(example, str):
        return example
    if isinstance(example, Sequence) and len(example) == 2:
        return str(example[0]) + str(example[1])
    if hasattr(example, "prompt") and hasattr(example, "target"):
        return example.prompt + example.target
    raise ValueError(
        f"a few-shot example must be an Instance, a (prompt, target) pair or a string, "
        f"got {type(example).__name__}"
    )


@dataclass
class Encoding:
    """One Instance as token ids, with where its characters went.

    `prompt_offset`: token position of `prompt[0]`; `target_offset`: of `target[0]` (they
    differ by more than `len(prompt)` only under a chat template, where the assistant turn's
    header sits between them). `reference[i]`: absolute token positions that target token
    `i` (at `target_offset + i`) must attend to. `labels` are -100 except on the target
    tokens and the EOS that follows them.
    """

    input_ids: list[int]
    labels: list[int]
    prompt_offset: int
    target_offset: int
    prompt_len: int  # number of characters in the prompt
    target_len: int
    reference: list[list[int]] = field(default_factory=list)

    def position(self, char_pos: int) -> int:
        """Absolute token position of character `char_pos` of `prompt + target`."""
        if char_pos < self.prompt_len:
            return self.prompt_offset + char_pos
        return self.target_offset + char_pos - self.prompt_len

    @property
    def generation_start(self) -> int:
        """Where generation begins: the ids before it are the prompt to generate from."""
        return self.target_offset


def _layout(
    char_tok: CharTokenizer,
    prompt: str,
    instruction: str | None,
    fewshot: Iterable[Any],
    chat: bool,
) -> tuple[list[int], int, int]:
    """(ids up to the answer, prompt_offset, target_offset) for the given prompt layout."""
    task_ids: list[int] = []
    if instruction:
        task_ids += char_tok.encode_text(instruction) + char_tok.encode_chars(SHOT_SEPARATOR)
    for example in fewshot:
        task_ids += char_tok.encode_chars(_shot_text(example) + SHOT_SEPARATOR)
    prompt_start = len(task_ids)
    task_ids += char_tok.encode_chars(prompt)
    if not chat:
        prefix = char_tok.bos_prefix()
        ids = prefix + task_ids
        return ids, len(prefix) + prompt_start, len(ids)
    before, after = char_tok.chat_pieces()
    ids = char_tok.encode_text(before) + task_ids + char_tok.encode_text(after)
    start = len(char_tok.encode_text(before))
    return ids, start + prompt_start, len(ids)


def _chat_pieces(tokenizer: Any) -> tuple[str, str]:
    """The chat template's text before and after the user's message (with the generation
    prompt), found by rendering a placeholder message."""
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError("chat=True but the tokenizer has no chat_template")
    rendered = tokenizer.apply_chat_template(
        [{"role": "user", "content": CHAT_PLACEHOLDER}],
        tokenize=False,
        add_generation_prompt=True,
    )
    before, sep, after = rendered.partition(CHAT_PLACEHOLDER)
    if not sep:
        raise ValueError("the chat template does not place the user's message verbatim")
    return before, after


def encode_prompt(
    char_tok: CharTokenizer,
    prompt: str,
    instruction: str | None = None,
    fewshot: Iterable[Any] = (),
    chat: bool = False,
) -> list[int]:
    """The ids a model generates the answer from.

    Layout: [bos] instruction "\\n" shot_1 "\\n" ... shot_k "\\n" prompt; the instruction is
    tokenised normally, everything else one token per character. With `chat=True` that
    text is the user's message of the tokenizer's chat template, followed by the
    generation prompt (the assistant turn's header).
    """
    ids, _, _ = _layout(char_tok, prompt, instruction, fewshot, chat)
    return ids


def encode_instance(
    char_tok: CharTokenizer,
    instance: Any,
    instruction: str | None = None,
    fewshot: Iterable[Any] = (),
    chat: bool = False,
    add_eos: bool = True,
) -> Encoding:
    """An Instance for training and teacher-forced scoring: prompt ids, then one token per
    target character, then EOS; labels only on the target and EOS; reference positions made
    absolute (still sparse lists; `harness.foundation.data` densifies them per batch)."""
    prompt_ids, prompt_offset, target_offset = _layout(
        char_tok, instance.prompt, instruction, fewshot, chat
    )
    target_ids = char_tok.encode_chars(instance.target)
    tail = [char_tok.eos_id] if add_eos else []
    input_ids = prompt_ids + target_ids + tail
    labels = [IGNORE_INDEX] * len(prompt_ids) + target_ids + tail
    encoding = Encoding(
        input_ids=input_ids,
        labels=labels,
        prompt_offset=prompt_offset,
        target_offset=target_offset,
        prompt_len=len(instance.prompt),
        target_len=len(instance.target),
    )
    encoding.reference = [[encoding.position(p) for p in row] for row in instance.reference]
    return encoding


def make_char_tokenizer(charset: str, model_max_length: int = 4096) -> Any:
    """A Hugging Face tokenizer whose vocabulary is one token per character of `charset`
    plus <pad> <bos> <eos> <unk>; it prepends <bos>. For models trained from scratch."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "<bos>", "<eos>", "<unk>"]
    chars = sorted(set(charset))
    vocab = {tok: i for i, tok in enumerate(specials + chars)}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    # Every character is its own pre-token, so the word-level model sees single characters.
    backend.pre_tokenizer = pre_tokenizers.Split(Regex("(?m)."), behavior="isolated")
    backend.decoder = decoders.Fuse()
    backend.post_processor = processors.TemplateProcessing(
        single="<bos> $A", pair="<bos> $A $B", special_tokens=[("<bos>", vocab["<bos>"])]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="<pad>",
        bos_token="<bos>",
        eos_token="<eos>",
        unk_token="<unk>",
        model_max_length=model_max_length,
        padding_side="left",
    )
