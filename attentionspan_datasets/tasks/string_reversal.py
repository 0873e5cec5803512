"""String reversal: write the input string backwards.

Examples:
    dh13h82hj283j23H= -> H32j382jh28h31hd

Mask rule (every variant): target[i] references the mirrored input character,
position `length - 1 - i`. Nothing else is needed, so `minimal`, `paper` and `sufficient`
agree (and match the authors' generator).
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass

from attentionspan_datasets.presets import register_pair
from attentionspan_datasets.tasks.base import Instance, TaskConfig, randbelow, register_task

NAME = "string_reversal"
SEPARATOR = "="
# 62 characters: the paper asks for a charset of at least 50 unique characters.
DEFAULT_CHARSET = string.ascii_letters + string.digits
MAX_LENGTH = 100_000  # characters: one instance then takes well under a second


@dataclass
class ReversalConfig(TaskConfig):
    min_length: int = 1
    max_length: int = 10
    charset: str = DEFAULT_CHARSET

    limits = {"min_length": (1, MAX_LENGTH), "max_length": (1, MAX_LENGTH)}
    ranges = {"length": ("min_length", "max_length")}

    def check(self) -> None:
        self.check_min_max("min_length", "max_length")
        self.check_charset("charset", minimum=1, reserved=SEPARATOR)


def generate(rng: random.Random, config: ReversalConfig) -> Instance:
    length = config.min_length + randbelow(rng, config.max_length - config.min_length + 1)
    chars = "".join(rng.choices(config.charset, k=length))
    target = chars[::-1]
    reference = [[length - 1 - i] for i in range(length)]
    return Instance(NAME, chars + SEPARATOR, target, reference, {"length": length})


def oracle(visible: list, params: dict, i: int) -> str:
    return visible[params["length"] - 1 - i]


register_task(
    NAME,
    ReversalConfig,
    generate,
    oracle,
    layout_masks=True,
    instruction="Write the characters before '=' in reverse order.",
    recipes={
        # --pretrained: ID exact match 0.97 after 400 steps (loss 0.02 from step 300)
        "pretrained": {"max_steps": 400},
        # --quick and --pretrained analyse strings of 11-20 characters out of distribution:
        # the effect is visible there; at 30-50 characters a tiny model gets almost nothing
        # right
        "quick_ood": {"max_length": 20},
    },
)
# F.4: 1-10 characters in distribution, 11-50 out; a charset of at least 50 characters.
register_pair(
    "reversal", NAME, {"min_length": 1, "max_length": 10}, {"min_length": 11, "max_length": 50}
)
