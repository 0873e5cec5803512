"""The task registry. Importing this package registers every task module."""

# Importing a task module registers it; the order of this list is the registry's order.
from attentionspan_datasets.tasks import (  # noqa: F401
    flip_flop,
    long_addition,
    long_multiplication,
    string_reversal,
    successor,
    value_assignment,
)
from attentionspan_datasets.tasks.base import (  # noqa: F401
    MASK_VARIANTS,
    TASKS,
    Instance,
    Task,
    TaskConfig,
    get_task,
    register_task,
    visible_text,
)
