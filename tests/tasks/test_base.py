"""The config base class: type checks, range checks, text parsing, the oracle's view."""

from __future__ import annotations

import dataclasses
import typing
from typing import Literal

import pytest

from attentionspan_datasets.tasks import TASKS, Instance, TaskConfig, visible_text
from attentionspan_datasets.tasks.base import MASK_VARIANTS, MaskVariant
from attentionspan_datasets.tasks.string_reversal import ReversalConfig


def test_bool_is_not_accepted_as_int():
    with pytest.raises(ValueError, match="'max_length' must be of type int, got bool"):
        ReversalConfig(max_length=True)


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"min_length": 0}, "'min_length'.*allowed: 1 <= min_length"),
        ({"min_length": 4, "max_length": 3}, "'min_length' \\(4\\) must not exceed 'max_length'"),
        ({"charset": "aab"}, "'charset'.*distinct"),
        ({"charset": "a b"}, "'charset'.*whitespace"),
        ({"charset": ""}, "'charset'.*at least 1"),
        ({"charset": "ab="}, "'charset'.*reserved characters '='"),
        ({"mask": "dense"}, "'mask'.*'paper', 'sufficient'"),
    ],
)
def test_errors_name_the_field_and_what_is_allowed(kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        ReversalConfig(**kwargs)


def test_parse_value_converts_by_field_type():
    assert ReversalConfig.parse_value("max_length", " 12") == 12
    assert ReversalConfig.parse_value("charset", "abc") == "abc"
    with pytest.raises(ValueError, match="'max_length' must be an integer, got 'x'"):
        ReversalConfig.parse_value("max_length", "x")
    with pytest.raises(ValueError, match="unknown parameter 'nope'; allowed: mask"):
        ReversalConfig.parse_value("nope", "1")


def test_visible_text_hides_unreferenced_characters():
    instance = Instance("t", "ab=", "ba", [[1], [0]])
    assert visible_text(instance, 0) == [None, "b", None, None, None]
    assert visible_text(instance, 1) == ["a", None, None, None, None]


def test_to_params_round_trips():
    config = ReversalConfig(min_length=2, max_length=5, charset="xyz", mask="sufficient")
    assert ReversalConfig.from_params(config.to_params()) == config


# --- Literal fields: the mask variant ---------------------------------------------------------
def test_the_mask_is_one_literal_type():
    assert typing.get_type_hints(TaskConfig)["mask"] == MaskVariant
    assert MASK_VARIANTS == typing.get_args(MaskVariant) == ("paper", "sufficient", "minimal")


@pytest.mark.parametrize("task", sorted(TASKS))
def test_every_task_checks_its_mask_against_the_literal(task):
    config_class = TASKS[task].config_class
    allowed = "allowed values: 'paper', 'sufficient', 'minimal'"
    with pytest.raises(ValueError) as error:
        config_class(mask="dense")
    assert str(error.value) == f"{task}: invalid value 'dense' for field 'mask': {allowed}"
    with pytest.raises(ValueError, match="field 'mask' must be of type str, got int 1$"):
        config_class(mask=1)
    for mask in MASK_VARIANTS:
        assert config_class(mask=mask).mask == mask
    assert config_class.parse_value("mask", "minimal") == "minimal"


def test_any_literal_field_is_checked_the_same_way():
    @dataclasses.dataclass
    class Stepped(TaskConfig):
        step: Literal[1, 2] = 1

    Stepped.task_name = "stepped"
    assert Stepped(step=2).step == 2
    with pytest.raises(ValueError, match="'step': allowed values: 1, 2$"):
        Stepped(step=3)
    with pytest.raises(ValueError, match="field 'step' must be of type int, got bool"):
        Stepped(step=True)
