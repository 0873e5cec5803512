"""Long multiplication: config validation, the Table 3 layout, both masks, edge cases."""

from __future__ import annotations

import random
import re

import pytest

from attentionspan_datasets import generate, iter_instances
from attentionspan_datasets.tasks import get_task, visible_text
from attentionspan_datasets.tasks.long_multiplication import (
    MultiplicationConfig,
    make_instance,
    oracle,
)
from tests.tasks.test_long_addition import needed_everywhere, reverse_int
from tests.test_registry import check_instance, check_oracle

PAPER = MultiplicationConfig()
SUFFICIENT = MultiplicationConfig(mask="sufficient")


def computed_rows(instance) -> list[int]:
    """Target indices whose character is computed from digits: not a shift zero, not a
    separator (those are fixed by the layout in params)."""
    rows, i = [], 0
    for j, width in enumerate(instance.params["row_widths"]):
        rows += [i + k for k in range(j, width)]
        i += width + 1
    return rows + list(range(i, len(instance.target)))


# --- config validation --------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"min_digits": 0}, "'min_digits'.*allowed: 1 <= min_digits <= 10"),
        ({"max_digits": 11}, "'max_digits'.*allowed: 1 <= max_digits <= 10"),
        ({"min_digits": 4, "max_digits": 3}, "'min_digits' \\(4\\) must not exceed 'max_digits'"),
        ({"padding": "yes"}, "field 'padding' must be of type bool"),
        ({"max_digits": 2.0}, "field 'max_digits' must be of type int"),
        ({"mask": "full"}, "'mask'.*'paper', 'sufficient'"),
    ],
)
def test_bad_fields_are_named(kwargs, needle):
    with pytest.raises(ValueError, match=f"long_multiplication: .*{needle}"):
        MultiplicationConfig(**kwargs)


def test_make_instance_checks_its_operands():
    with pytest.raises(ValueError, match="non-negative integers"):
        make_instance(-1, 2, PAPER)
    with pytest.raises(ValueError, match="at most 10 digits"):
        make_instance(2, 10**10, PAPER)


# --- determinism and format ------------------------------------------------------------------
def test_same_seed_and_index_give_the_same_instance():
    first = generate("multiplication_ood", seed=7, index=3)
    assert first == generate("multiplication_ood", seed=7, index=3)
    assert first != generate("multiplication_ood", seed=7, index=4)
    task = get_task("long_multiplication")
    assert task.generate(random.Random("x"), PAPER) == task.generate(random.Random("x"), PAPER)


@pytest.mark.parametrize("padding", [False, True])
def test_format_lists_shifted_partial_products_then_the_product(padding):
    config = MultiplicationConfig(min_digits=1, max_digits=5, padding=padding)
    for instance in iter_instances(config, seed=0, stop=300):
        check_instance(instance)
        a_text, b_text = re.fullmatch(r"(\d+)\*(\d+)=", instance.prompt).groups()
        a, b = reverse_int(a_text), reverse_int(b_text)
        *rows, product = re.split(r"[+=]", instance.target)
        assert instance.target.count("=") == 1 and len(rows) == len(b_text)
        assert [reverse_int(r) for r in rows] == [a * int(d) * 10**j for j, d in enumerate(b_text)]
        assert all(r[:j] == "0" * min(j, len(r)) for j, r in enumerate(rows))  # shift zeros
        assert reverse_int(product) == a * b
        assert instance.params["digits"] == [len(str(a)), len(str(b))]
        assert instance.params["row_widths"] == [len(r) for r in rows]
        if padding:  # zfill: every number at least max_digits characters
            assert all(len(x) >= 5 for x in [a_text, b_text, *rows, product])
            assert len(a_text) == len(b_text) == 5
        else:  # natural length; a zero partial product is "0"
            assert all(x == "0" or not x.endswith("0") for x in [a_text, b_text, *rows, product])


def test_params_hold_lengths_never_values():
    assert (
        make_instance(11, 11, PAPER).params
        == make_instance(12, 12, PAPER).params
        == {
            "length": 2,
            "digits": [2, 2],
            "widths": [2, 2],
            "row_widths": [2, 3],
        }
    )


# --- the paper mask on hand-written examples -----------------------------------------------
def test_table3_example_and_its_paper_mask():
    """Table 3: 9900*9900= -> 1980+0198+0000+0000=1089 (99 * 99 = 9801, padding to 4)."""
    instance = make_instance(99, 99, MultiplicationConfig(max_digits=4, padding=True))
    assert (instance.prompt, instance.target) == ("9900*9900=", "1980+0198+0000+0000=1089")
    # a's places at 0-3, b_j at 5 + j; the rows start at 10, 15, 20, 25, the product at 30.
    row0 = [[0, 5], [1, 5], [2, 5], [3, 5], [5]]
    row1 = [[6], [0, 6], [1, 6], [2, 6], [6]]  # a shift zero, then a's places 0-2
    row2 = [[7], [7], [0, 7], [1, 7], [7]]
    row3 = [[8], [8], [8], [0, 8], [8]]  # ... the last separator is the "="
    product = [[10 + i, 15 + i, 20 + i, 25 + i] for i in range(4)]
    assert instance.reference == row0 + row1 + row2 + row3 + product


def test_unpadded_example_with_carries_out_of_the_top():
    instance = make_instance(99, 99, PAPER)
    assert (instance.prompt, instance.target) == ("99*99=", "198+0198=1089")
    assert instance.reference == [
        [0, 3], [1, 3], [1, 3], [3],  # 891: the row's final carry references a's top digit
        [4], [0, 4], [1, 4], [1, 4], [4],  # 8910
        [6, 10], [7, 11], [8, 12], [13],  # 9801: place 3 only in the longer row
    ]  # fmt: skip
    sufficient = make_instance(99, 99, SUFFICIENT)
    assert sufficient.reference == [
        [0, 3], [0, 1, 3, 6], [1, 3, 7], [3],
        [4], [0, 4], [0, 1, 4, 11], [1, 4, 12], [4],
        [6, 10], [6, 7, 10, 11, 15], [7, 8, 11, 12, 16], [8, 12, 13, 17],
    ]  # fmt: skip
    check_oracle(sufficient)


@pytest.mark.parametrize(
    "a, b, text",
    [
        (9, 9, "9*9=18=18"),
        (0, 5, "0*5=0=0"),
        (5, 0, "5*0=0=0"),
        (7, 10, "7*01=0+07=07"),  # a zero row, then a shifted one
        (12, 101, "21*101=21+0+0021=2121"),  # a zero row of width 1 after the first
        (999, 999, "999*999=1998+01998+001998=100899"),
    ],
)
def test_edge_cases(a, b, text):
    assert make_instance(a, b, PAPER).text == text
    check_oracle(make_instance(a, b, SUFFICIENT))
    padded = make_instance(
        a, b, MultiplicationConfig(max_digits=3, padding=True, mask="sufficient")
    )
    check_oracle(padded)


def test_one_digit_paper_mask():
    instance = make_instance(9, 9, PAPER)  # "9*9=" then "18" "=" "18" at 4, 5, 6, 7, 8
    assert instance.reference == [[0, 2], [0, 2], [2], [4], [5]]


# --- the sufficient mask and its oracle ------------------------------------------------------
@pytest.mark.parametrize("preset", ["multiplication_id", "multiplication_ood"])
def test_sufficient_oracle_reproduces_every_character(preset):
    for instance in iter_instances(preset, seed=11, stop=2000, mask="sufficient"):
        check_oracle(instance)


@pytest.mark.parametrize("padding", [False, True])
def test_sufficient_oracle_up_to_ten_digits(padding):
    """Ten partial products give the largest column carries the oracle must recover."""
    config = MultiplicationConfig(min_digits=7, max_digits=10, padding=padding, mask="sufficient")
    for instance in iter_instances(config, seed=5, stop=150):
        check_oracle(instance)
    check_oracle(make_instance(10**10 - 1, 10**10 - 1, config))
    check_oracle(make_instance(1_111_111_111, 9_999_999_999, config))


def test_every_computed_reference_is_needed():
    for instance in iter_instances("multiplication_ood", seed=4, stop=60, mask="sufficient"):
        needed_everywhere(instance, computed_rows(instance))
    needed_everywhere(
        make_instance(99, 99, SUFFICIENT), computed_rows(make_instance(99, 99, PAPER))
    )


def test_the_paper_mask_alone_is_not_sufficient():
    instance = make_instance(99, 9, PAPER)  # 891: place 1 needs the carry from 81
    with pytest.raises(TypeError):
        oracle(visible_text(instance, 1), instance.params, 1)


def test_cached_masks_are_not_shared_between_instances():
    first = make_instance(12, 34, SUFFICIENT)
    first.reference[0].append(99)
    assert make_instance(56, 78, SUFFICIENT).reference[0] == [0, 3]
