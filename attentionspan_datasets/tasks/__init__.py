"""The task registry. Importing this package registers every built-in task module; tasks of
other packages (the `attentionspan.tasks` entry points, attentionspan_datasets.plugins) are
loaded at the registry's first read."""

# Importing a task module registers it; the order of this list is the registry's order.
from attentionspan_datasets.tasks import (  # noqa: F401
    contextual_ordered_set_member_detection,
    contextual_set_member_detection,
    contextual_two_feature_detection,
    flip_flop,
    long_addition,
    long_multiplication,
    one_feature_detection,
    ordered_feature_detection,
    set_member_detection,
    string_reversal,
    successor,
    two_feature_detection,
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
