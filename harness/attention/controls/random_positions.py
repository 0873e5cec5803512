"""random_positions: the chosen heads and C at as many random non-reference keys per row
(drawn with the first seed). A gain there does not need the reference."""

import dataclasses

from harness.attention.controls.base import Control
from harness.attention.controls.random_heads import SEEDS


def make(chosen, options):
    seed = options.seeds[0] if options.seeds else 0
    return [dataclasses.replace(chosen, positions="random", seed=seed)]


CONTROL = Control(
    "random_positions",
    make,
    "`*randpos*` the chosen heads at as many random non-reference keys per row",
    options=(SEEDS,),
)
