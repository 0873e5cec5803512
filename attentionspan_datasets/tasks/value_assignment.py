"""Value assignment: translate a string symbol by symbol through a table given in the prompt.

The prompt is a translation table of `table_size` pairs key + value (distinct keys from
`input_alphabet`, values drawn with replacement from `output_alphabet`), then the string
(`length` symbols drawn uniformly with replacement from the table's keys, so a key may be
absent from it), then "=". The target is the string with every symbol replaced by its value.

Examples:
    B1E0D1A1C0ABBEDACABCD= -> 11101101101

`sorted_keys=True` puts the table's keys in `input_alphabet` order (a curriculum stage for
models trained from scratch; the presets keep the random order).

Mask rule, for target[i], which translates the string symbol s_i:
    minimal     s_i and the table's value character for s_i.
    paper       s_i, and the key and the value of s_i's pair in the table (the authors'
                rule): the key is what matches s_i and so locates the value.
    sufficient  the `paper` rule: the oracle finds the visible key equal to the visible
                symbol and reads the value character after it.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass
from operator import itemgetter

from attentionspan_datasets.presets import register_pair
from attentionspan_datasets.tasks.base import (
    MAX_CHARSET,
    REJECTED,
    Instance,
    TaskConfig,
    randbelow,
    register_task,
    uniform_bytes,
)

NAME = "value_assignment"
SEPARATOR = "="
# 52 letters: the OOD preset's table needs up to 50 distinct keys.
DEFAULT_INPUT_ALPHABET = string.ascii_letters
MAX_LENGTH = 100_000  # symbols in the string to translate


@dataclass
class ValueAssignmentConfig(TaskConfig):
    min_table_size: int = 5
    max_table_size: int = 5
    min_length: int = 5
    max_length: int = 5
    input_alphabet: str = DEFAULT_INPUT_ALPHABET
    output_alphabet: str = "01"
    # A training aid, not a paper setting: the table's keys in `input_alphabet` order. Where
    # a key sits then tells roughly which key it is, a cue a model learns from alone; in
    # random order only the key's identity matched against the symbol's does, and a small
    # model from scratch stays on a plateau (docs/usage_analysis.md, "Recipes").
    sorted_keys: bool = False

    limits = {
        "min_table_size": (1, MAX_CHARSET),
        "max_table_size": (1, MAX_CHARSET),
        "min_length": (1, MAX_LENGTH),
        "max_length": (1, MAX_LENGTH),
    }
    ranges = {
        "table_size": ("min_table_size", "max_table_size"),
        "length": ("min_length", "max_length"),
    }

    def check(self) -> None:
        self.check_min_max("min_table_size", "max_table_size")
        self.check_min_max("min_length", "max_length")
        self.check_charset("input_alphabet", minimum=1, reserved=SEPARATOR)
        self.check_charset("output_alphabet", minimum=1, reserved=SEPARATOR)
        shared = "".join(sorted(set(self.input_alphabet) & set(self.output_alphabet)))
        if shared:
            raise ValueError(
                f"{self.task_name}: 'input_alphabet' and 'output_alphabet' must be disjoint; "
                f"both contain {shared!r}"
            )
        if self.max_table_size > len(self.input_alphabet):
            raise ValueError(
                f"{self.task_name}: 'max_table_size' ({self.max_table_size}) exceeds the "
                f"{len(self.input_alphabet)} distinct keys of 'input_alphabet'"
            )


def generate(rng: random.Random, config: ValueAssignmentConfig) -> Instance:
    low, high = config.min_table_size, config.max_table_size
    size = low + randbelow(rng, high - low + 1)
    length = config.min_length + randbelow(rng, config.max_length - config.min_length + 1)
    keys = _draw_keys(rng, config.input_alphabet, size)
    if config.sorted_keys:  # after the draw: the same stream of random numbers either way
        drawn = set(keys)
        keys = "".join(c for c in config.input_alphabet if c in drawn)
    values = _draw(rng, config.output_alphabet, size)
    pairs = _indices(rng, size, length)  # the table pair of each string symbol
    return _render(keys, values, pairs, config)


def _draw_keys(rng: random.Random, alphabet: str, size: int) -> str:
    """`size` distinct keys in random order: the alphabet sorted by random 32-bit ranks
    (C-level sorting beats a Python shuffle loop for alphabets up to a few hundred; ties,
    about one draw in 10^7, keep alphabet order)."""
    if len(alphabet) > 256:
        return "".join(rng.sample(alphabet, size))
    ranks = memoryview(rng.randbytes(4 * len(alphabet))).cast("I").tolist()
    order = sorted(range(len(alphabet)), key=ranks.__getitem__)
    return "".join(itemgetter(*order[:size])(alphabet))


def _draw(rng: random.Random, alphabet: str, count: int) -> str:
    """`count` characters drawn uniformly with replacement."""
    if len(alphabet) >= REJECTED:
        return "".join(rng.choices(alphabet, k=count))
    return "".join(itemgetter(*uniform_bytes(rng, len(alphabet), count))(alphabet))


def _indices(rng: random.Random, m: int, count: int) -> bytes | list[int]:
    if m >= REJECTED:
        return rng.choices(range(m), k=count)
    return uniform_bytes(rng, m, count)


def make_instance(table: str, symbols: str, config: ValueAssignmentConfig) -> Instance:
    """The instance translating `symbols` through `table` (`B1E0D1A1C0`, key+value pairs)."""
    pair_of = {key: j for j, key in enumerate(table[0::2])}
    if (
        not symbols
        or len(table) % 2
        or len(pair_of) != len(table) // 2
        or not set(symbols) <= pair_of.keys()
    ):
        raise ValueError(
            f"{NAME}: table {table!r} must be key+value pairs with distinct keys that "
            f"cover every symbol of the (non-empty) string {symbols!r}"
        )
    return _render(table[0::2], table[1::2], [pair_of[s] for s in symbols], config)


def _render(keys: str, values: str, pairs, config: ValueAssignmentConfig) -> Instance:
    """Pair j of the table sits at 2j (key) and 2j + 1 (value); the string follows it."""
    chars = [""] * (2 * len(keys))
    chars[0::2], chars[1::2] = keys, values
    table, start = "".join(chars), len(chars)
    symbols = "".join(itemgetter(*pairs)(keys)) if len(pairs) > 1 else keys[pairs[0]]
    target = "".join(itemgetter(*pairs)(values)) if len(pairs) > 1 else values[pairs[0]]
    if config.mask == "minimal":
        reference = [[2 * j + 1, start + i] for i, j in enumerate(pairs)]
    else:
        reference = [[2 * j, 2 * j + 1, start + i] for i, j in enumerate(pairs)]
    params = {"length": len(pairs), "table_size": len(keys)}
    return Instance(NAME, table + symbols + SEPARATOR, target, reference, params)


def oracle(visible: list, params: dict, i: int) -> str | None:
    """The value after the visible key that equals the visible symbol s_i."""
    start = 2 * params["table_size"]
    symbol = visible[start + i]
    if symbol is None:
        return None
    for pos in range(0, start, 2):
        if visible[pos] == symbol:
            return visible[pos + 1]
    return None


register_task(
    NAME,
    ValueAssignmentConfig,
    generate,
    oracle,
    instruction=(
        "Translate the string after the table symbol by symbol, using the table's key-value pairs."
    ),
    recipes={
        # keys in alphabet order first: the lookup in random order alone stayed on the 0.686
        # plateau for 8,000 steps (ID exact 0.98 with this; docs/usage_analysis.md, "Recipes")
        "quick": {
            "max_steps": 7000,
            "batch_size": 64,
            "lr": 2e-3,
            "weight_decay": 0.01,
            "warmup_ratio": 0.02,
            "curriculum": "1500:sorted_keys=true",
            "scratch": {"num_layers": 2},
        },
    },
)
# F.6: a table of 5 pairs and strings of 5 symbols in distribution; 10-50 and 10-20 out.
register_pair(
    "value_assignment",
    NAME,
    {"min_table_size": 5, "max_table_size": 5, "min_length": 5, "max_length": 5},
    {"min_table_size": 10, "max_table_size": 50, "min_length": 10, "max_length": 20},
)
