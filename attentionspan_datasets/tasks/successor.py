"""Successor: continue counting from a start number.

Examples:
    234= -> 235 236 237 238 239 240
    98= -> 99 100 101

The prompt is the start number and "="; the target is the next `count` numbers (the start
is not counted, so the paper's v1 example above has count 6), separated by single spaces.
Numbers are written normally, most significant digit first.

Mask rule for the digit at place p (p = 0 for units) of number n+1:
    paper       the previous number n's digit at place p; a new leading digit (999 -> 1000)
                references n's leading digit.
    sufficient  n's digits at places <= p: place p and the whole carry chain below it
                (n+1 carries into place p exactly when all of n's lower digits are 9), so a
                new leading digit references all of n.
A separating space after number n+1 references the character that closed n (the prompt's
"=" for the first number, else the previous space), in both variants: the number ends where
the previous one did. The oracle reads the layout (every number's width) from `params`.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass

from attentionspan_datasets.tasks.base import Instance, TaskConfig, register_task

NAME = "successor"


@dataclass
class SuccessorConfig(TaskConfig):
    min_start: int = 1
    max_start: int = 90
    min_count: int = 2
    max_count: int = 4

    def check(self) -> None:
        self.check_range("min_start", 0)
        self.check_range("max_start", 0)
        self.check_min_max("min_start", "max_start")
        self.check_range("min_count", 1)
        self.check_range("max_count", 1)
        self.check_min_max("min_count", "max_count")


def generate(rng: random.Random, config: SuccessorConfig) -> Instance:
    start = rng.randint(config.min_start, config.max_start)
    count = rng.randint(config.min_count, config.max_count)
    return make_instance(start, count, config)


def make_instance(start: int, count: int, config: SuccessorConfig) -> Instance:
    """The instance for a fixed start and count (what `generate` does after drawing them)."""
    if type(start) is not int or start < 0:
        raise ValueError(f"{NAME}: start must be a non-negative integer, got {start!r}")
    if type(count) is not int or count < 1:
        raise ValueError(f"{NAME}: count must be a positive integer, got {count!r}")
    numbers = [str(n) for n in range(start, start + count + 1)]
    prompt = numbers[0] + "="
    target = " ".join(numbers[1:])

    widths = tuple(map(len, numbers))
    reference = list(map(list, references(widths, config.mask == "sufficient")))
    params = {"length": count, "count": count, "widths": list(widths)}
    return Instance(NAME, prompt, target, reference, params)


@functools.lru_cache(maxsize=2048)
def references(widths: tuple[int, ...], sufficient: bool) -> tuple[tuple[int, ...], ...]:
    """The mask rule. It depends on the layout alone (every number's width), never on digit
    values, so it is computed once per layout (make_instance copies it)."""
    reference = []
    prev_end = widths[0]  # position of the character closing the previous number
    for k in range(1, len(widths)):
        width, prev_width = widths[k], widths[k - 1]
        for r in range(width):
            place = width - 1 - r
            lowest = min(place, prev_width - 1)  # a new leading digit: n's leading digit
            if sufficient:
                reference.append(list(range(prev_end - 1 - lowest, prev_end)))
            else:
                reference.append([prev_end - 1 - lowest])
        if k < len(widths) - 1:
            reference.append([prev_end])  # the space: where the previous number ended
        prev_end += 1 + width
    return tuple(map(tuple, reference))


def oracle(visible: list, params: dict, i: int) -> str:
    widths = params["widths"]
    prev_end = widths[0]
    offset = prev_end + 1 + i
    for k in range(1, len(widths)):
        width, prev_width = widths[k], widths[k - 1]
        start = prev_end + 1
        if offset == start + width:
            return " "
        if offset < start + width:
            place = start + width - 1 - offset
            # n's digits at places 0..min(place, top): visible[prev_end - 1 - q] is place q
            below = [int(visible[prev_end - 1 - q]) for q in range(min(place, prev_width - 1) + 1)]
            carry = int(all(d == 9 for d in below[:place]))
            digit = below[place] if place < prev_width else 0
            return str((digit + carry) % 10)
        prev_end = start + width
    raise ValueError(f"{NAME}: target index {i} is past the layout {widths}")


register_task(NAME, SuccessorConfig, generate, oracle)
