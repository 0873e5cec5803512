"""AttentionSpan: algorithmic tasks with reference attention masks.

    import attentionspan_datasets as asd
    asd.generate("addition_ood", seed=0, index=3)
"""

from attentionspan_datasets.generation import (  # noqa: F401
    DEFAULT_SEED,
    config_names,
    generate,
    iter_instances,
    resolve_config,
)
from attentionspan_datasets.presets import PRESETS  # noqa: F401
from attentionspan_datasets.tasks import TASKS, Instance, TaskConfig  # noqa: F401

__version__ = "0.1.0"
