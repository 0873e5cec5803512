"""Successor: count on from a start number, as many numbers as the prompt asks.

Examples:
    6:234= -> 235 236 237 238 239 240
    3:98= -> 99 100 101

The prompt is the count, ":", the start number and "="; the target is the next `count`
numbers (the start is not counted, so v1's Table 1 example above has count 6), separated by
single spaces. Numbers are written normally, most significant digit first. The count makes
the task well-posed: without it a prompt has several right answers (docs/tasks.md).

Mask rule for character c of number n+1 (a digit, or the space that follows it):
    minimal     a digit at place p (p = 0 for units): n's digit at place p; a new leading
                digit (999 -> 1000) references n's leading digit. A space: the character
                that closed n (the prompt's "=" for the first number, else a space).
    paper       the authors' rule: the whole number n, the character that closed n, and
                the characters of n+1 already written.
    sufficient  `paper`, plus the count's digits for a space: whether another number
                follows depends on the count. The oracle computes a digit from n's digits at
                places <= p (n+1 changes place p exactly when all lower digits are 9) and
                reads the layout (every number's width, the count) from `params`.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass

from attentionspan_datasets.presets import register_pair
from attentionspan_datasets.tasks.base import Instance, TaskConfig, randbelow, register_task

NAME = "successor"
COUNT_SEPARATOR = ":"
MAX_START = 10**18  # 19 digits
MAX_COUNT = 1_000  # numbers in the target: about 20,000 characters at most


@dataclass
class SuccessorConfig(TaskConfig):
    min_start: int = 1
    max_start: int = 90
    min_count: int = 2
    max_count: int = 4

    limits = {
        "min_start": (0, MAX_START),
        "max_start": (0, MAX_START),
        "min_count": (1, MAX_COUNT),
        "max_count": (1, MAX_COUNT),
    }
    ranges = {"start": ("min_start", "max_start"), "count": ("min_count", "max_count")}

    def check(self) -> None:
        self.check_min_max("min_start", "max_start")
        self.check_min_max("min_count", "max_count")


def generate(rng: random.Random, config: SuccessorConfig) -> Instance:
    start = config.min_start + randbelow(rng, config.max_start - config.min_start + 1)
    count = config.min_count + randbelow(rng, config.max_count - config.min_count + 1)
    return make_instance(start, count, config)


def make_instance(start: int, count: int, config: SuccessorConfig) -> Instance:
    """The instance for a fixed start and count (what `generate` does after drawing them)."""
    if type(start) is not int or not 0 <= start <= MAX_START:
        raise ValueError(f"{NAME}: start must be an integer in [0, {MAX_START}], got {start!r}")
    if type(count) is not int or not 1 <= count <= MAX_COUNT:
        raise ValueError(f"{NAME}: count must be an integer in [1, {MAX_COUNT}], got {count!r}")
    numbers = [str(n) for n in range(start, start + count + 1)]
    lead = f"{count}{COUNT_SEPARATOR}"
    prompt = lead + numbers[0] + "="
    target = " ".join(numbers[1:])

    widths = tuple(map(len, numbers))
    reference = list(map(list, references(widths, len(lead), config.mask)))
    params = {"length": count, "count": count, "widths": list(widths)}
    return Instance(NAME, prompt, target, reference, params)


@functools.lru_cache(maxsize=2048)
def references(widths: tuple[int, ...], lead: int, mask: str) -> tuple[tuple[int, ...], ...]:
    """The mask rule. It depends on the layout alone (every number's width and the count's),
    never on digit values, so it is computed once per layout (make_instance copies it).
    `lead` is the length of the count and its separator, before the start number."""
    reference: list = []
    count_digits = list(range(lead - 1))
    prev_start, prev_end = lead, lead + widths[0]  # n, and the character that closes it
    for k in range(1, len(widths)):
        width, prev_width = widths[k], widths[k - 1]
        start = prev_end + 1
        for r in range(width):  # the digit at place width-1-r, written r-th
            if mask == "minimal":
                lowest = min(width - 1 - r, prev_width - 1)  # a new leading digit: n's top
                reference.append([prev_end - 1 - lowest])
            else:
                reference.append(list(range(prev_start, start + r)))
        if k < len(widths) - 1:  # the space after n+1
            if mask == "minimal":
                reference.append([prev_end])
            elif mask == "paper":
                reference.append(list(range(prev_start, start + width)))
            else:
                reference.append(count_digits + list(range(prev_start, start + width)))
        prev_start, prev_end = start, start + width
    return tuple(map(tuple, reference))


def oracle(visible: list, params: dict, i: int) -> str:
    widths = params["widths"]
    prev_end = len(str(params["count"])) + 1 + widths[0]
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


register_task(
    NAME,
    SuccessorConfig,
    generate,
    oracle,
    layout_masks=True,
    instruction=(
        "Continue counting from the number between ':' and '=': write as many next numbers as the "
        "number before ':' says, separated by spaces."
    ),
    # --pretrained: short answers (2-4 numbers of 1-2 digits)
    recipes={"pretrained": {"max_steps": 300}},
)
# F.5: start 1-90 and 2-4 numbers in distribution; start 100-900 and 5-6 numbers out.
register_pair(
    "successor",
    NAME,
    {"min_start": 1, "max_start": 90, "min_count": 2, "max_count": 4},
    {"min_start": 100, "max_start": 900, "min_count": 5, "max_count": 6},
)
