"""bottom_heads: the chosen N and C on the lowest-ranked heads."""

import dataclasses

from harness.attention.controls.base import Control


def make(chosen, options):
    return [dataclasses.replace(chosen, heads="bottom")]


CONTROL = Control("bottom_heads", make, "`bottom*` the lowest-ranked heads")
