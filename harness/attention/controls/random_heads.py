"""random_heads: the chosen N and C on as many heads drawn at random, one setting per seed.
A gain that random heads also give is not specific to the ranked heads."""

import dataclasses

from harness.attention.controls.base import Control


def make(chosen, options):
    return [dataclasses.replace(chosen, heads="random", seed=s) for s in options.seeds]


CONTROL = Control(
    "random_heads", make, "`random*` the same N and C on random heads (one row per seed)"
)
