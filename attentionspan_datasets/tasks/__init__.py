"""The task registry. Importing this package registers every built-in task module; tasks of
other packages (the `attentionspan.tasks` entry points, attentionspan_datasets.plugins) are
loaded at the registry's first read.

A built-in task is registered as a task of another package is: its one file declares the
config, generator, mask rule and oracle, then `register_task` (with its instruction and the
harness's recipes) and its presets (`register_pair`); adding a task is that file and its
line below (docs/own_task.md).
"""

# Importing a task module registers it and its presets: the order of this list is the
# registry's order and the preset catalogue's (the paper's six tasks, then T1-T7).
from attentionspan_datasets.tasks import (  # noqa: F401, I001
    string_reversal,
    long_addition,
    long_multiplication,
    flip_flop,
    value_assignment,
    successor,
    one_feature_detection,
    two_feature_detection,
    set_member_detection,
    contextual_two_feature_detection,
    contextual_set_member_detection,
    ordered_feature_detection,
    contextual_ordered_set_member_detection,
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
