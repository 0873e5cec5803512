"""String rotation: write the string after ':' starting from position k, wrapping around.

Examples:
    3:abcdefgh= -> defghabc
    1:xyz= -> yzx

Mask rule: target[i] is the input character at position (i + k) mod length. `paper` and
`minimal` reference that character alone; `sufficient` adds the digit k, without which the
character's position cannot be told from the text (the oracle reads k from it).
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass

from attentionspan_datasets.presets import register_pair
from attentionspan_datasets.tasks import Instance, TaskConfig, register_task

NAME = "string_rotation"
SEPARATOR = "="
SHIFT_MARK = ":"
START = 2  # the first input character: after the digit k and ':'
MAX_LENGTH = 1000  # characters: every size a task draws has a cap


@dataclass
class RotationConfig(TaskConfig):
    min_length: int = 1
    max_length: int = 8
    max_shift: int = 9
    charset: str = string.ascii_lowercase

    limits = {"min_length": (1, MAX_LENGTH), "max_length": (1, MAX_LENGTH), "max_shift": (0, 9)}
    ranges = {"length": ("min_length", "max_length")}

    def check(self) -> None:
        self.check_min_max("min_length", "max_length")
        self.check_charset("charset", minimum=2, reserved=SEPARATOR + SHIFT_MARK + string.digits)


def generate(rng: random.Random, config: RotationConfig) -> Instance:
    # Only the instance's own generator is drawn from: (config, seed, index) fixes the row.
    length = rng.randint(config.min_length, config.max_length)
    shift = rng.randint(0, config.max_shift)
    chars = "".join(rng.choices(config.charset, k=length))
    prompt = f"{shift}{SHIFT_MARK}{chars}{SEPARATOR}"
    target = chars[shift % length :] + chars[: shift % length]
    sources = [START + (i + shift) % length for i in range(length)]
    if config.mask == "sufficient":
        reference = [[0, source] for source in sources]
    else:  # paper, minimal
        reference = [[source] for source in sources]
    return Instance(NAME, prompt, target, reference, {"length": length})


def oracle(visible: list, params: dict, i: int) -> str:
    """target[i] from the referenced characters alone: k from the digit, then the source."""
    shift = int(visible[0])
    return visible[START + (i + shift) % params["length"]]


register_task(
    NAME,
    RotationConfig,
    generate,
    oracle,
    instruction="Write the characters between ':' and '=' starting from the position the "
    "digit before ':' gives, wrapping around to the start.",
    # `reproduce --quick --tasks rotation` trains with these options (the rest: the
    # harness's general recipe); leave `recipes` out to take that recipe as it is.
    recipes={"quick": {"max_steps": 800}},
)
# In distribution: strings of 1-8 characters; out of distribution: 9-16.
register_pair(
    "rotation", NAME, {"min_length": 1, "max_length": 8}, {"min_length": 9, "max_length": 16}
)
