"""Long addition: add several numbers written least-significant digit first.

Examples:
    1240+4335+3440= -> 8916      (padding=True, max_digits=4: 421+5334+443 = 6198)
    12+4= -> 52                  (padding=False: 21+4 = 25)
    99+1= -> 001                 (99+1 = 100: the final carry adds a digit)

Every number, operands and result, is written with its digits reversed (place 0 first), so
a left-to-right writer meets the carry before the digit it changes. With `padding`, every
number is zero-padded like `str.zfill` to at least `max_digits` characters (longer numbers
keep their length); without it numbers have their natural length.

Mask rule for result digit i (place i):
    paper       the operand digits written at place i (padding zeros included); a digit with
                no operand character at its place (the final carry) references place i-1's
                operand digits. `minimal` is the same rule.
    sufficient  the operand digits at places i and i-1 plus target[i-1]. The oracle recovers
                carry[i-1] = (target[i-1] - s[i-1]) mod 10, then carry[i] = (s[i-1] +
                carry[i-1]) // 10 and target[i] = (s[i] + carry[i]) mod 10, where s[p] is the
                sum of the operand digits at place p. This needs every carry below 10, which
                holds for at most 10 operands (a carry is always < the operand count).
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass

from attentionspan_datasets.presets import register_pair
from attentionspan_datasets.tasks._recipes import SHALLOW_WIDE
from attentionspan_datasets.tasks.base import Instance, TaskConfig, randbelow, register_task

NAME = "long_addition"
MAX_OPERANDS = 10  # the sufficient oracle recovers each carry mod 10: carries must stay < 10
MAX_DIGITS = 1000  # far past any use; Python refuses str() of ints over 4300 digits


@dataclass
class AdditionConfig(TaskConfig):
    num_operands: int = 2
    min_digits: int = 1
    max_digits: int = 4
    padding: bool = False

    limits = {
        "num_operands": (2, MAX_OPERANDS),
        "min_digits": (1, MAX_DIGITS),
        "max_digits": (1, MAX_DIGITS),
    }
    ranges = {"digits": ("min_digits", "max_digits")}

    def check(self) -> None:
        self.check_min_max("min_digits", "max_digits")


def draw_number(rng: random.Random, min_digits: int, max_digits: int) -> int:
    """A number of d digits, d uniform in [min_digits, max_digits], the value uniform among
    the d-digit numbers (d = 1 includes 0). Shared with long multiplication."""
    # randbelow(rng, n) draws what rng.randint(low, low + n - 1) - low would, faster.
    digits = min_digits + randbelow(rng, max_digits - min_digits + 1)
    if digits == 1:
        return randbelow(rng, 10)
    low = 10 ** (digits - 1)
    return low + randbelow(rng, 10 * low - low)


def generate(rng: random.Random, config: AdditionConfig) -> Instance:
    lo, hi = config.min_digits, config.max_digits
    return make_instance([draw_number(rng, lo, hi) for _ in range(config.num_operands)], config)


def make_instance(operands: list[int], config: AdditionConfig) -> Instance:
    """The instance for fixed operands (what `generate` does after drawing them)."""
    if len(operands) != config.num_operands:
        raise ValueError(
            f"{NAME}: expected {config.num_operands} operands (num_operands), got {len(operands)}"
        )
    if any(type(v) is not int or v < 0 for v in operands):
        raise ValueError(f"{NAME}: operands must be non-negative integers, got {operands}")
    width = config.max_digits if config.padding else 0  # zfill(0) keeps natural length
    texts = [str(v).zfill(width)[::-1] for v in operands]
    result = str(sum(operands)).zfill(width)[::-1]
    prompt = "+".join(texts) + "="
    widths = tuple(map(len, texts))
    layout = (widths, len(result), config.mask == "sufficient")
    reference = list(map(list, references(*layout)))  # each instance owns its rows
    digits = [len(str(v)) for v in operands]
    params = {
        "length": max(digits),
        "num_operands": len(operands),
        "digits": digits,
        "widths": list(widths),
    }
    return Instance(NAME, prompt, result, reference, params)


@functools.lru_cache(maxsize=2048)
def references(
    widths: tuple[int, ...], result_width: int, sufficient: bool
) -> tuple[tuple[int, ...], ...]:
    """The mask rule. It depends on the layout alone (the widths), never on digit values, so
    it is computed once per layout."""
    result_start = sum(widths) + len(widths)  # the operands, their "+" and the "="
    rows = column_references(operand_starts(widths), widths, result_start, result_width, sufficient)
    return tuple(map(tuple, rows))


def operand_starts(widths: list[int]) -> list[int]:
    """Start positions of numbers written one after another with one separator between."""
    starts, pos = [], 0
    for w in widths:
        starts.append(pos)
        pos += w + 1
    return starts


def column_references(
    starts: list[int], widths: list[int], result_start: int, result_width: int, sufficient: bool
) -> list[list[int]]:
    """Reference rows of a column sum written LSB first at `result_start`, the summands
    (LSB first) at `starts`. Shared with long multiplication's final product."""
    rows = list(zip(starts, widths))
    here = [[s + i for s, w in rows if i < w] for i in range(result_width)]
    if not sufficient:
        # No summand digit at place i (the final carry): place i-1's digits.
        return [h if h else list(here[i - 1]) for i, h in enumerate(here)]
    # Places i-1 and i of every summand (merged in position order), then target[i-1].
    return [here[0]] + [
        sorted(here[i - 1] + here[i]) + [result_start + i - 1] for i in range(1, result_width)
    ]


def column_digit(
    visible: list, starts: list[int], widths: list[int], result_start: int, i: int
) -> str:
    """Result digit i of a column sum from the digits at places i and i-1 and target[i-1]."""
    rows = list(zip(starts, widths))
    total_here = sum([int(visible[s + i]) for s, w in rows if i < w])
    if i == 0:
        return str(total_here % 10)
    total_before = sum([int(visible[s + i - 1]) for s, w in rows if i <= w])
    carry_before = (int(visible[result_start + i - 1]) - total_before) % 10
    carry = (total_before + carry_before) // 10
    return str((total_here + carry) % 10)


def oracle(visible: list, params: dict, i: int) -> str:
    widths = params["widths"]
    result_start = sum(widths) + len(widths)  # the operands, their "+" and the "="
    return column_digit(visible, operand_starts(widths), widths, result_start, i)


register_task(
    NAME,
    AdditionConfig,
    generate,
    oracle,
    layout_masks=True,
    instruction=(
        "Add the numbers before '='. Digits are written least significant first; write the sum the "
        "same way."
    ),
    recipes={
        # shallow and wide: 4 x 128 at lr 2e-3 stalled at ID exact 0.035 after 5,000 steps
        "quick": {
            "max_steps": 3000,
            "batch_size": 64,
            "lr": 1e-3,
            "weight_decay": 0.01,
            "warmup_ratio": 0.02,
            "scratch": SHALLOW_WIDE,
        },
        # ID exact match 0.99 after ~10 CPU-minutes (600-1,000 steps)
        "pretrained": {"max_steps": 800},
    },
)
# F.1: two operands of 1-4 digits in distribution, 5-10 digits out.
register_pair(
    "addition",
    NAME,
    {"num_operands": 2, "min_digits": 1, "max_digits": 4},
    {"num_operands": 2, "min_digits": 5, "max_digits": 10},
)
