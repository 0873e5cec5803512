"""The train / validation / test splits: one rule, used by every layer.

    from attentionspan_datasets.splits import split_of, split_instance, iter_split
    split_of("0421+5334=")                                  # 'train', 'validation' or 'test'
    split_instance("addition_ood", seed=0, split="test", index=7)
    list(iter_split("reversal_id", split="test", stop=500))  # lm-eval's documents, in order

The rule. A prompt belongs to exactly one split, decided by the prompt alone: the first
8 bytes of BLAKE2b(prompt as UTF-8, unkeyed), read as a little-endian integer, modulo 1000:

    0-49 -> test (5%),   50-99 -> validation (5%),   100-999 -> train (90%)

Row `index` of split S is the first draw of the generator, from the sub-streams `S`, `S#1`,
`S#2`, ... at that index (`generation.generate(config, seed, index, stream=...)`), whose prompt
is in S. So:
- no train prompt equals a validation or test prompt, and no validation prompt equals a test
  prompt, by construction: in every layer (builder, Hub export, lm-eval, train, eval), for
  every seed (the hash has no key), every split size and unlimited streams;
- any row is computed alone (O(1) random access): sharding, streaming and `skip` never change
  a row, and (config, seed, split, index) fixes it everywhere;
- a split's distribution is the generator's distribution restricted to that split's prompts.
  Where a length has few distinct prompts (reversal of one character, successor_id), the
  share of each split at that length is the share of those few prompts that hash into it, so
  the test split may hold more, fewer or none of them: `small_space_report` says where.

Few-shot examples (lm-eval) come from their own stream, `fewshot`, which accepts only train
prompts: a few-shot example is never a test or validation prompt.

The acceptance rate is the split's share of the draws (about 5% for test), so a test row costs
about 20 draws; a config whose prompts never fall in a split (a space of a handful of prompts)
gets a ValueError naming the config after MAX_ATTEMPTS draws.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import random
import sys
import warnings
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from attentionspan_datasets.generation import (
    DEFAULT_SEED,
    MAX_INDEX,
    SEED_RANGE,
    _seed_generator,
    check_int,
    instance_rng,
    resolve_config,
    stream_key,
)
from attentionspan_datasets.plugins import GenerateError
from attentionspan_datasets.tasks import get_task
from attentionspan_datasets.tasks.base import Instance, TaskConfig

SPLITS = ("train", "validation", "test")
FEWSHOT = "fewshot"  # a stream, not a split: its rows are train prompts
STREAMS = (*SPLITS, FEWSHOT)

HASH_MODULUS = 1000
# [low, high) of `hash % HASH_MODULUS` per split; they cover 0..999 exactly once.
SPLIT_RANGES = {"test": (0, 50), "validation": (50, 100), "train": (100, HASH_MODULUS)}
SPLIT_SHARES = {split: (high - low) / HASH_MODULUS for split, (low, high) in SPLIT_RANGES.items()}
_ACCEPTS = {"train": "train", "validation": "validation", "test": "test", FEWSHOT: "train"}

# 0.95 ** 1000 is about 5e-23: a config that fails this many draws has (almost) no prompt
# in the split, and waiting longer would not fill it.
MAX_ATTEMPTS = 1000


def split_of(prompt: str) -> str:
    """The split `prompt` belongs to: 'train', 'validation' or 'test' (see the module doc)."""
    if not isinstance(prompt, str):
        raise ValueError(f"'prompt' must be a str, got {type(prompt).__name__} {prompt!r:.60}")
    bucket = _bucket(prompt)
    if bucket < 50:
        return "test"
    if bucket < 100:
        return "validation"
    return "train"


def _bucket(prompt: str, _blake2b=hashlib.blake2b, _from_bytes=int.from_bytes) -> int:
    """`hash % HASH_MODULUS` of the rule: BLAKE2b-64 of the UTF-8 prompt, little-endian."""
    return _from_bytes(_blake2b(prompt.encode(), digest_size=8).digest(), "little") % HASH_MODULUS


def check_split(split: Any, fewshot: bool = False) -> str:
    """`split` if it names a split (or the few-shot stream when `fewshot`), else ValueError."""
    allowed = STREAMS if fewshot else SPLITS
    if not isinstance(split, str) or split not in allowed:
        raise ValueError(f"invalid split {split!r}; allowed: {', '.join(allowed)}")
    return split


class _Drawer:
    """Draws rows of one (config, seed, split): one generator re-seeded per draw and the
    sub-streams' keys computed once (what `generation.instance_rng` would give, cheaper)."""

    def __init__(self, cfg: TaskConfig, label: str, seed: int, split: str) -> None:
        self.cfg, self.label, self.seed, self.split = cfg, label, seed, split
        self.wanted = _ACCEPTS[split]
        self.generate = get_task(cfg.task_name).generate
        self.rng = random.Random()
        self.keys: list[int] = []

    def key(self, attempt: int) -> int:
        while len(self.keys) <= attempt:
            n = len(self.keys)
            self.keys.append(stream_key(self.seed, self.split if n == 0 else f"{self.split}#{n}"))
        return self.keys[attempt]

    def row(self, index: int, first: int = 0) -> Instance:
        """Row `index`: the first draw of streams split, split#1, ... in the split
        (`first`: the attempts before it are known to miss)."""
        rng, cfg, generate, seed = self.rng, self.cfg, self.generate, _seed_generator
        low, high = SPLIT_RANGES[self.wanted]
        for attempt in range(first, MAX_ATTEMPTS):
            seed(rng, self.key(attempt) + index)
            try:
                instance = generate(rng, cfg)
            except GenerateError as error:  # a plugin's generator: the line names the row
                raise error.at(index) from error.__cause__
            if low <= _bucket(instance.prompt) < high:
                instance.config = self.label
                instance.index = index
                return instance
        raise ValueError(
            f"attentionspan config {self.label!r}: no {self.wanted} prompt in {MAX_ATTEMPTS} "
            f"draws for {self.split} row {index}; the input space is too small to hold a "
            f"{self.wanted} split (widen the config's ranges)"
        )


def split_instance(
    config: str | TaskConfig,
    seed: int = DEFAULT_SEED,
    split: str = "test",
    index: int = 0,
    **overrides: Any,
) -> Instance:
    """Row `index` of `split` for (config, seed), computed alone. `split` may also be
    'fewshot' (the few-shot stream: train prompts only)."""
    check_split(split, fewshot=True)
    check_int("seed", seed, *SEED_RANGE)
    check_int("index", index, 0, MAX_INDEX)
    cfg = resolve_config(config, **overrides)
    return _Drawer(cfg, cfg.label, seed, split).row(index)


def iter_split(
    config: str | TaskConfig,
    seed: int = DEFAULT_SEED,
    split: str = "test",
    start: int = 0,
    stop: int | None = None,
    **overrides: Any,
) -> Iterator[Instance]:
    """Rows `start, start+1, ...` of `split` up to `stop` (forever when None); row i equals
    `split_instance(config, seed, split, i)`."""
    check_split(split, fewshot=True)
    check_int("seed", seed, *SEED_RANGE)
    check_int("start", start, 0, MAX_INDEX)
    if stop is not None:
        check_int("stop", stop, 0, MAX_INDEX + 1)
    cfg = resolve_config(config, **overrides)
    return _iterate(_Drawer(cfg, cfg.label, seed, split), start, stop)


def _iterate(drawer: _Drawer, start: int, stop: int | None) -> Iterator[Instance]:
    # A separate generator function, so that bad arguments fail at the call, not at next().
    # Streaming the train split is what `load_dataset(..., streaming=True)` does row by row
    # (the target: 70% of the raw generator's rate), so the first attempt, which
    # gives 90% of train rows, is drawn here inline: the same draws as `drawer.row(index)`,
    # which takes over from attempt 1 when the first draw is not in the split.
    rng, cfg, generate, seed, label = (
        drawer.rng,
        drawer.cfg,
        drawer.generate,
        _seed_generator,
        drawer.label,
    )
    low, high = SPLIT_RANGES[drawer.wanted]
    blake2b, from_bytes, key = hashlib.blake2b, int.from_bytes, drawer.key(0)
    for index in itertools.count(start) if stop is None else range(start, stop):
        seed(rng, key + index)
        try:  # free in the loop (zero-cost exceptions) until a plugin's generator fails
            instance = generate(rng, cfg)
        except GenerateError as error:
            raise error.at(index) from error.__cause__
        bucket = from_bytes(blake2b(instance.prompt.encode(), digest_size=8).digest(), "little")
        if low <= bucket % HASH_MODULUS < high:
            instance.config = label
            instance.index = index
        else:
            instance = drawer.row(index, first=1)
        yield instance


SMALL_SPACE = 1000  # fewer distinct prompts than this at one length: the report names it
PROBE_DRAWS = 4000
_REPORTS: dict[tuple[str, int, str], str | None] = {}


class SmallSpaceWarning(UserWarning):
    """A config's input space is small at some lengths (see `small_space_report`)."""


def small_space_report(
    config: str | TaskConfig, seed: int = DEFAULT_SEED, name: str | None = None, **overrides: Any
) -> str | None:
    """One sentence naming the lengths whose input space is small enough that the splits'
    share of them departs from the generator's distribution, or None when there is none.

    Estimates from PROBE_DRAWS raw draws: a length whose draws repeat prompts has a small
    space; its distinct prompts seen (nearly all of them, then) are counted per split.
    `name` is the config name to print (default: the preset or task name).
    """
    cfg = resolve_config(config, **overrides)
    label = name or cfg.label
    key = (repr(cfg), seed, label)
    if key not in _REPORTS:
        _REPORTS[key] = _small_space_report(cfg, label, seed)
    return _REPORTS[key]


def _small_space_report(cfg: TaskConfig, label: str, seed: int) -> str | None:
    generate = get_task(cfg.task_name).generate
    seen: dict[int, set[str]] = defaultdict(set)
    draws: dict[int, int] = defaultdict(int)
    for index in range(PROBE_DRAWS):
        try:
            instance = generate(instance_rng(seed, index, "probe"), cfg)
        except GenerateError as error:
            raise error.at(index) from error.__cause__
        length = cfg.length_bucket(instance.params)
        seen[length].add(instance.prompt)
        draws[length] += 1
    small = []
    for length in sorted(seen):
        prompts = seen[length]
        # Repeats among the draws mean the space is not much larger than what was seen.
        if len(prompts) < SMALL_SPACE and len(prompts) < draws[length] * 0.8:
            counts = {split: 0 for split in SPLITS}
            for prompt in prompts:
                counts[split_of(prompt)] += 1
            small.append(
                f"length {length}: about {len(prompts)} prompts "
                f"({counts['train']} train, {counts['validation']} validation, "
                f"{counts['test']} test)"
            )
    if not small:
        return None
    return (
        f"attentionspan config {label!r} has a small input space ({'; '.join(small)}): each "
        f"split holds only the prompts that hash into it, so validation and test rows of these "
        f"lengths repeat a few prompts and their share of the split differs from the "
        f"generator's; the splits still share no prompt"
    )


def warn_small_space(report: str) -> None:
    """Warn with `report` as a SmallSpaceWarning attributed to the caller's own code (the
    first frame outside this package, datasets and lm-eval), so the warning shows the
    user's line rather than one of ours."""
    internal = tuple(
        os.path.dirname(module.__file__) + os.sep
        for name in ("attentionspan_datasets", "datasets", "lm_eval", "multiprocess")
        if (module := sys.modules.get(name)) is not None and getattr(module, "__file__", None)
    )
    level, frame = 1, sys._getframe(1)
    while frame is not None and (
        frame.f_code.co_filename.startswith(internal)
        or frame.f_code.co_filename.startswith("<frozen ")
    ):
        level, frame = level + 1, frame.f_back
    warnings.warn(report, SmallSpaceWarning, stacklevel=level + 1 if frame is not None else 1)
