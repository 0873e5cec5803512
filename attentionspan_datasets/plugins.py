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
are `registry.LazyRegistry` dicts, and this module's `ensure_loaded` loads the plugins
before their first read, after the built-in tasks and presets are in, so a plugin can never
take a built-in's name.

A plugin that fails (its module does not import, a name is taken, a config is no dataclass,
a preset is invalid, or it raises anything at all while loading: SystemExit and
KeyboardInterrupt included, which would otherwise end every command, built-ins' too) is
rolled back: whatever it had registered is removed, a `PluginWarning` says so in one line
naming its package, and `failures()` keeps the line for `attentionspan show` and
`attentionspan check-task`. A package whose entry_points.txt cannot be read is one such line
naming the file; the other packages load. The built-in tasks and the other plugins keep
working.

A loaded plugin's `generate` is wrapped once, here (`_guarded`): whatever it raises, or a
return value that is not an Instance, becomes a `GenerateError` (a `guard.PluginError`, not
a ValueError: never read as the user's mistake) naming the package, the config and, where
the caller knows it (`at(index)`, added by generation.py and splits.py), the index. Every
command prints it as one line, status 1.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
import threading
from dataclasses import dataclass
from typing import Any

from attentionspan_datasets import presets, registry
from attentionspan_datasets.guard import PluginError
from attentionspan_datasets.tasks import base

GROUP = "attentionspan.tasks"


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
_LOADED: list[Plugin] = []
_FAILURES: list[str] = []


def ensure_loaded() -> None:
    """Load the plugins once, before the first read of a registry (the package's built-ins
    are in by then: this module is installed as the loader at the end of the package's
    import). Another thread's first read waits for them; the loading thread's own reads
    (the plugins' registrations) see the registries as they are."""
    global _state
    if _state is _DONE:
        return
    with _LOCK:
        if _state is not _PENDING:
            return
        _state = _LOADING
        try:
            try:
                found = discover()
            except Exception as error:  # what discover cannot pin on one package
                report(f"attentionspan: the {GROUP!r} entry points could not be read: {error!r}")
                found = []
            load_plugins(found)
        finally:
            _state = _DONE
            registry.settle()


def discover() -> list[Any]:
    """The installed entry points of GROUP, sorted by package and name (an order that does
    not depend on the order of sys.path's folders)."""
    if not may_declare(GROUP):
        return []
    from importlib.metadata import distributions

    found, seen = {}, set()
    for dist in distributions():
        # importlib.metadata's own rule: the first distribution of a name on the path wins
        name = getattr(dist, "_normalized_name", None) or id(dist)
        if name in seen:
            continue
        seen.add(name)
        for entry_point in _entry_points_of(dist):
            found[(package_of(entry_point), entry_point.name, entry_point.value)] = entry_point
    return [found[key] for key in sorted(found)]


def _entry_points_of(dist: Any) -> list[Any]:
    """The entry points of GROUP that one distribution declares. A file that cannot be read
    or parsed is that package's failure alone, reported in one line naming the file
    (`importlib.metadata.entry_points()` would raise for all of them, hiding every plugin)."""
    folder = getattr(dist, "_path", None)
    file = os.path.join(str(folder), "entry_points.txt") if folder is not None else None
    try:
        text = dist.read_text("entry_points.txt")
        if text is None and file is not None and os.path.isfile(file):
            with open(file, encoding="utf-8") as handle:  # importlib.metadata hid why
                text = handle.read()
        if text is None or f"[{GROUP}]" not in text:
            return []
        return list(dist.entry_points.select(group=GROUP))
    except Exception as error:
        package = _dist_name(dist)
        where = f"its entry points file {file}" if file else "its entry points"
        report(
            f"attentionspan: plugin package {package!r} not loaded: {where} could not be "
            f"read: {_reason(error)}",
            package,
        )
        return []


def _dist_name(dist: Any) -> str:
    try:
        name = dist.metadata["Name"]
    except Exception:  # a METADATA as broken as the entry points: the folder's name
        name = None
    folder = getattr(dist, "_path", None)
    return name or (os.path.basename(str(folder)) if folder is not None else "(unknown)")


def _reason(error: BaseException) -> str:
    """`Type: message` on one line, cut short."""
    text = " ".join(f"{type(error).__name__}: {error}".split()).rstrip(":")
    return text if len(text) <= 300 else text[:300] + "..."


def may_declare(group: str) -> bool:
    """False when no installed distribution declares entry points of `group`, found by
    reading the entry_points.txt of every *.dist-info and *.egg-info folder on sys.path:
    about 1.5 ms for this project's environment, where importing importlib.metadata costs
    18 ms and its search 9 ms more, on every command's first read of a registry. Whatever
    this scan cannot read (a zip or an egg on the path, a finder of distributions other
    than the path finder) answers True, and importlib.metadata decides."""
    import importlib.machinery
    import os

    for finder in sys.meta_path:
        if hasattr(finder, "find_distributions") and finder is not importlib.machinery.PathFinder:
            return True
    marker = f"[{group}]"
    for entry in sys.path:
        folder = entry or "."
        if not os.path.isdir(folder) or folder.endswith(".egg"):
            if os.path.exists(folder):
                return True
            continue
        try:
            found = os.scandir(folder)
        except OSError:
            continue
        with found:
            for item in found:
                if not item.name.endswith((".dist-info", ".egg-info")):
                    continue
                try:
                    with open(os.path.join(item.path, "entry_points.txt"), "rb") as file:
                        if marker.encode() in file.read():
                            return True
                except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                    continue  # no entry points (or an egg-info file, not a folder)
                except OSError:  # there but unreadable: discover() names it
                    return True
    return False


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
    before = {name: set(dict.keys(table)) for name, table in registries.items()}
    try:
        loaded = entry_point.load()
        if getattr(entry_point, "attr", None):  # `module:function`: the function registers
            loaded()
        added = {
            name: [key for key in dict.keys(table) if key not in before[name]]
            for name, table in registries.items()
        }
        if not added["tasks"] and not added["presets"]:
            raise ValueError(f"{entry_point.value} registered no task and no preset")
        for name in added["tasks"]:
            check_task_name(name)
    # Anything foreign code raises, BaseException included: a plugin's sys.exit(3) or
    # KeyboardInterrupt at import would otherwise end every command, built-ins' too.
    except BaseException as error:
        for name, table in registries.items():
            for key in [key for key in dict.keys(table) if key not in before[name]]:
                dict.__delitem__(table, key)
        reason = _reason(error)
        report(
            f"attentionspan: plugin package {package!r} (entry point {declared!r} of group "
            f"{GROUP!r}) not loaded: {reason}",
            package,
        )
        return None
    for name in added["tasks"]:
        task = dict.__getitem__(base.TASKS, name)
        guarded = dataclasses.replace(task, generate=_guarded(task.generate, package, name))
        dict.__setitem__(base.TASKS, name, guarded)
    plugin = Plugin(
        package, declared, entry_point.module, tuple(added["tasks"]), tuple(added["presets"])
    )
    _LOADED.append(plugin)
    return plugin


class GenerateError(PluginError):
    """A plugin task's generator raised or returned no Instance. `at(index)` adds the index,
    which the generator itself is not given (generation.py and splits.py know it)."""

    def __init__(
        self, package: str, task: str, config: str, reason: str, index: int | None = None
    ) -> None:
        self.package, self.task, self.config, self.reason, self.index = (
            package,
            task,
            config,
            reason,
            index,
        )
        at = f" index {index}" if index is not None else ""
        super().__init__(
            f"plugin package {package!r}: the generator of task {task!r} failed on config "
            f"{config!r}{at}: {reason}"
        )

    def __reduce__(self):  # noqa: ANN204  (across processes: datasets' workers, spawn)
        return (GenerateError, (self.package, self.task, self.config, self.reason, self.index))

    def at(self, index: int) -> GenerateError:
        if self.index is not None:
            return self
        error = GenerateError(self.package, self.task, self.config, self.reason, index)
        error.__cause__ = self.__cause__
        return error


def _guarded(generate: Any, package: str, task: str) -> Any:
    """`generate`, its failures turned into a GenerateError. A KeyboardInterrupt passes: at
    generation time it is the user's Ctrl-C far more often than the plugin's."""

    @functools.wraps(generate)
    def guarded(rng: Any, config: Any) -> Any:
        try:
            instance = generate(rng, config)
        except KeyboardInterrupt:
            raise
        except BaseException as error:
            label = getattr(config, "label", "") or task
            raise GenerateError(package, task, label, _reason(error)) from error
        if not isinstance(instance, base.Instance):
            label = getattr(config, "label", "") or task
            got = f"returned {type(instance).__name__}, not an Instance"
            raise GenerateError(package, task, label, got)
        return instance

    guarded.plugin_package = package
    return guarded


def check_task_name(name: str) -> None:
    """A plugin's task name: a-z, 0-9 and '_', and no other task's short name nor a preset's
    name (register_task itself refuses only a task of the same name)."""
    if not set(name) <= presets.NAME_CHARS:
        raise ValueError(f"task name {name!r} must be a non-empty string of a-z, 0-9 and '_'")
    owner = dict.get(presets.SHORT_NAMES, name)
    if owner is not None and owner != name:
        raise ValueError(f"task name {name!r} is taken: the short name of task {owner!r}")
    if dict.__contains__(presets.PRESETS, name):
        raise ValueError(f"task name {name!r} is taken: a preset is called so")


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


registry.install_loader(ensure_loaded)
