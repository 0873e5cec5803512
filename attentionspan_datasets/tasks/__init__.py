"""The task registry. Importing this package registers every task module."""

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
from attentionspan_datasets.tasks import string_reversal  # noqa: F401,E402
from attentionspan_datasets.tasks import long_addition  # noqa: F401,E402
from attentionspan_datasets.tasks import long_multiplication  # noqa: F401,E402
from attentionspan_datasets.tasks import successor  # noqa: F401,E402
from attentionspan_datasets.tasks import flip_flop  # noqa: F401,E402
from attentionspan_datasets.tasks import value_assignment  # noqa: F401,E402
