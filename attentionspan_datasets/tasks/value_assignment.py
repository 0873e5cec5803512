"""Value assignment: translate a string symbol by symbol through a table given in the prompt.

The prompt is a translation table of `table_size` pairs key + value (distinct keys from
`input_alphabet`, values drawn with replacement from `output_alphabet`), then the string
(`length` symbols drawn uniformly with replacement from the table's keys, so a key may be
absent from it), then "=". The target is the string with every symbol replaced by its value.

Examples:
    B1E0D1A1C0ABBEDACABCD= -> 11101101101

Mask rule: `paper`: target[i] references the string symbol s_i and the table's value
character for s_i. `sufficient`: also the table's key character for s_i, the one that
matches s_i and so locates the value; the oracle finds the visible key equal to the
visible symbol and reads the value character after it.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass

from attentionspan_datasets.tasks.base import Instance, TaskConfig, register_task

NAME = "value_assignment"
SEPARATOR = "="
# 52 letters: the OOD preset's table needs up to 50 distinct keys.
DEFAULT_INPUT_ALPHABET = string.ascii_letters


@dataclass
class ValueAssignmentConfig(TaskConfig):
    min_table_size: int = 5
    max_table_size: int = 5
    min_length: int = 5
    max_length: int = 5
    input_alphabet: str = DEFAULT_INPUT_ALPHABET
    output_alphabet: str = "01"

    def check(self) -> None:
        self.check_range("min_table_size", 1)
        self.check_range("max_table_size", 1)
        self.check_min_max("min_table_size", "max_table_size")
        self.check_range("min_length", 1)
        self.check_range("max_length", 1)
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
    size = rng.randint(config.min_table_size, config.max_table_size)
    length = rng.randint(config.min_length, config.max_length)
    table = _draw_table(rng, config.input_alphabet, config.output_alphabet, size)
    pairs = rng.choices(range(size), k=length)  # the table pair of each string symbol
    return _render(table, pairs, config)


def _draw_table(rng: random.Random, keys: str, values: str, size: int) -> str:
    """`size` pairs: distinct keys in random order (a partial Fisher-Yates shuffle, as
    `rng.sample` but with one `rng.random()` per pick: 1.5x faster), values with replacement."""
    pool, last, pairs, rand = list(keys), len(keys) - 1, [], rng.random
    for i in range(size):
        j = int(rand() * (last + 1 - i))
        pairs.append(pool[j] + values[int(rand() * len(values))])
        pool[j] = pool[last - i]
    return "".join(pairs)


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
    return _render(table, [pair_of[s] for s in symbols], config)


def _render(table: str, pairs: list[int], config: ValueAssignmentConfig) -> Instance:
    """Pair j of the table sits at 2j (key) and 2j + 1 (value); the string follows it."""
    keys, values, start = table[0::2], table[1::2], len(table)
    symbols = "".join([keys[j] for j in pairs])
    target = "".join([values[j] for j in pairs])
    if config.mask == "sufficient":
        reference = [[2 * j, 2 * j + 1, start + i] for i, j in enumerate(pairs)]
    else:
        reference = [[2 * j + 1, start + i] for i, j in enumerate(pairs)]
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


register_task(NAME, ValueAssignmentConfig, generate, oracle)
