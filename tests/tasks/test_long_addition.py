"""Long addition: config validation, format, the paper's Table 3 example, both masks."""

from __future__ import annotations

import random
import re

import pytest

from attentionspan_datasets import generate, iter_instances
from attentionspan_datasets.tasks import get_task, visible_text
from attentionspan_datasets.tasks.long_addition import (
    AdditionConfig,
    draw_number,
    make_instance,
    oracle,
)
from tests.test_registry import check_instance, check_oracle

PAPER = AdditionConfig()
SUFFICIENT = AdditionConfig(mask="sufficient")


def needed_everywhere(instance, rows=None) -> None:
    """Every reference of a sufficient row is needed: hiding any one makes the oracle fail
    (it reads a hidden character) or give another character."""
    task_oracle = get_task(instance.task).oracle
    for i in range(len(instance.target)) if rows is None else rows:
        for dropped in instance.reference[i]:
            visible = visible_text(instance, i)
            visible[dropped] = None
            try:
                got = task_oracle(visible, instance.params, i)
            except (TypeError, ValueError):
                continue
            assert got != instance.target[i], (instance.text, i, dropped)


def reverse_int(text: str) -> int:
    return int(text[::-1])


# --- config validation --------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"num_operands": 1}, "'num_operands'.*allowed: 2 <= num_operands <= 10"),
        ({"num_operands": 11}, "'num_operands'.*allowed: 2 <= num_operands <= 10"),
        ({"min_digits": 0}, "'min_digits'.*allowed: 1 <= min_digits"),
        ({"max_digits": 0}, "'max_digits'.*allowed: 1 <= max_digits <= 1000"),
        ({"max_digits": 1001}, "'max_digits'.*allowed: 1 <= max_digits <= 1000"),
        ({"min_digits": 5, "max_digits": 4}, "'min_digits' \\(5\\) must not exceed 'max_digits'"),
        ({"padding": 1}, "field 'padding' must be of type bool"),
        ({"num_operands": True}, "field 'num_operands' must be of type int"),
        ({"mask": "dense"}, "'mask'.*'paper', 'sufficient'"),
    ],
)
def test_bad_fields_are_named(kwargs, needle):
    with pytest.raises(ValueError, match=f"long_addition: .*{needle}"):
        AdditionConfig(**kwargs)


def test_make_instance_checks_its_operands():
    with pytest.raises(ValueError, match="expected 2 operands"):
        make_instance([1, 2, 3], PAPER)
    with pytest.raises(ValueError, match="non-negative integers"):
        make_instance([1, -2], PAPER)


# --- drawing, determinism, format ------------------------------------------------------------
def test_digit_counts_are_uniform_and_values_never_overflow():
    """d uniform in [min, max]; a d-digit value in [10^(d-1), 10^d - 1], 0..9 for d = 1 (the
    authors' randint(10**(d-1), 10**d) gave 1-digit draws a 10% chance of being 10)."""
    rng = random.Random(0)
    ones = [draw_number(rng, 1, 1) for _ in range(2000)]
    assert set(ones) == set(range(10))
    lengths = [len(str(draw_number(rng, 2, 4))) for _ in range(6000)]
    assert set(lengths) == {2, 3, 4}
    assert all(1700 < lengths.count(d) < 2300 for d in (2, 3, 4))


def test_same_seed_and_index_give_the_same_instance():
    first = generate("addition_ood", seed=7, index=3)
    assert first == generate("addition_ood", seed=7, index=3)
    assert first != generate("addition_ood", seed=7, index=4)
    rng_a, rng_b = random.Random("x"), random.Random("x")
    assert get_task("long_addition").generate(rng_a, PAPER) == get_task("long_addition").generate(
        rng_b, PAPER
    )


@pytest.mark.parametrize("padding", [False, True])
@pytest.mark.parametrize("num_operands", [2, 3, 10])
def test_format_is_the_reversed_sum(padding, num_operands):
    config = AdditionConfig(num_operands=num_operands, min_digits=1, max_digits=6, padding=padding)
    for instance in iter_instances(config, seed=0, stop=300):
        check_instance(instance)
        assert re.fullmatch(r"(\d+\+)+\d+=", instance.prompt)
        assert re.fullmatch(r"\d+", instance.target)
        operands = instance.prompt[:-1].split("+")
        assert len(operands) == num_operands
        assert reverse_int(instance.target) == sum(map(reverse_int, operands))
        digits = instance.params["digits"]
        assert digits == [len(str(reverse_int(o))) for o in operands]
        assert instance.params["length"] == max(digits) and 1 <= max(digits) <= 6
        if padding:  # zfill: every number at least max_digits characters
            assert all(len(o) == 6 for o in operands)
            assert len(instance.target) in (6, 7)
        else:  # natural length: no leading zero (the last character when reversed)
            assert all(o == "0" or not o.endswith("0") for o in operands)
            assert instance.target == "0" or not instance.target.endswith("0")


def test_params_hold_lengths_never_values():
    config = AdditionConfig(max_digits=4)
    first, second = make_instance([12, 3400], config), make_instance([98, 1001], config)
    assert (
        first.params
        == second.params
        == {
            "length": 4,
            "num_operands": 2,
            "digits": [2, 4],
            "widths": [2, 4],
        }
    )


# --- the paper mask on hand-written examples -----------------------------------------------
def test_table3_example_and_its_paper_mask():
    """Table 3: 1240+4335+3440= -> 8916 (421 + 5334 + 443 = 6198), padding to 4 digits."""
    config = AdditionConfig(num_operands=3, max_digits=4, padding=True)
    instance = make_instance([421, 5334, 443], config)
    assert (instance.prompt, instance.target) == ("1240+4335+3440=", "8916")
    # Operand digits at place i sit at positions i, 5 + i and 10 + i.
    assert instance.reference == [[0, 5, 10], [1, 6, 11], [2, 7, 12], [3, 8, 13]]


def test_final_carry_references_the_place_below():
    instance = make_instance([99, 1], PAPER)  # 99 + 1 = 100
    assert (instance.prompt, instance.target) == ("99+1=", "001")
    assert instance.reference == [[0, 3], [1], [1]]  # place 2 has no operand digit
    padded = make_instance([99, 1], AdditionConfig(max_digits=2, padding=True))
    assert (padded.prompt, padded.target) == ("99+10=", "001")
    assert padded.reference == [[0, 3], [1, 4], [1, 4]]


def test_sufficient_mask_adds_the_place_below_and_the_previous_digit():
    instance = make_instance([99, 1], SUFFICIENT)
    # "99+1=" then "001" at 5, 6, 7.
    assert instance.reference == [[0, 3], [0, 1, 3, 5], [1, 6]]
    assert [oracle(visible_text(instance, i), instance.params, i) for i in range(3)] == list("001")


def test_one_digit_and_zero_operands():
    assert make_instance([0, 0], PAPER).text == "0+0=0"
    assert make_instance([7, 5], PAPER).text == "7+5=21"
    assert make_instance([0, 0], AdditionConfig(max_digits=3, padding=True)).text == ("000+000=000")
    ten = make_instance([9] * 10, AdditionConfig(num_operands=10, mask="sufficient"))
    assert ten.target == "09"
    check_oracle(ten)


# --- the sufficient mask and its oracle ------------------------------------------------------
@pytest.mark.parametrize("preset", ["addition_id", "addition_ood"])
def test_sufficient_oracle_reproduces_every_digit(preset):
    for instance in iter_instances(preset, seed=11, stop=3000, mask="sufficient"):
        check_oracle(instance)


@pytest.mark.parametrize("padding", [False, True])
def test_sufficient_oracle_with_many_operands_and_carries(padding):
    """Ten operands of nines give the largest carries (9) that the oracle must recover."""
    config = AdditionConfig(
        num_operands=10, min_digits=1, max_digits=8, padding=padding, mask="sufficient"
    )
    for instance in iter_instances(config, seed=3, stop=500):
        check_oracle(instance)
    nines = make_instance([99_999_999] * 10, config)  # 999,999,990
    assert nines.target == "099999999"
    check_oracle(nines)


def test_every_sufficient_reference_is_needed():
    for instance in iter_instances("addition_ood", seed=4, stop=200, mask="sufficient"):
        needed_everywhere(instance)
    needed_everywhere(make_instance([99, 1], SUFFICIENT))


def test_the_paper_mask_alone_is_not_sufficient():
    """Without the previous place the carry is unknown: the oracle cannot run on paper rows."""
    instance = make_instance([95, 5], PAPER)  # 100: place 1 needs the carry from place 0
    with pytest.raises(TypeError):
        oracle(visible_text(instance, 1), instance.params, 1)


def test_cached_masks_are_not_shared_between_instances():
    first = make_instance([12, 34], SUFFICIENT)
    first.reference[0].append(99)
    assert make_instance([56, 78], SUFFICIENT).reference[0] == [0, 3]
