"""The standard one-line instruction of each task, addressed to the model.

    from attentionspan_datasets.instructions import instruction_for
    instruction_for("long_addition")

lm-eval's `attnspan_*` tasks put it before the examples by default, and the harness uses it
with `--instruction default`, so a model trained with it is scored with the same line. Each
task declares its own in its file (`register_task(..., instruction=...)`); this module only
reads the registry.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from attentionspan_datasets.tasks import TASKS, get_task


class _Declared(Mapping):
    """task name -> the instruction it declared, read from the registry at each use (a task
    registered later, a plugin's, is in it): the tasks that declared none are not."""

    def __getitem__(self, task_name: str) -> str:
        task = TASKS.get(task_name)
        if task is None or task.instruction is None:
            raise KeyError(task_name)
        return task.instruction

    def __iter__(self) -> Iterator[str]:
        return (name for name, task in TASKS.items() if task.instruction is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)


INSTRUCTIONS: Mapping[str, str] = _Declared()


def instruction_for(task_name: str) -> str:
    """The instruction of a registered task: the `instruction` it registered
    (`register_task(..., instruction=...)`), else the first line of its module docstring."""
    task = get_task(task_name)
    return task.instruction or task.description
