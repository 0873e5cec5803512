"""Planted-mechanism models: tiny Llamas, weights set by hand, whose mechanism is known.

    from tests.planted import build, MECHANISMS
    model, tokenizer, id_instances, ood_instances, truth = build("dilution", shift=0)
    truth.lookup_heads        # ((0, 2),): the head that does the lookup
    ranking = rank_heads(model, tokenizer, id_instances, shift=truth.shift)

They are the calibration set of the verdict (docs/architecture.md: a verdict is "calibrated
by tests on models planted by hand whose mechanism is known"): every one runs through the
project's own engine (`Scorer`, `capture_attention`, `rank_heads`, `score_settings`) in well
under a second.

The task: string reversal in the project's format (`string_reversal`, prompt `s=`, target
`s[::-1]`, target[i] references prompt position L-1-i), on hand-built instances whose
characters name their positions. Each character names its distance from the separator:
the prompt character at position p names L-1-p, so the answer's character i names i,
whatever L. Each name has two variants (two characters of Latin Extended-A, U+0100 + 2n
and U+0101 + 2n), drawn at random, so an answer is only right when the model copies the
character it finds (the name alone does not say which variant). The preset generator
draws from an alphanumeric charset in which a character says nothing of its position,
which no hand-set content lookup can serve; the instances keep the presets' lengths
(ID 1-10, OOD 11-50) and carry their config names, so per-length reports work.

The lookup is content-based: the query of row i (the separator for row 0, else target[i-1],
which names i-1; the separator acts as name -1) asks for name i. Queries and keys live in
the RoPE pairs that barely rotate (rope_theta 1e9, head_dim 128: pairs 32-63 turn less than
0.004 rad over the longest sequence), one dimension (a "slot") per name, so the score does
not depend on position (nor on left padding). The residual stream is [token one-hot |
output channel | previous character | anchor]: the lookup head's OV copies the attended
character's one-hot into the output channel (every value also carries a component all keys
share, MEAN_VALUE, which no head writes out), the unembedding reads that channel with gain
`g`, and EOS is the default token, with a constant logit `b` read from the anchor (a large
constant that also makes every RMSNorm an identity, up to 5e-5). A character wins when
g x (its mass) > b: when the lookup head's mass on the right key is below tau = b/g, the
model ends its answer there. The last row of every answer asks for a name the prompt lacks,
finds nothing and ends the answer the same way.

Shift 1: layer 0 holds a previous-token head (fast RoPE pairs 0-7, a query from the anchor
rotated one position back: the score sum_j A cos((d - 1) theta_j) peaks at distance 1 with
a margin of 24.7 nats) whose OV copies the previous character into the "previous character"
channel; the layer-1 lookup head asks for the key whose *previous* character names i (the
key after the reference, ref+1; for row 0 that is the separator itself) and copies that
channel: it reads ref+1, which carries the reference character.

Every layer has four query heads sharing one key/value head (multi-query attention, which
keeps the KV cache small); the mechanism's heads are (layer, 2), the lookup or copy head,
and for shift 1 also (0, 1), the previous-token head. The other heads are idle: they sink
(score 10 on BOS) and write nothing, so a ranking puts them last and a push on them does
nothing. There is no MLP (its weights are 0). Nothing is random: weights are set by hand,
instances come from fixed seeds.

The mechanisms (numbers measured through the engine on `id_instances()`/`ood_instances()`):
- dilution: a one-hot lookup with score kappa = 5 on the right key and 0 on every other, so
  its mass is e^5 / (e^5 + N - 1) over N visible keys: >= 0.881 at ID lengths (N <= 21),
  down to 0.597 at L = 50, always the argmax; tau sits between N = 21 and N = 22, so every
  OOD answer ends early. A push of C = 0.3 at ref + shift lifts every OOD row over tau
  (exact match 0 -> 1); C = 0.1 repairs the shorter ones (0 -> 0.275).
- slip: names share slots modulo 11 (the lookup cannot tell name 3 from 14; 11, so that
  name 10, which the last row of a length-10 answer asks for, has a slot of its own) and a
  key's score grows with its name (8 + 0.5 n: the furthest match wins). At ID no two names
  share a slot; at OOD a row whose name i has an alias i + 11k in the prompt puts ~all its
  mass on the largest alias (at most 0.004 stays on the reference), and the model copies
  that character. A push C >= 1 at the reference outweighs the alias.
- no_lookup: the copy head has query 0 (uniform attention: 1/N on every key) and copies
  with gain g = 42; the unembedding adds beta = 20 to both variants of the next name (a
  bigram "learned" for names below 10 only) and EOS has b = 21.5. The present variant of
  the next name wins by its 1/N share; beyond name 9 there is no bigram and the answer
  ends. No head looks at the reference, yet a push follows: C = 0.5 at the reference
  repairs most OOD answers (0 -> 0.775), and at ref+3 the model writes what is there.
- downstream: a sharp lookup (kappa = 10: mass >= 0.995 on the reference at every length),
  but the unembedding of names >= 10 is crossed: a character's output channel drives the
  logit of its other variant. The model looks right and writes wrong; no push helps.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, NamedTuple

MECHANISMS = ("dilution", "slip", "no_lookup", "downstream")
SHIFTS = (0, 1)

SEPARATOR = "="
NAMES = 64  # names 0..63, two characters each
FIRST_CHAR = 0x100  # Latin Extended-A: U+0100 .. U+017F
ID_LENGTHS = tuple(range(1, 11))  # as reversal_id
OOD_LENGTHS = tuple(range(11, 51))  # as reversal_ood
ID_CONFIG, OOD_CONFIG = "reversal_id", "reversal_ood"
TASK = "string_reversal"

# Shape and geometry.
NUM_HEADS = 4
HEAD_DIM = 128
ROPE_THETA = 1e9
FAST_PAIRS = 8  # RoPE pairs 0..7 (frequencies 1 .. 0.10 rad per position): previous token
SLOW_PAIR = 32  # pairs 32..63 turn by <= 3.2e-5 rad per position: 64 content slots
SINK_DIM = 31  # pair 31 (4.4e-5 rad per position): the idle heads' key on BOS
ANCHOR = 100.0  # the constant component every token carries
MECHANISM_HEAD = 2  # (layer, 2) looks up / copies
PREVIOUS_HEAD = 1  # (0, 1) is the previous-token head of a shift-1 model
PREVIOUS_AMPLITUDE = 25.0  # margin 0.987 * 25 = 24.7 nats at distance 1 over any other
SINK_SCORE = 10.0  # idle heads: score 10 on BOS, 0 elsewhere

# Every key's value also carries MEAN_VALUE in one value dimension that no head writes out
# (that of MEAN_CHAR, a character no text holds: answers are at most 50 long, names reach
# 63): the component real values share. It changes no logit; it keeps a head's output from
# shrinking when its weight spreads over more keys (the spread weight still reads the shared
# component), so a dilution here is weight lost from the reference, not an output grown
# short, which rescaling the output to its ID norm would mend (tests/calibration_output_
# scale.py builds that model by setting it to 0).
MEAN_VALUE = 2.0

# The boundary the mechanisms break at: names below it are the ones ID answers write.
LIMIT = 10
# slip: names share slots modulo 11, so that name 10 (which the last row of a length-10
# answer asks for, to find nothing and end) has a slot of its own.
SLIP_PERIOD = LIMIT + 1

# Per-mechanism numbers (see the module docstring).
DILUTION_KAPPA = 5.0
SLIP_BASE, SLIP_SLOPE = 8.0, 0.5
DOWNSTREAM_KAPPA = 10.0
COPY_GAIN = 100.0
SHARP_TAU = 0.7  # slip and downstream: above the 0.5 a final row can give a character
NO_LOOKUP_GAIN, NO_LOOKUP_BIGRAM, NO_LOOKUP_EOS = 42.0, 20.0, 21.5


def _dilution_mass(keys: int) -> float:
    """The dilution head's mass on the right key among `keys` visible keys."""
    e = math.exp(DILUTION_KAPPA)
    return e / (e + keys - 1)


# Between the worst ID row (N = 2 * 10 + 1 = 21 keys) and the next N.
DILUTION_TAU = (_dilution_mass(21) + _dilution_mass(22)) / 2


# --- characters and instances ------------------------------------------------------------
def char_of(name: int, variant: int) -> str:
    if not (0 <= name < NAMES and variant in (0, 1)):
        raise ValueError(f"no character for name {name}, variant {variant}")
    return chr(FIRST_CHAR + 2 * name + variant)


def name_of(char: str) -> int:
    """The name a character carries (its distance from the separator in a prompt)."""
    return (ord(char) - FIRST_CHAR) // 2


def partner(char: str) -> str:
    """The other variant of the same name."""
    return chr(FIRST_CHAR + ((ord(char) - FIRST_CHAR) ^ 1))


CHARSET = SEPARATOR + "".join(char_of(n, v) for n in range(NAMES) for v in (0, 1))
MEAN_CHAR = char_of(NAMES - 2, 1)  # its value dimension holds the shared component


def make_instance(length: int, config: str, index: int, rng: random.Random):
    """One reversal instance of `length` whose prompt character at p names length-1-p."""
    from attentionspan_datasets.tasks.base import Instance

    if not 1 <= length <= NAMES:
        raise ValueError(f"length must be in 1..{NAMES}, got {length}")
    chars = "".join(char_of(length - 1 - p, rng.randrange(2)) for p in range(length))
    reference = [[length - 1 - i] for i in range(length)]
    return Instance(
        TASK, chars + SEPARATOR, chars[::-1], reference, {"length": length}, config, index
    )


def make_instances(lengths, config: str, seed: int, repeats: int = 1):
    """`repeats` instances of every length in `lengths` (length by length, in order)."""
    rng = random.Random(f"planted/{config}/{seed}")
    wanted = [length for _ in range(repeats) for length in lengths]
    return [make_instance(length, config, i, rng) for i, length in enumerate(wanted)]


def id_instances(seed: int = 0, repeats: int = 3):
    """30 ID instances (lengths 1..10, three each): what `rank_heads` reads by default."""
    return make_instances(ID_LENGTHS, ID_CONFIG, seed, repeats)


def ood_instances(seed: int = 0, repeats: int = 1):
    """40 OOD instances (lengths 11..50, one each)."""
    return make_instances(OOD_LENGTHS, OOD_CONFIG, seed, repeats)


@lru_cache(maxsize=1)
def planted_tokenizer():
    """The character tokenizer of every planted model (<pad> <bos> <eos> <unk>, '=', and
    the 128 name characters), wrapped in the project's `CharTokenizer`."""
    from harness.foundation.tokenization import CharTokenizer, make_char_tokenizer

    return CharTokenizer(make_char_tokenizer(CHARSET))


# --- what is planted ------------------------------------------------------------------------
@dataclass(frozen=True)
class Truth:
    """What a planted model does, by construction.

    mechanism: one of MECHANISMS; shift: which key the lookup reads (0: the reference, 1:
    the key after it); lookup_heads: (layer, head) that look up the answer (empty for
    no_lookup); copy_heads: (layer, head) whose OV writes the answer (the lookup head, or
    no_lookup's uniform head); previous_token_heads: layer 0's previous-token head (shift
    1); tau: the mass on one key a character needs to be written (when the readout is
    g x mass against a constant EOS logit; None for no_lookup); limit: the name from which
    the mechanism breaks (slip: names share slots modulo it; downstream: names from it are
    written crossed; no_lookup: names from it have no bigram); repairable: a small push at
    the (shifted) reference restores OOD answers because the lookup is right but weak.
    """

    mechanism: str
    shift: int
    lookup_heads: tuple[tuple[int, int], ...]
    copy_heads: tuple[tuple[int, int], ...]
    previous_token_heads: tuple[tuple[int, int], ...] = ()
    tau: float | None = None
    limit: int = LIMIT
    repairable: bool = False
    params: dict[str, float] = field(default_factory=dict)

    def key_position(self, length: int, row: int) -> int:
        """The prompt+target position the lookup should read for `row` (ref + shift)."""
        return length - 1 - row + self.shift

    def alias_position(self, length: int, row: int) -> int | None:
        """slip: the position the lookup reads instead of ref + shift at `row` (the key of
        the largest name sharing the reference's slot), or None when the row does not slip."""
        if self.mechanism != "slip":
            return None
        name = row + ((length - 1 - row) // self.limit) * self.limit
        if name == row:
            return None
        return length - 1 - name + self.shift


class Planted(NamedTuple):
    model: Any
    tokenizer: Any
    id_instances: list
    ood_instances: list
    truth: Truth


# --- weights -----------------------------------------------------------------------------------
class _Layout:
    """Residual dimensions: token one-hot [0, V), output channel [V, 2V), previous
    character [2V, 3V), anchor 3V."""

    def __init__(self, char_tok):
        hf = char_tok.tokenizer
        self.vocab = len(hf)
        self.hidden = 3 * self.vocab + 1
        self.anchor = 3 * self.vocab
        self.eos = char_tok.eos_id
        self.bos = hf.bos_token_id
        self.separator = char_tok.char_id(SEPARATOR)
        self.chars = {c: char_tok.char_id(c) for c in CHARSET if c != SEPARATOR}
        # A value dimension per name character (128 of them: the head's 128 dimensions).
        self._value = {t: i for i, t in enumerate(sorted(self.chars.values()))}

    def value(self, t: int) -> int:
        return self._value[t]

    def tok(self, t: int) -> int:
        return t

    def out(self, t: int) -> int:
        return self.vocab + t

    def prev(self, t: int) -> int:
        return 2 * self.vocab + t


def _slot(s: int) -> int:
    """The head dimension of content slot s: both halves of the slow RoPE pairs."""
    half = HEAD_DIM // 2
    if not 0 <= s < 2 * (half - SLOW_PAIR):
        raise ValueError(f"slot {s} out of range")
    return SLOW_PAIR + s if s < half - SLOW_PAIR else half + s


def _blank_model(char_tok, layout: _Layout, layers: int):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    hf = char_tok.tokenizer
    config = LlamaConfig(
        vocab_size=layout.vocab,
        hidden_size=layout.hidden,
        intermediate_size=1,
        num_hidden_layers=layers,
        num_attention_heads=NUM_HEADS,
        num_key_value_heads=1,
        head_dim=HEAD_DIM,
        max_position_embeddings=4 * NAMES,
        rope_theta=ROPE_THETA,
        tie_word_embeddings=False,
        bos_token_id=hf.bos_token_id,
        eos_token_id=hf.eos_token_id,
        pad_token_id=hf.pad_token_id,
    )
    model = LlamaForCausalLM(config)
    model.set_attn_implementation("eager")
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        embed = model.model.embed_tokens.weight
        for t in range(layout.vocab):
            embed[t, layout.tok(t)] = 1.0
            embed[t, layout.anchor] = ANCHOR
        # RMSNorm of (one-hot + anchor) is the identity with this weight; a second layer
        # sees one more O(1) component (a relative change of 5e-5).
        scale = math.sqrt((1.0 + ANCHOR**2) / layout.hidden)
        for block in model.model.layers:
            block.input_layernorm.weight.fill_(scale)
            block.post_attention_layernorm.weight.fill_(scale)
            # Every layer's idle heads sink on BOS: its key, in a dimension of its own.
            block.self_attn.k_proj.weight[SINK_DIM, layout.tok(layout.bos)] = 1.0
        model.model.norm.weight.fill_(scale)
    return model.eval()


# The one key/value head of a layer is shared by its four query heads (multi-query
# attention); each query head reads the key dimensions of its own role.
def _values(attn, layout: _Layout, source, mean: float = MEAN_VALUE) -> None:
    """The layer's values: the one-hot of each name character read at `source`, and
    `mean` (read from the anchor every token carries) in MEAN_CHAR's dimension."""
    for t in layout.chars.values():
        attn.v_proj.weight[layout.value(t), source(t)] = 1.0
    attn.v_proj.weight[layout.value(layout.chars[MEAN_CHAR]), layout.anchor] = mean / ANCHOR


def written(layout: _Layout) -> list[int]:
    """The characters whose value dimension a head writes out: all but MEAN_CHAR."""
    return [t for c, t in layout.chars.items() if c != MEAN_CHAR]


def _write(attn, layout: _Layout, h: int, target) -> None:
    """Head h's output: the values' one-hot, written to channel `target` (the shared
    component, MEAN_CHAR's dimension, is written nowhere)."""
    for t in written(layout):
        attn.o_proj.weight[target(t), h * HEAD_DIM + layout.value(t)] = 1.0


def _sink_head(attn, layout: _Layout, h: int) -> None:
    """An idle head: its query puts ~all its weight on BOS (an attention sink, score
    SINK_SCORE), and it writes nothing; a ranking puts it below any head that reads."""
    q = attn.q_proj.weight
    q[h * HEAD_DIM + SINK_DIM, layout.anchor] = SINK_SCORE * math.sqrt(HEAD_DIM) / ANCHOR


def _previous_token_head(attn, layout: _Layout, h: int) -> None:
    """Attend the previous position (fast RoPE pairs: keys 1 from the anchor, the query
    rotated back by one position), copy its character to the `prev` channel."""
    q, k, base, half = attn.q_proj.weight, attn.k_proj.weight, h * HEAD_DIM, HEAD_DIM // 2
    amplitude = PREVIOUS_AMPLITUDE * math.sqrt(HEAD_DIM) / ANCHOR  # eager scales by 1/sqrt(D)
    for j in range(FAST_PAIRS):
        theta = ROPE_THETA ** (-2 * j / HEAD_DIM)
        q[base + j, layout.anchor] = amplitude * math.cos(theta)
        q[base + half + j, layout.anchor] = -amplitude * math.sin(theta)
        k[j, layout.anchor] = 1.0 / ANCHOR
    _values(attn, layout, layout.tok)
    _write(attn, layout, h, layout.prev)


def _lookup_head(attn, layout: _Layout, h: int, source, slot_of, key_weight, kappa) -> None:
    """Queries ask for name + 1 (the separator for name 0); keys answer with their name,
    read at `source` (the token, or for shift 1 the previous character), in the slot
    `slot_of(name)` with weight `key_weight(name)`; the head copies what it reads."""
    q, k, base = attn.q_proj.weight, attn.k_proj.weight, h * HEAD_DIM
    gain = kappa * math.sqrt(HEAD_DIM)
    q[base + _slot(slot_of(0)), layout.tok(layout.separator)] = gain
    for char, t in layout.chars.items():
        n = name_of(char)
        if n + 1 < NAMES:
            q[base + _slot(slot_of(n + 1)), layout.tok(t)] = gain
        k[_slot(slot_of(n)), source(t)] = key_weight(n)
    _values(attn, layout, source)
    _write(attn, layout, h, layout.out)


def _readout(model, layout: _Layout, gain: float, eos: float, crossed_from: int | None = None):
    """logit(c) = gain x output channel of c (of its partner for names >= crossed_from);
    logit(EOS) = eos, from the anchor."""
    w = model.lm_head.weight
    for char, t in layout.chars.items():
        crossed = crossed_from is not None and name_of(char) >= crossed_from
        w[layout.chars[partner(char)] if crossed else t, layout.out(t)] = gain
    w[layout.eos, layout.anchor] = eos / ANCHOR


def build(mechanism: str, shift: int = 0) -> Planted:
    """(model, tokenizer, id_instances, ood_instances, truth) of one planted mechanism."""
    import torch

    if mechanism not in MECHANISMS:
        raise ValueError(f"mechanism must be one of {', '.join(MECHANISMS)}, got {mechanism!r}")
    if shift not in SHIFTS:
        raise ValueError(f"shift must be 0 or 1, got {shift}")
    char_tok = planted_tokenizer()
    layout = _Layout(char_tok)
    model = _blank_model(char_tok, layout, layers=1 + shift)
    layer = shift  # the lookup layer
    head = (layer, MECHANISM_HEAD)
    source = layout.prev if shift else layout.tok
    previous = ((0, PREVIOUS_HEAD),) if shift else ()

    def identity(n: int) -> int:  # a slot per name
        return n

    def alias(n: int) -> int:  # slip: names share slots modulo SLIP_PERIOD
        return n % SLIP_PERIOD

    def one(n: int) -> float:  # every key the same weight
        return 1.0

    def furthest(n: int) -> float:  # slip: the larger the name, the stronger the key
        return SLIP_BASE + SLIP_SLOPE * n

    with torch.no_grad():
        for at, block in enumerate(model.model.layers):
            for h in range(NUM_HEADS):
                if (at, h) != head and (at, h) not in previous:
                    _sink_head(block.self_attn, layout, h)
        if shift:
            _previous_token_head(model.model.layers[0].self_attn, layout, PREVIOUS_HEAD)
        attn = model.model.layers[layer].self_attn
        facts = {"copy_heads": (head,), "previous_token_heads": previous}
        if mechanism == "dilution":
            _lookup_head(attn, layout, MECHANISM_HEAD, source, identity, one, DILUTION_KAPPA)
            _readout(model, layout, COPY_GAIN, COPY_GAIN * DILUTION_TAU)
            facts.update(lookup_heads=(head,), tau=DILUTION_TAU, repairable=True)
            facts["params"] = {"kappa": DILUTION_KAPPA, "gain": COPY_GAIN}
        elif mechanism == "slip":
            _lookup_head(attn, layout, MECHANISM_HEAD, source, alias, furthest, 1.0)
            _readout(model, layout, COPY_GAIN, COPY_GAIN * SHARP_TAU)
            facts.update(lookup_heads=(head,), tau=SHARP_TAU, limit=SLIP_PERIOD)
            facts["params"] = {"base": SLIP_BASE, "slope": SLIP_SLOPE, "gain": COPY_GAIN}
        elif mechanism == "downstream":
            _lookup_head(attn, layout, MECHANISM_HEAD, source, identity, one, DOWNSTREAM_KAPPA)
            _readout(model, layout, COPY_GAIN, COPY_GAIN * SHARP_TAU, crossed_from=LIMIT)
            facts.update(lookup_heads=(head,), tau=SHARP_TAU)
            facts["params"] = {"kappa": DOWNSTREAM_KAPPA, "gain": COPY_GAIN}
        else:  # no_lookup: query 0 (uniform attention), copy, and a bigram prior
            _values(attn, layout, source)
            _write(attn, layout, MECHANISM_HEAD, layout.out)
            _readout(model, layout, NO_LOOKUP_GAIN, NO_LOOKUP_EOS)
            w = model.lm_head.weight
            for char, t in layout.chars.items():
                n = name_of(char)
                if n == 0:
                    w[t, layout.tok(layout.separator)] = NO_LOOKUP_BIGRAM
                elif n < LIMIT:
                    for v in (0, 1):
                        w[t, layout.tok(layout.chars[char_of(n - 1, v)])] = NO_LOOKUP_BIGRAM
            facts.update(lookup_heads=())
            facts["params"] = {
                "gain": NO_LOOKUP_GAIN,
                "bigram": NO_LOOKUP_BIGRAM,
                "eos": NO_LOOKUP_EOS,
            }
    truth = Truth(mechanism, shift, **facts)
    return Planted(model, char_tok, id_instances(), ood_instances(), truth)


def build_all() -> dict[tuple[str, int], Planted]:
    """Every planted model, keyed by (mechanism, shift)."""
    return {(m, s): build(m, s) for m in MECHANISMS for s in SHIFTS}
