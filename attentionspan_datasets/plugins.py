"""Tasks from other packages: the `attentionspan.tasks` entry-point group.

    # the plugin's pyproject.toml: a name and the module that registers its task(s)
    [project.entry-points."attentionspan.tasks"]
    rotation = "attentionspan_example_task.rotation"

    from attentionspan_datasets import plugins
    plugins.loaded()      # [Plugin(package='attentionspan-example-task', tasks=('rotation',), ...)]
    plugins.failures()    # one line per plugin that could not be loaded

The module registers its task with the API a built-in task file uses (`register_task` of
`attentionspan_datasets.tasks`) and its presets with `attentionspan_datasets.presets.
register_pair` (docs/own_task.md). Nothing is imported at interpreter start or at
`import attentionspan_datasets`: the registries (`TASKS`, `PRESETS`, `PAIRS`, `SHORT_NAMES`)
are `LazyRegistry` dicts that load the plugins before their first read, after the built-in
tasks and presets are in, so a plugin can never take a built-in's name.

A plugin that fails (its module does not import, a name is taken, a config is no dataclass,
a preset is invalid) is rolled back: whatever it had registered is removed, a
`PluginWarning` says so in one line naming its package, and `failures()` keeps the line for
`attentionspan show` and `attentionspan check-task`. The built-in tasks and the other
plugins keep working.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from typing import Any

GROUP = "attentionspan.tasks"
# The modules that register the built-ins: a read of a registry while one of them is still
# being imported (register_task checks for duplicates) must not load plugins yet.
BUILTIN_MODULES = (
    "attentionspan_datasets",
    "attentionspan_datasets.presets",
    "attentionspan_datasets.tasks",
)
READY = "_BUILTINS_READY"  # set at the end of each of BUILTIN_MODULES


class PluginWarning(UserWarning):
    """A plugin package could not be loaded (the line names the package and why)."""


@dataclass(frozen=True)
class Plugin:
    """One loaded entry point: its package, what it is called and what it registered."""

    package: str
    entry_point: str  # `name = value` as its package declares it
    module: str  # the module the entry point names
    tasks: tuple[str, ...]
    presets: tuple[str, ...]


_PENDING, _LOADING, _DONE = "pending", "loading", "done"
_state = _PENDING
_LOCK = threading.RLock()
_REGISTRIES: list[LazyRegistry] = []
_LOADED: list[Plugin] = []
_FAILURES: list[str] = []


class LazyRegistry(dict):
    """A dict that loads the plugins before its first read. Once they are loaded its class
    becomes `_LoadedRegistry`, a dict subclass that overrides nothing, so that every later
    read (one per generated instance in places) costs what a plain dict's does. (The methods
    name `dict` rather than `super()`: the swap happens inside the first of them.)"""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        dict.__init__(self, *args, **kwargs)
        _REGISTRIES.append(self)

    def __getitem__(self, key: Any) -> Any:
        ensure_loaded()
        return dict.__getitem__(self, key)

    def __contains__(self, key: Any) -> bool:
        ensure_loaded()
        return dict.__contains__(self, key)

    def __iter__(self):  # noqa: ANN204
        ensure_loaded()
        return dict.__iter__(self)

    def __len__(self) -> int:
        ensure_loaded()
        return dict.__len__(self)

    def __repr__(self) -> str:
        ensure_loaded()
        return dict.__repr__(self)

    def __eq__(self, other: object) -> bool:
        ensure_loaded()
        return dict.__eq__(self, other)

    __hash__ = None  # a dict is unhashable; defining __eq__ must not change that

    def get(self, key: Any, default: Any = None) -> Any:
        ensure_loaded()
        return dict.get(self, key, default)

    def keys(self):  # noqa: ANN201
        ensure_loaded()
        return dict.keys(self)

    def values(self):  # noqa: ANN201
        ensure_loaded()
        return dict.values(self)

    def items(self):  # noqa: ANN201
        ensure_loaded()
        return dict.items(self)

    def copy(self) -> dict:
        ensure_loaded()
        return dict(dict.items(self))


class _LoadedRegistry(dict):
    """What a LazyRegistry becomes once the plugins are loaded: a plain dict's speed."""


def ensure_loaded() -> None:
    """Load the plugins once: after the built-ins, before the first read of a registry.
    Another thread's first read waits for them; the loading thread's own reads (the
    plugins' registrations) see the registries as they are."""
    global _state
    if _state is _DONE:
        return
    with _LOCK:
        if _state is not _PENDING:
            return
        modules = [sys.modules.get(name) for name in BUILTIN_MODULES]
        if any(module is not None and not getattr(module, READY, False) for module in modules):
            return  # a built-in module reads while it registers: later
        _state = _LOADING
        try:
            import attentionspan_datasets  # noqa: F401  (the built-ins first)

            try:
                found = discover()
            except Exception as error:  # unreadable package metadata: no plugins, one line
                report(f"attentionspan: the {GROUP!r} entry points could not be read: {error!r}")
                found = []
            load_plugins(found)
        finally:
            _state = _DONE
            for registry in _REGISTRIES:
                if type(registry) is LazyRegistry:
                    registry.__class__ = _LoadedRegistry


def discover() -> list[Any]:
    """The installed entry points of GROUP, sorted by package and name (an order that does
    not depend on the order of sys.path's folders)."""
    from importlib.metadata import entry_points

    found = {(package_of(ep), ep.name, ep.value): ep for ep in entry_points(group=GROUP)}
    return [found[key] for key in sorted(found)]


def package_of(entry_point: Any) -> str:
    dist = getattr(entry_point, "dist", None)
    name = getattr(dist, "name", None) or getattr(dist, "metadata", {}).get("Name")
    return name or f"(the package of entry point {entry_point.name!r})"


def load_plugins(entry_points: list[Any]) -> list[Plugin]:
    """Load each entry point (import its module; call its object when it names one, as in
    `name = "package.module:register"`); a failure is rolled back and reported."""
    loaded = []
    for entry_point in entry_points:
        plugin = _load_one(entry_point)
        if plugin is not None:
            loaded.append(plugin)
    return loaded


def _registries() -> dict[str, dict]:
    from attentionspan_datasets import presets
    from attentionspan_datasets.tasks import base

    return {
        "tasks": base.TASKS,
        "presets": presets.PRESETS,
        "pairs": presets.PAIRS,
        "short names": presets.SHORT_NAMES,
        "short of task": presets._SHORT_OF_TASK,
    }


def _load_one(entry_point: Any) -> Plugin | None:
    package = package_of(entry_point)
    declared = f"{entry_point.name} = {entry_point.value}"
    registries = _registries()
    before = {name: set(dict.keys(registry)) for name, registry in registries.items()}
    try:
        loaded = entry_point.load()
        if getattr(entry_point, "attr", None):  # `module:function`: the function registers
            loaded()
        added = {
            name: [key for key in dict.keys(registry) if key not in before[name]]
            for name, registry in registries.items()
        }
        if not added["tasks"] and not added["presets"]:
            raise ValueError(f"{entry_point.value} registered no task and no preset")
    except Exception as error:  # any failure of foreign code: reported, never raised
        for name, registry in registries.items():
            for key in [key for key in dict.keys(registry) if key not in before[name]]:
                dict.__delitem__(registry, key)
        reason = " ".join(f"{type(error).__name__}: {error}".split())
        report(
            f"attentionspan: plugin package {package!r} (entry point {declared!r} of group "
            f"{GROUP!r}) not loaded: {reason}",
            package,
        )
        return None
    plugin = Plugin(
        package, declared, entry_point.module, tuple(added["tasks"]), tuple(added["presets"])
    )
    _LOADED.append(plugin)
    return plugin


def report(line: str, package: str = "") -> None:
    """Keep `line` for failures() and warn with it (once per process). The warning is
    attributed to the package, not to a line of ours: one line on stderr, no source line
    under it."""
    if line in _FAILURES:
        return
    _FAILURES.append(line)
    import warnings

    where = f"<plugin {package}>" if package else "<plugin>"
    warnings.warn_explicit(line, PluginWarning, where, 0, module=__name__)


def loaded() -> list[Plugin]:
    """The plugins loaded in this process (loading them if not yet)."""
    ensure_loaded()
    return list(_LOADED)


def failures() -> list[str]:
    """One line per plugin that could not be loaded (loading them if not yet)."""
    ensure_loaded()
    return list(_FAILURES)


def plugin_of(task_or_preset: str) -> Plugin | None:
    """The plugin that registered a task or preset, or None for a built-in."""
    for plugin in loaded():
        if task_or_preset in plugin.tasks or task_or_preset in plugin.presets:
            return plugin
    return None
