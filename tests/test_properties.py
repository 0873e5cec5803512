"""Property-based tests: random configs thrown at every task.

Each config either raises a ValueError that names a field, or yields instances that meet
the data contract and pass the sufficient-mask oracle. Never another exception, never a hang.
"""

from __future__ import annotations

import dataclasses
import string
import typing

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attentionspan_datasets import iter_instances
from attentionspan_datasets.tasks import TASKS, get_task
from tests.test_registry import check_instance, check_oracle

CHARS = string.ascii_letters + string.digits + "=+* |:-"


def field_strategy(name: str, annotation, default):
    if annotation is bool:
        return st.booleans()
    if annotation is int:
        # Around the default, with excursions into zero and negatives; bounded so a valid
        # draw stays fast (the point is validation, not scale).
        return st.integers(min_value=-3, max_value=max(12, min(int(default) * 2, 120)))
    if name == "mask":
        return st.sampled_from(["paper", "sufficient", "minimal", "dense", ""])
    if annotation is str:
        return st.one_of(st.just(default), st.text(alphabet=CHARS, max_size=70))
    return st.just(default)


def config_kwargs(task_name: str):
    config_class = get_task(task_name).config_class
    hints = typing.get_type_hints(config_class)
    defaults = config_class()
    return st.fixed_dictionaries(
        {},
        optional={
            f.name: field_strategy(f.name, hints[f.name], getattr(defaults, f.name))
            for f in dataclasses.fields(config_class)
        },
    )


@pytest.mark.parametrize("task_name", sorted(TASKS))
def test_random_configs_validate_or_generate(task_name):
    config_class = get_task(task_name).config_class

    @settings(max_examples=150, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
    @given(kwargs=config_kwargs(task_name), seed=st.integers(0, 2**32))
    def run(kwargs, seed):
        try:
            config = config_class.from_params(kwargs)
        except ValueError as error:
            message = str(error)
            assert task_name in message
            assert any(f"'{name}'" in message for name in kwargs), message
            return
        for instance in iter_instances(config, seed=seed, stop=5):
            check_instance(instance)
        sufficient = dataclasses.replace(config, mask="sufficient")
        for instance in iter_instances(sufficient, seed=seed, stop=5):
            check_oracle(instance)

    run()
