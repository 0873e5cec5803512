"""The standard one-line instruction of each task, addressed to the model.

    from attentionspan_datasets.instructions import instruction_for
    instruction_for("long_addition")

lm-eval's `attnspan_*` tasks put it before the examples by default, and the harness uses it
with `--instruction default`, so a model trained with it is scored with the same line.
"""

from __future__ import annotations

from attentionspan_datasets.tasks import get_task

INSTRUCTIONS = {
    "string_reversal": "Write the characters before '=' in reverse order.",
    "long_addition": "Add the numbers before '='. Digits are written least significant "
    "first; write the sum the same way.",
    "long_multiplication": "Multiply the two numbers before '='. Digits are written least "
    "significant first; write each partial product, joined by '+', then '=' and the "
    "product, the same way.",
    "flip_flop": "Run the register program before '=' (w: write the bit, i: ignore, "
    "f: flip the register, r: read) and write the bit that the final read returns.",
    "value_assignment": "Translate the string after the table symbol by symbol, using the "
    "table's key-value pairs.",
    "successor": "Continue counting from the number between ':' and '=': write as many next "
    "numbers as the number before ':' says, separated by spaces.",
    # T1-T7: vectors of active features (0-9a-z) separated by '|', then '?' and the query.
    # T3-T7 map each query to input features by a fixed mapping the model has to learn.
    "one_feature_detection": "Write 1 if the feature after '?' is active in some vector "
    "before it, else 0.",
    "two_feature_detection": "Write 1 if both features after '?' are active in the vectors "
    "before it, else 0.",
    "set_member_detection": "Write 1 if either of the two input features that the query "
    "after '?' stands for is active before it, else 0.",
    "contextual_two_feature_detection": "Write 1 if both input features that the query "
    "after '?' stands for are active before it, else 0.",
    "contextual_set_member_detection": "Write 1 if both features of either feature pair "
    "that the query after '?' stands for are active before it, else 0.",
    "ordered_feature_detection": "Write 1 if the first input feature that the query after "
    "'?' stands for is active in an earlier vector than its second, else 0.",
    "contextual_ordered_set_member_detection": "Write 1 if, for either ordered feature pair "
    "that the query after '?' stands for, the first is active in an earlier vector than the "
    "second, else 0.",
}


def instruction_for(task_name: str) -> str:
    """The instruction of a registered task: its entry here; for a task of another package,
    the `instruction` it registered (`register_task(..., instruction=...)`); else the first
    line of its module docstring."""
    if task_name in INSTRUCTIONS:
        return INSTRUCTIONS[task_name]
    task = get_task(task_name)
    return task.instruction or task.description
