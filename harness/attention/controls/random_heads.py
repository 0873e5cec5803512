"""random_heads: the chosen N and C on as many heads drawn at random, one setting per seed.
A gain that random heads also give is not specific to the ranked heads."""

import dataclasses

from harness.attention.controls.base import Control, Option


def make(chosen, options):
    return [dataclasses.replace(chosen, heads="random", seed=s) for s in options.seeds]


SEEDS = Option("seeds", (0, 1, 2))  # one setting per seed (random positions share them)

CONTROL = Control(
    "random_heads",
    make,
    "`random*` the same N and C on random heads (one row per seed)",
    options=(SEEDS,),
)
