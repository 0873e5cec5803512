"""Checks that run over the whole registry, so a new task is covered the day it is added."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import subprocess
import sys
import time
import typing

import pytest

from attentionspan_datasets import PRESETS, checks, generate, iter_instances, resolve_config
from attentionspan_datasets.tasks import TASKS, get_task, register_task

ORACLE_INSTANCES = 2000  # per preset: thousands of random instances, as the issue asks


def check_instance(instance) -> None:
    """The data contract: one reference row per target character, causal positions only
    (attentionspan_datasets.checks, which `attentionspan check-task` runs for any task)."""
    problems = checks.contract_problems(instance)
    assert not problems, f"{instance.config}#{instance.index}: {problems}"


def check_oracle(instance) -> None:
    problems = checks.oracle_problems(instance)
    assert not problems, (
        f"{instance.config}#{instance.index}: {problems[0]}\n{instance.prompt}{instance.target}"
    )


def test_every_preset_names_a_registered_task():
    for name, preset in PRESETS.items():
        assert preset.task in TASKS, f"preset {name} names unregistered task {preset.task}"


def test_every_task_has_presets_for_id_and_ood():
    for task in TASKS:
        roles = {p.role for p in PRESETS.values() if p.task == task}
        assert {"id", "ood"} <= roles, f"{task} has presets of roles {roles}"


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_preset_generates_valid_instances(preset):
    for instance in iter_instances(preset, seed=0, stop=200):
        check_instance(instance)
        assert instance.config == preset


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_sufficient_mask_passes_oracle(preset):
    for instance in iter_instances(preset, seed=1, stop=ORACLE_INSTANCES, mask="sufficient"):
        check_oracle(instance)


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_masks_nest_minimal_paper_sufficient(preset):
    """`sufficient` adds to `paper`, `paper` to `minimal`: no variant drops a reference of
    the one below it, and all three describe the same text."""
    streams = [
        iter_instances(preset, seed=2, stop=300, mask=mask)
        for mask in ("minimal", "paper", "sufficient")
    ]
    for index, (minimal, paper, sufficient) in enumerate(zip(*streams)):
        assert not checks.nesting_problems(minimal, paper, sufficient), (preset, index)


TARGET_DRAWS = 3000  # per preset; successor_id (270 prompts) repeats each about 10 times


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_no_prompt_has_two_targets(preset):
    """Every task is well-posed: a prompt fixes its target (successor prompts once
    had several)."""
    targets: dict[str, str] = {}
    repeats = 0
    for instance in iter_instances(preset, seed=4, stop=TARGET_DRAWS):
        known = targets.setdefault(instance.prompt, instance.target)
        assert known == instance.target, (preset, instance.prompt, known, instance.target)
        repeats += known is not instance.target
    if preset in ("successor_id", "reversal_id", "addition_id"):
        assert repeats > 0  # the check saw repeated prompts, so it could have failed


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_instances_are_independent_of_order_and_stream(preset):
    forward = list(iter_instances(preset, seed=5, start=10, stop=20))
    alone = [generate(preset, seed=5, index=i) for i in range(19, 9, -1)][::-1]
    assert forward == alone
    other_seed = list(iter_instances(preset, seed=6, start=10, stop=20))
    other_stream = list(iter_instances(preset, seed=5, start=10, stop=20, stream="test"))
    assert [x.text for x in forward] != [x.text for x in other_seed]
    assert [x.text for x in forward] != [x.text for x in other_stream]


def digest_all_presets() -> str:
    h = hashlib.sha256()
    for preset in sorted(PRESETS):
        for instance in iter_instances(preset, seed=3, stop=30):
            h.update(json.dumps(instance.to_dict(), sort_keys=True).encode())
    return h.hexdigest()


def test_determinism_across_processes_and_hash_seeds():
    code = "from tests.test_registry import digest_all_presets; print(digest_all_presets())"
    here = digest_all_presets()
    for hash_seed in ("0", "12345", "random"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run(
            [sys.executable, "-c", code],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            cwd=os.path.dirname(os.path.dirname(__file__)),
        )
        assert out.stdout.strip() == here


def test_generation_touches_no_global_rng():
    import random

    random.seed(99)
    before = random.getstate()
    for preset in PRESETS:
        generate(preset, seed=0, index=1)
    assert random.getstate() == before


def test_registry_refuses_duplicates_and_non_dataclasses():
    task = next(iter(TASKS.values()))
    with pytest.raises(ValueError, match="already registered"):
        register_task(task.name, task.config_class, task.generate, task.oracle)

    class PlainConfig:
        max_length: int = 3

    for bad in (dict, PlainConfig):
        with pytest.raises(TypeError, match="dataclass"):
            register_task("brand_new_task", bad, task.generate, task.oracle)
    assert "brand_new_task" not in TASKS


def test_unknown_config_lists_allowed_names():
    with pytest.raises(ValueError, match="unknown config 'addition_oodd'.*reversal_id"):
        resolve_config("addition_oodd")


@pytest.mark.parametrize("task", sorted(TASKS))
def test_every_task_rejects_unknown_and_mistyped_parameters(task):
    config_class = get_task(task).config_class
    with pytest.raises(ValueError, match="unknown parameter.*'no_such_field'.*allowed: mask"):
        config_class.from_params({"no_such_field": 1})
    with pytest.raises(ValueError, match="'mask'.*allowed values: 'paper', 'sufficient'"):
        config_class.from_params({"mask": "dense"})
    for field in config_class.field_names():
        default = getattr(config_class(), field)
        wrong = 1.5 if not isinstance(default, float) else "x"
        with pytest.raises(ValueError, match=f"field '{field}' must be of type"):
            config_class.from_params({field: wrong})


@pytest.mark.parametrize("task", sorted(TASKS))
def test_every_task_has_a_documented_format(task):
    module = sys.modules[get_task(task).generate.__module__]
    assert "Examples:" in (module.__doc__ or ""), f"{task}: docstring needs an Examples: block"
    docs = open(os.path.join(os.path.dirname(__file__), "..", "docs", "tasks.md")).read()
    assert f"`{task}`" in docs, f"docs/tasks.md has no section naming `{task}`"


def int_fields(config_class) -> list[str]:
    hints = typing.get_type_hints(config_class)
    return [f.name for f in dataclasses.fields(config_class) if hints[f.name] is int]


@pytest.mark.parametrize("task", sorted(TASKS))
def test_every_size_has_a_cap_refused_within_a_second(task):
    """A huge size (10^24) is refused at once, naming the field and its cap (the
    10^9 cases go through the command line in tests/commands/test_generate.py)."""
    config_class = get_task(task).config_class
    for name in int_fields(config_class):
        partner = {"min_": "max_", "max_": "min_"}.get(name[:4], "") + name[4:]
        for kwargs in ({name: 10**24}, {name: 10**24, partner: 10**24}):
            if partner not in config_class.field_names():
                kwargs = {name: 10**24}
            started = time.perf_counter()
            with pytest.raises(ValueError) as caught:
                config_class.from_params(kwargs)
            assert time.perf_counter() - started < 1
            message = str(caught.value)
            assert re.search(rf"'({name}|{partner})'.*<= \d", message), message


@pytest.mark.parametrize("task", sorted(TASKS))
def test_a_number_too_long_for_python_names_the_cap(task):
    """A 5,001-digit value on the command line names the cap, not 'must be an integer'."""
    config_class = get_task(task).config_class
    for name in int_fields(config_class):
        with pytest.raises(ValueError, match=rf"'{name}'.*<= \d") as caught:
            config_class.from_params({name: config_class.parse_value(name, "9" * 5001)})
        assert "must be an integer" not in str(caught.value)
        assert len(str(caught.value)) < 300  # one readable line, not the number


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"index": 1.5}, "index"),
        ({"index": -1}, "index"),
        ({"index": 2**63}, "index"),
        ({"index": True}, "index"),
        ({"seed": [1, 2]}, "seed"),
        ({"seed": True}, "seed"),
        ({"seed": "1234"}, "seed"),
        ({"seed": 1.0}, "seed"),
        ({"stream": 3}, "stream"),
    ],
)
def test_the_python_api_validates_its_arguments(kwargs, field):
    with pytest.raises(ValueError, match=f"'{field}' must"):
        generate("reversal_id", **kwargs)
    renamed = {("start" if k == "index" else k): v for k, v in kwargs.items()}
    with pytest.raises(ValueError, match=f"'{'start' if field == 'index' else field}' must"):
        iter_instances("reversal_id", **renamed)  # refused when called, not at next()


@pytest.mark.parametrize("stop", [1.5, -1, True, "3"])
def test_iter_instances_validates_stop(stop):
    with pytest.raises(ValueError, match="'stop' must"):
        iter_instances("reversal_id", stop=stop)


def test_rng_of_one_instance_matches_the_stream():
    """`instance_rng` (used by the splits) draws what `iter_instances` draws."""
    from attentionspan_datasets.generation import instance_rng

    task = get_task("string_reversal")
    config = resolve_config("reversal_ood")
    for index in (0, 1, 2**40):
        alone = task.generate(instance_rng(7, index, "x"), config)
        streamed = next(iter_instances(config, seed=7, start=index, stream="x"))
        assert alone.text == streamed.text


# --- the declared ranges (TaskConfig.ranges) ------------------------------------------------
@pytest.mark.parametrize("task", sorted(TASKS))
def test_every_task_declares_its_ranges_over_real_fields(task):
    config_class = get_task(task).config_class
    hints = typing.get_type_hints(config_class)
    fields = config_class.field_names()
    assert config_class.ranges, f"{task} declares no ranges"
    declared = [name for pair in config_class.ranges.values() for name in pair]
    assert len(declared) == len(set(declared)), f"{task}: a field in two ranges"
    for low, high in config_class.ranges.values():
        assert low in fields and high in fields, (task, low, high)
        assert hints[low] is int and hints[high] is int, (task, low, high)
    # Complete: every min_X/max_X pair of int fields is declared (the names are the
    # convention STYLE.md asks of task configs; the declaration is what code reads).
    pairs = {
        (name, "max_" + name[4:])
        for name in fields
        if name.startswith("min_") and "max_" + name[4:] in fields
    }
    assert pairs == set(config_class.ranges.values()), task


@pytest.mark.parametrize("task", sorted(TASKS))
def test_every_declared_range_is_checked_low_to_high(task):
    config_class = get_task(task).config_class
    defaults = config_class()
    for low, high in config_class.ranges.values():
        top = getattr(defaults, high)
        with pytest.raises(ValueError, match=f"'{low}' \\({top}\\) must not exceed '{high}'"):
            config_class.from_params({low: top, high: top - 1})


@pytest.mark.parametrize("preset", list(PRESETS))
def test_largest_raises_every_range_to_its_top(preset):
    cfg = resolve_config(preset)
    largest = cfg.largest()
    assert largest.label == preset
    for low, high in cfg.ranges.values():
        assert getattr(largest, low) == getattr(largest, high) == getattr(cfg, high)
    others = set(cfg.field_names()) - {low for low, _ in cfg.ranges.values()}
    assert {name: getattr(largest, name) for name in others} == {
        name: getattr(cfg, name) for name in others
    }
