"""knockout: the chosen heads' weights on the reference set to 0 (mode "knockout"): does
the model need what those heads read there at all?"""

import dataclasses

from harness.attention.controls.base import Control


def knockout_of(setting):
    return dataclasses.replace(setting, mode="knockout", strength=0.0, threshold=0.0)


def make(chosen, options):
    return [knockout_of(chosen)]


CONTROL = Control("knockout", make, "`*knockout` the chosen heads' reference weights set to 0")
