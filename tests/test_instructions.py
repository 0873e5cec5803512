"""One standard instruction per task, shared by lm-eval and the harness."""

from __future__ import annotations

import pytest

from attentionspan_datasets.instructions import INSTRUCTIONS, instruction_for
from attentionspan_datasets.tasks import TASKS


@pytest.mark.parametrize("task", sorted(TASKS))
def test_every_task_has_a_one_line_instruction(task):
    text = instruction_for(task)
    assert text and "\n" not in text
    assert task in INSTRUCTIONS, f"{task} falls back to its docstring; write it an instruction"


def test_instructions_name_only_registered_tasks():
    assert set(INSTRUCTIONS) <= set(TASKS)


def test_unknown_task_is_a_value_error():
    with pytest.raises(ValueError, match="unknown task 'nope'"):
        instruction_for("nope")
