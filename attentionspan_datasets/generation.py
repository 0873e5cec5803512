"""Deterministic instance generation: (config, seed, index) fixes an instance anywhere.

    from attentionspan_datasets import generate, iter_instances
    generate("addition_ood", seed=0, index=7)          # one Instance
    list(iter_instances("reversal_id", seed=0, stop=5))  # the first five

Each instance draws from its own Mersenne Twister seeded by (seed, stream, index), so any row
can be regenerated alone, sharding never changes data, and no global RNG is touched.
"""

from __future__ import annotations

import _random
import functools
import hashlib
import random
from collections.abc import Iterator
from typing import Any

from attentionspan_datasets.plugins import GenerateError
from attentionspan_datasets.presets import PRESETS, SHORT_NAMES, did_you_mean
from attentionspan_datasets.tasks import TASKS, get_task
from attentionspan_datasets.tasks.base import Instance, TaskConfig

DEFAULT_SEED = 1234
# `index` is the int64 column of the data contract; a seed is any 64-bit integer.
MAX_INDEX = 2**63 - 1
SEED_RANGE = (-(2**63), 2**64 - 1)

# The C seeding method that random.Random wraps (random.py's type checks cost 1.5 us a call);
# for an int it sets the same state as random.Random(n).
_seed_generator = _random.Random.seed


def check_int(name: str, value: Any, low: int, high: int) -> int:
    """`value` if it is an int (not a bool) in [low, high]; else ValueError naming `name`."""
    # bool is an int subclass, and seed=True must not silently mean seed 1.
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"'{name}' must be an integer, got {type(value).__name__} {value!r}")
    if not low <= value <= high:
        raise ValueError(f"'{name}' must be in [{low}, {high}], got {value}")
    return value


@functools.lru_cache(maxsize=256)
def stream_key(seed: int, stream: str = "") -> int:
    """The 64-bit key of one (seed, stream): the first 8 bytes of SHA-512 of
    `attentionspan/{stream}/{seed}`, so it is the same in every process and under any
    PYTHONHASHSEED. Instance `index` of the stream is seeded with `key * 2**64 + index`:
    distinct for every (key, index), and computed once per stream, not per instance
    (hashing a string per instance cost 7 us, a third of an instance's budget)."""
    digest = hashlib.sha512(f"attentionspan/{stream}/{seed}".encode()).digest()
    return int.from_bytes(digest[:8], "little") << 64


def instance_rng(seed: int, index: int, stream: str = "") -> random.Random:
    """The generator of one instance (what `generate` and `iter_instances` draw from)."""
    return random.Random(stream_key(seed, stream) + index)


def config_names() -> list[str]:
    """Every name `resolve_config` accepts: the presets, the registry names, the short names."""
    names = list(PRESETS) + sorted(TASKS)
    names += [short for short, full in SHORT_NAMES.items() if full in TASKS]
    return list(dict.fromkeys(names))


def unknown_config_message(name: str) -> str:
    """`unknown config 'additon_ood' (did you mean 'addition_ood'?); allowed: ...`: one line,
    the suggestion before the 100-name list."""
    names = config_names()
    return f"unknown config {name!r}{did_you_mean(name, names)}; allowed: {', '.join(names)}"


def resolve_config(name: str | TaskConfig, **overrides: Any) -> TaskConfig:
    """A validated config for a preset (`addition_ood`) or bare task name (`long_addition`,
    or its short form `addition`), with keyword overrides applied on top. The config
    carries the name as its `label` (the `config` column of its instances), so a caller
    resolves a name once and passes the config on. A config passes through (re-validated,
    and keeping its label, when overridden)."""
    if isinstance(name, TaskConfig):
        if not overrides:
            return name
        # from_params refuses an unknown key with the allowed ones (replace: a TypeError)
        return type(name).from_params({**name.to_params(), **overrides}).labelled(name.label)
    if not isinstance(name, str):  # a list or dict would fail as unhashable (TypeError)
        shown = repr(name) if len(repr(name)) <= 60 else f"{repr(name)[:40]}..."
        raise ValueError(
            f"'config' must be a preset or task name (a str) or a TaskConfig, "
            f"got {type(name).__name__} {shown}"
        )
    if name in PRESETS:
        preset = PRESETS[name]
        task_name, params = preset.task, preset.params
    else:
        task_name = SHORT_NAMES.get(name, name)
        if task_name not in TASKS:
            raise ValueError(unknown_config_message(name))
        params = {}
    return get_task(task_name).config_class.from_params({**params, **overrides}).labelled(name)


def generate(
    config: str | TaskConfig,
    seed: int = DEFAULT_SEED,
    index: int = 0,
    stream: str = "",
    **overrides: Any,
) -> Instance:
    """The instance at `index` of the stream for (config, seed, stream)."""
    check_int("seed", seed, *SEED_RANGE)
    check_int("index", index, 0, MAX_INDEX)
    check_stream(stream)
    cfg = resolve_config(config, **overrides)
    return _generate(cfg, cfg.label, instance_rng(seed, index, stream), index)


def check_stream(stream: Any) -> str:
    if not isinstance(stream, str):
        raise ValueError(f"'stream' must be a string, got {type(stream).__name__} {stream!r}")
    return stream


def _generate(cfg: TaskConfig, label: str, rng: random.Random, index: int) -> Instance:
    try:
        instance = get_task(cfg.task_name).generate(rng, cfg)
    except GenerateError as error:  # a plugin's generator: the line names the index
        raise error.at(index) from error.__cause__
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
    """Instances `start, start+1, ...` up to `stop` (forever when `stop` is None).

    Arguments are checked here, when called, not at the first `next()`."""
    check_int("seed", seed, *SEED_RANGE)
    check_int("start", start, 0, MAX_INDEX)
    if stop is not None:
        check_int("stop", stop, 0, MAX_INDEX + 1)
    check_stream(stream)
    cfg = resolve_config(config, **overrides)
    return _iterate(cfg, cfg.label, stream_key(seed, stream), start, stop)


def _iterate(
    cfg: TaskConfig, label: str, key: int, start: int, stop: int | None
) -> Iterator[Instance]:
    # One generator re-seeded per instance: the same draws as `instance_rng`, without
    # allocating a generator per row.
    rng, task_generate, seed_rng = (
        random.Random(),
        get_task(cfg.task_name).generate,
        _seed_generator,
    )
    index = start
    try:
        while stop is None or index < stop:
            seed_rng(rng, key + index)
            instance = task_generate(rng, cfg)
            instance.config = label
            instance.index = index
            yield instance
            index += 1
    except GenerateError as error:  # a plugin's generator: the line names the index
        raise error.at(index) from error.__cause__
