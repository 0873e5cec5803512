"""The preset catalogue: every named config, its task, its parameters and its role.

    from attentionspan_datasets import presets
    presets.get("addition_ood")             # Preset(name='addition_ood', task='long_addition', ...)
    presets.get("addition_ood").role        # 'ood'
    presets.get("addition_ood").twin.name   # 'addition_id'
    presets.pair("reversal")                # (reversal_id, reversal_ood) as Presets
    presets.SHORT_NAMES["ffml"]             # 'flip_flop'

A preset is (task, parameters) under a name. `<task>_id` and `<task>_ood` are the paper's
Appendix F pairs (role "id" / "ood"); the retrieval tasks' `t<k>_len<n>` have no role. The
names are built here from (short name, role) and never taken apart again: code that needs a
preset's task, role or twin asks the catalogue. The bare task names (`addition`,
`long_addition`) are not presets: they take the task's defaults (generation.resolve_config).

Every task declares its presets in its own file, after its `register_task`, with
`register_pair` (and `register_preset` for presets without a role): the built-in tasks
(attentionspan_datasets/tasks/<task>.py) as a task of another package does
(docs/own_task.md). This module holds no task's presets, only the catalogue they fill:

    register_pair("rotation", "string_rotation", {"max_length": 8}, {"min_length": 9, ...})
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, get_args

from attentionspan_datasets.registry import LazyRegistry

Role = Literal["id", "ood"]
ROLES: tuple[str, ...] = get_args(Role)

# short name -> registry name: each task file declares its own with `register_pair` (the
# user writes `addition`, `reversal`, `ffml`; the registry names say what the task does);
# plugins (attentionspan_datasets.plugins) add theirs at its first read, as they do to PRESETS
# and PAIRS
SHORT_NAMES: dict[str, str] = LazyRegistry()
# The discrete-retrieval tasks under the paper's names (Sorodoc, Boleda and Baroni 2021,
# T1-T7), short name -> registry name: filled by their files (tasks._feature_vectors
# .register_retrieval_presets), read by the lm-eval group of these tasks.
RETRIEVAL_TASKS: dict[str, str] = {}
NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")  # of new names (plugins)
RETRIEVAL_LENGTHS = (5, 10, 15, 20, 25, 30)  # vectors in the retrieval tasks' `t<k>_len<n>`


@dataclass(frozen=True)
class Preset:
    """One named config: `task` (a registry name) with `params` on top of its defaults."""

    name: str
    short: str  # the task's short name, the stem of `name` (`addition` for `addition_ood`)
    task: str
    params: MappingProxyType = field(hash=False)  # read-only: one catalogue for everyone
    role: Role | None = None  # "id" / "ood" for a pair's presets; None for `t<k>_len<n>`

    @property
    def twin(self) -> Preset:
        """The other preset of this one's ID/OOD pair (`addition_id` <-> `addition_ood`)."""
        if self.role is None:
            raise ValueError(f"preset {self.name!r} has no ID/OOD twin (it is neither ID nor OOD)")
        id_preset, ood_preset = PAIRS[self.short]
        return ood_preset if self.role == "id" else id_preset

    def __reduce__(self) -> tuple:
        # By name (a mappingproxy cannot be pickled): a copy or an unpickled preset is the
        # catalogue's own.
        return get, (self.name,)


PRESETS: dict[str, Preset] = LazyRegistry()
PAIRS: dict[str, tuple[Preset, Preset]] = LazyRegistry()  # short -> (ID preset, OOD preset)


def _add(short: str, suffix: str, params: dict[str, Any], role: Role | None = None) -> None:
    name = f"{short}_{suffix}"
    PRESETS[name] = Preset(name, short, SHORT_NAMES[short], MappingProxyType(params), role)


def _add_pair(short: str, id_params: dict[str, Any], ood_params: dict[str, Any]) -> None:
    _add(short, "id", id_params, "id")
    _add(short, "ood", ood_params, "ood")
    PAIRS[short] = (PRESETS[f"{short}_id"], PRESETS[f"{short}_ood"])


def did_you_mean(name: Any, allowed: Iterable[str]) -> str:
    """` (did you mean 'addition_ood'?)` for a misspelt `name`: the closest of `allowed`
    (difflib's ratio, case ignored; ties within 0.05 of the best shown together, at most
    three), or "" when none is close. The unknown-name errors put it before their list of
    100 allowed names, where it is read."""
    if not isinstance(name, str) or not name:
        return ""
    by_folded = {}
    for candidate in allowed:
        by_folded.setdefault(candidate.lower(), candidate)
    folded = name.lower()
    close = difflib.get_close_matches(folded, list(by_folded), n=3, cutoff=0.6)
    if not close:
        return ""
    best = difflib.SequenceMatcher(None, folded, close[0]).ratio()
    close = [c for c in close if difflib.SequenceMatcher(None, folded, c).ratio() >= best - 0.05]
    shown = [repr(by_folded[c]) for c in close]
    listed = shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"
    return f" (did you mean {listed}?)"


def get(name: str) -> Preset:
    """The preset called `name`; ValueError listing the presets for any other name."""
    if name not in PRESETS:
        raise ValueError(
            f"unknown preset {name!r}{did_you_mean(name, PRESETS)}; allowed: {', '.join(PRESETS)}"
        )
    return PRESETS[name]


def pair(name: str) -> tuple[Preset, Preset]:
    """(ID preset, OOD preset) of a task, named by its short name (`reversal`), its registry
    name (`string_reversal`) or either preset of the pair (`reversal_id`, `reversal_ood`)."""
    preset = PRESETS.get(name)
    if preset is not None and preset.role is not None:
        return PAIRS[preset.short]
    short = name if name in PAIRS else _SHORT_OF_TASK.get(name)
    if short not in PAIRS:
        # A preset without a role (`t6_len10`) is spelt right: no suggestion for it.
        accepted = [*PAIRS, *_SHORT_OF_TASK, *(n for n, p in PRESETS.items() if p.role)]
        hint = "" if name in PRESETS else did_you_mean(name, accepted)
        raise ValueError(
            f"config {name!r} has no ID/OOD presets{hint}; allowed: {', '.join(sorted(PAIRS))}"
        )
    return PAIRS[short]


_SHORT_OF_TASK: dict[str, str] = {}  # registry name -> its first short name


def register_pair(
    short: str, task: str, id_params: dict[str, Any], ood_params: dict[str, Any]
) -> tuple[Preset, Preset]:
    """Declare the ID/OOD presets of a registered task: `<short>_id` and `<short>_ood`, each
    the task's defaults with these parameters on top. `short` becomes a name of the task
    (`attentionspan generate <short>`, `reproduce --tasks <short>`), unless `register_short`
    made it one already. Refused (ValueError): a name already taken, an unknown task,
    parameters the task's config refuses."""
    named_before = dict.get(SHORT_NAMES, short) == task and not dict.__contains__(PAIRS, short)
    if not named_before:  # `register_short` made it the task's name for this pair
        check_new_name("short name", short, task)
    for suffix, params in (("id", id_params), ("ood", ood_params)):
        _check_preset(f"{short}_{suffix}", task, params)
    _set_short(short, task)
    _add_pair(short, dict(id_params), dict(ood_params))
    return PAIRS[short]


def register_short(short: str, task: str) -> None:
    """Make `short` a name of a registered task before any of its presets: the presets that
    `register_preset` declares next carry it (the retrieval tasks' `t6_len10` come before
    their pair `t6_id`, `t6_ood` in the catalogue). `register_pair` does it otherwise."""
    from attentionspan_datasets.tasks.base import TASKS

    check_new_name("short name", short, task)
    if not isinstance(task, str) or not dict.__contains__(TASKS, task):
        raise ValueError(f"short name {short!r}: task {task!r} is not registered")
    _set_short(short, task)


def _set_short(short: str, task: str) -> None:
    SHORT_NAMES[short] = task
    _SHORT_OF_TASK.setdefault(task, short)


def register_preset(name: str, task: str, params: dict[str, Any]) -> Preset:
    """Declare a preset without an ID/OOD role (as `t6_len10`): `task` with `params`."""
    _check_preset(name, task, params)
    short = _SHORT_OF_TASK.get(task, task)
    PRESETS[name] = Preset(name, short, task, MappingProxyType(dict(params)), None)
    return PRESETS[name]


def check_new_name(kind: str, name: Any, task: str | None = None) -> None:
    """ValueError unless `name` is free to be a new task, short or preset name: a-z, 0-9
    and '_' (it names files, lm-eval tasks and dataset configs), and no task, short name or
    preset uses it already (`task` may share its own name with its short name)."""
    from attentionspan_datasets.tasks.base import TASKS

    if not isinstance(name, str) or not name or not set(name) <= NAME_CHARS:
        raise ValueError(f"{kind} {name!r} must be a non-empty string of a-z, 0-9 and '_'")
    # dict's own methods: a registration reads no registry through the plugin loader
    if dict.__contains__(TASKS, name) and name != task:
        raise ValueError(f"{kind} {name!r} is taken: a task is called so")
    if dict.__contains__(SHORT_NAMES, name):
        raise ValueError(
            f"{kind} {name!r} is taken: the short name of task "
            f"{dict.__getitem__(SHORT_NAMES, name)!r}"
        )
    if dict.__contains__(PRESETS, name):
        raise ValueError(f"{kind} {name!r} is taken: a preset is called so")


def _check_preset(name: str, task: str, params: Any) -> None:
    from attentionspan_datasets.tasks.base import TASKS

    check_new_name("preset name", name)
    if not isinstance(task, str) or not dict.__contains__(TASKS, task):
        raise ValueError(f"preset {name!r}: task {task!r} is not registered (register it first)")
    if not isinstance(params, dict):
        raise ValueError(f"preset {name!r}: parameters must be a dict, got {type(params).__name__}")
    try:
        dict.__getitem__(TASKS, task).config_class.from_params(params)
    except (TypeError, ValueError) as error:
        raise ValueError(f"preset {name!r}: {error}") from None
