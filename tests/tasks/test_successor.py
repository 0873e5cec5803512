"""Successor: config validation, format, the paper's v1 example, both masks, rollovers."""

from __future__ import annotations

import random

import pytest

from attentionspan_datasets import generate, iter_instances
from attentionspan_datasets.tasks import get_task, visible_text
from attentionspan_datasets.tasks.successor import SuccessorConfig, make_instance, oracle
from tests.tasks.test_long_addition import needed_everywhere
from tests.test_registry import check_instance, check_oracle

PAPER = SuccessorConfig()
SUFFICIENT = SuccessorConfig(mask="sufficient")


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"min_start": -1}, "'min_start'.*allowed: 0 <= min_start"),
        ({"min_start": 0, "max_start": -1}, "'max_start'.*allowed: 0 <= max_start"),
        ({"min_start": 10, "max_start": 9}, "'min_start' \\(10\\) must not exceed 'max_start'"),
        ({"min_count": 0}, "'min_count'.*allowed: 1 <= min_count"),
        ({"max_count": 0, "min_count": 1}, "'max_count'.*allowed: 1 <= max_count"),
        ({"min_count": 5, "max_count": 4}, "'min_count' \\(5\\) must not exceed 'max_count'"),
        ({"max_start": "90"}, "field 'max_start' must be of type int"),
    ],
)
def test_bad_fields_are_named(kwargs, needle):
    with pytest.raises(ValueError, match=f"successor: .*{needle}"):
        SuccessorConfig(**kwargs)


def test_make_instance_checks_its_arguments():
    with pytest.raises(ValueError, match="start must be a non-negative integer"):
        make_instance(-1, 2, PAPER)
    with pytest.raises(ValueError, match="count must be a positive integer"):
        make_instance(5, 0, PAPER)


def test_same_seed_and_index_give_the_same_instance():
    first = generate("successor_ood", seed=7, index=3)
    assert first == generate("successor_ood", seed=7, index=3)
    task = get_task("successor")
    assert task.generate(random.Random("x"), PAPER) == task.generate(random.Random("x"), PAPER)


@pytest.mark.parametrize("preset", ["successor_id", "successor_ood"])
def test_format_counts_on_from_the_start(preset):
    starts, counts = set(), set()
    for instance in iter_instances(preset, seed=0, stop=500):
        check_instance(instance)
        start = int(instance.prompt[:-1])
        numbers = [int(n) for n in instance.target.split(" ")]
        assert instance.target == " ".join(str(n) for n in numbers)  # single spaces
        assert numbers == list(range(start + 1, start + 1 + len(numbers)))
        assert instance.params["length"] == instance.params["count"] == len(numbers)
        assert instance.params["widths"] == [len(str(n)) for n in [start, *numbers]]
        starts.add(start)
        counts.add(len(numbers))
    if preset == "successor_id":  # Appendix F.5: start 1-90, 2-4 numbers
        assert min(starts) >= 1 and max(starts) <= 90 and counts == {2, 3, 4}
    else:  # start 100-900, 5-6 numbers
        assert min(starts) >= 100 and max(starts) <= 900 and counts == {5, 6}


def test_v1_table1_example_and_its_paper_mask():
    """v1 Table 1: 234 -> 235 236 237 238 239 240 (count 6: the start is not counted)."""
    instance = make_instance(234, 6, PAPER)
    assert (instance.prompt, instance.target) == ("234=", "235 236 237 238 239 240")
    # Without a rollover every character references the one 4 positions back: the same
    # place of the previous number, or the character that closed it ("=" or a space).
    assert instance.reference == [[i] for i in range(len(instance.target))]


def test_rollover_to_a_new_leading_digit():
    instance = make_instance(999, 2, PAPER)
    assert instance.text == "999=1000 1001"
    # 1000: the new leading digit references 999's leading digit, then places 2, 1, 0.
    assert instance.reference == [[0], [0], [1], [2], [3], [4], [5], [6], [7]]
    sufficient = make_instance(999, 2, SUFFICIENT)
    assert sufficient.reference == [
        [0, 1, 2], [0, 1, 2], [1, 2], [2], [3],  # 1000 from 999: the whole carry chain
        [4, 5, 6, 7], [5, 6, 7], [6, 7], [7],  # 1001 from 1000
    ]  # fmt: skip
    check_oracle(sufficient)


@pytest.mark.parametrize(
    "start, count, text",
    [(0, 1, "0=1"), (9, 2, "9=10 11"), (98, 3, "98=99 100 101"), (1999, 1, "1999=2000")],
)
def test_edge_cases(start, count, text):
    assert make_instance(start, count, PAPER).text == text
    check_oracle(make_instance(start, count, SUFFICIENT))


@pytest.mark.parametrize("preset", ["successor_id", "successor_ood"])
def test_sufficient_oracle_reproduces_every_character(preset):
    for instance in iter_instances(preset, seed=11, stop=3000, mask="sufficient"):
        check_oracle(instance)


def test_sufficient_oracle_across_rollovers():
    config = SuccessorConfig(min_start=0, max_start=100_000, min_count=1, max_count=30)
    for instance in iter_instances(config, seed=2, stop=300, mask="sufficient"):
        check_oracle(instance)
    for start in (9, 99, 9_999, 99_999_999):
        check_oracle(make_instance(start - 3, 6, SUFFICIENT))


def test_every_digit_reference_is_needed():
    """Hiding any digit of the carry chain changes or breaks the answer (spaces are fixed by
    the layout in params, so they are left out)."""
    for start in (234, 289, 999, 1099):
        instance = make_instance(start, 4, SUFFICIENT)
        digits = [i for i, c in enumerate(instance.target) if c != " "]
        needed_everywhere(instance, digits)


def test_the_paper_mask_alone_is_not_sufficient():
    instance = make_instance(19, 1, PAPER)  # 20: the tens digit needs the units' carry
    with pytest.raises(TypeError):
        oracle(visible_text(instance, 0), instance.params, 0)


def test_cached_masks_are_not_shared_between_instances():
    first = make_instance(12, 2, PAPER)
    first.reference[0].append(99)
    assert make_instance(45, 2, PAPER).reference[0] == [0]


def test_the_instance_drawn_in_docs_is_still_generated():
    """docs/tasks.md pastes this instance; a change to drawing must regenerate the docs."""
    assert generate("successor_id", index=27).text == "8=9 10 11"
