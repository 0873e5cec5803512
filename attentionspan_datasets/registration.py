"""Make the bare name work: `datasets.load_dataset("attentionspan", "addition_ood")`.

    import attentionspan_datasets            # registers (or arms the start-up hook)
    from datasets import load_dataset
    load_dataset("attentionspan", "addition_ood")

datasets 5 has no plugin mechanism and no loading scripts: a bare name is resolved by
`datasets.load.dataset_module_factory` (packaged builders, then a local folder, then the
Hub). `register()` wraps that function so that exactly the name "attentionspan" returns a
`DatasetModule` pointing at `attentionspan_datasets.builder`, hashed by the generator
sources; every other path goes to the original. `datasets.inspect` holds its own reference
to the function (`get_dataset_config_names`, ...) and gets the same wrap. These are datasets
internals, which is why setup.cfg pins `datasets>=5.2,<6`; `attentionspan_datasets.load()`
is the path that touches none of them.

You rarely call `register()` yourself: `import attentionspan_datasets` calls it when datasets
is already imported, and otherwise the post-import hook of `attentionspan_datasets.startup`
calls it right after datasets is first imported (also without any import of ours, through
the `.pth` file the wheel installs).
"""

from __future__ import annotations

import functools
import sys
from typing import Any

DATASET_NAME = "attentionspan"
BUILDER_MODULE = "attentionspan_datasets.builder"
_MARK = "_attentionspan_wrapped"


def dataset_module() -> Any:
    """The `DatasetModule` that `load_dataset("attentionspan", ...)` resolves to."""
    from datasets.load import DatasetModule

    from attentionspan_datasets.builder import source_hash

    return DatasetModule(BUILDER_MODULE, source_hash(), {"dataset_name": DATASET_NAME})


class DatasetScriptError(ValueError, RuntimeError):
    """A dataset folder or repository holds a loading script, which datasets 5 does not run.
    A ValueError (one line from the CLIs) and still the RuntimeError datasets raised."""


def _wrap(original: Any) -> Any:
    @functools.wraps(original)
    def dataset_module_factory(path: str, *args: Any, **kwargs: Any) -> Any:
        if path != DATASET_NAME:
            try:
                return original(path, *args, **kwargs)
            except RuntimeError as error:
                if "Dataset scripts are no longer supported" not in str(error):
                    raise
                script = str(error).rsplit(" ", 1)[-1]
                raise DatasetScriptError(
                    f"{path}: holds a loading script ({script}), which datasets 5 no longer "
                    f"runs; keep only data files there (parquet, json, csv), e.g. written by "
                    f"`attentionspan export`, or load the generator with "
                    f'load_dataset("{DATASET_NAME}", CONFIG)'
                ) from None
        for option in ("data_dir", "data_files"):
            if kwargs.get(option) is not None:
                raise ValueError(
                    f"{DATASET_NAME} generates its data: '{option}' is not accepted; "
                    f"pass task parameters and num_train / num_validation / num_test instead"
                )
        if kwargs.get("revision") is not None:  # datasets ignored it: silently another version
            raise ValueError(
                f"{DATASET_NAME} generates its data with the installed package: 'revision' "
                f"{kwargs['revision']!r} is not accepted; install the attentionspan version "
                "you want instead"
            )
        return dataset_module()

    setattr(dataset_module_factory, _MARK, True)
    return dataset_module_factory


def _modules() -> list[Any]:
    import datasets.load  # noqa: F401  (the module that defines the factory)

    return [
        sys.modules[name] for name in ("datasets.load", "datasets.inspect") if name in sys.modules
    ]


def is_registered() -> bool:
    load_module = sys.modules.get("datasets.load")
    return bool(load_module and getattr(load_module.dataset_module_factory, _MARK, False))


def register() -> None:
    """Route the bare name "attentionspan" to the builder; idempotent. Imports datasets."""
    for module in _modules():
        if not getattr(module.dataset_module_factory, _MARK, False):
            module.dataset_module_factory = _wrap(module.dataset_module_factory)


def unregister() -> None:
    """Restore datasets' own resolution (for tests and for debugging datasets itself)."""
    for module in _modules():
        factory = module.dataset_module_factory
        while getattr(factory, _MARK, False):
            factory = factory.__wrapped__
        module.dataset_module_factory = factory
