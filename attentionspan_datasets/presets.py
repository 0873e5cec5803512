"""Named presets: `<task>_id` and `<task>_ood` with the paper's Appendix F parameters.

Each preset maps to (registered task name, config parameters). The bare task configs
(`addition`, `long_addition`, ...) take any parameters and live in generation.py.
"""

from __future__ import annotations

from typing import Any

PRESETS: dict[str, tuple[str, dict[str, Any]]] = {
    # F.4: 1-10 characters in distribution, 11-50 out; a charset of at least 50 characters.
    "reversal_id": ("string_reversal", {"min_length": 1, "max_length": 10}),
    "reversal_ood": ("string_reversal", {"min_length": 11, "max_length": 50}),
    # F.1: two operands of 1-4 digits in distribution, 5-10 digits out.
    "addition_id": ("long_addition", {"num_operands": 2, "min_digits": 1, "max_digits": 4}),
    "addition_ood": ("long_addition", {"num_operands": 2, "min_digits": 5, "max_digits": 10}),
    # F.3: each operand 1-3 digits in distribution, 4-6 digits out.
    "multiplication_id": ("long_multiplication", {"min_digits": 1, "max_digits": 3}),
    "multiplication_ood": ("long_multiplication", {"min_digits": 4, "max_digits": 6}),
    # F.2: flip command on, two registers, 10 instructions in distribution, 11-100 out.
    "ffml_id": (
        "flip_flop",
        {"num_registers": 2, "min_instructions": 10, "max_instructions": 10, "use_flip": True},
    ),
    "ffml_ood": (
        "flip_flop",
        {"num_registers": 2, "min_instructions": 11, "max_instructions": 100, "use_flip": True},
    ),
    # F.6: a table of 5 pairs and strings of 5 symbols in distribution; 10-50 and 10-20 out.
    "value_assignment_id": (
        "value_assignment",
        {"min_table_size": 5, "max_table_size": 5, "min_length": 5, "max_length": 5},
    ),
    "value_assignment_ood": (
        "value_assignment",
        {"min_table_size": 10, "max_table_size": 50, "min_length": 10, "max_length": 20},
    ),
    # F.5: start 1-90 and 2-4 numbers in distribution; start 100-900 and 5-6 numbers out.
    "successor_id": (
        "successor",
        {"min_start": 1, "max_start": 90, "min_count": 2, "max_count": 4},
    ),
    "successor_ood": (
        "successor",
        {"min_start": 100, "max_start": 900, "min_count": 5, "max_count": 6},
    ),
}

# The discrete-retrieval tasks (Sorodoc, Boleda and Baroni 2021, Section 3.2): for each of
# T1-T7, `t<k>_len<n>` with n vectors for the paper's lengths 5-30, and an ID/OOD pair
# (train on 10 vectors, test on 20 and 30). The paper's split sizes (100k / 10k / 10k) are
# builder arguments: load_dataset("attentionspan", "t6_len10", num_train=100_000,
# num_validation=10_000, num_test=10_000).
RETRIEVAL_TASKS = {
    "t1": "one_feature_detection",
    "t2": "two_feature_detection",
    "t3": "set_member_detection",
    "t4": "contextual_two_feature_detection",
    "t5": "contextual_set_member_detection",
    "t6": "ordered_feature_detection",
    "t7": "contextual_ordered_set_member_detection",
}
RETRIEVAL_LENGTHS = (5, 10, 15, 20, 25, 30)
for _short, _task in RETRIEVAL_TASKS.items():
    for _n in RETRIEVAL_LENGTHS:
        PRESETS[f"{_short}_len{_n}"] = (_task, {"min_length": _n, "max_length": _n})
    PRESETS[f"{_short}_id"] = (_task, {"min_length": 10, "max_length": 10})
    PRESETS[f"{_short}_ood"] = (_task, {"min_length": 20, "max_length": 30, "length_step": 10})
