"""Deterministic instance generation: (config, seed, index) fixes an instance anywhere.

    from attentionspan_datasets import generate, iter_instances
    generate("addition_ood", seed=0, index=7)          # one Instance
    list(iter_instances("reversal_id", seed=0, stop=5))  # the first five

Each instance draws from its own `random.Random` seeded by (seed, stream, index), so any row
can be regenerated alone, sharding never changes data, and no global RNG is touched.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator
from typing import Any

from attentionspan_datasets.presets import PRESETS
from attentionspan_datasets.tasks import TASKS, get_task
from attentionspan_datasets.tasks.base import Instance, TaskConfig

DEFAULT_SEED = 1234


def instance_rng(seed: int, index: int, stream: str = "") -> random.Random:
    """The generator of one instance. A str seed is hashed with SHA-512 by `random`, so it
    is the same in every process and under any PYTHONHASHSEED."""
    return random.Random(f"attentionspan/{stream}/{seed}/{index}")


def config_names() -> list[str]:
    """Every name `resolve_config` accepts: the presets, the registry names, the short names."""
    names = list(PRESETS) + sorted(TASKS)
    names += [short for short, full in SHORT_TASK_NAMES.items() if full in TASKS]
    return list(dict.fromkeys(names))


def resolve_config(name: str | TaskConfig, **overrides: Any) -> TaskConfig:
    """A validated config for a preset (`addition_ood`) or bare task name (`long_addition`,
    or its short form `addition`), with keyword overrides applied on top. A config passes
    through (re-validated when overridden)."""
    if isinstance(name, TaskConfig):
        return dataclasses.replace(name, **overrides) if overrides else name
    if name in PRESETS:
        task_name, params = PRESETS[name]
    else:
        task_name = SHORT_TASK_NAMES.get(name, name)
        if task_name not in TASKS:
            raise ValueError(f"unknown config {name!r}; allowed: {', '.join(config_names())}")
        params = {}
    return get_task(task_name).config_class.from_params({**params, **overrides})


def config_label(name: str | TaskConfig) -> str:
    if isinstance(name, TaskConfig):
        return name.task_name
    return name


def generate(
    config: str | TaskConfig,
    seed: int = DEFAULT_SEED,
    index: int = 0,
    stream: str = "",
    **overrides: Any,
) -> Instance:
    """The instance at `index` of the stream for (config, seed, stream)."""
    cfg = resolve_config(config, **overrides)
    return _generate(cfg, config_label(config), seed, index, stream)


def _generate(cfg: TaskConfig, label: str, seed: int, index: int, stream: str) -> Instance:
    instance = get_task(cfg.task_name).generate(instance_rng(seed, index, stream), cfg)
    instance.config = label
    instance.index = index
    return instance


def iter_instances(
    config: str | TaskConfig,
    seed: int = DEFAULT_SEED,
    start: int = 0,
    stop: int | None = None,
    stream: str = "",
    **overrides: Any,
) -> Iterator[Instance]:
    """Instances `start, start+1, ...` up to `stop` (forever when `stop` is None)."""
    cfg = resolve_config(config, **overrides)
    label = config_label(config)
    index = start
    while stop is None or index < stop:
        yield _generate(cfg, label, seed, index, stream)
        index += 1


# The user writes `addition`, `reversal`, `ffml`; the registry names say what the task does.
SHORT_TASK_NAMES = {
    "reversal": "string_reversal",
    "addition": "long_addition",
    "multiplication": "long_multiplication",
    "ffml": "flip_flop",
    "value_assignment": "value_assignment",
    "successor": "successor",
    # The discrete-retrieval tasks under the paper's names (Sorodoc et al. 2021, T1-T7).
    "t1": "one_feature_detection",
    "t2": "two_feature_detection",
    "t3": "set_member_detection",
    "t4": "contextual_two_feature_detection",
    "t5": "contextual_set_member_detection",
    "t6": "ordered_feature_detection",
    "t7": "contextual_ordered_set_member_detection",
}
