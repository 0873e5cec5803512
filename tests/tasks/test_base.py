"""The config base class: type checks, range checks, text parsing, the oracle's view."""

from __future__ import annotations

import pytest

from attentionspan_datasets.tasks import Instance, visible_text
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
