"""The registries' dict: it runs a loader before its first read (the plugin tasks).

    from attentionspan_datasets.registry import LazyRegistry
    TASKS = LazyRegistry()      # tasks.base; presets.PRESETS, PAIRS and SHORT_NAMES too

attentionspan_datasets.plugins installs its loader here when the package is imported (the
last line of `attentionspan_datasets/__init__.py`); until then, and while the built-ins
register, a read is a plain dict's. This module imports nothing of the package, so that the
registries and the loader, which needs them, import in one direction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_loader: Callable[[], None] | None = None
_REGISTRIES: list[LazyRegistry] = []


def install_loader(loader: Callable[[], None]) -> None:
    """Run `loader` before the first read of any LazyRegistry (it calls `settle()`)."""
    global _loader
    _loader = loader


def settle() -> None:
    """Every registry becomes `_LoadedRegistry`: the loader is done, reads cost nothing."""
    for registry in _REGISTRIES:
        if type(registry) is LazyRegistry:
            registry.__class__ = _LoadedRegistry


def _ensure() -> None:
    if _loader is not None:
        _loader()


class LazyRegistry(dict):
    """A dict that runs the loader before its first read. Once it has run, its class
    becomes `_LoadedRegistry`, a dict subclass that overrides nothing, so that every later
    read (one per generated instance in places) costs what a plain dict's does. (The methods
    name `dict` rather than `super()`: the swap happens inside the first of them.)"""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        dict.__init__(self, *args, **kwargs)
        _REGISTRIES.append(self)

    def __getitem__(self, key: Any) -> Any:
        _ensure()
        return dict.__getitem__(self, key)

    def __contains__(self, key: Any) -> bool:
        _ensure()
        return dict.__contains__(self, key)

    def __iter__(self):  # noqa: ANN204
        _ensure()
        return dict.__iter__(self)

    def __len__(self) -> int:
        _ensure()
        return dict.__len__(self)

    def __repr__(self) -> str:
        _ensure()
        return dict.__repr__(self)

    def __eq__(self, other: object) -> bool:
        _ensure()
        return dict.__eq__(self, other)

    __hash__ = None  # a dict is unhashable; defining __eq__ must not change that

    def get(self, key: Any, default: Any = None) -> Any:
        _ensure()
        return dict.get(self, key, default)

    def keys(self):  # noqa: ANN201
        _ensure()
        return dict.keys(self)

    def values(self):  # noqa: ANN201
        _ensure()
        return dict.values(self)

    def items(self):  # noqa: ANN201
        _ensure()
        return dict.items(self)

    def copy(self) -> dict:
        _ensure()
        return dict(dict.items(self))


class _LoadedRegistry(dict):
    """What a LazyRegistry becomes once the loader has run: a plain dict's speed."""
