"""AttentionSpan: algorithmic tasks with reference attention masks.

    import attentionspan_datasets as asd
    asd.generate("addition_ood", seed=0, index=3)
    asd.split_instance("addition_ood", seed=0, split="test", index=3)   # row 3 of the test split
    asd.load("addition_ood", num_train=1000)    # a datasets.DatasetDict (imports datasets)
    DataLoader(train, batch_size=32, collate_fn=asd.collate_references)  # ragged references

Importing the package also makes `datasets.load_dataset("attentionspan", ...)` work: see
attentionspan_datasets.startup (it never imports datasets itself).
"""

from typing import Any

from attentionspan_datasets.collate import collate_references  # noqa: F401
from attentionspan_datasets.generation import (  # noqa: F401
    DEFAULT_SEED,
    config_names,
    generate,
    iter_instances,
    resolve_config,
)
from attentionspan_datasets.presets import PRESETS  # noqa: F401
from attentionspan_datasets.splits import SPLITS, iter_split, split_instance, split_of  # noqa: F401
from attentionspan_datasets.tasks import TASKS, Instance, TaskConfig  # noqa: F401

__version__ = "0.1.0"


def load(config: str, **kwargs: Any) -> Any:
    """`datasets.load_dataset("attentionspan", config, **kwargs)` through public builder
    methods only: `split`, `streaming`, `cache_dir`, `num_proc`, `download_mode`, and the
    config keywords (task fields, `mask`, `seed`, `num_train`, ...). See builder.load."""
    from attentionspan_datasets.builder import load as load_builder

    return load_builder(config, **kwargs)


from attentionspan_datasets import startup as _startup  # noqa: E402

_startup.arm()

# Last: from here on the first read of a registry loads the plugin tasks (after the built-ins).
from attentionspan_datasets import plugins as _plugins  # noqa: E402, F401
