"""Successor: config validation, format, the paper's v1 example, both masks, rollovers."""

from __future__ import annotations

import dataclasses
import random

import pytest

from attentionspan_datasets import generate, iter_instances
from attentionspan_datasets.tasks import get_task, visible_text
from attentionspan_datasets.tasks.successor import SuccessorConfig, make_instance, oracle
from tests.tasks.test_long_addition import needed_everywhere
from tests.test_registry import check_instance, check_oracle

PAPER = SuccessorConfig()
SUFFICIENT = SuccessorConfig(mask="sufficient")
MINIMAL = SuccessorConfig(mask="minimal")


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
    with pytest.raises(ValueError, match="start must be an integer in \\[0, "):
        make_instance(-1, 2, PAPER)
    with pytest.raises(ValueError, match="count must be an integer in \\[1, 1000\\]"):
        make_instance(5, 0, PAPER)
    with pytest.raises(ValueError, match="count must be an integer"):
        make_instance(5, 1001, PAPER)


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
        count_text, start_text = instance.prompt[:-1].split(":")
        start = int(start_text)
        numbers = [int(n) for n in instance.target.split(" ")]
        assert instance.target == " ".join(str(n) for n in numbers)  # single spaces
        assert numbers == list(range(start + 1, start + 1 + len(numbers)))
        assert int(count_text) == len(numbers)  # the prompt says how many to write
        assert instance.params["length"] == instance.params["count"] == len(numbers)
        assert instance.params["widths"] == [len(str(n)) for n in [start, *numbers]]
        starts.add(start)
        counts.add(len(numbers))
    if preset == "successor_id":  # Appendix F.5: start 1-90, 2-4 numbers
        assert min(starts) >= 1 and max(starts) <= 90 and counts == {2, 3, 4}
    else:  # start 100-900, 5-6 numbers
        assert min(starts) >= 100 and max(starts) <= 900 and counts == {5, 6}


def test_v1_table1_example_and_its_masks():
    """v1 Table 1: 234 -> 235 236 237 238 239 240 (count 6: the start is not counted)."""
    instance = make_instance(234, 6, MINIMAL)
    assert (instance.prompt, instance.target) == ("6:234=", "235 236 237 238 239 240")
    # Without a rollover every character references the one 4 positions back: the same
    # place of the previous number, or the character that closed it ("=" or a space).
    assert instance.reference == [[i + 2] for i in range(len(instance.target))]
    # The authors' rule: all of "234=" then the digits of 235 written so far; for 236,
    # all of "235 " and so on. The space after 235 sees "234=235".
    paper = make_instance(234, 6, PAPER)
    assert paper.reference[:5] == [
        [2, 3, 4, 5], [2, 3, 4, 5, 6], [2, 3, 4, 5, 6, 7], [2, 3, 4, 5, 6, 7, 8], [6, 7, 8, 9],
    ]  # fmt: skip
    sufficient = make_instance(234, 6, SUFFICIENT)
    assert sufficient.reference[3] == [0, *paper.reference[3]]  # a space: the count too


def test_rollover_to_a_new_leading_digit():
    instance = make_instance(999, 2, MINIMAL)
    assert instance.text == "2:999=1000 1001"
    # 1000: the new leading digit references 999's leading digit, then places 2, 1, 0.
    assert instance.reference == [[2], [2], [3], [4], [5], [6], [7], [8], [9]]
    sufficient = make_instance(999, 2, SUFFICIENT)
    assert sufficient.reference == [
        [2, 3, 4, 5], [2, 3, 4, 5, 6], [2, 3, 4, 5, 6, 7], [2, 3, 4, 5, 6, 7, 8],  # 1000
        [0, 2, 3, 4, 5, 6, 7, 8, 9],  # the space after 1000
        [6, 7, 8, 9, 10], [6, 7, 8, 9, 10, 11], [6, 7, 8, 9, 10, 11, 12],  # 1001
        [6, 7, 8, 9, 10, 11, 12, 13],
    ]  # fmt: skip
    check_oracle(sufficient)


@pytest.mark.parametrize(
    "start, count, text",
    [(0, 1, "1:0=1"), (9, 2, "2:9=10 11"), (98, 3, "3:98=99 100 101"), (1999, 1, "1:1999=2000")],
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


def test_every_carry_chain_digit_is_needed():
    """Of a digit's references, n's digits at places <= p are each needed: hiding one
    changes or breaks the answer (spaces are fixed by the layout in params)."""
    for start in (234, 289, 999, 1099):
        instance = make_instance(start, 4, SUFFICIENT)
        chained = make_instance(start, 4, MINIMAL)
        for i, c in enumerate(instance.target):
            if c == " ":
                continue
            place = chained.reference[i][0]  # n's digit at place p (or n's top digit)
            number_end = max(p for p in instance.reference[i] if instance.text[p] in "= ")
            chain = list(range(place, number_end))
            assert set(chain) <= set(instance.reference[i])
            rows = [chain if j == i else row for j, row in enumerate(instance.reference)]
            trimmed = dataclasses.replace(instance, reference=rows)
            assert oracle(visible_text(trimmed, i), trimmed.params, i) == c
            needed_everywhere(trimmed, [i])


def test_the_minimal_mask_alone_is_not_sufficient():
    instance = make_instance(19, 1, MINIMAL)  # 20: the tens digit needs the units' carry
    with pytest.raises(TypeError):
        oracle(visible_text(instance, 0), instance.params, 0)


def test_cached_masks_are_not_shared_between_instances():
    first = make_instance(12, 2, MINIMAL)
    first.reference[0].append(99)
    assert make_instance(45, 2, MINIMAL).reference[0] == [2]


def test_one_target_per_prompt():
    """The count in the prompt fixes the answer: no prompt has two targets."""
    targets = {}
    for instance in iter_instances("successor_id", seed=3, stop=5000):
        assert targets.setdefault(instance.prompt, instance.target) == instance.target
    assert len(targets) > 200  # start 1-90 times count 2-4: 270 prompts
