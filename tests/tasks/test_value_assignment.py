"""value_assignment: config validation, format, masks and the oracle."""

from __future__ import annotations

from collections import Counter

import pytest

from attentionspan_datasets import generate, iter_instances
from attentionspan_datasets.cli import main
from attentionspan_datasets.tasks import visible_text
from attentionspan_datasets.tasks.value_assignment import (
    DEFAULT_INPUT_ALPHABET,
    ValueAssignmentConfig,
    make_instance,
    oracle,
)

# Table 3: B1 E0 D1 A1 C0 ABBEDACABCD -> 11101101101 (the spaces are for display only).
TABLE, SYMBOLS, TARGET = "B1E0D1A1C0", "ABBEDACABCD", "11101101101"


def split(instance):
    """(table, symbols) of an instance, from its params and prompt."""
    start = 2 * instance.params["table_size"]
    return instance.prompt[:start], instance.prompt[start:-1]


# --- config validation -----------------------------------------------------------------


@pytest.mark.parametrize(
    "field, value",
    [
        ("min_table_size", 0),
        ("max_table_size", 0),
        ("min_length", 0),
        ("max_length", -1),
        ("input_alphabet", ""),
        ("input_alphabet", "abca"),  # not distinct
        ("input_alphabet", "ab c"),  # whitespace
        ("input_alphabet", "abc="),  # the separator
        ("output_alphabet", ""),
        ("output_alphabet", "0 1"),
        ("output_alphabet", "01="),
        ("output_alphabet", "011"),
        ("min_length", "5"),
        ("max_table_size", 5.0),
    ],
)
def test_bad_field_raises_value_error_naming_it(field, value):
    with pytest.raises(ValueError, match=f"value_assignment: .*'{field}'"):
        ValueAssignmentConfig(**{field: value})


@pytest.mark.parametrize(
    "low, high", [("min_table_size", "max_table_size"), ("min_length", "max_length")]
)
def test_min_above_max_names_both_fields(low, high):
    with pytest.raises(ValueError, match=f"'{low}' \\(4\\) must not exceed '{high}' \\(3\\)"):
        ValueAssignmentConfig(**{low: 4, high: 3})


def test_alphabets_must_be_disjoint():
    with pytest.raises(
        ValueError,
        match="'input_alphabet' and 'output_alphabet' must be disjoint; both contain 'ab'",
    ):
        ValueAssignmentConfig(input_alphabet="abcd", output_alphabet="ba9")


def test_table_larger_than_the_input_alphabet_names_both_fields():
    with pytest.raises(
        ValueError,
        match="'max_table_size' \\(53\\) exceeds the 52 distinct keys of 'input_alphabet'",
    ):
        ValueAssignmentConfig(max_table_size=53)
    with pytest.raises(ValueError, match="'max_table_size' \\(5\\).*'input_alphabet'"):
        ValueAssignmentConfig(input_alphabet="abcd")
    ValueAssignmentConfig(input_alphabet="abcd", min_table_size=4, max_table_size=4)


def test_cli_reports_bad_alphabet_in_one_line(capsys):
    code = main(["generate", "value_assignment", "-n", "1", "--param", "output_alphabet=0a"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "disjoint" in err


# --- format and determinism ------------------------------------------------------------


def test_instances_are_deterministic():
    first = [generate("value_assignment_ood", seed=21, index=i) for i in range(20)]
    again = [generate("value_assignment_ood", seed=21, index=i) for i in range(20)]
    assert first == again
    assert len({x.prompt for x in first}) == 20


@pytest.mark.parametrize(
    "preset, table_range, length_range",
    [("value_assignment_id", (5, 5), (5, 5)), ("value_assignment_ood", (10, 50), (10, 20))],
)
def test_format(preset, table_range, length_range):
    sizes, lengths = set(), set()
    for instance in iter_instances(preset, seed=0, stop=2000):
        table, symbols = split(instance)
        assert instance.prompt == table + symbols + "="
        keys, values = table[0::2], table[1::2]
        assert len(set(keys)) == len(keys) and set(keys) <= set(DEFAULT_INPUT_ALPHABET)
        assert set(values) <= {"0", "1"}
        assert set(symbols) <= set(keys)
        assert instance.target == "".join(values[keys.index(s)] for s in symbols)
        assert instance.params == {"length": len(symbols), "table_size": len(keys)}
        sizes.add(len(keys))
        lengths.add(len(symbols))
    assert (min(sizes), max(sizes)) == table_range
    assert (min(lengths), max(lengths)) == length_range


def test_keys_are_drawn_uniformly_without_replacement():
    anywhere, first = Counter(), Counter()
    for instance in iter_instances("value_assignment_id", seed=8, stop=3000):
        keys = split(instance)[0][0::2]
        anywhere.update(keys)
        first[keys[0]] += 1
    # 15,000 keys over 52 letters: about 288 each (sd 17); first keys: about 58 (sd 7.5).
    assert set(anywhere) == set(DEFAULT_INPUT_ALPHABET)
    assert all(200 < anywhere[c] < 380 for c in DEFAULT_INPUT_ALPHABET), anywhere
    assert all(25 < first[c] < 95 for c in DEFAULT_INPUT_ALPHABET), first


def test_not_every_key_has_to_appear_in_the_string():
    absent = 0
    for instance in iter_instances("value_assignment_id", seed=1, stop=500):
        table, symbols = split(instance)
        absent += not set(table[0::2]) <= set(symbols)
    assert absent > 100  # 5 symbols drawn from 5 keys: usually some key is left out


def test_custom_alphabets():
    config = ValueAssignmentConfig(
        input_alphabet="0123456789",
        output_alphabet="xyz",
        min_table_size=10,
        max_table_size=10,
        max_length=30,
    )
    values_seen = set()
    for instance in iter_instances(config, seed=2, stop=300):
        table, symbols = split(instance)
        assert sorted(table[0::2]) == list("0123456789")  # all 10 keys, in random order
        assert set(instance.target) <= set("xyz")
        values_seen |= set(instance.target)
    assert values_seen == set("xyz")


def test_sorted_keys_puts_the_table_in_alphabet_order_and_draws_the_same_numbers():
    """The curriculum aid: keys in `input_alphabet` order, everything else as drawn (same
    values, lengths and pairs; the masks still hold for the oracle)."""
    plain = iter_instances("value_assignment_ood", seed=4, stop=300)
    aided = iter_instances(
        "value_assignment_ood", seed=4, stop=300, sorted_keys=True, mask="sufficient"
    )
    for before, after in zip(plain, aided, strict=True):
        table, _ = split(after)
        keys = table[0::2]
        assert list(keys) == sorted(keys, key=DEFAULT_INPUT_ALPHABET.index)
        assert sorted(keys) == sorted(split(before)[0][0::2])
        assert after.target == before.target and after.params == before.params
        for i, expected in enumerate(after.target):
            assert oracle(visible_text(after, i), after.params, i) == expected
    assert ValueAssignmentConfig().sorted_keys is False  # the presets keep random order


# --- edge cases ------------------------------------------------------------------------


def test_table_of_one_pair():
    config = ValueAssignmentConfig(
        min_table_size=1, max_table_size=1, min_length=1, max_length=8, mask="sufficient"
    )
    for instance in iter_instances(config, seed=3, stop=200):
        key, value = instance.prompt[0], instance.prompt[1]
        assert instance.prompt == key + value + key * len(instance.target) + "="
        assert instance.target == value * len(instance.target)
        assert instance.reference == [[0, 1, 2 + i] for i in range(len(instance.target))]


def test_make_instance_rejects_bad_tables():
    config = ValueAssignmentConfig()
    for table, symbols in [("B1E", "B"), ("B1B0", "B"), ("B1E0", "BA"), ("B1", "")]:
        with pytest.raises(ValueError, match="value_assignment: table"):
            make_instance(table, symbols, config)


# --- masks -----------------------------------------------------------------------------


def test_paper_example_from_table_3():
    instance = make_instance(TABLE, SYMBOLS, ValueAssignmentConfig(mask="minimal"))
    assert instance.prompt == "B1E0D1A1C0ABBEDACABCD="
    assert instance.target == TARGET
    # Keys sit at 0 (B), 2 (E), 4 (D), 6 (A), 8 (C); values one after; symbols from 10.
    assert instance.reference == [
        [7, 10],
        [1, 11],
        [1, 12],
        [3, 13],
        [5, 14],
        [7, 15],
        [9, 16],
        [7, 17],
        [1, 18],
        [9, 19],
        [5, 20],
    ]
    sufficient = make_instance(TABLE, SYMBOLS, ValueAssignmentConfig(mask="sufficient"))
    paper = make_instance(TABLE, SYMBOLS, ValueAssignmentConfig())
    assert paper.reference == sufficient.reference  # the authors' rule: symbol, key, value
    assert sufficient.reference == [
        [6, 7, 10],
        [0, 1, 11],
        [0, 1, 12],
        [2, 3, 13],
        [4, 5, 14],
        [6, 7, 15],
        [8, 9, 16],
        [6, 7, 17],
        [0, 1, 18],
        [8, 9, 19],
        [4, 5, 20],
    ]
    assert all(
        oracle(visible_text(sufficient, i), sufficient.params, i) == TARGET[i]
        for i in range(len(TARGET))
    )


def test_paper_mask_is_key_value_and_symbol_and_minimal_drops_the_key():
    for mask in ("paper", "minimal"):
        for instance in iter_instances("value_assignment_ood", seed=4, stop=500, mask=mask):
            table, symbols = split(instance)
            start = len(table)
            for i, row in enumerate(instance.reference):
                key_position = table[0::2].index(symbols[i]) * 2
                key = [key_position] if mask == "paper" else []
                assert row == [*key, key_position + 1, start + i]


@pytest.mark.parametrize("preset", ["value_assignment_id", "value_assignment_ood"])
def test_sufficient_oracle_reproduces_every_target(preset):
    for instance in iter_instances(preset, seed=5, stop=3000, mask="sufficient"):
        for i, expected in enumerate(instance.target):
            assert oracle(visible_text(instance, i), instance.params, i) == expected


def test_dropping_any_sufficient_reference_breaks_the_oracle():
    """Symbol, key and value are each needed: without one the oracle finds no value."""
    for instance in iter_instances("value_assignment_ood", seed=6, stop=300, mask="sufficient"):
        for i, row in enumerate(instance.reference):
            for dropped in row:
                visible = visible_text(instance, i)
                visible[dropped] = None
                assert oracle(visible, instance.params, i) != instance.target[i]


def test_masks_are_stored_sparse():
    instance = generate("value_assignment_ood", seed=7, index=0, mask="sufficient")
    assert sum(len(row) for row in instance.reference) == 3 * len(instance.target)
