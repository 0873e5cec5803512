"""Long multiplication: the shifted partial products, then their sum, LSB first.

Examples:
    9900*9900= -> 1980+0198+0000+0000=1089   (padding=True, max_digits=4: 99*99 = 9801)
    21*3= -> 63=63                            (padding=False: 12*3 = 36)
    99*99= -> 198+0198=1089                   (padding=False)

Every number is written least-significant digit first, as in long addition. For each written
digit b_j of the second operand (j = 0, 1, ...) the target lists the partial product
a * b_j * 10^j: its j low places are shift zeros. Partial products are joined by "+", then
"=" and the product. With `padding` every number (operands, partial products, product) is
zero-padded like `str.zfill` to at least `max_digits` characters; without it, numbers have
their natural length (a zero partial product is "0").

Mask rule for character k (place k) of partial product j, with m = k - j:
    m >= 0      paper: a's digit at place m and b_j; when a has no place m (the row's final
                carry) a's digit at place m-1 instead. sufficient adds a's digit at place
                m-1 and the previous character of the same row, from which the carry is
                recovered mod 10 (a row's carries are at most 8).
    m < 0       a shift zero, fixed by the layout: references b_j (both variants).
    "+" / "="   the separator closing partial product j, fixed by the layout: references b_j
                (both variants).
`minimal` is the `paper` rule. (The authors' generator marks a_j and b_i for digit j of
partial product i, ignoring the i shift zeros, and nothing for the product: see
docs/tasks.md.)
Product digit i: long addition's column rule over the partial products (paper: the
partial-product characters at place i, or at place i-1 for the final carry; sufficient:
places i and i-1 plus the previous product digit).

The oracle reads the layout (operand widths and partial-product widths) from `params`,
never a value. Carries of the product column sum stay below 10 because there are at most
10 partial products, hence `max_digits` <= 10.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass

from attentionspan_datasets.presets import register_pair
from attentionspan_datasets.tasks.base import Instance, TaskConfig, register_task
from attentionspan_datasets.tasks.long_addition import column_digit, column_references, draw_number

NAME = "long_multiplication"
MAX_DIGITS = 10  # at most 10 partial products keeps every column-sum carry below 10


@dataclass
class MultiplicationConfig(TaskConfig):
    min_digits: int = 1
    max_digits: int = 3
    padding: bool = False

    limits = {"min_digits": (1, MAX_DIGITS), "max_digits": (1, MAX_DIGITS)}
    ranges = {"digits": ("min_digits", "max_digits")}

    def check(self) -> None:
        self.check_min_max("min_digits", "max_digits")


def generate(rng: random.Random, config: MultiplicationConfig) -> Instance:
    a = draw_number(rng, config.min_digits, config.max_digits)
    b = draw_number(rng, config.min_digits, config.max_digits)
    return make_instance(a, b, config)


def make_instance(a: int, b: int, config: MultiplicationConfig) -> Instance:
    """The instance for fixed operands (what `generate` does after drawing them)."""
    if type(a) is not int or type(b) is not int or a < 0 or b < 0:
        raise ValueError(f"{NAME}: operands must be non-negative integers, got {a!r}, {b!r}")
    pad = config.max_digits if config.padding else 0  # zfill(0) keeps natural length
    a_text = str(a).zfill(pad)[::-1]
    b_text = str(b).zfill(pad)[::-1]
    if len(b_text) > MAX_DIGITS:
        raise ValueError(f"{NAME}: the second operand may have at most {MAX_DIGITS} digits")
    rows = [str(a * int(digit) * 10**j).zfill(pad)[::-1] for j, digit in enumerate(b_text)]
    product = str(a * b).zfill(pad)[::-1]
    prompt = f"{a_text}*{b_text}="
    target = "+".join(rows) + "=" + product

    wa, wb = len(a_text), len(b_text)
    row_widths = tuple(map(len, rows))
    layout = (wa, wb, row_widths, len(product), config.mask == "sufficient")
    reference = list(map(list, references(*layout)))  # each instance owns its rows
    da, db = len(str(a)), len(str(b))
    params = {
        "length": max(da, db),
        "digits": [da, db],
        "widths": [wa, wb],
        "row_widths": list(row_widths),
    }
    return Instance(NAME, prompt, target, reference, params)


@functools.lru_cache(maxsize=2048)
def references(
    wa: int, wb: int, row_widths: tuple[int, ...], product_width: int, sufficient: bool
) -> tuple[tuple[int, ...], ...]:
    """The mask rule. It depends on the layout alone (the widths), never on digit values, so
    it is computed once per layout (multiplication_ood has about 2,500 layouts; the cache
    keeps the 2,048 most recent). Tuples of ints: the garbage collector need not track them."""
    reference: list = []
    starts = []
    pos = wa + wb + 2  # start of the current partial product, after "a*b="
    for j, w in enumerate(row_widths):
        bj = wa + 1 + j  # position of b_j
        starts.append(pos)
        # Places k = j + m of a * b_j: m < 0 shift zeros, then m = 0, then 0 < m < wa, and
        # m = wa, the row's final carry, when the row is that long.
        places = w - j  # how many places m >= 0 the row writes
        reference += [[bj] for _ in range(min(j, w))]
        if places > 0:
            reference.append([0, bj])
            inner = range(1, min(places, wa))
            before = pos + j - 1  # + m: the row's previous character
            if sufficient:
                reference += [[m - 1, m, bj, before + m] for m in inner]
                if places > wa:
                    reference.append([wa - 1, bj, before + wa])
            else:
                reference += [[m, bj] for m in inner]
                if places > wa:
                    reference.append([wa - 1, bj])
        reference.append([bj])  # the "+" or "=" closing this row
        pos += w + 1
    reference += column_references(starts, list(row_widths), pos, product_width, sufficient)
    return tuple(map(tuple, reference))


def row_digit(visible: list, wa: int, bj: int, row_start: int, k: int, m: int) -> str:
    """Digit m of a * b_j (at place k = m + j of its row) from a's digits at m and m-1, b_j
    and the row's previous character."""
    b = int(visible[bj])
    if m == 0:
        return str(int(visible[0]) * b % 10)
    a_before = int(visible[m - 1])
    a_here = int(visible[m]) if m < wa else 0
    written_before = int(visible[row_start + k - 1])
    carry_before = (written_before - a_before * b) % 10
    carry = (a_before * b + carry_before) // 10
    return str((a_here * b + carry) % 10)


def oracle(visible: list, params: dict, i: int) -> str:
    wa, wb = params["widths"]
    row_widths = params["row_widths"]
    pos = wa + wb + 2  # the prompt: a, "*", b, "="
    offset = pos + i
    starts = []
    for j, w in enumerate(row_widths):
        if offset <= pos + w:
            k = offset - pos
            if k == w:
                return "+" if j < len(row_widths) - 1 else "="
            if k < j:
                return "0"  # shift zero
            return row_digit(visible, wa, wa + 1 + j, pos, k, k - j)
        starts.append(pos)
        pos += w + 1
    return column_digit(visible, starts, row_widths, pos, offset - pos)


register_task(
    NAME,
    MultiplicationConfig,
    generate,
    oracle,
    layout_masks=True,
    instruction=(
        "Multiply the two numbers before '='. Digits are written least significant first; write "
        "each partial product, joined by '+', then '=' and the product, the same way."
    ),
)
# F.3: each operand 1-3 digits in distribution, 4-6 digits out.
register_pair(
    "multiplication", NAME, {"min_digits": 1, "max_digits": 3}, {"min_digits": 4, "max_digits": 6}
)
