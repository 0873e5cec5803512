"""Shared machinery of the seven discrete-retrieval tasks (Sorodoc, Boleda and Baroni, 2021).

Every task shows a sequence of `length` binary vectors over 36 features and a query, and
asks a yes/no question. The task modules (one_feature_detection.py ...
contextual_ordered_set_member_detection.py) only decide which features to plant where and
which to keep out; this module samples the background, renders text and masks, and reads
the answer back from visible characters (the oracles).

Text form, one character per feature: feature k (0-35; the paper's feature k+1) is
ALPHABET[k] = "0123456789abcdefghijklmnopqrstuvwxyz"[k]. A vector is its active features
in increasing order (an empty vector is the empty string); vectors are joined by "|", then
"?", the query's features, "=". The target is "1" (yes) or "0" (no):

    3a|07kz||5?k= -> 1        (4 vectors; the query asks about feature k = 20)

Background: every feature that the recipe does not control is active in each vector with
probability `background_percent` / 100 (the paper: 0.2), except 1-6 features per instance
that are excluded everywhere (the paper's guard against "positive if everything is
present"). The Bernoulli draws are bit-parallel: a 37-bit slot per vector (36 features and
the "|") in one integer, built from 16 random words by the binary expansion of p, so p is
exact to 2**-16 (0.2 is drawn as 0.199997), and the text is cut from that integer by C
byte operations; 20,000+ instances/s depend on both.

Masks (one row, the answer): `minimal` references the query and, for a yes, one
occurrence of each feature the yes needs (T3 with both features present: the first
feature's). `paper` references the query and every occurrence of a queried
input feature that decides the answer (positive: the satisfied clause's occurrences;
negative: the queried features that do occur, e.g. the two in the wrong order). A negative
answer depends on the absence of features from every vector, so `sufficient` adds the whole
input for negatives, and for ordered positives the "|" after the first feature's vector
(which shows the two occurrences lie in different vectors, in that order).
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from dataclasses import dataclass
from itertools import accumulate, count
from operator import add

from attentionspan_datasets.tasks.base import Instance, TaskConfig, randbelow

ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"
NUM_FEATURES = len(ALPHABET)
FEATURE_OF = {c: k for k, c in enumerate(ALPHABET)}
HALF = NUM_FEATURES // 2  # mapped pairs join a feature of 0-17 and one of 18-35
VECTOR_SEPARATOR = "|"
QUERY_SEPARATOR = "?"
SEPARATOR = "="
MAX_LENGTH = 200  # vectors per instance; caps the prompt at about 1,700 characters
MAX_EXCLUDED = 30  # keeps at least the 4 controlled features and 2 background ones
MAX_MAPPING_SEED = 2**32 - 1
PRECISION_BITS = 16  # random words per Bernoulli draw: p exact to 2**-16
SLOT = NUM_FEATURES + 1  # cells per vector in the text integer: 36 features and the "|"
FULL = (1 << NUM_FEATURES) - 1


@dataclass
class FeatureConfig(TaskConfig):
    """Lengths (number of vectors), the background rate and the excluded-feature count."""

    min_length: int = 10
    max_length: int = 10
    # Lengths min_length, min_length + length_step, ... up to max_length (the OOD presets
    # test on 20 and 30 only: min 20, max 30, step 10).
    length_step: int = 1
    min_excluded: int = 1
    max_excluded: int = 6
    background_percent: int = 20

    ranges = {"length": ("min_length", "max_length"), "excluded": ("min_excluded", "max_excluded")}

    def check(self) -> None:
        # Two vectors at least: the ordered and two-token recipes need two positions.
        self.check_range("min_length", 2, MAX_LENGTH)
        self.check_range("max_length", 2, MAX_LENGTH)
        self.check_min_max("min_length", "max_length")
        self.check_range("length_step", 1, MAX_LENGTH)
        self.check_range("min_excluded", 0, MAX_EXCLUDED)
        self.check_range("max_excluded", 0, MAX_EXCLUDED)
        self.check_min_max("min_excluded", "max_excluded")
        self.check_range("background_percent", 0, 100)

    def lengths(self) -> range:
        return range(self.min_length, self.max_length + 1, self.length_step)


@dataclass
class MappedConfig(FeatureConfig):
    """T3-T7: the fixed query-to-feature mapping is drawn from `mapping_seed`."""

    mapping_seed: int = 0
    # A training aid, not a paper setting: the query is drawn among features 0 to
    # num_queries - 1 only. A model from scratch gets one bit per instance to learn which two
    # of 36 features a query names, and on all 36 queries at once it stays at chance; a
    # curriculum that grows the query set learns the mapping a few queries at a time
    # (docs/usage_analysis.md, "Recipes"). The presets ask all 36.
    num_queries: int = NUM_FEATURES

    def check(self) -> None:
        super().check()
        self.check_range("mapping_seed", 0, MAX_MAPPING_SEED)
        self.check_range("num_queries", 1, NUM_FEATURES)


# --- the mapping of T3-T7 -------------------------------------------------------------


@functools.lru_cache(maxsize=64)
def mapping(task: str, seed: int, pairs_per_query: int) -> tuple[tuple[tuple[int, int], ...], ...]:
    """`mapping(...)[q]`: the ordered feature pairs that query feature q asks about.

    Each pair joins a feature of 0-17 and one of 18-35 (which comes first is drawn per pair:
    the order T6 and T7 ask for); no pair repeats; every feature is in exactly
    `2 * pairs_per_query` ... of the pairs' slots, i.e. in 2 queries (one pair per query:
    T3, T4, T6) or 4 (two feature-disjoint pairs per query: T5, T7), as Table 1 says.
    Drawn once per (task, seed) from its own generator, never the global one.
    """
    rng = random.Random(f"attentionspan/mapping/{task}/{seed}")
    matchings = 2 * pairs_per_query  # each feature is in this many pairs
    while True:
        pairs: list[tuple[int, int]] = []
        for _ in range(matchings):
            # A random perfect matching between 0-17 and 18-35 that repeats no earlier pair.
            while True:
                partner = rng.sample(range(HALF, NUM_FEATURES), HALF)
                new = list(zip(range(HALF), partner))
                if not set(new) & set(pairs):
                    break
            pairs += new
        pairs = [(a, b) if rng.getrandbits(1) else (b, a) for a, b in pairs]
        rng.shuffle(pairs)
        groups = [tuple(pairs[q::NUM_FEATURES]) for q in range(NUM_FEATURES)]
        # Two pairs of one query share no feature, so a feature is in 4 distinct queries.
        if all(len({f for pair in g for f in pair}) == 2 * len(g) for g in groups):
            return tuple(groups)


def mappings(task: str, pairs_per_query: int) -> Memo:
    """mapping_seed -> `mapping(task, seed, pairs_per_query)`: one dict lookup per instance
    (the lru_cache of `mapping` hashes three arguments per call); at most 64 seeds."""
    return Memo(lambda seed: mapping(task, seed, pairs_per_query), 64)


# --- sampling -------------------------------------------------------------------------


@functools.lru_cache(maxsize=16)
def _probability_bits(percent: int) -> tuple[int, ...]:
    """Binary digits b_1..b_16 of percent/100, truncated (p = sum b_k 2**-k)."""
    scaled = percent * (1 << PRECISION_BITS) // 100
    return tuple((scaled >> (PRECISION_BITS - k)) & 1 for k in range(1, PRECISION_BITS + 1))


def _bernoulli_bits(rng: random.Random, nbits: int, percent: int) -> int:
    """nbits independent bits, each 1 with probability percent/100 (to 2**-16).

    From the least significant binary digit of p up: x = x | r for a 1, x & r for a 0,
    with a fresh random word r each time; P(bit) then equals the expansion's value.
    """
    if percent >= 100:
        return (1 << nbits) - 1
    getrandbits = rng.getrandbits
    x = 0
    for bit in _probability_ops(percent):
        x = (x | getrandbits(nbits)) if bit else (x & getrandbits(nbits))
    return x


@functools.lru_cache(maxsize=16)
def _probability_ops(percent: int) -> tuple[int, ...]:
    """The digits of `_probability_bits` in the order they are applied (least significant
    first)."""
    return tuple(reversed(_probability_bits(percent)))


class Memo(dict):
    """`memo[key]` = `function(key)`, computed once: a plain dict lookup per call (an
    lru_cache wrapper costs a few hundred instructions more); forgets everything past
    `limit` keys."""

    def __init__(self, function, limit: int) -> None:
        super().__init__()
        self.function, self.limit = function, limit

    def __missing__(self, key):
        if len(self) >= self.limit:
            self.clear()
        value = self[key] = self.function(key)
        return value


def _make_layout(length: int) -> tuple[int, int, int, int]:
    """(1 at the start of every slot, the "|" cell of every slot, every cell's code, the
    number of cells).

    Cell i of the text integer is bit i; slot t holds cells 37t (feature 0) to 37t + 35
    (feature 35) and 37t + 36 (the "|" after vector t). `mask * repeat` copies a 37-bit mask
    to every slot. The third value has 2 * (i mod 37) in byte i from the right, the order in
    which bin() writes the cells (the last cell first): added to bin()'s digits read as a
    big-endian number, each byte becomes ord("0") + active + 2 * (i mod 37), which names
    both the cell's character and whether it shows (`_CELL_TO_CHAR`).
    """
    repeat = sum(1 << (SLOT * t) for t in range(length))
    codes = bytes(range(0, 2 * SLOT, 2)) * length
    return repeat, (1 << NUM_FEATURES) * repeat, int.from_bytes(codes, "little"), SLOT * length


_layout = Memo(_make_layout, MAX_LENGTH)  # _layout[length]

# A coded byte (see `_layout`) -> the character of an active cell; the inactive cells'
# bytes (even: "0" is 0x30) and bin()'s "0b" prefix (even, and never coded) are deleted.
_ACTIVE = range(ord("1"), ord("1") + 2 * SLOT, 2)
_CELL_TO_CHAR = bytes.maketrans(bytes(_ACTIVE), (ALPHABET + VECTOR_SEPARATOR).encode())
_INACTIVE = bytes(sorted(set(range(256)) - set(_ACTIVE)))
# A feature character -> its id as a byte, "|" -> 0xff (the split point).
_CHAR_TO_ID = bytes.maketrans((ALPHABET + VECTOR_SEPARATOR).encode(), bytes(range(36)) + b"\xff")


# The positions 0, 1, 2, ...: a row of consecutive positions is a slice of this list (a C
# copy, 0.5 us for a 30-vector input, where a list built from a range took 2.5 us).
_POSITIONS = list(range(MAX_LENGTH * SLOT + 3))  # the longest input, "?", two query characters
NO_EXTRA: dict = {}  # never mutated: `build` copies it into params


def _make_marks(decisive: tuple[int, ...]) -> bytes:
    """A `bytes.translate` table that turns the text's characters of the `decisive` features
    into 0x01 and leaves every other character (none of them 0x01) as it is."""
    table = bytearray(range(256))
    for feature in decisive:
        table[ord(ALPHABET[feature])] = 1
    return bytes(table)


_marks = Memo(_make_marks, 4096)  # _marks[decisive]


def build(
    rng: random.Random,
    config: FeatureConfig,
    task: str,
    length: int,
    query: list[int],
    features: list,
    answer: int,
    case: str,
    planted: list[tuple[int, int]],
    controlled: int,
    decisive: tuple[int, ...],
    first: int | None = None,
    extra: dict = NO_EXTRA,
    keep: int = 0,
) -> Instance:
    """Background + planted features -> text, masks and params: one instance.

    What the task's recipe decided: `query` (the query vector's features, increasing),
    `features` (the queried input features, into params), `answer` (1 or 0), `case` (the
    recipe's branch, e.g. "wrong_order"), `planted` ((feature, vector index) pairs set
    active), `controlled` (a bit mask of the features active only where planted, never
    excluded), `decisive` (the features whose occurrences the paper mask shows), `first`
    (the first feature of an ordered yes), `extra` (more params), `keep` (a bit mask of
    features left in the background and never excluded: T1's training distribution).

    The draws, in order: the number of excluded features and the features (`_exclusions`),
    then the background (`_bernoulli_bits`). Written out inline, without helper calls per
    feature: at 20,000+ instances/s each microsecond is 2% of the budget.
    """
    getrandbits = rng.getrandbits
    excluded, left = _draw_excluded(getrandbits, config, FULL ^ (controlled | keep))
    repeat, separators, cell_codes, cells = _layout[length]
    bits = _draw_background(getrandbits, config.background_percent, cells)
    # The background may show the features neither controlled nor excluded: `left`, and
    # `keep` (never excluded).
    bits = (bits & (left | keep) * repeat) | separators
    for feature, t in planted:
        bits |= 1 << (SLOT * t + feature)
    # All in C: bits -> a digit byte per cell (bin(): the last cell first) -> plus each
    # cell's code (one addition; no carries, every byte stays below 0x80) -> the bytes in
    # cell order (little-endian) -> the active cells' characters, the rest deleted, in one
    # translate -> without the last "|" (the top cell, always set).
    digits = bin(bits).encode()
    coded = int.from_bytes(digits, "big") + cell_codes
    body_bytes = coded.to_bytes(len(digits), "little").translate(_CELL_TO_CHAR, _INACTIVE)[:-1]
    body = body_bytes.decode()
    vectors = list(map(list, body_bytes.translate(_CHAR_TO_ID).split(b"\xff")))
    if len(query) == 1:
        query_text = ALPHABET[query[0]]
    else:
        query_text = "".join([ALPHABET[f] for f in query])
    params = {
        "length": length,
        "vectors": vectors,
        "query": query,
        "features": features,
        "case": case,
        "excluded": excluded,
        **extra,
    }
    row = _reference_row(config.mask, body, body_bytes, query_text, answer, case, decisive, first)
    return Instance(task, f"{body}?{query_text}=", "1" if answer else "0", [row], params)


def _draw_excluded(getrandbits, config: FeatureConfig, left: int) -> tuple[list[int], int]:
    """`_exclusions`, inline: randint(min_excluded, max_excluded) as random.py draws it, then
    features by rejection from 6-bit draws (`left` has a 1 for each feature that may still be
    excluded, and none at 36-63). Returns the excluded features, increasing, and `left`
    without them."""
    low = config.min_excluded
    width = config.max_excluded - low + 1
    k = width.bit_length()
    todo = getrandbits(k)
    while todo >= width:
        todo = getrandbits(k)
    todo += low
    excluded: list[int] = []
    while todo:
        f = getrandbits(6)
        if left >> f & 1:
            left ^= 1 << f
            excluded.append(f)
            todo -= 1
    excluded.sort()
    return excluded, left


def _draw_background(getrandbits, percent: int, cells: int) -> int:
    """`cells` bits, each set with probability `percent` / 100 (`_bernoulli_bits`, inline)."""
    if percent == 20:
        # The paper's p = 0.2, digits 0011 0011 0011 0011: the loop below written out.
        bits = 0
        for _ in range(4):
            bits = (bits | getrandbits(cells) | getrandbits(cells)) & getrandbits(cells)
            bits &= getrandbits(cells)
    elif percent >= 100:
        bits = (1 << cells) - 1
    else:
        bits = 0
        for bit in _probability_ops(percent):
            bits = (bits | getrandbits(cells)) if bit else (bits & getrandbits(cells))
    return bits


def _reference_row(
    mask: str,
    body: str,
    body_bytes: bytes,
    query_text: str,
    answer: int,
    case: str,
    decisive: tuple[int, ...],
    first: int | None,
) -> list[int]:
    """The reference positions of the answer under `mask` (`build`'s arguments)."""
    # Masks: the input is body[0:n], "?" at n, the query from n + 1. A feature is at most
    # once per vector and its character is nowhere else in the body, so its occurrences
    # are the character's positions in the body.
    n = len(body)
    if mask == "sufficient" and not answer:
        # The whole input and the query.
        row = _POSITIONS[:n]
        row += _POSITIONS[n + 1 : n + 1 + len(query_text)]
    elif mask == "minimal":
        row = _POSITIONS[n + 1 : n + 1 + len(query_text)]
        if answer:  # one occurrence of each feature the yes needs
            needed = decisive[:1] if case.startswith("both_") else decisive
            row += [body.find(ALPHABET[feature]) for feature in needed]
            row.sort()
    else:
        # Every occurrence of a decisive feature, increasing, in C: the decisive characters
        # become 0x01; split there, piece k ends at (length of pieces 0..k) + k, which is
        # the k-th occurrence (the last piece ends at n: the query's place).
        pieces = body_bytes.translate(_marks[decisive]).split(b"\x01")
        row = list(map(add, accumulate(map(len, pieces)), count()))
        row[-1] = n + 1
        if len(query_text) == 2:
            row.append(n + 2)
        if first is not None and mask == "sufficient":
            # The "|" after the first feature's vector shows the two lie in different vectors.
            row.append(body.find(VECTOR_SEPARATOR, body.find(ALPHABET[first])))
            row.sort()
    return row


def _exclusions(rng: random.Random, config: FeatureConfig, avoid: set[int]) -> list[int]:
    """min_excluded-max_excluded features drawn uniformly among those not in `avoid`.

    Rejection from 6-bit draws: a few draws instead of building and sampling a list.
    `build` draws the same numbers inline; this is its readable form (and the tests')."""
    count = rng.randint(config.min_excluded, config.max_excluded)
    chosen: set[int] = set()
    while len(chosen) < count:
        f = rng.getrandbits(6)
        if f < NUM_FEATURES and f not in avoid:
            chosen.add(f)
    return sorted(chosen)


def two_positions(rng: random.Random, n: int) -> tuple[int, int]:
    """`rng.sample(range(n), 2)` (n >= 2): the same two numbers and draws, inline.

    random.py samples 2 of n <= 21 from a pool (the second draw is below n - 1, and the
    first pick's slot then holds n - 1), of n > 21 by redrawing a repeat; both written out
    here with `randbelow` inline, which is 2 us cheaper than the call."""
    getrandbits = rng.getrandbits
    k = n.bit_length()
    j = getrandbits(k)
    while j >= n:
        j = getrandbits(k)
    if n <= 21:
        m = n - 1
        k = m.bit_length()
        i = getrandbits(k)
        while i >= m:
            i = getrandbits(k)
        return j, (m if i == j else i)
    # randbelow(n) until it differs from j: the first draw below n that is not j.
    i = getrandbits(k)
    while i >= n or i == j:
        i = getrandbits(k)
    return j, i


def draw_length(rng: random.Random, config: FeatureConfig) -> int:
    """`rng.randrange(min_length, max_length + 1, length_step)`, drawn as random.py does
    (`randbelow` inline)."""
    low = config.min_length
    high = config.max_length
    if low == high:
        return low
    step = config.length_step
    n = (high - low + step) // step
    k = n.bit_length()
    r = rng.getrandbits(k)
    while r >= n:
        r = rng.getrandbits(k)
    return low + step * r


def query_feature(rng: random.Random, count: int = NUM_FEATURES) -> int:
    """The query feature of T1 and T3-T7, among features 0 to count - 1 (`num_queries`;
    the presets' 36 draw 6 bits at a time)."""
    return randbelow(rng, count)


# --- recipes shared by several tasks ----------------------------------------------------


def two_feature_plan(rng: random.Random, length: int, a: int, b: int) -> tuple:
    """T2's pipeline for features a, b: positive (same vector or two vectors, drawn
    uniformly) or negative (one of them in one vector, or neither).

    Returns (answer, case, planted, decisive)."""
    if rng.getrandbits(1):
        return two_feature_plan_positive(rng, length, a, b)
    if rng.getrandbits(1):
        present = a if rng.getrandbits(1) else b
        return 0, "one_present", [(present, randbelow(rng, length))], (present,)
    return 0, "none_present", [], ()


def two_feature_plan_positive(rng: random.Random, length: int, a: int, b: int) -> tuple:
    """Both features: in one vector or in two (drawn uniformly)."""
    if rng.getrandbits(1):
        t = randbelow(rng, length)
        return 1, "same_vector", [(a, t), (b, t)], (a, b)
    s, t = two_positions(rng, length)
    return 1, "different_vectors", [(a, s), (b, t)], (a, b)


def ordered_plan(rng: random.Random, length: int, first: int, second: int) -> tuple:
    """T6's pipeline for `first` before `second`: positive (two vectors in that order);
    negative (both in the wrong order, or at most one: one of them, or neither, uniformly).

    Returns (answer, case, planted, decisive, `first` for a yes else None)."""
    if rng.getrandbits(1):
        s, t = two_positions(rng, length)
        if s > t:
            s, t = t, s
        return 1, "in_order", [(first, s), (second, t)], (first, second), first
    if rng.getrandbits(1):
        s, t = two_positions(rng, length)
        if s > t:
            s, t = t, s
        return 0, "wrong_order", [(second, s), (first, t)], (first, second), None
    if rng.getrandbits(1):
        present = first if rng.getrandbits(1) else second
        return 0, "one_present", [(present, randbelow(rng, length))], (present,), None
    return 0, "none_present", [], (), None


def other_pair_absent(rng: random.Random, pair: tuple[int, int]) -> tuple[int, int]:
    """T5/T7: one feature of the other pair (drawn) is kept out of the sequence; the other
    stays in the background. Returns (absent feature, background feature)."""
    absent = pair[rng.getrandbits(1)]
    return absent, pair[0] if absent == pair[1] else pair[1]


def build_one_pair(
    rng: random.Random,
    config: MappedConfig,
    task: str,
    length: int,
    q: int,
    a: int,
    b: int,
    plan: tuple,
) -> Instance:
    """T3, T4, T6: the instance of query `q` about its one mapped pair (a, b), from the
    recipe's `plan` (answer, case, planted, decisive[, first]); a and b are controlled."""
    answer, case, planted, decisive, *first = plan
    extra = {"mapping_seed": config.mapping_seed}
    return build(
        rng, config, task, length, [q], [a, b], answer, case, planted,
        1 << a | 1 << b, decisive, first[0] if first else None, extra,
    )  # fmt: skip


def build_two_pairs(
    rng: random.Random,
    config: MappedConfig,
    task: str,
    length: int,
    q: int,
    pairs: tuple[tuple[int, int], tuple[int, int]],
    make_plan: Callable[[random.Random, int, int, int], tuple],
) -> Instance:
    """T5, T7: query `q` asks about two mapped pairs. One pair is drawn and decided by
    `make_plan(rng, length, a, b)` (answer, case, planted, decisive[, first]); one feature
    of the other is kept out (`other_pair_absent`), and a no also depends on the other's
    background feature. The draws, in order: the pair, the plan, the absent feature."""
    chosen = rng.getrandbits(1)
    (a, b), other = pairs[chosen], pairs[1 - chosen]
    answer, case, planted, decisive, *first = make_plan(rng, length, a, b)
    absent, background = other_pair_absent(rng, other)
    if not answer:
        decisive = (*decisive, background)
    extra = {"mapping_seed": config.mapping_seed, "pair": chosen}
    return build(
        rng, config, task, length, [q], [[*pairs[0]], [*pairs[1]]], answer, case, planted,
        1 << a | 1 << b | 1 << absent, decisive, first[0] if first else None, extra,
    )  # fmt: skip


# --- reading the answer back (oracles) ---------------------------------------------------


def read_visible(visible: list, query_size: int) -> tuple[list[int] | None, list]:
    """(query features or None if hidden, the visible input characters with positions)."""
    end = len(visible) - 2  # before "=" and the target
    query_chars = visible[end - query_size : end]
    if any(c is None for c in query_chars):
        return None, []
    return [FEATURE_OF[c] for c in query_chars], visible[: end - query_size - 1]


def present(inputs: list) -> set[int]:
    """Features seen active in the visible input."""
    return {FEATURE_OF[c] for c in inputs if c is not None and c != VECTOR_SEPARATOR}


def precedes(inputs: list, first: int, second: int) -> bool:
    """Whether a visible `first` lies in an earlier vector than a visible `second`: a
    visible "|" between the two occurrences proves it."""
    a, b = ALPHABET[first], ALPHABET[second]
    separators, earliest_a, latest_b = 0, None, None
    for c in inputs:
        if c == VECTOR_SEPARATOR:
            separators += 1
        elif c == a and earliest_a is None:
            earliest_a = separators
        elif c == b:
            latest_b = separators
    return earliest_a is not None and latest_b is not None and earliest_a < latest_b


def answer(flag: bool) -> str:
    return "1" if flag else "0"


def register_retrieval_presets(short: str, task: str) -> None:
    """The presets of a discrete-retrieval task (Sorodoc, Boleda and Baroni 2021, Section
    3.2), declared by its file under the paper's name `short` (`t6`): `t<k>_len<n>` with n
    vectors for the paper's lengths 5-30, then an ID/OOD pair (train on 10 vectors, test on
    20 and 30). The paper's split sizes (100k / 10k / 10k) are builder arguments:
    load_dataset("attentionspan", "t6_len10", num_train=100_000, num_validation=10_000,
    num_test=10_000)."""
    from attentionspan_datasets import presets

    presets.register_short(short, task)
    presets.RETRIEVAL_TASKS[short] = task
    for n in presets.RETRIEVAL_LENGTHS:
        presets.register_preset(f"{short}_len{n}", task, {"min_length": n, "max_length": n})
    presets.register_pair(
        short,
        task,
        {"min_length": 10, "max_length": 10},
        {"min_length": 20, "max_length": 30, "length_step": 10},
    )
