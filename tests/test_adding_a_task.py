"""Adding a task is one file: the registration a built-in task uses (`register_task` with its
instruction and recipes, `register_pair`) puts it everywhere a built-in is.

    python -m pytest -q tests/test_adding_a_task.py

The file is written here and imported in a fresh interpreter, where the datasets builder's
config list and the lm-eval task list are made after it registered, as they are for a
built-in task imported by attentionspan_datasets/tasks/__init__.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# A task file laid out as attentionspan_datasets/tasks/string_reversal.py is.
TASK_FILE = '''
"""String copy: write the input string again.

Examples:
    abc= -> abc
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from attentionspan_datasets.presets import register_pair
from attentionspan_datasets.tasks.base import Instance, TaskConfig, randbelow, register_task

NAME = "string_copy"


@dataclass
class CopyConfig(TaskConfig):
    min_length: int = 1
    max_length: int = 6

    limits = {"min_length": (1, 1000), "max_length": (1, 1000)}
    ranges = {"length": ("min_length", "max_length")}

    def check(self) -> None:
        self.check_min_max("min_length", "max_length")


def generate(rng: random.Random, config: CopyConfig) -> Instance:
    length = config.min_length + randbelow(rng, config.max_length - config.min_length + 1)
    chars = "".join(rng.choices("abcdef", k=length))
    return Instance(NAME, chars + "=", chars, [[i] for i in range(length)], {"length": length})


def oracle(visible: list, params: dict, i: int) -> str:
    return visible[i]


register_task(
    NAME,
    CopyConfig,
    generate,
    oracle,
    layout_masks=True,
    instruction="Write the characters before '=' again.",
    recipes={
        "quick": {"max_steps": 123, "scratch": {"num_layers": 1}},
        "pretrained": {"max_steps": 45},
        "quick_ood": {"max_length": 9},
    },
)
register_pair("copy", NAME, {"min_length": 1, "max_length": 6}, {"min_length": 7, "max_length": 12})
'''

# Run in the fresh interpreter: what each layer knows of the new task and of a built-in.
PROBE = """
import json, sys
import attentionspan_datasets
import string_copy  # the one file
from attentionspan_datasets import checks, generate, presets
from attentionspan_datasets.builder import AttentionSpan
from attentionspan_datasets.instructions import INSTRUCTIONS, instruction_for
from harness.pipeline.settings import QUICK_TRAIN, PRETRAINED_TRAIN, ReproduceConfig
from lm_eval_tasks import make_yamls

out = {}
for short in ("reversal", "copy"):
    id_preset, ood_preset = presets.pair(short)
    task = id_preset.task
    cfg = ReproduceConfig(quick=True, tasks=[short], output="unused")
    value = cfg.task_values[0]
    pretrained = ReproduceConfig(pretrained="unused", tasks=[short], output="unused")
    out[short] = {
        "task": task,
        "presets": [id_preset.name, ood_preset.name],
        "instance": generate(ood_preset.name, seed=0, index=0).prompt,
        "builder": sorted({short, *value.presets} & set(AttentionSpan.builder_configs)),
        "lm_eval": [p for p in make_yamls.presets() if p in (id_preset.name, ood_preset.name)],
        "instruction": [INSTRUCTIONS[task], instruction_for(task), value.instruction],
        "value": [value.short, value.task_name, *value.presets],
        "quick": value.recipe(pretrained=False),
        "pretrained": value.recipe(pretrained=True),
        "quick_ood": cfg.ood_for(value),
        "pretrained_ood": pretrained.ood_for(pretrained.task_values[0]),
        "checks": [r.ok for r in checks.check_task(short, instances=20, other_process=False)],
    }
out["general"] = {"quick": QUICK_TRAIN, "pretrained": PRETRAINED_TRAIN}
json.dump(out, sys.stdout)
"""


def test_a_task_added_in_one_file_is_everywhere_a_built_in_is(tmp_path):
    (tmp_path / "string_copy.py").write_text(textwrap.dedent(TASK_FILE))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    builtin, added, general = seen["reversal"], seen["copy"], seen["general"]
    # the built-in, read the same way, shows every probe means something
    assert builtin["task"] == "string_reversal" and builtin["builder"] == [
        "reversal",
        "reversal_id",
        "reversal_ood",
    ]
    assert builtin["lm_eval"] == builtin["presets"] and all(builtin["checks"])
    assert builtin["quick_ood"] == {"max_length": 20}
    # the new task, in each place
    assert added["task"] == "string_copy" and added["presets"] == ["copy_id", "copy_ood"]
    assert added["builder"] == ["copy", "copy_id", "copy_ood"]
    assert added["lm_eval"] == ["copy_id", "copy_ood"]
    assert 7 <= len(added["instance"]) - 1 <= 12  # an OOD string and its "="
    assert added["instruction"] == ["Write the characters before '=' again."] * 3
    assert added["value"] == ["copy", "string_copy", "copy_id", "copy_ood"]
    assert added["checks"] and all(added["checks"])  # the oracle and the other checks
    # its recipes, over the general ones as a built-in's are
    assert added["quick"]["max_steps"] == 123
    assert added["quick"]["batch_size"] == general["quick"]["batch_size"]
    assert added["quick"]["scratch"] == {"num_layers": 1}
    assert added["pretrained"] == {**general["pretrained"], "max_steps": 45}
    assert added["quick_ood"] == added["pretrained_ood"] == {"max_length": 9}
